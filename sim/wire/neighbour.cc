#include "sim/wire/neighbour.h"

#include <cstring>

#include "sim/wire/bytes.h"
#include "sim/wire/crc.h"
#include "sim/wire/frame.h"

namespace cxv::sim::wire {
namespace {

void ethernet_header(std::byte* e, const mac_address& dst, const mac_address& src, std::uint16_t type) noexcept {
    put_bytes(e, dst);
    put_bytes(e + 6, src);
    put16(e + 12, type);
}

// The ICMPv6 checksum (RFC 4443 2.3): over the IPv6 pseudo-header and the message.
std::uint16_t icmpv6_checksum(const std::byte* ip6, const std::byte* msg, std::size_t len) noexcept {
    std::byte ph[40]{};
    std::memcpy(ph, ip6 + 8, 32);  // source and destination addresses
    put16(ph + 34, static_cast<std::uint32_t>(len));
    ph[39] = std::byte{ip_protocol_icmpv6};
    const std::uint16_t s = ones_complement_sum({msg, len}, ones_complement_sum({ph, 40}));
    return static_cast<std::uint16_t>(~s);
}

std::size_t build_nd(std::uint8_t type, std::uint8_t flags, const mac_address& src_mac, const gid_bytes& src,
                     const mac_address& dst_mac, const gid_bytes& dst, const gid_bytes& target,
                     std::span<std::byte> out) noexcept {
    if (out.size() < nd_frame_bytes) return 0;
    std::memset(out.data(), 0, nd_frame_bytes);
    std::byte* e = out.data();
    ethernet_header(e, dst_mac, src_mac, ethertype_ipv6);
    std::byte* ip = e + 14;  // RFC 8200; RFC 4861 requires hop limit 255
    ip[0] = std::byte{0x60};
    put16(ip + 4, 32);
    ip[6] = std::byte{ip_protocol_icmpv6};
    ip[7] = std::byte{255};
    put_bytes(ip + 8, src);
    put_bytes(ip + 24, dst);
    std::byte* m = ip + 40;
    m[0] = std::byte{type};
    m[4] = std::byte{flags};
    put_bytes(m + 8, target);
    // RFC 4861 4.6.1: Source (1) or Target (2) Link-Layer Address, length in units of 8 bytes.
    m[24] = std::byte{type == icmpv6_neighbor_solicitation ? std::uint8_t{1} : std::uint8_t{2}};
    m[25] = std::byte{1};
    put_bytes(m + 26, src_mac);
    put16(m + 2, icmpv6_checksum(ip, m, 32));
    return nd_frame_bytes;
}

}  // namespace

gid_bytes link_local_gid(const mac_address& mac) noexcept {
    return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe,
            mac[3], mac[4], mac[5]};
}

bool mac_of_link_local_gid(const gid_bytes& g, mac_address& mac) noexcept {
    if (g[0] != 0xfe || g[1] != 0x80 || g[11] != 0xff || g[12] != 0xfe) return false;
    for (int i = 2; i < 8; ++i) {
        if (g[i] != 0) return false;
    }
    mac = {static_cast<std::uint8_t>(g[8] ^ 0x02), g[9], g[10], g[13], g[14], g[15]};
    return true;
}

gid_bytes ipv4_mapped_gid(const ipv4_address& ip) noexcept {
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ip[0], ip[1], ip[2], ip[3]};
}

gid_bytes solicited_node_address(const gid_bytes& ip) noexcept {
    return {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, ip[13], ip[14], ip[15]};
}

mac_address ipv6_multicast_mac(const gid_bytes& ip) noexcept { return {0x33, 0x33, ip[12], ip[13], ip[14], ip[15]}; }

arp_message arp_reply_to(const arp_message& request, const mac_address& my_mac) noexcept {
    return {.oper = arp_reply, .sha = my_mac, .spa = request.tpa, .tha = request.sha, .tpa = request.spa};
}

std::size_t build_arp(const arp_message& m, const mac_address& eth_dst, std::span<std::byte> out) noexcept {
    if (out.size() < arp_frame_bytes) return 0;
    std::memset(out.data(), 0, arp_frame_bytes);
    std::byte* e = out.data();
    ethernet_header(e, eth_dst, m.sha, ethertype_arp);
    std::byte* a = e + 14;  // RFC 826 "Packet format"
    put16(a, 1);            // ar$hrd: Ethernet
    put16(a + 2, ethertype_ipv4);
    a[4] = std::byte{6};  // ar$hln
    a[5] = std::byte{4};  // ar$pln
    put16(a + 6, m.oper);
    put_bytes(a + 8, m.sha);
    put_bytes(a + 14, m.spa);
    put_bytes(a + 18, m.tha);
    put_bytes(a + 24, m.tpa);
    return arp_frame_bytes;
}

bool parse_arp(std::span<const std::byte> frame, arp_message& m) noexcept {
    if (frame.size() < 14 + 28 || get16(frame.data() + 12) != ethertype_arp) return false;
    const std::byte* a = frame.data() + 14;
    if (get16(a) != 1 || get16(a + 2) != ethertype_ipv4 || get8(a + 4) != 6 || get8(a + 5) != 4) return false;
    m.oper = get16(a + 6);
    if (m.oper != arp_request && m.oper != arp_reply) return false;
    get_bytes(m.sha, a + 8);
    get_bytes(m.spa, a + 14);
    get_bytes(m.tha, a + 18);
    get_bytes(m.tpa, a + 24);
    return true;
}

std::size_t build_neighbour_solicitation(const mac_address& src_mac, const gid_bytes& src, const gid_bytes& target,
                                         std::span<std::byte> out) noexcept {
    const gid_bytes dst = solicited_node_address(target);
    return build_nd(icmpv6_neighbor_solicitation, 0, src_mac, src, ipv6_multicast_mac(dst), dst, target, out);
}

std::size_t build_neighbour_advertisement(const mac_address& my_mac, const gid_bytes& target,
                                          const mac_address& dst_mac, const gid_bytes& dst, bool solicited,
                                          std::span<std::byte> out) noexcept {
    const std::uint8_t flags = (solicited ? 0x40 : 0) | 0x20;  // S, O
    return build_nd(icmpv6_neighbor_advertisement, flags, my_mac, target, dst_mac, dst, target, out);
}

bool parse_nd(std::span<const std::byte> frame, nd_message& m) noexcept {
    if (frame.size() < 14 + 40 + 24 || get16(frame.data() + 12) != ethertype_ipv6) return false;
    const std::byte* ip = frame.data() + 14;
    if (get8(ip) >> 4 != 6 || get8(ip + 6) != ip_protocol_icmpv6 || get8(ip + 7) != 255) return false;
    const std::size_t len = get16(ip + 4);
    if (len < 24 || 14 + 40 + len > frame.size()) return false;
    const std::byte* msg = ip + 40;
    const std::uint8_t type = get8(msg);
    if ((type != icmpv6_neighbor_solicitation && type != icmpv6_neighbor_advertisement) || get8(msg + 1) != 0)
        return false;
    // With the checksum in place the sum comes out all ones, so its complement is 0.
    if (icmpv6_checksum(ip, msg, len) != 0) return false;
    m = nd_message{};
    m.type = type;
    const std::uint8_t flags = get8(msg + 4);
    if (type == icmpv6_neighbor_advertisement) {
        m.router = flags & 0x80;
        m.solicited = flags & 0x40;
        m.override_ = flags & 0x20;
    }
    get_bytes(m.target, msg + 8);
    if (m.target[0] == 0xff) return false;  // a multicast target
    const std::uint8_t lladdr_type = type == icmpv6_neighbor_solicitation ? 1 : 2;
    for (std::size_t o = 24; o < len;) {  // RFC 4861 4.6: type, length in 8-byte units (never 0)
        if (len - o < 2) return false;
        const std::size_t olen = std::size_t{get8(msg + o + 1)} * 8;
        if (olen == 0 || olen > len - o) return false;
        if (get8(msg + o) == lladdr_type && olen == 8) {
            m.has_lladdr = true;
            get_bytes(m.lladdr, msg + o + 2);
        }
        o += olen;
    }
    get_bytes(m.eth_dst, frame.data());
    get_bytes(m.eth_src, frame.data() + 6);
    get_bytes(m.src, ip + 8);
    get_bytes(m.dst, ip + 24);
    return true;
}

}  // namespace cxv::sim::wire
