#include "tools/cxv/info_print.h"

#include <fmt/format.h>

#include "hw/ifc.h"
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace ifc = hw::ifc;

namespace {

// The link, or why it could not be read.
std::string link_text(const port_desc& p) {
    if (!p.link_error.empty()) return "unknown (" + p.link_error + ")";
    return tool::link_text(p.link.mode, p.link.mbps, p.link.lanes);
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

}  // namespace

void describe_caps(const std::byte* cap, info_desc& d) {
    using c = ifc::cmd_hca_cap;
    d.ethernet = ifc::get<c::port_type>(cap) == 1;
    d.ports = ifc::get<c::num_ports>(cap);
    d.limits = {{"qp", ifc::get<c::log_max_qp>(cap)},     {"qp_sz", ifc::get<c::log_max_qp_sz>(cap)},
                {"cq", ifc::get<c::log_max_cq>(cap)},     {"cq_sz", ifc::get<c::log_max_cq_sz>(cap)},
                {"srq", ifc::get<c::log_max_srq>(cap)},   {"mkey", ifc::get<c::log_max_mkey>(cap)},
                {"pd", ifc::get<c::log_max_pd>(cap)},     {"eq", ifc::get<c::log_max_eq>(cap)}};
    d.message_log = ifc::get<c::log_max_msg>(cap);
    d.bf_log = ifc::get<c::log_bf_reg_size>(cap);
    d.q_counter_sets = ifc::get<c::max_qp_cnt>(cap);
}

void print_text(const info_desc& d) {
    const bool via = !d.daemon.empty();
    fmt::print("{}: firmware {}, ISSI 1, {} port(s), {}\n", d.bdf, d.firmware, d.ports,
               d.ethernet ? "Ethernet (RoCE)" : "InfiniBand");
    if (via) fmt::print("  held by the cxvd at {}: as it describes the function (no bring-up here)\n", d.daemon);
    std::string limits;
    for (const auto& [name, log] : d.limits) limits += fmt::format("{}{} 2^{}", limits.empty() ? "" : ", ", name, log);
    fmt::print("  limits: {}, message 2^{} bytes\n", limits, d.message_log);
    if (via) {
        fmt::print("  completion EQ {} (the daemon's: its clients' CQs report to it)\n", d.comp_eq);
    } else {
        fmt::print("  UAR {} (BlueFlame registers 2^{} bytes), async EQ {}, completion EQ {}, firmware pages {}\n",
                   d.uar, d.bf_log, d.async_eq, d.comp_eq, d.pages);
    }
    for (const auto& p : d.port) {
        if (via) {
            fmt::print("  port {}: {} (as the daemon last saw it)\n", p.port, p.state);
        } else if (p.active) {
            fmt::print("  port {}: {} after {} ms\n", p.port, p.came_up, p.after_ms);
        } else {
            fmt::print("  port {}: {} ({})\n", p.port, p.came_up, p.why);
        }
        const std::string mac = d.ethernet ? "MAC " + d.mac + ", " : std::string();
        if (p.lid_known) {
            fmt::print("  port {}: {}, LID {}, port GUID {:016x}, {}path MTU {}\n", p.port, p.state, p.lid, p.guid, mac,
                       p.path_mtu);
        } else {
            fmt::print("  port {}: {}path MTU {}\n", p.port, mac, p.path_mtu);
        }
        fmt::print("  port {}: link {}\n", p.port, link_text(p));
        for (std::size_t i = 0; i < p.gids.size(); ++i) fmt::print("    GID {}: {}\n", i, p.gids[i]);
    }
    if (!d.counters_error.empty()) {
        fmt::print("  vport counters: {}\n", d.counters_error);
    } else {
        fmt::print("  vport counters{}:\n", via ? " (every client's traffic on the function)" : "");
        for (const auto& [name, value] : d.counters) fmt::print("    {}: {}\n", name, value);
    }
    if (via) {
        fmt::print("  Q counter sets: {} besides the default, the daemon's (its clients' QPs count into none)\n",
                   d.q_counter_sets);
        return;
    }
    fmt::print("  Q counter sets: {} besides the default (each process counts its QPs into its own)\n",
               d.q_counter_sets);
    if (!d.teardown_error.empty()) {
        fmt::print("  teardown: {}\n", d.teardown_error);
    } else {
        fmt::print("  teardown: {} firmware pages reclaimed, {} left\n", d.pages, d.pages_left);
    }
}

void print_json(const info_desc& d) {
    const bool via = !d.daemon.empty();
    json_writer j(json_writer::layout::one_line);
    j.begin_object();
    j.member("bdf", d.bdf);
    j.member("firmware", d.firmware);
    j.key("daemon");
    if (via) {
        j.value(d.daemon);
    } else {
        j.null();
    }
    j.member("link_layer", d.ethernet ? "ethernet" : "infiniband");
    j.member("ports", d.ports);
    j.member("mac", d.mac);
    j.key("limits");
    j.begin_object();
    for (const auto& [name, log] : d.limits) j.member(std::string("log_max_") + name, log);
    j.member("log_max_msg", d.message_log);
    j.end_object();
    if (!via) {
        j.member("uar", d.uar);
        j.member("async_eq", d.async_eq);
    }
    j.member("completion_eq", d.comp_eq);
    if (!via) j.member("firmware_pages", d.pages);
    j.key("port");
    j.begin_array();
    for (const auto& p : d.port) {
        j.begin_object();
        j.member("port", p.port);
        j.member("active", p.active);
        if (!via) {
            j.member("came_up", p.came_up);
            j.member("after_ms", p.after_ms);
            j.key("why");
            if (p.active) {
                j.null();
            } else {
                j.value(p.why);
            }
        }
        j.member("state", p.state);
        if (p.lid_known) {
            j.member("lid", p.lid);
            j.member("port_guid", fmt::format("{:016x}", p.guid));
        }
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
    if (!via) {
        j.key("teardown");
        if (d.teardown_error.empty()) {
            j.begin_object();
            j.member("pages_reclaimed", d.pages);
            j.member("pages_left", d.pages_left);
            j.end_object();
        } else {
            j.value(d.teardown_error);
        }
    }
    j.end_object();
    fmt::print("{}\n", j.str());
}

}  // namespace cxv::tool
