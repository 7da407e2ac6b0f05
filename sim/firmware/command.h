// What every command unit of the firmware (sim/firmware/fw_*.h) shares: one command as
// the dispatch hands it over, its outcome, and the HCA's state (PRM "Command Interface",
// "HCA Initialization").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hw/opcodes.h"
#include "sim/syndromes.h"

namespace cxv::sim {

// The outcome of one command: written to the output's status and syndrome.
struct cmd_reply {
    hw::cmd_status status = hw::cmd_status::OK;
    sim::cmd_syndrome syndrome = sim::cmd_syndrome::OK;
};

inline cmd_reply ok() { return {}; }
inline cmd_reply fail(hw::cmd_status s, sim::cmd_syndrome syn) { return {s, syn}; }

// One command as the engine hands it over: the whole input (ilen bytes) and an output
// buffer of at least the command's output layout size (zeroed); only the first olen
// bytes reach the driver.
struct cmd_ctx {
    std::span<const std::byte> in;
    std::span<std::byte> out;
    std::size_t olen;
    hw::cmd_opcode opcode;
    std::uint16_t op_mod;
};

enum class hca_state : std::uint8_t {
    disabled,     // after reset or DISABLE_HCA
    enabled,      // after ENABLE_HCA, before INIT_HCA
    initialized,  // after INIT_HCA
    torn_down,    // after TEARDOWN_HCA, before DISABLE_HCA
};

}  // namespace cxv::sim
