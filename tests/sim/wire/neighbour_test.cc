// ARP and IPv6 neighbour discovery frames, and the GID helpers.
#include "sim/wire/neighbour.h"

#include <doctest/doctest.h>

#include <vector>

#include "sim/wire/frame.h"

namespace cxv::sim::wire {
namespace {

std::uint8_t at(const std::vector<std::byte>& f, std::size_t o) { return static_cast<std::uint8_t>(f[o]); }

// The ICMPv6 checksum computed here from RFC 4443 2.3 and RFC 1071, word by word.
std::uint16_t reference_icmpv6_checksum(const std::vector<std::byte>& f) {
    const std::size_t len = std::size_t{at(f, 18)} << 8 | at(f, 19);
    std::vector<std::uint8_t> buf;
    for (std::size_t i = 22; i < 54; ++i) buf.push_back(at(f, i));  // source, destination
    for (int b : {0, 0, int(len >> 8), int(len & 0xff), 0, 0, 0, 58}) buf.push_back(std::uint8_t(b));
    for (std::size_t i = 54; i < 54 + len; ++i) buf.push_back(i == 56 || i == 57 ? 0 : at(f, i));
    std::uint32_t s = 0;
    for (std::size_t i = 0; i < buf.size(); i += 2) {
        s += std::uint32_t{buf[i]} << 8 | (i + 1 < buf.size() ? buf[i + 1] : 0);
    }
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(~s);
}

const mac_address mac_a{0x52, 0x54, 0x00, 0x00, 0x00, 0x01}, mac_b{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};

TEST_CASE("link-local GIDs carry the MAC as a modified EUI-64 and give it back") {
    const gid_bytes g = link_local_gid(mac_a);  // fe80::5054:ff:fe00:1
    const gid_bytes want{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01};
    CHECK(g == want);
    mac_address m{};
    REQUIRE(mac_of_link_local_gid(g, m));
    CHECK(m == mac_a);
    CHECK(!mac_of_link_local_gid(ipv4_mapped_gid({169, 254, 1, 1}), m));
    const gid_bytes v4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 1};
    CHECK(ipv4_mapped_gid({169, 254, 1, 1}) == v4);
    CHECK(is_ipv4_mapped(v4));
    CHECK(!is_ipv4_mapped(g));
    const gid_bytes sn{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x01};
    CHECK(solicited_node_address(g) == sn);
    CHECK(ipv6_multicast_mac(sn) == mac_address{0x33, 0x33, 0xff, 0x00, 0x00, 0x01});
}

TEST_CASE("a neighbour solicitation and its advertisement: build, parse, checksum, addresses") {
    const gid_bytes a = link_local_gid(mac_a), b = link_local_gid(mac_b);
    std::vector<std::byte> ns(nd_frame_bytes), na(nd_frame_bytes);
    REQUIRE(build_neighbour_solicitation(mac_a, a, b, ns) == nd_frame_bytes);
    CHECK(at(ns, 20) == 58);   // next header ICMPv6
    CHECK(at(ns, 21) == 255);  // hop limit
    CHECK((std::uint16_t(at(ns, 56)) << 8 | at(ns, 57)) == reference_icmpv6_checksum(ns));
    nd_message m;
    REQUIRE(parse_nd(ns, m));
    CHECK(m.type == icmpv6_neighbor_solicitation);
    CHECK(m.target == b);
    CHECK(m.has_lladdr);
    CHECK(m.lladdr == mac_a);
    CHECK(m.src == a);
    CHECK(m.dst == solicited_node_address(b));
    CHECK(m.eth_dst == mac_address{0x33, 0x33, 0xff, 0x12, 0x34, 0x56});
    CHECK(m.eth_src == mac_a);

    REQUIRE(build_neighbour_advertisement(mac_b, m.target, m.eth_src, m.src, true, na) == nd_frame_bytes);
    CHECK((std::uint16_t(at(na, 56)) << 8 | at(na, 57)) == reference_icmpv6_checksum(na));
    nd_message r;
    REQUIRE(parse_nd(na, r));
    CHECK(r.type == icmpv6_neighbor_advertisement);
    CHECK(r.solicited);
    CHECK(r.override_);
    CHECK(!r.router);
    CHECK(r.target == b);
    CHECK(r.has_lladdr);
    CHECK(r.lladdr == mac_b);
    CHECK(r.dst == a);
    CHECK(r.eth_dst == mac_a);

    // A wrong checksum, a hop limit that is not 255 (a routed packet), a zero-length option.
    for (std::size_t byte : {57, 21, 79}) {
        auto bad = na;
        bad[byte] ^= std::byte{1};
        if (byte == 79) bad[79] = std::byte{0};
        CHECK(!parse_nd(bad, r));
    }
    // Not RoCE either.
    packet p;
    CHECK(decode_roce(ns, p) == decode_status::not_roce);
    arp_message am;
    CHECK(!parse_arp(ns, am));
}

TEST_CASE("ARP request and reply build and parse") {
    const arp_message req{.oper = arp_request, .sha = mac_a, .spa = {169, 254, 7, 1}, .tha = {}, .tpa = {169, 254, 7, 2}};
    std::vector<std::byte> f(arp_frame_bytes);
    REQUIRE(build_arp(req, broadcast_mac, f) == 60);
    CHECK(std::vector<std::byte>(f.begin(), f.begin() + 6) == std::vector<std::byte>(6, std::byte{0xff}));
    CHECK(at(f, 12) == 0x08);
    CHECK(at(f, 13) == 0x06);
    arp_message got;
    REQUIRE(parse_arp(f, got));
    CHECK(got.sha == mac_a);
    CHECK(got.tpa == req.tpa);
    const arp_message rep = arp_reply_to(got, mac_b);
    CHECK(rep.oper == arp_reply);
    CHECK(rep.sha == mac_b);
    CHECK(rep.spa == req.tpa);
    CHECK(rep.tha == mac_a);
    CHECK(rep.tpa == req.spa);
    f[21] = std::byte{3};  // RARP request: not ours
    CHECK(!parse_arp(f, got));
    CHECK(build_arp(req, broadcast_mac, std::span(f).first(59)) == 0);
}

}  // namespace
}  // namespace cxv::sim::wire
