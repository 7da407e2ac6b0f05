// The command interface of the emulated function (PRM "Command Interface"): the command
// queue address in the initialization segment, the command doorbell, 32 slots of
// 64-byte entries, mailbox chains, ownership and delivery status.
//
// Doorbell detection. The command doorbell (init segment 0x18) is a write-only register
// on a card; here it is shared memory, and a later store can overwrite an earlier one
// before the model thread reads it. The engine consumes the doorbell word (exchanges it
// with 0), then reads the ownership bits, and executes every slot the driver has handed
// over: whichever slot's store survived, each owned slot had its own doorbell or will
// have one. A slot that is owned but never rung is not executed while no doorbell comes,
// so a driver that forgets the doorbell hangs as it would on a card. (Limit: a forgotten
// doorbell goes unnoticed when another slot's doorbell follows, and a slot handed over
// may run before its own doorbell, while the driver is still between the two;
// docs/device-model.md lists this.) Behind a transport that delivers each write as an
// event (sim/uml, whose backend ORs each command doorbell write into the word), nothing
// is lost and set_rung_only(true) executes exactly the slots rung, as a card does.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/pci/bar.h"
#include "sim/faults.h"
#include "sim/firmware/firmware.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"

namespace cxv::sim {

class cmd_engine {
public:
    static constexpr unsigned log_cmdq_size = 5;    // 32 slots
    static constexpr unsigned log_cmdq_stride = 6;  // 64-byte entries
    static constexpr unsigned slots = 1u << log_cmdq_size;
    static constexpr std::size_t max_message = std::size_t{16} << 20;  // bytes

    cmd_engine(bar0& bar, iommu& mmu, firmware& fw, event_queues& eqs, trace& tr, fault_plan& faults);

    // One round of the model thread: latch a new queue address, consume doorbells,
    // execute rung commands, finish delayed ones. True when anything happened.
    bool poll();
    // Power-on state: no queue address, no pending slots; writes the read-only fields
    // (log_cmdq_size/stride) into the initialization segment.
    void reset();

    // True: a doorbell executes the owned slots it rings, and only those (the doorbell
    // word accumulates every write; see above). Kept across reset().
    void set_rung_only(bool on) noexcept { rung_only_ = on; }

    std::uint64_t queue_iova() const noexcept { return cmdq_iova_; }
    std::uint8_t nic_interface() const noexcept { return nic_interface_; }

private:
    bool latch_queue_address();
    // `may_hold`: a command that finds firmware memory short may wait for the driver's
    // pages (false once the driver declined a page request: it fails instead).
    void execute(unsigned slot, bool may_hold = true);
    void complete(unsigned slot, std::uint8_t delivery_status, bool event = true);
    template <typename Fn>
    std::uint8_t walk_chain(std::uint64_t head, std::uint32_t token, std::size_t len,
                            hw::cmd_delivery_status missing, Fn&& fn);
    std::uint8_t read_input(const std::byte* entry, std::vector<std::byte>& in);
    std::uint8_t write_output(const std::byte* entry, std::uint64_t entry_iova,
                              const std::vector<std::byte>& out, std::size_t olen);

    bar0& bar_;
    iommu& mmu_;
    firmware& fw_;
    event_queues& eqs_;  // command completion events
    trace& trace_;
    fault_plan& faults_;

    std::uint64_t cmdq_iova_ = 0;
    std::uint32_t last_addr_dword_ = 0;
    std::uint8_t nic_interface_ = 0;
    std::uint32_t busy_ = 0;          // accepted, completion not yet returned
    std::uint32_t dropped_ = 0;       // completion dropped by fault injection
    bool rung_only_ = false;          // set_rung_only

    struct delayed {
        unsigned slot;
        std::chrono::steady_clock::time_point due;
        std::vector<std::byte> out;
        std::size_t olen;
        command_record record;
        bool event;
    };
    std::vector<delayed> delayed_;

    // Commands waiting for firmware memory. A command that finds ICM short (its handler's
    // NO_RESOURCES with a shortage counted) is not completed: the device keeps the slot,
    // asks for pages (PAGE_REQUEST, sent by the allocation), and executes the command
    // again once the driver answers (MANAGE_PAGES); an answer of ALLOCATION_FAIL fails it
    // with NO_RESOURCES, and an HCA torn down or disabled meanwhile fails it too. A card's firmware does the same, which is why drivers send
    // MANAGE_PAGES on a command slot of its own (Linux's mlx5 keeps the last one for it,
    // cmd.c's page queue): a driver that gives no pages sees the command time out.
    struct held_command {
        unsigned slot;
        std::uint64_t answers;  // firmware_pages::answers() when it was held
    };
    std::vector<held_command> held_;
};

}  // namespace cxv::sim
