// cxv_wire_peer: one end of the two-process wire tests. Two of them run, each under its
// own `cxv-sim run --fabric DIR`, so that everything between them crosses the model's
// wire as frames: one with --role server, one with --role client. They swap their QP
// numbers, addresses and buffer keys through small files in --oob DIR (written whole,
// then renamed), then run one scenario (--test):
//
//   traffic  every operation once: RC SEND (0 bytes to several path MTUs, with and
//            without immediate), RDMA WRITE (with and without immediate), RDMA READ,
//            CmpSwap and FetchAdd; UC SEND and WRITE with immediate; UD SEND both ways
//            (the GRH in front of the data); an RC WRITE with a wrong R_Key (a NAK);
//            the first SEND arrives before the server posted a receive (an RNR NAK: the
//            server posts its RC receives only once its out_of_buffer counter shows it,
//            and the client checks its rnr_nak_retry_err). Every byte and completion is
//            checked on both sides.
//   stream   --count RC SENDs of varied sizes carrying sequence numbers: each must
//            arrive exactly once, in order, intact (run it with link faults). With
//            --pause-at N the client stops after N sends (publishing OOB/paused) until
//            OOB/pulled appears, sends on, and publishes OOB/lost once its ACK timer has
//            fired (the sends were lost in the pulled cable).
//   gone     the server exits once connected; the client's SEND must complete with
//            IBV_WC_RETRY_EXC_ERR (its peer's cable is pulled), not hang.
//
// Exit status 0 when the scenario passed; a line on stderr says what failed.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// The client's "done" marker: the server stays on the wire until it appears, so that
// the client's last retransmissions still find a responder.
std::string g_done_marker;
void publish(const std::string& path, const std::string& text);

[[noreturn]] void fail(const char* fmt, ...) {
    if (!g_done_marker.empty()) publish(g_done_marker, "failed");
    std::va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "cxv_wire_peer: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::exit(1);
}

template <typename T>
T take(cxv::result<T> r, const char* what) {
    if (!r) fail("%s: %s", what, r.error().message.c_str());
    return std::move(r).value();
}

void check(const cxv::status& s, const char* what) {
    if (!s) fail("%s: %s", what, s.error().message.c_str());
}

struct args {
    std::string role, oob, test = "traffic", device;
    unsigned count = 200;
    unsigned gid_index = 0;
    unsigned mtu = 3;  // 1024
    unsigned timeout = 16;  // ACK timeout: 4.096 us << 16 = 268 ms (a loaded CI machine stalls processes for tens of ms)
    unsigned retry = 7;
    unsigned pause_at = 0;  // stream client: after this many sends, OOB/paused; wait for OOB/pulled; OOB/lost after a timeout
    std::string hold;       // stream server: with every message in, wait for OOB/<hold>
};

// What one side tells the other.
struct endpoint {
    std::uint32_t rc = 0, uc = 0, ud = 0, rc_bad = 0;
    std::uint16_t lid = 0;
    std::array<std::uint8_t, 16> gid{};
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
};

std::string to_text(const endpoint& e) {
    std::ostringstream o;
    o << std::hex << e.rc << ' ' << e.uc << ' ' << e.ud << ' ' << e.rc_bad << ' ' << e.lid << ' ' << e.addr << ' '
      << e.rkey;
    for (const auto b : e.gid) o << ' ' << unsigned{b};
    return o.str();
}

bool from_text(const std::string& s, endpoint& e) {
    std::istringstream i(s);
    i >> std::hex >> e.rc >> e.uc >> e.ud >> e.rc_bad >> e.lid >> e.addr >> e.rkey;
    for (auto& b : e.gid) {
        unsigned v = 0;
        i >> v;
        b = static_cast<std::uint8_t>(v);
    }
    return !i.fail();
}

void publish(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        f << text << '\n';
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot write %s", path.c_str());
}

std::string await_file(const std::string& path, std::chrono::milliseconds wait = 20s) {
    const auto end = clock_type::now() + wait;
    while (clock_type::now() < end) {
        std::ifstream f(path);
        std::string line;
        if (f && std::getline(f, line) && !line.empty()) return line;
        std::this_thread::sleep_for(2ms);
    }
    fail("no %s within %lld ms", path.c_str(), static_cast<long long>(wait.count()));
}

void fill(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = std::byte(static_cast<unsigned char>(seed * 131 + i * 7 + (i >> 8)));
}

bool same(const std::byte* p, std::size_t n, unsigned seed) {
    if (n == 0) return true;  // (memcmp's pointers must not be null, even for 0 bytes)
    std::vector<std::byte> want(n);
    fill(want.data(), n, seed);
    return std::memcmp(p, want.data(), n) == 0;
}

class side {
public:
    explicit side(const args& a) : a_(a) {
        cxv::device::options o;
        // Port changes (a pulled cable) are logged for the test to find.
        o.on_event = [](const cxv::event& e) {
            const char* what = e.what == cxv::event::port_up     ? "port_up"
                               : e.what == cxv::event::port_down ? "port_down"
                                                                 : "other";
            std::fprintf(stderr, "cxv_wire_peer: event %s: %s\n", what, e.detail.c_str());
        };
        dev_ = take(cxv::device::open(a.device, o), "open the device");
        const auto port = take(dev_->port(1), "query the port");
        ethernet_ = port.ethernet;
        me_.lid = port.lid;
        me_.gid = take(dev_->gid(a.gid_index), "query the GID");
        pd_ = take(dev_->alloc_pd(), "alloc_pd");
        mem_.assign(std::size_t{4} << 20, std::byte{0});
        mr_ = take(cxv::mr::create(pd_, mem_.data(), mem_.size(),
                                   cxv::access_local_write | cxv::access_remote_write | cxv::access_remote_read |
                                       cxv::access_remote_atomic),
                   "register memory");
        cq_ = take(cxv::cq::create(*dev_, 1024), "create the CQ");
        rc_ = make(cxv::qp_type::rc);
        uc_ = make(cxv::qp_type::uc);
        ud_ = make(cxv::qp_type::ud);
        rc_bad_ = make(cxv::qp_type::rc);
        me_.rc = rc_->qpn();
        me_.uc = uc_->qpn();
        me_.ud = ud_->qpn();
        me_.rc_bad = rc_bad_->qpn();
        me_.addr = reinterpret_cast<std::uint64_t>(mem_.data());
        me_.rkey = mr_->rkey();
    }

    // Publish this side, read the other, connect every QP to its counterpart.
    void meet() {
        const bool server = a_.role == "server";
        publish(a_.oob + "/" + a_.role, to_text(me_));
        if (!from_text(await_file(a_.oob + "/" + (server ? "client" : "server")), peer_)) fail("bad peer record");
        connect(*rc_, peer_.rc);
        connect(*uc_, peer_.uc);
        connect(*rc_bad_, peer_.rc_bad);
        cxv::qp::modify_attr m;
        m.qkey = kQkey;
        check(ud_->modify(cxv::qp_state::init, m), "UD to INIT");
        check(ud_->modify(cxv::qp_state::rtr, m), "UD to RTR");
        check(ud_->modify(cxv::qp_state::rts, m), "UD to RTS");
    }

    ibv_sge sge(std::size_t off, std::uint32_t len) { return ibv_sge{addr(off), len, mr_->lkey()}; }
    std::uint64_t addr(std::size_t off) { return reinterpret_cast<std::uint64_t>(mem_.data() + off); }
    std::byte* at(std::size_t off) { return mem_.data() + off; }

    void recv(cxv::qp& q, std::uint64_t id, std::size_t off, std::uint32_t len) {
        ibv_sge s = sge(off, len);
        ibv_recv_wr wr{};
        wr.wr_id = id;
        wr.sg_list = &s;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        if (q.post_recv(&wr, &bad) != 0) fail("post_recv %llu", static_cast<unsigned long long>(id));
    }

    void send(cxv::qp& q, ibv_send_wr& wr) {
        wr.send_flags |= IBV_SEND_SIGNALED;
        ibv_send_wr* bad = nullptr;
        if (q.post_send(&wr, &bad) != 0) fail("post_send %llu", static_cast<unsigned long long>(wr.wr_id));
    }

    ibv_send_wr ud_wr(std::uint64_t id, ibv_sge* s) {
        ibv_send_wr wr{};
        wr.wr_id = id;
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = s;
        wr.num_sge = 1;
        if (!ah_) {
            cxv::qp::path p;
            p.dlid = peer_.lid;
            p.grh = true;  // a GRH on InfiniBand too: the receiver gets it in front of the data
            p.dgid = peer_.gid;
            p.sgid_index = static_cast<std::uint8_t>(a_.gid_index);
            ah_ = std::make_unique<cxv::api::address_handle>(cxv::make_address_handle(p, ethernet_));
        }
        wr.wr.ud.ah = &ah_->base;
        wr.wr.ud.remote_qpn = peer_.ud;
        wr.wr.ud.remote_qkey = kQkey;
        return wr;
    }

    // The next completion, within `wait`.
    ibv_wc next(std::chrono::milliseconds wait = 20s) {
        const auto end = clock_type::now() + wait;
        while (clock_type::now() < end) {
            ibv_wc wc;
            if (cq_->poll(1, &wc) == 1) return wc;
            std::this_thread::yield();
        }
        fail("no completion within %lld ms", static_cast<long long>(wait.count()));
    }

    ibv_wc expect(ibv_wc_opcode op, std::uint64_t id, ibv_wc_status st = IBV_WC_SUCCESS) {
        const ibv_wc wc = next();
        if (wc.status != st || wc.wr_id != id || (st == IBV_WC_SUCCESS && wc.opcode != op)) {
            fail("completion: wr_id %llu status %d opcode %d; expected wr_id %llu status %d opcode %d",
                 static_cast<unsigned long long>(wc.wr_id), wc.status, wc.opcode, static_cast<unsigned long long>(id),
                 st, op);
        }
        return wc;
    }

    // The device's Q counter set (device_counters::q); a failure when it has none.
    cxv::q_counter_values q_counters() {
        const auto c = take(dev_->counters(), "read the counters");
        if (!c.q) fail("the device has no Q counter set");
        return *c.q;
    }

    // Waits until the Q counter `which` reaches `at_least`: the event it counts happened.
    void await_q_counter(std::uint32_t cxv::q_counter_values::*which, std::uint32_t at_least,
                         std::chrono::milliseconds wait, const char* what) {
        const auto end = clock_type::now() + wait;
        std::uint32_t v = 0;
        while ((v = q_counters().*which) < at_least) {
            if (clock_type::now() > end) fail("%s: the counter is %u after %lld ms, expected %u or more", what, v,
                                              static_cast<long long>(wait.count()), at_least);
            std::this_thread::sleep_for(1ms);
        }
    }

    // What the device counted: the test reads it from the log.
    void print_counters(const char* role) {
        const auto c = take(dev_->counters(), "read the counters");
        const auto q = c.q.value_or(cxv::q_counter_values{});
        std::fprintf(stderr,
                     "cxv_wire_peer: %s counters: local_ack_timeout_err %u packet_seq_err %u out_of_sequence %u "
                     "duplicate_request %u out_of_buffer %u rnr_nak_retry_err %u rx_errors %llu\n",
                     role, q.local_ack_timeout_err, q.packet_seq_err, q.out_of_sequence, q.duplicate_request,
                     q.out_of_buffer, q.rnr_nak_retry_err, static_cast<unsigned long long>(c.vport.received_errors.packets));
    }

    cxv::qp& rc() { return *rc_; }
    cxv::qp& uc() { return *uc_; }
    cxv::qp& ud() { return *ud_; }
    cxv::qp& rc_bad() { return *rc_bad_; }
    const endpoint& peer() const { return peer_; }

    static constexpr std::uint32_t kQkey = 0x1ee7c0de;

private:
    std::shared_ptr<cxv::qp> make(cxv::qp_type t) {
        cxv::qp::attr a;
        a.type = t;
        a.domain = pd_;
        a.send_cq = cq_;
        a.recv_cq = cq_;
        a.cap = {256, 256, 4, 4, 64};
        return take(cxv::qp::create(*dev_, a), "create a QP");
    }

    void connect(cxv::qp& q, std::uint32_t remote) {
        cxv::qp::modify_attr m;
        m.access = cxv::access_local_write | cxv::access_remote_write | cxv::access_remote_read |
                   cxv::access_remote_atomic;
        m.dest_qpn = remote;
        m.ah.dlid = peer_.lid;
        m.ah.grh = ethernet_;
        m.ah.dgid = peer_.gid;
        m.ah.sgid_index = static_cast<std::uint8_t>(a_.gid_index);
        m.path_mtu = a_.mtu;
        m.min_rnr_timer = 18;  // 5.12 ms: a few RNR NAKs while the server is late, not thousands
        m.timeout = static_cast<std::uint8_t>(a_.timeout);
        m.retry_cnt = static_cast<std::uint8_t>(a_.retry);
        m.rnr_retry = 7;
        m.max_rd_atomic = m.max_dest_rd_atomic = 4;
        check(q.modify(cxv::qp_state::init, m), "to INIT");
        check(q.modify(cxv::qp_state::rtr, m), "to RTR");
        check(q.modify(cxv::qp_state::rts, m), "to RTS");
    }

    args a_;
    std::unique_ptr<cxv::device> dev_;
    bool ethernet_ = false;
    std::shared_ptr<cxv::pd> pd_;
    std::vector<std::byte> mem_;
    std::shared_ptr<cxv::mr> mr_;
    std::shared_ptr<cxv::cq> cq_;
    std::shared_ptr<cxv::qp> rc_, uc_, ud_, rc_bad_;
    std::unique_ptr<cxv::api::address_handle> ah_;
    endpoint me_, peer_;
};

int run_traffic(side& s, const args& a);
int run_stream(side& s, const args& a);
int run_gone(side& s, const args& a);

}  // namespace

#include "tests/wire/peer_scenarios.h"

int main(int argc, char** argv) {
    args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (i + 1 >= argc) fail("%s needs a value", k.c_str());
        const std::string v = argv[++i];
        if (k == "--role") a.role = v;
        else if (k == "--oob") a.oob = v;
        else if (k == "--test") a.test = v;
        else if (k == "--device") a.device = v;
        else if (k == "--count") a.count = static_cast<unsigned>(std::stoul(v));
        else if (k == "--gid-index") a.gid_index = static_cast<unsigned>(std::stoul(v));
        else if (k == "--mtu") a.mtu = static_cast<unsigned>(std::stoul(v));
        else if (k == "--timeout") a.timeout = static_cast<unsigned>(std::stoul(v));
        else if (k == "--retry") a.retry = static_cast<unsigned>(std::stoul(v));
        else if (k == "--pause-at") a.pause_at = static_cast<unsigned>(std::stoul(v));
        else if (k == "--hold") a.hold = v;
        else fail("unknown option %s", k.c_str());
    }
    if ((a.role != "server" && a.role != "client") || a.oob.empty() || a.device.empty()) {
        fail("usage: cxv_wire_peer --role server|client --oob DIR --device BDF [--test traffic|stream|gone] "
             "[--count N] [--gid-index N] [--mtu 1..5] [--timeout T] [--retry N] [--pause-at N] [--hold NAME]");
    }
    if (a.role == "client") g_done_marker = a.oob + "/client-done";
    side s(a);
    s.meet();
    int rc = 1;
    if (a.test == "traffic") rc = run_traffic(s, a);
    else if (a.test == "stream") rc = run_stream(s, a);
    else if (a.test == "gone") rc = run_gone(s, a);
    else fail("unknown test %s", a.test.c_str());
    s.print_counters(a.role.c_str());
    if (a.role == "client") {
        publish(g_done_marker, "done");
    } else {
        await_file(a.oob + "/client-done", 120s);
    }
    std::fprintf(stderr, "cxv_wire_peer: %s %s: %s\n", a.role.c_str(), a.test.c_str(), rc == 0 ? "passed" : "FAILED");
    return rc;
}
