// The health watch (PRM §"Initialization Segment", health buffer and health counter; as
// Linux's mlx5 health poll does it): every period the driver reads the function's health
// from BAR0 and decides whether it is dead — the function reads all ones (removed or
// reset), the NIC interface is disabled or in SW reset, the health buffer carries a
// syndrome, or the health counter stopped advancing for `misses` checks in a row.
//
// It reads BAR0 only through an mmio_window, so it can watch plain memory as well.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "hw/mmio.h"

namespace cxv::driver {

class health_monitor {
public:
    health_monitor(std::chrono::milliseconds period, unsigned misses) : period_(period), misses_(misses) {}

    // Takes the counter's current value as the last seen; the first check is due now.
    void start(const hw::mmio_window& bar, std::chrono::steady_clock::time_point now);
    // Once per period (earlier calls return nothing): why the function is dead, or nothing.
    std::optional<std::string> check(const hw::mmio_window& bar, std::chrono::steady_clock::time_point now);

    // The firmware version as the health buffer has it (major.minor packed).
    static std::uint32_t fw_version(const hw::mmio_window& bar) noexcept;

private:
    std::chrono::milliseconds period_;
    unsigned misses_;
    std::uint32_t last_ = 0;
    unsigned missed_ = 0;
    std::chrono::steady_clock::time_point next_{};
};

}  // namespace cxv::driver
