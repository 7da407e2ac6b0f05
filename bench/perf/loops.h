// cxv-perf's timed loops. Each runs one size on a connected side. Inside the loops:
// TSC stamps into preallocated arrays, the verbs fast path, and nothing that allocates,
// locks or makes a system call, except where noted (the server's look at the
// out-of-band socket after many empty polls, and a yield after many empty polls where
// cores are scarce: both only while nothing arrives).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/report.h"
#include "bench/perf/setup.h"

namespace cxv::perf {

// --verify's pattern: byte i of iteration k. Consecutive iterations differ in every byte
// (131 is odd), so a stale byte never passes for a new one.
inline std::uint8_t pattern(std::uint64_t iteration, std::size_t i) noexcept {
    return static_cast<std::uint8_t>(iteration * 131u + i * 7u + (i >> 8) + 1u);
}
void fill_pattern(std::byte* p, std::size_t n, std::uint64_t iteration) noexcept;

// What --verify found: counted in the loop, described once after it.
struct verify_result {
    std::uint64_t bad = 0;  // iterations with wrong data
    std::uint64_t first_iteration = 0;
    std::size_t first_byte = 0;
    unsigned expected = 0, got = 0;
    void note(std::uint64_t iteration, std::size_t byte, unsigned want, unsigned have) noexcept {
        if (bad++ == 0) {
            first_iteration = iteration;
            first_byte = byte;
            expected = want;
            got = have;
        }
    }
    // Checks n bytes at p against iteration `of`'s pattern; the first byte that differs is
    // noted for `iteration` with the value read then (the device may write it a moment
    // later, so a second read could show it right). False when one differed.
    bool check(std::uint64_t iteration, const std::byte* p, std::size_t n, std::uint64_t of) noexcept;
    std::string describe() const;
};

// What a loop shares with its run: the options, the TSC rate, the deadline of a -D run,
// the counter the progress thread prints, whether to yield when idle.
struct loop_context {
    const options* o = nullptr;
    double tsc_hz = 0;
    std::uint64_t end_tick = 0;           // -D: stop posting at this TSC value (0: none)
    std::uint64_t stall_ticks = 0;        // no progress for this long: the peer is gone
    bool idle_yield = false;
    std::atomic<std::uint64_t>* progress = nullptr;
    link* oob = nullptr;                  // the server watches it for the client's stop
    // -b: the receiving thread's stop (UC, UD: the peer finished sending; a pause then
    // ends the wait for messages that were lost).
    const std::atomic<bool>* peer_done = nullptr;
    // -b -D: what the receiving thread expects in all, known once the peer stops sending
    // (until then the largest count).
    const std::atomic<std::uint64_t>* expected = nullptr;
    verify_result verified;
};

// One size. Client loops return the figures; server loops serve the client's iterations.
// The count of a -D run is settled with the stop message (sync_stop, its value the
// iterations per QP).
status latency_client(loop_context& c, side& s, std::size_t size, std::uint64_t warmup,
                      std::vector<std::uint64_t>& samples, std::uint64_t& measured);
status latency_server(loop_context& c, side& s, std::size_t size, std::uint64_t warmup);
// `stamps`: room for two words per completion (its TSC stamp, the iterations it
// completed), for the peak.
status bandwidth_client(loop_context& c, side& s, std::size_t size, std::vector<std::uint64_t>& stamps,
                        bandwidth_sample_set& out, std::uint64_t& per_qp);
// The peak of a bandwidth run, in ticks per iteration (perftest's "BW peak"): the fastest
// window of at least `want` iterations between two completions, never slower than the
// whole run's `ticks` over `iterations`. `stamps`: n pairs (a completion's TSC stamp, the
// iterations it completed). 0 when there is nothing to go by.
double peak_ticks_per_iteration(const std::uint64_t* stamps, std::size_t n, std::uint64_t want, std::uint64_t ticks,
                                std::uint64_t iterations) noexcept;
// The server of send_bw takes messages until `expected` arrived, or (watch_stop) the
// client's stop is waiting; count (per QP) and received (all) go on across calls.
status bandwidth_server(loop_context& c, side& s, std::size_t size, std::uint64_t expected, bool watch_stop,
                        std::vector<std::uint64_t>& count, std::uint64_t& received);

// Before a size: the server's receive area as the test expects it (write_lat's last byte
// not yet the first iteration's, READ's source pattern, atomic targets at 0).
void prepare_size(side& s, std::size_t size);
// After a size, on the server: a WRITE bandwidth run's target holds each slot's last
// iteration. `per_qp`: iterations per QP.
void verify_after(loop_context& c, side& s, std::size_t size, std::uint64_t per_qp);

// A completion in error, as the run's failure (cold: off the loops' path).
[[gnu::cold, gnu::noinline]] error completion_error(const ibv_wc& wc, const char* what = "a work request");

// The warm-up iterations of a latency size, excluded from its samples.
inline std::uint64_t warmup_of(const options& o) { return o.duration ? 100 : std::min<std::uint64_t>(o.iters / 10 + 1, 1000); }

}  // namespace cxv::perf
