// The real capture: 24 frames between two Linux 6.1 rxe devices (testdata/
// rxe-rocev2-sample.pcap, described in /work/shared/design/wire-facts.md). Every RoCEv2
// frame decodes, its fields are those tshark 4.0 prints, it re-encodes to the same bytes,
// and a flipped bit does not go unnoticed. The ARP exchange parses and our reply equals rxe's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sim/wire/crc.h"
#include "sim/wire/frame.h"
#include "sim/wire/neighbour.h"
#include "sim/wire/pcap.h"
#include "tests/sim/wire/wire_test_util.h"

namespace cxv::sim::wire {
namespace {

const char* const capture = "tests/sim/wire/testdata/rxe-rocev2-sample.pcap";

// From `tshark -T fields -e frame.number -e infiniband.bth.opcode -e infiniband.bth.psn
// -e infiniband.bth.destqp -e infiniband.bth.a -e infiniband.reth.va -e
// infiniband.reth.r_key -e infiniband.reth.dmalen -e infiniband.aeth.syndrome -e
// infiniband.aeth.msn -e infiniband.deth.q_key -e infiniband.deth.srcqp -e
// infiniband.atomiceth.swapdt -e infiniband.atomiceth.cmpdt -e
// infiniband.atomicacketh.origremdt -e udp.srcport -e ip.id -e frame.len` (tshark shows
// AtomicETH's VA and R_Key under the RETH fields).
struct expected {
    int frame;
    std::uint8_t opcode;
    std::uint32_t psn, dest_qp;
    bool ack_req;
    std::uint64_t va;
    std::uint32_t r_key, dma_length;
    std::uint8_t syndrome;
    std::uint32_t msn, q_key, src_qp;
    std::uint64_t swap_add, compare, orig;
    std::uint16_t udp_src_port, ip_id;
    std::size_t frame_len;
};
const expected table[] = {
    {3, 4, 4774598, 0x11, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x449b, 1082},
    {4, 17, 4774598, 0x11, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 0, 49441, 0x27a6, 62},
    {5, 4, 12843846, 0x11, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x27a7, 1082},
    {6, 17, 12843846, 0x11, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 0, 49441, 0x449e, 62},
    {7, 4, 4774599, 0x11, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x449f, 1082},
    {8, 17, 4774599, 0x11, false, 0, 0, 0, 31, 2, 0, 0, 0, 0, 0, 49441, 0x27a8, 62},
    {9, 4, 12843847, 0x11, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x27a9, 1082},
    {10, 17, 12843847, 0x11, false, 0, 0, 0, 31, 2, 0, 0, 0, 0, 0, 49441, 0x44a1, 62},
    {11, 100, 15851467, 0x12, false, 0, 0, 0, 0, 0, 0x11111111, 0x12, 0, 0, 0, 63494, 0x479a, 578},
    {12, 100, 4289988, 0x12, false, 0, 0, 0, 0, 0, 0x11111111, 0x12, 0, 0, 0, 63494, 0x29ea, 578},
    {13, 100, 15851468, 0x12, false, 0, 0, 0, 0, 0, 0x11111111, 0x12, 0, 0, 0, 63494, 0x479b, 578},
    {14, 100, 4289989, 0x12, false, 0, 0, 0, 0, 0, 0x11111111, 0x12, 0, 0, 0, 63494, 0x29eb, 578},
    {15, 6, 4259449, 0x11, false, 0x55a46e180000, 0x25d, 2500, 0, 0, 0, 0, 0, 0, 0, 49441, 0x4d07, 1098},
    {16, 7, 4259450, 0x11, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x4d08, 1082},
    {17, 8, 4259451, 0x11, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49441, 0x4d09, 510},
    {18, 17, 4259451, 0x11, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 0, 49441, 0x3cf1, 62},
    {19, 12, 15662372, 0x12, true, 0x5559036a0000, 0x39d, 2500, 0, 0, 0, 0, 0, 0, 0, 49476, 0x3fd7, 74},
    {20, 13, 15662372, 0x12, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 0, 49476, 0x4f70, 1086},
    {21, 14, 15662373, 0x12, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49476, 0x4f71, 1082},
    {22, 15, 15662374, 0x12, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 0, 49476, 0x4f72, 514},
    {23, 20, 388690, 0x13, true, 0x558d1308b000, 0x40c, 0, 0, 0, 0, 0, 1, 0, 0, 49513, 0x40fb, 86},
    {24, 18, 388690, 0x13, false, 0, 0, 0, 31, 1, 0, 0, 0, 0, 16363053489605516143u, 49513, 0x53d7, 70},
};

std::vector<pcap_record> records() {
    auto f = read_pcap(capture);
    REQUIRE_MESSAGE(f.ok(), f.error().message);
    REQUIRE(f->link_type == static_cast<std::uint32_t>(pcap_link::ethernet));
    REQUIRE(f->records.size() == 24);
    return f->records;
}

const std::array<std::uint8_t, 6> mac1{0x52, 0x54, 0, 0, 0, 1}, mac2{0x52, 0x54, 0, 0, 0, 2};
const std::array<std::uint8_t, 4> ip1{169, 254, 1, 1}, ip2{169, 254, 1, 2};

TEST_CASE("every RoCEv2 frame of the rxe capture decodes with tshark's fields and re-encodes byte for byte") {
    const auto recs = records();
    for (const expected& x : table) {
        CAPTURE(x.frame);
        const auto& f = recs[static_cast<std::size_t>(x.frame - 1)].data;
        REQUIRE(f.size() == x.frame_len);
        packet p;
        REQUIRE(decode_roce(f, p) == decode_status::ok);
        CHECK(p.net.link == link_kind::roce_v4);
        CHECK(p.bth.opcode == x.opcode);
        CHECK(p.bth.psn == x.psn);
        CHECK(p.bth.dest_qp == x.dest_qp);
        CHECK(p.bth.ack_req == x.ack_req);
        CHECK(p.bth.pkey == 0xffff);
        CHECK(!p.bth.mig_req);
        CHECK(p.bth.pad == 0);
        const std::uint16_t h = headers_of(x.opcode);
        CHECK(p.reth.va == ((h & has_reth) ? x.va : 0));
        CHECK(p.reth.r_key == ((h & has_reth) ? x.r_key : 0));
        CHECK(p.reth.dma_length == x.dma_length);
        CHECK(p.atomic.va == ((h & has_atomiceth) ? x.va : 0));
        CHECK(p.atomic.r_key == ((h & has_atomiceth) ? x.r_key : 0));
        CHECK(p.atomic.swap_add == x.swap_add);
        CHECK(p.atomic.compare == x.compare);
        CHECK(p.aeth.syndrome == x.syndrome);
        CHECK(p.aeth.msn == x.msn);
        CHECK(p.deth.q_key == x.q_key);
        CHECK(p.deth.src_qp == x.src_qp);
        CHECK(p.atomic_ack == x.orig);
        CHECK(p.net.udp_src_port == x.udp_src_port);
        CHECK(p.net.ip_id == x.ip_id);
        CHECK(p.net.hop_limit == 64);
        CHECK(p.net.traffic_class == 0);
        const bool from1 = p.net.src_mac == mac1;
        CHECK(p.net.dst_mac == (from1 ? mac2 : mac1));
        CHECK(p.net.sgid == ipv4_mapped_gid(from1 ? ip1 : ip2));
        CHECK(p.net.dgid == ipv4_mapped_gid(from1 ? ip2 : ip1));
        // The payload: what is left between the headers and the ICRC.
        const std::size_t headers = 14 + 20 + 8 + bth_bytes + extended_header_bytes(h);
        CHECK(p.payload.size() == f.size() - headers - icrc_bytes);
        CHECK((p.payload.empty() || std::memcmp(p.payload.data(), f.data() + headers, p.payload.size()) == 0));
        // The UD receive buffer's 40 bytes: 20 zero, then the IPv4 header.
        CHECK(p.grh_present);
        CHECK(std::all_of(p.grh_raw.begin(), p.grh_raw.begin() + 20, [](std::byte b) { return b == std::byte{0}; }));
        CHECK(std::memcmp(p.grh_raw.data() + 20, f.data() + 14, 20) == 0);

        std::vector<std::byte> out(max_frame_bytes);
        const std::size_t n = encode(p, out);
        REQUIRE(n == f.size());
        CHECK(std::memcmp(out.data(), f.data(), n) == 0);
        CHECK(encode(p, std::span(out).first(n - 1)) == 0);
    }
}

TEST_CASE("a flipped bit in a captured frame is caught: bad_icrc in what the ICRC covers, never ok elsewhere") {
    const auto recs = records();
    for (const int fr : {4, 11, 15, 19, 23, 24}) {
        CAPTURE(fr);
        auto f = recs[static_cast<std::size_t>(fr - 1)].data;
        const std::size_t udp = 14 + 20, bth = udp + 8;
        for (std::size_t byte = 12; byte < f.size(); ++byte) {  // past the MACs (the FCS covers them)
            for (int bit = 0; bit < 8; ++bit) {
                CAPTURE(byte);
                CAPTURE(bit);
                f[byte] ^= std::byte(1 << bit);
                packet p;
                const decode_status s = decode_roce(f, p);
                if (byte == bth + 4) {
                    // BTH byte 4 (FECN, BECN, reserved) is variant: a switch may set FECN.
                    CHECK(s == decode_status::ok);
                } else if (byte < udp + 2 || (byte >= udp + 6 && byte < bth)) {
                    CHECK(s != decode_status::ok);  // IP header checksum, UDP checksum, lengths
                } else if (byte == udp + 2 || byte == udp + 3) {
                    CHECK(s == decode_status::not_roce);  // another UDP port
                } else if (byte == udp + 4 || byte == udp + 5) {
                    CHECK(s == decode_status::malformed);  // UDP length
                } else {
                    CHECK(s == decode_status::bad_icrc);  // UDP source port, BTH .. ICRC
                }
                f[byte] ^= std::byte(1 << bit);
            }
        }
    }
}

TEST_CASE("two packets from a real InfiniBand link decode with tshark's fields and re-encode byte for byte") {
    // Fields as tshark prints them for frames 11 and 5 of Wireshark's infiniband.pcap.
    const auto ack = test::from_hex(test::ib_ack);
    packet p;
    REQUIRE(decode_ib(ack, p) == decode_status::ok);
    CHECK(p.net.link == link_kind::ib);
    CHECK(p.net.dlid == 4);
    CHECK(p.net.slid == 1);
    CHECK(p.net.sl == 0);
    CHECK(p.net.vl == 0);
    CHECK(!p.net.grh);
    CHECK(!p.grh_present);
    CHECK(p.bth.opcode == (opcode::RC | opcode::ACKNOWLEDGE));
    CHECK(p.bth.mig_req);
    CHECK(p.bth.dest_qp == 0x870408);
    CHECK(p.bth.psn == 0xd40a55);
    CHECK(p.aeth.syndrome == 0x1f);
    CHECK(p.aeth.msn == 1);
    std::vector<std::byte> out(max_frame_bytes);
    REQUIRE(encode(p, out) == ack.size());
    CHECK(std::memcmp(out.data(), ack.data(), ack.size()) == 0);

    const auto ud = test::from_hex(test::ib_ud_grh);
    REQUIRE(decode_ib(ud, p) == decode_status::ok);
    CHECK(p.net.dlid == 0xc000);
    CHECK(p.net.slid == 4);
    CHECK(p.net.grh);
    CHECK(p.grh_present);
    CHECK(p.net.hop_limit == 0);
    CHECK(p.net.sgid == gid_bytes{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x02, 0x00, 0x24, 0xf6, 0x36});
    CHECK(p.net.dgid == gid_bytes{0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff});
    CHECK(std::memcmp(p.grh_raw.data(), ud.data() + 8, 40) == 0);
    CHECK(p.bth.opcode == (opcode::UD | opcode::SEND_ONLY));
    CHECK(p.bth.dest_qp == 0xffffff);
    CHECK(p.bth.psn == 8367);
    CHECK(p.deth.q_key == 0xb1b);
    CHECK(p.deth.src_qp == 0x405);
    CHECK(p.payload.size() == 132 - 48 - 12 - 8 - 4);
    REQUIRE(encode(p, out) == ud.size());
    CHECK(std::memcmp(out.data(), ud.data(), ud.size()) == 0);
}

TEST_CASE("the capture's ARP request and reply parse, our reply to the request equals rxe's, and they are not RoCE") {
    const auto recs = records();
    arp_message req, rep;
    REQUIRE(parse_arp(recs[0].data, req));
    REQUIRE(parse_arp(recs[1].data, rep));
    CHECK(req.oper == arp_request);
    CHECK(req.sha == mac2);
    CHECK(req.spa == ip2);
    CHECK(req.tpa == ip1);
    CHECK(rep.oper == arp_reply);
    CHECK(rep.sha == mac1);
    CHECK(rep.spa == ip1);
    CHECK(rep.tha == mac2);
    CHECK(rep.tpa == ip2);

    std::vector<std::byte> out(arp_frame_bytes);
    REQUIRE(build_arp(arp_reply_to(req, mac1), req.sha, out) == recs[1].data.size());
    CHECK(out == recs[1].data);
    REQUIRE(build_arp(req, broadcast_mac, out) == recs[0].data.size());
    CHECK(out == recs[0].data);

    packet p;
    CHECK(decode_roce(recs[0].data, p) == decode_status::not_roce);
    CHECK(!parse_arp(recs[2].data, req));
}

}  // namespace
}  // namespace cxv::sim::wire
