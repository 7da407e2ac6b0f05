// Fault injection: what tests ask the model to get wrong, as a card might.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>

#include "sim/spin_lock.h"
#include "sim/syndromes.h"
#include "hw/opcodes.h"

namespace cxv::sim {

class fault_plan {
public:
    // The next `count` commands (of `opcode`, or any) fail with status/syndrome.
    void fail_commands(std::optional<hw::cmd_opcode> opcode, hw::cmd_status status,
                       sim::cmd_syndrome syndrome, unsigned count = 1);
    // The next command with `opcode` (or any) completes after `delay`; with `drop`, its
    // completion is never reported (ownership stays with the device: a timeout).
    void delay_completion(std::optional<hw::cmd_opcode> opcode, std::chrono::milliseconds delay);
    void drop_completion(std::optional<hw::cmd_opcode> opcode);
    // The next command with `opcode` (or any) completes (ownership returns to the
    // driver) but no command-completion EQE is written: a lost event.
    void suppress_event(std::optional<hw::cmd_opcode> opcode);
    // The next command with `opcode` (or any) is executed, then its output after the
    // status and syndrome is overwritten with pseudo-random bytes from `seed` (an odd
    // seed garbles status and syndrome too): a firmware reply the driver cannot trust.
    void garble_reply(std::optional<hw::cmd_opcode> opcode, std::uint32_t seed);
    // Health: stop the counter; raise a syndrome in the health buffer.
    void stall_health(bool stalled);
    void raise_health_syndrome(std::uint8_t synd, std::uint16_t ext_synd);
    void clear();

    struct command_fault {
        std::optional<std::pair<hw::cmd_status, sim::cmd_syndrome>> fail;
        std::chrono::milliseconds delay{0};
        bool drop = false;
        bool no_event = false;
        std::optional<std::uint32_t> garble;
    };
    // Consumes what applies to a command with this opcode. Device thread.
    command_fault take(hw::cmd_opcode op);
    bool health_stalled() const;
    std::optional<std::pair<std::uint8_t, std::uint16_t>> health_syndrome() const;

private:
    static bool matches(const std::optional<hw::cmd_opcode>& want, hw::cmd_opcode op) {
        return !want || *want == op;
    }
    mutable spin_lock mu_;  // read on every round
    std::optional<hw::cmd_opcode> fail_opcode_;
    hw::cmd_status fail_status_{};
    sim::cmd_syndrome fail_syndrome_{};
    unsigned fail_count_ = 0;
    std::optional<hw::cmd_opcode> delay_opcode_;
    std::chrono::milliseconds delay_{0};
    bool delay_armed_ = false;
    std::optional<hw::cmd_opcode> drop_opcode_;
    bool drop_armed_ = false;
    std::optional<hw::cmd_opcode> no_event_opcode_;
    bool no_event_armed_ = false;
    std::optional<hw::cmd_opcode> garble_opcode_;
    std::optional<std::uint32_t> garble_seed_;
    bool health_stalled_ = false;
    std::optional<std::pair<std::uint8_t, std::uint16_t>> health_syndrome_;
    // Whether health_syndrome_ holds one: every round asks, almost always for nothing.
    std::atomic<bool> health_syndrome_raised_{false};
};

}  // namespace cxv::sim
