// The wire codec's cost per frame: encode, decode_ib and the VCRC of an InfiniBand RC SEND
// Only with 64 bytes of payload (the model_e2e send_rate_64 message), then the same for a
// 4 KiB payload, repeated `iters` times each (a second argument: that payload size only),
// then the CRCs on 4 KiB beside zlib's CRC-32. Prints ns per call (median of 9 runs); for
// instructions per frame run it under callgrind and divide the inclusive cost of encode,
// decode_ib and vcrc by their calls (--tables first: the CRCs without PCLMULQDQ):
//   valgrind --tool=callgrind bazel-bin/bench/wire_codec 100000 64
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <zlib.h>

#include <CLI/CLI.hpp>

#include "sim/wire/crc.h"
#include "sim/wire/frame.h"

namespace w = cxv::sim::wire;

namespace {

volatile std::uint64_t sink;

template <typename F>
double median_ns(int iters, F&& f) {
    std::vector<double> runs;
    for (int r = 0; r < 9; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) f();
        const auto t1 = std::chrono::steady_clock::now();
        runs.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
    }
    std::nth_element(runs.begin(), runs.begin() + runs.size() / 2, runs.end());
    return runs[runs.size() / 2];
}

void run(std::size_t payload, int iters) {
    w::packet p;
    p.net.link = w::link_kind::ib;
    p.net.slid = 1;
    p.net.dlid = 2;
    p.bth.opcode = w::opcode::RC | w::opcode::SEND_ONLY;
    p.bth.dest_qp = 0x11;
    p.bth.psn = 7;
    std::vector<std::byte> data(payload);
    for (std::size_t i = 0; i < payload; ++i) data[i] = static_cast<std::byte>(i * 7);
    p.payload.assign(data.begin(), data.end());
    std::vector<std::byte> frame(w::max_frame_bytes);
    std::size_t len = w::encode(p, frame);
    const std::span<const std::byte> f(frame.data(), len);
    w::packet q;
    if (w::decode_ib(f, q) != w::decode_status::ok) {
        std::fprintf(stderr, "wire_codec: the frame does not decode\n");
        std::exit(1);
    }
    const double enc = median_ns(iters, [&] { sink = w::encode(p, frame); });
    const double dec = median_ns(iters, [&] { sink = static_cast<std::uint64_t>(w::decode_ib(f, q)); });
    const double v = median_ns(iters, [&] { sink = w::vcrc(f.first(len - 2)); });
    std::printf("IB SEND %5zu B payload (%4zu B frame): encode %7.1f ns  decode_ib %7.1f ns  vcrc %7.1f ns\n",
                payload, len, enc, dec, v);
}

// The CRCs and codec on 4 KiB against zlib's CRC-32 (the reference), per link kind.
void crc_table() {
    std::mt19937_64 rng(1);
    std::vector<std::byte> buf(4096);
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    const int n = 20000;
    auto row = [](const char* what, double ns, std::size_t bytes) {
        std::printf("%-34s %9.1f ns  %6.2f GB/s\n", what, ns, static_cast<double>(bytes) / ns);
    };
    row("crc32 4096 B (ours)", median_ns(n, [&] { sink = w::crc32(buf); }), buf.size());
    row("crc32 4096 B (zlib)", median_ns(n, [&] {
            sink = ::crc32(0, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(buf.size()));
        }), buf.size());
    row("crc32 64 B (ours)", median_ns(n * 10, [&] { sink = w::crc32(std::span(buf).first(64)); }), 64);
    row("crc32 64 B (zlib)", median_ns(n * 10, [&] {
            sink = ::crc32(0, reinterpret_cast<const Bytef*>(buf.data()), 64);
        }), 64);
    row("vcrc 4096 B (ours)", median_ns(n, [&] { sink = w::vcrc(buf); }), buf.size());
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
        std::snprintf(what, sizeof what, "decode 4 KiB SEND %s", name);
        row(what, median_ns(n, [&] {
                sink = static_cast<std::uint64_t>(link == w::link_kind::ib ? w::decode_ib(f, q) : w::decode_roce(f, q));
            }), p.payload.size());
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool tables = false;
    int iters = 100000;
    std::size_t payload = 0;
    CLI::App app{"wire_codec: the wire codec per frame and the CRCs beside zlib's CRC-32"};
    app.add_flag("--tables", tables, "the CRC fallback without PCLMULQDQ");
    app.add_option("iters", iters, "frames per run")->capture_default_str()->check(CLI::PositiveNumber);
    app.add_option("payload", payload, "one payload size only (for callgrind)");
    CLI11_PARSE(app, argc, argv);
    if (tables) w::detail::use_clmul_for_test(false);
    if (payload != 0) {
        run(payload, iters / 9 + 1);
        return 0;
    }
    run(64, iters / 9 + 1);
    run(4096, iters / 90 + 1);
    crc_table();
    return 0;
}
