// UARs and event queues (PRM ALLOC_UAR, DEALLOC_UAR, CREATE_EQ, DESTROY_EQ, QUERY_EQ,
// "Event Queue"). The EQs themselves, the EQEs written to them, arming and MSI-X are the
// device's (sim/eqs.h, //sim:eqs): the handlers create, query and destroy them
// there.
#include <algorithm>
#include <cstring>
#include <utility>

#include "hw/ifc.h"
#include "sim/firmware/fw_eq.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"

namespace cxv::sim {

namespace {

constexpr std::size_t kEqe = ifc::eqe::size_bytes;  // 64


}  // namespace

// --- UAR ---------------------------------------------------------------------------

cmd_reply eq_commands::alloc_uar(cmd_ctx& c) {
    const std::uint32_t pages = static_cast<std::uint32_t>(bar_.size() / 4096);
    std::uint32_t idx = next_uar_;
    while (idx < pages && uars_.count(idx)) ++idx;
    if (idx >= pages) {
        // Wrap once to reuse freed pages.
        idx = cfg_.first_uar;
        while (idx < pages && uars_.count(idx)) ++idx;
        if (idx >= pages) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    }
    uars_[idx].uid = ifc::get<ifc::alloc_uar_in::uid>(c.in.data());
    next_uar_ = idx + 1;
    ifc::set<ifc::alloc_uar_out::uar>(c.out.data(), idx);
    return ok();
}

cmd_reply eq_commands::dealloc_uar(cmd_ctx& c) {
    return dealloc_plain(uars_, ifc::get<ifc::dealloc_uar_in::uar>(c.in.data()),
                         ifc::get<ifc::dealloc_uar_in::uid>(c.in.data()));
}

// --- EQ ----------------------------------------------------------------------------

cmd_reply eq_commands::create_eq(cmd_ctx& c) {
    const std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(c.in.data());
    const std::byte* caps = caps_.current();
    event_queue eq;
    eq.uid = ifc::get<ifc::create_eq_in::uid>(c.in.data());
    eq.log_eq_size = ifc::get<ifc::eqc::log_eq_size>(eqc);
    eq.log_page_size = ifc::get<ifc::eqc::log_page_size>(eqc);
    eq.page_offset = ifc::get<ifc::eqc::page_offset>(eqc);
    eq.uar_page = ifc::get<ifc::eqc::uar_page>(eqc);
    eq.intr = ifc::get<ifc::eqc::intr>(eqc);
    eq.oi = ifc::get<ifc::eqc::oi>(eqc);
    for (unsigned i = 0; i < 4; ++i) {
        eq.event_bitmask[i] = ifc::get<ifc::create_eq_in::event_bitmask>(c.in.data(), i);
    }

    if (eqs_.size() >= ifc::get<ifc::cmd_hca_cap::max_num_eqs>(caps)) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    if (eq.log_eq_size > ifc::get<ifc::cmd_hca_cap::log_max_eq_sz>(caps)) {
        return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    }
    if (eq.page_offset != 0) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    if (!uars_.count(eq.uar_page)) return bad_param(cmd_syndrome::BAD_UAR);
    if (eq.intr >= msix_.count()) return bad_param(cmd_syndrome::BAD_PARAMETER);

    // The buffer: 64-byte EQEs in pages of 4 KiB << log_page_size.
    const std::uint64_t page = std::uint64_t{4096} << eq.log_page_size;
    const std::uint64_t bytes = kEqe << eq.log_eq_size;
    const std::size_t npages = static_cast<std::size_t>((bytes + page - 1) / page);
    if (c.in.size() < ifc::create_eq_in::size_bytes + npages * 8) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    }
    for (std::size_t i = 0; i < npages; ++i) {
        const std::uint64_t pa = ifc::get<ifc::create_eq_in::pas>(c.in.data(), i);
        if (pa % page) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        eq.pas.push_back(pa);
    }

    std::uint32_t eqn = 1;  // EQ numbers start at 1, so an EQ doorbell is never 0
    while (eqs_.count(eqn)) ++eqn;
    if (eqn > 0xff) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    // The context lives in firmware memory, as on a card.
    if (!icm_.write(*slot, eqc, ifc::eqc::size_bytes)) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    ++uars_[eq.uar_page].users;
    eq.icm = *slot;
    eq.eqn = eqn;
    events_.mark_created(eqn);
    eqs_.emplace(eqn, std::move(eq));
    ifc::set<ifc::create_eq_out::eq_number>(c.out.data(), eqn);
    return ok();
}

cmd_reply eq_commands::destroy_eq(cmd_ctx& c) {
    const auto eqn = ifc::get<ifc::destroy_eq_in::eq_number>(c.in.data());
    const auto it = eqs_.find(eqn);
    if (it == eqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    for (const auto& [cqn, cq] : cqs_) {
        if (cq.eqn == eqn) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    }
    drop_user(uars_, it->second.uar_page);
    icm_.free(it->second.icm);
    eqs_.erase(it);
    return ok();
}

cmd_reply eq_commands::query_eq(cmd_ctx& c) {
    const auto eqn = ifc::get<ifc::query_eq_in::eq_number>(c.in.data());
    const auto it = eqs_.find(eqn);
    if (it == eqs_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const event_queue& eq = it->second;
    std::byte* eqc = ifc::at<ifc::query_eq_out::eq_context_entry>(c.out.data());
    if (!icm_.read(eq.icm, eqc, ifc::eqc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    // PRM eqc status: 0 OK, 0xa overflow; counters are the device's.
    ifc::set<ifc::eqc::status>(eqc, eq.overrun ? 0xa : 0);
    // st: 0x9 armed, 0xa fired (PRM EQ context; Linux MLX5_EQC_ST_*): the two states
    // the PRM defines; an EQ not armed, never armed included, will not interrupt.
    ifc::set<ifc::eqc::st>(eqc, eq.armed ? 0x9 : 0xa);
    ifc::set<ifc::eqc::consumer_counter>(eqc, eq.consumer & kMask24);
    ifc::set<ifc::eqc::producer_counter>(eqc, eq.producer & kMask24);
    ifc::set<ifc::query_eq_out::event_bitmask>(c.out.data(), eq.event_bitmask[0]);
    put_pas<ifc::query_eq_out>(c, eq.pas);
    return ok();
}

void eq_commands::release_all() {
    for (auto& [n, o] : eqs_) icm_.free(o.icm);
    events_.clear();
    uars_.clear();
    next_uar_ = cfg_.first_uar;
}

}  // namespace cxv::sim
