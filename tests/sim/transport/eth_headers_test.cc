// The header parser's arithmetic (sim/transport/eth_headers.cc) against the definitions
// it stands for: the one's complement sum of RFC 1071, added 16 bits at a time in
// network order, here written the slow way.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include "sim/transport/eth_headers.h"

using namespace cxv::sim;

namespace {

// RFC 1071's definition: big-endian 16-bit words (a last odd byte is a word's high
// byte), carries folded back in.
std::uint16_t reference_sum(std::span<const std::byte> b, std::uint32_t acc) {
    std::uint64_t s = acc;
    std::size_t i = 0;
    for (; i + 1 < b.size(); i += 2) {
        s += static_cast<std::uint64_t>(std::to_integer<unsigned>(b[i]) << 8 | std::to_integer<unsigned>(b[i + 1]));
    }
    if (i < b.size()) s += static_cast<std::uint64_t>(std::to_integer<unsigned>(b[i]) << 8);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}

}  // namespace

TEST_CASE("ones_sum equals RFC 1071's 16-bit sum for every length, start and carried-in sum") {
    std::mt19937_64 rng(35);
    std::vector<std::byte> buf(300);
    const std::uint32_t accs[] = {0, 1, 0xffff, 0x1fffe, 0xffffffffu, 0x12345678};
    unsigned checked = 0;
    for (int round = 0; round < 40; ++round) {
        // All ones, all zeros and random bytes: the sums that fold to 0xffff or stay 0.
        for (std::size_t i = 0; i < buf.size(); ++i) {
            buf[i] = round == 0 ? std::byte{0xff} : round == 1 ? std::byte{0} : static_cast<std::byte>(rng());
        }
        for (std::size_t start = 0; start < 9; ++start) {
            for (std::size_t len = 0; len + start <= 140; ++len) {
                const auto piece = std::span<const std::byte>(buf).subspan(start, len);
                for (const std::uint32_t acc : accs) {
                    REQUIRE(ones_sum(piece, acc) == reference_sum(piece, acc));
                    ++checked;
                }
            }
        }
    }
    CHECK(checked > 100000);
}

TEST_CASE("ones_sum of a header holding its own checksum folds to 0xffff") {
    // RFC 1071's example IPv4 header (20 bytes, checksum 0xb861).
    const std::uint8_t ip[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                               0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    const auto bytes = std::as_bytes(std::span(ip));
    CHECK(ones_sum(bytes) == 0xffff);
    std::vector<std::byte> zeroed(bytes.begin(), bytes.end());
    zeroed[10] = zeroed[11] = std::byte{0};
    CHECK(static_cast<std::uint16_t>(~ones_sum(zeroed)) == 0xb861);
}

TEST_CASE("checksums its sender computed are taken as holding; every other condition still applies") {
    // A 64-byte IPv4/UDP frame, 169.254.0.1 -> 169.254.0.2, 22 bytes of payload; its
    // checksum fields hold 0x1234 and 0x5678, neither of them right.
    std::vector<std::byte> f(64, std::byte{0});
    const std::uint8_t head[] = {0x02, 0xc5, 0, 0, 0, 2, 0x02, 0xc5, 0, 0, 0, 1, 0x08, 0x00,  // Ethernet
                                 0x45, 0, 0, 50, 0, 0, 0x40, 0, 64, 17, 0x12, 0x34,            // IPv4
                                 169, 254, 0, 1, 169, 254, 0, 2,
                                 0x30, 0x39, 0x7a, 0x69, 0, 30, 0x56, 0x78};                  // UDP
    std::memcpy(f.data(), head, sizeof head);
    eth_headers h;
    REQUIRE(parse_eth(f, h));
    CHECK(h.udp);
    CHECK_FALSE(h.l3_ok);
    CHECK_FALSE(h.l4_ok);
    REQUIRE(parse_eth(f, h, true, {.l3 = true, .l4 = true}));
    CHECK(h.l3_ok);
    CHECK(h.l4_ok);
    REQUIRE(parse_eth(f, h, true, {.l3 = false, .l4 = true}));
    CHECK_FALSE(h.l3_ok);
    CHECK(h.l4_ok);
    // A sender that fills nothing (checksums false) reads none of them, known or not.
    REQUIRE(parse_eth(f, h, false, {.l3 = true, .l4 = true}));
    CHECK_FALSE(h.l3_ok);
    CHECK_FALSE(h.l4_ok);
    // A UDP length past the IP payload: the L4 checksum is not good, whatever was computed.
    f[38] = std::byte{0};
    f[39] = std::byte{31};
    REQUIRE(parse_eth(f, h, true, {.l3 = true, .l4 = true}));
    CHECK(h.udp);
    CHECK(h.l3_ok);
    CHECK_FALSE(h.l4_ok);
    // A fragment carries no L4 checksum to hold.
    f[38] = std::byte{0};
    f[39] = std::byte{30};
    f[20] = std::byte{0x20};  // MF
    REQUIRE(parse_eth(f, h, true, {.l3 = true, .l4 = true}));
    CHECK(h.fragment);
    CHECK_FALSE(h.l4_ok);
}

namespace {

// An IP frame with right checksums: IPv4 or IPv6, UDP or TCP, `payload` random bytes,
// `pad` bytes of padding after the packet (a short frame's).
std::vector<std::byte> ip_frame(std::mt19937_64& rng, int version, bool udp, std::size_t payload, std::size_t pad) {
    std::vector<std::byte> f(14, std::byte{0x02});
    f[12] = static_cast<std::byte>(version == 4 ? 0x08 : 0x86);
    f[13] = static_cast<std::byte>(version == 4 ? 0x00 : 0xdd);
    const std::size_t l4_len = (udp ? 8 : 20) + payload;
    auto put16 = [&](std::size_t at, std::size_t v) {
        f[at] = static_cast<std::byte>(v >> 8);
        f[at + 1] = static_cast<std::byte>(v);
    };
    const std::size_t l3 = 14;
    const std::size_t l4 = version == 4 ? l3 + 20 : l3 + 40;
    f.resize(l4 + l4_len + pad);
    for (std::size_t i = l3; i < f.size(); ++i) f[i] = static_cast<std::byte>(rng());
    std::uint32_t pseudo = 0;
    if (version == 4) {
        f[l3] = std::byte{0x45};
        put16(l3 + 2, 20 + l4_len);
        put16(l3 + 6, 0);  // not a fragment
        f[l3 + 9] = static_cast<std::byte>(udp ? 17 : 6);
        put16(l3 + 10, 0);
        put16(l3 + 10, static_cast<std::uint16_t>(~reference_sum(std::span(f).subspan(l3, 20), 0)));
        for (std::size_t i = 12; i < 20; i += 2) pseudo += std::to_integer<unsigned>(f[l3 + i]) << 8 | std::to_integer<unsigned>(f[l3 + i + 1]);
    } else {
        f[l3] = std::byte{0x60};
        put16(l3 + 4, l4_len);
        f[l3 + 6] = static_cast<std::byte>(udp ? 17 : 6);
        for (std::size_t i = 8; i < 40; i += 2) pseudo += std::to_integer<unsigned>(f[l3 + i]) << 8 | std::to_integer<unsigned>(f[l3 + i + 1]);
    }
    pseudo += (udp ? 17 : 6) + static_cast<std::uint32_t>(l4_len);
    if (udp) {
        put16(l4 + 4, l4_len);
    } else {
        f[l4 + 12] = std::byte{0x50};
    }
    const std::size_t csum = l4 + (udp ? 6 : 16);
    put16(csum, 0);
    std::uint16_t c = static_cast<std::uint16_t>(~reference_sum(std::span(f).subspan(l4, l4_len), pseudo));
    if (udp && c == 0) c = 0xffff;
    put16(csum, c);
    return f;
}

}  // namespace

TEST_CASE("ip_packet_sum, the CQE's check_sum: the IP packet's ones' complement sum, its padding left out; from the "
          "checksums where they hold, read where they do not; 0 for a frame that is not IP") {
    std::mt19937_64 rng(34);
    unsigned derived = 0, read = 0;
    for (int round = 0; round < 400; ++round) {
        const int version = round % 2 ? 4 : 6;
        const bool udp = (round / 2) % 2;
        const std::size_t payload = rng() % 300, pad = round % 3 == 0 ? rng() % 20 : 0;
        auto f = ip_frame(rng, version, udp, payload, pad);
        const std::size_t l3 = 14, ip_len = f.size() - pad - l3;
        const std::uint16_t want = reference_sum(std::span(f).subspan(l3, ip_len), 0);
        eth_headers h;
        REQUIRE(parse_eth(f, h));
        REQUIRE(h.l3_ok);
        REQUIRE(h.l4_ok);
        INFO("round ", round, ": IPv", version, udp ? " UDP " : " TCP ", payload, " bytes, ", pad, " of padding");
        CHECK(ip_packet_sum(f, h) == want);
        ++derived;
        // Checksums the sending device computed (in-process): IPv4's sum comes from parse_eth.
        eth_headers k;
        REQUIRE(parse_eth(f, k, true, cxv::sim::wire::ip_checksums{true, true}));
        CHECK(k.packet_sum_known == (version == 4));
        CHECK(ip_packet_sum(f, k) == want);
        // A payload byte changed: the L4 checksum no longer holds, and the sum is read.
        f[f.size() - pad - 1] ^= std::byte{0x5a};
        REQUIRE(parse_eth(f, h));
        if (h.l4_ok) continue;  // (a change the checksum cannot see: none here)
        CHECK(ip_packet_sum(f, h) == reference_sum(std::span(f).subspan(l3, ip_len), 0));
        ++read;
    }
    CHECK(derived == 400);
    CHECK(read > 300);
    std::vector<std::byte> arp(60, std::byte{1});
    arp[12] = std::byte{0x08};
    arp[13] = std::byte{0x06};
    eth_headers h;
    REQUIRE(parse_eth(arp, h));
    CHECK(ip_packet_sum(arp, h) == 0);
}

namespace {

// Every field parse_eth answers with (eth_headers has padding: compared field by field).
bool same_headers(const eth_headers& a, const eth_headers& b) {
    const eth_match_fields& fa = a;
    const eth_match_fields& fb = b;
    return std::memcmp(&fa, &fb, sizeof fa) == 0 && a.l3_at == b.l3_at && a.l4_at == b.l4_at && a.l3_ok == b.l3_ok &&
           a.l4_ok == b.l4_ok && a.packet_sum_known == b.packet_sum_known && a.packet_sum == b.packet_sum &&
           a.read_end == b.read_end;
}

}  // namespace

TEST_CASE("eth_parse_memo answers as parse_eth does for every frame of a stream: a payload change keeps its "
          "headers, a change to anything the headers were read from, the size or the arguments does not") {
    std::mt19937_64 rng(35);
    eth_parse_memo memo;
    std::vector<std::byte> f = ip_frame(rng, 4, true, 22, 0);
    unsigned payload_only = 0, summed_payload_only = 0;
    for (int round = 0; round < 20000; ++round) {
        const unsigned what = static_cast<unsigned>(rng() % 16);
        bool payload_change = false;
        if (what == 0) {
            // A new stream: IPv4 or IPv6, UDP or TCP, any payload, maybe padded.
            f = ip_frame(rng, rng() % 2 ? 4 : 6, rng() % 2, rng() % 200, rng() % 4 == 0 ? rng() % 20 : 0);
        } else if (what == 1 && f.size() > 14) {
            // Any byte of the headers (or past them), to any value.
            f[rng() % std::min<std::size_t>(f.size(), 80)] = static_cast<std::byte>(rng());
        } else if (what == 2) {
            // An 802.1Q tag in front of the ethertype, or one taken out.
            if (f[12] == std::byte{0x81} && f[13] == std::byte{0x00}) {
                f.erase(f.begin() + 12, f.begin() + 16);
            } else {
                const std::byte tag[] = {std::byte{0x81}, std::byte{0}, static_cast<std::byte>(rng() & 0xef),
                                         static_cast<std::byte>(rng())};
                f.insert(f.begin() + 12, tag, tag + 4);
            }
        } else if (what == 3) {
            // The frame one byte longer or shorter (its IP and UDP lengths stay).
            if (rng() % 2 || f.size() < 20) {
                f.push_back(std::byte{0});
            } else {
                f.pop_back();
            }
        } else {
            // The last bytes of the frame: a feed's sequence numbers and prices.
            const std::size_t n = 1 + rng() % 8;
            for (std::size_t i = 0; i < n && i < f.size() - 14; ++i) {
                f[f.size() - 1 - i] = static_cast<std::byte>(rng());
            }
            payload_change = true;
        }
        const bool checksums = rng() % 4 != 0;
        const wire::ip_checksums known{rng() % 3 != 0, rng() % 3 != 0};
        eth_headers want;
        const bool ok = parse_eth(f, want, checksums, known);
        const eth_headers* got = memo.parse(f, checksums, known);
        INFO("round ", round, ", change ", what, ", ", f.size(), " bytes, checksums ", checksums, ", known ", known.l3,
             "/", known.l4);
        REQUIRE((got != nullptr) == ok);
        if (!ok) continue;
        REQUIRE(same_headers(*got, want));
        if (payload_change) {
            ++payload_only;
            if (want.read_end == 0) ++summed_payload_only;
        }
    }
    // The stream had both kinds of frames: payload changes the memo may answer, and ones
    // whose checksum it must sum again (a changed payload there breaks the checksum).
    CHECK(payload_only > 10000);
    CHECK(summed_payload_only > 1000);
    // IPv4 options are headers too: a changed option byte is summed again (the header
    // checksum no longer holds), in a packet whose L4 is not read (ICMP).
    std::vector<std::byte> o = ip_frame(rng, 4, true, 22, 0);
    o.insert(o.begin() + 34, 4, std::byte{1});  // four NOP options
    o[14] = std::byte{0x46};
    o[23] = std::byte{1};
    o[17] = static_cast<std::byte>(std::to_integer<unsigned>(o[17]) + 4);  // total length
    o[24] = o[25] = std::byte{0};
    const std::uint16_t c = static_cast<std::uint16_t>(~reference_sum(std::span(o).subspan(14, 24), 0));
    o[24] = static_cast<std::byte>(c >> 8);
    o[25] = static_cast<std::byte>(c);
    const wire::ip_checksums l4_known{false, true};
    REQUIRE(memo.parse(o, true, l4_known) != nullptr);
    CHECK(memo.parse(o, true, l4_known)->l3_ok);
    o[35] = std::byte{0};  // an option's byte: End of Option List
    REQUIRE(memo.parse(o, true, l4_known) != nullptr);
    CHECK_FALSE(memo.parse(o, true, l4_known)->l3_ok);
    // And frames shorter than an Ethernet header: no answer, and nothing kept.
    CHECK(memo.parse(std::span(f).first(13)) == nullptr);
    eth_headers want;
    REQUIRE(parse_eth(f, want));
    const eth_headers* got = memo.parse(f);
    REQUIRE(got != nullptr);
    CHECK(same_headers(*got, want));
}
