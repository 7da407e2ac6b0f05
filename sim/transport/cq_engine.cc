// The CQ engine (see cq_engine.h): CQEs into the ring, the arm doorbell, completion
// and CQ error events.
#include "sim/transport/cq_engine.h"

#include <algorithm>

#include "sim/device_barrier.h"

namespace cxv::sim {

namespace ifc = hw::ifc;

namespace cq_ring {

namespace {

// The doorbell record's IOVA: dbr_addr, or with dbr_umem_valid an offset into a UMEM.
std::optional<std::uint64_t> dbr_iova(const cq_object& cq, const object_tables& t) {
    const std::byte* cqc = cq.cqc.data();
    const std::uint64_t addr = ifc::get<ifc::cqc::dbr_addr>(cqc);
    if (!ifc::get<ifc::cqc::dbr_umem_valid>(cqc)) return addr;
    const umem_object* u = t.umem(ifc::get<ifc::cqc::dbr_umem_id>(cqc));
    return u ? umem_iova(*u, addr) : std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> cqe_iova(const cq_object& cq, const umem_object* umem,
                                      std::uint32_t index) {
    const cq_geometry g = cq_geometry::of(cq.cqc.data());
    const std::uint64_t off = std::uint64_t{index & ((1u << g.log_cq_size) - 1)} * g.cqe;
    if (cq.umem_id != 0) return umem ? umem_iova(*umem, cq.umem_offset + off) : std::nullopt;
    // Shifts, not divisions (a page is 4 KiB << log_page_size): this runs for every CQE.
    const unsigned shift = 12 + g.log_page_size;
    if (shift >= 48) return std::nullopt;  // beyond any IOVA (iommu::iova_limit)
    const std::uint64_t pos = (std::uint64_t{g.page_offset} << (shift - 6)) + off;
    if ((pos >> shift) >= cq.pas.size()) return std::nullopt;
    return cq.pas[pos >> shift] + (pos & ((std::uint64_t{1} << shift) - 1));
}

std::optional<hw::cq_doorbell_record> read_dbr(const iommu& mmu, const cq_object& cq,
                                               const object_tables& t) {
    const auto iova = dbr_iova(cq, t);
    hw::cq_doorbell_record r{};
    if (!iova || !mmu.read(*iova, &r, sizeof(r))) return std::nullopt;
    return r;
}

std::uint32_t consumer(const cq_object& cq) {
    return ifc::get<ifc::cqc::consumer_counter>(cq.cqc.data());
}
void set_consumer(cq_object& cq, std::uint32_t ci) {
    ifc::set<ifc::cqc::consumer_counter>(cq.cqc.data(), ci & kMask24);
}

void refresh_consumer(const iommu& mmu, cq_object& cq, const object_tables& t) {
    if (const auto r = read_dbr(mmu, cq, t)) set_consumer(cq, r->update_ci.value());
}

std::uint32_t outstanding(const cq_object& cq) { return (cq.producer - consumer(cq)) & kMask24; }

bool cq_room(const cq_object& cq) {
    const std::byte* cqc = cq.cqc.data();
    return outstanding(cq) < (1u << ifc::get<ifc::cqc::log_cq_size>(cqc)) || ifc::get<ifc::cqc::oi>(cqc);
}

std::uint32_t solicited_end(const cq_object& cq) {
    return ifc::get<ifc::cqc::last_solicit_index>(cq.cqc.data());
}

bool cq_event_due(const cq_object& cq) {
    if (!cq.armed) return false;
    const std::uint32_t pending = outstanding(cq);
    if (pending == 0) return false;
    if (!cq.armed_solicited) return true;
    const std::uint32_t d = (solicited_end(cq) - consumer(cq)) & kMask24;
    return d != 0 && d <= pending;
}

std::array<std::byte, ifc::comp_event::size_bytes> take_event(cq_object& cq) {
    cq.armed = cq.armed_solicited = false;
    ifc::set<ifc::cqc::st>(cq.cqc.data(), kStFired);
    ifc::set<ifc::cqc::last_notified_index>(cq.cqc.data(), (cq.producer - 1) & kMask24);
    std::array<std::byte, ifc::comp_event::size_bytes> d{};
    ifc::set<ifc::comp_event::cq_number>(d.data(), cq.cqn);
    return d;
}

bool write_cqe(const iommu& mmu, std::uint64_t iova, std::size_t size, hw::cqe_opcode op,
               unsigned owner) {
    std::array<std::byte, 128> e{};
    e[size - 1] = static_cast<std::byte>(hw::make_op_own(op, false, static_cast<std::uint8_t>(owner)));
    if (!mmu.write(iova, e.data(), size - 1)) return false;
    device_release();
    return mmu.write(iova + size - 1, e.data() + size - 1, 1);
}

}  // namespace cq_ring

using namespace cq_ring;

bool cq_engine::push(std::uint32_t cqn, const hw::cqe64& cqe, bool solicited) {
    if (last_cq_ == nullptr || cqn != last_cqn_ || last_generation_ != t_.eth.generation) {
        const auto it = t_.cqs.find(cqn);
        if (it == t_.cqs.end()) return false;
        last_cq_ = &it->second;
        last_cqn_ = cqn;
        last_generation_ = t_.eth.generation;
    }
    cq_object& cq = *last_cq_;
    if (cq.overrun) return false;
    // Room: the consumer index known so far only grows, so the record is read only when
    // the ring looks full.
    if (!cq_room(cq)) refresh_consumer(mmu_, cq, t_);
    if (!cq_room(cq)) {
        // PRM "CQ Error Event": overrun (syndrome 1); the CQ takes no more CQEs.
        cq.overrun = true;
        ifc::set<ifc::cqc::status>(cq.cqc.data(), kStatusOverflow);
        std::array<std::byte, ifc::cq_error::size_bytes> d{};
        ifc::set<ifc::cq_error::cqn>(d.data(), cq.cqn);
        ifc::set<ifc::cq_error::syndrome>(d.data(), 1);
        flush();
        hooks_.async_event(hw::event_type::CQ_ERROR, d);
        return false;
    }
    const cq_geometry g = cq_geometry::of(cq.cqc.data());
    if (cq.ring_generation != t_.eth.generation || cq.ring_mmu_generation != mmu_.generation()) keep_ring(cq, g);
    // A 128-byte CQE carries the 64-byte CQE in its second half.
    const std::uint64_t in_ring = std::uint64_t{cq.producer & ((1u << g.log_cq_size) - 1)} * g.cqe + (g.cqe - sizeof(hw::cqe64));
    gathered& out = gathered_[count_];
    if (cq.ring_host != nullptr) {
        out.iova = cq.ring_iova + in_ring;
        out.host = cq.ring_host + in_ring;
        out.mmu_generation = cq.ring_mmu_generation;
        // The line asked for, for writing, now: the flush then seldom waits for it.
        __builtin_prefetch(out.host, 1);
    } else {
        const auto at = cqe_iova(cq, t_.umem(cq.umem_id), cq.producer);
        if (!at) return false;
        out.iova = *at + (g.cqe - sizeof(hw::cqe64));
        out.host = nullptr;
    }
    out.cqe = cqe;
    out.cqe.op_own = static_cast<std::uint8_t>((cqe.op_own & ~hw::cqe_owner_mask) | ((cq.producer >> g.log_cq_size) & 1));
    ++count_;
    if (!batching_ || count_ == kGathered) flush();
    // A write that faults loses the CQE, and the ring moves on as on a card, whose
    // posted DMA write never learns of the fault.
    ++cq.producer;
    const auto op = hw::cqe_get_opcode(cqe.op_own);
    if (solicited || op == hw::cqe_opcode::REQ_ERR || op == hw::cqe_opcode::RESP_ERR) {
        ifc::set<ifc::cqc::last_solicit_index>(cq.cqc.data(), cq.producer & kMask24);
    }
    trace_.count(&counters::cqes);
    if (cq_event_due(cq)) {
        flush();
        hooks_.completion_event(cq.eqn, take_event(cq));
    }
    return true;
}

// Body first, then the byte with the owner bit (PRM "Completion Queue"): every body,
// then every owner byte in the order the CQEs were made, so that each CQE's body is
// visible before its owner bit, and the driver, which takes CQEs in order, sees them
// owned in order.
void cq_engine::flush() {
    if (count_ == 0) return;
    bool written[kGathered];
    for (std::size_t i = 0; i < count_; ++i) {
        const gathered& g = gathered_[i];
        written[i] = write(g, 0, sizeof(g.cqe) - 1);
        if (!written[i]) trace_.count(&counters::iommu_faults);
    }
    device_release();
    for (std::size_t i = 0; i < count_; ++i) {
        if (written[i]) write(gathered_[i], sizeof(hw::cqe64) - 1, 1);
    }
    count_ = 0;
}

// Bytes [from, from + len) of a gathered CQE: through the ring's kept translation while
// the IOMMU's table is the one it was made with, else (or with a fault injected) through
// the table.
bool cq_engine::write(const gathered& g, std::size_t from, std::size_t len) {
    const auto* src = reinterpret_cast<const std::byte*>(&g.cqe) + from;
    if (g.host != nullptr && mmu_.write_cached(g.mmu_generation, g.host + from, src, len)) return true;
    return mmu_.write(g.iova + from, src, len);
}

// The ring kept translated when its CQEs lie at consecutive IOVAs of one mapping (most
// rings: one buffer, mapped once); otherwise each CQE's IOVA is found on its own.
void cq_engine::keep_ring(cq_object& cq, const cq_geometry& g) {
    cq.ring_generation = t_.eth.generation;
    cq.ring_mmu_generation = mmu_.generation();
    cq.ring_host = nullptr;
    const umem_object* umem = t_.umem(cq.umem_id);
    const auto first = cqe_iova(cq, umem, 0);
    if (!first) return;
    // A CQE every 4 KiB of the ring and the last one where a consecutive ring would have
    // them: every page of the ring (4 KiB or more, the last one perhaps cut short by the
    // ring's offset in the first) holds one of them.
    const std::uint32_t size = 1u << g.log_cq_size;
    const std::uint32_t per_page = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, 4096 / g.cqe));
    for (std::uint32_t i = per_page; i < size + per_page; i += per_page) {
        const std::uint32_t at_index = std::min(i, size - 1);
        const auto at = cqe_iova(cq, umem, at_index);
        if (!at || *at != *first + std::uint64_t{at_index} * g.cqe) return;
    }
    std::uint64_t generation = 0;
    std::byte* host = mmu_.translate(*first, g.bytes(), true, generation);
    if (host == nullptr || generation != cq.ring_mmu_generation) return;
    cq.ring_iova = *first;
    cq.ring_host = host;
}

// --- the arm doorbell ----------------------------------------------------------------

// The driver writes the same arm word to the doorbell record first.
void cq_engine::doorbell(std::uint64_t value) {
    const auto word = static_cast<std::uint32_t>(value >> 32);
    const auto it = t_.cqs.find(static_cast<std::uint32_t>(value) & kMask24);
    if (it == t_.cqs.end()) return;  // a doorbell for no CQ: ignored, as by a card
    cq_object& cq = it->second;
    const std::uint32_t sn = (word >> 28) & 3;
    const std::uint32_t cmd = word & (7u << 24);
    if (cmd != hw::cq_db_req_not && cmd != hw::cq_db_req_not_sol) return;  // no such command
    // The driver advances sn after each completion event; an arm that still carries the
    // sn of the request that already fired is stale and is dropped.
    if (ifc::get<ifc::cqc::st>(cq.cqc.data()) == kStFired && sn == cq.arm_sn) return;
    set_consumer(cq, word);
    cq.arm_sn = sn;
    cq.armed = true;
    cq.armed_solicited = cmd == hw::cq_db_req_not_sol;
    ifc::set<ifc::cqc::st>(cq.cqc.data(), cq.armed_solicited ? kStSolicitedArmed : kStArmed);
    // CQEs already past the consumer index: the event fires at once.
    if (cq_event_due(cq)) {
        flush();
        hooks_.completion_event(cq.eqn, take_event(cq));
    }
}

}  // namespace cxv::sim
