// Wireshark as an independent judge of what we encode: a pcap of every opcode (RC, UC, UD;
// first/middle/last/only; with and without immediate; ACK, RNR NAK, NAK; atomics) over
// RoCEv2/IPv4, RoCEv2/IPv6 and InfiniBand (with and without GRH, in ERF records), plus ARP
// and ND frames. tshark must find nothing malformed and no error (with IPv4, UDP and ICMPv6
// checksum validation on), and must read back the fields we encoded.
//
// Needs tshark (Debian: DEBIAN_FRONTEND=noninteractive apt-get install -y tshark); without
// it the cases are skipped (tests/skip.h), never passed. Tagged "tshark" in BUILD so that CI
// can select it.
#include <doctest/doctest.h>

#include "tests/sim/wire/tshark_command.h"
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/wire/frame.h"
#include "sim/wire/neighbour.h"
#include "sim/wire/pcap.h"
#include "tests/sim/wire/wire_test_util.h"
#include "tests/skip.h"

namespace cxv::sim::wire {
namespace {

using test::known_opcodes;
using test::random_packet;
using expectation = std::map<std::string, std::uint64_t>;  // field -> value; absent: tshark prints nothing

const char* const fields[] = {
    "frame.len",
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.psn",
    "infiniband.reth.va",  // RETH's, or AtomicETH's
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt",
    "infiniband.lrh.vl",
    "infiniband.lrh.sl",
    "infiniband.lrh.lnh",
    "infiniband.lrh.dlid",
    "infiniband.lrh.slid",
    "infiniband.lrh.pktlen",
    "infiniband.grh.tclass",
    "infiniband.grh.flowlabel",
    "infiniband.grh.paylen",
    "infiniband.grh.hoplmt",
    "ip.dsfield",
    "ip.ttl",
    "ip.id",
    "ip.checksum.status",
    "ipv6.tclass",
    "ipv6.flow",
    "ipv6.hlim",
    "udp.srcport",
    "udp.dstport",
    "udp.checksum.status",
    "arp.opcode",
    "icmpv6.type",
    "icmpv6.checksum.status",
};

std::string run(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    CHECK(::pclose(p) == 0);
    return out;
}

const char* const tshark = cxv::test::tshark_command;

// What tshark should print for the packet p encoded as a frame of n bytes.
expectation expect(const packet& p, std::size_t n) {
    expectation e;
    const std::uint16_t h = headers_of(p.bth.opcode);
    e["frame.len"] = n;
    e["infiniband.bth.opcode"] = p.bth.opcode;
    e["infiniband.bth.se"] = p.bth.se;
    e["infiniband.bth.m"] = p.bth.mig_req;
    e["infiniband.bth.padcnt"] = pad_of(p.payload.size());
    e["infiniband.bth.p_key"] = p.bth.pkey;
    e["infiniband.bth.destqp"] = p.bth.dest_qp;
    e["infiniband.bth.a"] = p.bth.ack_req;
    e["infiniband.bth.psn"] = p.bth.psn;
    if (h & has_reth) {
        e["infiniband.reth.va"] = p.reth.va;
        e["infiniband.reth.r_key"] = p.reth.r_key;
        e["infiniband.reth.dmalen"] = p.reth.dma_length;
    }
    if (h & has_atomiceth) {
        e["infiniband.reth.va"] = p.atomic.va;
        e["infiniband.reth.r_key"] = p.atomic.r_key;
        e["infiniband.atomiceth.swapdt"] = p.atomic.swap_add;
        e["infiniband.atomiceth.cmpdt"] = p.atomic.compare;
    }
    if (h & has_aeth) {
        e["infiniband.aeth.syndrome"] = p.aeth.syndrome;
        e["infiniband.aeth.msn"] = p.aeth.msn;
    }
    if (h & has_deth) {
        e["infiniband.deth.q_key"] = p.deth.q_key;
        e["infiniband.deth.srcqp"] = p.deth.src_qp;
    }
    if (h & has_atomicacketh) e["infiniband.atomicacketh.origremdt"] = p.atomic_ack;
    const route& r = p.net;
    if (r.link == link_kind::ib) {
        e["infiniband.lrh.vl"] = r.vl;
        e["infiniband.lrh.sl"] = r.sl;
        e["infiniband.lrh.lnh"] = r.grh ? 3 : 2;
        e["infiniband.lrh.dlid"] = r.dlid;
        e["infiniband.lrh.slid"] = r.slid;
        e["infiniband.lrh.pktlen"] = (n - 2) / 4;
        if (r.grh) {
            e["infiniband.grh.tclass"] = r.traffic_class;
            e["infiniband.grh.flowlabel"] = r.flow_label;
            e["infiniband.grh.paylen"] = n - 2 - 48;
            e["infiniband.grh.hoplmt"] = r.hop_limit;
        }
    } else {
        e["udp.srcport"] = r.udp_src_port;
        e["udp.dstport"] = roce_v2_udp_port;
        if (r.link == link_kind::roce_v4) {
            e["ip.dsfield"] = r.traffic_class;
            e["ip.ttl"] = r.hop_limit;
            e["ip.id"] = r.ip_id;
            e["ip.checksum.status"] = 1;  // Good
            e["udp.checksum.status"] = 3;  // Not present (0, as rxe)
        } else {
            e["ipv6.tclass"] = r.traffic_class;
            e["ipv6.flow"] = r.flow_label;
            e["ipv6.hlim"] = r.hop_limit;
            e["udp.checksum.status"] = 1;  // Good
        }
    }
    return e;
}

// The packets: every opcode with payloads of every pad where it has one, and the AETH
// syndromes of an ACK, an RNR NAK and each NAK code.
std::vector<packet> packets(std::mt19937_64& rng, link_kind link) {
    std::vector<packet> ps;
    for (const std::uint8_t op : known_opcodes()) {
        const bool pay = headers_of(op) & has_payload;
        for (const std::size_t len : pay ? std::vector<std::size_t>{0, 1, 2, 3, 256} : std::vector<std::size_t>{0}) {
            packet p = random_packet(rng, link, op, len);
            if (link == link_kind::roce_v4 && rng() % 2) p.payload.resize(0);  // frames below 60 bytes too
            if (headers_of(op) & has_aeth) p.aeth.syndrome = aeth_syndrome::ACK_NO_CREDIT_LIMIT;
            ps.push_back(p);
        }
    }
    for (const std::uint8_t syndrome :
         {aeth_syndrome::ACK, std::uint8_t(aeth_syndrome::RNR_NAK | 0x0e), aeth_syndrome::NAK_PSN_SEQUENCE_ERROR,
          aeth_syndrome::NAK_INVALID_REQUEST, aeth_syndrome::NAK_REMOTE_ACCESS_ERROR,
          aeth_syndrome::NAK_REMOTE_OPERATIONAL_ERROR}) {
        packet p = random_packet(rng, link, opcode::RC | opcode::ACKNOWLEDGE, 0);
        p.aeth.syndrome = syndrome;
        ps.push_back(p);
    }
    return ps;
}

std::uint64_t parse(const std::string& s) {
    if (s == "True") return 1;
    if (s == "False") return 0;
    return std::strtoull(s.c_str(), nullptr, 0);
}

void check_file(const std::string& path, const std::vector<expectation>& want) {
    // Nothing malformed, no error.
    const std::string errors =
        run(std::string(tshark) + "-r " + path + " -Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null");
    CHECK_MESSAGE(errors.empty(), errors);
    std::string cmd = std::string(tshark) + "-r " + path + " -T fields -E occurrence=f";
    for (const char* f : fields) cmd += std::string(" -e ") + f;
    std::istringstream lines(run(cmd + " 2>/dev/null"));
    std::string line;
    std::size_t i = 0;
    for (; std::getline(lines, line); ++i) {
        REQUIRE(i < want.size());
        CAPTURE(i + 1);
        CAPTURE(line);
        std::vector<std::string> got;
        std::size_t at = 0;
        for (;;) {
            const std::size_t tab = line.find('\t', at);
            got.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
            if (tab == std::string::npos) break;
            at = tab + 1;
        }
        REQUIRE(got.size() == std::size(fields));
        for (std::size_t k = 0; k < got.size(); ++k) {
            const std::string field = fields[k];
            CAPTURE(field);
            const auto w = want[i].find(fields[k]);
            if (w == want[i].end()) {
                CHECK(got[k].empty());
            } else {
                CHECK(!got[k].empty());
                CHECK(parse(got[k]) == w->second);
            }
        }
    }
    CHECK(i == want.size());
}

// Under Bazel the pcaps are kept as test outputs (bazel-testlogs/.../test.outputs), to be
// opened in Wireshark when the test fails.
std::string temp_path(const char* name) {
    const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    if (dir == nullptr) dir = std::getenv("TEST_TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/" + name + "-" + std::to_string(::getpid()) + ".pcap";
}

TEST_CASE("tshark decodes every opcode over RoCEv2/IPv4 and IPv6, and ARP and ND, without error and as encoded" *
          cxv::test::skip_unless(cxv::test::on_path("tshark"), "tshark is not installed (tools/setup installs it)")) {
    std::mt19937_64 rng(11);
    const std::string path = temp_path("tshark_roce");
    std::vector<expectation> want;
    {
        auto w = pcap_writer::open(path, pcap_link::ethernet);
        REQUIRE(w.ok());
        std::vector<std::byte> out(max_frame_bytes);
        for (const link_kind link : {link_kind::roce_v4, link_kind::roce_v6}) {
            for (const packet& p : packets(rng, link)) {
                const std::size_t n = encode(p, out);
                REQUIRE(n > 0);
                REQUIRE((*w)->write(std::span(out).first(n)));
                want.push_back(expect(p, n));
            }
        }
        const mac_address a{0x52, 0x54, 0, 0, 0, 1}, b{0x52, 0x54, 0, 0, 0, 2};
        const arp_message req{.oper = arp_request, .sha = a, .spa = {169, 254, 1, 1}, .tha = {}, .tpa = {169, 254, 1, 2}};
        REQUIRE(build_arp(req, broadcast_mac, out) == arp_frame_bytes);
        REQUIRE((*w)->write(std::span(out).first(arp_frame_bytes)));
        want.push_back({{"frame.len", 60}, {"arp.opcode", 1}});
        REQUIRE(build_arp(arp_reply_to(req, b), a, out) == arp_frame_bytes);
        REQUIRE((*w)->write(std::span(out).first(arp_frame_bytes)));
        want.push_back({{"frame.len", 60}, {"arp.opcode", 2}});
        REQUIRE(build_neighbour_solicitation(a, link_local_gid(a), link_local_gid(b), out) == nd_frame_bytes);
        REQUIRE((*w)->write(std::span(out).first(nd_frame_bytes)));
        want.push_back({{"frame.len", nd_frame_bytes}, {"ipv6.tclass", 0}, {"ipv6.flow", 0}, {"ipv6.hlim", 255},
                        {"icmpv6.type", 135}, {"icmpv6.checksum.status", 1}});
        REQUIRE(build_neighbour_advertisement(b, link_local_gid(b), a, link_local_gid(a), true, out) ==
                nd_frame_bytes);
        REQUIRE((*w)->write(std::span(out).first(nd_frame_bytes)));
        want.push_back({{"frame.len", nd_frame_bytes}, {"ipv6.tclass", 0}, {"ipv6.flow", 0}, {"ipv6.hlim", 255},
                        {"icmpv6.type", 136}, {"icmpv6.checksum.status", 1}});
    }
    check_file(path, want);
}

TEST_CASE("tshark decodes every opcode over InfiniBand, with and without GRH, without error and as encoded" *
          cxv::test::skip_unless(cxv::test::on_path("tshark"), "tshark is not installed (tools/setup installs it)")) {
    std::mt19937_64 rng(12);
    const std::string path = temp_path("tshark_ib");
    std::vector<expectation> want;
    {
        auto w = pcap_writer::open(path, pcap_link::infiniband_erf);
        REQUIRE(w.ok());
        std::vector<std::byte> out(max_frame_bytes);
        for (const bool grh : {false, true}) {
            for (packet p : packets(rng, link_kind::ib)) {
                p.net.grh = grh;
                const std::size_t n = encode(p, out);
                REQUIRE(n > 0);
                REQUIRE((*w)->write(std::span(out).first(n)));
                want.push_back(expect(p, n));
            }
        }
    }
    check_file(path, want);
}

}  // namespace
}  // namespace cxv::sim::wire
