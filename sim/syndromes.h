// Command syndromes of the device model: the 32-bit value its firmware returns beside a
// non-zero command status to say which check failed. These are the model's own, not
// part of the hardware interface, so they live in sim/ and not in hw/.
//
// The PRM defines the status values (opcodes.h) but not a syndrome table: a card's
// syndromes are firmware-internal identifiers (public logs show values such as
// 0x4bb88f for a rejected RTR2RTS_QP), stable per firmware release and meaningful to the
// vendor only. So a driver prints a syndrome in hex and must not interpret it. The
// values below are the ones cxv's device model returns, one per cause, so that a test
// can tell which check refused a command; they sit in a range (0xc5xxxx) that reads as
// cxv's, and name() on a card's syndrome finds nothing.
#pragma once

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace cxv::sim {

// X(NAME, value, what the model checked)
#define CXV_CMD_SYNDROMES(X)                                                                \
    X(OK, 0x000000, "no error")                                                             \
    X(UNKNOWN_OPCODE, 0xc50001, "opcode is not a command this device implements")           \
    X(BAD_OP_MOD, 0xc50002, "op_mod is not valid for this opcode")                          \
    X(INPUT_TOO_SHORT, 0xc50003, "input length is shorter than the command's layout")       \
    X(OUTPUT_TOO_SHORT, 0xc50004, "output length is shorter than status and syndrome")      \
    X(BAD_SYS_STATE, 0xc50005, "the HCA is not in a state that allows this command")        \
    X(HCA_NOT_ENABLED, 0xc50006, "ENABLE_HCA has not completed")                            \
    X(HCA_NOT_INITIALIZED, 0xc50007, "INIT_HCA has not completed")                          \
    X(HCA_ALREADY_INITIALIZED, 0xc50008, "INIT_HCA was already done")                       \
    X(BAD_ISSI, 0xc50009, "the ISSI is not supported, or is set after INIT_HCA")            \
    X(UNKNOWN_RESOURCE, 0xc5000a, "the object number does not name a live object")          \
    X(FOREIGN_RESOURCE, 0xc5000b, "the object belongs to another uid")                      \
    X(RESOURCE_IN_USE, 0xc5000c, "the object is still referenced by another object")        \
    X(EXCEEDS_LIMIT, 0xc5000d, "a size or count exceeds the device's capability")           \
    X(NO_RESOURCES, 0xc5000e, "no free object numbers or firmware pages")                   \
    X(NOT_POWER_OF_TWO, 0xc5000f, "a size that must be a power of two is not")              \
    X(LOG_SIZE_TOO_BIG, 0xc50010, "a log size exceeds its log_max capability")              \
    X(LOG_SIZE_TOO_SMALL, 0xc50011, "a log size is below the PRM minimum")                  \
    X(BAD_ALIGNMENT, 0xc50012, "an address or offset is not aligned as required")           \
    X(PAS_TOO_SHORT, 0xc50013, "the page list is shorter than the object needs")            \
    X(BAD_PARAMETER, 0xc50014, "a field holds a value the PRM does not allow")              \
    X(BAD_RESOURCE_STATE, 0xc50015, "the object is not in a state that allows this command") \
    X(BAD_QP_STATE, 0xc50016, "the QP transition does not start from the QP's state")        \
    X(MISSING_ATTRIBUTE, 0xc50017, "the transition requires an attribute that is absent")    \
    X(BAD_PD, 0xc50018, "the protection domain does not exist or is not the object's")      \
    X(BAD_CQ, 0xc50019, "the completion queue does not exist")                              \
    X(BAD_EQ, 0xc5001a, "the event queue does not exist")                                   \
    X(BAD_UAR, 0xc5001b, "the UAR does not exist")                                          \
    X(BAD_PORT, 0xc5001c, "the port number is not a port of this device")                   \
    X(BAD_REGISTER, 0xc5001d, "ACCESS_REG names a register that is not implemented")        \
    X(PAGES_OUTSTANDING, 0xc5001e, "firmware pages were not given as requested")            \
    X(TAKE_MORE_THAN_GIVEN, 0xc5001f, "MANAGE_PAGES take asks for pages never given")       \
    X(BAD_INPUT_LEN, 0xc50020, "the input length does not match the page or mailbox count") \
    X(IOMMU_FAULT, 0xc50021, "an address given to the device is not mapped for DMA")        \
    X(READ_ONLY_REGISTER, 0xc50022, "ACCESS_REG writes a register that can only be read")   \
    X(INJECTED, 0xc500ff, "a failure injected by a test")

enum class cmd_syndrome : std::uint32_t {
#define CXV_ENUM_ENTRY(name, value, what) name = value,
    CXV_CMD_SYNDROMES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// The syndrome's name and meaning, or empty views for a value that is not cxv's.
std::string_view name(cmd_syndrome v) noexcept;
std::string_view describe(cmd_syndrome v) noexcept;

}  // namespace cxv::sim

// "NAME(0x…)", or "unknown(0x…)" for a value that is not the model's (a card's).
template <>
struct fmt::formatter<cxv::sim::cmd_syndrome> : fmt::formatter<std::string_view> {
    template <typename Ctx>
    auto format(cxv::sim::cmd_syndrome v, Ctx& ctx) const {
        const auto n = cxv::sim::name(v);
        return fmt::format_to(ctx.out(), "{}({:#x})", n.empty() ? "unknown" : n, static_cast<unsigned>(v));
    }
};
