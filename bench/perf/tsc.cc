// The TSC's frequency (how tsc_now() reads it: see tsc.h).
//
// tsc_calibrate() takes the frequency from /sys/devices/system/cpu/cpu0/tsc_freq_khz
// when the kernel exposes it (some distribution kernels do; mainline Linux does not),
// else measures it once against CLOCK_MONOTONIC_RAW (not slewed by NTP) over about
// 50 ms: each end is the CLOCK_MONOTONIC_RAW reading bracketed by two TSC reads, the
// tightest of several brackets kept and its midpoint used, so the error is a few tens of
// nanoseconds in 50 ms (well below 10^-5).
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <fstream>

#include "bench/perf/report.h"
#include "bench/perf/tsc.h"

namespace cxv::perf {

std::uint64_t tsc_now() { return tsc_ordered(); }

namespace {

struct calibration {
    double hz = 0;
    const char* source = "";
};

std::int64_t raw_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A (TSC, CLOCK_MONOTONIC_RAW ns) pair taken as close together as we can.
struct pair_reading {
    double tsc;
    std::int64_t ns;
};
pair_reading read_pair() {
    pair_reading best{0, 0};
    std::uint64_t best_width = UINT64_MAX;
    for (int i = 0; i < 16; ++i) {
        const std::uint64_t a = tsc_now();
        const std::int64_t ns = raw_ns();
        const std::uint64_t b = tsc_now();
        if (b - a < best_width) {
            best_width = b - a;
            best = {static_cast<double>(a) + static_cast<double>(b - a) / 2, ns};
        }
    }
    return best;
}

calibration calibrate() {
    {
        std::ifstream in("/sys/devices/system/cpu/cpu0/tsc_freq_khz");
        unsigned long long khz = 0;
        if (in >> khz && khz > 0) return {static_cast<double>(khz) * 1e3, "sysfs tsc_freq_khz"};
    }
#if defined(__x86_64__)
    const pair_reading start = read_pair();
    while (raw_ns() - start.ns < 50'000'000) {
        const timespec pause{0, 5'000'000};
        ::nanosleep(&pause, nullptr);
    }
    const pair_reading end = read_pair();
    return {(end.tsc - start.tsc) * 1e9 / static_cast<double>(end.ns - start.ns), "CLOCK_MONOTONIC_RAW over 50 ms"};
#else
    return {1e9, "CLOCK_MONOTONIC_RAW (no TSC)"};
#endif
}

const calibration& calibrated() {
    static const calibration c = calibrate();
    return c;
}

}  // namespace

double tsc_calibrate() { return calibrated().hz; }
const char* tsc_calibration_source() { return calibrated().source; }

}  // namespace cxv::perf
