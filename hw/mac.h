// A MAC address in the PRM's mac_address_layout (the 48 bits in the low end of its 8
// bytes: mac_addr_47_32, mac_addr_31_0), as a NIC vport context's permanent_address holds
// it: the bytes in wire order, both ways.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hw/ifc.h"

namespace cxv::hw {

inline std::array<std::uint8_t, 6> get_mac(const std::byte* layout) noexcept {
    const std::uint32_t hi = ifc::get<ifc::mac_address_layout::mac_addr_47_32>(layout);
    const std::uint32_t lo = ifc::get<ifc::mac_address_layout::mac_addr_31_0>(layout);
    return {static_cast<std::uint8_t>(hi >> 8),  static_cast<std::uint8_t>(hi),
            static_cast<std::uint8_t>(lo >> 24), static_cast<std::uint8_t>(lo >> 16),
            static_cast<std::uint8_t>(lo >> 8),  static_cast<std::uint8_t>(lo)};
}

inline void set_mac(std::byte* layout, const std::array<std::uint8_t, 6>& m) noexcept {
    ifc::set<ifc::mac_address_layout::mac_addr_47_32>(layout, std::uint32_t{m[0]} << 8 | m[1]);
    ifc::set<ifc::mac_address_layout::mac_addr_31_0>(
        layout, std::uint32_t{m[2]} << 24 | std::uint32_t{m[3]} << 16 | std::uint32_t{m[4]} << 8 | m[5]);
}

}  // namespace cxv::hw
