#include "tools/cxv/daemon_view.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "client/client.h"
#include "client/remote.h"
#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "protocol/codec.h"
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace {

namespace ifc = hw::ifc;

}  // namespace

std::string daemon_socket(const std::string& given) {
    if (!given.empty()) return given;
    const char* d = std::getenv("CXV_DAEMON");
    return d != nullptr ? d : "";
}

int print_daemon_list(const std::string& socket, bool json) {
    auto c = daemon::client::connect(socket);
    if (!c) {
        fmt::print(stderr, "cxv list: {}\n", c.error().message);
        return EXIT_FAILURE;
    }
    auto h = c->hello();
    if (!h) {
        fmt::print(stderr, "cxv list: cxvd at {}: {}\n", socket, h.error().message);
        return EXIT_FAILURE;
    }
    if (json) {
        json_writer j(json_writer::layout::one_line);
        j.begin_array();
        for (const auto& d : h->devices) {
            j.begin_object();
            j.member("bdf", daemon::printable(d.bdf));
            j.member("firmware", daemon::printable(d.firmware));
            j.member("link", d.ethernet ? "eth" : "ib");
            j.member("port_state", port_state_name(d.port_logical));
            j.member("daemon", daemon::printable(socket));
            j.member("usable", true);
            j.end_object();
        }
        j.end_array();
        fmt::print("{}\n", j.str());
        return EXIT_SUCCESS;
    }
    fmt::print("functions of the cxvd at {} ({}; this process attaches through it, not through VFIO):\n", socket,
               h->devices.size());
    fmt::print("{:<13} {:<12} {:<5} {:<7} {}\n", "bdf", "firmware", "link", "port 1", "cxv");
    for (const auto& d : h->devices) {
        fmt::print("{:<13} {:<12} {:<5} {:<7} {}\n", daemon::printable(d.bdf), daemon::printable(d.firmware),
                   d.ethernet ? "eth" : "ib", port_state_name(d.port_logical), "ready (through cxvd)");
    }
    return EXIT_SUCCESS;
}

int print_daemon_info(const std::string& socket, const std::string& bdf) {
    driver::hca::options opts;
    opts.port_timeout = std::chrono::milliseconds(0);
    auto h = daemon::attach(socket, bdf, opts);
    if (!h) {
        fmt::print(stderr, "cxv info: {}\n", h.error().message);
        return EXIT_FAILURE;
    }
    driver::hca& hca = *h.value();
    const std::byte* cap = hca.caps().data();
    using c = ifc::cmd_hca_cap;
    const bool eth = ifc::get<c::port_type>(cap) == 1;
    fmt::print("{}: the function of the cxvd at {} (attached through it: no bring-up or teardown here)\n",
               hca.device().bdf(), socket);
    fmt::print("  firmware {}, {} port(s), {}\n", hca.fw_version_string(), ifc::get<c::num_ports>(cap),
               eth ? "Ethernet (RoCE)" : "InfiniBand");
    fmt::print("  limits: QPs 2^{} (depth 2^{}), CQs 2^{} (depth 2^{}), SRQs 2^{}, MKeys 2^{}, PDs 2^{}, "
               "message 2^{} bytes\n",
               ifc::get<c::log_max_qp>(cap), ifc::get<c::log_max_qp_sz>(cap), ifc::get<c::log_max_cq>(cap),
               ifc::get<c::log_max_cq_sz>(cap), ifc::get<c::log_max_srq>(cap), ifc::get<c::log_max_mkey>(cap),
               ifc::get<c::log_max_pd>(cap), ifc::get<c::log_max_msg>(cap));
    fmt::print("  UAR {} (granted by the daemon), completion EQ {} (the daemon's), BAR0 {} bytes\n", hca.uar(),
               hca.comp_eqn(), hca.device().bar0().size());
    if (auto ps = hca.query_port_state(1)) {
        fmt::print("  port 1: {} (as the daemon told at attach)\n", port_state_name(ps->logical));
    }
    if (auto sp = hca.query_port_speed(1)) {
        fmt::print("  port 1: link {} (the daemon's PTYS at bring-up)\n", link_text(sp->mode, sp->mbps, sp->lanes));
    }
    if (auto pi = hca.query_port(1)) {
        for (std::size_t i = 0; i < pi->gids.size(); ++i) fmt::print("    GID {}: {}\n", i, gid_text(pi->gids[i]));
    }
    fmt::print("  MAC {}\n", mac_text(hca.mac()));
    fmt::print("  counters, firmware pages, EQs: the daemon's (cxv status for its clients)\n");
    return EXIT_SUCCESS;
}

}  // namespace cxv::tool
