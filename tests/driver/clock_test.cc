// The device clock (driver/hca/clock.h) on the model: the internal timer counts at the
// announced device_frequency_khz, off by the crystal's error that `cxv-sim run --set
// clock_ppm=N` gives it (clock_drift_test: 10 %); to_realtime_ns() turns a tick into
// CLOCK_REALTIME nanoseconds, and sync() follows the rate the timer really runs at. The
// model updates the timer each sweep, a millisecond apart while it idles and later when
// the machine is loaded: the bounds allow ~10 ms of that, and stay well inside the 60 ms a
// 10 % error makes over 600 ms.
#include <time.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "driver/hca/clock.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace std::chrono_literals;

namespace {

// The clock_ppm this run gave the model: `cxv-sim run` hands its programs every setting
// as CXV_SIM_<KEY> (0 when not set).
long configured_ppm() {
    const char* v = std::getenv("CXV_SIM_CLOCK_PPM");
    return v != nullptr ? std::atol(v) : 0;
}

std::int64_t realtime_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// CLOCK_REALTIME less CLOCK_MONOTONIC, in ms: it changes only when the wall clock is
// stepped or slewed (NTP, a host resuming this machine's VM). The device's timer runs on
// regardless, so a conversion from before such a step is off by the step until the next
// sync(), on a card as here: the checks below take the step out.
double wall_minus_monotonic_ms() {
    timespec m{};
    ::clock_gettime(CLOCK_MONOTONIC, &m);
    const std::int64_t mono = std::int64_t{m.tv_sec} * 1'000'000'000 + m.tv_nsec;
    return static_cast<double>(realtime_ns() - mono) / 1e6;
}

// How far the clock's conversion of a tick read now is from CLOCK_REALTIME now, in ms.
double error_ms(const driver::device_clock& c) {
    const std::int64_t before = realtime_ns();
    const std::uint64_t t = c.read_ticks();
    const std::int64_t after = realtime_ns();
    return static_cast<double>(c.to_realtime_ns(t) - (before + (after - before) / 2)) / 1e6;
}

}  // namespace

TEST_CASE("the internal timer counts at device_frequency_khz, off by the crystal's error") {
    auto h = test::bring_up();
    auto c = driver::device_clock::create(*h);
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
    const driver::device_clock& clock = **c;
    CHECK(clock.frequency_khz() == 156250);  // ConnectX-6's, as the model announces it
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t a = clock.read_ticks();
    std::this_thread::sleep_for(400ms);
    const std::uint64_t b = clock.read_ticks();
    const auto t1 = std::chrono::steady_clock::now();
    CHECK(b > a);
    const double khz = static_cast<double>(b - a) / std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double want = 156250.0 * (1.0 + static_cast<double>(configured_ppm()) / 1e6);
    MESSAGE("measured ", khz, " kHz, expected ", want, " (clock_ppm ", configured_ppm(), ")");
    CHECK(std::abs(khz / want - 1.0) < 0.03);  // ~10 ms of sweep period over 400 ms
}

TEST_CASE("to_realtime_ns: wall-clock time from ticks, and sync() follows the rate the timer really runs at") {
    auto h = test::bring_up();
    const auto first = std::chrono::steady_clock::now();  // (create() takes its first sample)
    auto made = driver::device_clock::create(*h);
    REQUIRE(made.ok());
    const double wall0 = wall_minus_monotonic_ms();
    driver::device_clock& clock = **made;
    const long ppm = configured_ppm();
    CHECK(std::abs(error_ms(clock)) < 10.0);  // at its first sample
    CHECK(clock.rate_offset_ppm() == doctest::Approx(0.0));
    std::this_thread::sleep_for(600ms);
    // Still at the announced rate: off by the crystal's error over the time since the
    // first sample (60 ms at 10 % over 600 ms; a loaded machine sleeps longer).
    const double since_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first).count();
    const double drifted = error_ms(clock);
    const double stepped = wall_minus_monotonic_ms() - wall0;
    MESSAGE("after ", since_ms, " ms at the announced rate: ", drifted, " ms off (the wall clock stepped ", stepped,
            " ms)");
    CHECK(std::abs(drifted + stepped - since_ms * static_cast<double>(ppm) / 1e6) < 15.0);
    REQUIRE(clock.sync().ok());  // a base 600 ms after the first: the rate measured
    const double wall1 = wall_minus_monotonic_ms();
    MESSAGE("measured rate offset: ", clock.rate_offset_ppm(), " ppm");
    CHECK(std::abs(clock.rate_offset_ppm() - static_cast<double>(ppm)) < 20000.0);
    std::this_thread::sleep_for(600ms);
    const double tracked = error_ms(clock);
    const double stepped_since = wall_minus_monotonic_ms() - wall1;
    MESSAGE("600 ms after sync(): ", tracked, " ms off (the wall clock stepped ", stepped_since, " ms)");
    CHECK(std::abs(tracked + stepped_since) < 15.0);
    // A sync too soon after the last keeps the rate (nothing to measure over 1 ms).
    REQUIRE(clock.sync().ok());  // 600 ms after the last: measured again
    const double rate = clock.rate_offset_ppm();
    CHECK(std::abs(rate - static_cast<double>(ppm)) < 20000.0);
    REQUIRE(clock.sync().ok());
    CHECK(clock.rate_offset_ppm() == doctest::Approx(rate));
    // Ticks before the base count backwards, at the rate in use: 156,250 ticks are 1 ms
    // at the announced frequency, less on a fast crystal.
    const std::uint64_t now = clock.read_ticks();
    const std::int64_t at = clock.to_realtime_ns(now);
    const double ms_of_ticks = 1e6 / (1.0 + clock.rate_offset_ppm() / 1e6);
    CHECK(static_cast<double>(at - clock.to_realtime_ns(now - 156250)) == doctest::Approx(ms_of_ticks).epsilon(0.001));
    CHECK(static_cast<double>(clock.to_realtime_ns(now + 156250) - at) == doctest::Approx(ms_of_ticks).epsilon(0.001));
}
