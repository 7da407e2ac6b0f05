// Micro benchmark of the wire's hot path: CRC-32 (against zlib's, the reference, in the
// same run), the RoCEv2 ICRC, the VCRC, and encode/decode of full-MTU frames. Prints the
// median ns per call over repeats. bazel run -c opt //tests/sim/wire:wire_bench
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sim/wire/crc.h"
#include "sim/wire/frame.h"

namespace w = cxv::sim::wire;

template <typename F>
double median_ns(int iters, F&& f) {
    std::vector<double> runs;
    for (int r = 0; r < 15; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) f();
        const auto t1 = std::chrono::steady_clock::now();
        runs.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
    }
    std::nth_element(runs.begin(), runs.begin() + runs.size() / 2, runs.end());
    return runs[runs.size() / 2];
}

volatile std::uint64_t sink;

int main() {
    std::mt19937_64 rng(1);
    std::vector<std::byte> buf(4096);
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    const int n = 20000;
    auto row = [](const char* what, double ns, std::size_t bytes) {
        std::printf("%-34s %9.1f ns  %6.2f GB/s\n", what, ns, bytes / ns);
    };
    row("crc32 4096 B (ours: PCLMULQDQ)", median_ns(n, [&] { sink = w::crc32(buf); }), buf.size());
    row("crc32 4096 B (zlib)", median_ns(n, [&] {
            sink = ::crc32(0, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(buf.size()));
        }), buf.size());
    row("crc32 64 B (ours: PCLMULQDQ)", median_ns(n * 10, [&] { sink = w::crc32(std::span(buf).first(64)); }), 64);
    row("crc32 64 B (zlib)", median_ns(n * 10, [&] {
            sink = ::crc32(0, reinterpret_cast<const Bytef*>(buf.data()), 64);
        }), 64);
    row("vcrc 4096 B (ours: PCLMULQDQ)", median_ns(n, [&] { sink = w::vcrc(buf); }), buf.size());
    row("ones_complement_sum 4096 B", median_ns(n, [&] { sink = w::ones_complement_sum(buf); }), buf.size());

    w::packet p;
    p.bth.opcode = w::opcode::RC | w::opcode::SEND_ONLY;
    p.payload.assign(buf.begin(), buf.end());
    std::vector<std::byte> frame(w::max_frame_bytes);
    for (const w::link_kind link : {w::link_kind::roce_v4, w::link_kind::roce_v6, w::link_kind::ib}) {
        p.net.link = link;
        const char* name = link == w::link_kind::roce_v4 ? "IPv4" : link == w::link_kind::roce_v6 ? "IPv6" : "IB";
        char what[64];
        std::snprintf(what, sizeof what, "encode 4 KiB SEND %s", name);
        std::size_t len = 0;
        row(what, median_ns(n, [&] { len = w::encode(p, frame); }), p.payload.size());
        const std::span<const std::byte> f(frame.data(), len);
        w::packet q;
        q.payload.reserve(4096);
        std::snprintf(what, sizeof what, "decode 4 KiB SEND %s", name);
        row(what, median_ns(n, [&] {
                sink = static_cast<std::uint64_t>(link == w::link_kind::ib ? w::decode_ib(f, q) : w::decode_roce(f, q));
            }), p.payload.size());
    }
    return 0;
}
