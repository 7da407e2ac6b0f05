#include "driver/res/eth.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/endian.h"
#include "hw/ifc.h"
#include "hw/wqe.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

namespace wv = ifc::wq_values;

// MLX5_MPWQE_LOG_NUM_STRIDES_BASE, MLX5_MPWQE_LOG_STRIDE_SZ_BASE: the wq's striding
// fields count from these.
constexpr unsigned kLogNumStridesBase = 9, kLogStrideSizeBase = 6;
constexpr unsigned kLogNumStridesMax = 16, kLogStrideSizeMax = 13;
// A receive WQE's scatter entry (PRM "Receive WQE"): 16 bytes; a striding RQ's WQE is
// one (PRM "Multi-Packet WQE": the next segment's 16 bytes, then it).
constexpr std::size_t kDataSeg = sizeof(hw::wqe_data_seg);

// The page list after a CREATE_SQ's or CREATE_RQ's context (the wq's pas), big-endian.
void put_pas(std::vector<std::byte>& in, std::size_t at, const queue_memory& mem) {
    for (std::size_t i = 0; i < mem.pages(); ++i) {
        const std::uint64_t be = hw::to_be(mem.page_iova(i));
        std::memcpy(in.data() + at + 8 * i, &be, 8);
    }
}

unsigned log2_ceil(unsigned n) { return static_cast<unsigned>(std::bit_width(std::bit_ceil(std::max(n, 1u))) - 1); }

status check_same_hca(const hca& a, const hca& b, const char* what) {
    if (&a != &b) return error{EINVAL, fmt::format("{}: objects of two different HCAs", what)};
    return ok_status();
}

}  // namespace

// --- transport domain ------------------------------------------------------------------

result<std::shared_ptr<transport_domain>> transport_domain::create(hca& h) {
    std::shared_ptr<transport_domain> t(new transport_domain(h));
    auto r = h.exec(command<ifc::alloc_transport_domain_in>(cmd_opcode::ALLOC_TRANSPORT_DOMAIN),
                    ifc::alloc_transport_domain_out::size_bytes);
    if (!r) return r.error();
    t->tdn_ = ifc::get<ifc::alloc_transport_domain_out::transport_domain>(r->data());
    t->created();
    return t;
}

status transport_domain::destroy() {
    auto in = command<ifc::dealloc_transport_domain_in>(cmd_opcode::DEALLOC_TRANSPORT_DOMAIN);
    ifc::set<ifc::dealloc_transport_domain_in::transport_domain>(in.data(), tdn_);
    return destroy_with(std::move(in));
}

transport_domain::~transport_domain() { (void)destroy(); }

// --- TIS -------------------------------------------------------------------------------

result<std::shared_ptr<tis>> tis::create(std::shared_ptr<transport_domain> td, unsigned prio) {
    if (!td) return error{EINVAL, "tis::create: no transport domain"};
    if (prio > 15) return error{EINVAL, fmt::format("tis::create: priority {} (0 to 15)", prio)};
    hca& h = td->device();
    std::shared_ptr<tis> t(new tis(std::move(td)));
    auto in = command<ifc::create_tis_in>(cmd_opcode::CREATE_TIS);
    std::byte* ctx = ifc::at<ifc::create_tis_in::ctx>(in.data());
    ifc::set<ifc::tisc::prio>(ctx, prio);
    ifc::set<ifc::tisc::transport_domain>(ctx, t->td_->tdn());
    auto r = h.exec(in, ifc::create_tis_out::size_bytes);
    if (!r) return r.error();
    t->tisn_ = ifc::get<ifc::create_tis_out::tisn>(r->data());
    t->created();
    return t;
}

status tis::destroy() {
    auto in = command<ifc::destroy_tis_in>(cmd_opcode::DESTROY_TIS);
    ifc::set<ifc::destroy_tis_in::tisn>(in.data(), tisn_);
    return destroy_with(std::move(in));
}

tis::~tis() { (void)destroy(); }

// --- SQ --------------------------------------------------------------------------------

result<std::shared_ptr<sq>> sq::create(const attr& a) {
    if (!a.domain || !a.send_cq || !a.transport) return error{EINVAL, "sq::create: a PD, a CQ and a TIS are needed"};
    hca& h = a.domain->device();
    if (auto s = check_same_hca(h, a.send_cq->device(), "sq::create"); !s) return s.error();
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_wq_sz>(h.caps().data());
    if (a.wqebbs == 0 || a.wqebbs > (1u << log_max)) {
        return error{EINVAL, fmt::format("sq::create: {} WQE basic blocks (the device allows 1 to {})", a.wqebbs,
                                         1u << log_max)};
    }
    std::shared_ptr<sq> q(new sq(h));
    q->pd_ = a.domain;
    q->cq_ = a.send_cq;
    q->tis_ = a.transport;
    q->log_size_ = log2_ceil(a.wqebbs);
    auto mem = queue_memory::alloc(h.device(), std::size_t{hw::send_wqe_bb} << q->log_size_);
    if (!mem) return mem.error();
    q->mem_ = std::move(mem).value();
    auto bf = h.alloc_bf();
    if (!bf) return bf.error();
    q->bf_ = bf.value();
    q->bf_held_ = true;

    auto in = command<ifc::create_sq_in>(cmd_opcode::CREATE_SQ, 0, q->mem_.pages() * 8);
    std::byte* ctx = ifc::at<ifc::create_sq_in::ctx>(in.data());
    ifc::set<ifc::sqc::flush_in_error_en>(ctx, 1);
    ifc::set<ifc::sqc::cqn>(ctx, a.send_cq->cqn());
    ifc::set<ifc::sqc::user_index>(ctx, a.user_index & 0xffffff);
    ifc::set<ifc::sqc::tis_lst_sz>(ctx, 1);
    ifc::set<ifc::sqc::tis_num_0>(ctx, a.transport->tisn());
    std::byte* wq = ifc::at<ifc::sqc::wq>(ctx);
    ifc::set<ifc::wq::wq_type>(wq, wv::type_cyclic);
    ifc::set<ifc::wq::pd>(wq, a.domain->pdn());
    ifc::set<ifc::wq::uar_page>(wq, q->bf_.uar);
    ifc::set<ifc::wq::dbr_addr>(wq, q->mem_.doorbell_record_iova());
    ifc::set<ifc::wq::log_wq_stride>(wq, std::countr_zero(hw::send_wqe_bb));
    ifc::set<ifc::wq::log_wq_pg_sz>(wq, q->mem_.log_page_size());
    ifc::set<ifc::wq::log_wq_sz>(wq, q->log_size_);
    put_pas(in, ifc::create_sq_in::size_bytes, q->mem_);
    auto r = h.exec(in, ifc::create_sq_out::size_bytes);
    if (!r) return r.error();
    q->sqn_ = ifc::get<ifc::create_sq_out::sqn>(r->data());
    q->created();
    q->pd_->hold();
    return q;
}

status sq::destroy() {
    const bool was_live = !destroyed_;
    auto in = command<ifc::destroy_sq_in>(cmd_opcode::DESTROY_SQ);
    ifc::set<ifc::destroy_sq_in::sqn>(in.data(), sqn_);
    auto s = destroy_with(std::move(in));
    if (!s) return s;
    if (was_live) pd_->release();
    if (bf_held_) with_live_owner([&](hca& h) { h.free_bf(bf_); });
    bf_held_ = false;
    return s;
}

sq::~sq() { (void)destroy(); }

std::byte* sq::bf_register(bool write_combining) const noexcept { return owner().bf_address(bf_, write_combining); }

status sq::modify(wq_state to) {
    auto in = command<ifc::modify_sq_in>(cmd_opcode::MODIFY_SQ);
    ifc::set<ifc::modify_sq_in::sqn>(in.data(), sqn_);
    ifc::set<ifc::modify_sq_in::sq_state>(in.data(), static_cast<std::uint32_t>(state_));
    ifc::set<ifc::sqc::state>(ifc::at<ifc::modify_sq_in::ctx>(in.data()), static_cast<std::uint32_t>(to));
    auto r = owner().exec(in, ifc::modify_sq_out::size_bytes);
    if (!r) return r.error();
    state_ = to;
    return ok_status();
}

result<wq_state> sq::query() {
    auto in = command<ifc::query_sq_in>(cmd_opcode::QUERY_SQ);
    ifc::set<ifc::query_sq_in::sqn>(in.data(), sqn_);
    auto r = owner().exec(in, ifc::query_sq_out::size_bytes);
    if (!r) return r.error();
    // (what the device moved it to on its own, ERR after a failed WQE, is the state the
    // next MODIFY_SQ names as the current one)
    state_ = static_cast<wq_state>(ifc::get<ifc::sqc::state>(ifc::at<ifc::query_sq_out::sq_context>(r->data())));
    return state_;
}

// --- RQ --------------------------------------------------------------------------------

result<std::shared_ptr<rq>> rq::create(const attr& a) {
    if (!a.domain || !a.recv_cq) return error{EINVAL, "rq::create: a PD and a CQ are needed"};
    hca& h = a.domain->device();
    if (auto s = check_same_hca(h, a.recv_cq->device(), "rq::create"); !s) return s.error();
    const std::byte* caps = h.caps().data();
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_wq_sz>(caps);
    if (a.wqes == 0 || a.wqes > (1u << log_max)) {
        return error{EINVAL, fmt::format("rq::create: {} WQEs (the device allows 1 to {})", a.wqes, 1u << log_max)};
    }
    std::shared_ptr<rq> q(new rq(h));
    q->pd_ = a.domain;
    q->cq_ = a.recv_cq;
    q->counter_ = a.counter;
    q->log_size_ = log2_ceil(a.wqes);
    q->multi_packet_ = a.multi_packet;
    if (a.multi_packet) {
        if (!ifc::get<ifc::cmd_hca_cap::striding_rq>(caps)) return error{ENOTSUP, "rq::create: no striding RQs on this device"};
        const auto& s = a.strides;
        if (s.log_num_strides < kLogNumStridesBase || s.log_num_strides > kLogNumStridesMax ||
            s.log_stride_size < kLogStrideSizeBase || s.log_stride_size > kLogStrideSizeMax) {
            return error{EINVAL, fmt::format("rq::create: 2^{} strides of 2^{} bytes (2^9 to 2^16 strides of 2^6 to "
                                             "2^13 bytes)", s.log_num_strides, s.log_stride_size)};
        }
        q->wqe_shift_ = std::countr_zero(2 * kDataSeg);  // the next segment, one scatter entry
    } else {
        const std::size_t stride = std::bit_ceil(std::size_t{std::max(a.max_sge, 1u)} * kDataSeg);
        if (stride > ifc::get<ifc::cmd_hca_cap::max_wqe_sz_rq>(caps)) {
            return error{EINVAL, fmt::format("rq::create: {} scatter entries (the device's WQEs hold at most {})",
                                             a.max_sge, ifc::get<ifc::cmd_hca_cap::max_wqe_sz_rq>(caps) / kDataSeg)};
        }
        q->wqe_shift_ = static_cast<unsigned>(std::countr_zero(stride));
    }
    auto mem = queue_memory::alloc(h.device(), std::size_t{1} << (q->log_size_ + q->wqe_shift_));
    if (!mem) return mem.error();
    q->mem_ = std::move(mem).value();

    auto in = command<ifc::create_rq_in>(cmd_opcode::CREATE_RQ, 0, q->mem_.pages() * 8);
    std::byte* ctx = ifc::at<ifc::create_rq_in::ctx>(in.data());
    ifc::set<ifc::rqc::vsd>(ctx, a.strip_vlan ? 0 : 1);
    ifc::set<ifc::rqc::scatter_fcs>(ctx, a.keep_fcs ? 1 : 0);
    ifc::set<ifc::rqc::mem_rq_type>(ctx, ifc::rqc_values::mem_rq_type_inline);
    ifc::set<ifc::rqc::flush_in_error_en>(ctx, 1);
    ifc::set<ifc::rqc::cqn>(ctx, a.recv_cq->cqn());
    ifc::set<ifc::rqc::user_index>(ctx, a.user_index & 0xffffff);
    if (a.counter) ifc::set<ifc::rqc::counter_set_id>(ctx, a.counter->id());
    std::byte* wq = ifc::at<ifc::rqc::wq>(ctx);
    ifc::set<ifc::wq::wq_type>(wq, a.multi_packet ? wv::type_cyclic_striding : wv::type_cyclic);
    ifc::set<ifc::wq::pd>(wq, a.domain->pdn());
    if (a.shared_record && &a.shared_record->device() != &h) {
        return error{EINVAL, "rq::create: the doorbell record of another HCA's SQ"};
    }
    q->record_of_ = a.shared_record;
    ifc::set<ifc::wq::dbr_addr>(wq, a.shared_record ? a.shared_record->doorbell_record_iova()
                                                    : q->mem_.doorbell_record_iova());
    ifc::set<ifc::wq::log_wq_stride>(wq, q->wqe_shift_);
    ifc::set<ifc::wq::log_wq_pg_sz>(wq, q->mem_.log_page_size());
    ifc::set<ifc::wq::log_wq_sz>(wq, q->log_size_);
    if (a.multi_packet) {
        ifc::set<ifc::wq::log_wqe_num_of_strides>(wq, a.strides.log_num_strides - kLogNumStridesBase);
        ifc::set<ifc::wq::log_wqe_stride_size>(wq, a.strides.log_stride_size - kLogStrideSizeBase);
    }
    put_pas(in, ifc::create_rq_in::size_bytes, q->mem_);
    auto r = h.exec(in, ifc::create_rq_out::size_bytes);
    if (!r) return r.error();
    q->rqn_ = ifc::get<ifc::create_rq_out::rqn>(r->data());
    q->created();
    q->pd_->hold();
    return q;
}

status rq::destroy() {
    const bool was_live = !destroyed_;
    auto in = command<ifc::destroy_rq_in>(cmd_opcode::DESTROY_RQ);
    ifc::set<ifc::destroy_rq_in::rqn>(in.data(), rqn_);
    auto s = destroy_with(std::move(in));
    if (s && was_live) pd_->release();
    return s;
}

rq::~rq() { (void)destroy(); }

status rq::modify(wq_state to) {
    auto in = command<ifc::modify_rq_in>(cmd_opcode::MODIFY_RQ);
    ifc::set<ifc::modify_rq_in::rqn>(in.data(), rqn_);
    ifc::set<ifc::modify_rq_in::rq_state>(in.data(), static_cast<std::uint32_t>(state_));
    ifc::set<ifc::rqc::state>(ifc::at<ifc::modify_rq_in::ctx>(in.data()), static_cast<std::uint32_t>(to));
    auto r = owner().exec(in, ifc::modify_rq_out::size_bytes);
    if (!r) return r.error();
    state_ = to;
    return ok_status();
}

result<wq_state> rq::query() {
    auto in = command<ifc::query_rq_in>(cmd_opcode::QUERY_RQ);
    ifc::set<ifc::query_rq_in::rqn>(in.data(), rqn_);
    auto r = owner().exec(in, ifc::query_rq_out::size_bytes);
    if (!r) return r.error();
    // (what the device moved it to on its own, ERR after a failed WQE, is the state the
    // next MODIFY_RQ names as the current one)
    state_ = static_cast<wq_state>(ifc::get<ifc::rqc::state>(ifc::at<ifc::query_rq_out::rq_context>(r->data())));
    return state_;
}

// --- RQT -------------------------------------------------------------------------------

namespace {

// The RQ list after an RQT context (rq_num entries, the number in the low 24 bits).
void set_rq_list(std::byte* rqtc, std::span<const std::shared_ptr<rq>> rqs) {
    ifc::set<ifc::rqtc::rqt_actual_size>(rqtc, static_cast<std::uint32_t>(rqs.size()));
    for (std::size_t i = 0; i < rqs.size(); ++i) ifc::set<ifc::rqtc::rq_num>(rqtc, i, rqs[i]->rqn());
}

status check_rqs(std::span<const std::shared_ptr<rq>> rqs, const char* what) {
    if (rqs.empty()) return error{EINVAL, fmt::format("{}: no RQs", what)};
    for (const auto& r : rqs) {
        if (!r) return error{EINVAL, fmt::format("{}: a null RQ", what)};
        if (auto s = check_same_hca(r->device(), rqs[0]->device(), what); !s) return s;
    }
    return ok_status();
}

}  // namespace

result<std::shared_ptr<rqt>> rqt::create(std::span<const std::shared_ptr<rq>> rqs, unsigned max_size) {
    if (auto s = check_rqs(rqs, "rqt::create"); !s) return s.error();
    hca& h = rqs[0]->device();
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_rqt_size>(h.caps().data());
    if (max_size == 0) max_size = static_cast<unsigned>(rqs.size());
    if (rqs.size() > max_size || max_size > (1u << log_max)) {
        return error{EINVAL, fmt::format("rqt::create: {} RQs in a table of {} (the device allows {})", rqs.size(),
                                         max_size, 1u << log_max)};
    }
    std::shared_ptr<rqt> t(new rqt(h));
    auto in = command<ifc::create_rqt_in>(cmd_opcode::CREATE_RQT, 0, std::size_t{max_size} * 4);
    std::byte* rqtc = ifc::at<ifc::create_rqt_in::rqt_context>(in.data());
    ifc::set<ifc::rqtc::rqt_max_size>(rqtc, max_size);
    set_rq_list(rqtc, rqs);
    auto r = h.exec(in, ifc::create_rqt_out::size_bytes);
    if (!r) return r.error();
    t->rqtn_ = ifc::get<ifc::create_rqt_out::rqtn>(r->data());
    t->max_size_ = max_size;
    t->rqs_.assign(rqs.begin(), rqs.end());
    t->created();
    return t;
}

status rqt::modify(std::span<const std::shared_ptr<rq>> rqs) {
    if (auto s = check_rqs(rqs, "rqt::modify"); !s) return s;
    if (rqs.size() > max_size_) {
        return error{EINVAL, fmt::format("rqt::modify: {} RQs in a table of {}", rqs.size(), max_size_)};
    }
    auto in = command<ifc::modify_rqt_in>(cmd_opcode::MODIFY_RQT, 0, rqs.size() * 4);
    ifc::set<ifc::modify_rqt_in::rqtn>(in.data(), rqtn_);
    ifc::set<ifc::rqt_bitmask::rqn_list>(ifc::at<ifc::modify_rqt_in::bitmask>(in.data()), 1);
    set_rq_list(ifc::at<ifc::modify_rqt_in::ctx>(in.data()), rqs);
    auto r = owner().exec(in, ifc::modify_rqt_out::size_bytes);
    if (!r) return r.error();
    rqs_.assign(rqs.begin(), rqs.end());
    return ok_status();
}

status rqt::destroy() {
    auto in = command<ifc::destroy_rqt_in>(cmd_opcode::DESTROY_RQT);
    ifc::set<ifc::destroy_rqt_in::rqtn>(in.data(), rqtn_);
    return destroy_with(std::move(in));
}

rqt::~rqt() { (void)destroy(); }

// --- TIR -------------------------------------------------------------------------------

namespace {

std::uint32_t lb_bits(tir::loopback lb) { return (lb.block_unicast ? 1u : 0u) | (lb.block_multicast ? 2u : 0u); }

void set_hash(std::byte* tirc, const rx_hash& h) {
    using t = ifc::tirc;
    ifc::set<t::rx_hash_fn>(tirc, static_cast<std::uint32_t>(h.toeplitz ? ifc::rx_hash_fn::TOEPLITZ
                                                                          : ifc::rx_hash_fn::INVERTED_XOR8));
    // The key in the PRM's order: its first byte is the most significant of word 0.
    for (std::size_t w = 0; w < t::rx_hash_toeplitz_key::count; ++w) {
        std::uint32_t v = 0;
        for (std::size_t b = 0; b < 4; ++b) v = (v << 8) | h.key[4 * w + b];
        ifc::set<t::rx_hash_toeplitz_key>(tirc, w, v);
    }
    std::byte* sel = ifc::at<t::rx_hash_field_selector_outer>(tirc);
    ifc::set<ifc::rx_hash_field_select::l3_prot_type>(sel, static_cast<std::uint32_t>(h.l3_type));
    std::uint32_t fields = h.selected;
    if (h.l4_type == rx_hash::l4::none) {
        fields &= ~(rx_hash::l4_sport | rx_hash::l4_dport);
    } else {
        ifc::set<ifc::rx_hash_field_select::l4_prot_type>(sel, h.l4_type == rx_hash::l4::udp ? 1 : 0);
    }
    ifc::set<ifc::rx_hash_field_select::selected_fields>(sel, fields);
}

}  // namespace

result<std::shared_ptr<tir>> tir::create(std::shared_ptr<transport_domain> td, std::shared_ptr<rq> to, loopback lb) {
    if (!to) return error{EINVAL, "tir::create: no RQ"};
    return make(std::move(td), std::move(to), nullptr, nullptr, lb);
}

result<std::shared_ptr<tir>> tir::create(std::shared_ptr<transport_domain> td, std::shared_ptr<rqt> table,
                                         const rx_hash& hash, loopback lb) {
    if (!table) return error{EINVAL, "tir::create: no RQ table"};
    return make(std::move(td), nullptr, std::move(table), &hash, lb);
}

result<std::shared_ptr<tir>> tir::make(std::shared_ptr<transport_domain> td, std::shared_ptr<rq> to,
                                       std::shared_ptr<rqt> table, const rx_hash* hash, loopback lb) {
    if (!td) return error{EINVAL, "tir::create: no transport domain"};
    hca& h = td->device();
    std::shared_ptr<tir> t(new tir(std::move(td)));
    auto in = command<ifc::create_tir_in>(cmd_opcode::CREATE_TIR);
    std::byte* tirc = ifc::at<ifc::create_tir_in::ctx>(in.data());
    ifc::set<ifc::tirc::transport_domain>(tirc, t->td_->tdn());
    ifc::set<ifc::tirc::self_lb_block>(tirc, lb_bits(lb));
    if (to) {
        if (auto s = check_same_hca(h, to->device(), "tir::create"); !s) return s.error();
        ifc::set<ifc::tirc::disp_type>(tirc, static_cast<std::uint32_t>(ifc::tir_disp_type::DIRECT));
        ifc::set<ifc::tirc::inline_rqn>(tirc, to->rqn());
    } else {
        ifc::set<ifc::tirc::disp_type>(tirc, static_cast<std::uint32_t>(ifc::tir_disp_type::INDIRECT));
        ifc::set<ifc::tirc::indirect_table>(tirc, table->rqtn());
        set_hash(tirc, *hash);
    }
    auto r = h.exec(in, ifc::create_tir_out::size_bytes);
    if (!r) return r.error();
    t->tirn_ = ifc::get<ifc::create_tir_out::tirn>(r->data());
    t->rq_ = std::move(to);
    t->rqt_ = std::move(table);
    t->created();
    return t;
}

status tir::set_loopback(loopback lb) {
    auto in = command<ifc::modify_tir_in>(cmd_opcode::MODIFY_TIR);
    ifc::set<ifc::modify_tir_in::tirn>(in.data(), tirn_);
    ifc::set<ifc::modify_tir_bitmask::self_lb_en>(ifc::at<ifc::modify_tir_in::bitmask>(in.data()), 1);
    ifc::set<ifc::tirc::self_lb_block>(ifc::at<ifc::modify_tir_in::ctx>(in.data()), lb_bits(lb));
    auto r = owner().exec(in, ifc::modify_tir_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

status tir::destroy() {
    auto in = command<ifc::destroy_tir_in>(cmd_opcode::DESTROY_TIR);
    ifc::set<ifc::destroy_tir_in::tirn>(in.data(), tirn_);
    return destroy_with(std::move(in));
}

tir::~tir() { (void)destroy(); }

}  // namespace cxv::driver
