#include "sim/eqs.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "hw/ifc.h"
#include "sim/device_barrier.h"
#include "sim/objects/objects.h"

namespace cxv::sim {

namespace ifc = hw::ifc;

namespace {

constexpr std::size_t kEqe = ifc::eqe::size_bytes;  // 64

}  // namespace

// PRM "Event Queue": EQEs of 64 bytes in pages of 4 KiB << log_page_size; the owner bit
// flips on each pass of the ring, and the byte holding it is written last.
bool event_queues::post(event_queue& eq, hw::event_type type, std::uint8_t sub_type,
                        std::span<const std::byte> data) {
    const std::uint32_t nent = 1u << eq.log_eq_size;
    if (eq.overrun) return false;
    if (((eq.producer - eq.consumer) & kMask24) >= nent && !eq.oi) {
        // No room: the EQ overruns and stops (PRM: an EQ in overflow state writes no more
        // EQEs until it is destroyed).
        eq.overrun = true;
        trace_.count(&counters::eq_overruns);
        return false;
    }
    std::array<std::byte, kEqe> e{};
    ifc::set<ifc::eqe::event_type>(e.data(), static_cast<std::uint32_t>(type));
    ifc::set<ifc::eqe::event_sub_type>(e.data(), sub_type);
    std::memcpy(ifc::at<ifc::eqe::event_data>(e.data()), data.data(),
                std::min<std::size_t>(data.size(), ifc::eqe::event_data::count));
    ifc::set<ifc::eqe::owner>(e.data(), (eq.producer >> eq.log_eq_size) & 1);

    const std::uint64_t page = std::uint64_t{4096} << eq.log_page_size;
    const std::uint64_t off = std::uint64_t{eq.producer & (nent - 1)} * kEqe;
    const std::uint64_t iova = eq.pas[off / page] + off % page;
    // Body first, then the byte holding the owner bit.
    if (!mmu_.write(iova, e.data(), kEqe - 1)) {
        trace_.count(&counters::iommu_faults);
        return false;
    }
    device_release();
    if (!mmu_.write(iova + kEqe - 1, e.data() + kEqe - 1, 1)) return false;
    ++eq.producer;
    trace_.count(&counters::eqes);
    if (eq.armed) {
        eq.armed = false;
        msix_.signal(eq.intr);
    }
    return true;
}

void event_queues::post_event(hw::event_type type, std::uint8_t sub_type, std::span<const std::byte> data) {
    for (auto& [eqn, eq] : eqs_) {
        if (eq.subscribed(type)) post(eq, type, sub_type, data);
    }
}

// PRM "Command Interface Completion Event": command_completion_vector, a bit per slot.
void event_queues::command_completion(std::uint32_t slots) {
    std::array<std::byte, ifc::cmd_inter_comp_event::size_bytes> d{};
    ifc::set<ifc::cmd_inter_comp_event::command_completion_vector>(d.data(), slots);
    const std::uint32_t skip = std::exchange(created_by_current_command_, 0);
    for (auto& [eqn, eq] : eqs_) {
        if (eqn == skip) continue;
        if (eq.subscribed(hw::event_type::CMD)) post(eq, hw::event_type::CMD, 0, d);
    }
}

// PRM "Page Request Event".
void event_queues::request_pages(std::int32_t num_pages) {
    std::array<std::byte, ifc::pages_req_event::size_bytes> d{};
    ifc::set<ifc::pages_req_event::function_id>(d.data(), 0);
    ifc::set<ifc::pages_req_event::num_pages>(d.data(), static_cast<std::uint32_t>(num_pages));
    trace_.count(&counters::page_requests);
    post_event(hw::event_type::PAGE_REQUEST, 0, d);
}

// PRM "EQ Doorbell": eqn in bits 31:24, the consumer index in 23:0.
void event_queues::doorbell(std::uint32_t value, bool arm) {
    trace_.count(&counters::eq_doorbells);
    const auto it = eqs_.find(value >> 24);
    if (it == eqs_.end()) return;  // a doorbell for no EQ: ignored, as by a card
    event_queue& eq = it->second;
    // The consumer index is 24 bits; keep the producer's view consistent with it.
    eq.consumer = (eq.producer & ~kMask24) | (value & kMask24);
    if (((eq.producer - eq.consumer) & 0x80000000u) != 0) eq.consumer -= kMask24 + 1;
    if (arm) {
        eq.armed = true;
        // Armed with EQEs the driver has not consumed yet: the event fires at once.
        if ((eq.producer - eq.consumer) & kMask24) {
            eq.armed = false;
            msix_.signal(eq.intr);
        }
    }
}

}  // namespace cxv::sim
