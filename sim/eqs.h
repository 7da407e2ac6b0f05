// The function's event queues (PRM "Event Queue", "Events"): the EQ objects CREATE_EQ
// makes, and the device side of every event: EQEs written to host memory through the
// IOMMU with the owner-bit protocol, arming through the EQ doorbell, the MSI-X vector
// signalled, overrun. Owned by the device; the command handlers create, query and
// destroy EQs here, and the transport engine's and the port's events arrive here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "hw/opcodes.h"
#include "sim/objects/pages.h"
#include "sim/pci/iommu.h"
#include "sim/pci/msix.h"
#include "sim/trace.h"

namespace cxv::sim {

// An event queue (PRM "Event Queue"): its context as created, and the device's
// producer state.
struct event_queue {
    std::uint32_t eqn = 0;
    std::uint32_t uid = 0;
    unsigned log_eq_size = 0;
    unsigned log_page_size = 0;  // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::uint32_t uar_page = 0;
    unsigned intr = 0;
    std::array<std::uint64_t, 4> event_bitmask{};
    std::vector<std::uint64_t> pas;
    std::uint32_t producer = 0;   // next EQE index the device writes
    std::uint32_t consumer = 0;   // last consumer index the driver reported
    bool armed = false;
    bool overrun = false;
    bool oi = false;              // overrun ignore
    pages::slot icm{};            // where its context lives in firmware pages

    bool subscribed(hw::event_type t) const noexcept {
        const unsigned bit = static_cast<unsigned>(t);
        return (event_bitmask[bit / 64] >> (bit % 64)) & 1;
    }
};

class event_queues {
public:
    event_queues(iommu& mmu, msix_table& msix, trace& tr) : mmu_(mmu), msix_(msix), trace_(tr) {}
    event_queues(const event_queues&) = delete;
    event_queues& operator=(const event_queues&) = delete;

    // The EQs by number, for the EQ commands (sim/firmware/fw_eq.cc).
    std::map<std::uint32_t, event_queue>& by_eqn() noexcept { return eqs_; }
    const std::map<std::uint32_t, event_queue>& by_eqn() const noexcept { return eqs_; }
    std::size_t size() const noexcept { return eqs_.size(); }

    // One EQE on `eq`; false when none was written (overrun, IOMMU fault).
    bool post(event_queue& eq, hw::event_type type, std::uint8_t sub_type, std::span<const std::byte> data);
    // An event to every EQ that subscribed to its type.
    void post_event(hw::event_type type, std::uint8_t sub_type, std::span<const std::byte> data);
    // A completion event (comp_event data) on EQ `eqn`.
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) {
        post(eqs_.at(eqn), hw::event_type::COMP, 0, data);
    }
    // A CMD EQE for the slots in `slots` on each EQ that subscribed to command
    // completions, except the one the command itself created (mark_created): the
    // CREATE_EQ of a command EQ completes without an EQE, as does its DESTROY_EQ.
    void command_completion(std::uint32_t slots);
    void mark_created(std::uint32_t eqn) noexcept { created_by_current_command_ = eqn; }
    // A PAGE_REQUEST event for num_pages (negative: pages the firmware can return).
    void request_pages(std::int32_t num_pages);
    // An EQ doorbell the model thread found in a UAR page (0x40 arm, 0x48 no arm).
    void doorbell(std::uint32_t value, bool arm);
    // Every EQ is gone (teardown, reset); the caller has freed their ICM slots.
    void clear() noexcept { eqs_.clear(); }

private:
    iommu& mmu_;
    msix_table& msix_;
    trace& trace_;
    std::map<std::uint32_t, event_queue> eqs_;
    std::uint32_t created_by_current_command_ = 0;  // eqn, or 0
};

}  // namespace cxv::sim
