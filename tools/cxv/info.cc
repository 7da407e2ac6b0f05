// cxv info [--json] <bdf>: bring the function up, describe it, tear it down.
#include "tools/cxv/info.h"

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
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace ifc = hw::ifc;

namespace {

using clock_type = std::chrono::steady_clock;

// A port as bring-up left it.
struct port_desc {
    unsigned port = 0;
    std::string came_up;  // "Down -> Init -> Active"
    bool active = false;
    long long after_ms = 0;
    std::string why;  // not active: the state last seen and what it means
    std::string state;
    unsigned lid = 0;
    std::uint64_t guid = 0;
    unsigned path_mtu = 0;  // bytes
    driver::hca::port_speed link;  // PTYS: mode empty while down
    std::string link_error;         // or why it could not be read
    std::vector<std::string> gids;
};

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

struct info_desc {
    std::string bdf, firmware;
    bool ethernet = false;
    unsigned ports = 0;
    std::vector<std::pair<const char*, unsigned>> limits;  // name, log2
    unsigned message_log = 0, uar = 0, bf_log = 0, async_eq = 0, comp_eq = 0;
    std::size_t pages = 0, pages_left = 0;
    std::string mac;
    std::vector<port_desc> port;
    std::vector<std::pair<std::string, std::uint64_t>> counters;  // the vport's
    std::string counters_error;
    unsigned q_counter_sets = 0;
    std::string teardown_error;
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

// The vport's traffic, counter by counter, for this port type; and how many Q counter
// sets there are. (A set of its own would read 0 here: nothing of this process counts
// into it. The sets counting a process's QPs are that process's.)
void describe_counters(driver::hca& hca, info_desc& d) {
    const std::byte* cap = hca.caps().data();
    d.q_counter_sets = ifc::get<ifc::cmd_hca_cap::max_qp_cnt>(cap);
    auto v = driver::query_vport_counters(hca);
    if (!v) {
        d.counters_error = v.error().message;
        return;
    }
    const auto add = [&](const char* name, const hw::traffic& t) {
        d.counters.emplace_back(std::string(name) + "_packets", t.packets);
        d.counters.emplace_back(std::string(name) + "_bytes", t.octets);
    };
    if (d.ethernet) {
        add("rx_unicast", v->received_eth_unicast);
        add("rx_multicast", v->received_eth_multicast);
        add("rx_broadcast", v->received_eth_broadcast);
        add("tx_unicast", v->transmitted_eth_unicast);
        add("tx_multicast", v->transmitted_eth_multicast);
        add("tx_broadcast", v->transmitted_eth_broadcast);
    } else {
        add("rx_unicast", v->received_ib_unicast);
        add("rx_multicast", v->received_ib_multicast);
        add("tx_unicast", v->transmitted_ib_unicast);
        add("tx_multicast", v->transmitted_ib_multicast);
    }
    add("rx_errors", v->received_errors);
    add("tx_errors", v->transmit_errors);
}

// The link, or why it could not be read.
std::string link_text(const port_desc& p) {
    if (!p.link_error.empty()) return "unknown (" + p.link_error + ")";
    return tool::link_text(p.link.mode, p.link.mbps, p.link.lanes);
}

void print_text(const info_desc& d) {
    fmt::print("{}: firmware {}, ISSI 1, {} port(s), {}\n", d.bdf, d.firmware, d.ports,
               d.ethernet ? "Ethernet (RoCE)" : "InfiniBand");
    std::string limits;
    for (const auto& [name, log] : d.limits) limits += fmt::format("{}{} 2^{}", limits.empty() ? "" : ", ", name, log);
    fmt::print("  limits: {}, message 2^{} bytes\n", limits, d.message_log);
    fmt::print("  UAR {} (BlueFlame registers 2^{} bytes), async EQ {}, completion EQ {}, firmware pages {}\n", d.uar,
               d.bf_log, d.async_eq, d.comp_eq, d.pages);
    for (const auto& p : d.port) {
        if (p.active) {
            fmt::print("  port {}: {} after {} ms\n", p.port, p.came_up, p.after_ms);
        } else {
            fmt::print("  port {}: {} ({})\n", p.port, p.came_up, p.why);
        }
        fmt::print("  port {}: {}, LID {}, port GUID {:016x}, {}path MTU {}\n", p.port, p.state, p.lid, p.guid,
                   d.ethernet ? "MAC " + d.mac + ", " : std::string(), p.path_mtu);
        fmt::print("  port {}: link {}\n", p.port, link_text(p));
        for (std::size_t i = 0; i < p.gids.size(); ++i) fmt::print("    GID {}: {}\n", i, p.gids[i]);
    }
    if (!d.counters_error.empty()) {
        fmt::print("  vport counters: {}\n", d.counters_error);
    } else {
        fmt::print("  vport counters:\n");
        for (const auto& [name, value] : d.counters) fmt::print("    {}: {}\n", name, value);
    }
    fmt::print("  Q counter sets: {} besides the default (each process counts its QPs into its own)\n",
               d.q_counter_sets);
    if (!d.teardown_error.empty()) {
        fmt::print("  teardown: {}\n", d.teardown_error);
    } else {
        fmt::print("  teardown: {} firmware pages reclaimed, {} left\n", d.pages, d.pages_left);
    }
}

// {"mode":..,"mbps":..,"lanes":..}; null while down; the error as a string.
void link_json(json_writer& j, const port_desc& p) {
    if (!p.link_error.empty()) {
        j.value(p.link_error);
    } else if (p.link.mode.empty()) {
        j.null();
    } else {
        j.begin_object();
        j.member("mode", p.link.mode);
        j.member("mbps", p.link.mbps);
        j.member("lanes", p.link.lanes);
        j.end_object();
    }
}

void print_json(const info_desc& d) {
    json_writer j(json_writer::layout::one_line);
    j.begin_object();
    j.member("bdf", d.bdf);
    j.member("firmware", d.firmware);
    j.member("link_layer", d.ethernet ? "ethernet" : "infiniband");
    j.member("ports", d.ports);
    j.member("mac", d.mac);
    j.key("limits");
    j.begin_object();
    for (const auto& [name, log] : d.limits) j.member(std::string("log_max_") + name, log);
    j.member("log_max_msg", d.message_log);
    j.end_object();
    j.member("uar", d.uar);
    j.member("async_eq", d.async_eq);
    j.member("completion_eq", d.comp_eq);
    j.member("firmware_pages", d.pages);
    j.key("port");
    j.begin_array();
    for (const auto& p : d.port) {
        j.begin_object();
        j.member("port", p.port);
        j.member("active", p.active);
        j.member("came_up", p.came_up);
        j.member("after_ms", p.after_ms);
        j.key("why");
        if (p.active) {
            j.null();
        } else {
            j.value(p.why);
        }
        j.member("state", p.state);
        j.member("lid", p.lid);
        j.member("port_guid", fmt::format("{:016x}", p.guid));
        j.member("path_mtu", p.path_mtu);
        j.key("link");
        link_json(j, p);
        j.key("gids");
        j.begin_array();
        for (const auto& g : p.gids) j.value(g);
        j.end_array();
        j.end_object();
    }
    j.end_array();
    j.key("vport_counters");
    if (d.counters_error.empty()) {
        j.begin_object();
        for (const auto& [name, value] : d.counters) j.member(name, value);
        j.end_object();
    } else {
        j.value(d.counters_error);
    }
    j.member("q_counter_sets", d.q_counter_sets);
    j.key("teardown");
    if (d.teardown_error.empty()) {
        j.begin_object();
        j.member("pages_reclaimed", d.pages);
        j.member("pages_left", d.pages_left);
        j.end_object();
    } else {
        j.value(d.teardown_error);
    }
    j.end_object();
    fmt::print("{}\n", j.str());
}

}  // namespace

int print_info(const std::string& bdf, bool json, std::chrono::milliseconds port_timeout) {
    auto dev = driver::vfio::device::open(bdf);
    if (!dev) {
        fmt::print(stderr, "cxv info: {}\n", dev.error().message);
        // A function a driver holds is described by that driver: `cxv status` asks a cxvd.
        if (dev.error().code == EBUSY) {
            fmt::print(stderr, "cxv info: if a cxvd holds it, `cxv status --socket PATH` shows what that cxvd serves\n");
        }
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
    info_desc d;
    d.bdf = bdf;
    d.firmware = hca.fw_version_string();
    d.ethernet = ifc::get<c::port_type>(cap) == 1;
    d.ports = ifc::get<c::num_ports>(cap);
    d.limits = {{"qp", ifc::get<c::log_max_qp>(cap)},     {"qp_sz", ifc::get<c::log_max_qp_sz>(cap)},
                {"cq", ifc::get<c::log_max_cq>(cap)},     {"cq_sz", ifc::get<c::log_max_cq_sz>(cap)},
                {"srq", ifc::get<c::log_max_srq>(cap)},   {"mkey", ifc::get<c::log_max_mkey>(cap)},
                {"pd", ifc::get<c::log_max_pd>(cap)},     {"eq", ifc::get<c::log_max_eq>(cap)}};
    d.message_log = ifc::get<c::log_max_msg>(cap);
    d.uar = hca.uar();
    d.bf_log = ifc::get<c::log_bf_reg_size>(cap);
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
