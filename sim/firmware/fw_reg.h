// What the access registers keep beyond the port's own state (fw_reg.cc): event enables,
// the module's admin state, PTYS admin masks and the PPCNT clear points. Back to
// power-on values on reset.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "sim/transport/port_stats.h"

namespace cxv::sim {

struct register_state {
    std::uint8_t paos_e = 0;           // PAOS e: 0 no events, 1 events, 2 a single event
    std::uint8_t pmaos_admin = 1;      // PMAOS admin_status: the module is enabled
    std::uint8_t pmaos_e = 0;
    std::uint32_t ptys_eth_admin = 0;  // 0: every speed the port can do
    std::uint16_t ptys_ib_proto_admin = 0;
    std::uint16_t ptys_ib_width_admin = 0;
    // PPCNT: each group reports the port's counts since its last clr, so one group's
    // clear leaves the others (and QUERY_VPORT_COUNTER) alone. Per priority: one each.
    port_stats ppcnt_802_3{}, ppcnt_2863{}, ppcnt_phys{};
    std::array<port_stats, 8> ppcnt_prio{};
    std::chrono::steady_clock::time_point phys_cleared = std::chrono::steady_clock::now();
};

}  // namespace cxv::sim
