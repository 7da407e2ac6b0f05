// Counters (PRM ALLOC_Q_COUNTER, QUERY_Q_COUNTER, DEALLOC_Q_COUNTER, QUERY_VPORT_COUNTER):
// the Q counter sets QPs count their transport events to, and the vport's traffic.
//
// Set 0 is the device's default: every QP counts to it until a transition names an
// allocated set in qpc.counter_set_id (RST2INIT, or RTS2RTS with the COUNTER_SET_ID
// optional parameter, capability rts2rts_qp_counters_set_id; fw_qp.cc). ALLOC hands
// out up to max_qp_cnt sets besides it. The values live in the model, not in firmware
// pages. Which event moves which counter follows the counters' meaning as Linux's
// mlx5_ib exposes them (counters.c; Documentation of the rdma statistics):
//   rx_write/read/atomic_requests  a request the responder executed
//   out_of_buffer                  a SEND or WRITE with immediate with no receive WQE
//   out_of_sequence                a request ahead of the responder's expected PSN
//   duplicate_request              a request behind it (answered, not executed again)
//   rnr_nak_retry_err              an RNR NAK the requester retries after
//   local_ack_timeout_err          an ACK timeout the requester retransmits after
//   *_cqe_error, *_cqe_flush_error error and flush CQEs, requester or responder side
//   the others                     the error's cause, where it is decided
// The counting itself is the device's (sim/q_counting.h, through transport_hooks).
#include <vector>

#include "hw/ifc.h"
#include "sim/firmware/fw_counters.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

// Q counter sets and the vport counters (PRM "Q Counters", QUERY_VPORT_COUNTER).
namespace {

using cap = ifc::cmd_hca_cap;

// QUERY_VPORT_COUNTER op_mod 0: the vport's counters (1 would be the HCA's).
constexpr std::uint16_t kVportCounters = 0;

void put_traffic(std::byte* tc, std::uint64_t packets, std::uint64_t octets) {
    ifc::set<ifc::traffic_counter::packets>(tc, packets);
    ifc::set<ifc::traffic_counter::octets>(tc, octets);
}

}  // namespace

void counter_commands::release_all() {
    q_counters_.clear();
    q_counters_.emplace(0, q_counter_object{});
}

void counter_commands::reset() {
    release_all();
    vport_cleared_ = {};
}

cmd_reply counter_commands::alloc_q_counter(cmd_ctx& c) {
    if (c.op_mod != 0) return bad_param(cmd_syndrome::BAD_OP_MOD);
    const std::size_t max = ifc::get<cap::max_qp_cnt>(caps_.current());
    if (q_counters_.size() - 1 >= max) return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    // The lowest free id: counter_set_id is 8 bits and max_qp_cnt < 256.
    std::uint32_t id = 1;
    while (q_counters_.count(id)) ++id;
    q_counter_object q;
    q.id = id;
    q.uid = ifc::get<ifc::alloc_q_counter_in::uid>(c.in.data());
    q_counters_.emplace(id, q);
    ifc::set<ifc::alloc_q_counter_out::counter_set_id>(c.out.data(), id);
    return ok();
}

cmd_reply counter_commands::dealloc_q_counter(cmd_ctx& c) {
    if (c.op_mod != 0) return bad_param(cmd_syndrome::BAD_OP_MOD);
    const auto id = ifc::get<ifc::dealloc_q_counter_in::counter_set_id>(c.in.data());
    if (id == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);  // the default set stays
    const auto it = q_counters_.find(id);
    if (it == q_counters_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    q_counters_.erase(it);
    return ok();
}

cmd_reply counter_commands::query_q_counter(cmd_ctx& c) {
    using in = ifc::query_q_counter_in;
    using out = ifc::query_q_counter_out;
    const std::byte* i = c.in.data();
    if (c.op_mod != 0) return bad_param(cmd_syndrome::BAD_OP_MOD);
    // One function, no e-switch: no other vport to read.
    if (ifc::get<in::other_vport>(i) || ifc::get<in::vport_number>(i) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const bool aggregate = ifc::get<in::aggregate>(i) != 0;
    if (aggregate && !ifc::get<cap::q_counter_aggregation>(caps_.current())) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const auto id = ifc::get<in::counter_set_id>(i);
    std::vector<q_counter_object*> sets;
    if (aggregate) {
        for (auto& [n, q] : q_counters_) sets.push_back(&q);
    } else {
        const auto it = q_counters_.find(id);
        if (it == q_counters_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
        sets.push_back(&it->second);
    }
    q_counter_values sum;
    for (const q_counter_object* q : sets) {
#define CXV_SUM(n) sum.n += q->v.n;
        CXV_IFC_Q_COUNTERS(CXV_SUM)
#undef CXV_SUM
    }
#define CXV_PUT(n) ifc::set<out::n>(c.out.data(), sum.n);
    CXV_IFC_Q_COUNTERS(CXV_PUT)
#undef CXV_PUT
    // clear: the sets read start again from 0 once their values are in the output.
    if (ifc::get<in::clear>(i)) {
        for (q_counter_object* q : sets) q->v = {};
    }
    return ok();
}

cmd_reply counter_commands::query_vport_counter(cmd_ctx& c) {
    using in = ifc::query_vport_counter_in;
    using out = ifc::query_vport_counter_out;
    const std::byte* i = c.in.data();
    if (c.op_mod != kVportCounters) return bad_param(cmd_syndrome::BAD_OP_MOD);
    if (ifc::get<in::other_vport>(i) || ifc::get<in::vport_number>(i) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const auto port = ifc::get<in::port_num>(i);
    if (port > ifc::get<cap::num_ports>(caps_.current())) {
        return bad_param(cmd_syndrome::BAD_PORT);
    }
    // The function's one vport carries all of the port's traffic: unicast and multicast
    // frames by the port's link layer (the model sends no Ethernet broadcast). The port
    // keeps one byte count, not one per cast: all of it goes with unicast, where the
    // model's traffic is.
    const port_stats& s = port_.counters();
    const port_stats& b = vport_cleared_;
    std::byte* o = c.out.data();
    const bool eth = cfg_.port == port_type::ETHERNET;
    put_traffic(ifc::at<out::received_errors>(o), s.rx_errors - b.rx_errors, 0);
    put_traffic(ifc::at<out::transmit_errors>(o), s.tx_discards - b.tx_discards, 0);
    put_traffic(eth ? ifc::at<out::received_eth_unicast>(o) : ifc::at<out::received_ib_unicast>(o),
                s.rx_unicast - b.rx_unicast, s.rx_bytes - b.rx_bytes);
    put_traffic(eth ? ifc::at<out::transmitted_eth_unicast>(o) : ifc::at<out::transmitted_ib_unicast>(o),
                s.tx_unicast - b.tx_unicast, s.tx_bytes - b.tx_bytes);
    put_traffic(eth ? ifc::at<out::received_eth_multicast>(o) : ifc::at<out::received_ib_multicast>(o),
                s.rx_multicast - b.rx_multicast, 0);
    put_traffic(eth ? ifc::at<out::transmitted_eth_multicast>(o) : ifc::at<out::transmitted_ib_multicast>(o),
                s.tx_multicast - b.tx_multicast, 0);
    if (ifc::get<in::clear>(i)) vport_cleared_ = s;
    return ok();
}

// --- QPs binding to sets ---------------------------------------------------------------

void counter_commands::rebind_q_counter(std::uint32_t from, std::uint32_t to) {
    // Set 0 cannot be deallocated: its users are not counted.
    if (from == to) return;
    if (auto it = q_counters_.find(from); from != 0 && it != q_counters_.end() && it->second.users != 0) {
        --it->second.users;
    }
    if (auto it = q_counters_.find(to); to != 0 && it != q_counters_.end()) ++it->second.users;
}

}  // namespace cxv::sim
