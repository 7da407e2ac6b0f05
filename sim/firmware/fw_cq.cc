// Completion queues (PRM CREATE_CQ, DESTROY_CQ, QUERY_CQ, MODIFY_CQ, "Completion
// Queue"): the commands. What the device does with a CQ afterwards -- CQEs, the arm
// doorbell, completion events -- is the transport engine's CQ engine
// (sim/transport/cq_engine.h), whose ring helpers QUERY_CQ and MODIFY_CQ's resize use.
#include <algorithm>
#include <cstring>
#include <utility>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_cq.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"
#include "sim/transport/cq_engine.h"

namespace cxv::sim {

namespace {

using umem_map = std::map<std::uint32_t, umem_object>;
using namespace cq_ring;

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

cmd_reply cq_commands::create_cq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(in);
    const std::byte* caps = caps_.current();
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

    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm_.write(*slot, cq.cqc.data(), cq.cqc.size())) {
        icm_.free(*slot);
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

cmd_reply cq_commands::destroy_cq(cmd_ctx& c) {
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
    icm_.free(cq.icm);
    cqs_.erase(it);
    return ok();
}

// --- QUERY_CQ ------------------------------------------------------------------------

cmd_reply cq_commands::query_cq(cmd_ctx& c) {
    const auto it = cqs_.find(ifc::get<ifc::query_cq_in::cqn>(c.in.data()));
    if (it == cqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    cq_object& cq = it->second;
    std::byte* out = ifc::at<ifc::query_cq_out::cq_context>(c.out.data());
    if (!icm_.read(cq.icm, out, ifc::cqc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    // The context as created or modified, with the device's state over it.
    refresh_consumer(mmu_, cq, tables_);
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

cmd_reply cq_commands::modify_cq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = cqs_.find(ifc::get<ifc::modify_cq_in::cqn>(in));
    if (it == cqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    cq_object& cq = it->second;
    if (cq.uid != ifc::get<ifc::modify_cq_in::uid>(in)) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    const std::byte* caps = caps_.current();
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
        if (!icm_.write(cq.icm, n, next.size())) {
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
    refresh_consumer(mmu_, cq, tables_);
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

    if (!icm_.write(cq.icm, n, next.size())) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    const auto at = cqe_iova(cq, tables_.umem(cq.umem_id), cq.producer);
    const unsigned owner = (cq.producer >> old.log_cq_size) & 1;
    if (!at || !write_cqe(mmu_, *at, old.cqe, hw::cqe_opcode::RESIZE_CQ, owner)) {
        trace_.count(&counters::iommu_faults);
        (void)icm_.write(cq.icm, cq.cqc.data(), cq.cqc.size());  // the context as it was
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
    if (cq_event_due(cq)) events_.post(eqs_.at(cq.eqn), hw::event_type::COMP, 0, take_event(cq));
    return ok();
}

void cq_commands::release_all() {
    for (auto& [n, o] : cqs_) icm_.free(o.icm);
    cqs_.clear();
    next_cqn_ = 1;
}

}  // namespace cxv::sim
