// cxv info [--json] <bdf>: bring the function up, describe it, tear it down; or, when a
// cxvd holds it, describe it as that daemon does.
#include "tools/cxv/info.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "driver/hca/hca.h"
#include "driver/res/q_counter.h"
#include "driver/vfio/vfio.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "tools/cxv/daemon_view.h"
#include "tools/cxv/holders.h"
#include "tools/cxv/info_print.h"
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace ifc = hw::ifc;

namespace {

using clock_type = std::chrono::steady_clock;

// Port state changes as the event thread hears them (PORT_CHANGE events).
struct port_watch {
    std::mutex mu;
    clock_type::time_point start = clock_type::now();
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
    // Waits for `port` to be ACTIVE (a note on stderr when that takes more than a second)
    // and says which states it went through, times from the start of bring-up.
    void wait(driver::hca& hca, unsigned port, std::chrono::milliseconds timeout, port_desc& d) {
        const auto first = hca.query_port_state(port);
        // A link that is not there would otherwise mean the whole timeout of silence.
        std::atomic<bool> done{false};
        std::thread note([&] {
            for (int i = 0; i < 20 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            if (!done.load()) {
                std::fprintf(stderr, "cxv info: port %u is not up yet: waiting up to %lld ms in all\n", port,
                             static_cast<long long>(timeout.count()));
            }
        });
        auto waited = hca.wait_port_active(port, timeout);
        done = true;
        note.join();
        d.after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start).count();
        std::string last = first ? port_state_name(first->logical) : "?";
        d.came_up = last;
        {
            std::lock_guard lock(mu);
            for (const auto& [p, name] : seen) {
                if (p != port || name == last) continue;  // an event from before the first look
                d.came_up += " -> " + name;
                last = name;
            }
        }
        d.active = static_cast<bool>(waited);
        if (!waited) {
            d.why = waited.error().message;
            if (const auto now = hca.query_port_state(port); now && !now->oper_up) {
                d.why += "; the physical link is down: the cable, the peer's port, or their speeds (docs/hardware.md)";
            } else if (now && now->logical == 2 && !hca.ethernet()) {
                d.why += "; Init: no subnet manager has made it Active yet (docs/hardware.md, \"The link\")";
            }
        }
    }
};

void describe_ports(driver::hca& hca, info_desc& d) {
    for (auto& p : d.port) {
        std::vector<std::byte> in(ifc::query_hca_vport_context_in::size_bytes);
        ifc::set<ifc::query_hca_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_CONTEXT));
        ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), p.port);
        if (auto r = hca.exec(in, ifc::query_hca_vport_context_out::size_bytes)) {
            const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r->data());
            using c = ifc::hca_vport_context;
            p.state = port_state_name(ifc::get<c::port_state>(v));
            p.lid = ifc::get<c::lid>(v);
            p.guid = ifc::get<c::port_guid>(v);
        } else {
            p.state = r.error().message;
        }
        if (auto sp = hca.query_port_speed(p.port)) {
            p.link = std::move(sp).value();
        } else {
            p.link_error = sp.error().message;
        }
        // The GIDs: InfiniBand GID 0; RoCE those the driver programmed at bring-up.
        if (auto pi = hca.query_port(p.port)) {
            p.path_mtu = pi->max_mtu != 0 ? 128u << pi->max_mtu : 0;
            for (const auto& g : pi->gids) p.gids.push_back(gid_text(g));
        }
    }
}

// The vport's traffic, counter by counter, for this port type. (A Q counter set of this
// process's own would read 0: nothing counts into it. The sets counting a process's QPs
// are that process's; describe_caps gives how many there are.)
void describe_counters(driver::hca& hca, info_desc& d) {
    auto v = driver::query_vport_counters(hca);
    if (!v) {
        d.counters_error = v.error().message;
        return;
    }
    d.counters = driver::named_counters(*v, d.ethernet);
}

// A function another process holds: who, and when that is a cxvd, what it says of the
// function (its listening socket found through /proc). 0 when a daemon described it.
int describe_held(const std::string& bdf, bool json) {
    const std::string group = link_base("/sys/bus/pci/devices/" + bdf + "/iommu_group");
    const auto held = group_holders(group);
    if (held.empty()) {
        fmt::print(stderr, "cxv info: {}: /dev/vfio/{} is held by a process this user cannot see (root can)\n", bdf,
                   group);
        return -1;
    }
    fmt::print(stderr, "cxv info: {}: /dev/vfio/{} is held by {}\n", bdf, group, join(held));
    for (const auto& h : held) {
        if (h.comm != "cxvd") continue;
        // Its control socket (a metrics socket is a stream one).
        for (const auto& socket : listening_sockets(h.pid, SOCK_SEQPACKET)) {
            fmt::print(stderr, "cxv info: asking that cxvd, at {}\n", socket);
            return print_daemon_info(socket, bdf, json) == EXIT_SUCCESS ? 0 : -1;
        }
    }
    return -1;
}

}  // namespace

int print_info(const std::string& bdf, bool json, std::chrono::milliseconds port_timeout) {
    auto dev = driver::vfio::device::open(bdf);
    if (!dev) {
        fmt::print(stderr, "cxv info: {}\n", dev.error().message);
        // A function a driver holds is described by that driver: a cxvd is asked.
        if (dev.error().code == EBUSY && describe_held(bdf, json) == 0) return EXIT_SUCCESS;
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
    info_desc d;
    d.bdf = bdf;
    d.firmware = hca.fw_version_string();
    describe_caps(hca.caps().data(), d);
    d.uar = hca.uar();
    d.async_eq = hca.async_eqn();
    d.comp_eq = hca.comp_eqn();
    d.pages = hca.pages_given();
    d.mac = mac_text(hca.mac());
    for (unsigned port = 1; port <= d.ports; ++port) {
        port_desc p;
        p.port = port;
        ports->wait(hca, port, port_timeout, p);
        d.port.push_back(std::move(p));
    }
    describe_ports(hca, d);
    describe_counters(hca, d);
    d.pages = hca.pages_given();
    // Teardown: EQ, UAR, TEARDOWN_HCA, every page reclaimed, DISABLE_HCA.
    if (auto s = hca.close(); !s) d.teardown_error = s.error().message;
    d.pages_left = hca.pages_given();
    json ? print_json(d) : print_text(d);
    bool ok = d.teardown_error.empty() && d.pages_left == 0;
    for (const auto& p : d.port) ok &= p.active;
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace cxv::tool
