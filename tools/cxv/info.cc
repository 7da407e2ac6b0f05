// cxv info <bdf>: bring the function up, describe it, tear it down.
#include "tools/cxv/info.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "tools/cxv/counters.h"

namespace cxv::tool {

namespace ifc = hw::ifc;

namespace {

const char* port_state_name(unsigned s) {
    switch (s) {
    case 1: return "Down";
    case 2: return "Init";
    case 3: return "Armed";
    case 4: return "Active";
    default: return "?";
    }
}

// Port state changes as the event thread hears them (PORT_CHANGE events).
struct port_watch {
    using clock = std::chrono::steady_clock;
    std::mutex mu;
    clock::time_point start = clock::now();
    std::vector<std::pair<unsigned, std::string>> seen;  // port, state name

    void on_event(const driver::hca_event& e) {
        const char* name = e.what == driver::hca_event::port_up     ? "Active"
                           : e.what == driver::hca_event::port_init ? "Init"
                           : e.what == driver::hca_event::port_down ? "Down"
                                                                     : nullptr;
        if (name == nullptr) return;
        std::lock_guard lock(mu);
        seen.emplace_back(e.port, name);
    }
    // Waits for `port` to be ACTIVE and prints the states it went through, e.g.
    // "port 1: Down -> Init -> Active after 312 ms" (times from the start of bring-up).
    void wait_and_print(driver::hca& hca, unsigned port, std::chrono::milliseconds timeout) {
        const auto first = hca.query_port_state(port);
        const auto waited = hca.wait_port_active(port, timeout);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start).count();
        std::string last = first ? port_state_name(first->logical) : "?";
        std::string line = fmt::format("  port {}: {}", port, last);
        {
            std::lock_guard lock(mu);
            for (const auto& [p, name] : seen) {
                if (p != port || name == last) continue;  // an event from before the first look
                line += fmt::format(" -> {}", name);
                last = name;
            }
        }
        if (waited) {
            fmt::print("{} after {} ms\n", line, ms);
        } else {
            fmt::print("{} ({})\n", line, waited.error().message);
        }
    }
};

}  // namespace

int print_info(const std::string& bdf) {
    auto dev = driver::vfio::device::open(bdf);
    if (!dev) {
        fmt::print(stderr, "cxv info: {}\n", dev.error().message);
        return EXIT_FAILURE;
    }
    // The port: bring-up does not wait; port_watch below waits and tells what it saw.
    auto ports = std::make_shared<port_watch>();
    driver::hca::options opts;
    opts.port_timeout = std::chrono::milliseconds(0);
    opts.on_event = [ports](const driver::hca_event& e) { ports->on_event(e); };
    auto h = driver::hca::create(std::move(dev).value(), opts);
    if (!h) {
        fmt::print(stderr, "cxv info: bring-up failed: {}\n", h.error().message);
        return EXIT_FAILURE;
    }
    driver::hca& hca = *h.value();
    const std::byte* cap = hca.caps().data();
    using c = ifc::cmd_hca_cap;
    const bool eth = ifc::get<c::port_type>(cap) == 1;
    fmt::print("{}: firmware {}, ISSI 1, {} port(s), {}\n", bdf, hca.fw_version_string(),
               ifc::get<c::num_ports>(cap), eth ? "Ethernet (RoCE)" : "InfiniBand");
    fmt::print("  limits: QPs 2^{} (depth 2^{}), CQs 2^{} (depth 2^{}), SRQs 2^{}, MKeys 2^{}, PDs 2^{}, "
               "EQs 2^{}, message 2^{} bytes\n",
               ifc::get<c::log_max_qp>(cap), ifc::get<c::log_max_qp_sz>(cap), ifc::get<c::log_max_cq>(cap),
               ifc::get<c::log_max_cq_sz>(cap), ifc::get<c::log_max_srq>(cap), ifc::get<c::log_max_mkey>(cap),
               ifc::get<c::log_max_pd>(cap), ifc::get<c::log_max_eq>(cap), ifc::get<c::log_max_msg>(cap));
    fmt::print("  UAR {} (BlueFlame registers 2^{} bytes), async EQ {}, completion EQ {}, firmware pages {}\n",
               hca.uar(), ifc::get<c::log_bf_reg_size>(cap), hca.async_eqn(), hca.comp_eqn(), hca.pages_given());
    for (unsigned port = 1; port <= ifc::get<c::num_ports>(cap); ++port) {
        ports->wait_and_print(hca, port, std::chrono::seconds(15));
    }
    for (unsigned port = 1; port <= ifc::get<c::num_ports>(cap); ++port) {
        std::vector<std::byte> in(ifc::query_hca_vport_context_in::size_bytes);
        ifc::set<ifc::query_hca_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_CONTEXT));
        ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), port);
        auto r = hca.exec(in, ifc::query_hca_vport_context_out::size_bytes);
        if (!r) {
            fmt::print("  port {}: {}\n", port, r.error().message);
            continue;
        }
        const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r->data());
        using p = ifc::hca_vport_context;
        fmt::print("  port {}: {}, LID {}, port GUID {:016x}\n", port, port_state_name(ifc::get<p::port_state>(v)),
                   ifc::get<p::lid>(v), ifc::get<p::port_guid>(v));
        // The GIDs: InfiniBand GID 0; RoCE those the driver programmed at bring-up.
        if (auto pi = hca.query_port(port)) {
            for (std::size_t i = 0; i < pi->gids.size(); ++i) {
                const auto& g = pi->gids[i];
                std::string text;
                for (std::size_t k = 0; k < g.size(); k += 2) {
                    text += fmt::format("{}{:02x}{:02x}", k ? ":" : "", g[k], g[k + 1]);
                }
                fmt::print("    GID {}: {}\n", i, text);
            }
        }
    }
    print_counters(hca);
    const auto given = hca.pages_given();
    // Teardown: EQ, UAR, TEARDOWN_HCA, every page reclaimed, DISABLE_HCA.
    if (auto s = hca.close(); !s) {
        fmt::print(stderr, "cxv info: teardown: {}\n", s.error().message);
        return EXIT_FAILURE;
    }
    fmt::print("  teardown: {} firmware pages reclaimed, {} left\n", given, hca.pages_given());
    return hca.pages_given() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace cxv::tool
