// Shared receive queues (PRM "Shared Receive Queue (SRQ)", CREATE_SRQ, DESTROY_SRQ,
// QUERY_SRQ, ARM_RQ).
//
// CREATE_SRQ's basic SRQs, and through the same code CREATE_XRC_SRQ's XRC SRQs and
// CREATE_RMP's RMPs (fw_xrc.cc), which ISSI 1 drivers such as Linux's mlx5_ib make
// instead of SRQs: one object kind (srq_object) for the transport engine. Tag-matching
// SRQs (XRQs) are not modelled.
//
// The receive buffer holds 2^log_srq_size WQEs of 16 << log_rq_stride bytes (the PRM
// encodes the stride as log2(stride) - 4, so a 64-byte WQE is log_rq_stride 2). It
// starts page_offset * (page size / 64) bytes into the first page of the page list.
#include <algorithm>
#include <cstring>
#include <utility>

#include "hw/endian.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_srq.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"

namespace cxv::sim {

namespace {

namespace sv = ifc::srqc_values;
// The largest page that still fits in a 64-bit address (4 KiB << 51).
constexpr unsigned kMaxLogPageSize = 51;

}  // namespace

cmd_reply srq_commands::create_srq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    std::uint32_t srqn = 0;
    const auto r = make_srq(c, ifc::at<ifc::create_srq_in::srq_context_entry>(in), ifc::create_srq_in::size_bytes,
                            ifc::get<ifc::create_srq_in::uid>(in), srq_kind::basic, &srqn);
    if (r.status == cmd_status::OK) ifc::set<ifc::create_srq_out::srqn>(c.out.data(), srqn);
    return r;
}

cmd_reply srq_commands::make_srq(cmd_ctx& c, const std::byte* srqc, std::size_t pas_at, std::uint32_t uid, srq_kind kind,
                             std::uint32_t* srqn_out) {
    using srqc_t = ifc::srqc;
    const std::byte* in = c.in.data();
    const std::byte* caps = caps_.current();
    const unsigned log_size = ifc::get<srqc_t::log_srq_size>(srqc);
    const unsigned log_stride = ifc::get<srqc_t::log_rq_stride>(srqc);  // log2(bytes) - 4
    const unsigned log_page = ifc::get<srqc_t::log_page_size>(srqc);    // relative to 4 KiB
    const std::uint32_t page_offset = ifc::get<srqc_t::page_offset>(srqc);
    const std::uint32_t pdn = ifc::get<srqc_t::pd>(srqc);
    const std::uint32_t cqn = ifc::get<srqc_t::cqn>(srqc);
    const std::uint64_t dbr = ifc::get<srqc_t::dbr_addr>(srqc);

    if (srqs_.size() >= (std::size_t{1} << ifc::get<ifc::cmd_hca_cap::log_max_srq>(caps))) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    if (log_size > ifc::get<ifc::cmd_hca_cap::log_max_srq_sz>(caps)) {
        return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    }
    // A WQE (next segment + scatter list) may not exceed max_wqe_sz_rq.
    if ((16u << log_stride) > ifc::get<ifc::cmd_hca_cap::max_wqe_sz_rq>(caps)) {
        return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    }
    if (ifc::get<srqc_t::wq_signature>(srqc) && !ifc::get<ifc::cmd_hca_cap::wq_signature>(caps)) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    // Not modelled: physically contiguous SRQs.
    if (ifc::get<srqc_t::cont_srq>(srqc) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // An XRC SRQ belongs to a live XRC domain of the same user, and reports to a CQ. A
    // basic SRQ may name a domain too (Linux's mlx5_ib names its default one, xrcdn0, in
    // every SRQ it makes with CREATE_SRQ at ISSI 0): a live one of the same user, held.
    const std::uint32_t xrcdn = ifc::get<srqc_t::xrcd>(srqc);
    auto xrcd = xrcds_.end();
    if (kind == srq_kind::xrc || xrcdn != 0) {
        xrcd = xrcds_.find(xrcdn);
        if (xrcd == xrcds_.end()) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (xrcd->second.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    if (kind == srq_kind::xrc && ifc::get<srqc_t::cqn>(srqc) == 0) return bad_param(cmd_syndrome::BAD_CQ);
    // A limit at or above the SRQ's size could never be crossed.
    if (ifc::get<srqc_t::lwm>(srqc) >= (1u << log_size)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (log_page > kMaxLogPageSize) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // Doorbell records are 8-byte aligned (PRM dbr_addr).
    if (dbr % 8 != 0) return bad_param(cmd_syndrome::BAD_ALIGNMENT);

    // The objects it uses must be live and belong to the same user.
    const auto pd = pds_.find(pdn);
    if (pd == pds_.end()) return bad_param(cmd_syndrome::BAD_PD);
    if (pd->second.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    // cqn is used by XRC SRQs only; Linux still names a CQ for a basic SRQ, so a
    // non-zero cqn must be a live CQ, and is held like the PD.
    auto cq = cqs_.end();
    if (cqn != 0) {
        cq = cqs_.find(cqn);
        if (cq == cqs_.end()) return bad_param(cmd_syndrome::BAD_CQ);
        if (cq->second.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }

    // The page list: enough pages for the offset plus the whole WQE buffer.
    const std::uint64_t page = std::uint64_t{4096} << log_page;
    const std::uint64_t bytes = (std::uint64_t{1} << log_size) * (std::uint64_t{16} << log_stride);
    const std::uint64_t start = std::uint64_t{page_offset} * (page / 64);
    const std::size_t npages = static_cast<std::size_t>((start + bytes + page - 1) / page);
    if (c.in.size() < pas_at + npages * 8) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    srq_object srq;
    srq.pas.reserve(npages);
    for (std::size_t i = 0; i < npages; ++i) {
        std::uint64_t raw;
        std::memcpy(&raw, in + pas_at + 8 * i, 8);
        const std::uint64_t pa = hw::from_be(raw);
        if (pa % page) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        srq.pas.push_back(pa);
    }

    std::uint32_t srqn = next_srqn_;
    for (std::size_t tries = 0; srqs_.count(srqn) || srqn == 0; ++tries) {
        if (tries > kMask24) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
        srqn = (srqn + 1) & kMask24;
    }
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    std::copy_n(srqc, srqc_t::size_bytes, srq.srqc.begin());
    if (!icm_.write(*slot, srq.srqc.data(), srq.srqc.size())) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    ++pd->second.users;
    if (cq != cqs_.end()) ++cq->second.users;
    if (xrcd != xrcds_.end()) ++xrcd->second.users;
    srq.srqn = srqn;
    srq.uid = uid;
    srq.kind = kind;
    srq.xrcd = xrcdn;
    srq.pd = pdn;
    srq.cqn = cqn;
    srq.lwm = 0;  // the limit event is armed by ARM_RQ only, as ibv_create_srq ignores srq_limit
    srq.icm = *slot;
    srqs_.emplace(srqn, std::move(srq));
    next_srqn_ = (srqn + 1) & kMask24;
    *srqn_out = srqn;
    return ok();
}

cmd_reply srq_commands::destroy_srq(cmd_ctx& c) {
    return remove_srq(ifc::get<ifc::destroy_srq_in::srqn>(c.in.data()), ifc::get<ifc::destroy_srq_in::uid>(c.in.data()),
                      srq_kind::basic);
}

// Each kind is destroyed by its own command: DESTROY_SRQ of an RMP's number finds no SRQ.
cmd_reply srq_commands::remove_srq(std::uint32_t srqn, std::uint32_t uid, srq_kind kind) {
    const auto it = srqs_.find(srqn);
    if (it == srqs_.end() || it->second.kind != kind) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    srq_object& srq = it->second;
    if (srq.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    // QPs that receive from it hold it.
    if (srq.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    drop_user(pds_, srq.pd);
    if (srq.cqn != 0) drop_user(cqs_, srq.cqn);
    if (srq.xrcd != 0) drop_user(xrcds_, srq.xrcd);
    icm_.free(srq.icm);
    srqs_.erase(it);
    return ok();
}

cmd_reply srq_commands::query_srq(cmd_ctx& c) {
    const auto it = srqs_.find(ifc::get<ifc::query_srq_in::srqn>(c.in.data()));
    if (it == srqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const srq_object& srq = it->second;
    std::byte* srqc = ifc::at<ifc::query_srq_out::srq_context_entry>(c.out.data());
    if (!icm_.read(srq.icm, srqc, ifc::srqc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    // The device's state over the context as created: error state, the armed limit (0
    // once the limit event has fired or was never armed) and the WQE counter.
    ifc::set<ifc::srqc::state>(srqc, srq.error ? sv::state_error : sv::state_good);
    ifc::set<ifc::srqc::lwm>(srqc, srq.lwm);
    ifc::set<ifc::srqc::wqe_cnt>(srqc, srq.consumer & 0xffff);
    put_pas<ifc::query_srq_out>(c, srq.pas);
    return ok();
}

cmd_reply srq_commands::arm_rq(cmd_ctx& c) {
    // RQ objects (CREATE_RQ) and XRQs are not modelled; only SRQs can be armed.
    if (c.op_mod != ifc::arm_rq_op_mod::srq) return bad_param(cmd_syndrome::BAD_OP_MOD);
    const auto it = srqs_.find(ifc::get<ifc::arm_rq_in::srq_number>(c.in.data()));
    if (it == srqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    srq_object& srq = it->second;
    if (srq.uid != ifc::get<ifc::arm_rq_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    const std::uint32_t lwm = ifc::get<ifc::arm_rq_in::lwm>(c.in.data());
    const unsigned log_size = ifc::get<ifc::srqc::log_srq_size>(srq.srqc.data());
    if (lwm >= (1u << log_size)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // The transport engine raises SRQ_RQ_LIMIT once fewer than lwm WQEs remain posted,
    // then disarms (lwm back to 0). lwm 0 disarms.
    srq.lwm = lwm;
    return ok();
}

void srq_commands::release_all() {
    for (auto& [n, o] : srqs_) icm_.free(o.icm);
    srqs_.clear();
    xrcds_.clear();
    next_srqn_ = next_xrcd_ = 1;
}

}  // namespace cxv::sim
