// The Ethernet transport objects (PRM "Transport Interface"; hw/ifc_eth.h).
//
// A transport domain groups TISs and TIRs. An SQ sends through its TIS and completes into
// its CQ; an RQ receives into its ring and completes into its CQ; a TIR hands what is
// steered to it to one RQ (DIRECT) or to the RQ an RQT's entry names by the packet's hash
// (INDIRECT). SQs and RQs are numbered from the QP number space (their CQEs' qpn).
//
// SQ and RQ rings are a "wq": 2^log_wq_sz entries of 2^log_wq_stride bytes (an SQ's are
// 64-byte WQE basic blocks), starting page_offset * (page size / 64) bytes into the first
// page of the page list that follows the context, pages of 4 KiB << log_wq_pg_sz. A
// striding RQ's WQE holds 2^(9 + log_wqe_num_of_strides) strides of 2^(6 +
// log_wqe_stride_size) bytes (Linux MLX5_MPWQE_LOG_NUM_STRIDES_BASE and
// MLX5_MPWQE_LOG_STRIDE_SZ_BASE).
//
// Not modelled, refused with BAD_PARAM: RQs in an RMP, UMEM-backed rings, hairpin, UMR
// and software-parser SQs, LRO and tunnel offloads in a TIR, SQ rate limits.
#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "hw/endian.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_eth.h"
#include "sim/firmware/fw_tables.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

using cap = ifc::cmd_hca_cap;
using ifc::wq_state;
namespace wv = ifc::wq_values;

// The largest page that still fits in a 64-bit address (4 KiB << 51).
constexpr unsigned kMaxLogPageSize = 51;
// An SQ's WQE basic block (PRM "Send WQE Construction"): 64 bytes.
constexpr unsigned kSqLogStride = 6;
// Striding RQ encodings: at most 2^16 strides, of at most 2^13 bytes.
constexpr unsigned kMaxLogNumStrides = 7, kMaxLogStrideSize = 7;
// MODIFY_RQ's modify_bitmask (Linux MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_*).
constexpr std::uint64_t kModifyRqVsd = 1u << 1, kModifyRqScatterFcs = 1u << 2, kModifyRqCounterSetId = 1u << 3;

std::uint32_t raw_state(wq_state s) { return static_cast<std::uint32_t>(s); }

// The next free number of `table` from `next` on (24 bits, never 0), or 0 when none.
template <typename Table>
std::uint32_t take_number(const Table& table, std::uint32_t& next) {
    if (table.size() >= kMask24) return 0;
    const std::uint32_t n = free_number(table, next);
    next = (n + 1) & kMask24;
    return n;
}

template <typename Table>
cmd_reply at_limit(const Table& table, unsigned log_max) {
    if (table.size() >= (std::size_t{1} << log_max)) return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    return ok();
}

// Keeps a context in a slot of firmware memory, as a card does.
cmd_reply store(firmware_pages& icm, const std::byte* ctx, std::size_t len, pages::slot* out) {
    const auto slot = icm.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm.write(*slot, ctx, len)) {
        icm.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    *out = *slot;
    return ok();
}

}  // namespace

// --- transport domain ------------------------------------------------------------------

cmd_reply eth_commands::alloc_transport_domain(cmd_ctx& c) {
    std::uint32_t n = 0;
    const auto r = alloc_plain(eth_.transport_domains, next_td_, ifc::get<cap::log_max_transport_domain>(caps_.current()),
                               ifc::get<ifc::alloc_transport_domain_in::uid>(c.in.data()), &n);
    if (!failed(r)) ifc::set<ifc::alloc_transport_domain_out::transport_domain>(c.out.data(), n);
    return r;
}

// TISs and TIRs of the domain hold it.
cmd_reply eth_commands::dealloc_transport_domain(cmd_ctx& c) {
    return dealloc_plain(eth_.transport_domains, ifc::get<ifc::dealloc_transport_domain_in::transport_domain>(c.in.data()),
                         ifc::get<ifc::dealloc_transport_domain_in::uid>(c.in.data()));
}

// --- TIS -------------------------------------------------------------------------------

cmd_reply eth_commands::create_tis(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::uint32_t uid = ifc::get<ifc::create_tis_in::uid>(in);
    const std::byte* tisc = ifc::at<ifc::create_tis_in::ctx>(in);
    if (auto r = at_limit(eth_.tises, ifc::get<cap::log_max_tis>(caps_.current())); failed(r)) return r;
    const std::uint32_t td = ifc::get<ifc::tisc::transport_domain>(tisc);
    if (auto r = check_ref(eth_.transport_domains, td, uid, cmd_syndrome::BAD_PARAMETER); failed(r)) return r;
    const std::uint32_t tisn = take_number(eth_.tises, next_tisn_);
    if (tisn == 0) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    tis_object t;
    std::copy_n(tisc, t.tisc.size(), t.tisc.begin());
    if (auto r = store(icm_, t.tisc.data(), t.tisc.size(), &t.icm); failed(r)) return r;
    t.tisn = tisn;
    t.uid = uid;
    t.td = td;
    add_user(eth_.transport_domains, td);
    eth_.tises.emplace(tisn, std::move(t));
    ifc::set<ifc::create_tis_out::tisn>(c.out.data(), tisn);
    return ok();
}

// SQs that send through it hold it.
cmd_reply eth_commands::destroy_tis(cmd_ctx& c) {
    const auto it = eth_.tises.find(ifc::get<ifc::destroy_tis_in::tisn>(c.in.data()));
    if (it == eth_.tises.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::destroy_tis_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    if (it->second.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    drop_user(eth_.transport_domains, it->second.td);
    icm_.free(it->second.icm);
    eth_.tises.erase(it);
    return ok();
}

cmd_reply eth_commands::query_tis(cmd_ctx& c) {
    const auto it = eth_.tises.find(ifc::get<ifc::query_tis_in::tisn>(c.in.data()));
    if (it == eth_.tises.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (!icm_.read(it->second.icm, ifc::at<ifc::query_tis_out::tis_context>(c.out.data()), ifc::tisc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    return ok();
}

// --- SQ and RQ -------------------------------------------------------------------------

std::uint32_t eth_commands::next_qpn_space() {
    // QPs, SQs and RQs share the number space above the special QPs' (fw_qp.cc).
    constexpr std::uint32_t kFirst = 0x100;
    std::uint32_t n = next_wqn_;
    for (std::size_t tries = 0; tables_.qpn_used(n) || n < kFirst; ++tries) {
        if (tries > kMask24) return 0;
        n = (n + 1) & kMask24;
    }
    next_wqn_ = (n + 1) & kMask24;
    return n;
}

cmd_reply eth_commands::make_wq(cmd_ctx& c, bool is_sq, std::uint32_t* out_n) {
    const std::byte* in = c.in.data();
    const std::byte* caps = caps_.current();
    // CREATE_SQ and CREATE_RQ have the same layout up to the context, and sqc and rqc hold
    // the uid, cqn and wq at the same places.
    static_assert(ifc::create_sq_in::ctx::bit_offset == ifc::create_rq_in::ctx::bit_offset);
    static_assert(ifc::sqc::wq::bit_offset == ifc::rqc::wq::bit_offset);
    static_assert(ifc::sqc::cqn::bit_offset == ifc::rqc::cqn::bit_offset);
    const std::uint32_t uid = ifc::get<ifc::create_sq_in::uid>(in);
    const std::byte* ctx = ifc::at<ifc::create_sq_in::ctx>(in);
    const std::byte* wq = ifc::at<ifc::sqc::wq>(ctx);
    auto& table = is_sq ? eth_.sqs : eth_.rqs;
    if (auto r = at_limit(table, is_sq ? ifc::get<cap::log_max_sq>(caps) : ifc::get<cap::log_max_rq>(caps)); failed(r)) {
        return r;
    }

    wq_object q;
    const unsigned type = ifc::get<ifc::wq::wq_type>(wq);
    const unsigned log_sz = ifc::get<ifc::wq::log_wq_sz>(wq);
    unsigned log_stride = ifc::get<ifc::wq::log_wq_stride>(wq);
    const unsigned log_page = ifc::get<ifc::wq::log_wq_pg_sz>(wq);
    if (ifc::get<ifc::wq::dbr_umem_valid>(wq) != 0 || ifc::get<ifc::wq::wq_umem_valid>(wq) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (is_sq) {
        // At most one TIS (log_max_tis_per_sq 0), a ring of 64-byte basic blocks. None
        // is an SQ that sends no frame: Linux's mlx5e makes the SQ it posts NOPs and UMRs
        // on (its ICOSQ) so, and a card takes it.
        const unsigned tises = ifc::get<ifc::sqc::tis_lst_sz>(ctx);
        if (tises > 1) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (ifc::get<ifc::sqc::hairpin>(ctx) != 0 || ifc::get<ifc::sqc::reg_umr>(ctx) != 0 ||
            ifc::get<ifc::sqc::allow_swp>(ctx) != 0 || ifc::get<ifc::sqc::allow_multi_pkt_send_wqe>(ctx) != 0) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if (type != wv::type_cyclic || log_stride != kSqLogStride) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (tises == 1) {
            q.tisn = ifc::get<ifc::sqc::tis_num_0>(ctx);
            if (auto r = check_ref(eth_.tises, q.tisn, uid, cmd_syndrome::BAD_PARAMETER); failed(r)) return r;
        }
        q.uar = ifc::get<ifc::wq::uar_page>(wq);
        if (auto r = check_ref(tables_.uars, q.uar, uid, cmd_syndrome::BAD_UAR); failed(r)) return r;
    } else {
        if (ifc::get<ifc::rqc::mem_rq_type>(ctx) != ifc::rqc_values::mem_rq_type_inline ||
            ifc::get<ifc::rqc::hairpin>(ctx) != 0) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if (type == wv::type_cyclic) {
            // A receive WQE: 16 bytes at least, max_wqe_sz_rq at most.
            if (log_stride < 4 || (std::uint64_t{1} << log_stride) > ifc::get<cap::max_wqe_sz_rq>(caps)) {
                return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
        } else if (type == wv::type_cyclic_striding || type == wv::type_linked_list_striding) {
            if (!ifc::get<cap::striding_rq>(caps) || log_stride < 4 ||
                ifc::get<ifc::wq::log_wqe_num_of_strides>(wq) > kMaxLogNumStrides ||
                ifc::get<ifc::wq::log_wqe_stride_size>(wq) > kMaxLogStrideSize) {
                return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
        } else {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        q.counter_set_id = ifc::get<ifc::rqc::counter_set_id>(ctx);
        if (q.counter_set_id != 0 && tables_.q_counters.count(q.counter_set_id) == 0) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
    }
    if (log_sz > ifc::get<cap::log_max_wq_sz>(caps)) return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    if (log_page > kMaxLogPageSize) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (ifc::get<ifc::wq::dbr_addr>(wq) % 8 != 0) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    q.cqn = ifc::get<ifc::sqc::cqn>(ctx);
    if (auto r = check_ref(tables_.cqs, q.cqn, uid, cmd_syndrome::BAD_CQ); failed(r)) return r;
    // PD 0 is none: Linux's mlx5e makes its drop RQ (which never receives) without one, and
    // a card takes it. A queue without a PD can reach no memory key.
    q.pd = ifc::get<ifc::wq::pd>(wq);
    if (q.pd != 0) {
        if (auto r = check_ref(tables_.pds, q.pd, uid, cmd_syndrome::BAD_PD); failed(r)) return r;
    }

    // The page list: enough pages for the offset plus the whole ring.
    const std::uint64_t page = std::uint64_t{4096} << log_page;
    const std::uint64_t bytes = std::uint64_t{1} << (log_sz + log_stride);
    const std::uint64_t start = std::uint64_t{ifc::get<ifc::wq::page_offset>(wq)} * (page / 64);
    const std::size_t npages = static_cast<std::size_t>((start + bytes + page - 1) / page);
    const std::size_t pas_at = ifc::create_sq_in::size_bytes;
    if (c.in.size() < pas_at + npages * 8) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    q.pas.reserve(npages);
    for (std::size_t i = 0; i < npages; ++i) {
        std::uint64_t raw;
        std::memcpy(&raw, in + pas_at + 8 * i, 8);
        const std::uint64_t pa = hw::from_be(raw);
        if (pa % page) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        q.pas.push_back(pa);
    }

    const std::uint32_t n = next_qpn_space();
    if (n == 0) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    std::copy_n(ctx, q.ctx.size(), q.ctx.begin());
    // Created in RST, whatever the context says (its state is QUERY's).
    ifc::set<ifc::sqc::state>(q.ctx.data(), raw_state(wq_state::RST));
    if (auto r = store(icm_, q.ctx.data(), q.ctx.size(), &q.icm); failed(r)) return r;
    q.n = n;
    q.uid = uid;
    q.state = wq_state::RST;
    add_user(tables_.cqs, q.cqn);
    if (q.pd != 0) add_user(tables_.pds, q.pd);
    if (is_sq) {
        if (q.tisn != 0) add_user(eth_.tises, q.tisn);
        add_user(tables_.uars, q.uar);
    } else if (q.counter_set_id != 0) {
        add_user(tables_.q_counters, q.counter_set_id);
    }
    table.emplace(n, std::move(q));
    *out_n = n;
    return ok();
}

cmd_reply eth_commands::create_sq(cmd_ctx& c) {
    std::uint32_t n = 0;
    const auto r = make_wq(c, true, &n);
    if (!failed(r)) ifc::set<ifc::create_sq_out::sqn>(c.out.data(), n);
    return r;
}

cmd_reply eth_commands::create_rq(cmd_ctx& c) {
    std::uint32_t n = 0;
    const auto r = make_wq(c, false, &n);
    if (!failed(r)) ifc::set<ifc::create_rq_out::rqn>(c.out.data(), n);
    return r;
}

// PRM "SQ State Machine" and "RQ State Machine": RST to RDY, RDY to RDY (a change of
// fields), RDY to ERR, and back to RST from RDY or ERR. `from` must be the queue's state.
cmd_reply eth_commands::change_state(wq_object& q, std::uint32_t from, std::uint32_t to) {
    if (from != raw_state(q.state)) return fail(cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    const auto cur = q.state;
    const bool allowed = (cur == wq_state::RST && to == raw_state(wq_state::RDY)) ||
                         (cur == wq_state::RDY && (to == raw_state(wq_state::RDY) || to == raw_state(wq_state::ERR) ||
                                                   to == raw_state(wq_state::RST))) ||
                         (cur == wq_state::ERR && to == raw_state(wq_state::RST));
    if (!allowed) return fail(cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    q.state = static_cast<wq_state>(to);
    if (q.state == wq_state::RST) {  // the ring starts over
        q.consumer = q.posted = q.stride = 0;
        q.end_mpwqe();
    }
    ifc::set<ifc::sqc::state>(q.ctx.data(), to);
    return save(q);
}

cmd_reply eth_commands::save(const wq_object& q) {
    if (!icm_.write(q.icm, q.ctx.data(), q.ctx.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    return ok();
}

cmd_reply eth_commands::modify_sq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = eth_.sqs.find(ifc::get<ifc::modify_sq_in::sqn>(in));
    if (it == eth_.sqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::modify_sq_in::uid>(in)) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    // Rate limits and QoS groups (the bitmask's fields) are not modelled.
    if (ifc::get<ifc::modify_sq_in::modify_bitmask>(in) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const std::byte* ctx = ifc::at<ifc::modify_sq_in::ctx>(in);
    return change_state(it->second, ifc::get<ifc::modify_sq_in::sq_state>(in), ifc::get<ifc::sqc::state>(ctx));
}

cmd_reply eth_commands::modify_rq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = eth_.rqs.find(ifc::get<ifc::modify_rq_in::rqn>(in));
    if (it == eth_.rqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    wq_object& q = it->second;
    if (q.uid != ifc::get<ifc::modify_rq_in::uid>(in)) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    const std::uint64_t mask = ifc::get<ifc::modify_rq_in::modify_bitmask>(in);
    if ((mask & ~(kModifyRqVsd | kModifyRqScatterFcs | kModifyRqCounterSetId)) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const std::byte* ctx = ifc::at<ifc::modify_rq_in::ctx>(in);
    const std::uint32_t set = ifc::get<ifc::rqc::counter_set_id>(ctx);
    if ((mask & kModifyRqCounterSetId) && set != 0 && tables_.q_counters.count(set) == 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (auto r = change_state(q, ifc::get<ifc::modify_rq_in::rq_state>(in), ifc::get<ifc::rqc::state>(ctx)); failed(r)) {
        return r;
    }
    if (mask & kModifyRqVsd) ifc::set<ifc::rqc::vsd>(q.ctx.data(), ifc::get<ifc::rqc::vsd>(ctx));
    if (mask & kModifyRqScatterFcs) ifc::set<ifc::rqc::scatter_fcs>(q.ctx.data(), ifc::get<ifc::rqc::scatter_fcs>(ctx));
    if (mask & kModifyRqCounterSetId) {
        if (q.counter_set_id != 0) drop_user(tables_.q_counters, q.counter_set_id);
        q.counter_set_id = set;
        if (set != 0) add_user(tables_.q_counters, set);
        ifc::set<ifc::rqc::counter_set_id>(q.ctx.data(), set);
    }
    return save(q);
}

cmd_reply eth_commands::destroy_sq(cmd_ctx& c) {
    const auto it = eth_.sqs.find(ifc::get<ifc::destroy_sq_in::sqn>(c.in.data()));
    if (it == eth_.sqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const wq_object& q = it->second;
    if (q.uid != ifc::get<ifc::destroy_sq_in::uid>(c.in.data())) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    drop_user(tables_.cqs, q.cqn);
    drop_user(tables_.pds, q.pd);
    drop_user(eth_.tises, q.tisn);
    drop_user(tables_.uars, q.uar);
    icm_.free(q.icm);
    eth_.sqs.erase(it);
    return ok();
}

// RQTs and TIRs that name it hold it.
cmd_reply eth_commands::destroy_rq(cmd_ctx& c) {
    const auto it = eth_.rqs.find(ifc::get<ifc::destroy_rq_in::rqn>(c.in.data()));
    if (it == eth_.rqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const wq_object& q = it->second;
    if (q.uid != ifc::get<ifc::destroy_rq_in::uid>(c.in.data())) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    if (q.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    drop_user(tables_.cqs, q.cqn);
    drop_user(tables_.pds, q.pd);
    if (q.counter_set_id != 0) drop_user(tables_.q_counters, q.counter_set_id);
    icm_.free(q.icm);
    eth_.rqs.erase(it);
    return ok();
}

namespace {

// QUERY_SQ and QUERY_RQ: the context as kept in firmware memory, the state and device
// counters over it, then the page list.
template <typename Out>
cmd_reply query_wq(firmware_pages& icm, const wq_object& q, cmd_ctx& c, std::byte* ctx) {
    if (!icm.read(q.icm, ctx, q.ctx.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    std::byte* wq = ifc::at<ifc::sqc::wq>(ctx);
    ifc::set<ifc::wq::hw_counter>(wq, q.consumer);
    ifc::set<ifc::wq::sw_counter>(wq, q.posted);
    const std::size_t pas_at = Out::size_bytes;
    const std::size_t room = c.out.size() > pas_at ? (c.out.size() - pas_at) / 8 : 0;
    for (std::size_t i = 0; i < q.pas.size() && i < room; ++i) {
        const std::uint64_t raw = hw::to_be(q.pas[i]);
        std::memcpy(c.out.data() + pas_at + 8 * i, &raw, 8);
    }
    return ok();
}

}  // namespace

cmd_reply eth_commands::query_sq(cmd_ctx& c) {
    const auto it = eth_.sqs.find(ifc::get<ifc::query_sq_in::sqn>(c.in.data()));
    if (it == eth_.sqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    return query_wq<ifc::query_sq_out>(icm_, it->second, c, ifc::at<ifc::query_sq_out::sq_context>(c.out.data()));
}

cmd_reply eth_commands::query_rq(cmd_ctx& c) {
    const auto it = eth_.rqs.find(ifc::get<ifc::query_rq_in::rqn>(c.in.data()));
    if (it == eth_.rqs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    return query_wq<ifc::query_rq_out>(icm_, it->second, c, ifc::at<ifc::query_rq_out::rq_context>(c.out.data()));
}

// --- RQT -------------------------------------------------------------------------------

cmd_reply eth_commands::check_rq_list(const cmd_ctx& c, const std::byte* rqtc, std::uint32_t size, std::uint32_t uid,
                                      std::vector<std::uint32_t>* rqns) const {
    const std::size_t list_at = static_cast<std::size_t>(rqtc - c.in.data()) + ifc::rqtc::size_bytes;
    if (c.in.size() < list_at + std::size_t{size} * 4) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    rqns->clear();
    for (std::uint32_t i = 0; i < size; ++i) {
        const std::uint32_t rqn = ifc::get<ifc::rqtc::rq_num>(rqtc, i) & kMask24;
        if (auto r = check_ref(eth_.rqs, rqn, uid, cmd_syndrome::BAD_PARAMETER); failed(r)) return r;
        rqns->push_back(rqn);
    }
    return ok();
}

namespace {

// Each RQ an RQT names once is held once.
void hold_rqs(std::map<std::uint32_t, wq_object>& rqs, const std::vector<std::uint32_t>& rqns, bool hold) {
    for (const std::uint32_t n : std::set<std::uint32_t>(rqns.begin(), rqns.end())) {
        if (hold) {
            add_user(rqs, n);
        } else {
            drop_user(rqs, n);
        }
    }
}

}  // namespace

cmd_reply eth_commands::create_rqt(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::uint32_t uid = ifc::get<ifc::create_rqt_in::uid>(in);
    const std::byte* rqtc = ifc::at<ifc::create_rqt_in::rqt_context>(in);
    if (auto r = at_limit(eth_.rqts, ifc::get<cap::log_max_rqt>(caps_.current())); failed(r)) return r;
    const std::uint32_t max = ifc::get<ifc::rqtc::rqt_max_size>(rqtc);
    const std::uint32_t size = ifc::get<ifc::rqtc::rqt_actual_size>(rqtc);
    if (ifc::get<ifc::rqtc::list_q_type>(rqtc) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (max == 0 || max > (1u << ifc::get<cap::log_max_rqt_size>(caps_.current())) || size > max) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    rqt_object t;
    if (auto r = check_rq_list(c, rqtc, size, uid, &t.rqns); failed(r)) return r;
    const std::uint32_t rqtn = take_number(eth_.rqts, next_rqtn_);
    if (rqtn == 0) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (auto r = store(icm_, rqtc, ifc::rqtc::size_bytes, &t.icm); failed(r)) return r;
    t.rqtn = rqtn;
    t.uid = uid;
    t.max_size = max;
    hold_rqs(eth_.rqs, t.rqns, true);
    eth_.rqts.emplace(rqtn, std::move(t));
    ifc::set<ifc::create_rqt_out::rqtn>(c.out.data(), rqtn);
    return ok();
}

cmd_reply eth_commands::modify_rqt(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = eth_.rqts.find(ifc::get<ifc::modify_rqt_in::rqtn>(in));
    if (it == eth_.rqts.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    rqt_object& t = it->second;
    const std::uint32_t uid = ifc::get<ifc::modify_rqt_in::uid>(in);
    if (t.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    if (ifc::get<ifc::rqt_bitmask::rqn_list>(ifc::at<ifc::modify_rqt_in::bitmask>(in)) == 0) return ok();
    const std::byte* rqtc = ifc::at<ifc::modify_rqt_in::ctx>(in);
    const std::uint32_t size = ifc::get<ifc::rqtc::rqt_actual_size>(rqtc);
    if (size > t.max_size) return bad_param(cmd_syndrome::BAD_PARAMETER);
    std::vector<std::uint32_t> rqns;
    if (auto r = check_rq_list(c, rqtc, size, uid, &rqns); failed(r)) return r;
    hold_rqs(eth_.rqs, t.rqns, false);
    t.rqns = std::move(rqns);
    hold_rqs(eth_.rqs, t.rqns, true);
    return ok();
}

// TIRs that spread over it hold it.
cmd_reply eth_commands::destroy_rqt(cmd_ctx& c) {
    const auto it = eth_.rqts.find(ifc::get<ifc::destroy_rqt_in::rqtn>(c.in.data()));
    if (it == eth_.rqts.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::destroy_rqt_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    if (it->second.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    hold_rqs(eth_.rqs, it->second.rqns, false);
    icm_.free(it->second.icm);
    eth_.rqts.erase(it);
    return ok();
}

// --- TIR -------------------------------------------------------------------------------

cmd_reply eth_commands::check_tir(const std::byte* tirc, std::uint32_t uid, bool dispatch, bool hash) const {
    using t = ifc::tirc;
    if (dispatch) {
        // LRO (packet merging) and tunnel offloads: the offload capabilities announce none.
        if (ifc::get<t::packet_merge_mask>(tirc) != 0 || ifc::get<t::tunneled_offload_en>(tirc) != 0) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        const auto disp = static_cast<ifc::tir_disp_type>(ifc::get<t::disp_type>(tirc));
        if (disp == ifc::tir_disp_type::DIRECT) {
            return check_ref(eth_.rqs, ifc::get<t::inline_rqn>(tirc), uid, cmd_syndrome::BAD_PARAMETER);
        }
        if (disp != ifc::tir_disp_type::INDIRECT) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (auto r = check_ref(eth_.rqts, ifc::get<t::indirect_table>(tirc), uid, cmd_syndrome::BAD_PARAMETER);
            failed(r)) {
            return r;
        }
        hash = true;
    }
    if (hash && ifc::get<t::rx_hash_fn>(tirc) > static_cast<std::uint32_t>(ifc::rx_hash_fn::TOEPLITZ)) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    return ok();
}

cmd_reply eth_commands::create_tir(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::uint32_t uid = ifc::get<ifc::create_tir_in::uid>(in);
    const std::byte* tirc = ifc::at<ifc::create_tir_in::ctx>(in);
    if (auto r = at_limit(eth_.tirs, ifc::get<cap::log_max_tir>(caps_.current())); failed(r)) return r;
    const std::uint32_t td = ifc::get<ifc::tirc::transport_domain>(tirc);
    if (auto r = check_ref(eth_.transport_domains, td, uid, cmd_syndrome::BAD_PARAMETER); failed(r)) return r;
    if (auto r = check_tir(tirc, uid, true, false); failed(r)) return r;
    const std::uint32_t tirn = take_number(eth_.tirs, next_tirn_);
    if (tirn == 0) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    tir_object t;
    std::copy_n(tirc, t.tirc.size(), t.tirc.begin());
    if (auto r = store(icm_, t.tirc.data(), t.tirc.size(), &t.icm); failed(r)) return r;
    t.tirn = tirn;
    t.uid = uid;
    t.td = td;
    if (static_cast<ifc::tir_disp_type>(ifc::get<ifc::tirc::disp_type>(tirc)) == ifc::tir_disp_type::DIRECT) {
        t.inline_rqn = ifc::get<ifc::tirc::inline_rqn>(tirc);
        add_user(eth_.rqs, t.inline_rqn);
    } else {
        t.rqtn = ifc::get<ifc::tirc::indirect_table>(tirc);
        add_user(eth_.rqts, t.rqtn);
    }
    add_user(eth_.transport_domains, td);
    eth_.tirs.emplace(tirn, std::move(t));
    ifc::set<ifc::create_tir_out::tirn>(c.out.data(), tirn);
    return ok();
}

// MODIFY_TIR: what the bitmask names changes (the hash function, key and fields; the
// loopback block); packet merging is not modelled.
cmd_reply eth_commands::modify_tir(cmd_ctx& c) {
    using t = ifc::tirc;
    const std::byte* in = c.in.data();
    const auto it = eth_.tirs.find(ifc::get<ifc::modify_tir_in::tirn>(in));
    if (it == eth_.tirs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    tir_object& tir = it->second;
    const std::uint32_t uid = ifc::get<ifc::modify_tir_in::uid>(in);
    if (tir.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    const std::byte* mask = ifc::at<ifc::modify_tir_in::bitmask>(in);
    const std::byte* ctx = ifc::at<ifc::modify_tir_in::ctx>(in);
    if (ifc::get<ifc::modify_tir_bitmask::packet_merge>(mask) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const bool hash = ifc::get<ifc::modify_tir_bitmask::hash>(mask) != 0;
    if (auto r = check_tir(ctx, uid, false, hash); failed(r)) return r;
    std::byte* cur = tir.tirc.data();
    if (hash) {
        ifc::set<t::rx_hash_fn>(cur, ifc::get<t::rx_hash_fn>(ctx));
        ifc::set<t::rx_hash_symmetric>(cur, ifc::get<t::rx_hash_symmetric>(ctx));
        for (std::size_t i = 0; i < t::rx_hash_toeplitz_key::count; ++i) {
            ifc::set<t::rx_hash_toeplitz_key>(cur, i, ifc::get<t::rx_hash_toeplitz_key>(ctx, i));
        }
        std::memcpy(ifc::at<t::rx_hash_field_selector_outer>(cur), ifc::at<t::rx_hash_field_selector_outer>(ctx),
                    ifc::rx_hash_field_select::size_bytes);
        std::memcpy(ifc::at<t::rx_hash_field_selector_inner>(cur), ifc::at<t::rx_hash_field_selector_inner>(ctx),
                    ifc::rx_hash_field_select::size_bytes);
    }
    if (ifc::get<ifc::modify_tir_bitmask::self_lb_en>(mask) != 0) {
        ifc::set<t::self_lb_block>(cur, ifc::get<t::self_lb_block>(ctx));
    }
    if (!icm_.write(tir.icm, tir.tirc.data(), tir.tirc.size())) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    return ok();
}

// Flow table entries that forward to it hold it.
cmd_reply eth_commands::destroy_tir(cmd_ctx& c) {
    const auto it = eth_.tirs.find(ifc::get<ifc::destroy_tir_in::tirn>(c.in.data()));
    if (it == eth_.tirs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const tir_object& t = it->second;
    if (t.uid != ifc::get<ifc::destroy_tir_in::uid>(c.in.data())) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    if (t.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    if (t.inline_rqn != 0) drop_user(eth_.rqs, t.inline_rqn);
    if (t.rqtn != 0) drop_user(eth_.rqts, t.rqtn);
    drop_user(eth_.transport_domains, t.td);
    icm_.free(t.icm);
    eth_.tirs.erase(it);
    return ok();
}

cmd_reply eth_commands::query_tir(cmd_ctx& c) {
    const auto it = eth_.tirs.find(ifc::get<ifc::query_tir_in::tirn>(c.in.data()));
    if (it == eth_.tirs.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (!icm_.read(it->second.icm, ifc::at<ifc::query_tir_out::tir_context>(c.out.data()), ifc::tirc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    return ok();
}

void eth_commands::release_all() {
    for (auto* m : {&eth_.sqs, &eth_.rqs}) {
        for (auto& [n, o] : *m) icm_.free(o.icm);
        m->clear();
    }
    for (auto& [n, o] : eth_.tises) icm_.free(o.icm);
    for (auto& [n, o] : eth_.rqts) icm_.free(o.icm);
    for (auto& [n, o] : eth_.tirs) icm_.free(o.icm);
    eth_.tises.clear();
    eth_.rqts.clear();
    eth_.tirs.clear();
    eth_.transport_domains.clear();
    next_td_ = next_tisn_ = next_rqtn_ = next_tirn_ = 1;
    next_wqn_ = 0x100;
}

}  // namespace cxv::sim
