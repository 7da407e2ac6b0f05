#include "tools/cxv/daemon_view.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "client/client.h"
#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "protocol/codec.h"
#include "tools/cxv/info_print.h"
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
            j.member("usable", !d.other_domain);
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
                   d.ethernet ? "eth" : "ib", port_state_name(d.port_logical),
                   d.other_domain ? "in use by another trust domain" : "ready (through cxvd)");
    }
    return EXIT_SUCCESS;
}

int print_daemon_info(const std::string& socket, const std::string& bdf, bool json) {
    auto c = daemon::client::connect(socket);
    if (!c) {
        fmt::print(stderr, "cxv info: {}\n", c.error().message);
        return EXIT_FAILURE;
    }
    auto h = c->hello();
    if (!h) {
        fmt::print(stderr, "cxv info: cxvd at {}: {}\n", socket, h.error().message);
        return EXIT_FAILURE;
    }
    std::size_t index = 0;
    while (index < h->devices.size() && !bdf.empty() && h->devices[index].bdf != bdf) ++index;
    if (index == h->devices.size()) {
        fmt::print(stderr, "cxv info: the cxvd at {} does not serve {}\n", socket, bdf.empty() ? "a function" : bdf);
        return EXIT_FAILURE;
    }
    const daemon::device_info& dev = h->devices[index];
    if (dev.caps.size() < ifc::cmd_hca_cap::size_bytes) {
        fmt::print(stderr, "cxv info: the cxvd at {} sent {} bytes of capabilities\n", socket, dev.caps.size());
        return EXIT_FAILURE;
    }
    info_desc d;
    d.bdf = daemon::printable(dev.bdf);
    d.firmware = daemon::printable(dev.firmware);
    d.daemon = socket;
    describe_caps(dev.caps.data(), d);
    d.comp_eq = dev.comp_eqn;
    d.mac = mac_text(dev.mac);
    // Port 1 as HELLO tells it (the daemon's view at its last port change).
    port_desc p;
    p.port = 1;
    p.active = dev.port_up;
    p.state = port_state_name(dev.port_logical);
    p.lid_known = false;
    p.path_mtu = dev.max_mtu != 0 ? 128u << dev.max_mtu : 0;
    p.link = driver::hca::decode_ptys(dev.ptys, d.ethernet);
    for (const auto& g : dev.gids) p.gids.push_back(gid_text(g));
    d.port.push_back(std::move(p));
    // The counters as they count now (COUNTERS claims nothing: a read-only view).
    auto a = c->call(daemon::msg_type::counters, daemon::body(daemon::counters_req{static_cast<std::uint16_t>(index)}));
    if (!a) {
        d.counters_error = a.error().message;
    } else if (a->err != 0) {
        d.counters_error = fmt::format("{} ({})", daemon::printable(a->text), std::strerror(a->err));
    } else if (auto r = daemon::parse_counters_reply(a->payload)) {
        d.counters = std::move(r->counters);
    } else {
        d.counters_error = r.error().message;
    }
    json ? print_json(d) : print_text(d);
    return EXIT_SUCCESS;
}

}  // namespace cxv::tool
