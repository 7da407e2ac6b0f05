// A latency loop's own work per iteration: one bare TSC read, the sample (the time since
// the previous stamp) stored in a preallocated array unless the iteration is a warm-up
// one, and the progress count. latency.cc's loops run it; overhead.cc measures the very
// same code (docs/performance.md: under 20 ns).
#pragma once

#include <atomic>
#include <cstdint>

#include "bench/perf/tsc.h"

namespace cxv::perf {

struct iteration_clock {
    std::uint64_t prev = tsc_unordered();  // the last stamp

    // Iteration k has ended.
    void tick(std::uint64_t k, std::uint64_t warmup, std::uint64_t* samples,
              std::atomic<std::uint64_t>* progress) noexcept {
        const std::uint64_t now = tsc_unordered();
        if (k >= warmup) samples[k - warmup] = now - prev;
        prev = now;
        if (progress != nullptr) progress->store(k + 1, std::memory_order_relaxed);
    }
};

}  // namespace cxv::perf
