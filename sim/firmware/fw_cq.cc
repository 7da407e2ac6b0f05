// Completion queues (PRM CREATE_CQ, DESTROY_CQ, QUERY_CQ, MODIFY_CQ, "Completion Queue",
// "CQ Doorbell Record"), and the device side of CQ notification: the arm doorbell in the
// UAR page, the doorbell record in host memory, and the completion event a CQ raises on
// its EQ.
//
// The notification protocol, as the transport engine must use it when it writes a CQE:
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
#include <algorithm>
#include <cstring>
#include <utility>

#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "sim/firmware/firmware.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using hw::cmd_status;
using hw::cmd_syndrome;

namespace {

using umem_map = std::map<std::uint32_t, umem_object>;

// PRM cqc.status and cqc.st values.
constexpr std::uint32_t kStatusOk = 0x0;
constexpr std::uint32_t kStatusOverflow = 0x9;
constexpr std::uint32_t kStSolicitedArmed = 0x6;
constexpr std::uint32_t kStArmed = 0x9;
constexpr std::uint32_t kStFired = 0xa;
// A CQ never armed since it was created: the context as the driver gave it (st 0).
constexpr std::uint32_t kStIdle = 0x0;

// MODIFY_CQ op_mod and its field-select bits.
constexpr std::uint16_t kOpModModify = 0;
constexpr std::uint16_t kOpModResize = 1;
constexpr std::uint32_t kSelPeriod = 1u << 0;
constexpr std::uint32_t kSelMaxCount = 1u << 1;
constexpr std::uint32_t kSelOi = 1u << 2;
constexpr std::uint32_t kSelEqn = 1u << 3;
constexpr std::uint32_t kSelLogSize = 1u << 0;
constexpr std::uint32_t kSelPageOffset = 1u << 1;
constexpr std::uint32_t kSelPageSize = 1u << 2;


// cqe_sz: 0 = 64-byte CQEs; 1 = 128-byte CQEs, whose second half is the 64-byte CQE
// (the first half holds data scattered to the CQE, or nothing).
std::size_t cqe_bytes(const std::byte* cqc) { return ifc::get<ifc::cqc::cqe_sz>(cqc) == 0 ? 64 : 128; }

// Where a CQ's ring lies in its pages: 2^log_cq_size CQEs starting page_offset
// 64ths of a page into the first page of 4 KiB << log_page_size (the quantized
// page_offset Linux computes with a scale of 64).
struct cq_geometry {
    unsigned log_cq_size = 0;
    unsigned log_page_size = 0;
    std::uint32_t page_offset = 0;
    std::size_t cqe = 64;

    static cq_geometry of(const std::byte* cqc) {
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

// The page list after a command's fixed part: as long as the ring needs, each entry
// aligned to the page size.
template <typename Pas>
cmd_reply read_pas(std::span<const std::byte> in, std::size_t fixed, const cq_geometry& g,
                   std::vector<std::uint64_t>& out) {
    const std::size_t n = g.npages();
    if (in.size() < fixed + n * 8) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    out.clear();
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t pa = ifc::get<Pas>(in.data(), i);
        if (pa % g.page()) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        out.push_back(pa);
    }
    return ok();
}

// A UMEM named by a command: it must exist and belong to the command's uid.
cmd_reply find_umem(const umem_map& umems, std::uint32_t id,
                    std::uint32_t uid, const umem_object*& out) {
    const auto it = umems.find(id);
    if (it == umems.end()) return fail(cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != uid) return fail(cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    out = &it->second;
    return ok();
}

const umem_object* umem_of(const umem_map& umems, std::uint32_t id) {
    const auto it = umems.find(id);
    return it == umems.end() ? nullptr : &it->second;
}

// The IOVA of CQE slot `index` (counted from creation; the ring index is its low bits).
std::optional<std::uint64_t> cqe_iova(const cq_object& cq, const umem_object* umem,
                                      std::uint32_t index) {
    const cq_geometry g = cq_geometry::of(cq.cqc.data());
    const std::uint64_t off = std::uint64_t{index & ((1u << g.log_cq_size) - 1)} * g.cqe;
    if (cq.umem_id != 0) return umem ? umem_iova(*umem, cq.umem_offset + off) : std::nullopt;
    const std::uint64_t pos = g.start() + off;
    if (pos / g.page() >= cq.pas.size()) return std::nullopt;
    return cq.pas[pos / g.page()] + pos % g.page();
}

// The doorbell record's IOVA: dbr_addr, or with dbr_umem_valid an offset into a UMEM.
std::optional<std::uint64_t> dbr_iova(const cq_object& cq, const umem_map& umems) {
    const std::byte* cqc = cq.cqc.data();
    const std::uint64_t addr = ifc::get<ifc::cqc::dbr_addr>(cqc);
    if (!ifc::get<ifc::cqc::dbr_umem_valid>(cqc)) return addr;
    const umem_object* u = umem_of(umems, ifc::get<ifc::cqc::dbr_umem_id>(cqc));
    return u ? umem_iova(*u, addr) : std::nullopt;
}

// The driver's doorbell record (PRM "CQ Doorbell Record"): update_ci, the consumer
// index the driver has reached, and arm_ci, the last arm request. The device reads it
// when it needs the consumer index; nullopt when the read faults.
std::optional<hw::cq_doorbell_record> read_dbr(const iommu& mmu, const cq_object& cq,
                                               const umem_map& umems) {
    const auto iova = dbr_iova(cq, umems);
    hw::cq_doorbell_record r{};
    if (!iova || !mmu.read(*iova, &r, sizeof(r))) return std::nullopt;
    return r;
}

// The consumer index the device knows (cqc.consumer_counter of the in-memory context).
std::uint32_t consumer(const cq_object& cq) {
    return ifc::get<ifc::cqc::consumer_counter>(cq.cqc.data());
}
void set_consumer(cq_object& cq, std::uint32_t ci) {
    ifc::set<ifc::cqc::consumer_counter>(cq.cqc.data(), ci & kMask24);
}

// Refreshes the consumer index from the doorbell record; keeps the last known value if
// the record cannot be read.
void refresh_consumer(const iommu& mmu, cq_object& cq, const umem_map& umems) {
    if (const auto r = read_dbr(mmu, cq, umems)) set_consumer(cq, r->update_ci.value());
}

std::uint32_t outstanding(const cq_object& cq) { return (cq.producer - consumer(cq)) & kMask24; }

// Whether one more CQE may be written: room in the ring, or overrun ignored (oi).
bool cq_room(const cq_object& cq) {
    const std::byte* cqc = cq.cqc.data();
    return outstanding(cq) < (1u << ifc::get<ifc::cqc::log_cq_size>(cqc)) || ifc::get<ifc::cqc::oi>(cqc);
}

// The in-memory last_solicit_index holds one past the index of the last solicited or
// error CQE (0: none yet), so that "none" and "index 0" differ; QUERY_CQ reports the
// index itself.
std::uint32_t solicited_end(const cq_object& cq) {
    return ifc::get<ifc::cqc::last_solicit_index>(cq.cqc.data());
}

// Whether an armed CQ must raise its completion event now: REQ_NOT fires for any CQE at
// or past the consumer index the driver armed with, REQ_NOT_SOL only for a solicited or
// error one. Called when the CQ is armed (CQEs may be waiting) and after each CQE.
bool cq_event_due(const cq_object& cq) {
    if (!cq.armed) return false;
    const std::uint32_t pending = outstanding(cq);
    if (pending == 0) return false;
    if (!cq.armed_solicited) return true;
    const std::uint32_t d = (solicited_end(cq) - consumer(cq)) & kMask24;
    return d != 0 && d <= pending;
}

// Disarms the CQ for the event it raises and returns the event's payload.
std::array<std::byte, ifc::comp_event::size_bytes> take_event(cq_object& cq) {
    cq.armed = cq.armed_solicited = false;
    ifc::set<ifc::cqc::st>(cq.cqc.data(), kStFired);
    ifc::set<ifc::cqc::last_notified_index>(cq.cqc.data(), (cq.producer - 1) & kMask24);
    std::array<std::byte, ifc::comp_event::size_bytes> d{};
    ifc::set<ifc::comp_event::cq_number>(d.data(), cq.cqn);
    return d;
}

// Writes a CQE with nothing but its opcode and owner bit (a RESIZE_CQ CQE): the body,
// then the byte holding op_own, so the driver never sees the owner bit before the rest.
// A 128-byte CQE carries the 64-byte CQE in its second half.
bool write_cqe(const iommu& mmu, std::uint64_t iova, std::size_t size, hw::cqe_opcode op,
               unsigned owner) {
    std::array<std::byte, 128> e{};
    e[size - 1] = static_cast<std::byte>(hw::make_op_own(op, false, static_cast<std::uint8_t>(owner)));
    if (!mmu.write(iova, e.data(), size - 1)) return false;
    hw::device_release();
    return mmu.write(iova + size - 1, e.data() + size - 1, 1);
}

// Context fields the model checks at create: the CQE size, and features whose
// capability is 0 (or that the model does not implement: collapsed CQs, APU CQs), which
// are refused rather than silently ignored. Moderation needs cq_moderation, oi cq_oi.
cmd_reply check_features(const std::byte* cqc, const std::byte* caps) {
    using cap = ifc::cmd_hca_cap;
    const auto bad = bad_param(cmd_syndrome::BAD_PARAMETER);
    // cqe_sz 2 (128-byte stride, 64-byte CQE padded) needs cqe_128_always; 3..7 are reserved.
    const auto sz = ifc::get<ifc::cqc::cqe_sz>(cqc);
    if (sz > 2 || (sz == 2 && !ifc::get<cap::cqe_128_always>(caps))) return bad;
    if (ifc::get<ifc::cqc::cqe_comp_en>(cqc) &&
        !(sz == 0 ? ifc::get<cap::cqe_compression>(caps) : ifc::get<cap::cqe_compression_128>(caps))) {
        return bad;
    }
    // cq_period_mode: 0 = from the last EQE, 1 = from the first CQE (needs its cap).
    const auto mode = ifc::get<ifc::cqc::cq_period_mode>(cqc);
    if (mode > 1 || (mode == 1 && !ifc::get<cap::cq_period_start_from_cqe>(caps))) return bad;
    if (ifc::get<ifc::cqc::scqe_break_moderation_en>(cqc) &&
        !ifc::get<cap::scqe_break_moderation>(caps)) {
        return bad;
    }
    if ((ifc::get<ifc::cqc::cq_period>(cqc) || ifc::get<ifc::cqc::cq_max_count>(cqc)) &&
        !ifc::get<cap::cq_moderation>(caps)) {
        return bad;
    }
    if (ifc::get<ifc::cqc::oi>(cqc) && !ifc::get<cap::cq_oi>(caps)) return bad;
    if (ifc::get<ifc::cqc::cc>(cqc) || ifc::get<ifc::cqc::apu_cq>(cqc)) return bad;
    return ok();
}

}  // namespace

// --- CREATE_CQ / DESTROY_CQ ----------------------------------------------------------

cmd_reply firmware::create_cq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(in);
    const std::byte* caps = current_caps_.data();
    using cap = ifc::cmd_hca_cap;

    if (cqs_.size() >= (std::size_t{1} << ifc::get<cap::log_max_cq>(caps))) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    if (const auto r = check_features(cqc, caps); failed(r)) return r;
    const cq_geometry g = cq_geometry::of(cqc);
    if (g.log_cq_size > ifc::get<cap::log_max_cq_sz>(caps)) {
        return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    }
    const std::uint32_t uar = ifc::get<ifc::cqc::uar_page>(cqc);
    if (!uars_.count(uar)) return bad_param(cmd_syndrome::BAD_UAR);
    const std::uint32_t eqn = ifc::get<ifc::cqc::c_eqn_or_apu_element>(cqc);
    if (!eqs_.count(eqn)) return bad_param(cmd_syndrome::BAD_EQ);

    cq_object cq;
    cq.uid = ifc::get<ifc::create_cq_in::uid>(in);
    cq.eqn = eqn;
    std::memcpy(cq.cqc.data(), cqc, cq.cqc.size());

    // The ring: in a UMEM (cq_umem_valid), or in the pages listed after the context.
    if (ifc::get<ifc::create_cq_in::cq_umem_valid>(in)) {
        const umem_object* u = nullptr;
        if (const auto r = find_umem(umems_, ifc::get<ifc::create_cq_in::cq_umem_id>(in), cq.uid, u); failed(r)) return r;
        cq.umem_offset = ifc::get<ifc::create_cq_in::cq_umem_offset>(in);
        // Each CQE must lie in one page: the ring starts CQE-aligned in the UMEM's pages.
        if ((u->page_offset + cq.umem_offset) % g.cqe) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        if (!umem_holds(*u, cq.umem_offset, g.bytes())) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        cq.umem_id = u->id;
    } else {
        const auto r = read_pas<ifc::create_cq_in::pas>(c.in, ifc::create_cq_in::size_bytes, g, cq.pas);
        if (failed(r)) return r;
    }

    // The doorbell record: 8 bytes, 8-byte aligned, in host memory or in a UMEM.
    const std::uint64_t dbr = ifc::get<ifc::cqc::dbr_addr>(cqc);
    if (ifc::get<ifc::cqc::dbr_umem_valid>(cqc)) {
        const umem_object* u = nullptr;
        if (const auto r = find_umem(umems_, ifc::get<ifc::cqc::dbr_umem_id>(cqc), cq.uid, u); failed(r)) return r;
        if (!umem_holds(*u, dbr, sizeof(hw::cq_doorbell_record))) {
            return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        }
        if (*umem_iova(*u, dbr) % 8) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    } else if (dbr % 8) {
        return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    }

    std::uint32_t cqn = next_cqn_ & kMask24;
    while (cqn == 0 || cqs_.count(cqn)) cqn = (cqn + 1) & kMask24;
    // Device state starts clean whatever the driver put in these fields.
    std::byte* ctx = cq.cqc.data();
    ifc::set<ifc::cqc::status>(ctx, kStatusOk);
    ifc::set<ifc::cqc::st>(ctx, kStIdle);
    ifc::set<ifc::cqc::last_notified_index>(ctx, 0);
    ifc::set<ifc::cqc::last_solicit_index>(ctx, 0);
    ifc::set<ifc::cqc::consumer_counter>(ctx, 0);
    ifc::set<ifc::cqc::producer_counter>(ctx, 0);

    const auto slot = icm_alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm_write(*slot, cq.cqc.data(), cq.cqc.size())) {
        icm_free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    ++uars_[uar].users;
    if (cq.umem_id) ++umems_[cq.umem_id].users;
    if (ifc::get<ifc::cqc::dbr_umem_valid>(ctx)) ++umems_[ifc::get<ifc::cqc::dbr_umem_id>(ctx)].users;
    cq.icm = *slot;
    cq.cqn = cqn;
    next_cqn_ = (cqn + 1) & kMask24;
    cqs_.emplace(cqn, std::move(cq));
    ifc::set<ifc::create_cq_out::cqn>(c.out.data(), cqn);
    return ok();
}

cmd_reply firmware::destroy_cq(cmd_ctx& c) {
    const auto it = cqs_.find(ifc::get<ifc::destroy_cq_in::cqn>(c.in.data()));
    if (it == cqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    cq_object& cq = it->second;
    if (cq.uid != ifc::get<ifc::destroy_cq_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    // QPs and SRQs that complete to this CQ hold it.
    if (cq.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    const std::byte* ctx = cq.cqc.data();
    drop_user(uars_, ifc::get<ifc::cqc::uar_page>(ctx));
    if (cq.umem_id) drop_user(umems_, cq.umem_id);
    if (ifc::get<ifc::cqc::dbr_umem_valid>(ctx)) {
        drop_user(umems_, ifc::get<ifc::cqc::dbr_umem_id>(ctx));
    }
    icm_free(cq.icm);
    cqs_.erase(it);
    return ok();
}

// --- QUERY_CQ ------------------------------------------------------------------------

cmd_reply firmware::query_cq(cmd_ctx& c) {
    const auto it = cqs_.find(ifc::get<ifc::query_cq_in::cqn>(c.in.data()));
    if (it == cqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    cq_object& cq = it->second;
    std::byte* out = ifc::at<ifc::query_cq_out::cq_context>(c.out.data());
    if (!icm_read(cq.icm, out, ifc::cqc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    // The context as created or modified, with the device's state over it.
    refresh_consumer(mmu_, cq, umems_);
    const std::byte* dev = cq.cqc.data();
    ifc::set<ifc::cqc::status>(out, cq.overrun ? kStatusOverflow : kStatusOk);
    ifc::set<ifc::cqc::st>(out, ifc::get<ifc::cqc::st>(dev));
    ifc::set<ifc::cqc::last_notified_index>(out, ifc::get<ifc::cqc::last_notified_index>(dev));
    const std::uint32_t sol = solicited_end(cq);
    ifc::set<ifc::cqc::last_solicit_index>(out, sol ? (sol - 1) & kMask24 : 0);
    ifc::set<ifc::cqc::consumer_counter>(out, consumer(cq));
    ifc::set<ifc::cqc::producer_counter>(out, cq.producer & kMask24);
    put_pas<ifc::query_cq_out>(c, cq.pas);
    return ok();
}

// --- MODIFY_CQ -----------------------------------------------------------------------

cmd_reply firmware::modify_cq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = cqs_.find(ifc::get<ifc::modify_cq_in::cqn>(in));
    if (it == cqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    cq_object& cq = it->second;
    if (cq.uid != ifc::get<ifc::modify_cq_in::uid>(in)) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    const std::byte* caps = current_caps_.data();
    using cap = ifc::cmd_hca_cap;
    const std::uint32_t sel = ifc::get<ifc::modify_cq_in::modify_field_select_resize_field_select>(in);
    const std::byte* want = ifc::at<ifc::modify_cq_in::cq_context>(in);
    std::array<std::byte, ifc::cqc::size_bytes> next = cq.cqc;

    if (c.op_mod == kOpModModify) {
        // Moderation, overrun ignore, and the EQ the CQ reports to; other fields stay.
        if (sel & ~(kSelPeriod | kSelMaxCount | kSelOi | kSelEqn)) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if ((sel & (kSelPeriod | kSelMaxCount)) && !ifc::get<cap::cq_moderation>(caps)) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if ((sel & kSelOi) && !ifc::get<cap::cq_oi>(caps)) return bad_param(cmd_syndrome::BAD_PARAMETER);
        std::uint32_t eqn = cq.eqn;
        if (sel & kSelEqn) {
            if (!ifc::get<cap::cq_eq_remap>(caps)) return bad_param(cmd_syndrome::BAD_PARAMETER);
            eqn = ifc::get<ifc::cqc::c_eqn_or_apu_element>(want);
            if (!eqs_.count(eqn)) return bad_param(cmd_syndrome::BAD_EQ);
        }
        std::byte* n = next.data();
        if (sel & kSelPeriod) ifc::set<ifc::cqc::cq_period>(n, ifc::get<ifc::cqc::cq_period>(want));
        if (sel & kSelMaxCount) {
            ifc::set<ifc::cqc::cq_max_count>(n, ifc::get<ifc::cqc::cq_max_count>(want));
        }
        if (sel & kSelOi) ifc::set<ifc::cqc::oi>(n, ifc::get<ifc::cqc::oi>(want));
        ifc::set<ifc::cqc::c_eqn_or_apu_element>(n, eqn);
        if (!icm_write(cq.icm, n, next.size())) {
            return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
        }
        cq.cqc = next;
        cq.eqn = eqn;
        return ok();
    }
    if (c.op_mod != kOpModResize || !ifc::get<cap::cq_resize>(caps)) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }

    // Resize: a new ring in new pages. The device writes a RESIZE_CQ CQE into the old
    // ring at the producer index and goes on in the new ring from the next index; the
    // driver copies the CQEs it has not consumed into the new ring one slot later and
    // consumes the RESIZE_CQ CQE (as Linux's copy_resize_cqes and rdma-core's resize
    // copy do). The CQE size stays (no select bit changes it).
    if (sel & ~(kSelLogSize | kSelPageOffset | kSelPageSize)) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    // A new ring inside a UMEM: not implemented by the model (refused, not ignored).
    if (ifc::get<ifc::modify_cq_in::cq_umem_valid>(in)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (cq.overrun) return fail(cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    const cq_geometry old = cq_geometry::of(cq.cqc.data());
    refresh_consumer(mmu_, cq, umems_);
    next = cq.cqc;
    std::byte* n = next.data();
    if (sel & kSelLogSize) ifc::set<ifc::cqc::log_cq_size>(n, ifc::get<ifc::cqc::log_cq_size>(want));
    if (sel & kSelPageOffset) ifc::set<ifc::cqc::page_offset>(n, ifc::get<ifc::cqc::page_offset>(want));
    if (sel & kSelPageSize) {
        ifc::set<ifc::cqc::log_page_size>(n, ifc::get<ifc::cqc::log_page_size>(want));
    }
    const cq_geometry g = cq_geometry::of(n);
    if (g.log_cq_size > ifc::get<cap::log_max_cq_sz>(caps)) {
        return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    }
    // The old ring needs room for the RESIZE_CQ CQE, the new one for every CQE the
    // driver has not consumed.
    if (!cq_room(cq)) return fail(cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    if (outstanding(cq) > (1u << g.log_cq_size)) {
        return fail(cmd_status::BAD_SIZE_OUTS_CQES, cmd_syndrome::LOG_SIZE_TOO_SMALL);
    }
    std::vector<std::uint64_t> pas;
    const auto r = read_pas<ifc::modify_cq_in::pas>(c.in, ifc::modify_cq_in::size_bytes, g, pas);
    if (failed(r)) return r;

    if (!icm_write(cq.icm, n, next.size())) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    const auto at = cqe_iova(cq, umem_of(umems_, cq.umem_id), cq.producer);
    const unsigned owner = (cq.producer >> old.log_cq_size) & 1;
    if (!at || !write_cqe(mmu_, *at, old.cqe, hw::cqe_opcode::RESIZE_CQ, owner)) {
        trace_.update([](counters& t) { ++t.iommu_faults; });
        (void)icm_write(cq.icm, cq.cqc.data(), cq.cqc.size());  // the context as it was
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    ++cq.producer;
    if (cq.umem_id) {
        drop_user(umems_, cq.umem_id);
        cq.umem_id = 0;
        cq.umem_offset = 0;
    }
    cq.cqc = next;
    cq.pas = std::move(pas);
    if (cq_event_due(cq)) post_eqe(eqs_.at(cq.eqn), hw::event_type::COMP, 0, take_event(cq));
    return ok();
}

// --- CQEs from the transport engine ----------------------------------------------------

bool firmware::push_cqe(std::uint32_t cqn, const hw::cqe64& cqe, bool solicited) {
    const auto it = cqs_.find(cqn);
    if (it == cqs_.end()) return false;
    cq_object& cq = it->second;
    if (cq.overrun) return false;
    // Room: the consumer index known so far only grows, so the record is read only when
    // the ring looks full.
    if (!cq_room(cq)) refresh_consumer(mmu_, cq, umems_);
    if (!cq_room(cq)) {
        // PRM "CQ Error Event": overrun (syndrome 1); the CQ takes no more CQEs.
        cq.overrun = true;
        ifc::set<ifc::cqc::status>(cq.cqc.data(), kStatusOverflow);
        std::array<std::byte, ifc::cq_error::size_bytes> d{};
        ifc::set<ifc::cq_error::cqn>(d.data(), cq.cqn);
        ifc::set<ifc::cq_error::syndrome>(d.data(), 1);
        post_event(hw::event_type::CQ_ERROR, 0, d);
        return false;
    }
    const cq_geometry g = cq_geometry::of(cq.cqc.data());
    const auto at = cqe_iova(cq, umem_of(umems_, cq.umem_id), cq.producer);
    if (!at) return false;
    // A 128-byte CQE carries the 64-byte CQE in its second half.
    const std::uint64_t iova = *at + (g.cqe - sizeof(hw::cqe64));
    hw::cqe64 e = cqe;
    e.op_own = static_cast<std::uint8_t>((e.op_own & ~hw::cqe_owner_mask) |
                                         ((cq.producer >> g.log_cq_size) & 1));
    // Body first, then the byte with the owner bit (PRM "Completion Queue").
    if (!mmu_.write(iova, &e, sizeof(e) - 1)) {
        trace_.update([](counters& t) { ++t.iommu_faults; });
        return false;
    }
    hw::device_release();
    if (!mmu_.write(iova + sizeof(e) - 1, &e.op_own, 1)) return false;
    ++cq.producer;
    const auto op = hw::cqe_get_opcode(e.op_own);
    if (solicited || op == hw::cqe_opcode::REQ_ERR || op == hw::cqe_opcode::RESP_ERR) {
        ifc::set<ifc::cqc::last_solicit_index>(cq.cqc.data(), cq.producer & kMask24);
    }
    trace_.update([](counters& t) { ++t.cqes; });
    if (cq_event_due(cq)) post_eqe(eqs_.at(cq.eqn), hw::event_type::COMP, 0, take_event(cq));
    return true;
}

// --- the arm doorbell ----------------------------------------------------------------

// UAR + 0x20, 64 bits: the arm word (sn 29:28, command 26:24, consumer index 23:0) and
// the CQ number. The driver writes the same arm word to the doorbell record first.
void firmware::cq_doorbell(std::uint64_t value) {
    const auto word = static_cast<std::uint32_t>(value >> 32);
    const auto it = cqs_.find(static_cast<std::uint32_t>(value) & kMask24);
    if (it == cqs_.end()) return;  // a doorbell for no CQ: ignored, as by a card
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
    if (cq_event_due(cq)) post_eqe(eqs_.at(cq.eqn), hw::event_type::COMP, 0, take_event(cq));
}

}  // namespace cxv::sim
