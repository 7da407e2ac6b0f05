// What cxv's subcommands print the same way: port states and links, GIDs, MACs, JSON strings.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "base/json.h"
#include "hw/port_state_name.h"

namespace cxv::tool {

// IBTA PortState's names (hw/port_state_name.h).
using hw::port_state_name;

inline std::string gid_text(const std::array<std::uint8_t, 16>& g) {
    std::string text;
    for (std::size_t k = 0; k < g.size(); k += 2) text += fmt::format("{}{:02x}{:02x}", k ? ":" : "", g[k], g[k + 1]);
    return text;
}

// A port's link (driver hca::port_speed): "4X EDR, 100 Gb/s, 4 lanes"; "down" without a
// mode; the mode alone without a rate.
inline std::string link_text(const std::string& mode, std::uint64_t mbps, unsigned lanes) {
    if (mode.empty()) return "down";
    if (mbps == 0) return mode;
    const std::string rate = mbps % 1000 == 0 ? fmt::format("{} Gb/s", mbps / 1000) : fmt::format("{} Mb/s", mbps);
    return fmt::format("{}, {}, {} lane{}", mode, rate, lanes, lanes == 1 ? "" : "s");
}

inline std::string mac_text(const std::array<std::uint8_t, 6>& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

// A JSON string literal (base/json.h): driver names and messages come from sysfs and
// firmware.
using cxv::json_string;

}  // namespace cxv::tool
