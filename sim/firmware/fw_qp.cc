// Queue pairs (PRM "Queue Pair (QP)", CREATE_QP, QUERY_QP, DESTROY_QP and the QP state
// transition commands): what a QP may be created with, the state machine, and which
// attributes each transition takes from the context it carries.
//
// Facts: the required and optional attributes per transition and transport are the
// IBTA Modify QP tables as Linux encodes them (ib_modify_qp_is_ok in core/verbs.c for
// what is required; opt_mask[][][] in mlx5/qp.c for the opt_param_mask bits each mlx5
// transition accepts); which context fields are set at create and at which transition
// is what Linux's create_qp_common and __mlx5_ib_modify_qp write.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_qp.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"
#include "sim/transport/transport_type.h"

namespace cxv::sim {

namespace {

using qpc = ifc::qpc;
using ads = ifc::ads;
using cap = ifc::cmd_hca_cap;
using qpc_bytes = std::array<std::byte, qpc::size_bytes>;

constexpr std::uint32_t kFirstQpn = 0x100;  // QP0/QP1 and the rest below are reserved

namespace qv = ifc::qpc_values;
namespace opt = ifc::qp_optpar;


// One transition command: the state it starts from (any, for 2ERR and 2RST), the state
// it ends in, and the optional parameters it accepts per transport (RC, UC, UD).
struct transition {
    cmd_opcode op;
    bool from_any;
    qp_state from, to;
    std::array<std::uint32_t, 3> optional;
};

constexpr std::uint32_t kRcAccess = opt::RRE | opt::RAE | opt::RWE;

constexpr std::array<transition, 9> kTransitions{{
    {cmd_opcode::RST2INIT_QP, false, qp_state::RST, qp_state::INIT, {0, 0, 0}},
    {cmd_opcode::INIT2INIT_QP, false, qp_state::INIT, qp_state::INIT,
     {kRcAccess | opt::PKEY_INDEX | opt::PRI_PORT | opt::LAG_TX_AFF,
      opt::RWE | opt::PKEY_INDEX | opt::PRI_PORT | opt::LAG_TX_AFF,
      opt::PKEY_INDEX | opt::Q_KEY | opt::PRI_PORT}},
    {cmd_opcode::INIT2RTR_QP, false, qp_state::INIT, qp_state::RTR,
     {opt::ALT_ADDR_PATH | kRcAccess | opt::PKEY_INDEX | opt::LAG_TX_AFF,
      opt::ALT_ADDR_PATH | opt::RWE | opt::PKEY_INDEX | opt::LAG_TX_AFF, opt::PKEY_INDEX | opt::Q_KEY}},
    {cmd_opcode::RTR2RTS_QP, false, qp_state::RTR, qp_state::RTS,
     {opt::ALT_ADDR_PATH | kRcAccess | opt::PM_STATE | opt::RNR_TIMEOUT,
      opt::ALT_ADDR_PATH | opt::RWE | opt::PM_STATE, opt::Q_KEY}},
    {cmd_opcode::RTS2RTS_QP, false, qp_state::RTS, qp_state::RTS,
     {kRcAccess | opt::RNR_TIMEOUT | opt::PM_STATE | opt::ALT_ADDR_PATH | opt::COUNTER_SET_ID,
      opt::RWE | opt::PM_STATE | opt::ALT_ADDR_PATH | opt::COUNTER_SET_ID,
      opt::Q_KEY | opt::SRQN | opt::CQN_RCV | opt::COUNTER_SET_ID}},
    {cmd_opcode::SQERR2RTS_QP, false, qp_state::SQER, qp_state::RTS,
     {opt::RNR_TIMEOUT | kRcAccess, opt::RWE, opt::Q_KEY}},
    {cmd_opcode::SQD_RTS_QP, false, qp_state::SQD, qp_state::RTS,
     {opt::RNR_TIMEOUT | kRcAccess, opt::RWE, opt::Q_KEY}},
    {cmd_opcode::QP_2ERR, true, qp_state::RST, qp_state::ERR, {0, 0, 0}},
    {cmd_opcode::QP_2RST, true, qp_state::RST, qp_state::RST, {0, 0, 0}},
}};

// qpc.state's value of a state (the model's qp_state is hw's).
constexpr std::uint32_t prm_state(qp_state s) { return static_cast<std::uint32_t>(s); }

cmd_reply bad_index() { return fail(cmd_status::BAD_INDEX, cmd_syndrome::BAD_PARAMETER); }

// Copies fields F... of a context from src to dst.
template <typename... F>
void take(std::byte* dst, const std::byte* src) {
    (ifc::set<F>(dst, ifc::get<F>(src)), ...);
}

// The part of a context CREATE_QP takes (and 2RST returns to): the QP's kind, its
// buffers and doorbell record, and the objects it is bound to. Everything else is set by
// the transitions.
qpc_bytes create_fields(const std::byte* src) {
    qpc_bytes q{};
    std::byte* d = q.data();
    take<qpc::st, qpc::isolate_vl_tc, qpc::pm_state, qpc::req_e2e_credit_mode, qpc::offload_type,
         qpc::end_padding_mode, qpc::wq_signature, qpc::block_lb_mc, qpc::atomic_like_write_en,
         qpc::latency_sensitive, qpc::drain_sigerr, qpc::pd, qpc::log_rq_size, qpc::log_rq_stride,
         qpc::no_sq, qpc::log_sq_size, qpc::ts_format, qpc::rlky, qpc::ulp_stateless_offload_mode,
         qpc::uar_page, qpc::user_index, qpc::log_page_size, qpc::fre, qpc::cqn_snd,
         qpc::page_offset, qpc::cd_slave_receive, qpc::cd_slave_send, qpc::cd_master, qpc::xrcd,
         qpc::cqn_rcv, qpc::dbr_addr, qpc::rq_type, qpc::srqn_rmpn_xrqn, qpc::cgs, qpc::cs_req,
         qpc::cs_res, qpc::dbr_umem_valid, qpc::dbr_umem_id>(d, src);
    return q;
}

// The limits the transitions check values against, from the current capabilities and
// the port.
struct qp_limits {
    std::uint32_t pkey_table = 0;  // entries
    std::uint32_t gid_table = 0;   // entries
    std::uint32_t num_ports = 0;
    std::uint32_t max_mtu = 0;     // qpc.mtu encoding
    std::uint32_t log_max_msg = 0;
    std::uint32_t log_max_ra_req = 0;
    std::uint32_t log_max_ra_res = 0;
    bool roce = false;
    bool apm = false;
};

qp_limits limits_of(const std::byte* caps, bool roce, std::uint32_t admin_mtu) {
    qp_limits l;
    // Table sizes as the capability encodes them: 128 << n P_Keys, 8 << n GIDs.
    const auto pkey = ifc::get<cap::pkey_table_size>(caps);
    const auto gid = ifc::get<cap::gid_table_size>(caps);
    l.pkey_table = pkey <= 5 ? 128u << pkey : 0;
    l.gid_table = gid <= 4 ? 8u << gid : 0;
    l.num_ports = ifc::get<cap::num_ports>(caps);
    l.log_max_msg = ifc::get<cap::log_max_msg>(caps);
    l.log_max_ra_req = ifc::get<cap::log_max_ra_req_qp>(caps);
    l.log_max_ra_res = ifc::get<cap::log_max_ra_res_qp>(caps);
    l.roce = roce;
    l.apm = ifc::get<cap::apm>(caps) != 0;
    // The port's MTU (PMTU); on Ethernet the RoCE MTU is the largest that fits a frame.
    std::uint32_t bytes = admin_mtu ? admin_mtu : (roce ? 9216 : 4096);
    if (roce) bytes = bytes > hw::roce_header_overhead ? bytes - hw::roce_header_overhead : 0;
    for (std::uint32_t m = qv::mtu_256; m <= qv::mtu_4096; ++m) {
        if ((128u << m) <= bytes) l.max_mtu = m;
    }
    return l;
}

cmd_reply check_port(std::uint32_t port, const qp_limits& l) {
    if (port == 0) return bad_param(cmd_syndrome::MISSING_ATTRIBUTE);
    if (port > l.num_ports) return bad_param(cmd_syndrome::BAD_PORT);
    return ok();
}

cmd_reply check_pkey_index(std::uint32_t index, const qp_limits& l) {
    return index < l.pkey_table ? ok() : bad_index();
}

// The path MTU of a connected QP. A force-loopback path (ads.fl) never reaches the wire,
// so the port's MTU does not bound it: Linux's vfio/mlx5 page tracker asks 4096 for its
// fl QPs on whatever port MTU the function has, and cards take it.
cmd_reply check_mtu(std::uint32_t mtu, const qp_limits& l, bool loopback) {
    if (mtu == 0) return bad_param(cmd_syndrome::MISSING_ATTRIBUTE);
    if (mtu > qv::mtu_4096) return bad_param();
    if (!loopback && mtu > l.max_mtu) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    return ok();
}

// The primary address path of a connected QP (INIT2RTR): InfiniBand routes by the
// remote LID (and a GRH from a source GID when grh is set); RoCE always addresses the
// remote GID from a source GID. An InfiniBand path is taken whatever its rlid: the PRM
// states no refusal of LID 0, and a card accepts it, as a program that makes its QPs
// ready before its port has a LID (Down or Init, the SM not yet swept) does; what is sent
// there reaches no port, as on a fabric. A path with fl (force loopback, PRM "Address
// Path": the packets go back to this function without the wire; roce_cap
// fl_rc_qp_when_roce_enabled offers it on RoCE) addresses no peer, so it needs no remote
// GID: Linux's mlx5_vdpa and vfio/mlx5 and DPDK's mlx5 drivers move their loopback QPs
// to RTR with fl set and rgid_rip left zero.
cmd_reply check_path(const std::byte* path, const qp_limits& l) {
    if (l.roce && !ifc::get<ads::fl>(path)) {
        bool any = false;
        for (std::size_t i = 0; i < ads::rgid_rip::count; ++i) {
            any = any || ifc::get<ads::rgid_rip>(path, i) != 0;
        }
        if (!any) return bad_param(cmd_syndrome::MISSING_ATTRIBUTE);
    }
    if ((l.roce || ifc::get<ads::grh>(path)) && ifc::get<ads::src_addr_index>(path) >= l.gid_table) {
        return bad_index();
    }
    return ok();
}

cmd_reply check_pm_state(std::uint32_t pm, const qp_limits& l) {
    // Without automatic path migration a QP stays MIGRATED.
    if (pm == qv::pm_reserved || (!l.apm && pm != qv::pm_migrated)) return bad_param();
    return ok();
}

// Applies the attributes one transition takes to `next` (a copy of the QP's context):
// those the transition requires for this transport, then the optional ones whose
// opt_param_mask bit is set. Every value taken is checked; the caller commits `next`
// only when all were good.
cmd_reply apply_transition(cmd_opcode op, std::uint32_t st, std::uint32_t mask, const std::byte* in,
                           std::byte* next, const qp_limits& l) {
    const bool rc = st == qv::st_rc, uc = st == qv::st_uc, ud = transport_of_st(st) == transport::ud;
    const bool connected = rc || uc;  // a UMR QP has neither a peer nor a Q_Key
    const std::byte* ipath = ifc::at<qpc::primary_address_path>(in);
    std::byte* npath = ifc::at<qpc::primary_address_path>(next);
    cmd_reply r;

    switch (op) {
        case cmd_opcode::RST2INIT_QP:
            // Port and P_Key index for every transport; access rights (RC, UC) or Q_Key (UD).
            if (failed(r = check_port(ifc::get<ads::vhca_port_num>(ipath), l))) return r;
            if (failed(r = check_pkey_index(ifc::get<ads::pkey_index>(ipath), l))) return r;
            if (ifc::get<qpc::lag_tx_port_affinity>(in) > l.num_ports) return bad_param();
            take<ads::vhca_port_num, ads::pkey_index>(npath, ipath);
            take<qpc::lag_tx_port_affinity, qpc::counter_set_id>(next, in);
            if (ifc::get<qpc::rlky>(in)) ifc::set<qpc::rlky>(next, 1);
            if (rc) {
                if (ifc::get<qpc::atomic_mode>(in) > qv::atomic_mode_up_to_256b) return bad_param();
                take<qpc::rre, qpc::rwe, qpc::rae, qpc::atomic_mode>(next, in);
            }
            if (uc) take<qpc::rwe>(next, in);
            if (ud) {
                // A UD QP's MTU bounds its messages; 0 leaves the port's. Linux asks for
                // 4096 whatever the port's MTU: a larger one is the port's in effect.
                if (ifc::get<qpc::mtu>(in) > qv::mtu_4096) return bad_param();
                take<qpc::q_key, qpc::mtu>(next, in);
            }
            break;
        case cmd_opcode::INIT2RTR_QP:
            if (connected) {
                // The responder side of a connection: peer, path MTU, expected PSN, path.
                if (failed(r = check_mtu(ifc::get<qpc::mtu>(in), l, ifc::get<ads::fl>(ipath) != 0))) return r;
                if (ifc::get<qpc::log_msg_max>(in) > l.log_max_msg) {
                    return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
                }
                if (failed(r = check_path(ipath, l))) return r;
                take<qpc::mtu, qpc::log_msg_max, qpc::remote_qpn, qpc::next_rcv_psn>(next, in);
                // The address, but not what other transitions own: P_Key index and port
                // (RST2INIT or their optional bits) and the ACK timeout (RTR2RTS).
                const auto pkey = ifc::get<ads::pkey_index>(npath);
                const auto port = ifc::get<ads::vhca_port_num>(npath);
                const auto timeout = ifc::get<ads::ack_timeout>(npath);
                std::memcpy(npath, ipath, ads::size_bytes);
                ifc::set<ads::pkey_index>(npath, pkey);
                ifc::set<ads::vhca_port_num>(npath, port);
                ifc::set<ads::ack_timeout>(npath, timeout);
            }
            if (rc) {
                if (ifc::get<qpc::log_rra_max>(in) > l.log_max_ra_res) {
                    return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
                }
                take<qpc::log_rra_max, qpc::min_rnr_nak>(next, in);
            }
            break;
        case cmd_opcode::RTR2RTS_QP:
            take<qpc::next_send_psn>(next, in);
            if (rc) {
                // The requester side: retries, outstanding reads, ACK timeout.
                if (ifc::get<qpc::log_sra_max>(in) > l.log_max_ra_req) {
                    return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
                }
                take<qpc::retry_count, qpc::rnr_retry, qpc::log_sra_max, qpc::log_ack_req_freq>(next, in);
                take<ads::ack_timeout>(npath, ipath);
            }
            break;
        default:
            break;
    }

    if (mask & opt::RRE) take<qpc::rre>(next, in);
    if (mask & opt::RWE) take<qpc::rwe>(next, in);
    if (mask & opt::RAE) {
        if (ifc::get<qpc::atomic_mode>(in) > qv::atomic_mode_up_to_256b) return bad_param();
        take<qpc::rae, qpc::atomic_mode>(next, in);
    }
    if (mask & opt::PKEY_INDEX) {
        if (failed(r = check_pkey_index(ifc::get<ads::pkey_index>(ipath), l))) return r;
        take<ads::pkey_index>(npath, ipath);
    }
    if (mask & opt::PRI_PORT) {
        if (failed(r = check_port(ifc::get<ads::vhca_port_num>(ipath), l))) return r;
        take<ads::vhca_port_num>(npath, ipath);
    }
    if (mask & opt::Q_KEY) take<qpc::q_key>(next, in);
    if (mask & opt::RNR_TIMEOUT) take<qpc::min_rnr_nak>(next, in);
    if (mask & opt::PM_STATE) {
        if (failed(r = check_pm_state(ifc::get<qpc::pm_state>(in), l))) return r;
        take<qpc::pm_state>(next, in);
    }
    if (mask & opt::LAG_TX_AFF) {
        if (ifc::get<qpc::lag_tx_port_affinity>(in) > l.num_ports) return bad_param();
        take<qpc::lag_tx_port_affinity>(next, in);
    }
    // New receive CQ or SRQ: the caller checks the objects they name.
    if (mask & opt::CQN_RCV) take<qpc::cqn_rcv>(next, in);
    if (mask & opt::SRQN) take<qpc::srqn_rmpn_xrqn>(next, in);
    if (mask & opt::COUNTER_SET_ID) take<qpc::counter_set_id>(next, in);
    return ok();
}


}  // namespace

// --- CREATE_QP -----------------------------------------------------------------------

cmd_reply qp_commands::create_qp(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::byte* ctx = ifc::at<ifc::create_qp_in::qpc>(in);
    const std::byte* caps = caps_.current();
    const std::uint32_t uid = ifc::get<ifc::create_qp_in::uid>(in);

    if (qps_.size() >= (std::size_t{1} << ifc::get<cap::log_max_qp>(caps))) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    // The transport, and features the device's capabilities do not offer.
    // QP0 and QP1, the port's special QPs, are datagram QPs: Linux's mlx5_ib creates them
    // for its MAD agents (the SMI's QP0 on InfiniBand, the GSI's QP1).
    const auto st = ifc::get<qpc::st>(ctx);
    // REG_UMR: Linux's mlx5_ib makes one for its memory registration (its WQEs are not
    // modelled: a UMR WQE completes in error).
    const bool st_ok = (st == qv::st_rc && ifc::get<cap::rc>(caps)) || (st == qv::st_uc && ifc::get<cap::uc>(caps)) ||
                       ((st == qv::st_ud || st == qv::st_qp0 || st == qv::st_qp1) && ifc::get<cap::ud>(caps)) ||
                       st == qv::st_reg_umr;
    if (!st_ok) return bad_param();
    // pm_state: any defined value (PRM "QP Context": 0 ARMED, 1 REARM, 3 MIGRATED; 2 is
    // reserved). A card takes ARMED at create whatever apm says (DPDK's mlx5 leaves
    // pm_state 0 in the firmware-managed QPs it creates); without APM the model never
    // migrates, so the value is only kept. The transitions' PM_STATE attribute is still
    // checked against apm (check_pm_state).
    if (ifc::get<qpc::pm_state>(ctx) == qv::pm_reserved) return bad_param();
    const bool unsupported =
        ifc::get<ifc::create_qp_in::input_qpn>(in) != 0 ||  // QP numbers are the device's
        ifc::get<qpc::ts_format>(ctx) > qv::ts_format_default ||  // REAL_TIME needs a capability the model lacks
        ifc::get<qpc::offload_type>(ctx) != 0 || ifc::get<qpc::req_e2e_credit_mode>(ctx) != 0 ||
        (ifc::get<qpc::wq_signature>(ctx) && !ifc::get<cap::wq_signature>(caps)) ||
        (ifc::get<qpc::block_lb_mc>(ctx) && !ifc::get<cap::block_lb_mc>(caps)) ||
        (ifc::get<qpc::drain_sigerr>(ctx) && !ifc::get<cap::drain_sigerr>(caps)) ||
        (ifc::get<qpc::end_padding_mode>(ctx) && !ifc::get<cap::end_pad>(caps)) ||
        ((ifc::get<qpc::cs_req>(ctx) || ifc::get<qpc::cs_res>(ctx)) && !ifc::get<cap::sctr_data_cqe>(caps)) ||
        ((ifc::get<qpc::cd_master>(ctx) || ifc::get<qpc::cd_slave_send>(ctx) ||
          ifc::get<qpc::cd_slave_receive>(ctx)) &&
         !ifc::get<cap::cd>(caps));
    if (unsupported) return bad_param();

    // The objects it is bound to. A CQ is needed for each work queue the QP has.
    const std::uint32_t pd = ifc::get<qpc::pd>(ctx);
    const std::uint32_t uar = ifc::get<qpc::uar_page>(ctx);
    const std::uint32_t cqn_snd = ifc::get<qpc::cqn_snd>(ctx);
    const std::uint32_t cqn_rcv = ifc::get<qpc::cqn_rcv>(ctx);
    const std::uint32_t rq_type = ifc::get<qpc::rq_type>(ctx);
    const bool has_sq = ifc::get<qpc::no_sq>(ctx) == 0;
    const bool has_rq = rq_type == qv::rq_regular;
    if (rq_type != qv::rq_regular && rq_type != qv::rq_srq && rq_type != qv::rq_zero_len) return bad_param();
    const std::uint32_t srqn = rq_type == qv::rq_srq ? ifc::get<qpc::srqn_rmpn_xrqn>(ctx) : 0;
    // The UAR page is where the send queue's doorbells ring (PRM "Queue Pair Context",
    // uar_page): a QP without a send queue names none. Linux's mlx5_vdpa and DPDK's mlx5
    // create their firmware-side QPs (no_sq, zero-length RQ) with uar_page 0, and cards
    // take them; a UAR that is named must still exist.
    const bool has_uar = has_sq || uar != 0;
    cmd_reply r;
    // A UMR QP works on memory keys, not through a PD: Linux's mlx5_ib names none for it
    // (create_kernel_qp sets latency_sensitive instead), and cards take it.
    const bool needs_pd = st != qv::st_reg_umr || pd != 0;
    if (needs_pd && failed(r = check_ref(pds_, pd, uid, cmd_syndrome::BAD_PD))) return r;
    if (has_uar && failed(r = check_ref(uars_, uar, uid, cmd_syndrome::BAD_UAR))) return r;
    if ((has_sq || cqn_snd != 0) && failed(r = check_ref(cqs_, cqn_snd, uid, cmd_syndrome::BAD_CQ))) return r;
    if ((rq_type != qv::rq_zero_len || cqn_rcv != 0) && failed(r = check_ref(cqs_, cqn_rcv, uid, cmd_syndrome::BAD_CQ))) {
        return r;
    }
    if (rq_type == qv::rq_srq && failed(r = check_ref(srqs_, srqn, uid, cmd_syndrome::UNKNOWN_RESOURCE))) return r;

    // Work queue geometry: RQ entries of 16 << log_rq_stride bytes, then SQ basic blocks
    // of 64 bytes, in one buffer (PRM "Send and Receive Queue Buffers").
    const auto log_max_sz = ifc::get<cap::log_max_qp_sz>(caps);
    std::uint64_t rq_bytes = 0, sq_bytes = 0;
    if (has_rq) {
        if (ifc::get<qpc::log_rq_size>(ctx) > log_max_sz) return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
        const std::uint32_t stride = 16u << ifc::get<qpc::log_rq_stride>(ctx);
        if (stride > ifc::get<cap::max_wqe_sz_rq>(caps)) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
        rq_bytes = std::uint64_t{stride} << ifc::get<qpc::log_rq_size>(ctx);
    }
    if (has_sq) {
        if (ifc::get<qpc::log_sq_size>(ctx) > log_max_sz) return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
        sq_bytes = std::uint64_t{64} << ifc::get<qpc::log_sq_size>(ctx);
    }
    const std::uint64_t wq_bytes = rq_bytes + sq_bytes;

    // The doorbell record: 8 bytes (receive and send counters), at an IOVA or in a UMEM.
    const std::uint64_t dbr = ifc::get<qpc::dbr_addr>(ctx);
    const bool dbr_in_umem = ifc::get<qpc::dbr_umem_valid>(ctx) != 0;
    const std::uint32_t dbr_umem = dbr_in_umem ? ifc::get<qpc::dbr_umem_id>(ctx) : 0;
    if (dbr_in_umem) {
        if (failed(r = check_ref(umems_, dbr_umem, uid, cmd_syndrome::UNKNOWN_RESOURCE))) return r;
    }
    if (dbr_in_umem && !umem_holds(umems_.at(dbr_umem), dbr, 8)) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
    if ((dbr + (dbr_in_umem ? umems_.at(dbr_umem).page_offset : 0)) % 8) {
        return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    }

    // The buffer: a UMEM, or the page list after the fixed input.
    qp_object qp;
    if (ifc::get<ifc::create_qp_in::wq_umem_valid>(in)) {
        qp.umem_id = ifc::get<ifc::create_qp_in::wq_umem_id>(in);
        qp.umem_offset = ifc::get<ifc::create_qp_in::wq_umem_offset>(in);
        if (failed(r = check_ref(umems_, qp.umem_id, uid, cmd_syndrome::UNKNOWN_RESOURCE))) return r;
        // The queues start on a 64-byte boundary (a send WQE basic block).
        const umem_object& u = umems_.at(qp.umem_id);
        if (!umem_holds(u, qp.umem_offset, wq_bytes)) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        if ((u.page_offset + qp.umem_offset) % 64) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
    } else if (wq_bytes != 0) {
        // Pages of 4 KiB << log_page_size; the queues start page_offset 64ths of a page
        // into the first (the quantized offset Linux computes with a scale of 64).
        const std::uint64_t page = std::uint64_t{4096} << ifc::get<qpc::log_page_size>(ctx);
        const std::uint64_t start = page / 64 * ifc::get<qpc::page_offset>(ctx);
        const std::size_t npages = static_cast<std::size_t>((start + wq_bytes + page - 1) / page);
        if (c.in.size() < ifc::create_qp_in::size_bytes + npages * 8) {
            return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
        }
        for (std::size_t i = 0; i < npages; ++i) {
            const std::uint64_t pa = ifc::get<ifc::create_qp_in::pas>(in, i);
            if (pa % page) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
            qp.pas.push_back(pa);
        }
    }

    // A number: 24 bits, unique, above the reserved ones.
    std::uint32_t qpn = next_qpn_;
    for (std::size_t tries = 0; tables_.qpn_used(qpn) || qpn < kFirstQpn; ++tries) {
        if (tries > kMask24) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
        qpn = (qpn + 1) & kMask24;
    }
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    qp.qpc = create_fields(ctx);
    ifc::set<qpc::state>(qp.qpc.data(), prm_state(qp_state::RST));
    if (!icm_.write(*slot, qp.qpc.data(), qp.qpc.size())) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }

    qp.qpn = qpn;
    qp.uid = uid;
    qp.state = qp_state::RST;
    qp.pd = pd;
    qp.cqn_snd = cqn_snd;
    qp.cqn_rcv = cqn_rcv;
    qp.srqn = srqn;
    qp.icm = *slot;
    add_user(pds_, pd);
    if (has_uar) add_user(uars_, uar);
    if (cqn_snd) add_user(cqs_, cqn_snd);
    if (cqn_rcv) add_user(cqs_, cqn_rcv);
    if (srqn) add_user(srqs_, srqn);
    if (qp.umem_id) add_user(umems_, qp.umem_id);
    if (dbr_in_umem) add_user(umems_, dbr_umem);
    qps_.emplace(qpn, std::move(qp));
    // The first QP0 (QP1) is what the wire's destination QP 0 (1) reaches until it goes.
    if (st == qv::st_qp0 || st == qv::st_qp1) {
        std::uint32_t& special = tables_.special_qpn[wire_qpn(st, qpn)];
        if (special == 0) special = qpn;
    }
    if (has_uar) engine_.watch_bf_page(uar);
    next_qpn_ = (qpn + 1) & kMask24;
    ifc::set<ifc::create_qp_out::qpn>(c.out.data(), qpn);
    return ok();
}

// --- DESTROY_QP, QUERY_QP --------------------------------------------------------------

cmd_reply qp_commands::destroy_qp(cmd_ctx& c) {
    const auto it = qps_.find(ifc::get<ifc::destroy_qp_in::qpn>(c.in.data()));
    if (it == qps_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    qp_object& qp = it->second;
    if (qp.uid != ifc::get<ifc::destroy_qp_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    // A QP may be destroyed in any state; it lets go of everything it held.
    const std::byte* q = qp.qpc.data();
    drop_user(pds_, qp.pd);
    drop_user(uars_, ifc::get<qpc::uar_page>(q));
    if (qp.cqn_snd) drop_user(cqs_, qp.cqn_snd);
    if (qp.cqn_rcv) drop_user(cqs_, qp.cqn_rcv);
    if (qp.srqn) drop_user(srqs_, qp.srqn);
    if (qp.umem_id) drop_user(umems_, qp.umem_id);
    if (ifc::get<qpc::dbr_umem_valid>(q)) drop_user(umems_, ifc::get<qpc::dbr_umem_id>(q));
    counters_.rebind_q_counter(ifc::get<qpc::counter_set_id>(q), 0);
    icm_.free(qp.icm);
    engine_.on_qp_destroyed(qp.qpn);
    detach_everywhere(qp.qpn);
    for (std::uint32_t& special : tables_.special_qpn) {
        if (special == qp.qpn) special = 0;
    }
    qps_.erase(it);
    return ok();
}

cmd_reply qp_commands::query_qp(cmd_ctx& c) {
    const auto it = qps_.find(ifc::get<ifc::query_qp_in::qpn>(c.in.data()));
    if (it == qps_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const qp_object& qp = it->second;
    std::byte* q = ifc::at<ifc::query_qp_out::qpc>(c.out.data());
    if (!icm_.read(qp.icm, q, qpc::size_bytes)) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    // The device's view: state and the counters of WQEs it has consumed.
    ifc::set<qpc::state>(q, prm_state(qp.state));
    ifc::set<qpc::hw_sq_wqebb_counter>(q, qp.sq_consumer & 0xffff);
    ifc::set<qpc::hw_rq_counter>(q, qp.rq_consumer);
    // The PSNs as the transport has moved them since INIT2RTR and RTR2RTS set them (a
    // card reports its current PSNs: Linux's query_qp_attr reads them as rq_psn and
    // sq_psn). UD receives carry no expected PSN. In ERR the context keeps the values
    // its transitions gave.
    const bool rtr_on = qp.state == qp_state::RTR || qp.state == qp_state::RTS ||
                        qp.state == qp_state::SQD || qp.state == qp_state::SQER;
    const bool rts_on = rtr_on && qp.state != qp_state::RTR;
    if (rtr_on && transport_of_st(ifc::get<qpc::st>(q)) != transport::ud) {
        ifc::set<qpc::next_rcv_psn>(q, qp.x.epsn & kMask24);
    }
    if (rts_on) ifc::set<qpc::next_send_psn>(q, qp.x.next_psn & kMask24);
    ifc::set<ifc::query_qp_out::opt_param_mask>(c.out.data(), 0);
    put_pas<ifc::query_qp_out>(c, qp.pas);
    return ok();
}

// --- the state machine -----------------------------------------------------------------

cmd_reply qp_commands::modify_qp(cmd_ctx& c) {
    const auto t = std::find_if(kTransitions.begin(), kTransitions.end(),
                                [&](const transition& x) { return x.op == c.opcode; });
    if (t == kTransitions.end()) return fail(cmd_status::BAD_OP, cmd_syndrome::UNKNOWN_OPCODE);
    // Every transition's input starts with the same header: uid and qpn.
    const std::byte* in = c.in.data();
    const auto it = qps_.find(ifc::get<ifc::qp_2rst_in::qpn>(in));
    if (it == qps_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    qp_object& qp = it->second;
    if (qp.uid != ifc::get<ifc::qp_2rst_in::uid>(in)) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    if (!t->from_any && qp.state != t->from) return fail(cmd_status::BAD_QP_STATE, cmd_syndrome::BAD_QP_STATE);

    qpc_bytes next = qp.qpc;
    std::uint32_t mask = 0;
    if (c.opcode == cmd_opcode::QP_2RST) {
        // Back to what CREATE_QP set: the transitions' attributes are gone.
        next = create_fields(qp.qpc.data());
    } else if (c.opcode != cmd_opcode::QP_2ERR) {
        // The modifying transitions share one input shape (RST2INIT_QP's).
        const std::uint32_t st = ifc::get<qpc::st>(qp.qpc.data());
        const qp_limits lim = limits_of(caps_.current(), cfg_.port == port_type::ETHERNET, regs_.admin_mtu());
        mask = ifc::get<ifc::rst2init_qp_in::opt_param_mask>(in);
        // QP0 and QP1 take what UD takes (Linux asks for none of them).
        const auto tp = static_cast<std::uint32_t>(transport_of_st(st));
        std::uint32_t allowed = tp < t->optional.size() ? t->optional[tp] : 0;
        if (!lim.apm) allowed &= ~opt::ALT_ADDR_PATH;
        if (!ifc::get<cap::rts2rts_qp_counters_set_id>(caps_.current())) allowed &= ~opt::COUNTER_SET_ID;
        if (mask & ~allowed) return bad_param();
        const std::byte* ctx = ifc::at<ifc::rst2init_qp_in::qpc>(in);
        if (auto r = apply_transition(c.opcode, st, mask, ctx, next.data(), lim); failed(r)) return r;
    }
    // A new receive CQ or SRQ (UD, RTS2RTS) must exist and be the QP's uid's.
    const std::uint32_t cqn_rcv = ifc::get<qpc::cqn_rcv>(next.data());
    const std::uint32_t srqn = ifc::get<qpc::srqn_rmpn_xrqn>(next.data());
    if (mask & opt::CQN_RCV) {
        if (auto r = check_ref(cqs_, cqn_rcv, qp.uid, cmd_syndrome::BAD_CQ); failed(r)) return r;
    }
    if (mask & opt::SRQN) {
        if (ifc::get<qpc::rq_type>(qp.qpc.data()) != qv::rq_srq) return bad_param();
        if (auto r = check_ref(srqs_, srqn, qp.uid, cmd_syndrome::UNKNOWN_RESOURCE); failed(r)) return r;
    }
    // The Q counter set the QP counts to (set 0 is the default and always exists).
    const std::uint32_t set_from = ifc::get<qpc::counter_set_id>(qp.qpc.data());
    const std::uint32_t set_to = ifc::get<qpc::counter_set_id>(next.data());
    if (set_to != set_from && !q_counters_.count(set_to)) {
        return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    ifc::set<qpc::state>(next.data(), prm_state(t->to));
    if (!icm_.write(qp.icm, next.data(), next.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);

    if (mask & opt::CQN_RCV) {
        if (qp.cqn_rcv) drop_user(cqs_, qp.cqn_rcv);
        add_user(cqs_, cqn_rcv);
        qp.cqn_rcv = cqn_rcv;
    }
    if (mask & opt::SRQN) {
        drop_user(srqs_, qp.srqn);
        add_user(srqs_, srqn);
        qp.srqn = srqn;
    }
    counters_.rebind_q_counter(set_from, set_to);
    qp.qpc = next;
    const qp_state from = qp.state;
    qp.state = t->to;
    if (t->to == qp_state::RST) {
        // Reset: the device forgets its progress through both work queues.
        qp.sq_consumer = 0;
        qp.rq_consumer = 0;
        qp.rq_posted = 0;
    }
    engine_.on_qp_transition(qp, from);
    return ok();
}

// --- ATTACH_TO_MCG, DETACH_FROM_MCG ------------------------------------------------------
// A QP joins a multicast group, or leaves it (IBA 10.5 "Multicast"). The PRM bounds a group
// at max_qp_mcg QPs and the groups at 2^log_max_mcg; past them the command is refused. What
// the verbs check before (a multicast GID, a UD QP) the firmware is not asked about: a card
// attaches what it is given, and a QP of another transport drops what the group sends it.
// Attaching twice and detaching what is not attached change nothing.

// Both commands' inputs have one layout (attach_to_mcg_in's).
cmd_reply qp_commands::multicast_group(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = qps_.find(ifc::get<ifc::attach_to_mcg_in::qpn>(in));
    if (it == qps_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::attach_to_mcg_in::uid>(in)) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    const std::uint32_t qpn = it->first;
    std::array<std::uint8_t, 16> mgid;
    std::memcpy(mgid.data(), ifc::at<ifc::attach_to_mcg_in::multicast_gid>(in), mgid.size());
    auto g = tables_.mcgs.find(mgid);
    if (c.opcode == cmd_opcode::DETACH_FROM_MCG) {
        if (g == tables_.mcgs.end()) return ok();
        std::erase(g->second, qpn);
        if (g->second.empty()) tables_.mcgs.erase(g);
        return ok();
    }
    if (g == tables_.mcgs.end()) {
        if (tables_.mcgs.size() >= (std::size_t{1} << hca_caps::log_max_mcg)) {
            return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
        }
        g = tables_.mcgs.emplace(mgid, std::vector<std::uint32_t>{}).first;
    }
    std::vector<std::uint32_t>& members = g->second;
    if (std::find(members.begin(), members.end(), qpn) != members.end()) return ok();
    if (members.size() >= hca_caps::max_qp_mcg) return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    members.push_back(qpn);
    return ok();
}

// A QP destroyed leaves every group it was in.
void qp_commands::detach_everywhere(std::uint32_t qpn) {
    for (auto g = tables_.mcgs.begin(); g != tables_.mcgs.end();) {
        std::erase(g->second, qpn);
        g = g->second.empty() ? tables_.mcgs.erase(g) : std::next(g);
    }
}

void qp_commands::release_all() {
    for (auto& [n, o] : qps_) icm_.free(o.icm);
    qps_.clear();
    tables_.mcgs.clear();
    engine_.reset();
    next_qpn_ = kFirstQpn;
}

}  // namespace cxv::sim
