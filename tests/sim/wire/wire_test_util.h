// Helpers for the wire tests: hex strings, random packets, field-by-field comparison.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sim/wire/packet.h"

namespace cxv::sim::wire::test {

inline std::vector<std::byte> from_hex(std::string_view s) {
    std::vector<std::byte> out;
    auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
    for (std::size_t i = 0; i + 1 < s.size(); i += 2) {
        out.push_back(static_cast<std::byte>(nib(s[i]) << 4 | nib(s[i + 1])));
    }
    return out;
}

// Two packets from the Wireshark wiki's sample capture "infiniband.pcap" (an Endace DAG card
// on a real InfiniBand link, 2008), LRH through VCRC: frame 11, an RC Acknowledge without
// GRH, and frame 5, a UD SEND Only with a GRH (an IPoIB ARP request, whose payload is
// opaque bytes here).
inline const char* const ib_ack = "00020004000700011140ffff0087040800d40a551f000001a80355503081";
inline const char* const ib_ud_grh =
    "0003c000002100046000000000541b00fe800000000000000002c9020024f636"
    "ff12401bffff000000000000ffffffff6440ffff00ffffff000020af00000b1b"
    "0000040508060000002008001404000180000405fe800000000000000002c902"
    "0024f6360a00012200000000000000000000000000000000000000000a00003a"
    "bd6bd6a88883";

// Every opcode the model knows (headers_of != 0).
inline std::vector<std::uint8_t> known_opcodes() {
    std::vector<std::uint8_t> ops;
    for (unsigned op = 0; op < 256; ++op) {
        if (headers_of(static_cast<std::uint8_t>(op)) != 0) ops.push_back(static_cast<std::uint8_t>(op));
    }
    return ops;
}

// A packet with every field random (within its width), for link and opcode; a payload of
// payload_bytes when the opcode carries one.
inline packet random_packet(std::mt19937_64& rng, link_kind link, std::uint8_t op, std::size_t payload_bytes) {
    auto r = [&](std::uint64_t bits) { return bits >= 64 ? rng() : rng() & ((std::uint64_t{1} << bits) - 1); };
    packet p;
    route& n = p.net;
    n.link = link;
    for (auto& b : n.src_mac) b = static_cast<std::uint8_t>(r(8));
    for (auto& b : n.dst_mac) b = static_cast<std::uint8_t>(r(8));
    // Addresses are link-local only: fe80::/64 with a random interface id, or IPv4-mapped
    // 169.254.0.0/16.
    for (auto* g : {&n.sgid, &n.dgid}) {
        *g = {0xfe, 0x80};
        for (std::size_t i = 8; i < 16; ++i) (*g)[i] = static_cast<std::uint8_t>(r(8));
        if (link == link_kind::roce_v4) {
            *g = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, (*g)[14], (*g)[15]};
        }
    }
    n.traffic_class = static_cast<std::uint8_t>(r(8));
    n.flow_label = link == link_kind::roce_v4 ? 0 : static_cast<std::uint32_t>(r(20));
    n.hop_limit = static_cast<std::uint8_t>(r(8));
    n.udp_src_port = static_cast<std::uint16_t>(r(16));
    n.ip_id = link == link_kind::roce_v4 ? static_cast<std::uint16_t>(r(16)) : 0;
    if (link == link_kind::ib) {
        n.slid = static_cast<std::uint16_t>(r(16));
        n.dlid = static_cast<std::uint16_t>(r(16));
        n.sl = static_cast<std::uint8_t>(r(4));
        n.vl = static_cast<std::uint8_t>(r(4));
        n.grh = r(1);
    }
    p.bth.opcode = op;
    p.bth.se = r(1);
    p.bth.mig_req = r(1);
    p.bth.pkey = static_cast<std::uint16_t>(r(16));
    p.bth.fecn = r(1);
    p.bth.becn = r(1);
    p.bth.dest_qp = static_cast<std::uint32_t>(r(24));
    p.bth.ack_req = r(1);
    p.bth.psn = static_cast<std::uint32_t>(r(24));
    const std::uint16_t h = headers_of(op);
    if (h & has_reth) p.reth = {r(64), static_cast<std::uint32_t>(r(32)), static_cast<std::uint32_t>(r(32))};
    if (h & has_aeth) p.aeth = {static_cast<std::uint8_t>(r(8)), static_cast<std::uint32_t>(r(24))};
    if (h & has_deth) p.deth = {static_cast<std::uint32_t>(r(32)), static_cast<std::uint32_t>(r(24))};
    if (h & (has_immdt | has_ieth)) {
        for (auto& b : p.immdt) b = static_cast<std::byte>(r(8));
    }
    if (h & has_atomiceth) p.atomic = {r(64), static_cast<std::uint32_t>(r(32)), r(64), r(64)};
    if (h & has_atomicacketh) p.atomic_ack = r(64);
    if (h & has_payload) {
        p.payload.resize(payload_bytes);
        for (auto& b : p.payload) b = static_cast<std::byte>(r(8));
    }
    p.bth.pad = static_cast<std::uint8_t>((4 - p.payload.size() % 4) % 4);
    return p;
}

// Every field decode fills (route fields by link), compared.
inline void check_same(const packet& a, const packet& b) {
    CHECK(a.net.link == b.net.link);
    if (a.net.link != link_kind::ib) {
        CHECK(a.net.src_mac == b.net.src_mac);
        CHECK(a.net.dst_mac == b.net.dst_mac);
        CHECK(a.net.udp_src_port == b.net.udp_src_port);
        CHECK(a.net.ip_id == b.net.ip_id);
    } else {
        CHECK(a.net.slid == b.net.slid);
        CHECK(a.net.dlid == b.net.dlid);
        CHECK(a.net.sl == b.net.sl);
        CHECK(a.net.vl == b.net.vl);
        CHECK(a.net.grh == b.net.grh);
    }
    if (a.net.link != link_kind::ib || a.net.grh) {
        CHECK(a.net.sgid == b.net.sgid);
        CHECK(a.net.dgid == b.net.dgid);
        CHECK(a.net.traffic_class == b.net.traffic_class);
        CHECK(a.net.flow_label == b.net.flow_label);
        CHECK(a.net.hop_limit == b.net.hop_limit);
    }
    CHECK(a.bth.opcode == b.bth.opcode);
    CHECK(a.bth.se == b.bth.se);
    CHECK(a.bth.mig_req == b.bth.mig_req);
    CHECK(a.bth.pad == b.bth.pad);
    CHECK(a.bth.tver == b.bth.tver);
    CHECK(a.bth.pkey == b.bth.pkey);
    CHECK(a.bth.fecn == b.bth.fecn);
    CHECK(a.bth.becn == b.bth.becn);
    CHECK(a.bth.dest_qp == b.bth.dest_qp);
    CHECK(a.bth.ack_req == b.bth.ack_req);
    CHECK(a.bth.psn == b.bth.psn);
    CHECK(a.reth.va == b.reth.va);
    CHECK(a.reth.r_key == b.reth.r_key);
    CHECK(a.reth.dma_length == b.reth.dma_length);
    CHECK(a.aeth.syndrome == b.aeth.syndrome);
    CHECK(a.aeth.msn == b.aeth.msn);
    CHECK(a.deth.q_key == b.deth.q_key);
    CHECK(a.deth.src_qp == b.deth.src_qp);
    CHECK(a.immdt == b.immdt);
    CHECK(a.atomic.va == b.atomic.va);
    CHECK(a.atomic.r_key == b.atomic.r_key);
    CHECK(a.atomic.swap_add == b.atomic.swap_add);
    CHECK(a.atomic.compare == b.atomic.compare);
    CHECK(a.atomic_ack == b.atomic_ack);
    CHECK(a.payload == b.payload);
}

}  // namespace cxv::sim::wire::test
