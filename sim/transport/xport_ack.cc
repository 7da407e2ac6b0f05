// The requester's answers (IBA 9.7.5.1 "Requester Side", 9.7.6 "Requester Side Error
// Detection"): ACKs, which are cumulative; NAKs (PSN sequence error: go back and send
// again from the NAKed PSN; RNR: wait, then the same; the others end the request);
// RDMA READ responses, scattered packet by packet in PSN order; Atomic ACKs; the ACK
// timeout and the RNR wait; and the send queue's completions, in order.
#include <algorithm>
#include <cstring>

#include "hw/cqe.h"
#include "hw/endian.h"
#include "hw/ifc.h"
#include "sim/transport/engine.h"
#include "sim/transport/segment.h"
#include "sim/transport/xport_names.h"

namespace cxv::sim {

namespace {

constexpr unsigned kRnrRetryForever = 7;

// IBA Table 45, "Encoding for RNR NAK Timer Field", in microseconds (code 0 is the
// longest).
constexpr std::array<std::uint32_t, 32> kRnrMicros{
    655360, 10,    20,    30,    40,    60,    80,     120,    160,    240,    320,
    480,    640,   960,   1280,  1920,  2560,  3840,   5120,   7680,   10240,  15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// 4.096 us * 2^t (IBA 9.7.6.1.3 "Local ACK Timeout"); 0 is infinite.
clock_type::duration ack_timeout(unsigned t) {
    return std::chrono::nanoseconds(t == 0 ? 0 : std::uint64_t{4096} << std::min(t, 31u));
}

bool is_read(const sq_request& r) { return r.op == wqe_opcode::RDMA_READ; }
bool is_atomic(const sq_request& r) { return r.op == wqe_opcode::ATOMIC_CS || r.op == wqe_opcode::ATOMIC_FA; }
std::uint32_t last_psn(const sq_request& r) { return psn_add(r.psn, std::int64_t{r.npsn} - 1); }
bool contains(const sq_request& r, std::uint32_t psn) {
    const std::int32_t d = psn_diff(psn, r.psn);
    return d >= 0 && static_cast<std::uint32_t>(d) < r.npsn;
}

hw::cqe64 req_cqe(const sq_request& r, std::uint32_t qpn, std::uint32_t uidx) {
    hw::cqe64 c{};
    c.wqe_counter = hw::be16::from(r.wqe_index);
    c.sop_drop_qpn = hw::be32::from((std::uint32_t{static_cast<std::uint8_t>(r.op)} << 24) | qpn);
    c.byte_cnt = hw::be32::from(r.byte_cnt);
    c.srqn_uidx = hw::be32::from(uidx & kMask24);
    c.op_own = hw::make_op_own(hw::cqe_opcode::REQ, false, 0);
    return c;
}

hw::cqe64 req_err_cqe(const sq_request& r, std::uint32_t qpn) {
    hw::cqe64 c{};
    auto& e = reinterpret_cast<hw::err_cqe64&>(c);
    e.syndrome = static_cast<std::uint8_t>(r.error);
    e.s_wqe_opcode_qpn = hw::be32::from((std::uint32_t{static_cast<std::uint8_t>(r.op)} << 24) | qpn);
    e.wqe_counter = hw::be16::from(r.wqe_index);
    e.op_own = hw::make_op_own(hw::cqe_opcode::REQ_ERR, false, 0);
    return c;
}

}  // namespace

void transport_engine::arm_ack_timer(qp_object& qp) {
    qp_transport& x = qp.x;
    const auto t = ack_timeout(ifc::get<ads::ack_timeout>(ifc::at<qpc::primary_address_path>(qp.qpc.data())));
    if (t.count() == 0 || x.outstanding.empty() || x.rnr_wait) return;
    x.timer = true;
    x.retry_at = clock_type::now() + t;
}

// Completes, in order, every WQE at the front that has its answer.
void transport_engine::complete_front(qp_object& qp) {
    qp_transport& x = qp.x;
    const std::uint32_t uidx = ifc::get<qpc::user_index>(qp.qpc.data());
    while (!x.outstanding.empty() && x.outstanding.front().done) {
        // Still valid once popped: it stays in its slot until a later push_back.
        const sq_request& r = x.outstanding.front();
        x.outstanding.pop_front();
        qp.sq_consumer += r.bbs;
        if (r.failed) {
            push_cqe(qp.cqn_snd, req_err_cqe(r, qp.qpn), false);
            hooks_.count_req_error(qp, r.error);
            const bool connected = ifc::get<qpc::st>(qp.qpc.data()) == static_cast<std::uint32_t>(transport::rc);
            qp_to_error(qp, !connected);
            return;
        }
        if (r.signaled) push_cqe(qp.cqn_snd, req_cqe(r, qp.qpn, uidx), false);
    }
    if (x.outstanding.empty()) x.timer = false;
}

// --- answers -------------------------------------------------------------------------------

void transport_engine::on_response(qp_object& qp, wire::packet& p) {
    if (qp.state != qp_state::RTS && qp.state != qp_state::SQD) return;  // dropped once out of RTS
    switch (op::operation_of(p.bth.opcode)) {
    case op::ACKNOWLEDGE:
        if (syn::kind(p.aeth.syndrome) != syn::ACK) return on_nak(qp, p);
        implied_nak(qp, p.bth.psn);
        if (ack_through(qp, p.bth.psn)) progress(qp, false);
        return;
    case op::RDMA_READ_RESPONSE_FIRST:
    case op::RDMA_READ_RESPONSE_MIDDLE:
    case op::RDMA_READ_RESPONSE_LAST:
    case op::RDMA_READ_RESPONSE_ONLY: return on_read_response(qp, p);
    case op::ATOMIC_ACKNOWLEDGE: return on_atomic_ack(qp, p);
    default: trace_.count(&counters::packets_dropped);
    }
}

// An answer with PSN `psn` says the responder carried out every request up to it: each
// SEND and WRITE whose last packet is at or before it is done (IBA 9.7.5.1.1, "coalesced"
// ACKs). READs and atomics are done only by their responses. True when one moved.
bool transport_engine::ack_through(qp_object& qp, std::uint32_t psn) {
    qp_transport& x = qp.x;
    // An ACK for a PSN not yet sent is not for this connection's requests.
    if (psn_diff(psn, psn_add(x.next_psn, -1)) > 0) return false;
    bool moved = false;
    for (sq_request& r : x.outstanding) {
        if (psn_diff(r.psn, psn) > 0) break;
        if (r.done || is_read(r) || is_atomic(r)) continue;
        if (psn_diff(last_psn(r), psn) <= 0) {
            r.done = true;
            moved = true;
        }
    }
    return moved;
}

// An answer with PSN `psn` beyond a READ whose responses have not all come implies they
// were lost: the responder answers in PSN order, so they will not come now (IBA 9.7.5.1.1
// "implied NAK", 9.7.5.1.3). The READ is asked again at once from its first missing
// response, once per gap, as a gap among the responses does; no waiting for the ACK
// timeout.
void transport_engine::implied_nak(qp_object& qp, std::uint32_t psn) {
    for (sq_request& r : qp.x.outstanding) {
        if (psn_diff(r.psn, psn) >= 0) break;
        if (r.done || !is_read(r) || psn_diff(psn, last_psn(r)) <= 0 || r.rerequested == r.resp_got) continue;
        r.rerequested = r.resp_got;
        hooks_.count(qp, &q_counter_values::implied_nak_seq_err);
        trace_.count(&counters::retransmits);
        send_packet(segment(r, r.resp_got));
    }
}

// Progress: the retry budgets start again, the ACK timer restarts, completions go out,
// and the send queue may go on (a fence may have cleared).
void transport_engine::progress(qp_object& qp, bool nak) {
    qp_transport& x = qp.x;
    const std::byte* q = qp.qpc.data();
    x.retries_left = ifc::get<qpc::retry_count>(q);
    if (!nak) x.rnr_left = ifc::get<qpc::rnr_retry>(q);
    x.timer = false;
    complete_front(qp);
    if (qp.state != qp_state::RTS) return;
    arm_ack_timer(qp);
    if (x.kicked) sq_progress(qp);
}

void transport_engine::on_nak(qp_object& qp, const wire::packet& p) {
    qp_transport& x = qp.x;
    const std::uint32_t psn = p.bth.psn;
    const std::uint8_t s = p.aeth.syndrome;
    // Every NAK acknowledges the requests before the PSN it names (IBA 9.7.5.1.1).
    const bool moved = ack_through(qp, psn_add(psn, -1));
    const auto target = std::find_if(x.outstanding.begin(), x.outstanding.end(),
                                     [&](const sq_request& r) { return !r.done && contains(r, psn); });
    if (syn::kind(s) == syn::RNR_NAK) {
        trace_.count(&counters::rnr_naks);
        if (target == x.outstanding.end() || x.rnr_wait) {
            if (moved) progress(qp, true);
            return;
        }
        const unsigned limit = ifc::get<qpc::rnr_retry>(qp.qpc.data());
        if (limit != kRnrRetryForever && x.rnr_left == 0) {
            target->done = target->failed = true;
            target->error = cqe_syndrome::RNR_RETRY_EXC_ERR;
            return progress(qp, true);
        }
        if (limit != kRnrRetryForever) --x.rnr_left;
        hooks_.count(qp, &q_counter_values::rnr_nak_retry_err);  // an RNR NAK retried after
        x.rnr_wait = true;
        x.rnr_psn = psn;
        x.timer = false;
        x.retry_at = clock_type::now() + std::chrono::microseconds(kRnrMicros[syn::value(s)]);
        active_qps_.insert(qp.qpn);
        complete_front(qp);
        return;
    }
    if (s == syn::NAK_PSN_SEQUENCE_ERROR) {
        // The responder lost the packet with this PSN: send again from it (go-back-N),
        // unless an RNR wait will do so.
        hooks_.count(qp, &q_counter_values::packet_seq_err);
        if (!x.rnr_wait && target != x.outstanding.end()) retransmit_from(qp, psn);
        return progress(qp, true);
    }
    if (target == x.outstanding.end()) {
        if (moved) progress(qp, true);
        return;
    }
    target->done = target->failed = true;
    target->error = s == syn::NAK_INVALID_REQUEST     ? cqe_syndrome::REMOTE_INVAL_REQ_ERR
                    : s == syn::NAK_REMOTE_ACCESS_ERROR ? cqe_syndrome::REMOTE_ACCESS_ERR
                                                        : cqe_syndrome::REMOTE_OP_ERR;
    progress(qp, true);
}

// RDMA READ response packets (IBA 9.7.5.1.3 ff.): scattered in PSN order at (PSN - first
// PSN) * MTU; a gap makes the requester ask again from the first packet it lacks (a new
// READ request with that PSN, address and length moved on), once per gap.
void transport_engine::on_read_response(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    const std::uint32_t psn = p.bth.psn;
    const auto it = std::find_if(x.outstanding.begin(), x.outstanding.end(),
                                 [&](const sq_request& r) { return !r.done && is_read(r) && contains(r, psn); });
    if (it == x.outstanding.end()) {  // a duplicate, or for a READ already done
        trace_.count(&counters::packets_dropped);
        return;
    }
    sq_request& r = *it;
    const std::int32_t k = psn_diff(psn, r.psn);
    if (static_cast<std::uint32_t>(k) < r.resp_got) return;  // again: already scattered
    if (static_cast<std::uint32_t>(k) > r.resp_got) {
        if (r.rerequested != r.resp_got) {
            r.rerequested = r.resp_got;
            trace_.count(&counters::retransmits);
            send_packet(segment(r, r.resp_got));
        }
        return;
    }
    // The packet's size must be the MTU but for the last, which alone is a Last or Only,
    // and the first a First or Only (after a request asked again from the middle, its
    // answer starts with a First too); one that is not is dropped.
    const std::uint32_t total = r.msg.reth.dma_length;
    const std::uint64_t off = std::uint64_t{r.resp_got} * r.mtu;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(r.mtu, total - std::min<std::uint64_t>(off, total)));
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    const bool first = r.resp_got == 0, last = r.resp_got + 1 == r.npsn;
    if (p.payload.size() != want || (first && (h & wire::is_first) == 0) || ((h & wire::is_last) != 0) != last) {
        trace_.count(&counters::packets_dropped);
        return;
    }
    implied_nak(qp, psn);
    ack_through(qp, psn_add(r.psn, -1));  // a response answers every request before the READ
    if (!p.payload.empty()) {
        if (const auto s = scatter(qp.pd, r.local, off, p.payload, total); s != cqe_syndrome{}) {
            r.done = r.failed = true;
            r.error = s;
            return progress(qp, false);
        }
    }
    ++r.resp_got;
    if (r.resp_got == r.npsn) {
        r.byte_cnt = total;
        r.done = true;
    }
    progress(qp, false);
}

// The Atomic ACK: the original value at the target, scattered to the 8-byte local buffer.
void transport_engine::on_atomic_ack(qp_object& qp, wire::packet& p) {
    qp_transport& x = qp.x;
    const auto it = std::find_if(x.outstanding.begin(), x.outstanding.end(),
                                 [&](const sq_request& r) { return !r.done && is_atomic(r) && r.psn == p.bth.psn; });
    if (it == x.outstanding.end()) {
        trace_.count(&counters::packets_dropped);
        return;
    }
    implied_nak(qp, p.bth.psn);
    ack_through(qp, psn_add(p.bth.psn, -1));
    std::array<std::byte, 8> orig{};
    std::memcpy(orig.data(), &p.atomic_ack, 8);
    if (const auto s = scatter(qp.pd, it->local, 0, orig, 8); s != cqe_syndrome{}) {
        it->failed = true;
        it->error = s;
    }
    it->byte_cnt = 8;
    it->done = true;
    progress(qp, false);
}

// Go-back-N (IBA 9.7.5.1.3): every packet of every unanswered request from PSN `psn` on,
// cut again from the kept messages; a READ asks again from its first missing response.
void transport_engine::retransmit_from(qp_object& qp, std::uint32_t psn) {
    for (sq_request& r : qp.x.outstanding) {
        if (r.done) continue;
        std::uint32_t from = 0, to = r.npsn;
        if (is_read(r)) {
            from = r.resp_got;
            to = from + 1;
            r.rerequested = r.resp_got;
        } else if (is_atomic(r)) {
            to = 1;
        } else {
            const std::int32_t d = psn_diff(psn, r.psn);
            if (d > 0) {
                if (static_cast<std::uint32_t>(d) >= r.npsn) continue;
                from = static_cast<std::uint32_t>(d);
            }
        }
        for (std::uint32_t k = from; k < to; ++k) {
            trace_.count(&counters::retransmits);
            send_packet(segment(r, k));
        }
    }
}

bool transport_engine::tick(clock_type::time_point now) {
    // An ACK owed by a receive() no end_of_batch() followed is not held longer.
    bool any = end_of_batch();
    if (active_qps_.empty()) return any;
    active_qps_.qpns(todo_);
    for (const std::uint32_t qpn : todo_) {
        const auto it = t_.qps.find(qpn);
        if (it == t_.qps.end()) {
            active_qps_.erase(qpn);
            continue;
        }
        qp_object& qp = it->second;
        qp_transport& x = qp.x;
        if (qp.state == qp_state::ERR) {
            // Receives posted to a QP in error are flushed as the record shows them.
            const auto before = qp.rq_consumer;
            flush_rq(qp);
            any |= before != qp.rq_consumer;
            continue;
        }
        if (qp.state != qp_state::RTS) {
            if (!x.kicked) active_qps_.erase(qpn);
            continue;
        }
        if (x.rnr_wait && now >= x.retry_at) {
            x.rnr_wait = false;
            retransmit_from(qp, x.rnr_psn);
            arm_ack_timer(qp);
            any = true;
        }
        if (x.timer && now >= x.retry_at) {
            any = true;
            const auto first = std::find_if(x.outstanding.begin(), x.outstanding.end(),
                                            [](const sq_request& r) { return !r.done; });
            if (x.retries_left == 0) {
                if (first != x.outstanding.end()) {
                    first->done = first->failed = true;
                    first->error = cqe_syndrome::TRANSPORT_RETRY_EXC_ERR;
                }
                x.timer = false;
                complete_front(qp);
                continue;
            }
            --x.retries_left;
            hooks_.count(qp, &q_counter_values::local_ack_timeout_err);  // a timeout retried after
            if (first != x.outstanding.end()) retransmit_from(qp, first->psn);
            x.timer = false;
            arm_ack_timer(qp);
        }
        if (x.kicked) {
            const auto fetched = x.sq_fetched;
            sq_progress(qp);
            any |= fetched != x.sq_fetched;
        }
        if (qp.state == qp_state::RTS && !x.kicked && !x.timer && !x.rnr_wait) active_qps_.erase(qpn);
    }
    return any;
}

}  // namespace cxv::sim
