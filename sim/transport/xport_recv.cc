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

namespace cxv::sim {

namespace ifc = hw::ifc;
using qpc = ifc::qpc;
using hw::cqe_syndrome;
using hw::wqe_opcode;

struct transport_engine::recv_wqe {
    std::uint16_t index = 0;  // wqe_counter of its CQE
    bool srq = false;
    std::uint32_t srqn = 0;
    std::vector<local_sge> sges;
};

namespace {

constexpr std::uint32_t kRqRegular = 0x0;
constexpr std::uint32_t kRqSrq = 0x1;

std::uint32_t psn_add(std::uint32_t a, std::uint32_t n) { return (a + n) & kMask24; }

// The scatter list of a receive WQE: data segments up to the first with the invalid
// L_Key, or the end of the WQE (PRM "Receive WQE").
void parse_scatter(const std::byte* at, std::size_t bytes, std::vector<local_sge>& out) {
    for (std::size_t pos = 0; pos + sizeof(hw::wqe_data_seg) <= bytes; pos += sizeof(hw::wqe_data_seg)) {
        hw::wqe_data_seg d{};
        std::memcpy(&d, at + pos, sizeof(d));
        if (d.lkey.value() == hw::invalid_lkey) break;
        const std::uint32_t len = d.byte_count.value() == 0 ? 0x80000000u : d.byte_count.value();
        out.push_back({d.lkey.value(), d.addr.value(), len});
    }
}

packet answer(const packet& req, pkt_kind kind) {
    packet a;
    a.kind = kind;
    a.tp = req.tp;
    a.dst_addr = req.src_addr;
    a.dst_qpn = req.src_qpn;
    a.src_qpn = req.dst_qpn;
    a.psn = req.psn;
    a.op = req.op;
    return a;
}

bool is_atomic(wqe_opcode op) { return op == wqe_opcode::ATOMIC_CS || op == wqe_opcode::ATOMIC_FA; }

}  // namespace

// Where a message from the wire enters: a request goes to the responder of the QP it
// names, an answer (ACK, NAK, read or atomic response) to its requester.
void transport_engine::receive(packet& p) {
    const auto it = t_.qps.find(p.dst_qpn);
    if (it == t_.qps.end()) {
        trace_.update([](counters& t) { ++t.packets_dropped; });
        return;
    }
    if (p.kind == pkt_kind::request) {
        on_request(it->second, p);
    } else {
        on_response(it->second, p);
    }
}

bool transport_engine::take_recv_wqe(qp_object& qp, recv_wqe& w) {
    const std::byte* q = qp.qpc.data();
    const auto rq_type = ifc::get<qpc::rq_type>(q);
    std::array<std::byte, 2048> buf{};
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
    const auto producer = qp_dbr(qp, false);
    if (!producer) {
        qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
        qp_to_error(qp, false);
        return false;
    }
    if (((*producer - qp.rq_consumer) & 0xffff) == 0) return false;
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

void transport_engine::responder_error(qp_object& qp, const recv_wqe* w, cqe_syndrome why) {
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

void transport_engine::on_request(qp_object& qp, packet& p) {
    const std::byte* q = qp.qpc.data();
    qp_transport& x = qp.x;
    const auto tp = static_cast<transport>(ifc::get<qpc::st>(q));
    const bool eth = cfg_.port == port_type::ethernet;
    const auto drop = [&] { trace_.update([](counters& t) { ++t.packets_dropped; }); };
    // The responder works from RTR on and not in error (IBA 10.3.1); a packet for another
    // transport, from another QP than the connected one, or with the wrong Q_Key is
    // silently dropped (IBA 9.6, 10.2.5).
    const bool receiving = qp.state == qp_state::rtr || qp.state == qp_state::rts ||
                           qp.state == qp_state::sqd || qp.state == qp_state::sqer;
    if (tp != p.tp || !receiving) return drop();
    if (tp != transport::ud && p.src_qpn != ifc::get<qpc::remote_qpn>(q)) return drop();
    if (tp == transport::ud && p.qkey != ifc::get<qpc::q_key>(q)) return drop();
    if (tp == transport::rc && p.psn != x.epsn) {
        // Behind the expected PSN: a duplicate, answered again without executing it
        // twice (IBA 9.7.5.1.3); ahead of it (requests after an RNR NAK): dropped until
        // the requester resends them in order.
        const std::uint32_t behind = (x.epsn - p.psn) & kMask24;
        if (behind >= 0x800000) {
            hooks_.count(qp, &q_counter_values::out_of_sequence);
            return drop();
        }
        hooks_.count(qp, &q_counter_values::duplicate_request);
        if (is_atomic(p.op)) {
            if (p.psn != x.last_atomic_psn) return drop();
            packet a = answer(p, pkt_kind::atomic_response);
            a.payload.resize(8);
            std::memcpy(a.payload.data(), &x.last_atomic, 8);
            return send_packet(std::move(a));
        }
        if (p.op != wqe_opcode::RDMA_READ) return send_packet(answer(p, pkt_kind::ack));
    }
    if (tp == transport::uc) x.epsn = p.psn;  // UC resynchronizes on every message

    const auto nak = [&](nak_code c) {
        if (tp != transport::rc) return;
        packet a = answer(p, pkt_kind::nak);
        a.nak = c;
        a.rnr_timer = static_cast<std::uint8_t>(ifc::get<qpc::min_rnr_nak>(q));
        send_packet(std::move(a));
    };
    const auto advance = [&] {
        if (tp != transport::ud && p.psn == x.epsn) x.epsn = psn_add(p.psn, p.npsn);
    };
    const auto no_wqe = [&] {
        // RC: RNR NAK with the QP's min_rnr_timer (IBA 9.7.5.2.8); UC and UD: dropped.
        hooks_.count(qp, &q_counter_values::out_of_buffer);
        if (tp == transport::rc) return nak(nak_code::rnr);
        drop();
    };
    // A remote access or invalid request error with no WQE to report it: NAK, the QP goes
    // to error, and an affiliated event says why (IBA 9.9.3.1.2-3, 11.6.3.1). UC drops
    // what it cannot execute (IBA 9.9.3.2).
    const auto fail_request = [&](nak_code c, hw::event_type ev) {
        hooks_.count_resp_error(qp, c == nak_code::remote_access     ? cqe_syndrome::REMOTE_ACCESS_ERR
                             : c == nak_code::invalid_request ? cqe_syndrome::REMOTE_INVAL_REQ_ERR
                                                              : cqe_syndrome::REMOTE_OP_ERR,
                         false);
        if (tp != transport::rc) return drop();
        nak(c);
        qp_event(ev, qp.qpn);
        qp_to_error(qp, false);
    };
    const auto receive_cqe = [&](hw::cqe_opcode op, const recv_wqe& w, std::uint32_t bytes) {
        hw::cqe64 c{};
        c.op_own = hw::make_op_own(op, p.solicited, 0);
        c.byte_cnt = hw::be32::from(bytes);
        if (p.has_imm) c.imm_inval_pkey.raw = p.imm_raw;
        c.sop_drop_qpn = hw::be32::from(qp.qpn);
        c.wqe_counter = hw::be16::from(w.index);
        c.srqn_uidx = hw::be32::from(w.srq ? w.srqn : ifc::get<qpc::user_index>(q) & kMask24);
        if (tp == transport::ud) c.flags_rqpn = hw::be32::from(p.src_qpn | (p.grh ? 1u << 28 : 0));
        if (!eth) c.slid = hw::be16::from(static_cast<std::uint16_t>(p.src_addr));
        push_cqe(qp.cqn_rcv, c, p.solicited);
    };

    switch (p.op) {
    case wqe_opcode::SEND:
    case wqe_opcode::SEND_IMM: {
        recv_wqe w;
        if (!take_recv_wqe(qp, w)) return no_wqe();
        // UD: the first 40 bytes of the buffer are the GRH's, written only when one came.
        std::vector<std::byte> with_grh;
        std::span<const std::byte> data = p.payload;
        std::size_t skip = 0, need = p.payload.size();
        if (tp == transport::ud) {
            need += p.grh_bytes.size();
            if (p.grh) {
                with_grh.assign(p.grh_bytes.begin(), p.grh_bytes.end());
                with_grh.insert(with_grh.end(), p.payload.begin(), p.payload.end());
                data = with_grh;
            } else {
                skip = p.grh_bytes.size();
            }
        }
        if (const auto s = scatter(qp.pd, w.sges, skip, data, need); s != cqe_syndrome{}) {
            responder_error(qp, &w, s);
            return nak(s == cqe_syndrome::LOCAL_LENGTH_ERR ? nak_code::invalid_request : nak_code::remote_operation);
        }
        receive_cqe(p.has_imm ? hw::cqe_opcode::RESP_SEND_IMM : hw::cqe_opcode::RESP_SEND, w,
                    static_cast<std::uint32_t>(need));
        advance();
        if (tp == transport::rc) send_packet(answer(p, pkt_kind::ack));
        return;
    }
    case wqe_opcode::RDMA_WRITE:
    case wqe_opcode::RDMA_WRITE_IMM: {
        std::vector<iova_range> ranges;
        // A zero-length write checks no R_Key (IBA 9.4.4 o9-xx).
        if (!ifc::get<qpc::rwe>(q) ||
            (!p.payload.empty() &&
             !remote_access(qp.pd, p.rkey, p.raddr, p.payload.size(), access_remote_write, ranges))) {
            return fail_request(nak_code::remote_access, hw::event_type::WQ_ACCESS_ERROR);
        }
        recv_wqe w;
        const bool imm = p.op == wqe_opcode::RDMA_WRITE_IMM;
        if (imm && !take_recv_wqe(qp, w)) return no_wqe();
        std::size_t at = 0;
        for (const iova_range& r : ranges) {
            if (!mmu_.write(r.iova, p.payload.data() + at, r.len)) {
                trace_.update([](counters& t) { ++t.iommu_faults; });
                responder_error(qp, imm ? &w : nullptr, cqe_syndrome::LOCAL_PROT_ERR);
                return nak(nak_code::remote_operation);
            }
            at += r.len;
        }
        if (imm) receive_cqe(hw::cqe_opcode::RESP_WR_IMM, w, static_cast<std::uint32_t>(p.payload.size()));
        hooks_.count(qp, &q_counter_values::rx_write_requests);
        advance();
        if (tp == transport::rc) send_packet(answer(p, pkt_kind::ack));
        return;
    }
    case wqe_opcode::RDMA_READ: {
        if (tp != transport::rc) return drop();
        std::vector<iova_range> ranges;
        if (!ifc::get<qpc::rre>(q) ||
            (p.length != 0 && !remote_access(qp.pd, p.rkey, p.raddr, p.length, access_remote_read, ranges))) {
            return fail_request(nak_code::remote_access, hw::event_type::WQ_ACCESS_ERROR);
        }
        packet a = answer(p, pkt_kind::read_response);
        a.payload.resize(p.length);
        std::size_t at = 0;
        for (const iova_range& r : ranges) {
            if (!mmu_.read(r.iova, a.payload.data() + at, r.len)) {
                trace_.update([](counters& t) { ++t.iommu_faults; });
                return fail_request(nak_code::remote_operation, hw::event_type::WQ_CATAS_ERROR);
            }
            at += r.len;
        }
        hooks_.count(qp, &q_counter_values::rx_read_requests);
        advance();
        return send_packet(std::move(a));
    }
    case wqe_opcode::ATOMIC_CS:
    case wqe_opcode::ATOMIC_FA: {
        if (tp != transport::rc) return drop();
        if (p.raddr % 8 != 0 || p.length != 8) {
            return fail_request(nak_code::invalid_request, hw::event_type::WQ_INVAL_REQ_ERROR);
        }
        std::vector<iova_range> ranges;
        if (!ifc::get<qpc::rae>(q) || !remote_access(qp.pd, p.rkey, p.raddr, 8, access_remote_atomic, ranges) ||
            ranges.size() != 1) {
            return fail_request(nak_code::remote_access, hw::event_type::WQ_ACCESS_ERROR);
        }
        // The target is read and written by this device thread only: atomic with respect
        // to every other atomic of this device, as on a card (not to the CPU).
        std::uint64_t old = 0;
        if (!mmu_.read(ranges[0].iova, &old, 8)) {
            return fail_request(nak_code::remote_operation, hw::event_type::WQ_CATAS_ERROR);
        }
        const std::uint64_t next = p.op == wqe_opcode::ATOMIC_FA ? old + p.swap_add
                                   : old == p.compare        ? p.swap_add
                                                             : old;
        if (next != old && !mmu_.write(ranges[0].iova, &next, 8)) {
            return fail_request(nak_code::remote_operation, hw::event_type::WQ_CATAS_ERROR);
        }
        x.last_atomic = old;
        x.last_atomic_psn = p.psn;
        hooks_.count(qp, &q_counter_values::rx_atomic_requests);
        packet a = answer(p, pkt_kind::atomic_response);
        a.payload.resize(8);
        std::memcpy(a.payload.data(), &old, 8);
        advance();
        return send_packet(std::move(a));
    }
    default:
        return fail_request(nak_code::invalid_request, hw::event_type::WQ_INVAL_REQ_ERROR);
    }
}

}  // namespace cxv::sim
