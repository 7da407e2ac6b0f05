// Firmware replies the driver cannot trust: under cxv-sim, the model garbles the reply
// of one chosen command (pseudo-random bytes after status and syndrome, or over them
// too) and the real driver brings the function up, makes objects and tears down. For
// every command and seed the driver must end with success or a clear error — never a
// crash, a hang, a wild MMIO access or a lost page — and the function must come up
// cleanly afterwards.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "hw/opcodes.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver;
using namespace std::chrono_literals;

namespace {

// One run with the reply of `opcode` garbled. Returns the first error (or "").
std::string run_once(const char* opcode, std::uint32_t seed) {
    auto dev = test::open_device();  // the model runs while the group is open
    test::control(std::string("garble ") + opcode + " " + std::to_string(seed));
    hca::options o;
    o.init_timeout = 2s;
    o.cmd.timeout = 2s;
    auto h = hca::create(std::move(dev), o);
    if (!h) return h.error().message;
    std::string first;
    auto note = [&](const error& e) {
        if (first.empty()) first = e.message;
    };
    {
        auto p = pd::create(*h.value());
        if (!p) note(p.error());
        auto c = cq::create(*h.value(), {64, -1});
        if (!c) note(c.error());
        if (p && c) {
            std::vector<char> mem(8192);
            auto m = mr::create(p.value(), mem.data(), mem.size(), access_local_write);
            if (!m) note(m.error());
            qp::attr a;
            a.domain = p.value();
            a.send_cq = a.recv_cq = c.value();
            auto q = qp::create(a);
            if (!q) {
                note(q.error());
            } else if (auto port = h.value()->query_port(1); !port) {
                note(port.error());
            } else {
                qp::modify_attr ma;
                ma.ah.dlid = port->lid;
                ma.path_mtu = port->max_mtu;
                ma.dest_qpn = q.value()->qpn();
                for (auto s : {qp_state::init, qp_state::rtr, qp_state::rts}) {
                    if (auto st = q.value()->modify(s, ma); !st) {
                        note(st.error());
                        break;
                    }
                }
                if (auto st = q.value()->query(); !st) note(st.error());
            }
        }
    }
    const auto closed = h.value()->close();
    if (closed) {
        CHECK(h.value()->pages_given() == 0);
    } else {
        note(closed.error());
    }
    return first;
}

}  // namespace

TEST_CASE("garbled firmware replies end in success or a clear error, never worse") {
    const char* opcodes[] = {"ENABLE_HCA",   "QUERY_ISSI",  "QUERY_PAGES", "MANAGE_PAGES", "QUERY_HCA_CAP",
                             "SET_HCA_CAP",  "INIT_HCA",    "ALLOC_UAR",   "CREATE_EQ",    "ACCESS_REG",
                             "ALLOC_PD",     "CREATE_CQ",   "CREATE_MKEY", "CREATE_QP",    "RST2INIT_QP",
                             "INIT2RTR_QP",  "QUERY_QP",    "QUERY_HCA_VPORT_CONTEXT",     "TEARDOWN_HCA"};
    const std::uint32_t seeds[] = {2, 0x1234, 0xdeadbeef, 3, 0x55555555};
    unsigned failed_runs = 0, runs = 0;
    for (const char* op : opcodes) {
        for (std::uint32_t seed : seeds) {
            const std::string name = op;
            CAPTURE(name);
            CAPTURE(seed);
            const auto t0 = std::chrono::steady_clock::now();
            const std::string err = run_once(op, seed);
            ++runs;
            // A run ends within a few command timeouts, however the replies went.
            CHECK(std::chrono::steady_clock::now() - t0 < 20s);
            if (!err.empty()) {
                ++failed_runs;
                // Clear: it says which function, and what went wrong.
                CHECK_MESSAGE(err.find("0000:c5:00.0") != std::string::npos, err);
            }
        }
    }
    MESSAGE(failed_runs << " of " << runs << " runs ended in an error");
    // Afterwards the function comes up and down cleanly.
    auto h = test::bring_up();
    CHECK(h->close().ok());
    CHECK(h->pages_given() == 0);
}
