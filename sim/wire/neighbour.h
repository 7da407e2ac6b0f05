// Neighbour resolution on a RoCE port, and the GIDs of its addresses.
//
// A peer resolves the MAC of an IPv4-mapped GID with ARP (RFC 826) and of an IPv6 GID with
// neighbour discovery (RFC 4861); a link-local GID (fe80::/64 with an EUI-64 interface id)
// carries its MAC in itself (RFC 4291 appendix A "Creating Modified EUI-64 Format
// Interface Identifiers"), which is what Linux does for one. The model's port answers both
// so that a Linux rxe peer (and ping/ping6) can reach it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace cxv::sim::wire {

using mac_address = std::array<std::uint8_t, 6>;
using ipv4_address = std::array<std::uint8_t, 4>;
using gid_bytes = std::array<std::uint8_t, 16>;  // a GID is an IPv6 address

inline constexpr mac_address broadcast_mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// fe80::/64 with the modified EUI-64 interface id of `mac`: its bytes with ff:fe inserted
// in the middle and the universal/local bit (bit 1 of byte 0) flipped.
gid_bytes link_local_gid(const mac_address& mac) noexcept;
// The MAC back from such a GID; false when the GID is not fe80::/64 with ff:fe in bytes 11..12.
bool mac_of_link_local_gid(const gid_bytes& gid, mac_address& mac) noexcept;
// ::ffff:a.b.c.d (RFC 4291 2.5.5.2).
gid_bytes ipv4_mapped_gid(const ipv4_address& ip) noexcept;
// ff02::1:ffXX:XXXX, the solicited-node multicast address of `ip` (RFC 4291 2.7.1).
gid_bytes solicited_node_address(const gid_bytes& ip) noexcept;
// 33:33 and the low 32 bits of an IPv6 multicast address (RFC 2464 7).
mac_address ipv6_multicast_mac(const gid_bytes& ip) noexcept;

// ---- ARP (RFC 826) over Ethernet for IPv4 ----
inline constexpr std::uint16_t arp_request = 1, arp_reply = 2;  // ar$op
inline constexpr std::size_t arp_frame_bytes = 60;  // 14 + 28, padded to Ethernet's minimum

struct arp_message {
    std::uint16_t oper = arp_request;
    mac_address sha{};  // sender hardware address
    ipv4_address spa{};
    mac_address tha{};  // target hardware address (zero in a request)
    ipv4_address tpa{};
};

// The reply `my_mac` gives to a request for one of its addresses: to the requester.
arp_message arp_reply_to(const arp_message& request, const mac_address& my_mac) noexcept;
// An Ethernet frame from m.sha to eth_dst (broadcast_mac for a request); arp_frame_bytes,
// or 0 when out is smaller.
std::size_t build_arp(const arp_message& m, const mac_address& eth_dst, std::span<std::byte> out) noexcept;
// False unless the frame is an Ethernet/IPv4 ARP request or reply.
bool parse_arp(std::span<const std::byte> frame, arp_message& m) noexcept;

// ---- IPv6 neighbour discovery (RFC 4861 4.3, 4.4) ----
inline constexpr std::uint8_t icmpv6_neighbor_solicitation = 135, icmpv6_neighbor_advertisement = 136;
inline constexpr std::uint8_t ip_protocol_icmpv6 = 58;
inline constexpr std::size_t nd_frame_bytes = 14 + 40 + 24 + 8;  // with one link-layer address option

struct nd_message {
    std::uint8_t type = icmpv6_neighbor_solicitation;
    bool router = false, solicited = false, override_ = false;  // advertisement flags R, S, O
    gid_bytes target{};
    bool has_lladdr = false;
    mac_address lladdr{};  // source (solicitation) or target (advertisement) link-layer address
    // From the Ethernet and IPv6 headers.
    mac_address eth_src{}, eth_dst{};
    gid_bytes src{}, dst{};
};

// A solicitation from (src_mac, src) for target's MAC: to target's solicited-node address
// and its multicast MAC, with the source link-layer address option. nd_frame_bytes or 0.
std::size_t build_neighbour_solicitation(const mac_address& src_mac, const gid_bytes& src, const gid_bytes& target,
                                         std::span<std::byte> out) noexcept;
// An advertisement that `target` is at my_mac, to (dst_mac, dst), with the target
// link-layer address option; Override set, Solicited as told. nd_frame_bytes or 0.
std::size_t build_neighbour_advertisement(const mac_address& my_mac, const gid_bytes& target,
                                          const mac_address& dst_mac, const gid_bytes& dst, bool solicited,
                                          std::span<std::byte> out) noexcept;
// False unless the frame is a valid solicitation or advertisement (RFC 4861 7.1.1, 7.1.2:
// hop limit 255, ICMPv6 checksum, code 0, length, target not multicast, options well formed).
bool parse_nd(std::span<const std::byte> frame, nd_message& m) noexcept;

}  // namespace cxv::sim::wire
