// Spinning on a CQ or on memory with bounds: what a loop does while nothing arrives.
#pragma once

#include <endian.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "bench/perf/loops.h"

namespace cxv::perf {

// Empty-poll bookkeeping: a stamp at the first empty poll after progress (no TSC read on
// the busy path), a stall once nothing arrived for stall_ticks, a yield every 64 empty
// polls where cores are scarce, and (servers) a look at the stop message every 4096.
struct idle_watch {
    loop_context& c;
    bool watch_stop = false;
    unsigned empty = 0;
    std::uint64_t since = 0;
    bool stopped = false;

    void progress() noexcept { empty = 0; }
    // False when the loop must give up: stalled, or the client's stop arrived.
    bool idle() noexcept {
        if (empty++ == 0) {
            since = tsc_now();
            return true;
        }
        if ((empty & 63) == 0) {
            if (c.idle_yield) std::this_thread::yield();
            if (c.peer_done != nullptr && c.peer_done->load(std::memory_order_relaxed) &&
                tsc_now() - since > static_cast<std::uint64_t>(c.tsc_hz / 2)) {
                stopped = true;
                return false;
            }
            if ((empty & 1023) == 0 && tsc_now() - since > c.stall_ticks) return false;
            if (watch_stop && (empty & 4095) == 0 && c.oob->readable()) {
                stopped = true;
                return false;
            }
        }
        return true;
    }
};

// Between empty polls of `cq`: the idle_watch's, or with -e a sleep on the CQ's
// completion event (armed first: a completion that came before the arm raises it at once),
// waking every 100 ms for the stall bound and the stop message.
inline bool idle_on(idle_watch& w, cxv::cq& cq) noexcept {
    if (!w.c.o->events) return w.idle();
    if (w.empty++ == 0) w.since = tsc_now();
    cq.request_notify(false);
    if (cq.wait_event(std::chrono::milliseconds(100))) return true;
    if (tsc_now() - w.since > w.c.stall_ticks) return false;
    if (w.c.peer_done != nullptr && w.c.peer_done->load(std::memory_order_relaxed) &&
        tsc_now() - w.since > static_cast<std::uint64_t>(w.c.tsc_hz / 2)) {
        w.stopped = true;
        return false;
    }
    if (w.watch_stop && w.c.oob->readable()) {
        w.stopped = true;
        return false;
    }
    return true;
}

// The fetched value of an 8-byte atomic: devices keep atomic targets in their own byte
// order (a card big-endian, the model the host's), so both readings are compared.
inline bool fetched_is(std::uint64_t raw, std::uint64_t want) noexcept { return raw == want || be64toh(raw) == want; }

}  // namespace cxv::perf
