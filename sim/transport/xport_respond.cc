// The responder's answers (IBA 9.7.5.2 "Responder Side Behavior"): ACKs with the count of
// completed messages, NAKs, RDMA READ responses cut at the path MTU, Atomic ACKs, and
// duplicates (IBA 9.7.5.1.3 / 9.7.5.2.1): a SEND or WRITE seen again is acknowledged, not
// carried out again; a READ seen again is read again; an atomic seen again is answered
// from the saved result, never executed twice.
#include <algorithm>
#include <cstring>

#include "hw/ifc.h"
#include "sim/transport/engine.h"
#include "sim/transport/segment.h"
#include "sim/transport/xport_names.h"

namespace cxv::sim {

// An answer goes back the way the request came: addresses swapped, to the QP this one is
// connected to (the BTH names no source QP on RC).
wire::packet transport_engine::answer(const qp_object& qp, const wire::packet& req, std::uint8_t o,
                                      std::uint32_t psn) const {
    wire::packet a;
    address_answer(a, qp, req, o, psn);
    return a;
}

// Every field answer() takes from the request and the QP; the rest stays as `a` has it.
void transport_engine::address_answer(wire::packet& a, const qp_object& qp, const wire::packet& req, std::uint8_t o,
                                      std::uint32_t psn) const {
    a.net = req.net;
    std::swap(a.net.sgid, a.net.dgid);
    std::swap(a.net.slid, a.net.dlid);
    a.net.dst_mac = req.net.src_mac;
    a.net.src_mac = cfg_.mac;
    a.bth.opcode = static_cast<std::uint8_t>(op::RC | o);
    a.bth.pkey = req.bth.pkey;
    a.bth.dest_qp = ifc::get<qpc::remote_qpn>(qp.qpc.data());
    a.bth.psn = psn & kMask24;
    a.aeth.syndrome = syn::ACK_NO_CREDIT_LIMIT;  // no end-to-end credits, as rxe and cards
    a.aeth.msn = qp.x.msn;
}

// Coalesced acknowledge messages (IBA 9.7.5.1.1): the ACK a request asks for is owed, not
// sent; a later request's ACK (a higher PSN, the MSN after it) replaces it, and it goes
// out at the end of the batch of packets the device took from the wire, or before
// anything else the responder sends, so that the requester sees ACKs, NAKs and
// responses in PSN order.
void transport_engine::ack(qp_object& qp, const wire::packet& req, std::uint32_t psn) {
    bool fresh = false;
    wire::packet& owed = owed_acks_.get(qp.qpn, fresh);
    if (fresh) {
        owed = answer(qp, req, op::ACKNOWLEDGE, psn);
        return;
    }
    // The owed ACK is replaced by this one: the slot holds what answer() made (only ack()
    // fills it), so the fields it takes from the request and the QP are all that differ.
    address_answer(owed, qp, req, op::ACKNOWLEDGE, psn);
    trace_.count(&counters::acks_coalesced);
}

void transport_engine::send_owed_ack(std::uint32_t qpn) {
    wire::packet* owed = owed_acks_.find(qpn);
    if (owed == nullptr) return;
    wire::packet a = std::move(*owed);
    owed_acks_.erase(qpn);
    send_packet(std::move(a));
}

// Every answer but an ACK: after the ACK owed for the requests before it.
void transport_engine::respond(qp_object& qp, wire::packet&& a) {
    send_owed_ack(qp.qpn);
    send_packet(std::move(a));
}

bool transport_engine::end_of_batch() {
    cqs_.flush();  // the batch's CQEs, before its ACKs go out
    if (owed_acks_.empty()) return false;
    while (!owed_acks_.empty()) {
        const std::uint32_t qpn = owed_acks_.first_qpn();
        const auto q = t_.qps.find(qpn);
        // A QP that went to error or reset since owes nothing (IBA 10.3.1: no answers).
        if (q == t_.qps.end() || q->second.state == qp_state::ERR || q->second.state == qp_state::RST) {
            owed_acks_.erase(qpn);
            continue;
        }
        send_owed_ack(qpn);
    }
    return true;
}

void transport_engine::nak(qp_object& qp, const wire::packet& req, std::uint8_t syndrome) {
    if (transport_of_st(ifc::get<qpc::st>(qp.qpc.data())) != transport::rc) return;
    wire::packet a = answer(qp, req, op::ACKNOWLEDGE, req.bth.psn);
    a.aeth.syndrome = syndrome;
    trace_.count(&counters::naks_sent);
    respond(qp, std::move(a));
}

// A remote access or invalid request error with no WQE to report it: NAK, the QP goes to
// error, and an affiliated event says why (IBA 9.9.3.1.2-3, 11.6.3.1). UC drops what it
// cannot carry out (IBA 9.9.3.2).
void transport_engine::fail_request(qp_object& qp, const wire::packet& req, std::uint8_t syndrome,
                                    hw::event_type ev) {
    hooks_.count_resp_error(qp,
                            syndrome == syn::NAK_REMOTE_ACCESS_ERROR ? cqe_syndrome::REMOTE_ACCESS_ERR
                            : syndrome == syn::NAK_INVALID_REQUEST   ? cqe_syndrome::REMOTE_INVAL_REQ_ERR
                                                                     : cqe_syndrome::REMOTE_OP_ERR,
                            false);
    if (transport_of_st(ifc::get<qpc::st>(qp.qpc.data())) != transport::rc) {
        trace_.count(&counters::packets_dropped);
        return;
    }
    nak(qp, req, syndrome);
    qp_event(ev, qp.qpn);
    qp_to_error(qp, false);
}

// The response packets of a READ request (IBA 9.4.3): First, Middle..., Last, or Only,
// from the request's PSN on, at most the path MTU each; AETH on First, Last and Only.
// False when memory could not be read (nothing sent).
bool transport_engine::read_responses(qp_object& qp, const wire::packet& req) {
    const std::uint32_t mtu = 128u << std::clamp<unsigned>(ifc::get<qpc::mtu>(qp.qpc.data()), 1, 5);
    const std::uint32_t len = req.reth.dma_length;
    iova_list ranges;
    if (len != 0 && !remote_access(qp.pd, req.reth.r_key, req.reth.va, len, access_remote_read, ranges)) return false;
    std::vector<std::byte> data(len);
    std::size_t at = 0;
    for (const iova_range& r : ranges) {
        if (!mmu_.read(r.iova, data.data() + at, r.len)) {
            trace_.count(&counters::iommu_faults);
            return false;
        }
        at += r.len;
    }
    const std::uint32_t n = packets_for(len, mtu);
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint8_t o = n == 1           ? op::RDMA_READ_RESPONSE_ONLY
                               : k == 0         ? op::RDMA_READ_RESPONSE_FIRST
                               : k + 1 == n     ? op::RDMA_READ_RESPONSE_LAST
                                                : op::RDMA_READ_RESPONSE_MIDDLE;
        wire::packet a = answer(qp, req, o, psn_add(req.bth.psn, k));
        const std::size_t off = std::size_t{k} * mtu, bytes = std::min<std::size_t>(mtu, len - std::min<std::size_t>(off, len));
        a.payload.assign(data.begin() + static_cast<std::ptrdiff_t>(off),
                         data.begin() + static_cast<std::ptrdiff_t>(off + bytes));
        a.bth.pad = pad_of(bytes);
        respond(qp, std::move(a));
    }
    return true;
}

void transport_engine::recv_read(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    iova_list ranges;
    const std::uint32_t len = p.reth.dma_length;
    if (!ifc::get<qpc::rre>(qp.qpc.data()) ||
        (len != 0 && !remote_access(qp.pd, p.reth.r_key, p.reth.va, len, access_remote_read, ranges))) {
        return fail_request(qp, p, syn::NAK_REMOTE_ACCESS_ERROR, hw::event_type::WQ_ACCESS_ERROR);
    }
    const std::uint32_t mtu = 128u << std::clamp<unsigned>(ifc::get<qpc::mtu>(qp.qpc.data()), 1, 5);
    hooks_.count(qp, &q_counter_values::rx_read_requests);
    x.msn = psn_add(x.msn, 1);
    if (!read_responses(qp, p)) {
        return fail_request(qp, p, syn::NAK_REMOTE_OPERATIONAL_ERROR, hw::event_type::WQ_CATAS_ERROR);
    }
    x.epsn = psn_add(p.bth.psn, packets_for(len, mtu));  // the responses take the PSNs
}

void transport_engine::recv_atomic(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    const wire::atomiceth& a = p.atomic;
    if (a.va % 8 != 0) return fail_request(qp, p, syn::NAK_INVALID_REQUEST, hw::event_type::WQ_INVAL_REQ_ERROR);
    iova_list ranges;
    if (!ifc::get<qpc::rae>(qp.qpc.data()) || !remote_access(qp.pd, a.r_key, a.va, 8, access_remote_atomic, ranges) ||
        ranges.size() != 1) {
        return fail_request(qp, p, syn::NAK_REMOTE_ACCESS_ERROR, hw::event_type::WQ_ACCESS_ERROR);
    }
    // The target is read and written by this model thread only: atomic with respect to
    // every other atomic of this device, as on a card (not to the CPU).
    std::uint64_t old = 0;
    if (!mmu_.read(ranges[0].iova, &old, 8)) {
        return fail_request(qp, p, syn::NAK_REMOTE_OPERATIONAL_ERROR, hw::event_type::WQ_CATAS_ERROR);
    }
    const bool fa = op::operation_of(p.bth.opcode) == op::FETCH_ADD;
    const std::uint64_t next = fa ? old + a.swap_add : old == a.compare ? a.swap_add : old;
    if (next != old && !mmu_.write(ranges[0].iova, &next, 8)) {
        return fail_request(qp, p, syn::NAK_REMOTE_OPERATIONAL_ERROR, hw::event_type::WQ_CATAS_ERROR);
    }
    // Saved for a duplicate (IBA 9.7.5.2.1 o9-xx): at least as many as the reads and
    // atomics the requester may have outstanding.
    const std::size_t keep = std::max<std::size_t>(16, std::size_t{1} << ifc::get<qpc::log_rra_max>(qp.qpc.data()));
    x.atomics.push_back({p.bth.psn, old});
    while (x.atomics.size() > keep) x.atomics.pop_front();
    hooks_.count(qp, &q_counter_values::rx_atomic_requests);
    x.msn = psn_add(x.msn, 1);
    x.epsn = psn_add(p.bth.psn, 1);
    wire::packet r = answer(qp, p, op::ATOMIC_ACKNOWLEDGE, p.bth.psn);
    r.atomic_ack = old;
    respond(qp, std::move(r));
}

// A request behind the expected PSN: the requester did not see the answer (or sent it
// again on a timeout). Answered, never carried out twice (IBA 9.7.5.2.1).
void transport_engine::on_duplicate(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    hooks_.count(qp, &q_counter_values::duplicate_request);
    trace_.count(&counters::duplicates);
    switch (op::operation_of(p.bth.opcode)) {
    case op::RDMA_READ_REQUEST:
        if (ifc::get<qpc::rre>(qp.qpc.data())) read_responses(qp, p);
        return;
    case op::COMPARE_SWAP:
    case op::FETCH_ADD: {
        const auto it = std::find_if(x.atomics.begin(), x.atomics.end(),
                                     [&](const atomic_result& r) { return r.psn == p.bth.psn; });
        if (it == x.atomics.end()) {
            trace_.count(&counters::packets_dropped);
            return;
        }
        wire::packet r = answer(qp, p, op::ATOMIC_ACKNOWLEDGE, p.bth.psn);
        r.atomic_ack = it->orig;
        return respond(qp, std::move(r));
    }
    default:
        // SEND, WRITE: acknowledge everything up to the expected PSN again (owed, as any
        // ACK: it may coalesce with the ACK of a request in the same batch).
        if (p.bth.ack_req) ack(qp, p, psn_add(x.epsn, -1));
        return;
    }
}

}  // namespace cxv::sim
