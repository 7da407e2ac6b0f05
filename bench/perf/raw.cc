// cxv-perf's raw Ethernet tests (raw.h): one eth::queue per side, a steering rule for the
// frames addressed to it, and the timed loops on the queue's fast path.
#include "bench/perf/raw.h"

#include <arpa/inet.h>
#include <getopt.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "bench/perf/oob.h"
#include "bench/perf/options.h"
#include "bench/perf/report.h"
#include "bench/perf/setup.h"
#include "bench/perf/tsc.h"

namespace cxv::perf {
namespace {

using namespace std::chrono_literals;
using cxv::eth::ipv4;
using cxv::eth::ipv6;
using cxv::eth::mac;

constexpr auto kPeerTimeout = 60s;
constexpr auto kAcceptTimeout = 120s;
constexpr std::uint16_t kEthertype = 0x88b5;  // IEEE 802 local experimental: frames without -J/-j
constexpr std::uint64_t kEndMark = ~std::uint64_t{0};  // a frame's sequence number: the run is over
constexpr unsigned kPeakWindow = 1024;                 // frames per window of the peak rate
constexpr std::size_t kMaxSamples = std::size_t{1} << 22;

enum class kind { bw, lat, burst };

// Where cores are scarce (or on the model, whose thread needs one), a waiting loop yields
// every 64 empty polls, as cxv-perf's other loops do (wait.h): a spinning side would
// otherwise hold the core the model or its peer needs for a scheduler slice (~2 ms).
bool g_idle_yield = false;

struct raw_options {
    std::string test;
    kind k = kind::bw;
    std::vector<std::string> devices;
    std::uint32_t size = 0;  // the frame's bytes, FCS not counted
    std::uint64_t iters = 0;
    unsigned duration = 0;
    std::optional<mac> src_mac, dst_mac;  // -B, -E: override the exchanged MACs
    // -J, -j: the two IP addresses (IPv4 in the first 4 bytes; with --raw_ipv6 all 16).
    std::optional<ipv6> server_ip, client_ip;
    bool raw_ipv6 = false;         // --raw_ipv6
    std::uint32_t flow_label = 0;  // --flow_label (20 bits)
    std::uint16_t server_port = 5000, client_port = 6000;
    bool tcp = false;
    unsigned burst = 128, reply_every = 1;
    unsigned tcp_port = 18515;
    std::string json, server;
    bool loopback = false, help = false;
};

// What both sides agree on, and each side's own MAC.
struct hello {
    char magic[8];
    char test[24];
    std::uint32_t size, duration, burst, reply_every;
    std::uint64_t iters;
    std::uint8_t ip, tcp;  // ip: 0 (no IP header), 4 or 6
    std::array<std::uint8_t, 16> server_ip, client_ip;
    std::uint32_t flow_label;
    std::uint16_t server_port, client_port;
    std::array<std::uint8_t, 6> mac;
};

struct wire_count {
    std::uint64_t value = 0;
    std::uint8_t ok = 1;
};

bool parse_mac(const char* s, mac& out) {
    unsigned v[6];
    if (std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) return false;
    for (int i = 0; i < 6; ++i) {
        if (v[i] > 255) return false;
        out[i] = static_cast<std::uint8_t>(v[i]);
    }
    return true;
}
// An IPv6 address as inet_pton(3) reads it (perftest's -J/-j with --raw_ipv6).
bool parse_ipv6(const char* s, ipv6& out) { return ::inet_pton(AF_INET6, s, out.data()) == 1; }
bool parse_ipv4(const char* s, ipv4& out) {
    unsigned v[4];
    char tail = 0;
    if (std::sscanf(s, "%u.%u.%u.%u%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4) return false;
    for (int i = 0; i < 4; ++i) {
        if (v[i] > 255) return false;
        out[i] = static_cast<std::uint8_t>(v[i]);
    }
    return true;
}

enum : int { opt_tcp = 300, opt_burst, opt_reply_every, opt_json, opt_loopback, opt_raw_ipv6, opt_flow_label };
const option kLong[] = {
    {"ib-dev", required_argument, nullptr, 'd'},   {"size", required_argument, nullptr, 's'},
    {"iters", required_argument, nullptr, 'n'},    {"duration", required_argument, nullptr, 'D'},
    {"source_mac", required_argument, nullptr, 'B'}, {"dest_mac", required_argument, nullptr, 'E'},
    {"dest_ip", required_argument, nullptr, 'J'},  {"source_ip", required_argument, nullptr, 'j'},
    {"dest_port", required_argument, nullptr, 'K'}, {"source_port", required_argument, nullptr, 'k'},
    {"port", required_argument, nullptr, 'p'},     {"server", no_argument, nullptr, 'Z'},
    {"client", no_argument, nullptr, 'P'},         {"CPU-freq", no_argument, nullptr, 'F'},
    {"help", no_argument, nullptr, 'h'},           {"tcp", no_argument, nullptr, opt_tcp},
    {"burst_size", required_argument, nullptr, opt_burst},
    {"reply_every", required_argument, nullptr, opt_reply_every},
    {"json", required_argument, nullptr, opt_json}, {"loopback", no_argument, nullptr, opt_loopback},
    {"raw_ipv6", no_argument, nullptr, opt_raw_ipv6}, {"flow_label", required_argument, nullptr, opt_flow_label},
    {nullptr, 0, nullptr, 0},
};

void print_raw_usage() {
    std::printf(
        "usage: cxv-perf raw_ethernet_bw|raw_ethernet_lat|raw_ethernet_burst_lat [options] [SERVER]\n"
        "options (as perftest's raw tests):\n"
        "  -d, --ib-dev=BDF         the function (twice with --loopback: two functions)\n"
        "  -s, --size=BYTES         frame size, 64 .. 1518 (default: bw 1518, latency 64)\n"
        "  -n, --iters=N            frames (default: bw 5000, latency 1000)\n"
        "  -D, --duration=SECONDS   run for this long instead\n"
        "  -B, --source_mac=MAC     the frames' source MAC (default: this function's)\n"
        "  -E, --dest_mac=MAC       the frames' destination MAC (default: the peer's)\n"
        "  -J, --dest_ip=ADDRESS    the server's IP address: IP frames (with -j); IPv4 (A.B.C.D),\n"
        "                           or IPv6 with --raw_ipv6\n"
        "  -j, --source_ip=ADDRESS  the client's IP address\n"
        "      --raw_ipv6           IPv6 frames (-J and -j IPv6 addresses)\n"
        "      --flow_label=N       the IPv6 header's flow label (0 .. 0xfffff)\n"
        "  -K, --dest_port=PORT     the server's UDP/TCP port (default 5000)\n"
        "  -k, --source_port=PORT   the client's UDP/TCP port (default 6000)\n"
        "      --tcp                TCP headers instead of UDP\n"
        "      --burst_size=N       burst_lat: frames per burst (default 128)\n"
        "      --reply_every=N      burst_lat: the server answers every N-th frame (default 1)\n"
        "  -p, --port=PORT          TCP port of the out-of-band exchange (default 18515)\n"
        "  -Z, --server, -P, --client  accepted; the side is the server without SERVER\n"
        "      --json=FILE          every figure and the configuration as JSON\n"
        "      --loopback           both sides in this process (two functions: -d twice)\n");
}

result<raw_options> parse_raw(int argc, char** argv) {
    raw_options o;
    o.test = argv[1];
    o.k = o.test == "raw_ethernet_bw" ? kind::bw : o.test == "raw_ethernet_lat" ? kind::lat : kind::burst;
    o.size = o.k == kind::bw ? 1518 : 64;
    o.iters = o.k == kind::bw ? 5000 : 1000;
    bool client_flag = false, server_flag = false, iters_given = false;
    const char* ip_arg[2] = {nullptr, nullptr};  // -J, -j: read once --raw_ipv6 is known
    std::uint64_t v = 0;
    opterr = 0;
    optind = 2;
    auto bad = [](std::string m) { return error{EINVAL, std::move(m)}; };
    for (;;) {
        int index = 0;
        const int c = getopt_long(argc, argv, "+:d:s:n:D:B:E:J:j:K:k:p:ZPFh", kLong, &index);
        if (c == -1) break;
        const char* arg = optarg;
        const std::string shown = argv[optind - 1];
        const std::string flag = std::string("-") + static_cast<char>(c);  // (for the short options with a value)
        switch (c) {
        case 'd': o.devices.push_back(arg); break;
        case 's':
            if (!parse_number(arg, 64, 1518, v)) return bad("bad -s (64 .. 1518 bytes, a frame): " + std::string(arg));
            o.size = static_cast<std::uint32_t>(v);
            break;
        case 'n':
        case 'D':
        case 'p':
            if (auto r = take_run_option(c, arg, o.iters, iters_given, o.duration, o.tcp_port); !r) return r.error();
            break;
        case 'B':
        case 'E': {
            mac m{};
            if (!parse_mac(arg, m)) return bad("bad " + flag + " (XX:XX:XX:XX:XX:XX): " + std::string(arg));
            (c == 'B' ? o.src_mac : o.dst_mac) = m;
            break;
        }
        case 'J':
        case 'j': ip_arg[c == 'J' ? 0 : 1] = arg; break;
        case 'K':
        case 'k':
            if (!parse_number(arg, 1, 65535, v)) return bad("bad " + flag + " (port 1 .. 65535): " + std::string(arg));
            (c == 'K' ? o.server_port : o.client_port) = static_cast<std::uint16_t>(v);
            break;
        case 'Z': server_flag = true; break;
        case 'P': client_flag = true; break;
        case 'F': break;
        case 'h': o.help = true; return o;
        case opt_tcp: o.tcp = true; break;
        case opt_burst:
            if (!parse_number(arg, 1, 1024, v)) return bad("bad --burst_size (1 .. 1024): " + std::string(arg));
            o.burst = static_cast<unsigned>(v);
            break;
        case opt_reply_every:
            if (!parse_number(arg, 1, 1024, v)) return bad("bad --reply_every (1 .. 1024): " + std::string(arg));
            o.reply_every = static_cast<unsigned>(v);
            break;
        case opt_json: o.json = arg; break;
        case opt_loopback: o.loopback = true; break;
        case opt_raw_ipv6: o.raw_ipv6 = true; break;
        case opt_flow_label:
            if (!parse_number(arg, 0, 0xfffff, v)) return bad("bad --flow_label (0 .. 0xfffff): " + std::string(arg));
            o.flow_label = static_cast<std::uint32_t>(v);
            break;
        case ':': return bad("option " + shown + " needs a value");
        default: return bad("unknown option " + shown + " (cxv-perf " + o.test + " --help lists them)");
        }
    }
    if (optind < argc) o.server = argv[optind++];
    if (optind < argc) return bad("unexpected argument '" + std::string(argv[optind]) + "'");
    for (int i = 0; i < 2; ++i) {
        if (ip_arg[i] == nullptr) continue;
        const std::string f = i == 0 ? "-J" : "-j";
        ipv6 a{};
        if (o.raw_ipv6) {
            if (!parse_ipv6(ip_arg[i], a)) return bad("bad " + f + " (an IPv6 address, with --raw_ipv6): " + ip_arg[i]);
        } else {
            ipv4 v4{};
            if (!parse_ipv4(ip_arg[i], v4)) {
                return bad("bad " + f + " (an IPv4 address A.B.C.D; IPv6 with --raw_ipv6): " + ip_arg[i]);
            }
            std::copy(v4.begin(), v4.end(), a.begin());
        }
        (i == 0 ? o.server_ip : o.client_ip) = a;
    }
    if (o.server_ip.has_value() != o.client_ip.has_value()) return bad("-J and -j go together (the two IP addresses)");
    if (o.tcp && !o.server_ip) return bad("--tcp needs -J and -j");
    if (o.raw_ipv6 && !o.server_ip) return bad("--raw_ipv6 needs -J and -j (the two IPv6 addresses)");
    if (o.flow_label != 0 && !o.raw_ipv6) return bad("--flow_label needs --raw_ipv6");
    if (o.duration != 0 && iters_given) return bad("-D and -n cannot be combined");
    if (o.loopback && !o.server.empty()) return bad("--loopback takes no SERVER");
    if (o.loopback && o.devices.size() != 2) {
        return bad("--loopback needs two functions (-d BDF -d BDF2): a function does not receive its own frames");
    }
    if (!o.loopback && o.devices.size() > 1) return bad("-d given too often");
    if (!o.loopback && client_flag && o.server.empty()) return bad("--client needs SERVER (the exchange's host)");
    if (!o.loopback && server_flag && !o.server.empty()) return bad("--server takes no SERVER");
    if (o.k == kind::burst && o.burst % o.reply_every != 0) return bad("--reply_every must divide --burst_size");
    const std::uint32_t headers = 14 + (o.server_ip ? (o.raw_ipv6 ? 40 : 20) + (o.tcp ? 20 : 8) : 0);
    if (o.size < headers + 8) return bad("-s " + std::to_string(o.size) + " leaves no room after the headers");
    return o;
}

hello hello_of(const raw_options& o, const mac& own) {
    hello h;
    std::memset(&h, 0, sizeof h);  // the padding too: the server compares the bytes
    std::memcpy(h.magic, "cxvraw02", 8);
    std::snprintf(h.test, sizeof h.test, "%s", o.test.c_str());
    h.size = o.size;
    h.duration = o.duration;
    h.burst = o.burst;
    h.reply_every = o.reply_every;
    h.iters = o.iters;
    h.ip = static_cast<std::uint8_t>(!o.server_ip ? 0 : o.raw_ipv6 ? 6 : 4);
    h.flow_label = o.flow_label;
    h.tcp = o.tcp ? 1 : 0;
    if (o.server_ip) h.server_ip = *o.server_ip;
    if (o.client_ip) h.client_ip = *o.client_ip;
    h.server_port = o.server_port;
    h.client_port = o.client_port;
    h.mac = own;
    return h;
}
bool same_run(const hello& a, const hello& b) {
    return std::memcmp(&a, &b, offsetof(hello, mac)) == 0;
}

// A frame of the run from `from` to `to`: Ethernet, and with -J/-j IPv4 or IPv6 and UDP or TCP
// (checksums left to the device), then the payload, whose first 8 bytes (at the
// returned offset) carry the frame's sequence number.
std::size_t build_frame(std::byte* f, const raw_options& o, const mac& src, const mac& dst, bool from_server) {
    std::memset(f, 0, o.size);
    auto u8 = [&](std::size_t at, unsigned v) { f[at] = std::byte{static_cast<std::uint8_t>(v)}; };
    auto u16 = [&](std::size_t at, unsigned v) {
        u8(at, v >> 8);
        u8(at + 1, v);
    };
    for (int i = 0; i < 6; ++i) {
        u8(i, dst[i]);
        u8(6 + i, src[i]);
    }
    if (!o.server_ip) {
        u16(12, kEthertype);
        return 14;
    }
    const std::size_t ip = 14, l4 = ip + (o.raw_ipv6 ? 40 : 20);
    const std::size_t l4_len = o.size - l4;
    const ipv6& s = from_server ? *o.server_ip : *o.client_ip;
    const ipv6& d = from_server ? *o.client_ip : *o.server_ip;
    if (o.raw_ipv6) {
        // RFC 8200: version 6, traffic class 0, the flow label; the payload's length.
        u16(12, 0x86dd);
        u8(ip, 0x60);
        u8(ip + 1, o.flow_label >> 16);
        u16(ip + 2, o.flow_label & 0xffff);
        u16(ip + 4, static_cast<unsigned>(l4_len));
        u8(ip + 6, o.tcp ? 6 : 17);
        u8(ip + 7, 64);
        for (int i = 0; i < 16; ++i) {
            u8(ip + 8 + i, s[i]);
            u8(ip + 24 + i, d[i]);
        }
    } else {
        u16(12, 0x0800);
        u8(ip, 0x45);
        u16(ip + 2, static_cast<unsigned>(o.size - ip));
        u8(ip + 6, 0x40);  // don't fragment
        u8(ip + 8, 64);
        u8(ip + 9, o.tcp ? 6 : 17);
        for (int i = 0; i < 4; ++i) {
            u8(ip + 12 + i, s[i]);
            u8(ip + 16 + i, d[i]);
        }
    }
    u16(l4, from_server ? o.server_port : o.client_port);
    u16(l4 + 2, from_server ? o.client_port : o.server_port);
    if (o.tcp) {
        u8(l4 + 12, 5 << 4);  // data offset: 5 words
        u8(l4 + 13, 0x18);    // PSH, ACK
        u16(l4 + 14, 0xffff);  // window
        return l4 + 20;
    }
    u16(l4 + 4, static_cast<unsigned>(l4_len));
    return l4 + 8;
}

// What a side steers to its queue: frames to its MAC, with -J/-j to its address and port.
cxv::eth::match match_of(const raw_options& o, const mac& own, bool server) {
    cxv::eth::match m;
    m.dmac = own;
    if (!o.server_ip) {
        m.ethertype = kEthertype;
        return m;
    }
    m.ip_protocol = o.tcp ? 6 : 17;
    const ipv6& to = server ? *o.server_ip : *o.client_ip;
    if (o.raw_ipv6) {
        m.ip_version = 6;
        m.dst_ipv6 = to;
    } else {
        m.ip_version = 4;
        m.dst_ipv4 = ipv4{to[0], to[1], to[2], to[3]};
    }
    const std::uint16_t port = server ? o.server_port : o.client_port;
    (o.tcp ? m.tcp_dport : m.udp_dport) = port;
    return m;
}

std::uint64_t seq_of(const cxv::eth::packet& p, std::size_t at) {
    std::uint64_t s = 0;
    if (p.length >= at + 8) std::memcpy(&s, p.data + at, 8);
    return s;
}

// One side's queue, rule and frame memory.
struct raw_side {
    std::shared_ptr<function> fn;
    std::shared_ptr<cxv::eth::queue> q;
    std::shared_ptr<cxv::eth::steering> steer;
    std::unique_ptr<cxv::eth::rule> rule;
    std::unique_ptr<cxv::buffer> tx;
    std::shared_ptr<cxv::mr> tx_mr;
    unsigned slots = 0;
    std::size_t seq_at = 0;
    bool by_pointer = false;  // frames over eth::max_inline go from tx (registered)
    unsigned csum = 0;        // IP frames: the device fills their checksums

    std::byte* slot(unsigned i) const { return tx->data() + std::size_t{i % slots} * 2048; }
    // Sends slot i's frame with sequence number `seq`: 0, or ENOMEM (ring full).
    int send(unsigned i, std::uint32_t size, std::uint64_t seq, unsigned flags = 0, std::uint64_t id = 0) {
        std::byte* f = slot(i);
        std::memcpy(f + seq_at, &seq, 8);
        flags |= csum;
        return by_pointer ? q->send(f, size, tx_mr->lkey(), flags, id)
                          : q->send(std::span<const std::byte>(f, size), flags, id);
    }
};

result<raw_side> make_raw_side(const raw_options& o, std::shared_ptr<function> fn, bool server, const mac& own,
                               const mac& peer) {
    raw_side s;
    s.fn = std::move(fn);
    cxv::eth::queue::attr qa;
    qa.send_entries = 1024;
    qa.recv_entries = 1024;
    qa.buffer_size = 2048;
    auto q = cxv::eth::queue::create(*s.fn->dev, qa);
    if (!q) return q.error();
    s.q = std::move(q).value();
    auto st = cxv::eth::steering::create(*s.fn->dev);
    if (!st) return st.error();
    s.steer = std::move(st).value();
    auto r = s.steer->add(match_of(o, own, server), s.q);
    if (!r) return r.error();
    s.rule = std::move(r).value();
    s.slots = o.k == kind::burst ? std::max(2 * o.burst, 64u) : 64;
    auto b = cxv::buffer::create(std::size_t{s.slots} * 2048);
    if (!b) return b.error();
    s.tx = std::move(b).value();
    auto m = cxv::mr::create(s.q->domain(), s.tx->data(), s.tx->size(), cxv::access_local_write);
    if (!m) return m.error();
    s.tx_mr = std::move(m).value();
    s.by_pointer = o.size > cxv::eth::max_inline;
    s.csum = o.server_ip ? cxv::eth::l3_csum | cxv::eth::l4_csum : 0;
    const mac src = o.src_mac && !server ? *o.src_mac : own;
    const mac dst = o.dst_mac && !server ? *o.dst_mac : peer;
    for (unsigned i = 0; i < s.slots; ++i) s.seq_at = build_frame(s.slot(i), o, src, dst, server);
    return s;
}

// Polls packets until one arrives or `stall` ticks pass; false on the stall.
template <class F>
bool wait_packets(raw_side& s, std::uint64_t stall, F each) {
    cxv::eth::packet p[32];
    const std::uint64_t start = tsc_ordered();
    for (unsigned empty = 1;; ++empty) {
        const int n = s.q->poll(p);
        if (n > 0) {
            for (int i = 0; i < n; ++i) each(p[i]);
            return true;
        }
        if ((empty & 63) == 0) {
            if (g_idle_yield) std::this_thread::yield();
            if (tsc_ordered() - start > stall) return false;
        }
    }
}

void drain_sends(raw_side& s) {
    cxv::eth::send_completion c[32];
    (void)s.q->poll_send(c);
}
// The send ring is full: its room comes back with the completions.
void wait_room(raw_side& s) {
    drain_sends(s);
    if (g_idle_yield) std::this_thread::yield();
}

// The client's bandwidth loop: frames as fast as the ring takes them.
status bw_client(const raw_options& o, raw_side& s, double hz, bandwidth_sample_set& out) {
    const std::uint64_t target = o.duration ? ~std::uint64_t{0} : o.iters;
    const std::uint64_t end = o.duration ? tsc_now() + static_cast<std::uint64_t>(hz * o.duration) : 0;
    const std::uint64_t stall = static_cast<std::uint64_t>(hz * 10);
    cxv::eth::send_completion c[64];
    std::uint64_t sent = 0, window_start = 0, last_progress = 0;
    double best = 0;
    const std::uint64_t t0 = tsc_now();
    window_start = last_progress = t0;
    while (sent < target) {
        if (o.duration && (sent & 255) == 0 && tsc_unordered() >= end) break;
        const bool last = sent + 1 == target;
        const int rc = s.send(static_cast<unsigned>(sent), o.size, sent, last ? cxv::eth::signaled : 0, 1);
        if (rc == ENOMEM) {
            (void)s.q->poll_send(c);
            if (g_idle_yield) std::this_thread::yield();
            if (tsc_unordered() - last_progress > stall) return error{ETIMEDOUT, "the send ring did not drain in 10 s"};
            continue;
        }
        if (rc != 0) return error{rc, std::string("send: ") + std::strerror(rc)};
        last_progress = tsc_unordered();
        ++sent;
        if (sent % kPeakWindow == 0) {
            const std::uint64_t now = tsc_unordered();
            const double per = static_cast<double>(now - window_start) / kPeakWindow;
            if (best == 0 || per < best) best = per;
            window_start = now;
        }
    }
    if (o.duration) {
        // The last frame, signaled: its completion says every frame has left.
        while (s.send(static_cast<unsigned>(sent), o.size, sent, cxv::eth::signaled, 1) == ENOMEM) (void)s.q->poll_send(c);
        ++sent;
    }
    for (bool done = false; !done;) {
        const int n = s.q->poll_send(c);
        for (int i = 0; i < n; ++i) done |= c[i].id == 1;
        if (tsc_unordered() - last_progress > stall) return error{ETIMEDOUT, "the last frame's completion did not come"};
    }
    out.bytes = o.size;
    out.iterations = sent;
    out.ticks = tsc_now() - t0;
    // The peak: the fastest window of kPeakWindow frames, and never below the average (a
    // run's last frames, in no whole window, may be its fastest).
    const double average = sent != 0 ? static_cast<double>(out.ticks) / static_cast<double>(sent) : 0;
    out.min_ticks_per_iteration = best == 0 ? average : std::min(best, average);
    return ok_status();
}

// Ends a run on the wire: a few frames with the end mark (one may be dropped).
void send_end(const raw_options& o, raw_side& s) {
    for (int i = 0; i < 4; ++i) {
        while (s.send(static_cast<unsigned>(i), o.size, kEndMark) == ENOMEM) wait_room(s);
    }
}

status bw_server(const raw_options& o, raw_side& s, double hz, std::uint64_t& received) {
    const std::uint64_t expected = o.duration ? ~std::uint64_t{0} : o.iters;
    const std::uint64_t idle = static_cast<std::uint64_t>(hz * (o.duration + 5));
    bool end = false;
    while (received < expected && !end) {
        const bool got = wait_packets(s, idle, [&](const cxv::eth::packet& p) {
            if (seq_of(p, s.seq_at) == kEndMark) {
                end = true;
            } else {
                ++received;
            }
        });
        if (!got) break;  // frames lost: the client's count says how many
    }
    return ok_status();
}

status lat_client(const raw_options& o, raw_side& s, double hz, latency_sample_set& out) {
    const std::uint64_t stall = static_cast<std::uint64_t>(hz * 5);
    const std::uint64_t end = o.duration ? tsc_now() + static_cast<std::uint64_t>(hz * o.duration) : 0;
    const std::uint64_t total = o.duration ? kMaxSamples : o.iters;
    out.bytes = o.size;
    out.round_trip_halved = true;
    out.samples.assign(total, 0);
    std::uint64_t i = 0;
    for (; i < total; ++i) {
        if (o.duration && tsc_unordered() >= end) break;
        const std::uint64_t t0 = tsc_ordered();
        int rc;
        while ((rc = s.send(static_cast<unsigned>(i), o.size, i)) == ENOMEM) wait_room(s);
        if (rc != 0) return error{rc, std::string("send: ") + std::strerror(rc)};
        if (!wait_packets(s, stall, [](const cxv::eth::packet&) {})) {
            return error{ETIMEDOUT, "no answer to frame " + std::to_string(i) + " in 5 s (a frame lost?)"};
        }
        out.samples[i] = tsc_ordered() - t0;
        if ((i & 15) == 15) drain_sends(s);
    }
    out.samples.resize(i);
    out.iterations = i;
    return ok_status();
}

// burst_lat: bursts of --burst_size frames; the server answers every --reply_every-th,
// and each answer's time from that frame's post is a sample.
status burst_client(const raw_options& o, raw_side& s, double hz, latency_sample_set& out) {
    const std::uint64_t stall = static_cast<std::uint64_t>(hz * 5);
    const std::uint64_t end = o.duration ? tsc_now() + static_cast<std::uint64_t>(hz * o.duration) : 0;
    const std::uint64_t frames = o.duration ? kMaxSamples : o.iters;
    out.bytes = o.size;
    out.round_trip_halved = true;
    out.samples.assign(frames / o.reply_every + 1, 0);
    std::vector<std::uint64_t> posted(o.burst / o.reply_every, 0);
    std::uint64_t sent = 0, samples = 0;
    while (sent + o.burst <= frames) {
        if (o.duration && tsc_unordered() >= end) break;
        const std::uint64_t first = sent;
        for (unsigned j = 0; j < o.burst; ++j, ++sent) {
            int rc;
            while ((rc = s.send(static_cast<unsigned>(sent), o.size, sent)) == ENOMEM) wait_room(s);
            if (rc != 0) return error{rc, std::string("send: ") + std::strerror(rc)};
            if ((j + 1) % o.reply_every == 0) posted[j / o.reply_every] = tsc_ordered();
        }
        unsigned answers = 0;
        while (answers < o.burst / o.reply_every) {
            bool bad = false;
            const bool got = wait_packets(s, stall, [&](const cxv::eth::packet& p) {
                const std::uint64_t seq = seq_of(p, s.seq_at);
                const std::uint64_t now = tsc_unordered();
                if (seq < first || seq >= first + o.burst) {
                    bad = true;
                    return;
                }
                out.samples[samples++] = now - posted[(seq - first) / o.reply_every];
                ++answers;
            });
            if (!got) return error{ETIMEDOUT, "answers of a burst missing after 5 s (frames lost?)"};
            if (bad) return error{EPROTO, "an answer to no frame of the burst"};
        }
        drain_sends(s);
    }
    out.samples.resize(samples);
    out.iterations = sent;
    return ok_status();
}

// The server of lat and burst_lat: answers what arrives (every --reply_every-th frame
// for burst_lat) with a frame of its own carrying the sequence number.
status answer_server(const raw_options& o, raw_side& s, double hz, std::uint64_t& received) {
    const std::uint64_t idle = static_cast<std::uint64_t>(hz * (o.duration + 10));
    const unsigned every = o.k == kind::burst ? o.reply_every : 1;
    const std::uint64_t expected = o.duration ? ~std::uint64_t{0} : o.iters;
    bool end = false;
    status st = ok_status();
    while (received < expected && !end && st) {
        const bool got = wait_packets(s, idle, [&](const cxv::eth::packet& p) {
            const std::uint64_t seq = seq_of(p, s.seq_at);
            if (seq == kEndMark) {
                end = true;
                return;
            }
            ++received;
            if (received % every != 0) return;
            int rc;
            while ((rc = s.send(static_cast<unsigned>(received), o.size, seq)) == ENOMEM) wait_room(s);
            if (rc != 0) st = error{rc, std::string("send: ") + std::strerror(rc)};
        });
        if (!got) return error{ETIMEDOUT, "the client went quiet"};
        drain_sends(s);
    }
    return st;
}

run_config config_of(const raw_options& o, const function& fn, bool server, double hz) {
    run_config r;
    r.test = o.test;
    r.connection = "RawEth";
    r.device = fn.bdf;
    r.firmware = fn.firmware;
    r.link_layer = fn.port.ethernet ? "Ethernet" : "InfiniBand";
    r.tsc_hz = hz;
    r.cxv_version = CXV_VERSION;
    r.model = on_model();
    r.mtu = 1518;
    r.tx_depth = o.k == kind::burst ? o.burst : 1024;
    r.rx_depth = 1024;
    r.inline_size = cxv::eth::max_inline;
    r.cq_moderation = o.k == kind::bw ? 256 : 0;
    r.server = server;
    return r;
}

status run_raw_side(const raw_options& o, std::shared_ptr<function> fn, link& ch, bool server, bool quiet, double hz) {
    if (!fn->port.ethernet) return error{EINVAL, fn->bdf + " has an InfiniBand port: raw Ethernet tests need Ethernet"};
    const mac own = cxv::eth::address(*fn->dev);
    const hello mine = hello_of(o, own);
    hello theirs;
    std::memset(&theirs, 0, sizeof theirs);
    if (server) {
        if (auto r = ch.recv(&theirs, sizeof theirs, kPeerTimeout); !r) return r;
        if (!same_run(mine, theirs)) return error{EINVAL, "the client's parameters differ from the server's"};
        if (auto r = ch.send(&mine, sizeof mine); !r) return r;
    } else {
        if (auto r = ch.send(&mine, sizeof mine); !r) return r;
        if (auto r = ch.recv(&theirs, sizeof theirs, kPeerTimeout); !r) return r;
    }
    auto made = make_raw_side(o, fn, server, own, theirs.mac);
    if (!made) return made.error();
    raw_side s = std::move(made).value();
    report rep(config_of(o, *fn, server, hz));
    if (!quiet) {
        rep.print_header(stdout);
        std::printf(" local MAC %02x:%02x:%02x:%02x:%02x:%02x, remote MAC %02x:%02x:%02x:%02x:%02x:%02x\n", own[0],
                    own[1], own[2], own[3], own[4], own[5], theirs.mac[0], theirs.mac[1], theirs.mac[2], theirs.mac[3],
                    theirs.mac[4], theirs.mac[5]);
        std::fflush(stdout);
    }
    wire_count ready{1, 1};
    if (server) {
        // The rule is in place and the RQ full: the client may send.
        if (auto r = ch.send(&ready, sizeof ready); !r) return r;
        std::uint64_t received = 0;
        const status st = o.k == kind::bw ? bw_server(o, s, hz, received) : answer_server(o, s, hz, received);
        wire_count sent{};
        if (auto r = ch.recv(&sent, sizeof sent, std::chrono::seconds(o.duration) + kPeerTimeout); !r) return r;
        wire_count back{received, static_cast<std::uint8_t>(st ? 1 : 0)};
        if (auto r = ch.send(&back, sizeof back); !r) return r;
        if (!st) return st;
        if (!quiet) {
            std::printf(" %llu of %llu frames received\n", static_cast<unsigned long long>(received),
                        static_cast<unsigned long long>(sent.value));
        }
        return ok_status();
    }
    if (auto r = ch.recv(&ready, sizeof ready, kPeerTimeout); !r) return r;
    latency_sample_set lat;
    bandwidth_sample_set bw;
    const status st = o.k == kind::bw    ? bw_client(o, s, hz, bw)
                      : o.k == kind::lat ? lat_client(o, s, hz, lat)
                                         : burst_client(o, s, hz, lat);
    send_end(o, s);
    wire_count sent{o.k == kind::bw ? bw.iterations : lat.iterations, 1};
    if (auto r = ch.send(&sent, sizeof sent); !r) return r;
    wire_count got{};
    if (auto r = ch.recv(&got, sizeof got, kPeerTimeout); !r) return r;
    if (!st) return st;
    if (!got.ok) return error{EIO, "the server failed"};
    if (!quiet) {
        if (o.k == kind::bw) {
            rep.add(stdout, bw);
            if (got.value < bw.iterations) {
                std::printf(" (the server received %llu of %llu frames)\n", static_cast<unsigned long long>(got.value),
                            static_cast<unsigned long long>(bw.iterations));
            }
        } else {
            rep.add(stdout, lat);
        }
        rep.print_footer(stdout);
        std::fflush(stdout);
        std::string why;
        if (!o.json.empty() && !rep.write_json(o.json, &why)) return error{EIO, "--json " + o.json + ": " + why};
    }
    return ok_status();
}

int fail(const std::string& m) {
    std::fprintf(stderr, "cxv-perf: %s\n", m.c_str());
    return 1;
}

}  // namespace

bool is_raw_test(std::string_view name) {
    return name == "raw_ethernet_bw" || name == "raw_ethernet_lat" || name == "raw_ethernet_burst_lat";
}

int run_raw(int argc, char** argv) {
    auto parsed = parse_raw(argc, argv);
    if (!parsed) return fail(parsed.error().message);
    const raw_options& o = parsed.value();
    if (o.help) {
        print_raw_usage();
        return 0;
    }
    const double hz = tsc_calibrate();
    if (on_model()) {
        std::printf("cxv-perf: the function is cxv-sim's software model: these figures are the model's, not a card's\n");
    }
    g_idle_yield = on_model() || std::thread::hardware_concurrency() < 4;
    if (o.loopback) {
        auto a = open_function(o.devices[0], 1);
        if (!a) return fail(a.error().message);
        auto b = open_function(o.devices[1], 1);
        if (!b) return fail(b.error().message);
        const auto r = run_both_sides(a.value(), b.value(), [&](std::shared_ptr<function> fn, channel& end, bool server) {
            return run_raw_side(o, std::move(fn), end, server, server, hz);
        });
        return r ? 0 : fail(r.error().message);
    }
    const bool server = o.server.empty();
    std::optional<listener> l;
    if (server) {
        auto made = listener::create(o.tcp_port);
        if (!made) return fail(made.error().message);
        l.emplace(std::move(made).value());
    }
    auto fn = open_function(o.devices.empty() ? "" : o.devices[0], 1);
    if (!fn) return fail(fn.error().message);
    std::optional<channel> ch;
    if (server) {
        std::printf("cxv-perf: %s server on %s, waiting for a client on port %u\n", o.test.c_str(), fn.value()->bdf.c_str(),
                    o.tcp_port);
        std::fflush(stdout);
        auto accepted = l->accept(kAcceptTimeout);
        if (!accepted) return fail(accepted.error().message);
        ch.emplace(std::move(accepted).value());
    } else {
        auto connected = channel::connect(o.server, o.tcp_port, 3s);
        if (!connected) return fail(connected.error().message);
        ch.emplace(std::move(connected).value());
    }
    if (auto r = run_raw_side(o, fn.value(), *ch, server, false, hz); !r) return fail(r.error().message);
    return 0;
}

}  // namespace cxv::perf
