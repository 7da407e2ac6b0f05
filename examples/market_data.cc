// A market-data receiver on cxv's raw Ethernet API (api/cxv_eth.h): it joins a multicast
// group, steers the feed's UDP port to its own queue, and prints the packet rate, the
// sequence gaps and a histogram of wire-to-application latency, from the time the NIC
// stamped each packet on arrival to the time the application held it.
//
//   market_data --device BDF [--group A.B.C.D] [--port N] [--packets N] [--seconds S]
//               [--feed BDF [--rate PPS]]
//
// A feed's payload starts with a 64-bit sequence number (big-endian). With --feed, a
// second function (on the same fabric) sends such a feed to the group, so the example
// runs on its own, on the model:
//
//   cxv-sim run --devices 2 --port-type eth --
//       bazel-bin/examples/market_data --device 0000:c5:00.1 --feed 0000:c5:00.0
//
// (one command line).
//
// On a card, leave --feed out and point a feed at the group.
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"

namespace {

namespace eth = cxv::eth;

template <typename T>
T must(cxv::result<T> r, const char* what) {
    if (!r) {
        std::fprintf(stderr, "market_data: %s: %s\n", what, r.error().message.c_str());
        std::exit(1);
    }
    return std::move(r).value();
}
void must(const cxv::status& s, const char* what) {
    if (!s) {
        std::fprintf(stderr, "market_data: %s: %s\n", what, s.error().message.c_str());
        std::exit(1);
    }
}

struct options {
    std::string device, feed;
    eth::ipv4 group{239, 1, 1, 1};
    std::uint16_t port = 31337;
    std::uint64_t packets = 10000;
    double seconds = 10;
    double rate = 100000;  // the --feed sender's packets per second
};

bool parse_ipv4(const char* s, eth::ipv4& out) {
    unsigned a, b, c, d;
    char end;
    if (std::sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &end) != 4 || a > 255 || b > 255 || c > 255 || d > 255) {
        return false;
    }
    out = {static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(c),
           static_cast<std::uint8_t>(d)};
    return true;
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: market_data --device BDF [--group A.B.C.D] [--port N] [--packets N] [--seconds S]\n"
                 "                   [--feed BDF [--rate PPS]]\n");
    std::exit(2);
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage();
        const char* v = argv[++i];
        if (a == "--device") {
            o.device = v;
        } else if (a == "--feed") {
            o.feed = v;
        } else if (a == "--group") {
            if (!parse_ipv4(v, o.group) || (o.group[0] & 0xf0) != 0xe0) {
                std::fprintf(stderr, "market_data: --group %s is not an IPv4 multicast address\n", v);
                std::exit(2);
            }
        } else if (a == "--port") {
            o.port = static_cast<std::uint16_t>(std::strtoul(v, nullptr, 10));
        } else if (a == "--packets") {
            o.packets = std::strtoull(v, nullptr, 10);
        } else if (a == "--seconds") {
            o.seconds = std::strtod(v, nullptr);
        } else if (a == "--rate") {
            o.rate = std::strtod(v, nullptr);
        } else {
            usage();
        }
    }
    if (o.device.empty() || o.packets == 0 || o.seconds <= 0 || o.rate <= 0) usage();
    return o;
}

std::int64_t realtime_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The --feed sender: UDP datagrams to the group, 8-byte sequence numbers and 56 bytes of
// "quotes", at `rate` per second until `stop`.
void send_feed(const options& o, std::atomic<bool>& stop) {
    auto dev = must(cxv::device::open(o.feed), "the feed's device");
    auto q = must(eth::queue::create(*dev, {}), "the feed's queue");
    const eth::mac src = eth::address(*dev);
    const eth::mac dst = eth::multicast_mac(o.group);
    std::array<std::uint8_t, 14 + 20 + 8 + 64> f{};
    std::memcpy(f.data(), dst.data(), 6);
    std::memcpy(f.data() + 6, src.data(), 6);
    f[12] = 0x08;
    const std::uint8_t ip[20] = {0x45, 0, 0, 92, 0, 0, 0x40, 0, 1, 17, 0, 0, 169, 254, src[4], src[5],
                                 o.group[0], o.group[1], o.group[2], o.group[3]};
    std::memcpy(f.data() + 14, ip, sizeof(ip));
    const std::uint8_t udp[8] = {0x9c, 0x40, static_cast<std::uint8_t>(o.port >> 8), static_cast<std::uint8_t>(o.port),
                                 0, 72, 0, 0};
    std::memcpy(f.data() + 34, udp, sizeof(udp));
    std::array<eth::send_completion, 16> c;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t seq = 1; !stop.load(std::memory_order_relaxed); ++seq) {
        for (int b = 0; b < 8; ++b) f[42 + b] = static_cast<std::uint8_t>(seq >> (56 - 8 * b));
        int rc;
        while ((rc = q->send(std::as_bytes(std::span(f)), eth::l3_csum | eth::l4_csum)) == ENOMEM) q->poll_send(c);
        if (rc != 0) {
            std::fprintf(stderr, "market_data: feed send: errno %d\n", rc);
            return;
        }
        q->poll_send(c);
        const auto due = start + std::chrono::nanoseconds(static_cast<std::int64_t>(seq * 1e9 / o.rate));
        // Ahead of the rate: wait, sleeping when it is long enough to (the receiver and the
        // device want the CPUs too).
        for (auto now = std::chrono::steady_clock::now(); now < due && !stop.load(std::memory_order_relaxed);
             now = std::chrono::steady_clock::now()) {
            if (due - now > std::chrono::microseconds(100)) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse(argc, argv);
    auto dev = must(cxv::device::open(o.device), "open");
    auto q = must(eth::queue::create(*dev, {.recv_entries = 64, .striding = true, .log_strides = 9, .log_stride = 6}),
                  "the receive queue");
    auto steer = must(eth::steering::create(*dev), "steering");
    must(steer->join(o.group), "joining the group");
    auto rule = must(steer->add({.ip_version = 4, .ip_protocol = 17, .dst_ipv4 = o.group, .udp_dport = o.port}, q,
                                {.flow_tag = 1, .count = true}),
                     "the feed's rule");
    std::printf("market_data: joined %u.%u.%u.%u, UDP port %u steered to RQ %#x (flow tag 1)\n", o.group[0], o.group[1],
                o.group[2], o.group[3], o.port, q->rqn());
    std::fflush(stdout);

    std::atomic<bool> stop{false};
    std::thread feed;
    if (!o.feed.empty()) feed = std::thread([&] { send_feed(o, stop); });

    // Receive: latency per packet into a reserved array (no allocation while polling).
    std::vector<std::int64_t> lat;
    lat.reserve(std::min<std::uint64_t>(o.packets, 1u << 24));  // the first 16 M packets' latencies
    std::uint64_t got = 0, gaps = 0, last_seq = 0, no_stamp = 0, bad = 0;
    std::array<eth::packet, 64> p;
    const auto start = std::chrono::steady_clock::now();
    const auto limit = start + std::chrono::duration<double>(o.seconds);
    auto first = start, end = start;
    while (got < o.packets) {
        const int n = q->poll(p);
        if (n == 0) {
            if (std::chrono::steady_clock::now() > limit) break;
            continue;
        }
        const std::int64_t now = realtime_ns();
        if (got == 0) first = std::chrono::steady_clock::now();
        for (int i = 0; i < n && got < o.packets; ++i) {
            const eth::packet& pk = p[static_cast<std::size_t>(i)];
            if (pk.flow_tag != 1 || pk.length < 50 || !pk.l4_ok()) {
                ++bad;
                continue;
            }
            const auto* b = reinterpret_cast<const std::uint8_t*>(pk.data) + 42;
            std::uint64_t seq = 0;
            for (int k = 0; k < 8; ++k) seq = seq << 8 | b[k];
            if (last_seq != 0 && seq != last_seq + 1) gaps += seq > last_seq ? seq - last_seq - 1 : 1;
            last_seq = seq;
            const std::int64_t wire = q->to_ns(pk.timestamp);
            if (wire == 0) {
                ++no_stamp;
            } else if (lat.size() < lat.capacity()) {
                lat.push_back(now - wire);
            }
            ++got;
        }
        end = std::chrono::steady_clock::now();
    }
    stop = true;
    if (feed.joinable()) feed.join();

    const double secs = std::chrono::duration<double>(end - first).count();
    const auto counted = rule->counters();
    std::printf("market_data: %llu packets in %.3f s: %.0f packets/s, %llu sequence gaps, %llu not the feed's; the "
                "rule counted %llu\n",
                static_cast<unsigned long long>(got), secs, secs > 0 ? static_cast<double>(got) / secs : 0.0,
                static_cast<unsigned long long>(gaps), static_cast<unsigned long long>(bad),
                counted ? static_cast<unsigned long long>(counted->packets) : 0ull);
    if (!lat.empty()) {
        std::sort(lat.begin(), lat.end());
        auto pct = [&](double q) { return lat[std::min(lat.size() - 1, static_cast<std::size_t>(q * lat.size()))]; };
        std::printf("wire-to-application latency (NIC timestamp to poll), ns: min %lld p50 %lld p99 %lld p99.9 %lld "
                    "max %lld\n",
                    static_cast<long long>(lat.front()), static_cast<long long>(pct(0.5)),
                    static_cast<long long>(pct(0.99)), static_cast<long long>(pct(0.999)),
                    static_cast<long long>(lat.back()));
        // Powers of two: under 512 ns, then [512, 1024), [1024, 2048) ...
        std::array<std::uint64_t, 24> bins{};
        for (const std::int64_t v : lat) {
            unsigned k = 0;
            while (k + 1 < bins.size() && v >= (std::int64_t{256} << (k + 1))) ++k;
            ++bins[k];
        }
        const std::uint64_t most = *std::max_element(bins.begin(), bins.end());
        for (unsigned k = 0; k < bins.size(); ++k) {
            if (bins[k] == 0) continue;
            const int bar = static_cast<int>(40 * bins[k] / most);
            const long long lo = k == 0 ? 0 : static_cast<long long>(std::int64_t{256} << k);
            const long long hi = static_cast<long long>(std::int64_t{256} << (k + 1));
            std::printf("  %9lld - %9lld ns %-40.*s %llu\n", lo, hi, bar, "########################################",
                        static_cast<unsigned long long>(bins[k]));
        }
    }
    if (no_stamp != 0) std::printf("market_data: %llu packets without a device clock\n", static_cast<unsigned long long>(no_stamp));
    return got == o.packets ? 0 : 1;
}
