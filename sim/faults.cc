#include "sim/faults.h"

namespace cxv::sim {

void fault_plan::fail_commands(std::optional<hw::cmd_opcode> opcode, hw::cmd_status status,
                               sim::cmd_syndrome syndrome, unsigned count) {
    std::lock_guard lock(mu_);
    fail_opcode_ = opcode;
    fail_status_ = status;
    fail_syndrome_ = syndrome;
    fail_count_ = count;
}

void fault_plan::delay_completion(std::optional<hw::cmd_opcode> opcode,
                                  std::chrono::milliseconds delay) {
    std::lock_guard lock(mu_);
    delay_opcode_ = opcode;
    delay_ = delay;
    delay_armed_ = true;
}

void fault_plan::drop_completion(std::optional<hw::cmd_opcode> opcode) {
    std::lock_guard lock(mu_);
    drop_opcode_ = opcode;
    drop_armed_ = true;
}

void fault_plan::suppress_event(std::optional<hw::cmd_opcode> opcode) {
    std::lock_guard lock(mu_);
    no_event_opcode_ = opcode;
    no_event_armed_ = true;
}

void fault_plan::garble_reply(std::optional<hw::cmd_opcode> opcode, std::uint32_t seed) {
    std::lock_guard lock(mu_);
    garble_opcode_ = opcode;
    garble_seed_ = seed;
}

void fault_plan::stall_health(bool stalled) {
    std::lock_guard lock(mu_);
    health_stalled_ = stalled;
}

void fault_plan::raise_health_syndrome(std::uint8_t synd, std::uint16_t ext_synd) {
    std::lock_guard lock(mu_);
    health_syndrome_ = std::pair{synd, ext_synd};
    health_syndrome_raised_.store(true, std::memory_order_release);
}

void fault_plan::clear() {
    std::lock_guard lock(mu_);
    fail_count_ = 0;
    delay_armed_ = false;
    drop_armed_ = false;
    no_event_armed_ = false;
    garble_seed_.reset();
    health_stalled_ = false;
    health_syndrome_.reset();
    health_syndrome_raised_.store(false, std::memory_order_release);
}

fault_plan::command_fault fault_plan::take(hw::cmd_opcode op) {
    std::lock_guard lock(mu_);
    command_fault f;
    if (fail_count_ > 0 && matches(fail_opcode_, op)) {
        --fail_count_;
        f.fail = std::pair{fail_status_, fail_syndrome_};
    }
    if (delay_armed_ && matches(delay_opcode_, op)) {
        delay_armed_ = false;
        f.delay = delay_;
    }
    if (drop_armed_ && matches(drop_opcode_, op)) {
        drop_armed_ = false;
        f.drop = true;
    }
    if (no_event_armed_ && matches(no_event_opcode_, op)) {
        no_event_armed_ = false;
        f.no_event = true;
    }
    if (garble_seed_ && matches(garble_opcode_, op)) {
        f.garble = garble_seed_;
        garble_seed_.reset();
    }
    return f;
}

bool fault_plan::health_stalled() const {
    std::lock_guard lock(mu_);
    return health_stalled_;
}

std::optional<std::pair<std::uint8_t, std::uint16_t>> fault_plan::health_syndrome() const {
    if (!health_syndrome_raised_.load(std::memory_order_acquire)) return std::nullopt;
    std::lock_guard lock(mu_);
    return health_syndrome_;
}

}  // namespace cxv::sim
