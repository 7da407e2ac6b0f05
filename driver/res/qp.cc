#include "driver/res/qp.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "driver/vfio/vfio.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "hw/ifc.h"
#include "hw/mac.h"
#include "hw/wqe.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
namespace qv = hw::ifc::qpc_values;
namespace opt = hw::ifc::qp_optpar;
using hw::cmd_opcode;
using qpc = hw::ifc::qpc;
using ads = hw::ifc::ads;

namespace {

constexpr std::uint32_t kAtomic8B = 3;  // qpc.atomic_mode: 8-byte atomics (verbs' size)
// qpc.log_ack_req_freq: the requester asks for an ACK once in 2^8 packets of a long message,
// not on every packet (0). Linux's mlx5_ib sets 8 on every QP (MLX5_IB_ACK_REQ_FREQ), so
// that is what the QPs of rdma-core programs get on a card; the differential check against
// Linux found cxv's 0 (docs/linux-oracle.md).
constexpr std::uint32_t kLogAckReqFreq = 8;

// Send WQE segments before the data, per transport (PRM "Send WQE Format"): control,
// then remote address and atomic (RC), remote address (UC), or the address vector (UD).
std::size_t send_overhead(qp_type t) {
    const std::size_t ctrl = sizeof(hw::wqe_ctrl_seg);
    switch (t) {
    case qp_type::rc: return ctrl + sizeof(hw::wqe_raddr_seg) + sizeof(hw::wqe_atomic_seg);
    case qp_type::uc: return ctrl + sizeof(hw::wqe_raddr_seg);
    case qp_type::ud: return ctrl + sizeof(hw::wqe_datagram_seg);
    case qp_type::raw_packet: break;
    }
    return ctrl;
}

std::uint32_t st_of(qp_type t) {
    return t == qp_type::rc ? qv::st_rc : t == qp_type::uc ? qv::st_uc : qv::st_ud;
}

unsigned log2_ceil(unsigned v) { return v <= 1 ? 0 : static_cast<unsigned>(std::bit_width(v - 1)); }

}  // namespace

const char* name(qp_type t) noexcept {
    switch (t) {
    case qp_type::rc: return "RC";
    case qp_type::uc: return "UC";
    case qp_type::ud: return "UD";
    case qp_type::raw_packet: return "RAW_PACKET";
    }
    return "?";
}

const char* name(qp_state s) noexcept {
    static constexpr const char* names[] = {"RST", "INIT", "RTR", "RTS", "SQERR", "SQD", "ERR"};
    return names[static_cast<unsigned>(s)];
}

result<std::shared_ptr<qp>> qp::create(const attr& a) {
    if (!a.domain || !a.send_cq || !a.recv_cq) return error{EINVAL, "qp::create: a PD and both CQs are required"};
    if (a.type == qp_type::raw_packet) {
        return error{EINVAL, "qp::create: a raw packet QP is an SQ and an RQ (driver/res/eth.h), not a QP object"};
    }
    hca& h = a.domain->device();
    if (&a.send_cq->device() != &h || &a.recv_cq->device() != &h || (a.shared && &a.shared->device() != &h)) {
        return error{EINVAL, "qp::create: the PD, CQs and SRQ belong to different HCAs"};
    }
    const std::byte* hcaps = h.caps().data();
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_qp_sz>(hcaps);
    const std::size_t max_sq_wqe = ifc::get<ifc::cmd_hca_cap::max_wqe_sz_sq>(hcaps);
    const std::size_t max_rq_wqe = ifc::get<ifc::cmd_hca_cap::max_wqe_sz_rq>(hcaps);
    const qp::caps& c = a.cap;

    // Send queue: the largest WQE this QP may post, in 64-byte basic blocks. None at all
    // for max_send_wr 0 (a receive-only QP, qpc.no_sq), as rdma-core's mlx5 provider and
    // mlx5_ib make it.
    const bool has_sq = c.max_send_wr > 0;
    const std::size_t overhead = send_overhead(a.type);
    const std::size_t data = std::max(std::size_t{c.max_send_sge} * sizeof(hw::wqe_data_seg),
                                      c.max_inline_data ? (sizeof(hw::wqe_inline_seg) + c.max_inline_data + 15) / 16 * 16 : 0);
    const std::size_t wqe = overhead + data;
    if (has_sq && wqe > max_sq_wqe) {
        return error{EINVAL, fmt::format("qp::create: a send WQE of {} SGEs / {} inline bytes needs {} bytes; "
                                         "the device allows {}", c.max_send_sge, c.max_inline_data, wqe, max_sq_wqe)};
    }
    const unsigned wqebbs = static_cast<unsigned>((wqe + hw::send_wqe_bb - 1) / hw::send_wqe_bb);
    if (c.max_send_wr > (1u << log_max)) {
        return error{EINVAL, fmt::format("qp::create: {} send WRs exceed the device's {} per queue", c.max_send_wr,
                                         1u << log_max)};
    }
    // The ring holds max_send_wr of the largest WQEs and the NOPs that may pad one WQE
    // to the ring's end (send_queue::reserve: a WQE never wraps): a window of
    // outstanding WQEs spans at most one end, so wqebbs - 1 more BBs are always enough.
    // Without them a ring of one 2-BB WR could never take a second WQE placed at its
    // last BB (perftest's latency tests use one WR).
    const unsigned log_sq = has_sq ? log2_ceil(c.max_send_wr * wqebbs + wqebbs - 1) : 0;
    if (log_sq > log_max) {
        return error{EINVAL, fmt::format("qp::create: {} send WRs of {} basic blocks exceed the device's {} per queue",
                                         c.max_send_wr, wqebbs, 1u << log_max)};
    }
    // Receive queue: a scatter list per WQE, none with an SRQ, zero length when no
    // receives are wanted.
    const bool has_rq = !a.shared && c.max_recv_wr > 0;
    unsigned log_rq = 0, rq_shift = 4;
    if (has_rq) {
        const std::size_t stride = std::bit_ceil(std::max<std::size_t>(c.max_recv_sge, 1) * sizeof(hw::wqe_data_seg));
        if (stride > max_rq_wqe) {
            return error{EINVAL, fmt::format("qp::create: {} receive SGEs exceed the device's {} per WQE",
                                             c.max_recv_sge, max_rq_wqe / 16)};
        }
        rq_shift = static_cast<unsigned>(std::countr_zero(stride));
        log_rq = log2_ceil(c.max_recv_wr);
        if (log_rq > log_max) {
            return error{EINVAL, fmt::format("qp::create: {} receive WRs exceed the device's {}", c.max_recv_wr, 1u << log_max)};
        }
    }

    std::shared_ptr<qp> q(new qp(h));
    q->pd_ = a.domain;
    q->scq_ = a.send_cq;
    q->rcq_ = a.recv_cq;
    q->srq_ = a.shared;
    q->counter_ = a.counter;
    q->type_ = a.type;
    q->has_rq_ = has_rq;
    q->log_rq_ = log_rq;
    q->rq_shift_ = rq_shift;
    q->has_sq_ = has_sq;
    q->log_sq_ = log_sq;
    q->max_send_wqebbs_ = wqebbs;
    const std::size_t rq_bytes = has_rq ? std::size_t{1} << (log_rq + rq_shift) : 0;
    q->sq_offset_ = rq_bytes;  // the SQ follows the RQ in one buffer (PRM "Work Queue Buffer")
    // What the QP can really take, as verbs reports it back.
    const std::size_t room = std::size_t{wqebbs} * hw::send_wqe_bb - overhead;
    q->cap_.max_send_wr = has_sq ? ((1u << log_sq) - (wqebbs - 1)) / wqebbs : 0;
    q->cap_.max_send_sge = has_sq ? static_cast<unsigned>(room / sizeof(hw::wqe_data_seg)) : 0;
    q->cap_.max_inline_data = has_sq && c.max_inline_data ? static_cast<unsigned>(room - sizeof(hw::wqe_inline_seg)) : 0;
    q->cap_.max_recv_wr = has_rq ? 1u << log_rq : 0;
    q->cap_.max_recv_sge = has_rq ? (1u << rq_shift) / 16 : 0;

    const std::size_t sq_bytes = has_sq ? std::size_t{hw::send_wqe_bb} << log_sq : 0;
    auto mem = queue_memory::alloc(h.device(), rq_bytes + sq_bytes);
    if (!mem) return mem.error();
    q->mem_ = std::move(mem).value();
    auto bf = h.alloc_bf();
    if (!bf) return bf.error();
    q->bf_ = bf.value();
    q->bf_held_ = true;

    auto in = command<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, q->mem_.pages() * 8);
    std::byte* ctx = ifc::at<ifc::create_qp_in::qpc>(in.data());
    ifc::set<qpc::st>(ctx, st_of(a.type));
    ifc::set<qpc::pm_state>(ctx, qv::pm_migrated);
    ifc::set<qpc::pd>(ctx, a.domain->pdn());
    ifc::set<qpc::uar_page>(ctx, q->bf_.uar);
    ifc::set<qpc::log_page_size>(ctx, q->mem_.log_page_size());
    ifc::set<qpc::log_sq_size>(ctx, log_sq);
    ifc::set<qpc::no_sq>(ctx, has_sq ? 0 : 1);
    ifc::set<qpc::cqn_snd>(ctx, a.send_cq->cqn());
    ifc::set<qpc::cqn_rcv>(ctx, a.recv_cq->cqn());
    ifc::set<qpc::dbr_addr>(ctx, q->mem_.doorbell_record_iova());
    if (a.shared) {
        ifc::set<qpc::rq_type>(ctx, qv::rq_srq);
        ifc::set<qpc::srqn_rmpn_xrqn>(ctx, a.shared->srqn());
    } else if (has_rq) {
        ifc::set<qpc::rq_type>(ctx, qv::rq_regular);
        ifc::set<qpc::log_rq_size>(ctx, log_rq);
        ifc::set<qpc::log_rq_stride>(ctx, rq_shift - 4);
    } else {
        ifc::set<qpc::rq_type>(ctx, qv::rq_zero_len);
    }
    for (std::size_t i = 0; i < q->mem_.pages(); ++i) ifc::set<ifc::create_qp_in::pas>(in.data(), i, q->mem_.page_iova(i));
    auto r = h.exec(in, ifc::create_qp_out::size_bytes);
    if (!r) return r.error();
    q->qpn_ = ifc::get<ifc::create_qp_out::qpn>(r->data());
    q->created();
    q->pd_->hold();
    return q;
}

status qp::destroy() {
    const bool was_live = !destroyed_;
    auto in = command<ifc::destroy_qp_in>(cmd_opcode::DESTROY_QP);
    ifc::set<ifc::destroy_qp_in::qpn>(in.data(), qpn_);
    auto s = destroy_with(std::move(in));
    if (!s) return s;
    if (was_live) pd_->release();
    // The register goes back to the HCA's pool (gone with the HCA when orphaned).
    if (bf_held_) with_live_owner([&](hca& h) { h.free_bf(bf_); });
    bf_held_ = false;
    return s;
}

qp::~qp() { (void)destroy(); }

std::byte* qp::bf_register(bool write_combining) const noexcept { return owner().bf_address(bf_, write_combining); }

status qp::modify(qp_state to, const modify_attr& a) {
    using S = qp_state;
    cmd_opcode op{};
    const S from = state_;
    if (to == S::error) {
        op = cmd_opcode::QP_2ERR;
    } else if (to == S::reset) {
        op = cmd_opcode::QP_2RST;
    } else if (from == S::reset && to == S::init) {
        op = cmd_opcode::RST2INIT_QP;
    } else if (from == S::init && to == S::init) {
        op = cmd_opcode::INIT2INIT_QP;
    } else if (from == S::init && to == S::rtr) {
        op = cmd_opcode::INIT2RTR_QP;
    } else if (from == S::rtr && to == S::rts) {
        op = cmd_opcode::RTR2RTS_QP;
    } else if (from == S::rts && to == S::rts) {
        op = cmd_opcode::RTS2RTS_QP;
    } else if (from == S::sqerr && to == S::rts) {
        op = cmd_opcode::SQERR2RTS_QP;
    } else if (from == S::sqd && to == S::rts) {
        op = cmd_opcode::SQD_RTS_QP;
    } else {
        return error{EINVAL, fmt::format("QP 0x{:x}: no transition from {} to {}", qpn_, name(from), name(to))};
    }

    std::vector<std::byte> in;
    if (op == cmd_opcode::QP_2ERR || op == cmd_opcode::QP_2RST) {
        in = command<ifc::qp_2err_in>(op);
        ifc::set<ifc::qp_2err_in::qpn>(in.data(), qpn_);
    } else {
        // Every other transition has the same shape (qpn, opt_param_mask, qpc).
        in = command<ifc::rst2init_qp_in>(op);
        ifc::set<ifc::rst2init_qp_in::qpn>(in.data(), qpn_);
        std::byte* ctx = ifc::at<ifc::rst2init_qp_in::qpc>(in.data());
        std::byte* path = ifc::at<qpc::primary_address_path>(ctx);
        std::uint32_t mask = 0;
        const bool rc = type_ == qp_type::rc, uc = type_ == qp_type::uc, ud = type_ == qp_type::ud;
        auto access = [&] {
            if (rc) {
                ifc::set<qpc::rre>(ctx, (a.access & access_remote_read) ? 1 : 0);
                ifc::set<qpc::rae>(ctx, (a.access & access_remote_atomic) ? 1 : 0);
                if (a.access & access_remote_atomic) ifc::set<qpc::atomic_mode>(ctx, kAtomic8B);
            }
            if (rc || uc) ifc::set<qpc::rwe>(ctx, (a.access & access_remote_write) ? 1 : 0);
        };
        if (op == cmd_opcode::RST2INIT_QP || op == cmd_opcode::INIT2INIT_QP) {
            ifc::set<ads::vhca_port_num>(path, a.port);
            ifc::set<ads::pkey_index>(path, a.pkey_index);
            access();
            if (ud) ifc::set<qpc::q_key>(ctx, a.qkey);
            // RST2INIT names the Q counter set (PRM "QP Context" counter_set_id).
            if (op == cmd_opcode::RST2INIT_QP && counter_) ifc::set<qpc::counter_set_id>(ctx, counter_->id());
            if (op == cmd_opcode::INIT2INIT_QP) {
                mask = opt::PKEY_INDEX | opt::PRI_PORT | (rc ? opt::RRE | opt::RWE | opt::RAE : 0) |
                       (uc ? std::uint32_t{opt::RWE} : 0) | (ud ? std::uint32_t{opt::Q_KEY} : 0);
            }
        } else if (op == cmd_opcode::INIT2RTR_QP && !ud) {
            ifc::set<qpc::mtu>(ctx, a.path_mtu);
            ifc::set<qpc::log_msg_max>(ctx, ifc::get<ifc::cmd_hca_cap::log_max_msg>(owner().caps().data()));
            ifc::set<qpc::remote_qpn>(ctx, a.dest_qpn);
            ifc::set<qpc::next_rcv_psn>(ctx, a.rq_psn);
            ifc::set<ads::rlid>(path, a.ah.dlid);
            ifc::set<ads::sl>(path, a.ah.sl);
            if (a.ah.grh || owner().ethernet()) {
                ifc::set<ads::grh>(path, 1);
                ifc::set<ads::src_addr_index>(path, a.ah.sgid_index);
                ifc::set<ads::hop_limit>(path, a.ah.hop_limit);
                ifc::set<ads::tclass>(path, a.ah.traffic_class);
                ifc::set<ads::flow_label>(path, a.ah.flow_label);
                for (std::size_t i = 0; i < 16; ++i) ifc::set<ads::rgid_rip>(path, i, a.ah.dgid[i]);
            }
            // RoCE: the peer's MAC (PRM "Address Path": a card sends to rmac as given) as the
            // caller found it (cxv::qp::modify: ARP, api/neighbours.h), or where the GID names
            // it (a link-local EUI-64 GID); else 0 (finding 19).
            if (owner().ethernet()) {
                if (a.ah.rmac) {
                    hw::set_mac_fields<ads::rmac_47_32, ads::rmac_31_0>(path, *a.ah.rmac);
                } else if (const auto mac = hw::mac_of_link_local_gid(a.ah.dgid.data())) {
                    hw::set_mac_fields<ads::rmac_47_32, ads::rmac_31_0>(path, *mac);
                }
            }
            if (rc) {
                ifc::set<qpc::log_rra_max>(ctx, log2_ceil(a.max_dest_rd_atomic));
                ifc::set<qpc::min_rnr_nak>(ctx, a.min_rnr_timer);
            }
        } else if (op == cmd_opcode::RTR2RTS_QP) {
            ifc::set<qpc::next_send_psn>(ctx, a.sq_psn);
            ifc::set<qpc::log_ack_req_freq>(ctx, kLogAckReqFreq);
            if (rc) {
                ifc::set<qpc::retry_count>(ctx, a.retry_cnt);
                ifc::set<qpc::rnr_retry>(ctx, a.rnr_retry);
                ifc::set<qpc::log_sra_max>(ctx, log2_ceil(a.max_rd_atomic));
                ifc::set<ads::ack_timeout>(path, a.timeout);
            }
        }
        ifc::set<ifc::rst2init_qp_in::opt_param_mask>(in.data(), mask);
    }
    auto r = owner().exec(in, 16);
    if (!r) return r.error();
    state_ = to;
    return ok_status();
}

result<qp_state> qp::query() {
    auto in = command<ifc::query_qp_in>(cmd_opcode::QUERY_QP);
    ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn_);
    auto r = owner().exec(in, ifc::query_qp_out::size_bytes);
    if (!r) return r.error();
    const std::uint32_t s = ifc::get<qpc::state>(ifc::at<ifc::query_qp_out::qpc>(r->data()));
    if (s > static_cast<std::uint32_t>(ifc::qp_state::ERR)) {
        return error{EPROTO, fmt::format("{}: QUERY_QP of QP 0x{:x} reports unknown state {}", owner().device().bdf(),
                                         qpn_, s)};
    }
    state_ = static_cast<qp_state>(s);
    return state_;
}

status qp::multicast_group(hw::cmd_opcode op, const std::array<std::uint8_t, 16>& mgid) {
    // DETACH_FROM_MCG's input has ATTACH_TO_MCG's layout.
    auto in = command<ifc::attach_to_mcg_in>(op);
    ifc::set<ifc::attach_to_mcg_in::qpn>(in.data(), qpn_);
    std::memcpy(ifc::at<ifc::attach_to_mcg_in::multicast_gid>(in.data()), mgid.data(), mgid.size());
    auto r = owner().exec(in, ifc::attach_to_mcg_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

}  // namespace cxv::driver
