// The raw Ethernet API (api/cxv_eth.h) on two Ethernet functions of cxv-sim cabled to
// one fabric: function 0 sends UDP frames from an eth::queue, function 1 steers them
// with eth::steering rules to its queues and polls them, with the device's checksums,
// flow tags, RSS hashes and hardware timestamps; multicast groups joined and left.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"

using namespace std::chrono_literals;
namespace eth = cxv::eth;

namespace {

constexpr const char* kBdf0 = "0000:c5:00.0";
constexpr const char* kBdf1 = "0000:c5:00.1";
constexpr std::uint16_t kFeed = 31337;
constexpr eth::ipv4 kSrc{169, 254, 0, 1};
constexpr eth::ipv4 kDst{169, 254, 0, 2};

template <typename T>
T take(cxv::result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}
void check_ok(const cxv::status& s) { REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message)); }

// An IPv4/UDP frame with both checksums 0 (the device fills them when asked); the
// payload's first byte is `seq`.
std::vector<std::byte> udp_frame(const eth::mac& dst, const eth::mac& src, const eth::ipv4& sip,
                                 const eth::ipv4& dip, std::uint16_t sport, std::uint16_t dport, std::size_t payload,
                                 std::uint8_t seq) {
    std::vector<std::uint8_t> f(dst.begin(), dst.end());
    f.insert(f.end(), src.begin(), src.end());
    f.insert(f.end(), {0x08, 0x00});
    const std::size_t total = 28 + payload;
    f.insert(f.end(), {0x45, 0, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total), 0, seq, 0x40,
                       0, 64, 17, 0, 0});
    f.insert(f.end(), sip.begin(), sip.end());
    f.insert(f.end(), dip.begin(), dip.end());
    const std::size_t ulen = 8 + payload;
    f.insert(f.end(), {static_cast<std::uint8_t>(sport >> 8), static_cast<std::uint8_t>(sport),
                       static_cast<std::uint8_t>(dport >> 8), static_cast<std::uint8_t>(dport),
                       static_cast<std::uint8_t>(ulen >> 8), static_cast<std::uint8_t>(ulen), 0, 0});
    for (std::size_t i = 0; i < payload; ++i) f.push_back(static_cast<std::uint8_t>(seq + i));
    std::vector<std::byte> out(f.size());
    std::memcpy(out.data(), f.data(), f.size());
    return out;
}

std::uint16_t ones_sum(const std::uint8_t* p, std::size_t n, std::uint32_t sum = 0) {
    for (std::size_t i = 0; i + 1 < n; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (n & 1) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(sum);
}

// The IPv4 header's and the UDP checksum of a received frame verify (RFC 791, 768).
void check_checksums(const std::byte* frame, std::size_t len) {
    const auto* f = reinterpret_cast<const std::uint8_t*>(frame);
    REQUIRE(len >= 42);
    CHECK(ones_sum(f + 14, 20) == 0xffff);
    const std::uint16_t ulen = static_cast<std::uint16_t>(f[38] << 8 | f[39]);
    CHECK((f[40] | f[41]) != 0);  // filled in
    std::uint32_t pseudo = ones_sum(f + 26, 8);
    pseudo += 17 + ulen;
    CHECK(ones_sum(f + 34, ulen, pseudo) == 0xffff);
}

// Polls `q` until `want` packets came or 5 s passed; the packets' bytes are copied out.
struct received {
    std::vector<std::vector<std::byte>> frames;
    std::vector<eth::packet> meta;
};
received poll_for(eth::queue& q, std::size_t want, std::chrono::milliseconds limit = 5000ms) {
    received r;
    const auto end = std::chrono::steady_clock::now() + limit;
    std::array<eth::packet, 32> p;
    while (r.meta.size() < want && std::chrono::steady_clock::now() < end) {
        const int n = q.poll(p);
        for (int i = 0; i < n; ++i) {
            r.frames.emplace_back(p[static_cast<std::size_t>(i)].data,
                                  p[static_cast<std::size_t>(i)].data + p[static_cast<std::size_t>(i)].length);
            r.meta.push_back(p[static_cast<std::size_t>(i)]);
        }
        if (n == 0) std::this_thread::sleep_for(100us);
    }
    return r;
}

// Sends, taking send completions back whenever the ring is full (at most 5 s).
void send_all(eth::queue& q, const std::vector<std::vector<std::byte>>& frames, unsigned flags) {
    std::array<eth::send_completion, 16> c;
    const auto end = std::chrono::steady_clock::now() + 5000ms;
    for (const auto& f : frames) {
        int rc;
        while ((rc = q.send(f, flags)) == ENOMEM && std::chrono::steady_clock::now() < end) q.poll_send(c);
        REQUIRE(rc == 0);
    }
}

struct fabric {
    std::unique_ptr<cxv::device> d0 = take(cxv::device::open(kBdf0));
    std::unique_ptr<cxv::device> d1 = take(cxv::device::open(kBdf1));
    eth::mac m0 = eth::address(*d0);
    eth::mac m1 = eth::address(*d1);
    std::shared_ptr<eth::queue> tx = take(eth::queue::create(*d0, {}));
    std::shared_ptr<eth::steering> steer = take(eth::steering::create(*d1));
};

std::int64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

TEST_CASE("a UDP feed steered to a queue: payloads, device checksums, flow tag, counter, timestamps") {
    fabric f;
    auto rx = take(eth::queue::create(*f.d1, {}));
    auto rule = take(f.steer->add({.ip_version = 4, .ip_protocol = 17, .udp_dport = kFeed}, rx,
                                  {.flow_tag = 0x1234, .count = true}));
    std::vector<std::vector<std::byte>> feed, other;
    for (std::uint8_t i = 0; i < 16; ++i) feed.push_back(udp_frame(f.m1, f.m0, kSrc, kDst, 4000, kFeed, 40 + i, i));
    for (std::uint8_t i = 0; i < 4; ++i) other.push_back(udp_frame(f.m1, f.m0, kSrc, kDst, 4000, 9999, 40, 100 + i));
    const std::int64_t before = now_ns();
    send_all(*f.tx, other, eth::l3_csum | eth::l4_csum);
    send_all(*f.tx, feed, eth::l3_csum | eth::l4_csum);
    // The last one asks for a completion: the frame left, stamped by the sender's clock.
    auto last = udp_frame(f.m1, f.m0, kSrc, kDst, 4000, kFeed, 40, 16);
    REQUIRE(f.tx->send(last, eth::l3_csum | eth::l4_csum | eth::signaled, 0xfeed) == 0);

    const auto r = poll_for(*rx, 17);
    const std::int64_t after = now_ns();
    REQUIRE(r.meta.size() == 17);
    std::uint64_t prev = 0;
    for (std::size_t i = 0; i < 17; ++i) {
        CAPTURE(i);
        const auto& m = r.meta[i];
        const auto& fr = r.frames[i];
        const auto& sent = i < 16 ? feed[i] : last;
        REQUIRE(fr.size() == sent.size());
        // Everything but the checksums the device filled arrives as sent.
        CHECK(std::memcmp(fr.data(), sent.data(), 24) == 0);
        CHECK(std::memcmp(fr.data() + 26, sent.data() + 26, 14) == 0);
        CHECK(std::memcmp(fr.data() + 42, sent.data() + 42, fr.size() - 42) == 0);
        check_checksums(fr.data(), fr.size());
        CHECK(m.flow_tag == 0x1234);
        CHECK(m.l3_ok());
        CHECK(m.l4_ok());
        CHECK(m.rss_hash == 0);  // a direct TIR hashes nothing
        CHECK(m.timestamp > prev);
        prev = m.timestamp;
        // The hardware timestamp, in wall-clock time, lies between the send and the poll.
        const std::int64_t ns = rx->to_ns(m.timestamp);
        CHECK(ns >= before - 50'000'000);
        CHECK(ns <= after + 50'000'000);
    }
    // Port 9999 had no rule: dropped, never delivered.
    CHECK(poll_for(*rx, 1, 200ms).meta.empty());
    const auto counted = take(rule->counters());
    CHECK(counted.packets == 17);

    std::array<eth::send_completion, 8> c;
    int n = 0;
    for (int tries = 0; n == 0 && tries < 5000; ++tries) {
        n = f.tx->poll_send(c);
        if (n == 0) std::this_thread::sleep_for(1ms);
    }
    REQUIRE(n == 1);  // only the one asked for
    CHECK(c[0].id == 0xfeed);
    CHECK(c[0].status == 0);
    CHECK(c[0].timestamp != 0);
    CHECK(c[0].timestamp < r.meta[16].timestamp + 1'000'000'000ull);

    SUBCASE("a rule destroyed steers no more") {
        rule.reset();
        send_all(*f.tx, {feed[0]}, 0);
        CHECK(poll_for(*rx, 1, 300ms).meta.empty());
    }
    SUBCASE("a second rule to a dropping action and its counter") {
        auto drop = take(f.steer->drop({.ip_version = 4, .udp_dport = 9999}, {.count = true}));
        send_all(*f.tx, other, 0);
        const auto end = std::chrono::steady_clock::now() + 5s;
        std::uint64_t dropped = 0;
        while (dropped < 4 && std::chrono::steady_clock::now() < end) dropped = take(drop->counters()).packets;
        CHECK(dropped == 4);
        CHECK(poll_for(*rx, 1, 200ms).meta.empty());
        CHECK(rule->counters().ok());
        CHECK(take(f.steer->add({.ip_version = 4, .udp_dport = 1}, rx))->counters().error().code == ENOENT);
    }
}

TEST_CASE("frames sent by pointer from registered memory into a striding RQ, back to back") {
    fabric f;
    auto rx = take(eth::queue::create(*f.d1, {.recv_entries = 4, .striding = true, .log_strides = 9, .log_stride = 6}));
    auto rule = take(f.steer->add({.dmac = f.m1, .ethertype = 0x0800}, rx));
    // 300 frames of 64 to 1000 bytes: more than one WQE's 512 strides of 64 bytes.
    std::vector<std::vector<std::byte>> frames;
    std::size_t bytes = 0;
    for (unsigned i = 0; i < 300; ++i) {
        frames.push_back(udp_frame(f.m1, f.m0, kSrc, kDst, 7, kFeed, 22 + (i * 37) % 950, static_cast<std::uint8_t>(i)));
        bytes += frames.back().size();
    }
    auto mem = take(cxv::buffer::create(bytes));
    auto key = take(cxv::mr::create(f.tx->domain(), mem->data(), mem->size(), 0));
    std::size_t off = 0;
    unsigned got = 0;
    std::array<eth::send_completion, 16> c;
    std::array<eth::packet, 64> p;
    const auto end = std::chrono::steady_clock::now() + 10s;
    std::vector<std::size_t> at;
    for (const auto& fr : frames) {
        std::memcpy(mem->data() + off, fr.data(), fr.size());
        at.push_back(off);
        off += fr.size();
    }
    // Send in bursts of 16, receiving as they come (the RQ has 4 WQEs).
    unsigned sent = 0;
    bool same = true;
    while (got < frames.size() && std::chrono::steady_clock::now() < end) {
        for (unsigned b = 0; b < 16 && sent < frames.size() && sent - got < 32; ++b) {
            const int rc = f.tx->send(mem->data() + at[sent], static_cast<std::uint32_t>(frames[sent].size()),
                                      key->lkey(), eth::l3_csum | eth::l4_csum, sent);
            if (rc == ENOMEM) break;
            REQUIRE(rc == 0);
            ++sent;
        }
        f.tx->poll_send(c);
        const int n = rx->poll(p);
        for (int i = 0; i < n; ++i) {
            const auto& pk = p[static_cast<std::size_t>(i)];
            const auto& want = frames[got];
            same = same && pk.length == want.size() && std::memcmp(pk.data + 42, want.data() + 42, want.size() - 42) == 0;
            if (pk.length == want.size()) check_checksums(pk.data, pk.length);
            ++got;
        }
        if (n == 0) std::this_thread::sleep_for(50us);
    }
    CHECK(got == frames.size());
    CHECK(same);
    CHECK(rx->receive_errors() == 0);
}

TEST_CASE("RSS: flows spread over four queues by the Toeplitz hash the packets carry") {
    fabric f;
    std::vector<std::shared_ptr<eth::queue>> qs;
    for (int i = 0; i < 4; ++i) qs.push_back(take(eth::queue::create(*f.d1, {.recv_entries = 64})));
    auto group = take(eth::rss::create(*f.d1, qs, {.ip_version = 4, .ports = eth::rss::l4::udp}));
    auto rule = take(f.steer->add({.ip_version = 4, .ip_protocol = 17}, group, {.flow_tag = 3}));
    // The Toeplitz hash (Microsoft's RSS specification) of source and destination address
    // and port, with the group's key.
    const auto& key = group->key();
    auto toeplitz = [&](const std::vector<std::uint8_t>& in) {
        std::uint32_t h = 0;
        std::uint64_t window = 0;
        for (int i = 0; i < 8; ++i) window = window << 8 | key[static_cast<std::size_t>(i)];
        std::size_t next = 8;
        for (std::uint8_t b : in) {
            for (int bit = 7; bit >= 0; --bit) {
                if (b >> bit & 1) h ^= static_cast<std::uint32_t>(window >> 32);
                window <<= 1;
            }
            window |= next < key.size() ? key[next] : 0;
            ++next;
        }
        return h;
    };
    // 64 flows with distinct source ports, both ports drawn over all 16 bits (a fixed
    // seed). The hash is linear in its input bits, so flows that differed only in a
    // port's low bits would leave the queue bits constant for one key in ~2^7, not
    // spread them: over 32 varying bits that odds is ~2^-30.
    std::mt19937 gen(0x7c5f);
    std::set<std::uint16_t> sports;
    std::vector<std::vector<std::byte>> frames;
    while (frames.size() < 64) {
        const auto sport = static_cast<std::uint16_t>(gen());
        const auto dport = static_cast<std::uint16_t>(gen());
        if (dport == 4791 || !sports.insert(sport).second) continue;  // not RoCEv2's port
        frames.push_back(udp_frame(f.m1, f.m0, kSrc, kDst, sport, dport, 20, 0));
    }
    send_all(*f.tx, frames, 0);
    std::set<std::uint16_t> seen;
    std::size_t total = 0;
    std::array<std::size_t, 4> per{};
    const auto end = std::chrono::steady_clock::now() + 5s;
    std::array<eth::packet, 32> p;
    while (total < frames.size() && std::chrono::steady_clock::now() < end) {
        for (std::size_t q = 0; q < qs.size(); ++q) {
            const int n = qs[q]->poll(p);
            for (int i = 0; i < n; ++i) {
                const auto& pk = p[static_cast<std::size_t>(i)];
                const auto* b = reinterpret_cast<const std::uint8_t*>(pk.data);
                const std::uint16_t sport = static_cast<std::uint16_t>(b[34] << 8 | b[35]);
                std::vector<std::uint8_t> in(b + 26, b + 34);  // source, destination address
                in.insert(in.end(), b + 34, b + 38);           // source, destination port
                CAPTURE(sport);
                CHECK(pk.rss_hash == toeplitz(in));
                CHECK(pk.rss_type == (0x04 | 0x80));  // IPv4 and UDP hashed
                CHECK(pk.flow_tag == 3);
                CHECK(pk.rss_hash % 4 == q);          // the RQ table's entry the hash picks
                seen.insert(sport);
                ++per[q];
                ++total;
            }
        }
    }
    CHECK(total == 64);
    CHECK(seen.size() == 64);
    for (std::size_t q = 0; q < 4; ++q) {
        CAPTURE(q);
        CHECK(per[q] > 0);  // 64 such flows over 4 queues: each has some (odds ~4 (3/4)^64 otherwise)
    }
}

TEST_CASE("partial masks: a /24 of groups and a range of ports before a wider /16; values outside a mask refused") {
    fabric f;
    auto narrow = take(eth::queue::create(*f.d1, {}));
    auto wide = take(eth::queue::create(*f.d1, {}));
    check_ok(f.steer->promiscuous(false, true));  // every group in
    // 239.1.2.0/24, ports 31328-31343; then 239.1.0.0/16, any port: a group of its own
    // (other criteria), after the first one's.
    auto r1 = take(f.steer->add({.ip_version = 4,
                                 .dst_ipv4 = eth::ipv4{239, 1, 2, 0},
                                 .udp_dport = 31328,
                                 .mask = {.dst_ipv4 = {255, 255, 255, 0}, .dport = 0xfff0}},
                                narrow, {.count = true}));
    auto r2 = take(f.steer->add(
        {.ip_version = 4, .dst_ipv4 = eth::ipv4{239, 1, 0, 0}, .mask = {.dst_ipv4 = {255, 255, 0, 0}}}, wide,
        {.count = true}));
    struct to {
        eth::ipv4 group;
        std::uint16_t port;
    };
    // The first two to the narrow rule, the next three to the wide one, the last to none.
    const to sends[] = {{{239, 1, 2, 9}, 31328},   {{239, 1, 2, 200}, 31343}, {{239, 1, 2, 9}, 31344},
                        {{239, 1, 3, 9}, 31330},   {{239, 1, 255, 1}, 7},     {{239, 2, 2, 9}, 31330}};
    std::vector<std::vector<std::byte>> frames;
    for (std::size_t i = 0; i < std::size(sends); ++i) {
        frames.push_back(udp_frame(eth::multicast_mac(sends[i].group), f.m0, kSrc, sends[i].group, 4000, sends[i].port,
                                   30, static_cast<std::uint8_t>(i)));
    }
    send_all(*f.tx, frames, eth::l3_csum | eth::l4_csum);
    const auto n = poll_for(*narrow, 3, 500ms);
    const auto w = poll_for(*wide, 4, 500ms);
    REQUIRE(n.meta.size() == 2);
    REQUIRE(w.meta.size() == 3);  // 239.2.2.9 is in neither
    CHECK(std::to_integer<int>(n.frames[0][42]) == 0);
    CHECK(std::to_integer<int>(n.frames[1][42]) == 1);
    CHECK(std::to_integer<int>(w.frames[0][42]) == 2);
    CHECK(std::to_integer<int>(w.frames[1][42]) == 3);
    CHECK(std::to_integer<int>(w.frames[2][42]) == 4);
    CHECK(take(r1->counters()).packets == 2);
    CHECK(take(r2->counters()).packets == 3);

    // A value with bits outside its mask.
    const auto e = f.steer->add(
        {.ip_version = 4, .dst_ipv4 = eth::ipv4{239, 1, 2, 3}, .mask = {.dst_ipv4 = {255, 255, 255, 0}}}, narrow);
    REQUIRE(!e.ok());
    CHECK(e.error().code == EINVAL);
    CHECK(e.error().message.find("dst_ipv4") != std::string::npos);
    CHECK(f.steer->add({.udp_dport = 31329, .mask = {.dport = 0xfff0}}, narrow).error().code == EINVAL);
}

TEST_CASE("a VLAN tag's priority and the IPv4 DSCP steer, as their rules say") {
    fabric f;
    auto by_prio = take(eth::queue::create(*f.d1, {}));
    auto by_dscp = take(eth::queue::create(*f.d1, {}));
    auto r1 = take(f.steer->add({.vlan = 100, .vlan_prio = 5}, by_prio, {.count = true}));
    auto r2 = take(f.steer->add({.ip_version = 4, .dscp = 46}, by_dscp, {.count = true}));  // EF
    const auto plain = [&](std::uint8_t tos, std::uint8_t seq) {
        auto fr = udp_frame(f.m1, f.m0, kSrc, kDst, 4000, kFeed, 20, seq);
        fr[15] = std::byte{tos};
        return fr;
    };
    const auto tagged = [&](std::uint8_t prio, std::uint8_t seq) {
        auto fr = udp_frame(f.m1, f.m0, kSrc, kDst, 4000, kFeed, 20, seq);
        const std::uint16_t tci = static_cast<std::uint16_t>(prio << 13 | 100);
        const std::byte tag[] = {std::byte{0x81}, std::byte{0x00}, std::byte{static_cast<std::uint8_t>(tci >> 8)},
                                 std::byte{static_cast<std::uint8_t>(tci)}};
        fr.insert(fr.begin() + 12, tag, tag + 4);
        return fr;
    };
    send_all(*f.tx, {tagged(5, 1), tagged(1, 2), plain(46 << 2, 3), plain(0, 4), plain(46 << 2 | 1, 5)},
             eth::l3_csum | eth::l4_csum);
    const auto p = poll_for(*by_prio, 2, 300ms), d = poll_for(*by_dscp, 3, 300ms);
    REQUIRE(p.meta.size() == 1);
    REQUIRE(d.meta.size() == 2);  // DSCP 46 with ECN 0 and 1: the ECN bits are not in the rule
    CHECK(take(r1->counters()).packets == 1);
    CHECK(take(r2->counters()).packets == 2);
    CHECK(f.steer->add({.vlan_prio = 8}, by_prio).error().code == EINVAL);
    CHECK(f.steer->add({.dscp = 46, .mask = {.dscp = 0x30}}, by_dscp).error().code == EINVAL);
}

TEST_CASE("the IPv6 flow label steers (a misc parameter of the match): a whole label, then a range of them") {
    fabric f;
    auto one = take(eth::queue::create(*f.d1, {}));
    auto range = take(eth::queue::create(*f.d1, {}));
    auto r1 = take(f.steer->add({.ip_version = 6, .ipv6_flow_label = 0x12345}, one, {.count = true}));
    auto r2 = take(
        f.steer->add({.ipv6_flow_label = 0x12300, .mask = {.ipv6_flow_label = 0xfff00}}, range, {.count = true}));
    // IPv6/UDP, fe80::c5:1 -> fe80::c5:2, traffic class 0x0a, the label, 16 bytes of payload.
    const auto v6 = [&](std::uint32_t label, std::uint8_t seq) {
        std::vector<std::uint8_t> b(f.m1.begin(), f.m1.end());
        b.insert(b.end(), f.m0.begin(), f.m0.end());
        b.insert(b.end(), {0x86, 0xdd, 0x60, static_cast<std::uint8_t>(0xa0 | (label >> 16)),
                           static_cast<std::uint8_t>(label >> 8), static_cast<std::uint8_t>(label), 0, 24, 17, 64});
        for (const std::uint8_t last : {1, 2}) {
            b.insert(b.end(), {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc5, last});
        }
        b.insert(b.end(), {0x0f, 0xa0, 0x7a, 0x69, 0, 24, 0, 0});
        for (std::uint8_t i = 0; i < 16; ++i) b.push_back(static_cast<std::uint8_t>(seq + i));
        std::vector<std::byte> out(b.size());
        std::memcpy(out.data(), b.data(), b.size());
        return out;
    };
    send_all(*f.tx,
             {v6(0x12345, 1), v6(0x12399, 2), v6(0x54321, 3), v6(0x12345, 4),
              udp_frame(f.m1, f.m0, kSrc, kDst, 4000, kFeed, 20, 5)},
             eth::l4_csum);
    const auto a = poll_for(*one, 3, 300ms), b = poll_for(*range, 2, 300ms);
    REQUIRE(a.meta.size() == 2);
    REQUIRE(b.meta.size() == 1);
    CHECK(std::to_integer<unsigned>(a.frames[0][62]) == 1);  // the payload's first byte
    CHECK(std::to_integer<unsigned>(a.frames[1][62]) == 4);
    CHECK(std::to_integer<unsigned>(b.frames[0][62]) == 2);
    CHECK(take(r1->counters()).packets == 2);
    CHECK(take(r2->counters()).packets == 1);
    // A label has 20 bits; a value outside its mask is refused.
    CHECK(f.steer->add({.ipv6_flow_label = 0x100000}, one).error().code == EINVAL);
    CHECK(f.steer->add({.ipv6_flow_label = 0x12345, .mask = {.ipv6_flow_label = 0xfff00}}, one).error().code == EINVAL);
}

TEST_CASE("priorities: a packet meets the rules of priority 0, then 1, then 2, whatever order they were added in") {
    fabric f;
    auto q0 = take(eth::queue::create(*f.d1, {}));
    auto q1 = take(eth::queue::create(*f.d1, {}));
    auto q2 = take(eth::queue::create(*f.d1, {}));
    // Priority 2 first (its table: the root misses to it), then 1 (its table comes between:
    // the root's miss moves to it, and it misses to 2's), then 0 (the root's own).
    auto r2 = take(f.steer->add({.ip_version = 4, .dst_ipv4 = kDst}, q2, {.priority = 2}));
    auto r1 = take(f.steer->add({.ip_version = 4, .udp_dport = kFeed}, q1, {.priority = 1}));
    auto r0 = take(f.steer->add({.ip_version = 4, .udp_sport = 5000, .udp_dport = kFeed}, q0, {.priority = 0}));
    const auto to_port = [&](std::uint16_t sport, std::uint16_t dport, std::uint8_t seq) {
        return udp_frame(f.m1, f.m0, kSrc, kDst, sport, dport, 20, seq);
    };
    send_all(*f.tx, {to_port(5000, kFeed, 1), to_port(6000, kFeed, 2), to_port(5000, 9, 3)}, eth::l3_csum);
    const auto g0 = poll_for(*q0, 2, 300ms), g1 = poll_for(*q1, 2, 300ms), g2 = poll_for(*q2, 2, 300ms);
    REQUIRE(g0.meta.size() == 1);
    REQUIRE(g1.meta.size() == 1);
    REQUIRE(g2.meta.size() == 1);
    CHECK(std::to_integer<int>(g0.frames[0][42]) == 1);
    CHECK(std::to_integer<int>(g1.frames[0][42]) == 2);
    CHECK(std::to_integer<int>(g2.frames[0][42]) == 3);

    // Without the priority-0 rule, its packets fall to priority 1; without that one, to 2.
    r0.reset();
    send_all(*f.tx, {to_port(5000, kFeed, 4)}, eth::l3_csum);
    const auto h1 = poll_for(*q1, 1);
    REQUIRE(h1.meta.size() == 1);
    CHECK(std::to_integer<int>(h1.frames[0][42]) == 4);
    r1.reset();
    send_all(*f.tx, {to_port(5000, kFeed, 5)}, eth::l3_csum);
    const auto h2 = poll_for(*q2, 1);
    REQUIRE(h2.meta.size() == 1);
    CHECK(std::to_integer<int>(h2.frames[0][42]) == 5);
    CHECK(poll_for(*q0, 1, 100ms).meta.empty());
    CHECK(f.steer->add({.udp_dport = 1}, q0, {.priority = eth::steering::kPriorities}).error().code == EINVAL);
}

TEST_CASE("multicast: a group's frames pass the vport's filter only while joined") {
    fabric f;
    auto rx = take(eth::queue::create(*f.d1, {}));
    const eth::ipv4 group{239, 1, 2, 3};
    const eth::mac gmac = eth::multicast_mac(group);
    CHECK(gmac == eth::mac{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03});
    CHECK(eth::multicast_mac(eth::ipv6{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}) ==
          eth::mac{0x33, 0x33, 0xde, 0xad, 0xbe, 0xef});
    auto rule = take(f.steer->add({.ip_version = 4, .dst_ipv4 = group, .udp_dport = kFeed}, rx));
    const auto frame = udp_frame(gmac, f.m0, kSrc, group, 4000, kFeed, 30, 1);
    send_all(*f.tx, {frame}, eth::l3_csum | eth::l4_csum);
    CHECK(poll_for(*rx, 1, 300ms).meta.empty());  // not joined: filtered out

    check_ok(f.steer->join(group));
    send_all(*f.tx, {frame}, eth::l3_csum | eth::l4_csum);
    const auto r = poll_for(*rx, 1);
    REQUIRE(r.meta.size() == 1);
    CHECK(std::memcmp(r.frames[0].data(), gmac.data(), 6) == 0);

    check_ok(f.steer->leave(group));
    send_all(*f.tx, {frame}, eth::l3_csum | eth::l4_csum);
    CHECK(poll_for(*rx, 1, 300ms).meta.empty());
    CHECK(f.steer->leave(group).error().code == ENOENT);
    CHECK(f.steer->join(f.m1).error().code == EINVAL);  // a unicast MAC is no group

    // Promiscuous multicast lets every group in.
    check_ok(f.steer->promiscuous(false, true));
    send_all(*f.tx, {frame}, eth::l3_csum | eth::l4_csum);
    CHECK(poll_for(*rx, 1).meta.size() == 1);
}

TEST_CASE("unsignaled sends give their room back: the queue's own completions, never reported") {
    fabric f;
    auto small = take(eth::queue::create(*f.d0, {.send_entries = 64}));
    auto rx = take(eth::queue::create(*f.d1, {.recv_entries = 1024}));
    auto rule = take(f.steer->add({.ip_version = 4, .udp_dport = kFeed}, rx));
    const auto frame = udp_frame(f.m1, f.m0, kSrc, kDst, 1, kFeed, 100, 0);  // 142 bytes: 3 BBs each
    std::array<eth::send_completion, 16> c;
    unsigned sent = 0, full = 0;
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (sent < 500 && std::chrono::steady_clock::now() < end) {
        const int rc = small->send(frame, 0, sent);
        if (rc == ENOMEM) {
            ++full;
            CHECK(small->poll_send(c) == 0);  // none was asked for
            continue;
        }
        REQUIRE(rc == 0);
        ++sent;
    }
    CHECK(sent == 500);
    CHECK(full > 0);  // the ring did fill, and came back
    const std::vector<std::byte> big(eth::max_inline + 1);
    CHECK(small->send(std::span<const std::byte>(frame.data(), 13)) == EINVAL);
    CHECK(small->send(big) == EINVAL);
    MESSAGE("500 unsignaled frames through a 64-BB send ring: full " << full << " times");
}

TEST_CASE("hardware timestamps follow the device clock's own rate (eth_api_drift_test: the model's clock 10 % fast)") {
    fabric f;
    auto rx = take(eth::queue::create(*f.d1, {}));
    auto rule = take(f.steer->add({.ip_version = 4, .udp_dport = kFeed}, rx));
    // Long enough for a clock left at the announced rate to be 150 ms off at 10 %.
    std::this_thread::sleep_for(1500ms);
    std::vector<std::vector<std::byte>> frames;
    for (std::uint8_t i = 0; i < 4; ++i) frames.push_back(udp_frame(f.m1, f.m0, kSrc, kDst, 1, kFeed, 30, i));
    const std::int64_t before = now_ns();
    send_all(*f.tx, frames, 0);
    const auto r = poll_for(*rx, frames.size());
    const std::int64_t after = now_ns();
    REQUIRE(r.meta.size() == frames.size());
    for (const auto& m : r.meta) {
        const std::int64_t ns = rx->to_ns(m.timestamp);
        CAPTURE(ns - before);
        CHECK(ns >= before - 20'000'000);
        CHECK(ns <= after + 20'000'000);
    }
}
