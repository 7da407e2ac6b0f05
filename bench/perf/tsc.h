// The time stamp counter, cxv-perf's clock, read inline (report.h's tsc_now() is the
// same read out of line).
//
// tsc_ordered() (and tsc_now()) read it as LFENCE; RDTSC (x86 intrinsics). RDTSC alone is not ordered with
// the instructions before it: the CPU may execute it before earlier loads have completed
// (Intel SDM vol. 2B, RDTSC: software that needs RDTSC to run only after all previous
// instructions have executed and all previous loads are globally visible executes LFENCE
// immediately before it; AMD APM vol. 3: LFENCE is dispatch-serializing, as Linux
// configures AMD CPUs since 2018). A latency loop stamps right after its poll loop saw a
// completion; without the fence the stamp could be read, speculatively, before the load
// that saw the CQE (a DMA-written line: a cache miss, ~100 ns), and the sample would be
// short by up to that much. No LFENCE after RDTSC: what follows a
// stamp in a loop is the next post, whose stores (WQE, doorbell record, doorbell) reach
// memory only after the RDTSC has retired (x86 never makes a store visible before the
// instructions ahead of it retire), so they cannot move ahead of it, and a second fence
// would cost another ~8 ns on every iteration. Measured on an AMD EPYC virtual machine
// (2.6 GHz), per iteration of a loop that polls, writes a 64-byte WQE and stamps: RDTSC
// 12.2 ns, LFENCE; RDTSC 24.4 ns, LFENCE; RDTSC; LFENCE 32.8 ns (bench/perf:overhead
// measures ours). The TSC must be invariant (constant_tsc and nonstop_tsc in
// /proc/cpuinfo).
//
// tsc_unordered() is the bare RDTSC (perftest's get_cycles()), about half the cost, and
// what cxv-perf's timed loops use (one per iteration: 12.2 ns here with the sample and
// the progress count, against 24 ns fenced; the harness's budget is 20 ns). It is right
// there because every stamp in those loops follows the exit of a poll loop that spun:
// the branch that leaves a spinning loop is predicted to stay in it, so its exit is a
// misprediction, resolved only once the load that saw the completion has its value,
// and the RDTSC after it is fetched again from there; it cannot run ahead of that load.
// Where a completion is already there at the first poll (a bandwidth loop's batch) the
// stamp may run ahead of it by up to one load's latency, on a stamp that covers many
// iterations. Out of the timed loops, tsc_now() orders every stamp.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#else
#include <time.h>
#endif

namespace cxv::perf {

#if defined(__x86_64__)
inline std::uint64_t tsc_ordered() noexcept {
    _mm_lfence();
    return __rdtsc();
}
inline std::uint64_t tsc_unordered() noexcept { return __rdtsc(); }
#else
// Elsewhere: CLOCK_MONOTONIC_RAW in nanoseconds, a "TSC" of 1 GHz.
inline std::uint64_t tsc_ordered() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}
inline std::uint64_t tsc_unordered() noexcept { return tsc_ordered(); }
#endif

}  // namespace cxv::perf
