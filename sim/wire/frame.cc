#include "sim/wire/frame.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "sim/wire/bytes.h"
#include "sim/wire/crc.h"

namespace cxv::sim::wire {
namespace {

static_assert(std::endian::native == std::endian::little, "the ICRC and VCRC are stored as native words");

// headers_of and the bytes of the extended headers, per opcode, looked up once per packet.
struct opcode_info {
    std::uint16_t headers;
    std::uint8_t extended_bytes;
};
constexpr std::array<opcode_info, 256> opcode_table = [] {
    std::array<opcode_info, 256> t{};
    for (unsigned op = 0; op < 256; ++op) {
        const std::uint16_t h = headers_of(static_cast<std::uint8_t>(op));
        t[op] = {h, static_cast<std::uint8_t>(extended_header_bytes(h))};
    }
    return t;
}();

// BTH .. pad for a packet; 0 when it cannot be encoded.
std::size_t transport_bytes(const packet& p, opcode_info o) noexcept {
    if (o.headers == 0 || (!(o.headers & has_payload) && !p.payload.empty())) return 0;
    return bth_bytes + o.extended_bytes + p.payload.size() + pad_of(p.payload.size());
}

// IBA 9.2 "Base Transport Header" through the pad, in the order of IBA Table 38 "Header
// Formats". `out` holds transport_bytes(p) and the ICRC after them (the pad is stored as a
// word of zeros that runs into the ICRC's place).
void encode_transport(const packet& p, std::uint16_t h, std::byte* out) noexcept {
    const std::uint32_t pad = pad_of(p.payload.size());
    const bth& b = p.bth;
    put32(out, std::uint32_t{b.opcode} << 24 | (b.se ? 0x80u << 16 : 0) | (b.mig_req ? 0x40u << 16 : 0) |
                   pad << 20 | (b.tver & 0xfu) << 16 | b.pkey);
    put32(out + 4, (b.fecn ? 0x80u << 24 : 0) | (b.becn ? 0x40u << 24 : 0) | (b.dest_qp & 0xffffffu));
    put32(out + 8, (b.ack_req ? 0x80u << 24 : 0) | (b.psn & 0xffffffu));
    std::byte* q = out + bth_bytes;
    if (h & has_deth) {  // IBA 9.3.2 "Datagram Extended Transport Header"
        put32(q, p.deth.q_key);
        put32(q + 4, p.deth.src_qp & 0xffffffu);  // a reserved byte, SrcQP
        q += deth_bytes;
    }
    if (h & has_reth) {  // IBA 9.3.3 "RDMA Extended Transport Header"
        put64(q, p.reth.va);
        put32(q + 8, p.reth.r_key);
        put32(q + 12, p.reth.dma_length);
        q += reth_bytes;
    }
    if (h & has_atomiceth) {  // IBA 9.3.4 "Atomic Extended Transport Header"
        put64(q, p.atomic.va);
        put32(q + 8, p.atomic.r_key);
        put64(q + 12, p.atomic.swap_add);
        put64(q + 20, p.atomic.compare);
        q += atomiceth_bytes;
    }
    if (h & has_aeth) {  // IBA 9.3.5 "ACK Extended Transport Header"
        put32(q, std::uint32_t{p.aeth.syndrome} << 24 | (p.aeth.msn & 0xffffffu));
        q += aeth_bytes;
    }
    if (h & has_atomicacketh) {  // IBA 9.3.6 "Atomic Acknowledge Extended Transport Header"
        put64(q, p.atomic_ack);
        q += atomicacketh_bytes;
    }
    if (h & (has_immdt | has_ieth)) {  // ImmDt or IETH, kept as the bytes on the wire
        std::memcpy(q, p.immdt.data(), 4);
        q += 4;
    }
    if (!p.payload.empty()) std::memcpy(q, p.payload.data(), p.payload.size());
    put_le32(q + p.payload.size(), 0);  // the pad (3 bytes at most); the ICRC overwrites the rest
}

decode_status decode_transport(std::span<const std::byte> t, packet& p) {
    if (t.size() < bth_bytes || t.size() % 4 != 0) return decode_status::malformed;
    const std::byte* in = t.data();
    bth& b = p.bth;
    const std::uint32_t w0 = get32(in), w1 = get32(in + 4), w2 = get32(in + 8);
    b.opcode = static_cast<std::uint8_t>(w0 >> 24);
    const opcode_info o = opcode_table[b.opcode];
    const std::uint16_t h = o.headers;
    if (h == 0) return decode_status::malformed;
    b.se = w0 & 0x800000;
    b.mig_req = w0 & 0x400000;
    b.pad = (w0 >> 20) & 0x3;
    b.tver = (w0 >> 16) & 0xf;
    b.pkey = static_cast<std::uint16_t>(w0);
    b.fecn = w1 & 0x80000000u;
    b.becn = w1 & 0x40000000u;
    b.dest_qp = w1 & 0xffffff;
    b.ack_req = w2 & 0x80000000u;
    b.psn = w2 & 0xffffff;
    if (b.tver != 0) return decode_status::malformed;  // IBA 9.2: TVer 0 is the only version
    const std::size_t headers = bth_bytes + o.extended_bytes;
    if (t.size() < headers || t.size() - headers < b.pad) return decode_status::malformed;
    const std::size_t payload = t.size() - headers - b.pad;
    if (!(h & has_payload) && (payload != 0 || b.pad != 0)) return decode_status::malformed;
    const std::byte* q = in + bth_bytes;
    p.deth = {};
    p.reth = {};
    p.atomic = {};
    p.aeth = {};
    p.atomic_ack = 0;
    p.immdt = {};
    if (h & has_deth) {
        p.deth.q_key = get32(q);
        p.deth.src_qp = get24(q + 5);
        q += deth_bytes;
    }
    if (h & has_reth) {
        p.reth.va = get64(q);
        p.reth.r_key = get32(q + 8);
        p.reth.dma_length = get32(q + 12);
        q += reth_bytes;
    }
    if (h & has_atomiceth) {
        p.atomic.va = get64(q);
        p.atomic.r_key = get32(q + 8);
        p.atomic.swap_add = get64(q + 12);
        p.atomic.compare = get64(q + 20);
        q += atomiceth_bytes;
    }
    if (h & has_aeth) {
        p.aeth.syndrome = get8(q);
        p.aeth.msn = get24(q + 1);
        q += aeth_bytes;
    }
    if (h & has_atomicacketh) {
        p.atomic_ack = get64(q);
        q += atomicacketh_bytes;
    }
    if (h & (has_immdt | has_ieth)) {
        std::memcpy(p.immdt.data(), q, 4);
        q += 4;
    }
    p.payload.assign(q, q + payload);
    return decode_status::ok;
}

// The one's complement sum of the UDP pseudo-header (RFC 768; RFC 8200 8.1 for IPv6).
std::uint16_t pseudo_header_sum(const std::byte* ip, bool ipv6, std::uint32_t udp_length) noexcept {
    std::byte ph[40];
    std::size_t n;
    if (ipv6) {
        std::memcpy(ph, ip + 8, 32);
        put32(ph + 32, udp_length);
        put32(ph + 36, ip_protocol_udp);
        n = 40;
    } else {
        std::memcpy(ph, ip + 12, 8);
        put16(ph + 8, ip_protocol_udp);
        put16(ph + 10, udp_length);
        n = 12;
    }
    return ones_complement_sum({ph, n});
}

// The ICRC of a RoCEv2 packet whose IP header starts at `ip` and whose UDP datagram is
// udp_len bytes, and over IPv6 the UDP checksum, into the places encode left for them.
void seal_roce(std::byte* ip, bool v6, std::size_t udp_len) noexcept {
    const std::size_t ip_bytes = v6 ? ipv6_header_bytes : ipv4_header_bytes;
    std::byte* udp = ip + ip_bytes;
    const std::size_t t = udp_len - udp_header_bytes - icrc_bytes;
    put16(udp + 6, 0);
    put_le32(udp + udp_header_bytes + t, icrc_roce({ip, ip_bytes + udp_header_bytes + t}, v6));
    if (v6) {  // the ICRC masks the UDP checksum, so it may come last
        std::uint16_t s = pseudo_header_sum(ip, true, static_cast<std::uint32_t>(udp_len));
        s = ones_complement_sum({udp, udp_len}, s);
        const std::uint16_t c = static_cast<std::uint16_t>(~s);
        put16(udp + 6, c == 0 ? 0xffff : c);
    }
}

// The ICRC and VCRC of an InfiniBand packet of pkt bytes from the LRH to the ICRC.
void seal_ib(std::byte* l, std::size_t pkt) noexcept {
    std::byte* icrc = l + pkt - icrc_bytes;
    put_le32(icrc, icrc_ib({l, pkt - icrc_bytes}));
    const std::uint16_t v = vcrc({l, pkt});
    icrc[4] = static_cast<std::byte>(v);
    icrc[5] = static_cast<std::byte>(v >> 8);
}

std::size_t encode_roce(const packet& p, std::uint16_t h, std::span<std::byte> out, std::size_t t, crc_fill fill) noexcept {
    const bool v6 = p.net.link == link_kind::roce_v6;
    const std::size_t ip_bytes = v6 ? ipv6_header_bytes : ipv4_header_bytes;
    const std::size_t udp_len = udp_header_bytes + t + icrc_bytes;
    const std::size_t len = ethernet_header_bytes + ip_bytes + udp_len;
    const std::size_t frame = std::max(len, ethernet_min_frame_bytes);
    if (out.size() < frame) return 0;
    std::byte* e = out.data();
    put_bytes(e, p.net.dst_mac);  // IEEE 802.3 Ethernet II header
    put_bytes(e + 6, p.net.src_mac);
    put16(e + 12, v6 ? ethertype_ipv6 : ethertype_ipv4);
    std::byte* ip = e + ethernet_header_bytes;
    if (v6) {  // RFC 8200 "IPv6 Header Format"
        put32(ip, 6u << 28 | std::uint32_t{p.net.traffic_class} << 20 | (p.net.flow_label & 0xfffffu));
        put16(ip + 4, static_cast<std::uint32_t>(udp_len));
        put8(ip + 6, ip_protocol_udp);
        put8(ip + 7, p.net.hop_limit);
        put_bytes(ip + 8, p.net.sgid);
        put_bytes(ip + 24, p.net.dgid);
    } else {  // RFC 791 "Internet Header Format"
        put8(ip, 0x45);  // version 4, IHL 5 words
        put8(ip + 1, p.net.traffic_class);
        put16(ip + 2, static_cast<std::uint32_t>(ipv4_header_bytes + udp_len));
        put16(ip + 4, p.net.ip_id);
        put16(ip + 6, 0x4000);  // flags: DF
        put8(ip + 8, p.net.hop_limit);
        put8(ip + 9, ip_protocol_udp);
        put16(ip + 10, 0);
        std::memcpy(ip + 12, p.net.sgid.data() + 12, 4);
        std::memcpy(ip + 16, p.net.dgid.data() + 12, 4);
        put16(ip + 10, static_cast<std::uint16_t>(~ones_complement_sum({ip, ipv4_header_bytes})));
    }
    std::byte* udp = ip + ip_bytes;  // RFC 768
    put16(udp, p.net.udp_src_port);
    put16(udp + 2, roce_v2_udp_port);
    put16(udp + 4, static_cast<std::uint32_t>(udp_len));
    put16(udp + 6, 0);
    encode_transport(p, h, udp + udp_header_bytes);
    put_le32(udp + udp_header_bytes + t, 0);
    if (fill == crc_fill::compute) seal_roce(ip, v6, udp_len);
    std::memset(e + len, 0, frame - len);
    return frame;
}

std::size_t encode_ib(const packet& p, std::uint16_t h, std::span<std::byte> out, std::size_t t, crc_fill fill) noexcept {
    const std::size_t grh = p.net.grh ? grh_bytes : 0;
    const std::size_t len = lrh_bytes + grh + t + icrc_bytes + vcrc_bytes;
    if (out.size() < len) return 0;
    std::byte* l = out.data();  // IBA 7.7 "Local Route Header"
    // VL, LVer 0, SL, LNH, DLID; PktLen (LRH .. ICRC in words), SLID.
    put32(l, (p.net.vl & 0xfu) << 28 | (p.net.sl & 0xfu) << 20 | (grh ? lnh_iba_global : lnh_iba_local) << 16 |
                 p.net.dlid);
    put32(l + 4, static_cast<std::uint32_t>((len - vcrc_bytes) / 4) << 16 | p.net.slid);
    if (grh) {  // IBA 8.3 "Global Route Header"
        std::byte* g = l + lrh_bytes;
        put32(g, 6u << 28 | std::uint32_t{p.net.traffic_class} << 20 | (p.net.flow_label & 0xfffffu));
        put16(g + 4, static_cast<std::uint32_t>(t + icrc_bytes));  // PayLen: BTH .. ICRC
        put8(g + 6, grh_next_header_bth);
        put8(g + 7, p.net.hop_limit);
        put_bytes(g + 8, p.net.sgid);
        put_bytes(g + 24, p.net.dgid);
    }
    encode_transport(p, h, l + lrh_bytes + grh);
    if (fill == crc_fill::compute) {
        seal_ib(l, len - vcrc_bytes);
    } else {
        std::memset(l + len - icrc_bytes - vcrc_bytes, 0, icrc_bytes + vcrc_bytes);
    }
    return len;
}

}  // namespace

std::size_t encode(const packet& p, std::span<std::byte> out, crc_fill fill) noexcept {
    const opcode_info o = opcode_table[p.bth.opcode];
    const std::size_t t = transport_bytes(p, o);
    if (t == 0) return 0;
    return p.net.link == link_kind::ib ? encode_ib(p, o.headers, out, t, fill) : encode_roce(p, o.headers, out, t, fill);
}

bool seal(std::span<std::byte> frame, bool ethernet) noexcept {
    std::byte* f = frame.data();
    if (!ethernet) {
        if (frame.size() < lrh_bytes + bth_bytes + icrc_bytes + vcrc_bytes) return false;
        const std::size_t pkt = std::size_t{get16(f + 4) & 0x7ffu} * 4;  // LRH .. ICRC
        if (pkt + vcrc_bytes != frame.size() || pkt < lrh_bytes + bth_bytes + icrc_bytes) return false;
        seal_ib(f, pkt);
        return true;
    }
    if (frame.size() < ethernet_header_bytes + ipv4_header_bytes) return false;
    const std::uint16_t type = get16(f + 12);
    if (type != ethertype_ipv4 && type != ethertype_ipv6) return false;
    const bool v6 = type == ethertype_ipv6;
    std::byte* ip = f + ethernet_header_bytes;
    const std::size_t ip_bytes = v6 ? ipv6_header_bytes : ipv4_header_bytes;
    if (frame.size() < ethernet_header_bytes + ip_bytes + udp_header_bytes) return false;
    const std::size_t udp_len = get16(ip + ip_bytes + 4);
    if (udp_len < udp_header_bytes + bth_bytes + icrc_bytes ||
        ethernet_header_bytes + ip_bytes + udp_len > frame.size()) {
        return false;
    }
    seal_roce(ip, v6, udp_len);
    return true;
}

const char* to_string(decode_status s) noexcept {
    switch (s) {
    case decode_status::ok: return "ok";
    case decode_status::not_roce: return "not_roce";
    case decode_status::malformed: return "malformed";
    case decode_status::bad_checksum: return "bad_checksum";
    case decode_status::bad_icrc: return "bad_icrc";
    case decode_status::bad_vcrc: return "bad_vcrc";
    }
    return "?";
}

decode_status decode_roce(std::span<const std::byte> frame, packet& p, crc_check check) {
    if (frame.size() < ethernet_header_bytes) return decode_status::malformed;
    const std::byte* e = frame.data();
    const std::uint16_t type = get16(e + 12);
    if (type != ethertype_ipv4 && type != ethertype_ipv6) return decode_status::not_roce;
    const bool v6 = type == ethertype_ipv6;
    const std::byte* ip = e + ethernet_header_bytes;
    const std::size_t avail = frame.size() - ethernet_header_bytes;
    const std::size_t ip_bytes = v6 ? ipv6_header_bytes : ipv4_header_bytes;
    if (avail < ip_bytes) return decode_status::malformed;
    std::size_t ip_len;
    if (v6) {
        if (get8(ip) >> 4 != 6) return decode_status::malformed;
        if (get8(ip + 6) != ip_protocol_udp) return decode_status::not_roce;  // extension headers too
        ip_len = ipv6_header_bytes + get16(ip + 4);
    } else {
        if (get8(ip) != 0x45) return decode_status::malformed;  // IPv4 without options
        if (check == crc_check::verify && ones_complement_sum({ip, ipv4_header_bytes}) != 0xffff) {
            return decode_status::bad_checksum;
        }
        if (get8(ip + 9) != ip_protocol_udp) return decode_status::not_roce;
        if ((get16(ip + 6) & 0x3fff) != 0) return decode_status::malformed;  // a fragment (MF or offset)
        ip_len = get16(ip + 2);
    }
    if (ip_len > avail || ip_len < ip_bytes + udp_header_bytes) return decode_status::malformed;
    const std::byte* udp = ip + ip_bytes;
    if (get16(udp + 2) != roce_v2_udp_port) return decode_status::not_roce;
    const std::size_t udp_len = get16(udp + 4);
    if (udp_len != ip_len - ip_bytes) return decode_status::malformed;
    // 0: no checksum (IPv4; IPv6 from rxe and RFC 6935 tunnels)
    if (check == crc_check::verify && get16(udp + 6) != 0) {
        const std::uint16_t s = pseudo_header_sum(ip, v6, static_cast<std::uint32_t>(udp_len));
        if (ones_complement_sum({udp, udp_len}, s) != 0xffff) return decode_status::bad_checksum;
    }
    if (udp_len < udp_header_bytes + bth_bytes + icrc_bytes) return decode_status::malformed;
    const std::size_t t = udp_len - udp_header_bytes - icrc_bytes;
    if (check == crc_check::verify &&
        icrc_roce({ip, ip_bytes + udp_header_bytes + t}, v6) != get_le32(udp + udp_header_bytes + t)) {
        return decode_status::bad_icrc;
    }
    const decode_status st = decode_transport({udp + udp_header_bytes, t}, p);
    if (st != decode_status::ok) return st;

    route& r = p.net;
    r = route{};
    r.link = v6 ? link_kind::roce_v6 : link_kind::roce_v4;
    get_bytes(r.dst_mac, e);
    get_bytes(r.src_mac, e + 6);
    r.grh = true;
    p.grh_raw = {};
    if (v6) {
        const std::uint32_t w = get32(ip);
        r.traffic_class = static_cast<std::uint8_t>(w >> 20);
        r.flow_label = w & 0xfffff;
        r.hop_limit = get8(ip + 7);
        get_bytes(r.sgid, ip + 8);
        get_bytes(r.dgid, ip + 24);
        std::memcpy(p.grh_raw.data(), ip, ipv6_header_bytes);
    } else {
        r.traffic_class = get8(ip + 1);
        r.ip_id = get16(ip + 4);
        r.hop_limit = get8(ip + 8);
        r.sgid[10] = r.sgid[11] = r.dgid[10] = r.dgid[11] = 0xff;  // ::ffff:a.b.c.d
        std::memcpy(r.sgid.data() + 12, ip + 12, 4);
        std::memcpy(r.dgid.data() + 12, ip + 16, 4);
        std::memcpy(p.grh_raw.data() + 20, ip, ipv4_header_bytes);
    }
    r.udp_src_port = get16(udp);
    p.grh_present = true;
    return decode_status::ok;
}

decode_status decode_ib(std::span<const std::byte> frame, packet& p, crc_check check) {
    if (frame.size() < lrh_bytes + bth_bytes + icrc_bytes + vcrc_bytes) return decode_status::malformed;
    const std::byte* l = frame.data();
    const std::uint8_t lnh = get8(l + 1) & 0x3;
    if (lnh != lnh_iba_local && lnh != lnh_iba_global) return decode_status::not_roce;  // raw IPv6 / raw
    if ((get8(l) & 0xf) != 0) return decode_status::malformed;                          // LVer
    const std::size_t pkt = std::size_t{get16(l + 4) & 0x7ffu} * 4;
    if (pkt + vcrc_bytes != frame.size()) return decode_status::malformed;
    const std::size_t grh = lnh == lnh_iba_global ? grh_bytes : 0;
    if (pkt < lrh_bytes + grh + bth_bytes + icrc_bytes) return decode_status::malformed;
    const std::byte* g = l + lrh_bytes;
    if (grh && (get8(g) >> 4 != 6 || get8(g + 6) != grh_next_header_bth ||
                get16(g + 4) != pkt - lrh_bytes - grh_bytes))
        return decode_status::malformed;
    const std::uint16_t v = static_cast<std::uint16_t>(get8(l + pkt) | get8(l + pkt + 1) << 8);
    const std::size_t t = pkt - lrh_bytes - grh - icrc_bytes;
    if (check == crc_check::verify) {
        if (vcrc({l, pkt}) != v) return decode_status::bad_vcrc;
        if (icrc_ib({l, lrh_bytes + grh + t}) != get_le32(l + lrh_bytes + grh + t)) return decode_status::bad_icrc;
    }
    const decode_status st = decode_transport({l + lrh_bytes + grh, t}, p);
    if (st != decode_status::ok) return st;

    route& r = p.net;
    r = route{};
    r.link = link_kind::ib;
    r.vl = get8(l) >> 4;
    r.sl = get8(l + 1) >> 4;
    r.dlid = get16(l + 2);
    r.slid = get16(l + 6);
    r.grh = grh != 0;
    p.grh_raw = {};
    p.grh_present = r.grh;
    if (r.grh) {
        const std::uint32_t w = get32(g);
        r.traffic_class = static_cast<std::uint8_t>(w >> 20);
        r.flow_label = w & 0xfffff;
        r.hop_limit = get8(g + 7);
        get_bytes(r.sgid, g + 8);
        get_bytes(r.dgid, g + 24);
        std::memcpy(p.grh_raw.data(), g, grh_bytes);
    }
    return decode_status::ok;
}

}  // namespace cxv::sim::wire
