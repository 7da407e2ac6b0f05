// The CQ engine: the device side of a completion queue (PRM "Completion Queue", "CQ
// Doorbell Record", "CQ Error Event"): CQEs written into the ring, the consumer index
// read from the doorbell record, the arm doorbell in the UAR page, and the completion
// event a CQ raises on its EQ. The firmware's CQ commands (sim/firmware/fw_cq.cc) use
// the ring helpers below for QUERY_CQ and MODIFY_CQ's resize.
//
// The notification protocol, as the engine follows it when it writes a CQE:
//   1. room: read the consumer index from the doorbell record (read_dbr); with
//      (producer - consumer) >= 2^log_cq_size and oi clear the CQ overruns: status
//      CQ_OVERFLOW, cq.overrun, a CQ_ERROR event (cq_error, syndrome 1) to the EQs that
//      subscribed to it, and no more CQEs. With oi set the CQE is written regardless.
//   2. write the CQE at cqe_iova(producer): body first, then (after a device release
//      barrier) the byte holding op_own, whose owner bit is (producer >> log_cq_size) & 1;
//      then ++producer, and for a solicited or error CQE set the in-memory
//      last_solicit_index to producer (see solicited_end()).
//   3. if cq_event_due(): one COMP EQE (comp_event.cq_number) on the CQ's own EQ, whatever
//      the EQ's event bitmask (completion events are not subscribed to), and the CQ is
//      disarmed (take_event) until the driver arms it again.
// MODIFY_CQ's resize follows the same steps for its RESIZE_CQ CQE.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "sim/objects/objects.h"
#include "sim/objects/tables.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"
#include "sim/transport/hooks.h"

namespace cxv::sim {

namespace cq_ring {

// PRM cqc.status and cqc.st values.
inline constexpr std::uint32_t kStatusOk = 0x0;
inline constexpr std::uint32_t kStatusOverflow = 0x9;
inline constexpr std::uint32_t kStSolicitedArmed = 0x6;
inline constexpr std::uint32_t kStArmed = 0x9;
inline constexpr std::uint32_t kStFired = 0xa;
// A CQ never armed since it was created: the context as the driver gave it (st 0).
inline constexpr std::uint32_t kStIdle = 0x0;

// cqe_sz: 0 = 64-byte CQEs; 1 = 128-byte CQEs, whose second half is the 64-byte CQE
// (the first half holds data scattered to the CQE, or nothing).
inline std::size_t cqe_bytes(const std::byte* cqc) {
    return hw::ifc::get<hw::ifc::cqc::cqe_sz>(cqc) == 0 ? 64 : 128;
}

// Where a CQ's ring lies in its pages: 2^log_cq_size CQEs starting page_offset
// 64ths of a page into the first page of 4 KiB << log_page_size (the quantized
// page_offset Linux computes with a scale of 64).
struct cq_geometry {
    unsigned log_cq_size = 0;
    unsigned log_page_size = 0;
    std::uint32_t page_offset = 0;
    std::size_t cqe = 64;

    static cq_geometry of(const std::byte* cqc) {
        namespace ifc = hw::ifc;
        return {ifc::get<ifc::cqc::log_cq_size>(cqc), ifc::get<ifc::cqc::log_page_size>(cqc),
                ifc::get<ifc::cqc::page_offset>(cqc), cqe_bytes(cqc)};
    }
    std::uint64_t page() const { return std::uint64_t{4096} << log_page_size; }
    std::uint64_t start() const { return page_offset * (page() / 64); }
    std::uint64_t bytes() const { return std::uint64_t{cqe} << log_cq_size; }
    std::size_t npages() const {
        return static_cast<std::size_t>((start() + bytes() + page() - 1) / page());
    }
};

// The IOVA of CQE slot `index` (counted from creation; the ring index is its low bits);
// `umem` is the CQ's UMEM when its ring is in one.
std::optional<std::uint64_t> cqe_iova(const cq_object& cq, const umem_object* umem, std::uint32_t index);
// The driver's doorbell record (PRM "CQ Doorbell Record"): update_ci, the consumer
// index the driver has reached, and arm_ci, the last arm request. nullopt when the read
// faults.
std::optional<hw::cq_doorbell_record> read_dbr(const iommu& mmu, const cq_object& cq, const object_tables& t);
// The consumer index the device knows (cqc.consumer_counter of the in-memory context).
std::uint32_t consumer(const cq_object& cq);
void set_consumer(cq_object& cq, std::uint32_t ci);
// Refreshes the consumer index from the doorbell record; keeps the last known value if
// the record cannot be read.
void refresh_consumer(const iommu& mmu, cq_object& cq, const object_tables& t);
// CQEs written and not yet consumed.
std::uint32_t outstanding(const cq_object& cq);
// Whether one more CQE may be written: room in the ring, or overrun ignored (oi).
bool cq_room(const cq_object& cq);
// The in-memory last_solicit_index holds one past the index of the last solicited or
// error CQE (0: none yet), so that "none" and "index 0" differ; QUERY_CQ reports the
// index itself.
std::uint32_t solicited_end(const cq_object& cq);
// Whether an armed CQ must raise its completion event now: REQ_NOT fires for any CQE at
// or past the consumer index the driver armed with, REQ_NOT_SOL only for a solicited or
// error one. Called when the CQ is armed (CQEs may be waiting) and after each CQE.
bool cq_event_due(const cq_object& cq);
// Disarms the CQ for the event it raises and returns the event's payload.
std::array<std::byte, hw::ifc::comp_event::size_bytes> take_event(cq_object& cq);
// Writes a CQE with nothing but its opcode and owner bit (a RESIZE_CQ CQE): the body,
// then the byte holding op_own, so the driver never sees the owner bit before the rest.
// A 128-byte CQE carries the 64-byte CQE in its second half.
bool write_cqe(const iommu& mmu, std::uint64_t iova, std::size_t size, hw::cqe_opcode op, unsigned owner);

}  // namespace cq_ring

class cq_engine {
public:
    cq_engine(iommu& mmu, trace& tr, object_tables& t, transport_hooks& hooks)
        : mmu_(mmu), trace_(tr), t_(t), hooks_(hooks) {}

    // A CQE at the producer index of `cqn`, with the notification protocol above. False
    // when the CQ is gone, overran or the write faulted.
    bool push(std::uint32_t cqn, const hw::cqe64& cqe, bool solicited);
    // UAR + 0x20, 64 bits: the arm word (sn 29:28, command 26:24, consumer index 23:0)
    // and the CQ number.
    void doorbell(std::uint64_t value);

    // CQE writes gathered (a device round): from begin_batch() to end_batch(), push()
    // does everything but the write, which flush() then makes for every gathered CQE in
    // order, each body before its owner byte. A CQE is written before any event that
    // could announce it, and at the end of each batch of received packets. A card's DMA
    // engine writes CQEs when it gets to them; the model gets to them in bursts, so that
    // the cache lines the driver polls are fetched for writing together rather than one
    // stall each (docs/performance.md).
    void begin_batch() noexcept { batching_ = true; }
    void flush();
    void end_batch() {
        flush();
        batching_ = false;
    }

private:
    struct gathered {
        std::uint64_t iova;  // the 64-byte CQE's (the second half of a 128-byte one)
        std::byte* host;     // ... through the ring's kept translation (null: none)
        std::uint64_t mmu_generation;  // the IOMMU's, when `host` was translated
        hw::cqe64 cqe;
    };
    bool write(const gathered& g, std::size_t from, std::size_t len);
    void keep_ring(cq_object& cq, const cq_ring::cq_geometry& g);
    static constexpr std::size_t kGathered = 64;

    iommu& mmu_;
    trace& trace_;
    object_tables& t_;
    transport_hooks& hooks_;
    bool batching_ = false;
    std::size_t count_ = 0;
    std::array<gathered, kGathered> gathered_;
    // The CQ of the last push, kept while the tables' generation stays (only a command
    // creates or destroys a CQ, and every command changes it).
    std::uint32_t last_cqn_ = 0;
    std::uint64_t last_generation_ = ~std::uint64_t{0};
    cq_object* last_cq_ = nullptr;
};

}  // namespace cxv::sim
