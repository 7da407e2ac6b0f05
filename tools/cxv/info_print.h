// What `cxv info` prints of a function, as text or as one JSON object: a function it
// brought up itself (info.cc), or one a cxvd holds, as that daemon describes it
// (daemon_view.cc: HELLO and COUNTERS; nothing is brought up or torn down then).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "driver/hca/hca.h"

namespace cxv::tool {

// A port as bring-up left it, or as the daemon last saw it.
struct port_desc {
    unsigned port = 0;
    std::string came_up;  // "Down -> Init -> Active" (bring-up only)
    bool active = false;
    long long after_ms = 0;
    std::string why;  // not active: the state last seen and what it means
    std::string state;
    bool lid_known = true;  // LID and port GUID (QUERY_HCA_VPORT_CONTEXT; not through a daemon)
    unsigned lid = 0;
    std::uint64_t guid = 0;
    unsigned path_mtu = 0;  // bytes
    driver::hca::port_speed link;  // PTYS: mode empty while down
    std::string link_error;         // or why it could not be read
    std::vector<std::string> gids;
};

struct info_desc {
    std::string bdf, firmware;
    // Non-empty: the cxvd socket the function is described through. Then there is no
    // bring-up here (no UAR, async EQ, firmware pages or teardown of this process).
    std::string daemon;
    bool ethernet = false;
    unsigned ports = 0;
    std::vector<std::pair<const char*, unsigned>> limits;  // name, log2
    unsigned message_log = 0, uar = 0, bf_log = 0, async_eq = 0, comp_eq = 0;
    std::size_t pages = 0, pages_left = 0;
    std::string mac;
    std::vector<port_desc> port;
    std::vector<std::pair<std::string, std::uint64_t>> counters;  // the vport's (driver::named_counters)
    std::string counters_error;
    unsigned q_counter_sets = 0;
    std::string teardown_error;
};

// The limits and sizes `cxv info` shows, from cmd_hca_cap (general, current).
void describe_caps(const std::byte* cap, info_desc& d);
void print_text(const info_desc& d);
void print_json(const info_desc& d);

}  // namespace cxv::tool
