// The responder side of the transport engine (IBA 9.7.4 "Responder Side", 9.9.3
// "Responder Error Behavior"; PRM "Receive WQE", "Shared Receive Queue"): packets from
// the fabric, receive WQEs from an RQ or SRQ, remote memory through R_Keys, and the
// receive queue's completions.
//
// The device learns of posted receive WQEs only from the receive counter of the
// doorbell record (the RQ's, or the SRQ's), read when a message needs one.
#include <algorithm>
#include <cstring>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/ifc.h"
#include "hw/wqe.h"
#include "sim/transport/engine.h"
#include "sim/transport/segment.h"
#include "sim/transport/xport_names.h"

namespace cxv::sim {

namespace {

constexpr std::uint32_t kRqRegular = 0x0;
constexpr std::uint32_t kRqSrq = 0x1;

}  // namespace

// The scatter list of a receive WQE: data segments up to the first with the invalid
// L_Key, or the end of the WQE (PRM "Receive WQE").
void transport_engine::parse_scatter(const std::byte* at, std::size_t bytes, std::vector<local_sge>& out) {
    for (std::size_t pos = 0; pos + sizeof(hw::wqe_data_seg) <= bytes; pos += sizeof(hw::wqe_data_seg)) {
        hw::wqe_data_seg d{};
        std::memcpy(&d, at + pos, sizeof(d));
        if (d.lkey.value() == hw::invalid_lkey) break;
        const std::uint32_t len = d.byte_count.value() == 0 ? 0x80000000u : d.byte_count.value();
        out.push_back({d.lkey.value(), d.addr.value(), len});
    }
}

// Where a packet from the wire enters: a request goes to the responder of the QP it
// names, an answer (ACK, NAK, read response, Atomic ACK) to its requester. Destination
// QP 0 and 1 are the port's special QPs, whatever their numbers.
bool transport_engine::receive(wire::packet& p) {
    trace_.count(&counters::packets_received);
    const std::uint32_t dest = p.bth.dest_qp;
    if (dest == kMulticastQpn) return receive_multicast(p);
    const auto it = t_.qps.find(dest < t_.special_qpn.size() ? t_.special_qpn[dest] : dest);
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    if (it == t_.qps.end() || h == 0) {
        trace_.count(&counters::packets_dropped);
        return it != t_.qps.end();
    }
    if (h & wire::is_request) {
        on_request(it->second, p);
    } else {
        on_response(it->second, p);
    }
    return true;
}

// A multicast packet (IBA 10.5.2.3): its destination QP is 0xFFFFFF and its GRH's DGID
// names the group. Each QP attached to the group (ATTACH_TO_MCG) gets it as a UD request
// of its own, with its own Q_Key check and receive WQE. Without a GRH, or for a group no
// QP of this function is in, it is dropped.
bool transport_engine::receive_multicast(wire::packet& p) {
    const auto g = p.grh_present ? t_.mcgs.find(p.net.dgid) : t_.mcgs.end();
    if (g == t_.mcgs.end() || wire::headers_of(p.bth.opcode) == 0) {
        trace_.count(&counters::packets_dropped);
        return false;
    }
    bool taken = false;
    for (const std::uint32_t qpn : g->second) {
        const auto it = t_.qps.find(qpn);
        if (it == t_.qps.end()) continue;
        on_request(it->second, p);  // a UD request reads the packet, never changes it
        taken = true;
    }
    return taken;
}

bool transport_engine::take_recv_wqe(qp_object& qp, recv_slot& w) {
    // `w` may be a slot used before: its scatter list keeps its capacity.
    w.sges.clear();
    w.srq = false;
    w.srqn = 0;
    const std::byte* q = qp.qpc.data();
    const auto rq_type = ifc::get<qpc::rq_type>(q);
    std::array<std::byte, 2048> buf;  // only the stride read is used
    if (rq_type == kRqSrq) {
        const auto s = t_.srqs.find(qp.srqn);
        if (s == t_.srqs.end() || s->second.error) return false;
        srq_object& srq = s->second;
        const std::byte* c = srq.srqc.data();
        const auto producer = srq_dbr(srq);
        if (!producer) {
            srq.error = true;
            qp_event(hw::event_type::SRQ_CATAS_ERROR, srq.srqn);
            return false;
        }
        const std::uint32_t avail = (*producer - srq.consumer) & 0xffff;
        if (avail == 0) return false;
        const std::size_t stride = std::size_t{16} << ifc::get<ifc::srqc::log_rq_stride>(c);
        const std::uint32_t size = 1u << ifc::get<ifc::srqc::log_srq_size>(c);
        const std::uint16_t index = static_cast<std::uint16_t>(srq.head & (size - 1));
        if (stride > buf.size() || !srq_read(srq, std::uint64_t{index} * stride, buf.data(), stride)) {
            srq.error = true;
            qp_event(hw::event_type::SRQ_CATAS_ERROR, srq.srqn);
            return false;
        }
        hw::wqe_srq_next_seg next{};
        std::memcpy(&next, buf.data(), sizeof(next));
        parse_scatter(buf.data() + sizeof(next), stride - sizeof(next), w.sges);
        srq.head = next.next_wqe_index.value();
        ++srq.consumer;
        w.index = index;
        w.srq = true;
        w.srqn = srq.srqn;
        // The limit event: fewer than lwm WQEs left, once per ARM_RQ (IBA 10.2.9.3).
        if (srq.lwm != 0 && avail - 1 < srq.lwm) {
            srq.lwm = 0;
            qp_event(hw::event_type::SRQ_RQ_LIMIT, srq.srqn);
        }
        return true;
    }
    if (rq_type != kRqRegular) return false;  // a zero-length RQ has no receive WQEs
    if (((qp.rq_posted - qp.rq_consumer) & 0xffff) == 0) {
        // Every receive known posted is used: the doorbell record may say more.
        const auto producer = qp_dbr(qp, false);
        if (!producer) {
            qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
            qp_to_error(qp, false);
            return false;
        }
        qp.rq_posted = *producer;
        if (((*producer - qp.rq_consumer) & 0xffff) == 0) return false;
    }
    const std::size_t stride = std::size_t{16} << ifc::get<qpc::log_rq_stride>(q);
    const std::uint32_t size = 1u << ifc::get<qpc::log_rq_size>(q);
    if (stride > buf.size() || !wq_read(qp, std::uint64_t{qp.rq_consumer & (size - 1)} * stride, buf.data(), stride)) {
        qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
        qp_to_error(qp, false);
        return false;
    }
    parse_scatter(buf.data(), stride, w.sges);
    w.index = static_cast<std::uint16_t>(qp.rq_consumer);
    ++qp.rq_consumer;
    return true;
}

void transport_engine::responder_error(qp_object& qp, const recv_slot* w, cqe_syndrome why) {
    hooks_.count_resp_error(qp, why, w != nullptr);
    if (w != nullptr) {
        hw::cqe64 c{};
        auto& e = reinterpret_cast<hw::err_cqe64&>(c);
        e.syndrome = static_cast<std::uint8_t>(why);
        e.srqn = hw::be32::from(w->srq ? w->srqn : 0);
        e.s_wqe_opcode_qpn = hw::be32::from(qp.qpn);
        e.wqe_counter = hw::be16::from(w->index);
        e.op_own = hw::make_op_own(hw::cqe_opcode::RESP_ERR, false, 0);
        push_cqe(qp.cqn_rcv, c, false);
    }
    qp_to_error(qp, false);
}

namespace {

namespace op = wire::opcode;
constexpr std::uint8_t kSendMsg = 1, kWriteMsg = 2;  // qp_transport::in_msg

// The message family of a request operation: SEND, RDMA WRITE, or 0 (READ, atomics).
std::uint8_t family(std::uint8_t o) {
    if (o <= op::SEND_ONLY_WITH_IMMEDIATE || o == op::SEND_LAST_WITH_INVALIDATE || o == op::SEND_ONLY_WITH_INVALIDATE) {
        return kSendMsg;
    }
    if (o >= op::RDMA_WRITE_FIRST && o <= op::RDMA_WRITE_ONLY_WITH_IMMEDIATE) return kWriteMsg;
    return 0;
}

}  // namespace

void transport_engine::no_wqe(qp_object& qp, const wire::packet& req) {
    // RC: RNR NAK with the QP's min_rnr_timer (IBA 9.7.5.2.8), the packet's PSN not
    // taken; later packets are dropped until it comes again. UC and UD: dropped.
    hooks_.count(qp, &q_counter_values::out_of_buffer);
    if (transport_of_st(ifc::get<qpc::st>(qp.qpc.data())) != transport::rc) {
        trace_.count(&counters::packets_dropped);
        return;
    }
    qp.x.nak_sent = true;
    nak(qp, req, static_cast<std::uint8_t>(wire::aeth_syndrome::RNR_NAK | ifc::get<qpc::min_rnr_nak>(qp.qpc.data())));
}

void transport_engine::receive_cqe(qp_object& qp, const wire::packet& p, hw::cqe_opcode cop, const recv_slot& w,
                                   std::uint32_t bytes) {
    const std::byte* q = qp.qpc.data();
    hw::cqe64 c{};
    c.op_own = hw::make_op_own(cop, p.bth.se, 0);
    c.byte_cnt = hw::be32::from(bytes);
    if (wire::headers_of(p.bth.opcode) & (wire::has_immdt | wire::has_ieth)) {
        std::memcpy(&c.imm_inval_pkey, p.immdt.data(), 4);  // the immediate, or the R_Key invalidated
    }
    c.sop_drop_qpn = hw::be32::from(qp.qpn);
    c.wqe_counter = hw::be16::from(w.index);
    c.srqn_uidx = hw::be32::from(w.srq ? w.srqn : ifc::get<qpc::user_index>(q) & kMask24);
    if (transport_of_st(ifc::get<qpc::st>(q)) == transport::ud) {
        // flags_rqpn (PRM "CQE Format"): the source QP, bits 29:28 a GRH (or IP header)
        // present, bits 27:24 the packet's SL on InfiniBand and, over RoCE, its type: bit
        // 27 a UDP header (RoCE v2), bits 25:24 the L3 header (0 GRH, 1 IPv6, 2 IPv4; Linux
        // device.h MLX5_CQE_ROCE_L3_HEADER_TYPE_*), which mlx5 drivers report as the work
        // completion's sl and network header type.
        std::uint32_t kind = p.net.sl & 0xfu;
        if (cfg_.port == port_type::ETHERNET) kind = 0x8u | (p.net.link == wire::link_kind::roce_v4 ? 0x2u : 0x1u);
        c.flags_rqpn = hw::be32::from((p.deth.src_qp & kMask24) | (p.grh_present ? 1u << 28 : 0) | kind << 24);
        // QP1 (PRM "CQE Format", pkey): the packet's P_Key, for the GSI to answer with.
        if (ifc::get<qpc::st>(q) == ifc::qpc_values::st_qp1) c.imm_inval_pkey = hw::be32::from(p.bth.pkey);
    }
    if (cfg_.port != port_type::ETHERNET) c.slid = hw::be16::from(p.net.slid);
    push_cqe(qp.cqn_rcv, c, p.bth.se);
}

// A request packet (IBA 9.6 "Packet Transport Header Validation", 9.7.4 "Responder
// Side", 9.8.3 "UC Responder"): checked against the QP, its PSN against the expected PSN,
// its opcode against the message in progress, its size against the path MTU; then
// carried out.
void transport_engine::on_request(qp_object& qp, wire::packet& p) {
    const std::byte* q = qp.qpc.data();
    qp_transport& x = qp.x;
    const auto tp = transport_of_st(ifc::get<qpc::st>(q));
    const auto drop = [&] { trace_.count(&counters::packets_dropped); };
    // The responder works from RTR on and not in error (IBA 10.3.1); a packet for another
    // transport is silently dropped (IBA 9.6.1.2).
    const bool receiving = qp.state == qp_state::RTR || qp.state == qp_state::RTS ||
                           qp.state == qp_state::SQD || qp.state == qp_state::SQER;
    if (op::transport_of(p.bth.opcode) != opcode_transport(tp) || !receiving) return drop();
    if (tp == transport::ud) return on_ud_request(qp, p);
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    const std::uint8_t o = op::operation_of(p.bth.opcode);
    const std::uint8_t fam = family(o);
    const bool rc = tp == transport::rc;

    if (rc) {
        const std::int32_t d = psn_diff(p.bth.psn, x.epsn);
        if (d > 0) {
            // Ahead: a packet was lost. One PSN sequence error NAK with the expected PSN,
            // then silence until that PSN comes (IBA 9.7.5.2.2).
            hooks_.count(qp, &q_counter_values::out_of_sequence);
            if (!x.nak_sent) {
                x.nak_sent = true;
                wire::packet a = answer(qp, p, op::ACKNOWLEDGE, x.epsn);
                a.aeth.syndrome = wire::aeth_syndrome::NAK_PSN_SEQUENCE_ERROR;
                trace_.count(&counters::naks_sent);
                respond(qp, std::move(a));
            }
            return drop();
        }
        if (d < 0) return on_duplicate(qp, p);
    } else {
        // UC (IBA 9.8.3): a PSN gap ends the message in progress, which never completes;
        // the responder takes up again at the next First or Only.
        if (p.bth.psn != x.epsn) {
            if (x.in_msg != 0) hooks_.count(qp, &q_counter_values::out_of_sequence);
            x.in_msg = 0;
        }
        x.epsn = psn_add(p.bth.psn, 1);
        if ((h & wire::is_first) && x.in_msg != 0) x.in_msg = 0;  // a new message ends the old
    }
    // The opcode sequence (IBA 9.7.5.2.3, 9.8.3): a Middle or Last continues the message
    // in progress, a First or Only starts one only when none is.
    const bool starts = (h & wire::is_first) != 0;
    bool bad = starts ? x.in_msg != 0 : (fam == 0 || x.in_msg != fam);
    // Sizes: First and Middle carry exactly the path MTU, a Last 1 to MTU bytes, an Only
    // at most the MTU (IBA 9.7.5.2.3 "Length errors").
    const std::uint32_t mtu = 128u << std::clamp<unsigned>(ifc::get<qpc::mtu>(q), 1, 5);
    const std::size_t len = p.payload.size();
    if (fam != 0) {
        const bool first = (h & wire::is_first) != 0, last = (h & wire::is_last) != 0;
        if (first && last) {
            bad |= len > mtu;
        } else if (last) {
            bad |= len == 0 || len > mtu;
        } else {
            bad |= len != mtu;
        }
    }
    if (bad) {
        if (!rc) {
            x.in_msg = 0;
            return drop();
        }
        return fail_request(qp, p, wire::aeth_syndrome::NAK_INVALID_REQUEST, hw::event_type::WQ_INVAL_REQ_ERROR);
    }
    x.nak_sent = false;
    switch (o) {
    case op::RDMA_READ_REQUEST: return recv_read(qp, p);
    case op::COMPARE_SWAP:
    case op::FETCH_ADD: return recv_atomic(qp, p);
    default: break;
    }
    if (fam == kSendMsg) return recv_send(qp, p);
    if (fam == kWriteMsg) return recv_write(qp, p);
    if (!rc) return drop();
    fail_request(qp, p, wire::aeth_syndrome::NAK_INVALID_REQUEST, hw::event_type::WQ_INVAL_REQ_ERROR);
}

// A packet of a SEND: the receive WQE is taken at the First (or Only) and filled packet by
// packet; the receive CQE goes out at the Last.
void transport_engine::recv_send(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    const bool rc = transport_of_st(ifc::get<qpc::st>(qp.qpc.data())) == transport::rc;
    if (h & wire::is_first) {
        // UC keeps the WQE of a message it dropped for the next one.
        if (!x.have_wqe) {
            if (!take_recv_wqe(qp, x.wqe)) return no_wqe(qp, p);
            x.have_wqe = true;
        }
        x.msg_bytes = 0;
        x.in_msg = kSendMsg;
    }
    const std::size_t len = p.payload.size();
    if (const auto s = scatter(qp.pd, x.wqe.sges, x.msg_bytes, p.payload, x.msg_bytes + len); s != cqe_syndrome{}) {
        const recv_slot w = std::move(x.wqe);
        x.have_wqe = false;
        x.in_msg = 0;
        if (!rc) return responder_error(qp, &w, s);
        responder_error(qp, &w, s);
        return nak(qp, p,
                   s == cqe_syndrome::LOCAL_LENGTH_ERR ? wire::aeth_syndrome::NAK_INVALID_REQUEST
                                                       : wire::aeth_syndrome::NAK_REMOTE_OPERATIONAL_ERROR);
    }
    // A SEND with invalidate: its R_Key invalidated as the message ends, or the receive
    // completes in error and the QP fails (as Linux rxe does: IBA class J).
    if ((h & wire::has_ieth) && !invalidate_rkey(qp, p.immdt)) {
        const recv_slot w = std::move(x.wqe);
        x.have_wqe = false;
        x.in_msg = 0;
        responder_error(qp, &w, cqe_syndrome::LOCAL_PROT_ERR);
        return nak(qp, p, wire::aeth_syndrome::NAK_INVALID_REQUEST);
    }
    x.msg_bytes += len;
    if (rc) x.epsn = psn_add(p.bth.psn, 1);
    if (h & wire::is_last) {
        const hw::cqe_opcode cop = (h & wire::has_immdt)  ? hw::cqe_opcode::RESP_SEND_IMM
                                   : (h & wire::has_ieth) ? hw::cqe_opcode::RESP_SEND_INV
                                                          : hw::cqe_opcode::RESP_SEND;
        receive_cqe(qp, p, cop, x.wqe, static_cast<std::uint32_t>(x.msg_bytes));
        x.have_wqe = false;
        x.in_msg = 0;
        x.msn = psn_add(x.msn, 1);
    }
    if (rc && p.bth.ack_req) ack(qp, p, p.bth.psn);
}

// A packet of an RDMA WRITE: the R_Key is checked for the whole length at the First (or
// Only), each packet's data goes to its place; WRITE with immediate takes a receive WQE
// at the Last (or Only) and completes it.
void transport_engine::recv_write(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    const std::byte* q = qp.qpc.data();
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    const bool rc = transport_of_st(ifc::get<qpc::st>(q)) == transport::rc;
    iova_list ranges;
    if (h & wire::is_first) {
        // A zero-length write checks no R_Key (IBA 9.4.4).
        if (!ifc::get<qpc::rwe>(q) ||
            (p.reth.dma_length != 0 &&
             !remote_access(qp.pd, p.reth.r_key, p.reth.va, p.reth.dma_length, access_remote_write, ranges))) {
            x.in_msg = 0;
            return fail_request(qp, p, wire::aeth_syndrome::NAK_REMOTE_ACCESS_ERROR, hw::event_type::WQ_ACCESS_ERROR);
        }
        x.write_va = p.reth.va;
        x.write_rkey = p.reth.r_key;
        x.write_len = p.reth.dma_length;
        x.msg_bytes = 0;
        x.in_msg = kWriteMsg;
    }
    const std::size_t len = p.payload.size();
    const bool last = (h & wire::is_last) != 0;
    // The packets must add up to the length the RETH announced (IBA 9.7.5.2.3).
    if (x.msg_bytes + len > x.write_len || (last && x.msg_bytes + len != x.write_len)) {
        x.in_msg = 0;
        if (!rc) return trace_.count(&counters::packets_dropped);
        return fail_request(qp, p, wire::aeth_syndrome::NAK_INVALID_REQUEST, hw::event_type::WQ_INVAL_REQ_ERROR);
    }
    const bool imm = (h & wire::has_immdt) != 0;
    if (imm && !x.have_wqe) {
        recv_slot w;
        if (!take_recv_wqe(qp, w)) return no_wqe(qp, p);
        x.wqe = std::move(w);
        x.have_wqe = true;
    }
    ranges.clear();
    if (len != 0 && !remote_access(qp.pd, x.write_rkey, x.write_va + x.msg_bytes, len, access_remote_write, ranges)) {
        x.in_msg = 0;
        return fail_request(qp, p, wire::aeth_syndrome::NAK_REMOTE_ACCESS_ERROR, hw::event_type::WQ_ACCESS_ERROR);
    }
    std::size_t at = 0;
    for (const iova_range& r : ranges) {
        if (!mmu_.write(r.iova, p.payload.data() + at, r.len)) {
            trace_.count(&counters::iommu_faults);
            x.in_msg = 0;
            const recv_slot w = std::move(x.wqe);
            const bool had = std::exchange(x.have_wqe, false);
            responder_error(qp, had ? &w : nullptr, cqe_syndrome::LOCAL_PROT_ERR);
            if (rc) nak(qp, p, wire::aeth_syndrome::NAK_REMOTE_OPERATIONAL_ERROR);
            return;
        }
        at += r.len;
    }
    x.msg_bytes += len;
    if (rc) x.epsn = psn_add(p.bth.psn, 1);
    if (last) {
        if (imm) receive_cqe(qp, p, hw::cqe_opcode::RESP_WR_IMM, x.wqe, static_cast<std::uint32_t>(x.msg_bytes));
        if (imm) x.have_wqe = false;
        x.in_msg = 0;
        x.msn = psn_add(x.msn, 1);
        hooks_.count(qp, &q_counter_values::rx_write_requests);
    }
    if (rc && p.bth.ack_req) ack(qp, p, p.bth.psn);
}

// UD (IBA 9.8.4 "UD"): one packet is one message; the Q_Key must be the QP's, and the
// first 40 bytes of the buffer get the GRH (or the IP header) when one came.
void transport_engine::on_ud_request(qp_object& qp, wire::packet& p) {
    if (p.deth.q_key != ifc::get<qpc::q_key>(qp.qpc.data())) {
        trace_.count(&counters::packets_dropped);
        return;
    }
    recv_slot& w = qp.x.wqe;  // UD has no message in progress: the slot is free
    if (!take_recv_wqe(qp, w)) return no_wqe(qp, p);
    std::vector<std::byte> with_grh;
    std::span<const std::byte> data = p.payload;
    std::size_t skip = 0;
    const std::size_t need = p.payload.size() + p.grh_raw.size();
    if (p.grh_present) {
        with_grh.assign(p.grh_raw.begin(), p.grh_raw.end());
        with_grh.insert(with_grh.end(), p.payload.begin(), p.payload.end());
        data = with_grh;
    } else {
        skip = p.grh_raw.size();
    }
    if (const auto s = scatter(qp.pd, w.sges, skip, data, need); s != cqe_syndrome{}) return responder_error(qp, &w, s);
    const bool imm = (wire::headers_of(p.bth.opcode) & wire::has_immdt) != 0;
    receive_cqe(qp, p, imm ? hw::cqe_opcode::RESP_SEND_IMM : hw::cqe_opcode::RESP_SEND, w,
                static_cast<std::uint32_t>(need));
}

}  // namespace cxv::sim
