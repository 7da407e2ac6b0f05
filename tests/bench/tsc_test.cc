// tsc_now() and tsc_calibrate(): the counter moves forward, and the calibrated frequency
// converts a TSC interval into the same time CLOCK_MONOTONIC_RAW measured.
#include <time.h>

#include <cstdint>
#include <string>

#include <doctest/doctest.h>

#include "bench/perf/report.h"

using namespace cxv::perf;

namespace {
double raw_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

TEST_CASE("the TSC increases") {
    std::uint64_t last = tsc_now();
    for (int i = 0; i < 100000; ++i) {
        const std::uint64_t t = tsc_now();
        REQUIRE(t >= last);
        last = t;
    }
}

TEST_CASE("the calibrated frequency is plausible and converts a 30 ms interval within 1%") {
    const double hz = tsc_calibrate();
    INFO("tsc_hz = ", hz, " from ", tsc_calibration_source());
    CHECK(hz > 1e8);
    CHECK(hz < 1e10);
    CHECK(tsc_calibrate() == hz);  // calibrated once
    const std::string source = tsc_calibration_source();
    CHECK((source == "sysfs tsc_freq_khz" || source == "CLOCK_MONOTONIC_RAW over 50 ms"));

    const double s0 = raw_seconds();
    const std::uint64_t t0 = tsc_now();
    const timespec pause{0, 30'000'000};
    nanosleep(&pause, nullptr);
    const std::uint64_t t1 = tsc_now();
    const double s1 = raw_seconds();
    // Reading both clocks takes time, and a preempted test may be descheduled between
    // them: the error allowed is 1% of 30 ms (300 µs), far above a read's cost.
    CHECK(static_cast<double>(t1 - t0) / hz == doctest::Approx(s1 - s0).epsilon(0.01));
}
