// Queue pairs and shared receive queues: their contexts and the commands that create,
// query, move through the QP state machine and destroy them (PRM "Queue Pair (QP)",
// "Shared Receive Queue (SRQ)" and their command sections).
#pragma once

#include "hw/ifc_cmd.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- QP ----------------------------------------------------------------------------

// PRM "Address Path": how a connected QP reaches its peer. InfiniBand uses the LIDs
// and, with grh set, the GRH fields; RoCE always addresses by rgid_rip (an IPv6 address
// or an IPv4-mapped one) and the peer's MAC, with the priority and DSCP/ECN it sends.
#define CXV_IFC_ads(F, S, A, T) \
    F(fl, 0x000, 1)             \
    F(free_ar, 0x001, 1)        \
    F(pkey_index, 0x010, 16)    \
    F(grh, 0x028, 1)            \
    F(mlid, 0x029, 7)           \
    F(rlid, 0x030, 16)          \
    F(ack_timeout, 0x040, 5)    \
    F(src_addr_index, 0x048, 8) \
    F(stat_rate, 0x054, 4)      \
    F(hop_limit, 0x058, 8)      \
    F(tclass, 0x064, 8)         \
    F(flow_label, 0x06c, 20)    \
    A(rgid_rip, 0x080, 8, 16)   \
    F(f_dscp, 0x104, 1)         \
    F(f_ecn, 0x105, 1)          \
    F(f_eth_prio, 0x107, 1)     \
    F(ecn, 0x108, 2)            \
    F(dscp, 0x10a, 6)           \
    F(udp_sport, 0x110, 16)     \
    F(dei_cfi, 0x120, 1)        \
    F(eth_prio, 0x121, 3)       \
    F(sl, 0x124, 4)             \
    F(vhca_port_num, 0x128, 8)  \
    F(rmac_47_32, 0x130, 16)    \
    F(rmac_31_0, 0x140, 32)
CXV_IFC_LAYOUT(ads, 0x160)

// PRM "QP Context" (QPC): the QP's state, service type, work queue geometry and buffers,
// both address paths, the transport's PSNs and retry parameters, and the CQs and
// SRQ/XRC domain it is bound to. Commands carry the full context; the transitions
// apply only the fields their opt_param_mask and the PRM's per-transition lists allow.
#define CXV_IFC_qpc(F, S, A, T)              \
    F(state, 0x000, 4)                       \
    F(lag_tx_port_affinity, 0x004, 4)        \
    F(st, 0x008, 8)                          \
    F(isolate_vl_tc, 0x012, 1)               \
    F(pm_state, 0x013, 2)                    \
    F(req_e2e_credit_mode, 0x016, 2)         \
    F(offload_type, 0x018, 4)                \
    F(end_padding_mode, 0x01c, 2)            \
    F(wq_signature, 0x020, 1)                \
    F(block_lb_mc, 0x021, 1)                 \
    F(atomic_like_write_en, 0x022, 1)        \
    F(latency_sensitive, 0x023, 1)           \
    F(drain_sigerr, 0x025, 1)                \
    F(pd, 0x028, 24)                         \
    F(mtu, 0x040, 3)                         \
    F(log_msg_max, 0x043, 5)                 \
    F(log_rq_size, 0x049, 4)                 \
    F(log_rq_stride, 0x04d, 3)               \
    F(no_sq, 0x050, 1)                       \
    F(log_sq_size, 0x051, 4)                 \
    F(ts_format, 0x058, 2)                   \
    F(rlky, 0x05b, 1)                        \
    F(ulp_stateless_offload_mode, 0x05c, 4)  \
    F(counter_set_id, 0x060, 8)              \
    F(uar_page, 0x068, 24)                   \
    F(user_index, 0x088, 24)                 \
    F(log_page_size, 0x0a3, 5)               \
    F(remote_qpn, 0x0a8, 24)                 \
    S(primary_address_path, 0x0c0, ads)      \
    S(secondary_address_path, 0x220, ads)    \
    F(log_ack_req_freq, 0x380, 4)            \
    F(log_sra_max, 0x388, 3)                 \
    F(retry_count, 0x38d, 3)                 \
    F(rnr_retry, 0x390, 3)                   \
    F(fre, 0x394, 1)                         \
    F(cur_rnr_retry, 0x395, 3)               \
    F(cur_retry_count, 0x398, 3)             \
    F(next_send_psn, 0x3c8, 24)              \
    F(log_num_dci_stream_channels, 0x3e3, 5) \
    F(cqn_snd, 0x3e8, 24)                    \
    F(log_num_dci_errored_streams, 0x403, 5) \
    F(deth_sqpn, 0x408, 24)                  \
    F(last_acked_psn, 0x448, 24)             \
    F(ssn, 0x468, 24)                        \
    F(log_rra_max, 0x488, 3)                 \
    F(atomic_mode, 0x48c, 4)                 \
    F(rre, 0x490, 1)                         \
    F(rwe, 0x491, 1)                         \
    F(rae, 0x492, 1)                         \
    F(page_offset, 0x494, 6)                 \
    F(cd_slave_receive, 0x49d, 1)            \
    F(cd_slave_send, 0x49e, 1)               \
    F(cd_master, 0x49f, 1)                   \
    F(min_rnr_nak, 0x4a3, 5)                 \
    F(next_rcv_psn, 0x4a8, 24)               \
    F(xrcd, 0x4c8, 24)                       \
    F(cqn_rcv, 0x4e8, 24)                    \
    F(dbr_addr, 0x500, 64)                   \
    F(q_key, 0x540, 32)                      \
    F(rq_type, 0x565, 3)                     \
    F(srqn_rmpn_xrqn, 0x568, 24)             \
    F(rmsn, 0x588, 24)                       \
    F(hw_sq_wqebb_counter, 0x5a0, 16)        \
    F(sw_sq_wqebb_counter, 0x5b0, 16)        \
    F(hw_rq_counter, 0x5c0, 32)              \
    F(sw_rq_counter, 0x5e0, 32)              \
    F(cgs, 0x62f, 1)                         \
    F(cs_req, 0x630, 8)                      \
    F(cs_res, 0x638, 8)                      \
    F(dc_access_key, 0x640, 64)              \
    F(dbr_umem_valid, 0x683, 1)              \
    F(dbr_umem_id, 0x720, 32)
CXV_IFC_LAYOUT(qpc, 0x740)

// Values of QPC fields (PRM "QP Context"). tests/hw/linux_qp_constants_test.cc compares
// every one with Linux's name for it.
namespace qpc_values {
// qpc.st: service type (Linux MLX5_QPC_ST_*). QP0 and QP1 are a port's special QPs
// (IBA 3.6.1 "Queue Pairs": the SMI's and the GSI's): datagram QPs the wire knows as
// QPN 0 and 1, whatever number CREATE_QP gives them. REG_UMR: a send queue for UMR WQEs
// (memory key updates), which reaches no wire.
inline constexpr std::uint32_t st_rc = 0x0, st_uc = 0x1, st_ud = 0x2, st_qp0 = 0x7, st_qp1 = 0x8,
                               st_reg_umr = 0xc;
// qpc.rq_type: own receive queue, an SRQ, or none (zero length) (Linux MLX5_NON_ZERO_RQ,
// MLX5_SRQ_RQ, MLX5_ZERO_LEN_RQ).
inline constexpr std::uint32_t rq_regular = 0x0, rq_srq = 0x1, rq_zero_len = 0x3;
// qpc.pm_state, the path migration state (Linux MLX5_QPC_PM_STATE_*). Without automatic
// path migration a QP is MIGRATED; 2 is reserved.
inline constexpr std::uint32_t pm_armed = 0x0, pm_rearm = 0x1, pm_reserved = 0x2, pm_migrated = 0x3;
// qpc.mtu, the path MTU in the InfiniBand encoding (IBTA "MTU"; rdma-core IBV_MTU_*,
// Linux MLX5_QPC_MTU_*_BYTES): 256 (1) .. 4096 (5) bytes, each twice the one before.
inline constexpr std::uint32_t mtu_256 = 1, mtu_512 = 2, mtu_1024 = 3, mtu_2048 = 4, mtu_4096 = 5;
// qpc.atomic_mode: the atomic operations the QP's responder executes, from the
// InfiniBand ones (IB_SPEC) to extended atomics of up to 256 bytes (Linux
// MLX5_QPC_ATOMIC_MODE_*).
inline constexpr std::uint32_t atomic_mode_ib_spec = 0x1, atomic_mode_only_8b = 0x2, atomic_mode_up_to_8b = 0x3,
                               atomic_mode_up_to_16b = 0x4, atomic_mode_up_to_32b = 0x5,
                               atomic_mode_up_to_64b = 0x6, atomic_mode_up_to_128b = 0x7,
                               atomic_mode_up_to_256b = 0x8;
// qpc.ts_format: the format of the QP's CQE timestamps (Linux MLX5_TIMESTAMP_FORMAT_*).
// FREE_RUNNING and DEFAULT need no capability; REAL_TIME needs the device's clock.
inline constexpr std::uint32_t ts_format_free_running = 0x0, ts_format_default = 0x1, ts_format_real_time = 0x2;
}  // namespace qpc_values

// qpc.state: where a QP is in the state machine (PRM "QP State Transitions"; Linux
// enum mlx5_qp_state in include/linux/mlx5/qp.h, MLX5_QP_STATE_<name>). Linux's
// mlx5_ifc.h disagrees on one value (its MLX5_QPC_STATE_SQD is 0x7, where its qp.h has
// 5); we follow qp.h, as the driver and the model always have.
#define CXV_QP_STATES(X) \
    X(RST, 0x0)          \
    X(INIT, 0x1)         \
    X(RTR, 0x2)          \
    X(RTS, 0x3)          \
    X(SQER, 0x4)         \
    X(SQD, 0x5)          \
    X(ERR, 0x6)

enum class qp_state : std::uint32_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_QP_STATES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// The bits of the transitions' opt_param_mask: which optional context fields a
// transition applies (PRM "QP Optional Parameter Mask"; Linux enum mlx5_qp_optpar,
// MLX5_QP_OPTPAR_<name>). A namespace around a plain enum, so that the bits combine
// into a mask as the command's 32-bit field does.
#define CXV_QP_OPTPARS(X)      \
    X(ALT_ADDR_PATH, 1u << 0)  \
    X(RRE, 1u << 1)            \
    X(RAE, 1u << 2)            \
    X(RWE, 1u << 3)            \
    X(PKEY_INDEX, 1u << 4)     \
    X(Q_KEY, 1u << 5)          \
    X(RNR_TIMEOUT, 1u << 6)    \
    X(PM_STATE, 1u << 10)      \
    X(LAG_TX_AFF, 1u << 15)    \
    X(PRI_PORT, 1u << 16)      \
    X(SRQN, 1u << 18)          \
    X(CQN_RCV, 1u << 19)       \
    X(COUNTER_SET_ID, 1u << 25)

namespace qp_optpar {
enum bit : std::uint32_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_QP_OPTPARS(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};
}  // namespace qp_optpar

// PRM CREATE_QP: the new QP starts in RST. The buffer is given by the page list (pas)
// after the fixed part, or by a umem when wq_umem_valid is set; ece offers enhanced
// connection establishment options, and the output returns the ones accepted.
#define CXV_IFC_create_qp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    F(input_qpn, 0x048, 24)              \
    F(opt_param_mask, 0x080, 32)         \
    F(ece, 0x0a0, 32)                    \
    S(qpc, 0x0c0, qpc)                   \
    F(wq_umem_offset, 0x800, 64)         \
    F(wq_umem_id, 0x840, 32)             \
    F(wq_umem_valid, 0x860, 1)           \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(create_qp_in, 0x880)

#define CXV_IFC_create_qp_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(qpn, 0x048, 24)                     \
    F(ece, 0x060, 32)
CXV_IFC_LAYOUT(create_qp_out, 0x80)

// PRM DESTROY_QP.
#define CXV_IFC_destroy_qp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(qpn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_qp_in, 0x80)

#define CXV_IFC_destroy_qp_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_qp_out, 0x80)

// PRM QUERY_QP: returns the current context and the QP's page list.
#define CXV_IFC_query_qp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(qpn, 0x048, 24)
CXV_IFC_LAYOUT(query_qp_in, 0x80)

#define CXV_IFC_query_qp_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    F(opt_param_mask, 0x080, 32)         \
    F(ece, 0x0a0, 32)                    \
    S(qpc, 0x0c0, qpc)                   \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(query_qp_out, 0x880)

// The QP state transitions (PRM RST2INIT_QP, INIT2INIT_QP, INIT2RTR_QP, RTR2RTS_QP,
// RTS2RTS_QP, SQERR2RTS_QP, SQD2RTS_QP, 2ERR_QP, 2RST_QP). The modifying ones share one
// shape: the QP number, opt_param_mask selecting which optional context fields to
// change, and a full qpc; the first five also negotiate ece. 2ERR and 2RST take only
// the QP number. So they share tables; each command still has its own layout type (and
// its own entry in the conformance test).
#define CXV_IFC_QP_MODIFY_ECE_IN(F, S, A, T) \
    F(opcode, 0x000, 16)                     \
    F(uid, 0x010, 16)                        \
    F(op_mod, 0x030, 16)                     \
    F(qpn, 0x048, 24)                        \
    F(opt_param_mask, 0x080, 32)             \
    F(ece, 0x0a0, 32)                        \
    S(qpc, 0x0c0, qpc)
#define CXV_IFC_QP_MODIFY_ECE_OUT(F, S, A, T) \
    F(status, 0x000, 8)                       \
    F(syndrome, 0x020, 32)                    \
    F(ece, 0x060, 32)
#define CXV_IFC_QP_MODIFY_IN(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    F(qpn, 0x048, 24)                    \
    F(opt_param_mask, 0x080, 32)         \
    S(qpc, 0x0c0, qpc)
#define CXV_IFC_QP_NUMBER_IN(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    F(qpn, 0x048, 24)

#define CXV_IFC_rst2init_qp_in CXV_IFC_QP_MODIFY_ECE_IN
CXV_IFC_LAYOUT(rst2init_qp_in, 0x880)
#define CXV_IFC_rst2init_qp_out CXV_IFC_QP_MODIFY_ECE_OUT
CXV_IFC_LAYOUT(rst2init_qp_out, 0x80)

#define CXV_IFC_init2init_qp_in CXV_IFC_QP_MODIFY_ECE_IN
CXV_IFC_LAYOUT(init2init_qp_in, 0x880)
#define CXV_IFC_init2init_qp_out CXV_IFC_QP_MODIFY_ECE_OUT
CXV_IFC_LAYOUT(init2init_qp_out, 0x80)

#define CXV_IFC_init2rtr_qp_in CXV_IFC_QP_MODIFY_ECE_IN
CXV_IFC_LAYOUT(init2rtr_qp_in, 0x880)
#define CXV_IFC_init2rtr_qp_out CXV_IFC_QP_MODIFY_ECE_OUT
CXV_IFC_LAYOUT(init2rtr_qp_out, 0x80)

#define CXV_IFC_rtr2rts_qp_in CXV_IFC_QP_MODIFY_ECE_IN
CXV_IFC_LAYOUT(rtr2rts_qp_in, 0x880)
#define CXV_IFC_rtr2rts_qp_out CXV_IFC_QP_MODIFY_ECE_OUT
CXV_IFC_LAYOUT(rtr2rts_qp_out, 0x80)

#define CXV_IFC_rts2rts_qp_in CXV_IFC_QP_MODIFY_ECE_IN
CXV_IFC_LAYOUT(rts2rts_qp_in, 0x880)
#define CXV_IFC_rts2rts_qp_out CXV_IFC_QP_MODIFY_ECE_OUT
CXV_IFC_LAYOUT(rts2rts_qp_out, 0x80)

#define CXV_IFC_sqerr2rts_qp_in CXV_IFC_QP_MODIFY_IN
CXV_IFC_LAYOUT(sqerr2rts_qp_in, 0x880)
#define CXV_IFC_sqerr2rts_qp_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(sqerr2rts_qp_out, 0x80)

#define CXV_IFC_sqd2rts_qp_in CXV_IFC_QP_MODIFY_IN
CXV_IFC_LAYOUT(sqd2rts_qp_in, 0x880)
#define CXV_IFC_sqd2rts_qp_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(sqd2rts_qp_out, 0x80)

#define CXV_IFC_qp_2err_in CXV_IFC_QP_NUMBER_IN
CXV_IFC_LAYOUT(qp_2err_in, 0x80)
#define CXV_IFC_qp_2err_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(qp_2err_out, 0x80)

#define CXV_IFC_qp_2rst_in CXV_IFC_QP_NUMBER_IN
CXV_IFC_LAYOUT(qp_2rst_in, 0x80)
#define CXV_IFC_qp_2rst_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(qp_2rst_out, 0x80)

// --- SRQ ---------------------------------------------------------------------------

// PRM "SRQ Context" (SRQC): a shared receive queue's size, stride, buffer, doorbell
// record and the CQ (for XRC SRQs) and PD it uses. lwm is the limit watermark: when
// armed, the SRQ raises an SRQ-limit event once fewer than lwm WQEs remain posted.
#define CXV_IFC_srqc(F, S, A, T) \
    F(state, 0x000, 4)           \
    F(log_srq_size, 0x004, 4)    \
    F(wq_signature, 0x020, 1)    \
    F(cont_srq, 0x021, 1)        \
    F(rlky, 0x023, 1)            \
    F(log_rq_stride, 0x025, 3)   \
    F(xrcd, 0x028, 24)           \
    F(page_offset, 0x040, 6)     \
    F(cqn, 0x048, 24)            \
    F(log_page_size, 0x082, 6)   \
    F(pd, 0x0c8, 24)             \
    F(lwm, 0x0e0, 16)            \
    F(wqe_cnt, 0x0f0, 16)        \
    F(dbr_addr, 0x140, 64)
CXV_IFC_LAYOUT(srqc, 0x200)

// srqc.state: an SRQ is good, or in error after a failure the device could not complete
// (Linux MLX5_SRQC_STATE_*).
namespace srqc_values {
inline constexpr std::uint32_t state_good = 0x0, state_error = 0x1;
}  // namespace srqc_values

// PRM CREATE_SRQ: the context, then the buffer's page list.
#define CXV_IFC_create_srq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    S(srq_context_entry, 0x080, srqc)     \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(create_srq_in, 0x880)

#define CXV_IFC_create_srq_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(srqn, 0x048, 24)
CXV_IFC_LAYOUT(create_srq_out, 0x80)

// PRM DESTROY_SRQ.
#define CXV_IFC_destroy_srq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(srqn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_srq_in, 0x80)

#define CXV_IFC_destroy_srq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_srq_out, 0x80)

// PRM QUERY_SRQ: returns the context (with the current wqe_cnt) and the page list.
#define CXV_IFC_query_srq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(op_mod, 0x030, 16)                 \
    F(srqn, 0x048, 24)
CXV_IFC_LAYOUT(query_srq_in, 0x80)

#define CXV_IFC_query_srq_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    S(srq_context_entry, 0x080, srqc)     \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(query_srq_out, 0x880)

// PRM ARM_RQ: with op_mod SRQ (1), sets the SRQ's limit watermark to lwm and arms the
// one-shot limit event for srq_number (op_mod XRQ does the same for an XRQ).
#define CXV_IFC_arm_rq_in(F, S, A, T) \
    F(opcode, 0x000, 16)              \
    F(uid, 0x010, 16)                 \
    F(op_mod, 0x030, 16)              \
    F(srq_number, 0x048, 24)          \
    F(lwm, 0x070, 16)
CXV_IFC_LAYOUT(arm_rq_in, 0x80)

// ARM_RQ op_mod: what srq_number names, an SRQ or an XRQ (Linux MLX5_ARM_RQ_IN_OP_MOD_*).
namespace arm_rq_op_mod {
inline constexpr std::uint16_t srq = 0x1, xrq = 0x2;
}  // namespace arm_rq_op_mod

#define CXV_IFC_arm_rq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(arm_rq_out, 0x80)

// --- XRC domains, XRC SRQs, RMPs ---------------------------------------------------------

// PRM ALLOC_XRCD / DEALLOC_XRCD: an XRC domain, which XRC SRQs and XRC QPs belong to.
#define CXV_IFC_alloc_xrcd_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(alloc_xrcd_in, 0x80)

#define CXV_IFC_alloc_xrcd_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(xrcd, 0x048, 24)
CXV_IFC_LAYOUT(alloc_xrcd_out, 0x80)

#define CXV_IFC_dealloc_xrcd_in(F, S, A, T) \
    F(opcode, 0x000, 16)                    \
    F(uid, 0x010, 16)                       \
    F(op_mod, 0x030, 16)                    \
    F(xrcd, 0x048, 24)
CXV_IFC_LAYOUT(dealloc_xrcd_in, 0x80)

#define CXV_IFC_dealloc_xrcd_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_xrcd_out, 0x80)

// PRM "XRC SRQ Context": the SRQ context's layout (srqc) with the XRC domain and CQ it
// belongs to used, the user index its completions report, and the doorbell record's
// address in two dwords (its low 2 bits reserved).
#define CXV_IFC_xrc_srqc(F, S, A, T)        \
    F(state, 0x000, 4)                      \
    F(log_xrc_srq_size, 0x004, 4)           \
    F(wq_signature, 0x020, 1)               \
    F(cont_srq, 0x021, 1)                   \
    F(rlky, 0x023, 1)                       \
    F(basic_cyclic_rcv_wqe, 0x024, 1)       \
    F(log_rq_stride, 0x025, 3)              \
    F(xrcd, 0x028, 24)                      \
    F(page_offset, 0x040, 6)                \
    F(dbr_umem_valid, 0x047, 1)             \
    F(cqn, 0x048, 24)                       \
    F(user_index_equal_xrc_srqn, 0x080, 1)  \
    F(log_page_size, 0x082, 6)              \
    F(user_index, 0x088, 24)                \
    F(pd, 0x0c8, 24)                        \
    F(lwm, 0x0e0, 16)                       \
    F(wqe_cnt, 0x0f0, 16)                   \
    F(db_record_addr_h, 0x140, 32)          \
    F(db_record_addr_l, 0x160, 30)
CXV_IFC_LAYOUT(xrc_srqc, 0x200)

// PRM CREATE_XRC_SRQ: the context, then the buffer's page list (at CREATE_SRQ's offset).
#define CXV_IFC_create_xrc_srq_in(F, S, A, T)     \
    F(opcode, 0x000, 16)                          \
    F(uid, 0x010, 16)                             \
    F(op_mod, 0x030, 16)                          \
    S(xrc_srq_context_entry, 0x080, xrc_srqc)     \
    F(xrc_srq_umem_valid, 0x2e0, 1)               \
    A(pas, 0x880, 64, 0)
CXV_IFC_LAYOUT(create_xrc_srq_in, 0x880)

#define CXV_IFC_create_xrc_srq_out(F, S, A, T) \
    F(status, 0x000, 8)                        \
    F(syndrome, 0x020, 32)                     \
    F(xrc_srqn, 0x048, 24)
CXV_IFC_LAYOUT(create_xrc_srq_out, 0x80)

#define CXV_IFC_destroy_xrc_srq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                       \
    F(uid, 0x010, 16)                          \
    F(op_mod, 0x030, 16)                       \
    F(xrc_srqn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_xrc_srq_in, 0x80)

#define CXV_IFC_destroy_xrc_srq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_xrc_srq_out, 0x80)

// PRM "Work Queue" (wq): the part of an RMP's (and RQ's, SQ's) context that describes its
// buffer: type, geometry, PD, doorbell record; the page list follows it.
#define CXV_IFC_wq(F, S, A, T)           \
    F(wq_type, 0x000, 4)                 \
    F(wq_signature, 0x004, 1)            \
    F(end_padding_mode, 0x005, 2)        \
    F(cd_slave, 0x007, 1)                \
    F(page_offset, 0x02b, 5)             \
    F(lwm, 0x030, 16)                    \
    F(pd, 0x048, 24)                     \
    F(uar_page, 0x068, 24)               \
    F(dbr_addr, 0x080, 64)               \
    F(hw_counter, 0x0c0, 32)             \
    F(sw_counter, 0x0e0, 32)             \
    F(log_wq_stride, 0x10c, 4)           \
    F(log_wq_pg_sz, 0x113, 5)            \
    F(log_wq_sz, 0x11b, 5)               \
    F(dbr_umem_valid, 0x120, 1)          \
    F(wq_umem_valid, 0x121, 1)           \
    F(log_wqe_num_of_strides, 0x134, 4)  \
    F(log_wqe_stride_size, 0x13d, 3)     \
    A(pas, 0x600, 64, 0)
CXV_IFC_LAYOUT(wq, 0x600)

// wq.wq_type (Linux MLX5_WQ_TYPE_*): WQEs chained by their next segments, or a ring.
namespace wq_values {
inline constexpr std::uint32_t type_linked_list = 0x0, type_cyclic = 0x1;
}  // namespace wq_values

// PRM "RMP Context" (rmpc): a receive memory pool, the SRQ of an ISSI 1 driver (Linux's
// mlx5_ib makes its basic SRQs so); its state and its wq.
#define CXV_IFC_rmpc(F, S, A, T)           \
    F(state, 0x008, 4)                     \
    F(basic_cyclic_rcv_wqe, 0x020, 1)      \
    S(wq, 0x180, wq)
CXV_IFC_LAYOUT(rmpc, 0x780)

// rmpc.state (Linux MLX5_RMPC_STATE_*).
namespace rmpc_values {
inline constexpr std::uint32_t state_rdy = 0x1, state_err = 0x3;
}  // namespace rmpc_values

#define CXV_IFC_create_rmp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    S(ctx, 0x100, rmpc)
CXV_IFC_LAYOUT(create_rmp_in, 0x880)

#define CXV_IFC_create_rmp_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(rmpn, 0x048, 24)
CXV_IFC_LAYOUT(create_rmp_out, 0x80)

#define CXV_IFC_destroy_rmp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(rmpn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_rmp_in, 0x80)

#define CXV_IFC_destroy_rmp_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_rmp_out, 0x80)

// PRM MODIFY_RMP: the RMP's current state (rmp_state) and its next one (ctx.state); the
// context's fields the bitmask selects are changed (lwm, the limit, is the only one).
#define CXV_IFC_rmp_bitmask(F, S, A, T) \
    F(lwm, 0x03f, 1)
CXV_IFC_LAYOUT(rmp_bitmask, 0x40)

#define CXV_IFC_modify_rmp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(rmp_state, 0x040, 4)                \
    F(rmpn, 0x048, 24)                    \
    S(bitmask, 0x080, rmp_bitmask)        \
    S(ctx, 0x100, rmpc)
CXV_IFC_LAYOUT(modify_rmp_in, 0x880)

#define CXV_IFC_modify_rmp_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_rmp_out, 0x80)

// PRM QUERY_RMP: the context as the device has it (state, the armed limit, the counters),
// then the page list.
#define CXV_IFC_query_rmp_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(op_mod, 0x030, 16)                 \
    F(rmpn, 0x048, 24)
CXV_IFC_LAYOUT(query_rmp_in, 0x80)

#define CXV_IFC_query_rmp_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    S(rmp_context, 0x100, rmpc)
CXV_IFC_LAYOUT(query_rmp_out, 0x880)

// PRM ATTACH_TO_MCG, DETACH_FROM_MCG: a UD QP joins or leaves the multicast group
// multicast_gid (IBA 10.5 "Multicast"): the device hands it a copy of each packet to
// destination QP 0xFFFFFF whose DGID is that group.
#define CXV_IFC_attach_to_mcg_in(F, S, A, T) \
    F(opcode, 0x000, 16)                     \
    F(uid, 0x010, 16)                        \
    F(op_mod, 0x030, 16)                     \
    F(qpn, 0x048, 24)                        \
    A(multicast_gid, 0x080, 8, 16)
CXV_IFC_LAYOUT(attach_to_mcg_in, 0x100)

#define CXV_IFC_attach_to_mcg_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(attach_to_mcg_out, 0x80)

#define CXV_IFC_detach_from_mcg_in CXV_IFC_attach_to_mcg_in
CXV_IFC_LAYOUT(detach_from_mcg_in, 0x100)

#define CXV_IFC_detach_from_mcg_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(detach_from_mcg_out, 0x80)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_QP(X)             \
    X(ads, ads)                           \
    X(qpc, qpc)                           \
    X(create_qp_in, create_qp_in)         \
    X(create_qp_out, create_qp_out)       \
    X(destroy_qp_in, destroy_qp_in)       \
    X(destroy_qp_out, destroy_qp_out)     \
    X(query_qp_in, query_qp_in)           \
    X(query_qp_out, query_qp_out)         \
    X(rst2init_qp_in, rst2init_qp_in)     \
    X(rst2init_qp_out, rst2init_qp_out)   \
    X(init2init_qp_in, init2init_qp_in)   \
    X(init2init_qp_out, init2init_qp_out) \
    X(init2rtr_qp_in, init2rtr_qp_in)     \
    X(init2rtr_qp_out, init2rtr_qp_out)   \
    X(rtr2rts_qp_in, rtr2rts_qp_in)       \
    X(rtr2rts_qp_out, rtr2rts_qp_out)     \
    X(rts2rts_qp_in, rts2rts_qp_in)       \
    X(rts2rts_qp_out, rts2rts_qp_out)     \
    X(sqerr2rts_qp_in, sqerr2rts_qp_in)   \
    X(sqerr2rts_qp_out, sqerr2rts_qp_out) \
    X(sqd2rts_qp_in, sqd2rts_qp_in)       \
    X(sqd2rts_qp_out, sqd2rts_qp_out)     \
    X(qp_2err_in, qp_2err_in)             \
    X(qp_2err_out, qp_2err_out)           \
    X(qp_2rst_in, qp_2rst_in)             \
    X(qp_2rst_out, qp_2rst_out)           \
    X(attach_to_mcg_in, attach_to_mcg_in)       \
    X(attach_to_mcg_out, attach_to_mcg_out)     \
    X(detach_from_mcg_in, detach_from_mcg_in)   \
    X(detach_from_mcg_out, detach_from_mcg_out) \
    X(srqc, srqc)                         \
    X(create_srq_in, create_srq_in)       \
    X(create_srq_out, create_srq_out)     \
    X(destroy_srq_in, destroy_srq_in)     \
    X(destroy_srq_out, destroy_srq_out)   \
    X(query_srq_in, query_srq_in)         \
    X(query_srq_out, query_srq_out)       \
    X(arm_rq_in, arm_rq_in)               \
    X(arm_rq_out, arm_rq_out)             \
    X(alloc_xrcd_in, alloc_xrcd_in)       \
    X(alloc_xrcd_out, alloc_xrcd_out)     \
    X(dealloc_xrcd_in, dealloc_xrcd_in)   \
    X(dealloc_xrcd_out, dealloc_xrcd_out) \
    X(xrc_srqc, xrc_srqc)                 \
    X(create_xrc_srq_in, create_xrc_srq_in)   \
    X(create_xrc_srq_out, create_xrc_srq_out) \
    X(destroy_xrc_srq_in, destroy_xrc_srq_in) \
    X(destroy_xrc_srq_out, destroy_xrc_srq_out) \
    X(wq, wq)                             \
    X(rmpc, rmpc)                         \
    X(create_rmp_in, create_rmp_in)       \
    X(create_rmp_out, create_rmp_out)     \
    X(destroy_rmp_in, destroy_rmp_in)     \
    X(destroy_rmp_out, destroy_rmp_out)   \
    X(rmp_bitmask, rmp_bitmask)           \
    X(modify_rmp_in, modify_rmp_in)       \
    X(modify_rmp_out, modify_rmp_out)     \
    X(query_rmp_in, query_rmp_in)         \
    X(query_rmp_out, query_rmp_out)

}  // namespace cxv::hw::ifc
