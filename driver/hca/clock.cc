// The device clock (clock.h). PRM "Initialization Segment" (internal_timer_h,
// internal_timer_l), "HCA Capabilities" (device_frequency_khz).
#include "driver/hca/clock.h"

#include <time.h>

#include <cerrno>
#include <cstdint>
#include <limits>


#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"

namespace cxv::driver {

namespace {

constexpr unsigned kShift = 32;
constexpr std::int64_t kMinInterval = 100'000'000;  // ns between syncs for a new rate

std::int64_t realtime_ns() noexcept {
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// Nanoseconds per tick in 32.32 fixed point.
std::uint64_t mult_of(std::uint32_t khz) noexcept {
    return (std::uint64_t{1'000'000} << kShift) / khz;
}

}  // namespace

device_clock::device_clock(const hw::mmio_window& bar0, std::uint32_t khz) : bar_(bar0), khz_(khz) {}

result<std::unique_ptr<device_clock>> device_clock::create(hca& h) {
    if (h.attached()) {
        return error{ENOTSUP, "the device clock: the initialization segment is its owner's (cxvd), not mapped here"};
    }
    if (h.caps().empty()) return error{EINVAL, "the device clock: no capabilities read yet"};
    return create(h.device().bar0(), hw::ifc::get<hw::ifc::cmd_hca_cap::device_frequency_khz>(h.caps().data()));
}

result<std::unique_ptr<device_clock>> device_clock::create(const hw::mmio_window& bar0, std::uint32_t frequency_khz) {
    if (frequency_khz == 0) {
        return error{ENOTSUP, "the device clock: device_frequency_khz is 0 (the function announces no timer)"};
    }
    if (!bar0.contains(hw::init_seg_offset::internal_timer_h, 8)) {
        return error{EINVAL, "the device clock: BAR0 does not reach the internal timer"};
    }
    std::unique_ptr<device_clock> c(new device_clock(bar0, frequency_khz));
    c->last_ = c->take();
    c->publish(c->last_, mult_of(frequency_khz));
    return c;
}

std::uint64_t device_clock::read_ticks() const noexcept {
    namespace off = hw::init_seg_offset;
    const std::uint32_t h1 = bar_.read32_be(off::internal_timer_h);
    std::uint32_t l = bar_.read32_be(off::internal_timer_l);
    const std::uint32_t h2 = bar_.read32_be(off::internal_timer_h);
    if (h1 != h2) l = bar_.read32_be(off::internal_timer_l);  // the low dword wrapped in between
    return std::uint64_t{h2} << 32 | l;
}

device_clock::sample device_clock::take() const noexcept {
    sample best;
    std::int64_t narrowest = std::numeric_limits<std::int64_t>::max();
    for (int i = 0; i < 5; ++i) {
        const std::int64_t before = realtime_ns();
        const std::uint64_t ticks = read_ticks();
        const std::int64_t after = realtime_ns();
        if (after - before < narrowest) {
            narrowest = after - before;
            best = {ticks, before + (after - before) / 2};
        }
    }
    return best;
}

// A sequence counter without fences: each parameter is stored with release (after the
// odd count) and loaded with acquire (before the count is looked at again), so a reader
// that saw any new parameter sees the count moved.
void device_clock::publish(const sample& base, std::uint64_t mult) noexcept {
    const std::uint32_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);  // odd: being written
    base_ticks_.store(base.ticks, std::memory_order_release);
    base_ns_.store(base.ns, std::memory_order_release);
    mult_.store(mult, std::memory_order_release);
    seq_.store(s + 2, std::memory_order_release);  // even: done
}

status device_clock::sync() {
    const sample now = take();
    std::uint64_t mult = mult_.load(std::memory_order_relaxed);
    const std::int64_t dns = now.ns - last_.ns;
    const std::uint64_t dticks = now.ticks - last_.ticks;
    if (dns >= kMinInterval && dticks != 0) {
        mult = static_cast<std::uint64_t>((static_cast<unsigned __int128>(dns) << kShift) / dticks);
    } else if (dns < 0 || now.ticks < last_.ticks) {
        // The wall clock stepped back (settimeofday), or the timer restarted (a reset):
        // start again from the announced rate.
        mult = mult_of(khz_);
    } else if (dns < kMinInterval) {
        return ok_status();  // too soon to measure: keep the base the rate was measured from
    }
    last_ = now;
    publish(now, mult);
    return ok_status();
}

std::int64_t device_clock::to_realtime_ns(std::uint64_t ticks) const noexcept {
    for (;;) {
        const std::uint32_t s1 = seq_.load(std::memory_order_acquire);
        const std::uint64_t base_ticks = base_ticks_.load(std::memory_order_acquire);
        const std::int64_t base_ns = base_ns_.load(std::memory_order_acquire);
        const std::uint64_t mult = mult_.load(std::memory_order_acquire);
        if ((s1 & 1) != 0 || seq_.load(std::memory_order_relaxed) != s1) continue;
        // Ticks before the base (a packet stamped before the last sync) count backwards.
        const bool before = ticks < base_ticks;
        const std::uint64_t d = before ? base_ticks - ticks : ticks - base_ticks;
        const auto ns = static_cast<std::int64_t>((static_cast<unsigned __int128>(d) * mult) >> kShift);
        return before ? base_ns - ns : base_ns + ns;
    }
}

double device_clock::rate_offset_ppm() const noexcept {
    const double nominal = static_cast<double>(mult_of(khz_));
    // mult is ns per tick: a faster timer has a smaller one.
    return (nominal / static_cast<double>(mult_.load(std::memory_order_relaxed)) - 1.0) * 1e6;
}

}  // namespace cxv::driver
