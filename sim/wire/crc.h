// The checks a frame carries: the CRC-32 of Ethernet (and zlib), the InfiniBand Invariant
// CRC over a RoCEv2 or an InfiniBand packet (IBA 7.8.1 "Invariant CRC"; RoCEv2 annex A17
// "RoCEv2", which keeps the ICRC and stands 8 bytes of ones in for the LRH), the Variant CRC
// of an InfiniBand link (IBA 7.8.2 "Variant CRC"), and the Internet checksum of IPv4, UDP
// and ICMPv6 (RFC 1071).
//
// Every function is noexcept and allocation free: the ICRC runs on every packet the model
// sends or receives. Both CRCs fold 64 bytes at a time with PCLMULQDQ where the CPU has it
// (x86-64 since 2010) and use 16-byte slicing tables otherwise and for tails under 16
// bytes; the ICRC masks its variant fields as it loads them, without a masked copy
// (tests/sim/wire:wire_bench measures them against zlib, bench:wire_codec per frame).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace cxv::sim::wire {

// CRC-32 of IEEE 802.3 (reflected polynomial 0x04C11DB7, start all ones, result inverted):
// crc32("123456789") == 0xcbf43926. crc32_update works on the raw register so that a CRC
// can be computed in pieces: crc32(a ++ b) == ~crc32_update(crc32_update(~0u, a), b).
std::uint32_t crc32_update(std::uint32_t state, std::span<const std::byte> bytes) noexcept;
inline std::uint32_t crc32(std::span<const std::byte> bytes) noexcept { return ~crc32_update(~0u, bytes); }

// The ICRC of a RoCEv2 packet: `ip_to_pad` runs from the first byte of the IPv4 or IPv6
// header to the last pad byte (the ICRC's own 4 bytes excluded). The CRC-32 above over: 8
// bytes of ones for the LRH RoCEv2 does not carry, the IP header with its variant fields
// ones (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label, hop limit), the UDP
// header with its checksum ones, the BTH with its variant byte (FECN, BECN and resv6, the
// byte before DestQP) ones, then the rest as it is. The wire carries the result
// little-endian (least significant byte first, as an Ethernet FCS). Precondition:
// ip_to_pad holds at least the IP, UDP and BTH headers.
std::uint32_t icrc_roce(std::span<const std::byte> ip_to_pad, bool ipv6) noexcept;

// The ICRC of an InfiniBand packet: `lrh_to_pad` runs from the LRH to the last pad byte.
// Variant fields are ones: without a GRH the LRH's VL; with one (LNH 0x3) the whole LRH, as
// routers rewrite it, and the GRH's traffic class, flow label and hop limit; the BTH's
// variant byte. Little-endian on the wire. (Checked against an Endace capture of a real
// InfiniBand link in tests/sim/wire/crc_test.cc.) Precondition: lrh_to_pad holds the LRH,
// the GRH its LNH announces, and the BTH.
std::uint32_t icrc_ib(std::span<const std::byte> lrh_to_pad) noexcept;

// The VCRC of an InfiniBand link: CRC-16 with polynomial 0x100B (x^16+x^12+x^3+x+1),
// reflected, start all ones, result inverted, over the LRH through the ICRC. Little-endian
// on the wire.
std::uint16_t vcrc(std::span<const std::byte> lrh_to_icrc) noexcept;

// RFC 1071: the one's complement sum of `bytes` read as big-endian 16-bit words (an odd
// last byte padded with a zero), added to `sum`. Sum a message in pieces of even length
// (but the last), then store ~sum (0xffff for a UDP checksum that comes out 0).
std::uint16_t ones_complement_sum(std::span<const std::byte> bytes, std::uint16_t sum = 0) noexcept;

namespace detail {
// For tests: whether the CPU has PCLMULQDQ, and a switch between it and the tables (not
// thread-safe; the default is PCLMULQDQ where the CPU has it).
bool clmul_available() noexcept;
void use_clmul_for_test(bool on) noexcept;
}  // namespace detail

}  // namespace cxv::sim::wire
