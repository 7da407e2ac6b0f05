// Raw packet QPs (cxv::qp of type raw_packet, IBV_QPT_RAW_PACKET): an SQ and an RQ of the
// Ethernet transport (driver/res/eth.h) with the verbs' rings, as Linux's mlx5_ib makes
// one for rdma-core (create_raw_packet_qp, modify_raw_packet_qp).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>

#include <fmt/format.h>

#include "api/cxv.h"
#include "api/qp_rings.h"
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/eth.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/wqe.h"
#include "queues/eth_queue.h"

namespace cxv {

namespace {

namespace ifc = hw::ifc;

constexpr std::size_t kOctoword = 16;
// A send WQE's segments before its data: the control segment and the Ethernet segment
// with the frame's first 18 bytes inline (queues::eth_wqe).
constexpr std::size_t kRawHead =
    sizeof(hw::wqe_ctrl_seg) + queues::eth_wqe::eseg_head + queues::eth_wqe::inline_bytes(queues::eth_inline_header);
constexpr std::size_t kMaxWqe = 63 * kOctoword;  // ctrl qpn_ds's DS count is 6 bits

// The user index each raw packet QP's RQ carries to its CQEs (rqc.user_index, 24 bits):
// unique among the QPs of this process, where the poller looks it up.
std::uint32_t next_user_index() {
    static std::atomic<std::uint32_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) % 0xffffffu + 1;
}

}  // namespace

result<std::shared_ptr<qp>> qp::create_raw(device& d, const attr& a, doorbell_mode mode) {
    if (a.shared) return error{EINVAL, "cxv::qp::create: a raw packet QP takes no SRQ"};
    if (a.multi_producer || a.own_counters) {
        return error{EINVAL, "cxv::qp::create: a raw packet QP has no multi-producer ring or counters of its own"};
    }
    driver::hca& h = d.hca();
    const std::byte* hcaps = h.caps().data();
    const caps& c = a.cap;
    std::shared_ptr<qp> out(new qp());
    out->type_ = qp_type::raw_packet;
    out->pd_ = a.domain;
    out->raw_ = std::make_shared<raw_objects>();
    out->rings_ = std::make_shared<rings>();
    raw_objects& raw = *out->raw_;
    rings& rg = *out->rings_;
    auto td = driver::transport_domain::create(h);
    if (!td) return td.error();
    raw.td = std::move(td).value();

    // The send side: WQEs of the control and Ethernet segments, then the gather list or
    // the inline bytes past the first 18.
    if (c.max_send_wr != 0) {
        auto tis = driver::tis::create(raw.td);
        if (!tis) return tis.error();
        raw.tis = std::move(tis).value();
        const std::size_t data = std::max(std::size_t{std::max(c.max_send_sge, 1u)} * sizeof(hw::wqe_data_seg),
                                          c.max_inline_data == 0 ? 0
                                                                 : (sizeof(hw::wqe_inline_seg) + c.max_inline_data +
                                                                    kOctoword - 1) / kOctoword * kOctoword);
        const std::size_t max_sq = std::min<std::size_t>(kMaxWqe, ifc::get<ifc::cmd_hca_cap::max_wqe_sz_sq>(hcaps));
        if (kRawHead + data > max_sq) {
            return error{EINVAL, fmt::format("cxv::qp::create: a raw packet send WQE of {} bytes (max_send_sge {}, "
                                             "max_inline_data {}) is more than the {} the device takes",
                                             kRawHead + data, c.max_send_sge, c.max_inline_data, max_sq)};
        }
        const unsigned wqe_bbs = static_cast<unsigned>((kRawHead + data + hw::send_wqe_bb - 1) / hw::send_wqe_bb);
        driver::sq::attr sa;
        sa.domain = a.domain->object();
        sa.send_cq = a.send_cq->object();
        sa.transport = raw.tis;
        // As a QP's ring (driver/res/qp.cc): max_send_wr of the largest WQEs, and the NOPs
        // that may pad one to the ring's end.
        sa.wqebbs = std::bit_ceil(c.max_send_wr * wqe_bbs + wqe_bbs - 1);
        auto sq = driver::sq::create(sa);
        if (!sq) return sq.error();
        raw.sq = std::move(sq).value();
        driver::sq& o = *raw.sq;
        const unsigned bbs = o.wqebb_count();
        const std::size_t room = std::size_t{wqe_bbs} * hw::send_wqe_bb - kRawHead;
        raw.granted.max_send_wr = (bbs - (wqe_bbs - 1)) / wqe_bbs;
        raw.granted.max_send_sge = static_cast<unsigned>(room / sizeof(hw::wqe_data_seg));
        raw.granted.max_inline_data = static_cast<unsigned>(room - sizeof(hw::wqe_inline_seg));
        rg.sq_wr_ids.assign(bbs, 0);
        rg.sq_ends.assign(bbs, 0);
        rg.dbrecs[0] = o.doorbell_record();
        rg.sq = queues::send_queue(o.wqes(), static_cast<unsigned>(std::countr_zero(bbs)), o.sqn(), false,
                                   rg.sq_wr_ids.data(), rg.sq_ends.data(),
                                   reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record()),
                                   o.bf_register(mode != doorbell_mode::doorbell), o.bf().size / 2, mode, wqe_bbs);
        out->qpn_ = o.sqn();
        // The first 18 bytes of a frame sent inline go in the Ethernet segment, so the
        // limit the send path checks (the whole frame) is that much more.
        out->send_ = api::send_side{&rg.sq, raw.granted.max_send_sge,
                                    raw.granted.max_inline_data + queues::eth_inline_header, IBV_QPT_RAW_PACKET};
    }

    // The receive side: a cyclic RQ of scatter lists (each WQE takes one frame) and its
    // direct TIR.
    rg.user_index = next_user_index();
    if (c.max_recv_wr != 0) {
        driver::rq::attr ra;
        ra.domain = a.domain->object();
        ra.recv_cq = a.recv_cq->object();
        ra.wqes = c.max_recv_wr;
        ra.max_sge = std::max(c.max_recv_sge, 1u);
        ra.user_index = rg.user_index;
        ra.strip_vlan = a.strip_vlan;
        // One doorbell record for the QP, as mlx5_ib gives a raw packet QP (the RQ's
        // counter at 0, the SQ's at 4): what mlx5dv_init_obj hands a program as dbrec.
        ra.shared_record = raw.sq;
        auto rq = driver::rq::create(ra);
        if (!rq) return rq.error();
        raw.rq = std::move(rq).value();
        driver::rq& o = *raw.rq;
        const unsigned log_rq = static_cast<unsigned>(std::countr_zero(o.wqe_count()));
        raw.granted.max_recv_wr = o.wqe_count();
        raw.granted.max_recv_sge = (1u << o.wqe_shift()) / static_cast<unsigned>(sizeof(hw::wqe_data_seg));
        rg.rq_wr_ids.assign(o.wqe_count(), 0);
        rg.dbrecs[1] = o.doorbell_record();
        rg.rq = queues::recv_queue(o.wqes(), log_rq, o.wqe_shift(), rg.rq_wr_ids.data(),
                                   reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record()),
                                   raw.granted.max_recv_sge);
        auto tir = driver::tir::create(raw.td, raw.rq);
        if (!tir) return tir.error();
        raw.tir = std::move(tir).value();
        if (!raw.sq) out->qpn_ = o.rqn();
    } else {
        rg.rq = queues::recv_queue::srq_attached();  // every receive refused (EINVAL)
    }
    if (!raw.sq && !raw.rq) return error{EINVAL, "cxv::qp::create: a raw packet QP needs sends or receives"};
    if (!raw.sq) {
        rg.sq = queues::send_queue::none(out->qpn_);  // every send is ENOMEM
        out->send_ = api::send_side{&rg.sq, ~0u, ~0u, IBV_QPT_RAW_PACKET};
    }
    out->rq_ = &rg.rq;
    out->mode_ = mode;

    const bool one_cq = a.send_cq == a.recv_cq;
    queues::qp_rings send_entry{};
    send_entry.qpn = out->qpn_;
    send_entry.sq = raw.sq ? &rg.sq : nullptr;
    send_entry.raw_packet = true;
    send_entry.user_index = rg.user_index;
    queues::qp_rings recv_entry = send_entry;
    recv_entry.rq = raw.rq ? &rg.rq : nullptr;
    if (one_cq) send_entry.rq = recv_entry.rq;
    if (!one_cq) recv_entry.sq = nullptr;
    // (the CQs only now: a QP that failed before has nothing in their tables to detach)
    out->scq_ = a.send_cq;
    out->rcq_ = a.recv_cq;
    if (!a.send_cq->attach(send_entry) || !a.recv_cq->attach(recv_entry)) {
        a.send_cq->detach(out->qpn_, out->rings_);
        a.recv_cq->detach(out->qpn_, out->rings_);
        return error{ENOSPC, "cxv::qp::create: the CQ serves its maximum of QPs"};
    }
    return out;
}

// The verbs' transitions on the SQ and RQ (mlx5_ib's modify_raw_packet_qp): RST→INIT
// readies the RQ, RTR→RTS the SQ, INIT→INIT and INIT→RTR change nothing on the device;
// to ERR both go to ERR, to RST both to RST (PRM "SQ State Machine", "RQ State Machine").
status qp::modify_raw(qp_state to) {
    raw_objects& r = *raw_;
    if (!r.sq && !r.rq) return error{ENOSYS, "cxv::qp::modify: an RSS QP has no state to change"};
    using driver::wq_state;
    const qp_state from = r.state;
    auto set_rq = [&](wq_state s) -> status {
        if (!r.rq || r.rq->state() == s) return ok_status();
        return r.rq->modify(s);
    };
    auto set_sq = [&](wq_state s) -> status {
        if (!r.sq || r.sq->state() == s) return ok_status();
        return r.sq->modify(s);
    };
    // The SQ may have gone to ERR on its own (a failed send): its state as the device has
    // it, which MODIFY_SQ names as the current one.
    if (r.sq && r.sq->state() == wq_state::ready && (to == qp_state::reset || to == qp_state::error)) {
        if (auto q = r.sq->query(); !q) return q.error();
    }
    status s = ok_status();
    if (to == qp_state::reset) {
        s = set_sq(wq_state::reset);
        if (s) s = set_rq(wq_state::reset);
        if (s) reset_rings();
    } else if (to == qp_state::error) {
        // (a queue still in RST has no move to ERR: it stays)
        if (r.sq && r.sq->state() != wq_state::reset) s = set_sq(wq_state::error);
        if (s && r.rq && r.rq->state() != wq_state::reset) s = set_rq(wq_state::error);
    } else if (from == qp_state::reset && to == qp_state::init) {
        s = set_rq(wq_state::ready);
    } else if (from == qp_state::init && (to == qp_state::init || to == qp_state::rtr)) {
    } else if ((from == qp_state::rtr || from == qp_state::rts) && to == qp_state::rts) {
        s = set_sq(wq_state::ready);
    } else {
        return error{EINVAL, fmt::format("cxv::qp::modify: a raw packet QP has no move from {} to {}",
                                         driver::name(from), driver::name(to))};
    }
    if (s) r.state = to;
    return s;
}

result<qp_state> qp::raw_state() const {
    // An SQ that a failed send moved to ERR (PRM "SQ State Machine") shows as the verbs'
    // SQE state, as a QP's would.
    if (raw_->state == qp_state::rts && raw_->sq) {
        auto st = raw_->sq->query();
        if (!st) return st.error();
        if (*st == driver::wq_state::error) return qp_state::sqerr;
    }
    return raw_->state;
}

qp::caps qp::capabilities() const noexcept { return raw_ ? raw_->granted : qp_->capabilities(); }

std::shared_ptr<driver::tir> qp::raw_tir() const noexcept { return raw_ ? raw_->tir : nullptr; }
std::shared_ptr<driver::rq> qp::raw_rq() const noexcept { return raw_ ? raw_->rq : nullptr; }
std::shared_ptr<driver::sq> qp::raw_sq() const noexcept { return raw_ ? raw_->sq : nullptr; }
std::shared_ptr<driver::tis> qp::raw_tis() const noexcept { return raw_ ? raw_->tis : nullptr; }

result<std::shared_ptr<qp>> qp::create_rss(device& d, std::shared_ptr<driver::rqt> table, const driver::rx_hash& hash) {
    if (!table) return error{EINVAL, "cxv::qp::create_rss: no RQ table"};
    std::shared_ptr<qp> out(new qp());
    out->type_ = qp_type::raw_packet;
    out->raw_ = std::make_shared<raw_objects>();
    out->rings_ = std::make_shared<rings>();
    raw_objects& raw = *out->raw_;
    auto td = driver::transport_domain::create(d.hca());
    if (!td) return td.error();
    raw.td = std::move(td).value();
    auto tir = driver::tir::create(raw.td, std::move(table), hash);
    if (!tir) return tir.error();
    raw.tir = std::move(tir).value();
    out->qpn_ = raw.tir->tirn();
    out->rings_->sq = queues::send_queue::none(out->qpn_);  // every send is ENOMEM
    out->rings_->rq = queues::recv_queue::srq_attached();   // every receive EINVAL
    out->send_ = api::send_side{&out->rings_->sq, ~0u, ~0u, IBV_QPT_RAW_PACKET};
    out->rq_ = &out->rings_->rq;
    return out;
}

status qp::destroy() {
    if (multicast_groups() != 0) {
        return error{EBUSY, fmt::format("cxv::qp::destroy: QP 0x{:x} is still attached to {} multicast groups", qpn_,
                                        multicast_groups())};
    }
    if (!raw_) return qp_->destroy();
    raw_objects& r = *raw_;
    if (r.tir) {
        if (auto s = r.tir->destroy(); !s) return s;
    }
    if (r.rq) {
        if (auto s = r.rq->destroy(); !s) return s;
    }
    if (r.sq) {
        if (auto s = r.sq->destroy(); !s) return s;
    }
    if (r.tis) {
        if (auto s = r.tis->destroy(); !s) return s;
    }
    return r.td->destroy();
}

}  // namespace cxv
