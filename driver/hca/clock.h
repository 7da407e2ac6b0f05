// The device clock (PRM "Initialization Segment": the free-running internal timer;
// cmd_hca_cap.device_frequency_khz): reading the timer, and turning its ticks into
// wall-clock (CLOCK_REALTIME) nanoseconds, as Linux's mlx5 clock does with a timecounter:
// a base pair (ticks, nanoseconds) and a rate.
//
// The rate starts as the announced frequency. A card's crystal is never exactly there
// (tens of ppm), so sync() takes a new base pair and, from the last one, the rate the
// timer actually ran at against CLOCK_REALTIME: between syncs the conversion then drifts
// only by how much that rate changed. Call it every second or so (Linux's mlx5 takes a
// new base at least every few seconds for the same reason).
//
// to_realtime_ns() takes no lock and allocates nothing (a sequence counter around the
// parameters), for a receive path that stamps packets; sync() is for one thread at a
// time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/result.h"
#include "hw/mmio.h"

namespace cxv::driver {

class hca;

class device_clock {
public:
    // The clock of `h`'s function: its BAR0 and announced frequency, one sample taken.
    // ENOTSUP for a function attached through its owner (cxvd): the initialization
    // segment is not mapped there.
    static result<std::unique_ptr<device_clock>> create(hca& h);
    // Over any BAR0 window (the health watch's way: plain memory in unit tests).
    static result<std::unique_ptr<device_clock>> create(const hw::mmio_window& bar0, std::uint32_t frequency_khz);

    // The timer now: high dword, low, high again, and the low once more when the high one
    // moved in between (it carried), as Linux's mlx5_read_time does.
    std::uint64_t read_ticks() const noexcept;
    std::uint32_t frequency_khz() const noexcept { return khz_; }

    // A new base pair; the rate measured since the last one when at least 100 ms passed.
    status sync();
    // Nanoseconds since the epoch (CLOCK_REALTIME) at which the timer read `ticks`.
    std::int64_t to_realtime_ns(std::uint64_t ticks) const noexcept;
    // How far the rate in use is from the announced frequency, in parts per million.
    double rate_offset_ppm() const noexcept;

private:
    device_clock(const hw::mmio_window& bar0, std::uint32_t khz);
    struct sample {
        std::uint64_t ticks = 0;
        std::int64_t ns = 0;
    };
    // A (ticks, CLOCK_REALTIME) pair read as close together as the machine lets it: the
    // narrowest of a few tries, the wall time taken halfway.
    sample take() const noexcept;
    void publish(const sample& base, std::uint64_t mult) noexcept;

    hw::mmio_window bar_;
    std::uint32_t khz_;
    sample last_;  // sync()'s, for the next rate
    // What to_realtime_ns reads: ns = base_ns + ((ticks - base_ticks) * mult) >> 32.
    std::atomic<std::uint32_t> seq_{0};
    std::atomic<std::uint64_t> base_ticks_{0};
    std::atomic<std::int64_t> base_ns_{0};
    std::atomic<std::uint64_t> mult_{0};
};

}  // namespace cxv::driver
