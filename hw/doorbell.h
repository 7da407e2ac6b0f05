// Doorbells: offsets inside a UAR page (PRM "User Access Region") and the doorbell
// records the device reads from host memory (PRM "Doorbell Record").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/endian.h"

namespace cxv::hw {

// A UAR is a 4 KiB page of BAR0; UAR index u is at BAR0 + u * uar_page_size.
inline constexpr std::size_t uar_page_size = 4096;
inline constexpr unsigned uar_page_shift = 12;

// Offsets inside a UAR page.
inline constexpr std::size_t uar_cq_doorbell = 0x20;         // 64-bit CQ arm doorbell
inline constexpr std::size_t uar_eq_doorbell_arm = 0x40;     // 32-bit: update ci and arm
inline constexpr std::size_t uar_eq_doorbell_no_arm = 0x48;  // 32-bit: update ci only
inline constexpr std::size_t uar_bf_offset = 0x800;          // first BlueFlame register
// Each BlueFlame register is 1 << log_bf_reg_size bytes (cmd_hca_cap) split in two
// halves that a QP alternates between, so that one doorbell's write-combined burst
// cannot merge with the next one's.
inline constexpr unsigned default_log_bf_reg_size = 9;

// EQ doorbell value: EQ number (31:24) and the 24-bit consumer index.
constexpr std::uint32_t eq_doorbell_value(std::uint32_t eqn, std::uint32_t ci) noexcept {
    return (eqn << 24) | (ci & 0xffffff);
}

// Work queue doorbell record (8 bytes, in host memory, 8-byte aligned): the device reads
// the receive counter to learn of posted receive WQEs and the send counter of send WQEs.
struct wq_doorbell_record {
    be32 rcv_counter;  // RQ/SRQ: WQE counter (15:0) of the next WQE to be posted
    be32 snd_counter;  // SQ: WQE-BB counter (15:0)
};
static_assert(sizeof(wq_doorbell_record) == 8);
inline constexpr std::size_t rcv_dbr = 0;  // index of the receive counter (be32 units)
inline constexpr std::size_t snd_dbr = 1;

// A work queue's counter into its record field: the counter is the big-endian dword's
// bits 15:0 and bits 31:16 are reserved (PRM "Doorbell Record"), so its two low-order
// bytes (the dword's last two) are stored alone, one 16-bit store (a 16-bit swap is a
// rotate; the 32-bit value would take a zero-extension, a swap and a 32-bit store). The
// reserved half stays as clear_wq_counter_reserved() left it: zero.
inline void store_wq_counter(be32& field, std::uint32_t counter) noexcept {
    const std::uint16_t v = to_be(static_cast<std::uint16_t>(counter));
    std::memcpy(reinterpret_cast<unsigned char*>(&field) + 2, &v, sizeof(v));
}
// The reserved half of a counter's dword, zeroed (the queues' constructors; the device
// ignores it, so any time is safe).
inline void clear_wq_counter_reserved(be32& field) noexcept {
    std::memset(&field, 0, 2);
}

// CQ doorbell record: the consumer index the device may overwrite up to, and the arm
// state the device checks when it writes a CQE.
struct cq_doorbell_record {
    be32 update_ci;  // consumer index (23:0)
    be32 arm_ci;     // arm sequence number (29:28), command (26:24), consumer index (23:0)
};
static_assert(sizeof(cq_doorbell_record) == 8);
inline constexpr std::size_t cq_set_ci = 0;
inline constexpr std::size_t cq_arm_db = 1;

// Arm commands (arm_ci bits 26:24): request an event for the next completion, or for
// the next solicited one.
inline constexpr std::uint32_t cq_db_req_not = 0u << 24;
inline constexpr std::uint32_t cq_db_req_not_sol = 1u << 24;

constexpr std::uint32_t cq_arm_value(std::uint32_t sn, std::uint32_t cmd, std::uint32_t ci) noexcept {
    return ((sn & 3) << 28) | cmd | (ci & 0xffffff);
}

// The 64-bit CQ arm doorbell written to uar_cq_doorbell after the record: the arm word
// in the high half, the CQ number in the low half.
constexpr std::uint64_t cq_doorbell_value(std::uint32_t arm_word, std::uint32_t cqn) noexcept {
    return (std::uint64_t{arm_word} << 32) | (cqn & 0xffffff);
}

}  // namespace cxv::hw
