// Pieces of cxv-perf's loops checked on their own: the peak of a bandwidth run kept as an
// exact quotient, and the message-size limit counting each slot's 64-byte rounding.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "bench/perf/loops.h"
#include "bench/perf/options.h"
#include "bench/perf/setup.h"

namespace {

using namespace cxv::perf;

TEST_CASE("the peak is the exact quotient of the fastest window, not whole ticks") {
    // Completions every 10 iterations: 25 ticks, then 17 ticks (1.7 per iteration, which
    // whole ticks would round to 1), then 40; the run took 100 ticks from its first post.
    const std::vector<std::uint64_t> stamps = {1000, 10, 1025, 10, 1042, 10, 1082, 10};
    const double peak = peak_ticks_per_iteration(stamps.data(), 4, 10, 100, 40);
    CHECK(peak == doctest::Approx(1.7).epsilon(1e-12));
    // A window of 20 iterations: (1042 - 1000) / 20.
    CHECK(peak_ticks_per_iteration(stamps.data(), 4, 20, 100, 40) == doctest::Approx(2.1).epsilon(1e-12));
    // Never slower than the average (82 ticks for 40 here); nothing to go by: 0.
    CHECK(peak_ticks_per_iteration(stamps.data(), 4, 20, 82, 40) == doctest::Approx(2.05).epsilon(1e-12));
    CHECK(peak_ticks_per_iteration(stamps.data(), 4, 1000, 100, 40) == doctest::Approx(2.5));
    CHECK(peak_ticks_per_iteration(stamps.data(), 0, 10, 0, 0) == 0);
}

TEST_CASE("the message-size limit counts the slots' 64-byte rounding and the UD GRH") {
    options o;
    o.latency = false;
    o.conn = transport::ud;
    o.op = operation::send;
    o.verify = true;
    o.qps = 16;
    o.tx_depth = 1024;
    o.rx_depth = 8192;
    // 2 areas x 16 QPs x 8192 slots = 262144 slots of 48 MiB: 192 bytes each. A 2-byte UD
    // message takes a 64-byte slot (40 + 2 rounded up); 128 bytes would take 192 (fits),
    // 256 would take 320 (does not).
    CHECK(slot_stride(o, 2) == 64);
    CHECK(slot_stride(o, 128) == 192);
    CHECK(message_fits(o, 128));
    CHECK(!message_fits(o, 256));
    CHECK(message_limit(o) == 128);
    // A budget too small for even a 2-byte message: no size fits at all.
    o.qps = 1024;
    CHECK(!message_fits(o, 2));
    CHECK(message_limit(o) == 0);
    // RC without --verify: one slot; the limit is the largest -a size.
    options r;
    r.latency = false;
    CHECK(message_limit(r) == std::size_t{1} << 23);
    CHECK(slot_stride(r, 100) == 128);
}

}  // namespace
