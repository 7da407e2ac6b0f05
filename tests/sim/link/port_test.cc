// A function's port between engine packets and the segment: neighbours resolved with
// ARP and IPv6 neighbour discovery (answered only for the function's own addresses),
// frames with a bad ICRC dropped and counted, the link faults, the pcap.
#include "sim/link/port.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sim/wire/frame.h"
#include "tests/sim/link/port_pair.h"
#include "sim/wire/neighbour.h"
#include "sim/wire/pcap.h"

namespace cxv::sim::link {
namespace {

using test::pair;

using clock_type = std::chrono::steady_clock;
using gid = std::array<std::uint8_t, 16>;

wire::packet send_only(const gid& dgid, std::uint32_t psn, std::size_t bytes = 100) {
    wire::packet p;
    p.net.link = wire::is_ipv4_mapped(dgid) ? wire::link_kind::roce_v4 : wire::link_kind::roce_v6;
    p.net.dgid = dgid;
    p.net.sgid = wire::ipv4_mapped_gid({169, 254, 9, 1});
    if (p.net.link == wire::link_kind::roce_v6) p.net.sgid = wire::link_local_gid({0x02, 0xc5, 0, 0, 0, 1});
    p.bth.opcode = wire::opcode::RC | wire::opcode::SEND_ONLY;
    p.bth.dest_qp = 0x123;
    p.bth.psn = psn;
    p.payload.assign(bytes, std::byte{0x5a});
    return p;
}

TEST_CASE("an IPv4 destination is resolved with ARP, answered by the port that has the address") {
    pair x("port-test-arp");
    const auto now = clock_type::now();
    CHECK(x.a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 2}), 1), now) == port::sent::held);  // for ARP
    CHECK(x.a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 2}), 2), now) == port::sent::held);
    x.settle();
    CHECK(x.a->counters().arp_sent == 1);
    CHECK(x.b->counters().arp_answered == 1);
    REQUIRE(x.got_b.size() == 2);
    CHECK(x.got_b[0].bth.psn == 1);  // held packets go in order
    CHECK(x.got_b[1].bth.psn == 2);
    CHECK(x.got_b[0].net.dst_mac == x.cb.mac);
    CHECK(x.got_b[0].net.src_mac == x.ca.mac);
    CHECK(x.got_b[0].payload.size() == 100);
    // Learned: the next one goes at once; b learned a from its request too.
    CHECK(x.a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 2}), 3), clock_type::now()) == port::sent::wire);
    CHECK(x.b->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 1}), 4), clock_type::now()) == port::sent::wire);
    x.settle();
    CHECK(x.got_b.size() == 3);
    CHECK(x.got_a.size() == 1);
    CHECK(x.a->counters().arp_sent == 1);
    CHECK(x.b->counters().arp_sent == 0);
}

TEST_CASE("a port's own IPv4 address needs no ARP: the packet comes back to the port") {
    pair x("port-test-self");
    CHECK(x.a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 1}), 7), clock_type::now()) == port::sent::wire);
    x.settle();
    CHECK(x.a->counters().arp_sent == 0);
    REQUIRE(x.got_a.size() == 1);
    CHECK(x.got_a[0].bth.psn == 7);
    CHECK(x.got_a[0].net.dst_mac == x.ca.mac);
    CHECK(x.got_b.empty());
}

TEST_CASE("nobody answers for an address nobody has: the packets are dropped after the retries") {
    pair x("port-test-noarp");
    CHECK(x.a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 77}), 1), clock_type::now()) == port::sent::held);
    const auto end = clock_type::now() + std::chrono::seconds(3);
    while (x.a->counters().unresolved == 0 && clock_type::now() < end) x.settle();
    CHECK(x.a->counters().unresolved == 1);
    CHECK(x.a->counters().arp_sent == 5);
    CHECK(x.b->counters().arp_answered == 0);
    CHECK(x.got_b.empty());
}

TEST_CASE("a link-local GID carries its MAC; another IPv6 address is resolved with neighbour discovery") {
    pair x("port-test-nd");
    CHECK(x.a->transmit(send_only(wire::link_local_gid(x.cb.mac), 1), clock_type::now()) == port::sent::wire);
    x.settle();
    CHECK(x.got_b.size() == 1);
    CHECK(x.a->counters().nd_sent == 0);
    // b also has fe80::1 (not EUI-64): a must ask for it.
    gid other{0xfe, 0x80};
    other[15] = 1;
    x.tb.roce_addresses[2].source_l3_address = other;
    CHECK(x.a->transmit(send_only(other, 2), clock_type::now()) == port::sent::held);
    x.settle();
    CHECK(x.a->counters().nd_sent == 1);
    CHECK(x.b->counters().nd_answered == 1);
    REQUIRE(x.got_b.size() == 2);
    CHECK(x.got_b[1].net.dgid == other);
}

TEST_CASE("a corrupted frame fails its ICRC: dropped and counted, never delivered") {
    device_config::link_faults f;
    f.corrupt = 1.0;
    pair x("port-test-corrupt", port_type::ETHERNET, f);
    for (std::uint32_t i = 0; i < 20; ++i) x.a->transmit(send_only(wire::link_local_gid(x.cb.mac), i), clock_type::now());
    x.settle();
    CHECK(x.a->counters().fault_corrupted == 20);
    CHECK(x.got_b.empty());
    // Every corrupted bit is in the part the ICRC covers, or makes it no RoCE frame.
    CHECK(x.b->counters().bad_crc + x.b->counters().not_for_us + x.b->counters().malformed == 20);
    INFO("bad_crc " << x.b->counters().bad_crc << " not_for_us " << x.b->counters().not_for_us << " malformed " << x.b->counters().malformed);
    CHECK(x.b->counters().bad_crc > 10);
}

TEST_CASE("drop, duplicate, reorder and delay") {
    const gid to = wire::link_local_gid({0x02, 0xc5, 0, 0, 0, 2});
    SUBCASE("drop everything") {
        device_config::link_faults f;
        f.drop = 1.0;
        pair x("port-test-drop", port_type::ETHERNET, f);
        x.a->transmit(send_only(to, 1), clock_type::now());
        x.settle();
        CHECK(x.got_b.empty());
        CHECK(x.a->counters().fault_dropped == 1);
    }
    SUBCASE("duplicate everything") {
        device_config::link_faults f;
        f.duplicate = 1.0;
        pair x("port-test-dup", port_type::ETHERNET, f);
        x.a->transmit(send_only(to, 1), clock_type::now());
        x.settle();
        REQUIRE(x.got_b.size() == 2);
        CHECK(x.got_b[0].bth.psn == x.got_b[1].bth.psn);
    }
    SUBCASE("reorder: a held frame goes after the next") {
        device_config::link_faults f;
        f.reorder = 0.5;
        f.seed = 3;
        pair x("port-test-reorder", port_type::ETHERNET, f);
        for (std::uint32_t i = 0; i < 100; ++i) x.a->transmit(send_only(to, i), clock_type::now());
        x.a->set_faults({});
        x.a->transmit(send_only(to, 100), clock_type::now());  // releases a held one, if any
        x.settle();
        REQUIRE(x.got_b.size() == 101);
        unsigned swapped = 0;
        for (std::size_t i = 1; i < x.got_b.size(); ++i) swapped += x.got_b[i].bth.psn < x.got_b[i - 1].bth.psn;
        CHECK(swapped > 10);
        CHECK(swapped == x.a->counters().fault_reordered);
    }
    SUBCASE("delay") {
        device_config::link_faults f;
        f.delay = std::chrono::milliseconds(50);
        pair x("port-test-delay", port_type::ETHERNET, f);
        const auto t0 = clock_type::now();
        x.a->transmit(send_only(to, 1), t0);
        x.b->poll(clock_type::now(), [&](wire::packet& p, std::size_t) { x.got_b.push_back(p); });
        CHECK(x.got_b.empty());
        while (x.got_b.empty() && clock_type::now() < t0 + std::chrono::seconds(2)) x.settle();
        CHECK(x.got_b.size() == 1);
        CHECK(clock_type::now() - t0 >= std::chrono::milliseconds(50));
    }
}

TEST_CASE("InfiniBand: LRH-routed by LID, the VCRC and ICRC checked") {
    pair x("port-test-ib", port_type::IB);
    wire::packet p;
    p.net.link = wire::link_kind::ib;
    p.net.slid = 1;
    p.net.dlid = 2;
    p.bth.opcode = wire::opcode::UD | wire::opcode::SEND_ONLY;
    p.deth.q_key = 0x11;
    p.deth.src_qp = 0x44;
    p.payload.assign(33, std::byte{1});
    CHECK(x.a->transmit(std::move(p), clock_type::now()) == port::sent::wire);
    x.settle();
    REQUIRE(x.got_b.size() == 1);
    CHECK(x.got_b[0].deth.src_qp == 0x44);
    CHECK(x.got_b[0].payload.size() == 33);
}

TEST_CASE("the pcap holds every frame sent and received, ARP included") {
    std::string path = "/tmp/cxv-port-test-" + std::to_string(::getpid()) + ".pcap";
    {
        pair x("port-test-pcap");
        x.ca.pcap = path;  // only a's port writes
        auto a = std::move(port::create(x.ca, x.ta)).value();
        a->transmit(send_only(wire::ipv4_mapped_gid({169, 254, 9, 2}), 1), clock_type::now());
        const auto end = clock_type::now() + std::chrono::seconds(1);
        while (x.got_b.empty() && clock_type::now() < end) {
            const auto now = clock_type::now();
            a->poll(now, [](wire::packet&, std::size_t) {});
            x.b->poll(now, [&](wire::packet& q, std::size_t) { x.got_b.push_back(q); });
        }
        CHECK(x.got_b.size() == 1);
    }
    auto f = wire::read_pcap(path);
    REQUIRE(f);
    CHECK(f->link_type == 1);
    // ARP request out, ARP reply in, the RoCE frame out.
    REQUIRE(f->records.size() == 3);
    wire::arp_message m;
    CHECK(wire::parse_arp(f->records[0].data, m));
    CHECK(wire::parse_arp(f->records[1].data, m));
    wire::packet p;
    CHECK(wire::decode_roce(f->records[2].data, p) == wire::decode_status::ok);
    std::filesystem::remove(path);
}

TEST_CASE("CRCs left out in-process are computed for a capture on the receiving side") {
    for (const port_type type : {port_type::ETHERNET, port_type::IB}) {
        CAPTURE(static_cast<int>(type));
        const std::string path = "/tmp/cxv-port-test-rx-" + std::to_string(::getpid()) + ".pcap";
        {
            pair x(type == port_type::ETHERNET ? "port-test-rx-pcap-eth" : "port-test-rx-pcap-ib", type);
            x.cb.pcap = path;  // only b's port captures: a leaves its CRCs out
            auto b = std::move(port::create(x.cb, x.tb)).value();
            wire::packet p = send_only(wire::link_local_gid(x.cb.mac), 5);
            if (type == port_type::IB) {
                p.net.link = wire::link_kind::ib;
                p.net.dlid = x.cb.lid;
                p.net.slid = x.ca.lid;
            }
            REQUIRE(x.a->transmit(std::move(p), clock_type::now()) == port::sent::wire);
            std::vector<wire::packet> got;
            const auto end = clock_type::now() + std::chrono::seconds(1);
            while (got.empty() && clock_type::now() < end) {
                x.a->poll(clock_type::now(), [](wire::packet&, std::size_t) {});  // sends what a's outbox holds
                b->poll(clock_type::now(), [&](wire::packet& q, std::size_t) { got.push_back(q); });
            }
            REQUIRE(got.size() == 1);
            CHECK(got[0].bth.psn == 5);
            CHECK(b->counters().bad_crc == 0);
        }
        auto f = wire::read_pcap(path);
        REQUIRE(f);
        REQUIRE(f->records.size() == 1);
        wire::packet q;
        // Checked in full: what the capture holds carries correct CRCs.
        const auto s = type == port_type::ETHERNET ? wire::decode_roce(f->records[0].data, q, wire::crc_check::verify)
                                                   : wire::decode_ib(f->records[0].data, q, wire::crc_check::verify);
        CHECK(s == wire::decode_status::ok);
        CHECK(q.bth.psn == 5);
        std::filesystem::remove(path);
    }
}

// A raw frame to b's MAC (a UDP/IPv4 header's worth of bytes after the Ethernet header).
std::vector<std::byte> raw_to_b(std::size_t bytes, std::uint8_t fill) {
    std::vector<std::byte> f(bytes, std::byte{fill});
    const std::uint8_t head[] = {0x02, 0xc5, 0, 0, 0, 2, 0x02, 0xc5, 0, 0, 0, 1, 0x08, 0x00};
    std::memcpy(f.data(), head, sizeof head);
    return f;
}

struct raw_got {
    std::vector<std::byte> frame;
    wire::ip_checksums known;
};

std::vector<raw_got> take_raw(port& p) {
    std::vector<raw_got> got;
    const auto end = clock_type::now() + std::chrono::seconds(1);
    while (got.empty() && clock_type::now() < end) {
        p.poll(
            clock_type::now(), [](wire::packet&, std::size_t) {},
            [&](std::span<const std::byte> f, wire::ip_checksums known) { got.push_back({{f.begin(), f.end()}, known}); });
    }
    return got;
}

TEST_CASE("a raw frame's computed checksums travel with it in the process, and a fault makes it unverified") {
    SUBCASE("intact: the checksums its sender computed, no more") {
        pair x("port-test-raw-vouch");
        for (const wire::ip_checksums c : {wire::ip_checksums{true, true}, wire::ip_checksums{false, true},
                                           wire::ip_checksums{true, false}, wire::ip_checksums{}}) {
            std::vector<std::byte> f = raw_to_b(100, 0x42);
            const std::vector<std::byte> sent = f;
            REQUIRE(x.a->transmit_frame(f, clock_type::now(), c));
            const auto got = take_raw(*x.b);
            REQUIRE(got.size() == 1);
            CHECK(got[0].frame == sent);
            CHECK(got[0].known.l3 == c.l3);
            CHECK(got[0].known.l4 == c.l4);
        }
    }
    SUBCASE("a short frame is padded in place, with zeros") {
        pair x("port-test-raw-pad");
        std::vector<std::byte> f = raw_to_b(20, 0x42);
        REQUIRE(x.a->transmit_frame(f, clock_type::now(), {true, true}));
        const auto got = take_raw(*x.b);
        REQUIRE(got.size() == 1);
        REQUIRE(got[0].frame.size() == 60);
        CHECK(got[0].frame[19] == std::byte{0x42});
        CHECK(got[0].frame[20] == std::byte{0});
        CHECK(got[0].frame[59] == std::byte{0});
    }
    SUBCASE("a link that may change a byte: its receiver checks them all") {
        device_config::link_faults faults;
        faults.corrupt = 1.0;
        pair x("port-test-raw-corrupt", port_type::ETHERNET, faults);
        std::vector<std::byte> f = raw_to_b(100, 0x42);
        REQUIRE(x.a->transmit_frame(f, clock_type::now(), {true, true}));
        const auto got = take_raw(*x.b);
        REQUIRE(got.size() == 1);
        CHECK(x.a->counters().fault_corrupted == 1);
        CHECK_FALSE(got[0].known.l3);
        CHECK_FALSE(got[0].known.l4);
    }
}

}  // namespace
}  // namespace cxv::sim::link
