// A wire::packet as bytes on a link, and back.
//
// RoCEv2 (IBA annex A17 "RoCEv2"): Ethernet II / IPv4 or IPv6 / UDP to port 4791 / BTH,
// extended headers, payload, pad / ICRC. The IP header stands in for the GRH; there is no
// LRH and no VCRC. The frame is padded to Ethernet's 60-byte minimum.
//   IPv4 (RFC 791): DSCP and ECN from route.traffic_class, TTL from route.hop_limit, DF
//   set, the Identification from route.ip_id, a correct header checksum; UDP checksum 0,
//   as Linux rxe and RFC 768 allow.
//   IPv6 (RFC 8200): traffic class, flow label, hop limit from the route; a correct UDP
//   checksum (RFC 8200 8.1 makes it mandatory; rxe sends 0 and accepts 0 since its tunnel
//   socket opts in to RFC 6935 zero checksums, but a valid one is accepted by every
//   receiver, and Wireshark flags a zero one as an error).
// InfiniBand (IBA 7.7 "Local Route Header", 8.3 "Global Route Header"): LRH / GRH when
// route.grh / BTH .. pad / ICRC / VCRC.
//
// encode() and decode_*() never allocate, but for a decoded payload longer than the
// packet's inline payload_buffer (256 bytes) that does not fit the buffer it already has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "sim/wire/packet.h"

namespace cxv::sim::wire {

inline constexpr std::uint16_t roce_v2_udp_port = 4791;  // IANA "roce"
inline constexpr std::uint16_t ethertype_ipv4 = 0x0800, ethertype_arp = 0x0806, ethertype_ipv6 = 0x86dd;
inline constexpr std::uint8_t ip_protocol_udp = 17;
inline constexpr std::uint8_t grh_next_header_bth = 0x1b;  // IBA 8.3.1: the GRH's NxtHdr for IBA transport
inline constexpr std::uint8_t lnh_iba_local = 0x2, lnh_iba_global = 0x3;  // IBA 7.7.6 LRH "Link Next Header"
inline constexpr std::size_t ethernet_header_bytes = 14, ipv4_header_bytes = 20, ipv6_header_bytes = 40,
                             udp_header_bytes = 8, ethernet_min_frame_bytes = 60;  // without the FCS

// The largest path MTU (4096 bytes of payload, IBA "Packet Length") and the largest frame: the
// longest network headers (Ethernet + IPv6 + UDP: 62 bytes, more than LRH + GRH) and
// transport headers (BTH + AtomicETH: 40 bytes) with a full MTU and the ICRC.
inline constexpr std::size_t max_mtu = 4096;
inline constexpr std::size_t max_transport_header_bytes = bth_bytes + atomiceth_bytes;
inline constexpr std::size_t max_frame_bytes = ethernet_header_bytes + ipv6_header_bytes + udp_header_bytes +
                                               max_transport_header_bytes + max_mtu + icrc_bytes;
static_assert(max_frame_bytes == 4202);
static_assert(lrh_bytes + grh_bytes + max_transport_header_bytes + max_mtu + icrc_bytes + vcrc_bytes <
              max_frame_bytes);

// Bytes of the headers after the BTH for the header_bits of an opcode (IBA Table 38).
constexpr std::size_t extended_header_bytes(std::uint16_t h) {
    return ((h & has_deth) ? deth_bytes : 0) + ((h & has_reth) ? reth_bytes : 0) +
           ((h & has_atomiceth) ? atomiceth_bytes : 0) + ((h & has_aeth) ? aeth_bytes : 0) +
           ((h & has_atomicacketh) ? atomicacketh_bytes : 0) + ((h & has_immdt) ? immdt_bytes : 0) +
           ((h & has_ieth) ? ieth_bytes : 0);
}

// The BTH PadCnt for a payload: bytes that round it up to a multiple of 4 (IBA 9.2 "Base
// Transport Header").
constexpr std::uint8_t pad_of(std::size_t payload_bytes) { return static_cast<std::uint8_t>((4 - payload_bytes % 4) % 4); }

// Writes the whole frame for p.net.link into out and returns its length; 0 when out is too
// small, the opcode unknown (headers_of(op) == 0), or a payload given to an opcode that
// carries none. BTH PadCnt comes from the payload's length (p.bth.pad is not read), pad
// bytes are zero. On RoCEv2 the IPv4 addresses are bytes 12..15 of the GIDs (IPv4-mapped).
//
// `later` leaves the ICRC and VCRC (and the IPv6 UDP checksum) zero, for a frame whose
// every reader will take them as correct (decode's crc_check::trusted): one that stays in
// the process and that nobody captures. seal() computes them if a reader needs them after
// all. Linux's loopback device likewise never computes the checksums it offloads.
enum class crc_fill : std::uint8_t { compute, later };
std::size_t encode(const packet& p, std::span<std::byte> out, crc_fill fill = crc_fill::compute) noexcept;
// The ICRC and VCRC (InfiniBand) or the ICRC and IPv6 UDP checksum (RoCEv2, `ethernet`)
// of a frame encode made with crc_fill::later, computed in place. False, changing
// nothing, for a frame whose lengths do not hold.
bool seal(std::span<std::byte> frame, bool ethernet) noexcept;

enum class decode_status : std::uint8_t {
    ok,
    not_roce,      // RoCE: not IPv4/IPv6 UDP to port 4791 (ARP and ND go elsewhere); IB: LNH raw
    malformed,     // lengths, fragments, IP options, unknown opcode, pad, header versions
    bad_checksum,  // the IPv4 header checksum or a non-zero UDP checksum
    bad_icrc,
    bad_vcrc,
};
const char* to_string(decode_status s) noexcept;

// Parse a frame and fill every field of p: the route (MACs; GIDs, IPv4-mapped for IPv4;
// traffic class, flow label, hop limit, UDP source port, IPv4 Identification; on IB LIDs,
// SL, VL and whether a GRH came), the BTH (PadCnt as received), the extended headers the
// opcode has (the others are reset), the payload without pad, grh_raw and grh_present. A
// RoCE packet always has its IP header, so net.grh and grh_present are set; grh_raw holds
// the IPv4 header in its last 20 bytes (the first 20 zero, as rxe leaves them) or the
// IPv6 header (the GRH's place in a UD receive buffer, IBA 11.4.1.1). Trailing Ethernet
// padding is ignored. p is unspecified unless ok.
//
// `trusted` skips the CRCs (and IPv4 and UDP checksums) of a frame its receiver knows
// intact: encoded by this process and never changed since (link::frame_crcs). Every
// other check is made as for any frame.
enum class crc_check : std::uint8_t { verify, trusted };
decode_status decode_roce(std::span<const std::byte> frame, packet& p, crc_check check = crc_check::verify);
decode_status decode_ib(std::span<const std::byte> frame, packet& p, crc_check check = crc_check::verify);

}  // namespace cxv::sim::wire
