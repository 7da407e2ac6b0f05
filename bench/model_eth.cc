// Raw Ethernet end to end on the model (issue 35's bar: 64-byte frames at 5 M packets/s
// on one model thread): function 0 sends 64-byte UDP frames from an eth::queue (whole
// frames inline, BlueFlame), function 1 steers them to a striding RQ; one application
// thread sends and polls both sides. Each function has its model thread: the sender's
// executes the WQEs and puts the frames on the wire, the receiver's steers them through
// its flow table and writes packets and CQEs.
//
//   eth_rate_64   frames received per second, over the frames of the run
//   eth_lost      frames sent and never received (the receiver out of buffers: a card
//                 drops them too, and counts them)
//
// Run: cxv-sim run --devices 2 --port-type eth -- bazel-bin/bench/model_eth [--short] [--frames N]
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/cxv.h"
#include "api/cxv_eth.h"

namespace {

namespace eth = cxv::eth;
using clock_type = std::chrono::steady_clock;

template <typename T>
T must(cxv::result<T> r, const char* what) {
    if (!r) {
        std::fprintf(stderr, "model_eth: %s: %s\n", what, r.error().message.c_str());
        std::exit(1);
    }
    return std::move(r).value();
}

}  // namespace

int main(int argc, char** argv) {
    bool shortrun = false;
    unsigned long frames = 0;
    CLI::App app{"model_eth: raw Ethernet frames per second end to end on the model"};
    app.add_flag("--short", shortrun, "fewer frames (CI)");
    app.add_option("--frames", frames, "frames to send");
    CLI11_PARSE(app, argc, argv);
    if (frames == 0) frames = shortrun ? 100000 : 2000000;

    auto d0 = must(cxv::device::open("0000:c5:00.0"), "open 0");
    auto d1 = must(cxv::device::open("0000:c5:00.1"), "open 1");
    auto tx = must(eth::queue::create(*d0, {.send_entries = 1024, .doorbell = cxv::doorbell_mode::blueflame}), "tx");
    auto rx = must(eth::queue::create(*d1, {.recv_entries = 256, .striding = true, .log_strides = 9, .log_stride = 6}),
                   "rx");
    auto steer = must(eth::steering::create(*d1), "steering");
    const eth::mac m0 = eth::address(*d0), m1 = eth::address(*d1);
    auto rule = must(steer->add({.dmac = m1}, rx, {.count = true}), "rule");

    // A 64-byte IPv4/UDP frame (22 bytes of payload), checksums by the device.
    std::vector<std::uint8_t> f(64, 0);
    std::memcpy(f.data(), m1.data(), 6);
    std::memcpy(f.data() + 6, m0.data(), 6);
    const std::uint8_t hdr[] = {0x08, 0x00, 0x45, 0,   0,    50,   0, 0, 0x40, 0, 64, 17, 0, 0, 169, 254, 0, 1,
                                169,  254,  0,    2,   0x30, 0x39, 0x7a, 0x69, 0,  30, 0, 0};
    std::memcpy(f.data() + 12, hdr, sizeof(hdr));
    const auto frame = std::as_bytes(std::span(f));

    std::array<eth::send_completion, 32> c;
    std::array<eth::packet, 64> p;
    unsigned long sent = 0, received = 0, full = 0;
    // Once: glibc reads /sys for it on every call.
    const unsigned cores = std::thread::hardware_concurrency();
    const auto t0 = clock_type::now();
    auto last_progress = t0;
    unsigned empty = 0;  // polls in a row that found nothing
    while (received < frames) {
        for (int k = 0; k < 32 && sent < frames; ++k) {
            if (tx->send(frame, eth::l3_csum | eth::l4_csum) != 0) {
                ++full;
                tx->poll_send(c);
                break;
            }
            ++sent;
        }
        const int n = rx->poll(p);
        received += static_cast<unsigned long>(n);
        if (n != 0) {
            empty = 0;
            continue;
        }
        // The clock and the scheduler only every 64 empty polls: each costs more than a
        // poll, and the model thread, not this loop, is what is measured.
        if (++empty % 64 != 0) continue;
        const auto now = clock_type::now();
        if (empty == 64) last_progress = now;  // the frames stopped about here
        // Everything sent and nothing more arriving: the rest was dropped.
        if (sent == frames && now - last_progress > std::chrono::milliseconds(500)) break;
        if (cores < 4) std::this_thread::yield();
    }
    if (received == frames) last_progress = clock_type::now();
    const double s = std::chrono::duration<double>(last_progress - t0).count();
    const auto counted = rule->counters();
    std::printf("%-14s %12.0f frames/s  (%.0f ns per frame; %lu of %lu frames received, the rule counted %llu; "
                "send ring full %lu times; %u cores)\n",
                "eth_rate_64", static_cast<double>(received) / s, 1e9 * s / static_cast<double>(received), received,
                sent, counted ? static_cast<unsigned long long>(counted->packets) : 0ull, full, cores);
    std::printf("%-14s %12lu frames\n", "eth_lost", sent - received);
    return received > 0 ? 0 : 1;
}
