#include "sim/transport/eth_headers.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace cxv::sim {

namespace {

namespace ifc = hw::ifc;

constexpr std::uint16_t kVlan = 0x8100, kIpv4 = 0x0800, kIpv6 = 0x86dd;
constexpr std::uint8_t kUdp = 17, kTcp = 6;

std::uint8_t byte(const std::byte* p) { return std::to_integer<std::uint8_t>(*p); }
std::uint16_t be16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}

// The L4 checksum: the sum of the whole segment, its checksum field included, over the
// pseudo-header folds to 0xffff when it holds.
bool l4_checksum_ok(std::span<const std::byte> seg, const eth_headers& h) {
    return ones_sum(seg, pseudo_header_sum(h, seg.size())) == 0xffff;
}

// A ones' complement sum folded to half its width, the end-around carry included: the
// value plus itself rotated by half its width holds the folded sum in its high half.
std::uint32_t fold32(std::uint64_t s) { return static_cast<std::uint32_t>((s + std::rotr(s, 32)) >> 32); }
std::uint16_t fold16(std::uint32_t s) { return static_cast<std::uint16_t>((s + std::rotr(s, 16)) >> 16); }

// The ones' complement sum of an L4 segment of `seg` bytes whose checksum holds: the
// complement of its pseudo-header's sum (RFC 1071: the whole sums to 0xffff).
std::uint16_t holding_segment_sum(const eth_headers& h, std::size_t seg) noexcept {
    return static_cast<std::uint16_t>(~fold16(fold32(pseudo_header_sum(h, seg))));
}

// An IPv4 packet's sum from its segment's, its header's checksum holding: the header adds
// 0xffff, which changes nothing but a 0 (the end-around carry's other zero).
std::uint16_t with_holding_ipv4_header(std::uint16_t segment) noexcept { return segment == 0 ? 0xffff : segment; }

// ip_packet_sum of an IPv4 packet whose two checksums its sender computed, its L4
// segment of `seg` bytes the rest of the packet.
void known_packet_sum(eth_headers& h, std::size_t seg) noexcept {
    if (h.ip_version != 4) return;
    h.packet_sum = with_holding_ipv4_header(holding_segment_sum(h, seg));
    h.packet_sum_known = true;
}

}  // namespace

// The one's complement sum does not depend on byte order (RFC 1071 2.(B)): the bytes are
// added as little-endian 64-bit words into a 128-bit sum, whose high half counts the
// carries out of the low one (so the adds do not wait on one another's carries), the
// carries are added back in, and the folded sum is swapped to network order at the
// end. Every piece starts at an even offset, so a last odd byte is a word's low byte
// here as it is a big-endian word's high byte there.
std::uint16_t ones_sum(std::span<const std::byte> b, std::uint32_t acc) noexcept {
    static_assert(std::endian::native == std::endian::little);
    const std::byte* p = b.data();
    std::size_t n = b.size();
    unsigned __int128 wide = 0;
    for (; n >= 8; p += 8, n -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        wide += w;
    }
    std::uint64_t tail = 0;  // the last 0-7 bytes, as the low bytes of one more word
    if (n >= 4) {
        std::uint32_t w;
        std::memcpy(&w, p, 4);
        tail = w;
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        std::uint16_t w;
        std::memcpy(&w, p, 2);
        tail |= std::uint64_t{w} << (b.size() & 4) * 8;
        p += 2;
        n -= 2;
    }
    if (n == 1) tail |= std::uint64_t{std::to_integer<std::uint8_t>(*p)} << (b.size() & 6) * 8;
    wide += tail;
    std::uint64_t s = static_cast<std::uint64_t>(wide);
    const auto carries = static_cast<std::uint64_t>(wide >> 64);
    s += carries;
    s += s < carries ? 1 : 0;  // the end-around carry
    const std::uint16_t folded = fold16(fold32(s));
    // Network order, then the caller's sum.
    return fold16(fold32(std::uint64_t{static_cast<std::uint16_t>(folded << 8 | folded >> 8)} + acc));
}

std::uint32_t pseudo_header_sum(const eth_headers& h, std::size_t l4_len) noexcept {
    std::uint32_t acc = 0;
    for (std::size_t i = h.ip_version == 4 ? 12 : 0; i < 16; i += 2) {
        acc += static_cast<std::uint32_t>(h.src_ip[i] << 8 | h.src_ip[i + 1]);
        acc += static_cast<std::uint32_t>(h.dst_ip[i] << 8 | h.dst_ip[i + 1]);
    }
    return acc + h.ip_protocol + static_cast<std::uint32_t>(l4_len);
}

std::uint16_t ip_packet_sum(std::span<const std::byte> f, const eth_headers& h) noexcept {
    if (h.packet_sum_known) return h.packet_sum;
    if (h.ip_version == 0 || f.size() < h.l3_at + (h.ip_version == 4 ? 20u : 40u)) return 0;
    const std::byte* ip = f.data() + h.l3_at;
    const std::size_t ip_len = h.ip_version == 4 ? be16(ip + 2) : 40u + be16(ip + 4);
    const std::size_t end = std::min(f.size(), h.l3_at + ip_len);
    if (end <= h.l4_at) return ones_sum(f.subspan(h.l3_at, end - h.l3_at));
    const std::size_t seg = end - h.l4_at;
    // A checksum that holds makes its part's sum known (RFC 1071): an IPv4 header's is
    // 0xffff, an L4 segment's the complement of its pseudo-header's. (UDP over IPv4
    // without a checksum, and a UDP length short of the packet, are read.)
    const bool l4_whole = h.tcp || (h.udp && be16(f.data() + h.l4_at + 4) == seg && be16(f.data() + h.l4_at + 6) != 0);
    if (h.l3_ok && h.l4_ok && l4_whole && end == h.l3_at + ip_len) {
        const std::uint16_t l4 = holding_segment_sum(h, seg);
        if (h.ip_version == 4) return with_holding_ipv4_header(l4);
        return ones_sum(f.subspan(h.l3_at, h.l4_at - h.l3_at), l4);  // IPv6's header: summed
    }
    return ones_sum(f.subspan(h.l3_at, end - h.l3_at));
}

bool parse_eth(std::span<const std::byte> f, eth_headers& h, bool checksums, wire::ip_checksums known) noexcept {
    h = {};
    const std::byte* p = f.data();
    const std::size_t size = f.size();
    if (size < 14) return false;
    std::memcpy(h.dmac.data(), p, 6);
    std::memcpy(h.smac.data(), p + 6, 6);
    std::size_t at = 12;
    h.ethertype = be16(p + at);
    at += 2;
    if (h.ethertype == kVlan && size >= at + 4) {
        const std::uint16_t tci = be16(p + at);
        h.vlan = 1;
        h.prio = static_cast<std::uint8_t>(tci >> 13);
        h.cfi = static_cast<std::uint8_t>((tci >> 12) & 1);
        h.vid = tci & 0xfff;
        h.ethertype = be16(p + at + 2);
        at += 4;
    }
    h.l3_at = static_cast<std::uint32_t>(at);
    h.read_end = static_cast<std::uint32_t>(std::min(size, at + 1));  // the IP version's byte, looked at
    // The headers are read where they are: a length field that claims more than the frame
    // holds (or an IPv4 total length shorter than its header) does not keep them from
    // steering and RSS, as a card's parser reads them; the packet's checksums are then
    // not reported good (l4_ok). Debian's perftest sends IPv6 frames whose payload
    // length is not their own (raw_ethernet_bw --raw_ipv6), which cards steer.
    std::size_t l3_len = 0;
    bool whole = true;  // the frame holds the length the IP header gives
    const std::byte* ip = p + at;
    if (h.ethertype == kIpv4 && size >= at + 20 && (byte(ip) >> 4) == 4) {
        const std::size_t ihl = (byte(ip) & 0xf) * 4u;
        const std::size_t total = be16(ip + 2);
        h.read_end = static_cast<std::uint32_t>(std::min(size, at + std::max<std::size_t>(20, ihl)));
        if (ihl < 20 || size < at + ihl) return true;
        whole = total >= ihl && size >= at + total;
        h.ip_version = 4;
        h.ihl = static_cast<std::uint8_t>(ihl / 4);
        h.dscp = byte(ip + 1) >> 2;
        h.ecn = byte(ip + 1) & 3;
        const std::uint16_t frag = be16(ip + 6);
        h.fragment = (frag & 0x3fff) != 0;  // MF or an offset
        h.ttl = byte(ip + 8);
        h.ip_protocol = byte(ip + 9);
        std::memcpy(h.src_ip.data() + 12, ip + 12, 4);
        std::memcpy(h.dst_ip.data() + 12, ip + 16, 4);
        h.l3_ok = checksums && (known.l3 || ones_sum(std::span(ip, ihl)) == 0xffff);
        h.l4_at = static_cast<std::uint32_t>(at + ihl);
        l3_len = whole ? total - ihl : size - h.l4_at;
        if ((frag & 0x1fff) != 0) return true;  // not the first fragment: no L4 header
    } else if (h.ethertype == kIpv6 && size >= at + 40 && (byte(ip) >> 4) == 6) {
        const std::size_t payload = be16(ip + 4);
        h.read_end = static_cast<std::uint32_t>(at + 40);
        whole = size >= at + 40 + payload;
        h.ip_version = 6;
        const std::uint8_t tc = static_cast<std::uint8_t>((byte(ip) & 0xf) << 4 | byte(ip + 1) >> 4);
        h.dscp = tc >> 2;
        h.ecn = tc & 3;
        h.flow_label = std::uint32_t{byte(ip + 1) & 0xfu} << 16 | std::uint32_t{byte(ip + 2)} << 8 | byte(ip + 3);
        h.ip_protocol = byte(ip + 6);  // the next header; extension headers are not followed
        h.ttl = byte(ip + 7);
        std::memcpy(h.src_ip.data(), ip + 8, 16);
        std::memcpy(h.dst_ip.data(), ip + 24, 16);
        h.l3_ok = checksums;
        h.l4_at = static_cast<std::uint32_t>(at + 40);
        l3_len = whole ? payload : size - h.l4_at;
    } else {
        return true;
    }
    const std::byte* l4 = p + h.l4_at;
    if (h.ip_protocol == kUdp && l3_len >= 8) {
        h.read_end = h.l4_at + 8;
        h.udp = 1;
        h.sport = be16(l4);
        h.dport = be16(l4 + 2);
        const std::size_t ulen = be16(l4 + 4);
        if (checksums && whole && !h.fragment && ulen >= 8 && ulen <= l3_len) {
            // UDP over IPv4 may carry no checksum (0); over IPv6 it must (RFC 8200 8.1).
            h.l4_ok = known.l4 || (h.ip_version == 4 && be16(l4 + 6) == 0);
            if (!h.l4_ok) {
                h.l4_ok = l4_checksum_ok(std::span(l4, ulen), h);
                h.read_end = 0;  // the payload was read
            }
            if (known.l3 && known.l4 && ulen == l3_len) known_packet_sum(h, ulen);
        }
    } else if (h.ip_protocol == kTcp && l3_len >= 20) {
        h.read_end = h.l4_at + 14;  // through the data offset and the flags
        const std::size_t doff = (byte(l4 + 12) >> 4) * 4u;
        if (doff < 20 || doff > l3_len) return true;
        h.tcp = 1;
        h.sport = be16(l4);
        h.dport = be16(l4 + 2);
        h.tcp_flags = be16(l4 + 12) & 0x1ff;
        h.l4_ok = checksums && whole && !h.fragment && known.l4;
        if (checksums && whole && !h.fragment && !known.l4) {
            h.l4_ok = l4_checksum_ok(std::span(l4, l3_len), h);
            h.read_end = 0;  // the payload was read
        }
        if (checksums && whole && !h.fragment && known.l3 && known.l4) known_packet_sum(h, l3_len);
    }
    return true;
}

const eth_headers* eth_parse_memo::parse_again(std::span<const std::byte> f, bool checksums,
                                               wire::ip_checksums known) noexcept {
    kept_end_ = 0;
    if (!parse_eth(f, kept_, checksums, known)) return nullptr;
    // Kept where its answer rests on bytes the memo holds (at least 16, for its compare).
    if (kept_.read_end >= 16 && kept_.read_end <= bytes_.size()) {
        kept_end_ = kept_.read_end;
        size_ = f.size();
        checksums_ = checksums;
        known_ = known;
        std::memcpy(bytes_.data(), f.data(), kept_.read_end);
    }
    return &kept_;
}

void match_image(const eth_match_fields& h, std::span<std::byte, match_image_bytes> out) noexcept {
    using m = ifc::fte_match_set_lyr_2_4;
    std::byte* p = out.data();
    std::fill(out.begin(), out.end(), std::byte{0});
    if (h.ip_version == 6) {
        ifc::set<ifc::fte_match_set_misc::outer_ipv6_flow_label>(p + m::size_bytes, h.flow_label);
    }
    auto mac_hi = [](const std::array<std::uint8_t, 6>& a) {
        return std::uint32_t{a[0]} << 24 | std::uint32_t{a[1]} << 16 | std::uint32_t{a[2]} << 8 | a[3];
    };
    auto mac_lo = [](const std::array<std::uint8_t, 6>& a) { return std::uint32_t{a[4]} << 8 | a[5]; };
    ifc::set<m::smac_47_16>(p, mac_hi(h.smac));
    ifc::set<m::smac_15_0>(p, mac_lo(h.smac));
    ifc::set<m::dmac_47_16>(p, mac_hi(h.dmac));
    ifc::set<m::dmac_15_0>(p, mac_lo(h.dmac));
    ifc::set<m::ethertype>(p, h.ethertype);
    if (h.vlan) {
        ifc::set<m::cvlan_tag>(p, 1);
        ifc::set<m::first_prio>(p, h.prio);
        ifc::set<m::first_cfi>(p, h.cfi);
        ifc::set<m::first_vid>(p, h.vid);
    }
    if (h.ip_version == 0) return;
    ifc::set<m::ip_version>(p, h.ip_version);
    ifc::set<m::ip_protocol>(p, h.ip_protocol);
    ifc::set<m::ip_dscp>(p, h.dscp);
    ifc::set<m::ip_ecn>(p, h.ecn);
    ifc::set<m::frag>(p, h.fragment ? 1 : 0);
    ifc::set<m::ttl_hoplimit>(p, h.ttl);
    ifc::set<m::ipv4_ihl>(p, h.ihl);
    for (std::size_t i = 0; i < 16; ++i) {
        ifc::set<m::src_ipv4_src_ipv6>(p, i, h.src_ip[i]);
        ifc::set<m::dst_ipv4_dst_ipv6>(p, i, h.dst_ip[i]);
    }
    if (h.udp) {
        ifc::set<m::udp_sport>(p, h.sport);
        ifc::set<m::udp_dport>(p, h.dport);
    } else if (h.tcp) {
        ifc::set<m::tcp_sport>(p, h.sport);
        ifc::set<m::tcp_dport>(p, h.dport);
        ifc::set<m::tcp_flags>(p, h.tcp_flags);
    }
}

std::uint32_t toeplitz(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept {
    // The 32-bit window of the key starting at bit i of the input, slid one bit per input
    // bit; the result is the XOR of the windows where the input bit is 1.
    std::uint32_t result = 0;
    std::uint64_t window = 0;
    for (std::size_t i = 0; i < 8 && i < key.size(); ++i) window = window << 8 | key[i];
    window <<= 8 * (8 - std::min<std::size_t>(8, key.size()));
    std::size_t next_key_byte = 8;
    for (std::size_t byte = 0; byte < input.size(); ++byte) {
        for (int bit = 7; bit >= 0; --bit) {
            if ((input[byte] >> bit) & 1) result ^= static_cast<std::uint32_t>(window >> 32);
            window <<= 1;
        }
        // Refill the window's low byte from the key as its bits move up.
        window |= std::uint64_t{next_key_byte < key.size() ? key[next_key_byte] : 0u};
        ++next_key_byte;
    }
    return result;
}

rx_hash_result rx_hash(const std::byte* tirc, const eth_headers& h) noexcept {
    using t = ifc::tirc;
    using sel = ifc::rx_hash_field_select;
    const auto fn = static_cast<ifc::rx_hash_fn>(ifc::get<t::rx_hash_fn>(tirc));
    if (fn == ifc::rx_hash_fn::NONE || h.ip_version == 0) return {};
    const std::byte* s = ifc::at<t::rx_hash_field_selector_outer>(tirc);
    const unsigned l3 = ifc::get<sel::l3_prot_type>(s);  // 0 IPv4, 1 IPv6
    const unsigned l4 = ifc::get<sel::l4_prot_type>(s);  // 0 TCP, 1 UDP
    const std::uint32_t fields = ifc::get<sel::selected_fields>(s);
    auto has = [&](ifc::rx_hash_field f) { return (fields >> static_cast<unsigned>(f)) & 1; };
    // The packet's L3 must be the selector's; its L4 too, when ports are selected.
    if ((l3 == 0) != (h.ip_version == 4)) return {};
    const bool ports = has(ifc::rx_hash_field::L4_SPORT) || has(ifc::rx_hash_field::L4_DPORT);
    if (ports && !((l4 == 0 && h.tcp) || (l4 == 1 && h.udp))) return {};
    std::array<std::uint8_t, 36> in{};
    std::size_t n = 0;
    const std::size_t from = h.ip_version == 4 ? 12 : 0;
    if (has(ifc::rx_hash_field::SRC_IP)) n = std::copy(h.src_ip.begin() + from, h.src_ip.end(), in.begin() + n) - in.begin();
    if (has(ifc::rx_hash_field::DST_IP)) n = std::copy(h.dst_ip.begin() + from, h.dst_ip.end(), in.begin() + n) - in.begin();
    if (has(ifc::rx_hash_field::L4_SPORT)) {
        in[n++] = static_cast<std::uint8_t>(h.sport >> 8);
        in[n++] = static_cast<std::uint8_t>(h.sport);
    }
    if (has(ifc::rx_hash_field::L4_DPORT)) {
        in[n++] = static_cast<std::uint8_t>(h.dport >> 8);
        in[n++] = static_cast<std::uint8_t>(h.dport);
    }
    rx_hash_result r;
    r.type = static_cast<std::uint8_t>((h.ip_version == 4 ? hw::cqe_rss_hash_ipv4 : hw::cqe_rss_hash_ipv6) |
                                       (ports ? (h.udp ? hw::cqe_rss_hash_udp : hw::cqe_rss_hash_tcp) : 0));
    if (fn == ifc::rx_hash_fn::TOEPLITZ) {
        std::array<std::uint8_t, 40> key{};
        for (std::size_t w = 0; w < t::rx_hash_toeplitz_key::count; ++w) {
            const std::uint32_t v = ifc::get<t::rx_hash_toeplitz_key>(tirc, w);
            for (std::size_t b = 0; b < 4; ++b) key[4 * w + b] = static_cast<std::uint8_t>(v >> (24 - 8 * b));
        }
        r.value = toeplitz(key, std::span(in.data(), n));
    } else {
        // Inverted XOR8: the XOR of the input bytes, inverted (PRM "RX Hash Function").
        std::uint8_t x = 0;
        for (std::size_t i = 0; i < n; ++i) x ^= in[i];
        r.value = static_cast<std::uint8_t>(~x);
    }
    return r;
}

}  // namespace cxv::sim
