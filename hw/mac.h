// A MAC address in the PRM's mac_address_layout (the 48 bits in the low end of its 8
// bytes: mac_addr_47_32, mac_addr_31_0), as a NIC vport context's permanent_address holds
// it: the bytes in wire order, both ways.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "hw/ifc.h"

namespace cxv::hw {

// The 48 bits of a MAC in two fields, its top 16 bits in Hi and the rest in Lo: the
// PRM's mac_address_layout, and the rmac of a QP's address path (ads).
template <typename Hi, typename Lo>
std::array<std::uint8_t, 6> get_mac_fields(const std::byte* p) noexcept {
    const std::uint32_t hi = ifc::get<Hi>(p);
    const std::uint32_t lo = ifc::get<Lo>(p);
    return {static_cast<std::uint8_t>(hi >> 8),  static_cast<std::uint8_t>(hi),
            static_cast<std::uint8_t>(lo >> 24), static_cast<std::uint8_t>(lo >> 16),
            static_cast<std::uint8_t>(lo >> 8),  static_cast<std::uint8_t>(lo)};
}

template <typename Hi, typename Lo>
void set_mac_fields(std::byte* p, const std::array<std::uint8_t, 6>& m) noexcept {
    ifc::set<Hi>(p, std::uint32_t{m[0]} << 8 | m[1]);
    ifc::set<Lo>(p, std::uint32_t{m[2]} << 24 | std::uint32_t{m[3]} << 16 | std::uint32_t{m[4]} << 8 | m[5]);
}

inline std::array<std::uint8_t, 6> get_mac(const std::byte* layout) noexcept {
    return get_mac_fields<ifc::mac_address_layout::mac_addr_47_32, ifc::mac_address_layout::mac_addr_31_0>(layout);
}

inline void set_mac(std::byte* layout, const std::array<std::uint8_t, 6>& m) noexcept {
    set_mac_fields<ifc::mac_address_layout::mac_addr_47_32, ifc::mac_address_layout::mac_addr_31_0>(layout, m);
}

// The MAC a RoCE GID names by itself: a link-local GID (fe80::/64) whose interface id is
// the modified EUI-64 of a MAC (RFC 4291 appendix A: ff:fe in its middle, the
// universal/local bit inverted), as every RoCE port's GID 0 is. A card sends a RoCE packet
// to the MAC in the QP's path or the address vector and resolves none itself (no ARP,
// docs/linux-oracle.md finding 19): for any other GID the MAC must come from elsewhere.
inline std::optional<std::array<std::uint8_t, 6>> mac_of_link_local_gid(const std::uint8_t* gid) noexcept {
    if (gid[0] != 0xfe || gid[1] != 0x80) return std::nullopt;
    for (int i = 2; i < 8; ++i) {
        if (gid[i] != 0) return std::nullopt;
    }
    if (gid[11] != 0xff || gid[12] != 0xfe) return std::nullopt;
    return std::array<std::uint8_t, 6>{static_cast<std::uint8_t>(gid[8] ^ 0x02), gid[9], gid[10], gid[13], gid[14],
                                       gid[15]};
}

}  // namespace cxv::hw
