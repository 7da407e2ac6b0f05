// Counters: the Q counter sets QPs count their transport events to (PRM ALLOC_Q_COUNTER,
// QUERY_Q_COUNTER, DEALLOC_Q_COUNTER) and the vport's traffic counters (PRM
// QUERY_VPORT_COUNTER). Names and offsets follow the PRM's tables.
#pragma once

#include "hw/ifc_cmd.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- Q counters ------------------------------------------------------------------------

// PRM ALLOC_Q_COUNTER: a counter set, named by an 8-bit counter_set_id; QPs name it in
// qpc.counter_set_id.
#define CXV_IFC_alloc_q_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                       \
    F(uid, 0x010, 16)                          \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(alloc_q_counter_in, 0x80)

#define CXV_IFC_alloc_q_counter_out(F, S, A, T) \
    F(status, 0x000, 8)                         \
    F(syndrome, 0x020, 32)                      \
    F(counter_set_id, 0x058, 8)
CXV_IFC_LAYOUT(alloc_q_counter_out, 0x80)

#define CXV_IFC_dealloc_q_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                         \
    F(op_mod, 0x030, 16)                         \
    F(counter_set_id, 0x058, 8)
CXV_IFC_LAYOUT(dealloc_q_counter_in, 0x80)

#define CXV_IFC_dealloc_q_counter_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_q_counter_out, 0x80)

// PRM QUERY_Q_COUNTER: clear resets the set after it is read; aggregate (capability
// q_counter_aggregation) returns the sum of every set of the function instead of one.
#define CXV_IFC_query_q_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                       \
    F(op_mod, 0x030, 16)                       \
    F(other_vport, 0x040, 1)                   \
    F(vport_number, 0x050, 16)                 \
    F(clear, 0x0c0, 1)                         \
    F(aggregate, 0x0c1, 1)                     \
    F(counter_set_id, 0x0f8, 8)
CXV_IFC_LAYOUT(query_q_counter_in, 0x100)

// Every counter is 32 bits and wraps.
// X(name) for every counter of QUERY_Q_COUNTER's output that the driver reports and the
// model keeps (the PRM's names; Linux's mlx5_ib exposes the same ones as rdma
// statistics). One list for both sides, so the two cannot name different fields.
#define CXV_IFC_Q_COUNTERS(X)         \
    X(rx_write_requests)              \
    X(rx_read_requests)               \
    X(rx_atomic_requests)             \
    X(out_of_buffer)                  \
    X(out_of_sequence)                \
    X(duplicate_request)              \
    X(rnr_nak_retry_err)              \
    X(packet_seq_err)                 \
    X(implied_nak_seq_err)            \
    X(local_ack_timeout_err)          \
    X(resp_local_length_error)        \
    X(req_local_length_error)         \
    X(local_operation_error)          \
    X(resp_local_protection)          \
    X(req_local_protection)           \
    X(resp_cqe_error)                 \
    X(req_cqe_error)                  \
    X(req_remote_invalid_request)     \
    X(resp_remote_invalid_request)    \
    X(req_remote_access_errors)       \
    X(resp_remote_access_errors)      \
    X(req_remote_operation_errors)    \
    X(req_transport_retries_exceeded) \
    X(resp_cqe_flush_error)           \
    X(req_cqe_flush_error)            \
    X(roce_adp_retrans)               \
    X(roce_adp_retrans_to)

#define CXV_IFC_query_q_counter_out(F, S, A, T) \
    F(status, 0x000, 8)                         \
    F(syndrome, 0x020, 32)                      \
    F(rx_write_requests, 0x080, 32)             \
    F(rx_read_requests, 0x0c0, 32)              \
    F(rx_atomic_requests, 0x100, 32)            \
    F(rx_dct_connect, 0x140, 32)                \
    F(out_of_buffer, 0x180, 32)                 \
    F(out_of_sequence, 0x1c0, 32)               \
    F(duplicate_request, 0x200, 32)             \
    F(rnr_nak_retry_err, 0x240, 32)             \
    F(packet_seq_err, 0x280, 32)                \
    F(implied_nak_seq_err, 0x2c0, 32)           \
    F(local_ack_timeout_err, 0x300, 32)         \
    F(resp_local_length_error, 0x3c0, 32)       \
    F(req_local_length_error, 0x3e0, 32)        \
    F(resp_local_qp_error, 0x400, 32)           \
    F(local_operation_error, 0x420, 32)         \
    F(resp_local_protection, 0x440, 32)         \
    F(req_local_protection, 0x460, 32)          \
    F(resp_cqe_error, 0x480, 32)                \
    F(req_cqe_error, 0x4a0, 32)                 \
    F(req_mw_binding, 0x4c0, 32)                \
    F(req_bad_response, 0x4e0, 32)              \
    F(req_remote_invalid_request, 0x500, 32)    \
    F(resp_remote_invalid_request, 0x520, 32)   \
    F(req_remote_access_errors, 0x540, 32)      \
    F(resp_remote_access_errors, 0x560, 32)     \
    F(req_remote_operation_errors, 0x580, 32)   \
    F(req_transport_retries_exceeded, 0x5a0, 32) \
    F(cq_overflow, 0x5c0, 32)                   \
    F(resp_cqe_flush_error, 0x5e0, 32)          \
    F(req_cqe_flush_error, 0x600, 32)           \
    F(roce_adp_retrans, 0x640, 32)              \
    F(roce_adp_retrans_to, 0x660, 32)           \
    F(roce_slow_restart, 0x680, 32)             \
    F(roce_slow_restart_cnps, 0x6a0, 32)        \
    F(roce_slow_restart_trans, 0x6c0, 32)
CXV_IFC_LAYOUT(query_q_counter_out, 0x800)

// --- vport counters --------------------------------------------------------------------

// PRM Table "Traffic Counter Layout": packets and octets, 64 bits each.
#define CXV_IFC_traffic_counter(F, S, A, T) \
    F(packets, 0x000, 64)                   \
    F(octets, 0x040, 64)
CXV_IFC_LAYOUT(traffic_counter, 0x80)

// PRM QUERY_VPORT_COUNTER (op_mod 0: vport counters): clear resets them after the read.
#define CXV_IFC_query_vport_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                           \
    F(op_mod, 0x030, 16)                           \
    F(other_vport, 0x040, 1)                       \
    F(port_num, 0x04c, 4)                          \
    F(vport_number, 0x050, 16)                     \
    F(clear, 0x0c0, 1)
CXV_IFC_LAYOUT(query_vport_counter_in, 0x100)

#define CXV_IFC_query_vport_counter_out(F, S, A, T)           \
    F(status, 0x000, 8)                                       \
    F(syndrome, 0x020, 32)                                    \
    S(received_errors, 0x080, traffic_counter)                \
    S(transmit_errors, 0x100, traffic_counter)                \
    S(received_ib_unicast, 0x180, traffic_counter)            \
    S(transmitted_ib_unicast, 0x200, traffic_counter)         \
    S(received_ib_multicast, 0x280, traffic_counter)          \
    S(transmitted_ib_multicast, 0x300, traffic_counter)       \
    S(received_eth_broadcast, 0x380, traffic_counter)         \
    S(transmitted_eth_broadcast, 0x400, traffic_counter)      \
    S(received_eth_unicast, 0x480, traffic_counter)           \
    S(transmitted_eth_unicast, 0x500, traffic_counter)        \
    S(received_eth_multicast, 0x580, traffic_counter)         \
    S(transmitted_eth_multicast, 0x600, traffic_counter)
CXV_IFC_LAYOUT(query_vport_counter_out, 0x1080)

// The traffic counters of query_vport_counter_out, by name, for code that copies them
// all (the driver's and the API's vport_counters); each is a traffic_counter there.
#define CXV_IFC_VPORT_TRAFFIC(X)   \
    X(received_errors)             \
    X(transmit_errors)             \
    X(received_ib_unicast)         \
    X(transmitted_ib_unicast)      \
    X(received_ib_multicast)       \
    X(transmitted_ib_multicast)    \
    X(received_eth_broadcast)      \
    X(transmitted_eth_broadcast)   \
    X(received_eth_unicast)        \
    X(transmitted_eth_unicast)     \
    X(received_eth_multicast)      \
    X(transmitted_eth_multicast)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_COUNTERS(X)                     \
    X(alloc_q_counter_in, alloc_q_counter_in)           \
    X(alloc_q_counter_out, alloc_q_counter_out)         \
    X(dealloc_q_counter_in, dealloc_q_counter_in)       \
    X(dealloc_q_counter_out, dealloc_q_counter_out)     \
    X(query_q_counter_in, query_q_counter_in)           \
    X(query_q_counter_out, query_q_counter_out)         \
    X(traffic_counter, traffic_counter)                 \
    X(query_vport_counter_in, query_vport_counter_in)   \
    X(query_vport_counter_out, query_vport_counter_out)

}  // namespace cxv::hw::ifc

namespace cxv::hw {

// A traffic_counter decoded, and the vport's set of them as QUERY_VPORT_COUNTER reports
// it: InfiniBand or Ethernet frames by cast, as the port's link layer carries them (the
// other link layer's stay 0). The driver returns it and the API hands it on.
struct traffic {
    std::uint64_t packets = 0;
    std::uint64_t octets = 0;
};
struct vport_counters {
#define CXV_TRAFFIC_FIELD(n) traffic n;
    CXV_IFC_VPORT_TRAFFIC(CXV_TRAFFIC_FIELD)
#undef CXV_TRAFFIC_FIELD
};

// One read of a Q counter set (QUERY_Q_COUNTER): 32-bit counts that wrap. The driver
// returns it and the API hands it on.
struct q_counter_values {
#define CXV_Q_COUNTER_MEMBER(n) std::uint32_t n = 0;
    CXV_IFC_Q_COUNTERS(CXV_Q_COUNTER_MEMBER)
#undef CXV_Q_COUNTER_MEMBER
};

}  // namespace cxv::hw
