// headers_of against Wireshark's list of opcodes (needs tshark; skipped without it);
// encode -> decode for every opcode headers_of knows, over RoCEv2/IPv4, RoCEv2/IPv6 and
// InfiniBand with and without GRH, with payloads that need every pad; the frame's layout
// checked against the protocol's own definitions; what decode refuses.
#include <doctest/doctest.h>

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/wire/crc.h"
#include "sim/wire/frame.h"
#include "tests/sim/wire/wire_test_util.h"
#include "tests/skip.h"

namespace cxv::sim::wire {
namespace {

using test::check_same;
using test::known_opcodes;
using test::random_packet;

decode_status decode(link_kind link, std::span<const std::byte> f, packet& p, crc_check check) {
    return link == link_kind::ib ? decode_ib(f, p, check) : decode_roce(f, p, check);
}

std::uint16_t be16(const std::vector<std::byte>& f, std::size_t o) {
    return static_cast<std::uint16_t>(static_cast<std::uint8_t>(f[o]) << 8 | static_cast<std::uint8_t>(f[o + 1]));
}

// Wireshark's InfiniBand dissector as the oracle of the opcodes (IBA Table 35): its value
// strings for infiniband.bth.opcode (`tshark -G values`: "V<TAB>field<TAB>value<TAB>name"),
// opcode -> name, RC, UC and UD only, without "Reserved" (RD and XRC the model does not do).
std::map<unsigned, std::string> wireshark_opcodes() {
    std::map<unsigned, std::string> out;
    FILE* p = ::popen("tshark -G values 2>/dev/null", "r");
    REQUIRE(p != nullptr);
    const std::string key = "V\tinfiniband.bth.opcode\t";
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p) != nullptr) {
        std::string l(buf);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        if (l.rfind(key, 0) != 0) continue;
        const std::size_t tab = l.find('\t', key.size());
        REQUIRE(tab != std::string::npos);
        const unsigned op = static_cast<unsigned>(std::stoul(l.substr(key.size(), tab - key.size())));
        const std::string name = l.substr(tab + 1);
        const bool ours = name.starts_with("Reliable Connection (RC) - ") ||
                          name.starts_with("Unreliable Connection (UC) - ") ||
                          name.starts_with("Unreliable Datagram (UD) - ");
        if (ours && !name.ends_with(" - Reserved")) out[op] = name;
    }
    REQUIRE(::pclose(p) == 0);
    return out;
}

// What IBA Table 38 "Header Formats" gives the opcode named `name` (Wireshark's words:
// "Unreliable Connection (UC) - RDMA WRITE First", "Unreliable Datagram (UD) - SEND only").
// 0 for a name it does not recognise.
std::uint16_t headers_by_name(const std::string& name) {
    const std::string what = name.substr(name.find(" - ") + 3);
    const auto is = [&](const char* family) { return what.starts_with(family); };
    const auto word = [&](const char* w) {
        std::istringstream in(what);
        std::string t;
        while (in >> t) {
            if (strcasecmp(t.c_str(), w) == 0) return true;
        }
        return false;
    };
    const bool send = is("SEND "), write = is("RDMA WRITE "), read_request = what == "RDMA READ Request",
               read_response = is("RDMA READ response "), ack = what == "Acknowledge",
               atomic_ack = what == "ATOMIC Acknowledge", atomic = what == "CmpSwap" || what == "FetchAdd";
    if (!send && !write && !read_request && !read_response && !ack && !atomic_ack && !atomic) return 0;
    std::uint16_t h = 0;
    if (word("First")) h |= is_first;
    if (word("Middle")) h |= is_middle;
    if (word("Last")) h |= is_last;
    if (word("Only") || read_request || ack || atomic_ack || atomic) h |= is_first | is_last;
    if (!read_response && !ack && !atomic_ack) h |= is_request;
    if (send || write || read_response) h |= has_payload;
    if ((write && (h & is_first)) || read_request) h |= has_reth;  // WRITE First and Only, with or without ImmDt
    if ((read_response && (h & (is_first | is_last))) || ack || atomic_ack) h |= has_aeth;
    if (atomic_ack) h |= has_atomicacketh;
    if (atomic) h |= has_atomiceth;
    if (name.starts_with("Unreliable Datagram (UD)")) h |= has_deth;
    if (what.ends_with(" with Immediate")) h |= has_immdt;
    if (what.ends_with(" with Invalidate")) h |= has_ieth;
    return h;
}

TEST_CASE("headers_of knows the RC, UC and UD opcodes of Wireshark's dissector, with the headers their names imply" *
          cxv::test::skip_unless(cxv::test::on_path("tshark"), "tshark is not installed (tools/setup installs it)")) {
    const auto ws = wireshark_opcodes();
    std::set<std::string> transports;
    for (const auto& [op, name] : ws) transports.insert(name.substr(0, name.find(" - ")));
    REQUIRE(transports.size() == 3);  // RC, UC and UD all there: the output is what we think
    for (const auto& [op, name] : ws) {
        CAPTURE(op);
        CAPTURE(name);
        const std::uint16_t want = headers_by_name(name);
        CHECK_MESSAGE(want != 0, "a name this test does not know how to read");
        CHECK(headers_of(static_cast<std::uint8_t>(op)) == want);
    }
    // And nothing beyond them.
    for (unsigned op = 0; op < 256; ++op) {
        CAPTURE(op);
        if (headers_of(static_cast<std::uint8_t>(op)) != 0) CHECK_MESSAGE(ws.count(op) == 1, "not an RC, UC or UD opcode of Wireshark's");
    }
}

TEST_CASE("every opcode round-trips over every link with every pad") {
    std::mt19937_64 rng(7);
    std::vector<std::byte> out(max_frame_bytes);
    for (const link_kind link : {link_kind::roce_v4, link_kind::roce_v6, link_kind::ib}) {
        for (const std::uint8_t op : known_opcodes()) {
            for (const std::size_t len : {0, 1, 2, 3, 4, 5, 6, 7, 61, 1023, 4096}) {
                CAPTURE(static_cast<int>(link));
                CAPTURE(static_cast<int>(op));
                CAPTURE(len);
                const packet p = random_packet(rng, link, op, len);
                const std::size_t n = encode(p, out);
                REQUIRE(n > 0);
                const std::vector<std::byte> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
                packet q;
                const decode_status s = link == link_kind::ib ? decode_ib(f, q) : decode_roce(f, q);
                REQUIRE(s == decode_status::ok);
                check_same(p, q);
                CHECK(q.grh_present == (link != link_kind::ib || p.net.grh));
                // Re-encoding the decoded packet gives the same bytes.
                std::vector<std::byte> again(max_frame_bytes);
                REQUIRE(encode(q, again) == n);
                CHECK(std::memcmp(again.data(), f.data(), n) == 0);
                // One byte short of room: nothing.
                CHECK(encode(p, std::span(out).first(n - 1)) == 0);
                // Lengths in the headers.
                const std::size_t t = bth_bytes + extended_header_bytes(headers_of(op)) + p.payload.size() +
                                      pad_of(p.payload.size());
                CHECK(t % 4 == 0);
                CHECK((static_cast<std::uint8_t>(f[link == link_kind::ib ? (p.net.grh ? 49 : 9)
                                                   : link == link_kind::roce_v4 ? 43 : 63]) >> 4 & 3) ==
                      pad_of(p.payload.size()));
                if (link == link_kind::roce_v4) {
                    CHECK(n == std::max<std::size_t>(60, 14 + 20 + 8 + t + 4));
                    CHECK(be16(f, 16) == 20 + 8 + t + 4);  // IPv4 total length
                    CHECK(be16(f, 38) == 8 + t + 4);       // UDP length
                    CHECK(be16(f, 36) == roce_v2_udp_port);
                    CHECK(be16(f, 40) == 0);               // UDP checksum: none, as rxe
                    CHECK(ones_complement_sum(std::span(f).subspan(14, 20)) == 0xffff);
                    CHECK(q.grh_raw[20] == std::byte{0x45});
                } else if (link == link_kind::roce_v6) {
                    CHECK(n == 14 + 40 + 8 + t + 4);
                    CHECK(be16(f, 18) == 8 + t + 4);  // payload length
                    CHECK(be16(f, 60) != 0);          // UDP checksum present
                    CHECK(std::memcmp(q.grh_raw.data(), f.data() + 14, 40) == 0);
                } else {
                    const std::size_t g = p.net.grh ? 40 : 0;
                    CHECK(n == 8 + g + t + 4 + 2);
                    CHECK((be16(f, 4) & 0x7ff) * 4 == n - 2);  // PktLen: LRH .. ICRC
                    CHECK((static_cast<std::uint8_t>(f[1]) & 3) == (p.net.grh ? 3 : 2));
                    if (p.net.grh) {
                        CHECK(be16(f, 12) == t + 4);  // GRH PayLen: BTH .. ICRC
                        CHECK(static_cast<std::uint8_t>(f[14]) == 0x1b);
                        CHECK(std::memcmp(q.grh_raw.data(), f.data() + 8, 40) == 0);
                    }
                }
            }
        }
    }
}

TEST_CASE("the IPv6 UDP checksum verifies as RFC 8200 defines it, and decode accepts rxe's zero") {
    std::mt19937_64 rng(8);
    std::vector<std::byte> out(max_frame_bytes);
    packet p = random_packet(rng, link_kind::roce_v6, opcode::RC | opcode::SEND_ONLY, 37);
    const std::size_t n = encode(p, out);
    std::vector<std::byte> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
    // Pseudo-header (source, destination, UDP length, next header 17) and the datagram.
    std::vector<std::byte> sum(f.begin() + 22, f.begin() + 54);
    const std::size_t udp_len = n - 54;
    for (std::uint32_t v : {std::uint32_t(udp_len >> 24), std::uint32_t(udp_len >> 16), std::uint32_t(udp_len >> 8),
                            std::uint32_t(udp_len), 0u, 0u, 0u, 17u})
        sum.push_back(std::byte(v & 0xff));
    sum.insert(sum.end(), f.begin() + 54, f.end());
    CHECK(ones_complement_sum(sum) == 0xffff);
    packet q;
    f[60] = f[61] = std::byte{0};
    CHECK(decode_roce(f, q) == decode_status::ok);
    f[60] = std::byte{0x12};
    CHECK(decode_roce(f, q) == decode_status::bad_checksum);
}

TEST_CASE("InfiniBand: the VCRC catches any flipped bit; the ICRC what the VCRC is recomputed over") {
    std::mt19937_64 rng(9);
    std::vector<std::byte> out(max_frame_bytes);
    for (const bool grh : {false, true}) {
        packet p = random_packet(rng, link_kind::ib, opcode::RC | opcode::RDMA_WRITE_FIRST, 33);
        p.net.grh = grh;
        const std::size_t n = encode(p, out);
        std::vector<std::byte> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
        const std::size_t bth = grh ? 48 : 8;
        for (std::size_t byte = 0; byte < n; ++byte) {
            for (int bit = 0; bit < 8; ++bit) {
                CAPTURE(byte);
                CAPTURE(bit);
                f[byte] ^= std::byte(1 << bit);
                packet q;
                const decode_status s = decode_ib(f, q);
                const bool length_or_kind = byte == 1 || byte == 4 || byte == 5 || (byte == 0 && bit < 4) ||
                                            (grh && (byte == 8 || byte == 12 || byte == 13 || byte == 14));
                if (!length_or_kind) CHECK(s == decode_status::bad_vcrc);
                else CHECK(s != decode_status::ok);
                if (byte >= bth && byte < n - 6 && byte != bth + 4) {
                    // A link that recomputed the VCRC: the ICRC still catches it.
                    const std::uint16_t v = vcrc(std::span(f).first(n - 2));
                    const auto b0 = f[n - 2], b1 = f[n - 1];
                    f[n - 2] = std::byte(v & 0xff);
                    f[n - 1] = std::byte(v >> 8);
                    CHECK(decode_ib(f, q) == decode_status::bad_icrc);
                    f[n - 2] = b0;
                    f[n - 1] = b1;
                }
                f[byte] ^= std::byte(1 << bit);
            }
        }
    }
}

TEST_CASE("a trusted decode skips the CRCs and checksums, and nothing else") {
    std::mt19937_64 rng(10);
    std::vector<std::byte> out(max_frame_bytes);
    for (const link_kind link : {link_kind::roce_v4, link_kind::roce_v6, link_kind::ib}) {
        CAPTURE(static_cast<int>(link));
        packet p = random_packet(rng, link, opcode::RC | opcode::SEND_ONLY, 64);
        const std::size_t n = encode(p, out);
        REQUIRE(n != 0);
        std::vector<std::byte> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
        packet verified, trusted;
        REQUIRE(decode(link, f, verified, crc_check::verify) == decode_status::ok);
        REQUIRE(decode(link, f, trusted, crc_check::trusted) == decode_status::ok);
        check_same(verified, trusted);
        // The ICRC's last byte (and on IB the VCRC's) wrong: only a trusted decode takes it.
        const std::size_t icrc_last = link == link_kind::ib ? n - 3 : n - 1;
        f[icrc_last] ^= std::byte{0x01};
        if (link == link_kind::ib) f[n - 1] ^= std::byte{0x01};
        CHECK(decode(link, f, verified, crc_check::verify) != decode_status::ok);
        REQUIRE(decode(link, f, trusted, crc_check::trusted) == decode_status::ok);
        CHECK(trusted.bth.psn == p.bth.psn);
        CHECK(trusted.payload == p.payload);
        // The other checks stay: a frame too short for its own length fields is refused.
        f.resize(n - 4);
        CHECK(decode(link, f, trusted, crc_check::trusted) == decode_status::malformed);
    }
}

TEST_CASE("a frame encoded without its CRCs, sealed, is the frame encoded with them") {
    std::mt19937_64 rng(11);
    std::vector<std::byte> full(max_frame_bytes), later(max_frame_bytes);
    for (const link_kind link : {link_kind::roce_v4, link_kind::roce_v6, link_kind::ib}) {
        for (const bool grh : {false, true}) {
            for (const std::size_t bytes : {std::size_t{0}, std::size_t{3}, std::size_t{64}, std::size_t{1000}}) {
                CAPTURE(static_cast<int>(link));
                CAPTURE(grh);
                CAPTURE(bytes);
                packet p = random_packet(rng, link, opcode::RC | opcode::SEND_ONLY, bytes);
                if (link == link_kind::ib) p.net.grh = grh;
                const std::size_t n = encode(p, full, crc_fill::compute);
                REQUIRE(n != 0);
                REQUIRE(encode(p, later, crc_fill::later) == n);
                const std::span<std::byte> f(later.data(), n);
                packet q;
                CHECK(decode(link, f, q, crc_check::verify) != decode_status::ok);  // the CRCs are not there
                CHECK(decode(link, f, q, crc_check::trusted) == decode_status::ok);
                REQUIRE(seal(f, link != link_kind::ib));
                CHECK(std::equal(later.begin(), later.begin() + static_cast<std::ptrdiff_t>(n), full.begin()));
                CHECK(decode(link, f, q, crc_check::verify) == decode_status::ok);
                CHECK_FALSE(seal(f.first(n - 4), link != link_kind::ib));  // lengths that do not hold
            }
        }
    }
}

TEST_CASE("what encode and decode refuse") {
    std::mt19937_64 rng(10);
    std::vector<std::byte> out(max_frame_bytes);
    packet p = random_packet(rng, link_kind::roce_v4, opcode::RC | opcode::ACKNOWLEDGE, 0);
    p.payload.resize(4);  // an ACK carries no payload
    CHECK(encode(p, out) == 0);
    p.payload.clear();
    p.bth.opcode = 0x15;  // RC RESYNC: not modelled
    CHECK(encode(p, out) == 0);
    p.bth.opcode = opcode::RD | opcode::SEND_ONLY;
    CHECK(encode(p, out) == 0);

    packet q = random_packet(rng, link_kind::roce_v4, opcode::RC | opcode::SEND_ONLY, 8);
    const std::size_t n = encode(q, out);
    std::vector<std::byte> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
    packet r;
    CHECK(decode_roce(std::span(f).first(n - 1), r) == decode_status::malformed);  // shorter than IP says
    CHECK(decode_roce(std::span(f).first(10), r) == decode_status::malformed);
    auto padded = f;  // Ethernet padding after the datagram is ignored
    padded.resize(n + 10);
    CHECK(decode_roce(padded, r) == decode_status::ok);
    CHECK(decode_ib(std::span(f).first(5), r) == decode_status::malformed);

    // An opcode decode does not know, a PadCnt larger than the payload, TVer 1: malformed
    // even with a valid ICRC. (The ICRC ends where the UDP length says.)
    auto refresh_icrc = [](std::vector<std::byte>& g) {
        const std::size_t end = 14 + 20 + be16(g, 38) - 4;
        const std::uint32_t c = icrc_roce(std::span(g).subspan(14, end - 14), false);
        for (std::size_t i = 0; i < 4; ++i) g[end + i] = std::byte((c >> (8 * i)) & 0xff);
    };
    auto bad = f;
    refresh_icrc(bad);
    CHECK(bad == f);
    bad[42] = std::byte{0x15};
    refresh_icrc(bad);
    CHECK(decode_roce(bad, r) == decode_status::malformed);
    q.payload.clear();  // no payload: 58 bytes, padded to 60
    const std::size_t n0 = encode(q, out);
    REQUIRE(n0 == 60);
    std::vector<std::byte> g(out.begin(), out.begin() + 60);
    CHECK(decode_roce(g, r) == decode_status::ok);
    CHECK(r.payload.empty());
    auto pad = g;
    pad[43] |= std::byte{0x30};  // PadCnt 3 with nothing to pad
    refresh_icrc(pad);
    CHECK(decode_roce(pad, r) == decode_status::malformed);
    auto tver = g;
    tver[43] |= std::byte{0x01};
    refresh_icrc(tver);
    CHECK(decode_roce(tver, r) == decode_status::malformed);
    auto frag = f;
    frag[20] |= std::byte{0x20};  // More Fragments, with the header checksum fixed up
    frag[24] = frag[25] = std::byte{0};
    const std::uint16_t c = static_cast<std::uint16_t>(~ones_complement_sum(std::span(frag).subspan(14, 20)));
    frag[24] = std::byte(c >> 8);
    frag[25] = std::byte(c & 0xff);
    CHECK(decode_roce(frag, r) == decode_status::malformed);
}

}  // namespace
}  // namespace cxv::sim::wire
