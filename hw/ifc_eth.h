// The Ethernet transport objects and their commands (PRM "Transport Interface"): the
// transport domain, TIS (transport interface send), SQ and RQ (send and receive queues,
// each with a "wq" describing its buffer), RQT (RQ table, for RSS) and TIR (transport
// interface receive: one RQ, or an RQT with a hash). Names and offsets follow the PRM's
// tables; tests/hw checks them against Linux's mlx5_ifc.h.
#pragma once

#include <cstdint>

#include "hw/ifc_cmd.h"
#include "hw/ifc_qp.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- transport domain ------------------------------------------------------------------

// PRM ALLOC_TRANSPORT_DOMAIN: a number TISs and TIRs name; loopback between them is
// decided by it (a TIR's self_lb_block).
#define CXV_IFC_alloc_transport_domain_in(F, S, A, T) \
    F(opcode, 0x000, 16)                              \
    F(uid, 0x010, 16)                                 \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(alloc_transport_domain_in, 0x80)

#define CXV_IFC_alloc_transport_domain_out(F, S, A, T) \
    F(status, 0x000, 8)                                \
    F(syndrome, 0x020, 32)                             \
    F(transport_domain, 0x048, 24)
CXV_IFC_LAYOUT(alloc_transport_domain_out, 0x80)

#define CXV_IFC_dealloc_transport_domain_in(F, S, A, T) \
    F(opcode, 0x000, 16)                                \
    F(uid, 0x010, 16)                                   \
    F(op_mod, 0x030, 16)                                \
    F(transport_domain, 0x048, 24)
CXV_IFC_LAYOUT(dealloc_transport_domain_in, 0x80)

#define CXV_IFC_dealloc_transport_domain_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_transport_domain_out, 0x80)

// --- TIS -------------------------------------------------------------------------------

// PRM "TIS Context": the priority and transport domain an SQ's packets go out with.
#define CXV_IFC_tisc(F, S, A, T)                \
    F(strict_lag_tx_port_affinity, 0x000, 1)    \
    F(lag_tx_port_affinity, 0x004, 4)           \
    F(prio, 0x00c, 4)                           \
    F(transport_domain, 0x128, 24)              \
    F(underlay_qpn, 0x148, 24)                  \
    F(pd, 0x168, 24)
CXV_IFC_LAYOUT(tisc, 0x500)

#define CXV_IFC_create_tis_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    S(ctx, 0x100, tisc)
CXV_IFC_LAYOUT(create_tis_in, 0x600)

#define CXV_IFC_create_tis_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(tisn, 0x048, 24)
CXV_IFC_LAYOUT(create_tis_out, 0x80)

#define CXV_IFC_destroy_tis_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(tisn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_tis_in, 0x80)

#define CXV_IFC_destroy_tis_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_tis_out, 0x80)

#define CXV_IFC_query_tis_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(op_mod, 0x030, 16)                 \
    F(tisn, 0x048, 24)
CXV_IFC_LAYOUT(query_tis_in, 0x80)

#define CXV_IFC_query_tis_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    S(tis_context, 0x080, tisc)
CXV_IFC_LAYOUT(query_tis_out, 0x580)

// --- SQ and RQ -------------------------------------------------------------------------

// PRM "SQ Context": state, the CQ its completions go to, its TIS (one: tis_lst_sz 1), and
// its wq (cyclic, 64-byte basic blocks).
#define CXV_IFC_sqc(F, S, A, T)               \
    F(rlky, 0x000, 1)                         \
    F(cd_master, 0x001, 1)                    \
    F(fre, 0x002, 1)                          \
    F(flush_in_error_en, 0x003, 1)            \
    F(allow_multi_pkt_send_wqe, 0x004, 1)     \
    F(min_wqe_inline_mode, 0x005, 3)          \
    F(state, 0x008, 4)                        \
    F(reg_umr, 0x00c, 1)                      \
    F(allow_swp, 0x00d, 1)                    \
    F(hairpin, 0x00e, 1)                      \
    F(ts_format, 0x01a, 2)                    \
    F(user_index, 0x028, 24)                  \
    F(cqn, 0x048, 24)                         \
    F(packet_pacing_rate_limit_index, 0x0f0, 16) \
    F(tis_lst_sz, 0x100, 16)                  \
    F(tis_num_0, 0x168, 24)                   \
    S(wq, 0x180, wq)
CXV_IFC_LAYOUT(sqc, 0x780)

// PRM "RQ Context": state, the CQ, where its WQEs live (inline: its own wq), VLAN
// stripping (vsd: disabled when 1), the FCS kept (scatter_fcs), its Q counter set, and
// its wq (cyclic or striding).
#define CXV_IFC_rqc(F, S, A, T)        \
    F(rlky, 0x000, 1)                  \
    F(delay_drop_en, 0x001, 1)         \
    F(scatter_fcs, 0x002, 1)           \
    F(vsd, 0x003, 1)                   \
    F(mem_rq_type, 0x004, 4)           \
    F(state, 0x008, 4)                 \
    F(flush_in_error_en, 0x00d, 1)     \
    F(hairpin, 0x00e, 1)               \
    F(ts_format, 0x01a, 2)             \
    F(user_index, 0x028, 24)           \
    F(cqn, 0x048, 24)                  \
    F(counter_set_id, 0x060, 8)        \
    F(rmpn, 0x088, 24)                 \
    S(wq, 0x180, wq)
CXV_IFC_LAYOUT(rqc, 0x780)

#define CXV_IFC_create_sq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    S(ctx, 0x100, sqc)
CXV_IFC_LAYOUT(create_sq_in, 0x880)

#define CXV_IFC_create_sq_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(sqn, 0x048, 24)
CXV_IFC_LAYOUT(create_sq_out, 0x80)

// PRM MODIFY_SQ: sq_state is the state the driver believes the SQ is in; the new one is
// ctx.state. modify_bitmask names the other context fields changed (bit 0: the rate
// limit index; none is modelled).
#define CXV_IFC_modify_sq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    F(sq_state, 0x040, 4)                \
    F(sqn, 0x048, 24)                    \
    F(modify_bitmask, 0x080, 64)         \
    S(ctx, 0x100, sqc)
CXV_IFC_LAYOUT(modify_sq_in, 0x880)

#define CXV_IFC_modify_sq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_sq_out, 0x80)

#define CXV_IFC_destroy_sq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(sqn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_sq_in, 0x80)

#define CXV_IFC_destroy_sq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_sq_out, 0x80)

#define CXV_IFC_query_sq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(sqn, 0x048, 24)
CXV_IFC_LAYOUT(query_sq_in, 0x80)

#define CXV_IFC_query_sq_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    S(sq_context, 0x100, sqc)
CXV_IFC_LAYOUT(query_sq_out, 0x880)

#define CXV_IFC_create_rq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    S(ctx, 0x100, rqc)
CXV_IFC_LAYOUT(create_rq_in, 0x880)

#define CXV_IFC_create_rq_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    F(rqn, 0x048, 24)
CXV_IFC_LAYOUT(create_rq_out, 0x80)

// PRM MODIFY_RQ: rq_state is the current state, ctx.state the new one; modify_bitmask
// bit 1 changes vsd, bit 2 scatter_fcs, bit 3 counter_set_id (Linux
// MLX5_MODIFY_RQ_IN_MODIFY_BITMASK_*).
#define CXV_IFC_modify_rq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(uid, 0x010, 16)                    \
    F(op_mod, 0x030, 16)                 \
    F(rq_state, 0x040, 4)                \
    F(rqn, 0x048, 24)                    \
    F(modify_bitmask, 0x080, 64)         \
    S(ctx, 0x100, rqc)
CXV_IFC_LAYOUT(modify_rq_in, 0x880)

#define CXV_IFC_modify_rq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_rq_out, 0x80)

#define CXV_IFC_destroy_rq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(rqn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_rq_in, 0x80)

#define CXV_IFC_destroy_rq_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_rq_out, 0x80)

#define CXV_IFC_query_rq_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(rqn, 0x048, 24)
CXV_IFC_LAYOUT(query_rq_in, 0x80)

#define CXV_IFC_query_rq_out(F, S, A, T) \
    F(status, 0x000, 8)                  \
    F(syndrome, 0x020, 32)               \
    S(rq_context, 0x100, rqc)
CXV_IFC_LAYOUT(query_rq_out, 0x880)

// sqc.state and rqc.state (Linux MLX5_SQC_STATE_*, MLX5_RQC_STATE_*), rqc.mem_rq_type,
// and the striding wq types (wq_values has the linked list and the cyclic ring).
enum class wq_state : std::uint8_t { RST = 0x0, RDY = 0x1, ERR = 0x3 };
namespace rqc_values {
inline constexpr std::uint32_t mem_rq_type_inline = 0x0, mem_rq_type_rmp = 0x1;
}  // namespace rqc_values
namespace wq_values {
inline constexpr std::uint32_t type_linked_list_striding = 0x2, type_cyclic_striding = 0x3;
}  // namespace wq_values

// --- RQT and TIR -----------------------------------------------------------------------

// PRM "RQT Context": a table of RQ numbers a TIR's hash indexes (rq_num entries of 32
// bits, the number in the low 24, after the context).
#define CXV_IFC_rqtc(F, S, A, T)      \
    F(list_q_type, 0x0a5, 3)          \
    F(rqt_max_size, 0x0b0, 16)        \
    F(rqt_actual_size, 0x0d0, 16)     \
    A(rq_num, 0x780, 32, 0)
CXV_IFC_LAYOUT(rqtc, 0x780)

#define CXV_IFC_create_rqt_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    S(rqt_context, 0x100, rqtc)
CXV_IFC_LAYOUT(create_rqt_in, 0x880)

#define CXV_IFC_create_rqt_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(rqtn, 0x048, 24)
CXV_IFC_LAYOUT(create_rqt_out, 0x80)

// PRM MODIFY_RQT: bitmask.rqn_list replaces the table's entries.
#define CXV_IFC_rqt_bitmask(F, S, A, T) F(rqn_list, 0x03f, 1)
CXV_IFC_LAYOUT(rqt_bitmask, 0x40)

#define CXV_IFC_modify_rqt_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(rqtn, 0x048, 24)                    \
    S(bitmask, 0x080, rqt_bitmask)        \
    S(ctx, 0x100, rqtc)
CXV_IFC_LAYOUT(modify_rqt_in, 0x880)

#define CXV_IFC_modify_rqt_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_rqt_out, 0x80)

#define CXV_IFC_destroy_rqt_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(rqtn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_rqt_in, 0x80)

#define CXV_IFC_destroy_rqt_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_rqt_out, 0x80)

// PRM "RX Hash Field Select": which headers a TIR's hash reads (l3: IPv4 0, IPv6 1; l4:
// TCP 0, UDP 1; selected_fields: a bit per field, numbered below).
#define CXV_IFC_rx_hash_field_select(F, S, A, T) \
    F(l3_prot_type, 0x000, 1)                    \
    F(l4_prot_type, 0x001, 1)                    \
    F(selected_fields, 0x002, 30)
CXV_IFC_LAYOUT(rx_hash_field_select, 0x20)

// PRM "TIR Context": where a packet steered to this TIR goes, one RQ (disp_type DIRECT,
// inline_rqn) or the RQ an RQT's entry names (INDIRECT, indirect_table) by the packet's
// hash (rx_hash_fn over the selected fields with the Toeplitz key); the transport domain
// and loopback blocking (self_lb_block: bit 0 unicast, bit 1 multicast).
#define CXV_IFC_tirc(F, S, A, T)                                \
    F(disp_type, 0x020, 4)                                      \
    F(lro_timeout_period_usecs, 0x084, 16)                      \
    F(packet_merge_mask, 0x094, 4)                              \
    F(lro_max_ip_payload_size, 0x098, 8)                        \
    F(inline_rqn, 0x0e8, 24)                                    \
    F(rx_hash_symmetric, 0x100, 1)                              \
    F(tunneled_offload_en, 0x102, 1)                            \
    F(indirect_table, 0x108, 24)                                \
    F(rx_hash_fn, 0x120, 4)                                     \
    F(self_lb_block, 0x126, 2)                                  \
    F(transport_domain, 0x128, 24)                              \
    A(rx_hash_toeplitz_key, 0x140, 32, 10)                      \
    S(rx_hash_field_selector_outer, 0x280, rx_hash_field_select) \
    S(rx_hash_field_selector_inner, 0x2a0, rx_hash_field_select)
CXV_IFC_LAYOUT(tirc, 0x780)

#define CXV_IFC_create_tir_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    S(ctx, 0x100, tirc)
CXV_IFC_LAYOUT(create_tir_in, 0x880)

#define CXV_IFC_create_tir_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(tirn, 0x048, 24)
CXV_IFC_LAYOUT(create_tir_out, 0x80)

// PRM MODIFY_TIR: the bitmask names what changes (the hash, loopback, packet merging).
#define CXV_IFC_modify_tir_bitmask(F, S, A, T) \
    F(self_lb_en, 0x03b, 1)                    \
    F(hash, 0x03d, 1)                          \
    F(packet_merge, 0x03f, 1)
CXV_IFC_LAYOUT(modify_tir_bitmask, 0x40)

#define CXV_IFC_modify_tir_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(uid, 0x010, 16)                     \
    F(op_mod, 0x030, 16)                  \
    F(tirn, 0x048, 24)                    \
    S(bitmask, 0x080, modify_tir_bitmask) \
    S(ctx, 0x100, tirc)
CXV_IFC_LAYOUT(modify_tir_in, 0x880)

#define CXV_IFC_modify_tir_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_tir_out, 0x80)

#define CXV_IFC_destroy_tir_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(uid, 0x010, 16)                      \
    F(op_mod, 0x030, 16)                   \
    F(tirn, 0x048, 24)
CXV_IFC_LAYOUT(destroy_tir_in, 0x80)

#define CXV_IFC_destroy_tir_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_tir_out, 0x80)

#define CXV_IFC_query_tir_in(F, S, A, T) \
    F(opcode, 0x000, 16)                 \
    F(op_mod, 0x030, 16)                 \
    F(tirn, 0x048, 24)
CXV_IFC_LAYOUT(query_tir_in, 0x80)

#define CXV_IFC_query_tir_out(F, S, A, T) \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    S(tir_context, 0x100, tirc)
CXV_IFC_LAYOUT(query_tir_out, 0x880)

// tirc.disp_type, tirc.rx_hash_fn (Linux MLX5_TIRC_DISP_TYPE_*, MLX5_RX_HASH_FN_*), and
// the bit numbers of rx_hash_field_select.selected_fields
// (MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_*).
enum class tir_disp_type : std::uint8_t { DIRECT = 0x0, INDIRECT = 0x1 };
enum class rx_hash_fn : std::uint8_t { NONE = 0x0, INVERTED_XOR8 = 0x1, TOEPLITZ = 0x2 };
enum class rx_hash_field : std::uint8_t { SRC_IP = 0x0, DST_IP = 0x1, L4_SPORT = 0x2, L4_DPORT = 0x3, IPSEC_SPI = 0x4 };

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_ETH(X)                                     \
    X(alloc_transport_domain_in, alloc_transport_domain_in)       \
    X(alloc_transport_domain_out, alloc_transport_domain_out)     \
    X(dealloc_transport_domain_in, dealloc_transport_domain_in)   \
    X(dealloc_transport_domain_out, dealloc_transport_domain_out) \
    X(tisc, tisc)                                                 \
    X(create_tis_in, create_tis_in)                               \
    X(create_tis_out, create_tis_out)                             \
    X(destroy_tis_in, destroy_tis_in)                             \
    X(destroy_tis_out, destroy_tis_out)                           \
    X(query_tis_in, query_tis_in)                                 \
    X(query_tis_out, query_tis_out)                               \
    X(sqc, sqc)                                                   \
    X(rqc, rqc)                                                   \
    X(create_sq_in, create_sq_in)                                 \
    X(create_sq_out, create_sq_out)                               \
    X(modify_sq_in, modify_sq_in)                                 \
    X(modify_sq_out, modify_sq_out)                               \
    X(destroy_sq_in, destroy_sq_in)                               \
    X(destroy_sq_out, destroy_sq_out)                             \
    X(query_sq_in, query_sq_in)                                   \
    X(query_sq_out, query_sq_out)                                 \
    X(create_rq_in, create_rq_in)                                 \
    X(create_rq_out, create_rq_out)                               \
    X(modify_rq_in, modify_rq_in)                                 \
    X(modify_rq_out, modify_rq_out)                               \
    X(destroy_rq_in, destroy_rq_in)                               \
    X(destroy_rq_out, destroy_rq_out)                             \
    X(query_rq_in, query_rq_in)                                   \
    X(query_rq_out, query_rq_out)                                 \
    X(rqtc, rqtc)                                                 \
    X(create_rqt_in, create_rqt_in)                               \
    X(create_rqt_out, create_rqt_out)                             \
    X(rqt_bitmask, rqt_bitmask)                                   \
    X(modify_rqt_in, modify_rqt_in)                               \
    X(modify_rqt_out, modify_rqt_out)                             \
    X(destroy_rqt_in, destroy_rqt_in)                             \
    X(destroy_rqt_out, destroy_rqt_out)                           \
    X(rx_hash_field_select, rx_hash_field_select)                 \
    X(tirc, tirc)                                                 \
    X(create_tir_in, create_tir_in)                               \
    X(create_tir_out, create_tir_out)                             \
    X(modify_tir_bitmask, modify_tir_bitmask)                     \
    X(modify_tir_in, modify_tir_in)                               \
    X(modify_tir_out, modify_tir_out)                             \
    X(destroy_tir_in, destroy_tir_in)                             \
    X(destroy_tir_out, destroy_tir_out)                           \
    X(query_tir_in, query_tir_in)                                 \
    X(query_tir_out, query_tir_out)

}  // namespace cxv::hw::ifc
