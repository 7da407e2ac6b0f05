// The firmware command interface (PRM "Command Interface"): a 4 KiB queue of 64-byte
// entries in host memory, mailbox chains for the bytes beyond the 16 that travel
// inline, a doorbell in the initialization segment, and ownership handed back by the
// device when a command completes.
//
// exec() is thread-safe: every slot the device offers can carry a command at once, the
// last one MANAGE_PAGES only (the firmware may hold a command until it has pages).
// Completion is found by polling the entry's ownership bit, or, once the async EQ
// exists, by waiting for its command-completion event (complete()). A command that
// does not complete within the timeout fails with ETIMEDOUT and its slot stays the
// device's (it may still write there); a dead device fails everything at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "driver/vfio/vfio.h"
#include "hw/layout.h"
#include "hw/opcodes.h"
#include "base/result.h"

namespace cxv::driver {

// One command as the trace keeps it.
struct cmd_record {
    hw::cmd_opcode opcode;
    std::uint16_t op_mod;
    hw::cmd_status status;
    std::uint32_t syndrome;
    std::uint8_t delivery;  // the entry's delivery status (0 = OK)
    std::chrono::nanoseconds duration;
    int error;  // 0, or the errno the call failed with
};

class cmd_queue {
public:
    struct options {
        std::chrono::milliseconds timeout{60'000};  // per command, as Linux's default
        std::size_t mailbox_blocks = 256;           // preallocated 1 KiB mailbox slots
    };

    // Reads the interface revision and queue geometry from the initialization
    // segment, allocates the queue page and mailboxes, and writes the queue address.
    static result<std::unique_ptr<cmd_queue>> create(vfio::device& dev, const options& o);
    static result<std::unique_ptr<cmd_queue>> create(vfio::device& dev) { return create(dev, options{}); }
    ~cmd_queue();
    cmd_queue(const cmd_queue&) = delete;
    cmd_queue& operator=(const cmd_queue&) = delete;

    // Runs a command: `in` is its whole input (opcode first), `out_len` the output
    // length. Succeeds only with status OK; the error names opcode, op_mod, status and
    // syndrome (EREMOTEIO-style codes mapped as Linux's mlx5_cmd_status_to_err).
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len);

    // Switches completion detection to events: from now on waiters sleep until
    // complete() reports their slot (the async EQ's CMD event), with the ownership bit
    // re-checked as a safety net.
    void use_events(bool on);
    // A CMD EQE: `vector` is the bitmask of slots the device completed.
    void complete(std::uint32_t vector);

    // From now on every pending and new command fails with ENODEV and `why`.
    void mark_dead(const std::string& why);
    bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }

    unsigned slots() const noexcept { return slots_; }
    std::vector<cmd_record> trace() const;  // the last commands, oldest first

private:
    struct slot_state;
    cmd_queue(vfio::device& dev, const options& o);
    result<unsigned> take_slot(bool pages);
    void give_slot(unsigned s);
    result<std::vector<std::uint64_t>> take_blocks(std::size_t n);
    void give_blocks(const std::vector<std::uint64_t>& blocks);
    std::byte* block(std::uint64_t iova) const noexcept;
    bool wait(unsigned s, std::chrono::steady_clock::time_point deadline);
    void record(const cmd_record& r);

    vfio::device& dev_;
    options opts_;
    vfio::dma_buffer page_;       // the queue
    vfio::dma_buffer mailboxes_;  // 1 KiB slots
    unsigned slots_ = 0;
    unsigned stride_ = 0;

    mutable std::mutex mu_;
    std::condition_variable slot_free_;
    std::condition_variable done_;
    std::uint32_t busy_ = 0;     // slots with a command
    std::uint32_t lost_ = 0;     // slots that timed out: the device may still own them
    std::uint32_t events_ = 0;   // completions reported by events, not yet collected
    std::vector<std::uint64_t> free_blocks_;
    std::atomic<bool> use_events_{false};
    std::atomic<bool> dead_{false};
    std::string dead_why_;
    std::vector<cmd_record> trace_;
    std::size_t trace_next_ = 0;
};

// The input of a command laid out as `In` (plus `extra` bytes of trailing lists, e.g.
// page addresses), zeroed, with opcode and op_mod set.
template <typename In>
std::vector<std::byte> command(hw::cmd_opcode op, std::uint16_t op_mod = 0, std::size_t extra = 0) {
    std::vector<std::byte> in(In::size_bytes + extra);
    hw::ifc::set<typename In::opcode>(in.data(), static_cast<std::uint32_t>(op));
    hw::ifc::set<typename In::op_mod>(in.data(), op_mod);
    return in;
}

// The errno Linux's mlx5_cmd_status_to_err gives a firmware status.
int status_errno(hw::cmd_status s) noexcept;

}  // namespace cxv::driver
