#include "driver/hca/health.h"

#include <fmt/format.h>

#include "hw/ifc.h"
#include "hw/init_seg.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
namespace seg = hw::init_seg_offset;

void health_monitor::start(const hw::mmio_window& bar, std::chrono::steady_clock::time_point now) {
    next_ = now;
    last_ = bar.read32_be(seg::health_counter) & hw::health_counter_mask;
}

std::optional<std::string> health_monitor::check(const hw::mmio_window& bar,
                                                 std::chrono::steady_clock::time_point now) {
    if (now < next_) return std::nullopt;
    next_ = now + period_;
    const std::byte* health = bar.base() + seg::health_buffer;
    // A function that is gone answers every read with all ones.
    if (bar.read32_be(seg::health_fw_version) == 0xffffffffu) {
        return "the function does not answer (reads all ones): removed or reset";
    }
    const auto nic = static_cast<hw::nic_interface>((bar.read32_be(seg::nic_interface) >> hw::nic_interface_shift) &
                                                    hw::nic_interface_mask);
    if (nic == hw::nic_interface::DISABLED || nic == hw::nic_interface::SW_RESET) {
        return fmt::format("NIC interface {}", nic == hw::nic_interface::DISABLED ? "disabled" : "in SW reset");
    }
    if (const auto synd = ifc::get<ifc::health_buffer::synd>(health); synd != 0) {
        return fmt::format("health syndrome 0x{:x} (ext 0x{:x})", synd, ifc::get<ifc::health_buffer::ext_synd>(health));
    }
    const std::uint32_t counter = bar.read32_be(seg::health_counter) & hw::health_counter_mask;
    if (counter == last_) {
        if (++missed_ >= misses_) return fmt::format("health counter stalled at {} for {} checks", counter, missed_);
    } else {
        missed_ = 0;
        last_ = counter;
    }
    return std::nullopt;
}

std::uint32_t health_monitor::fw_version(const hw::mmio_window& bar) noexcept {
    return bar.read32_be(seg::health_fw_version);
}

}  // namespace cxv::driver
