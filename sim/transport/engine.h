// The transport engine: what a ConnectX does with the objects the firmware created once
// the driver posts work (IBA 9 "Transport Layer"; PRM "Send WQE", "Receive WQE",
// "Completion Queue"). Three parts:
//   requester (xport_send.cc)   send doorbells, WQE execution, messages cut into
//             (xport_segment.cc) path-MTU packets;
//             (xport_ack.cc)    ACKs, NAKs and responses, go-back-N retransmission,
//                               timers, send completions;
//   responder (xport_recv.cc)   request packets from the wire: PSN and opcode sequence,
//                               receive WQEs from an RQ or SRQ, SEND and WRITE data;
//             (xport_respond.cc) ACKs, NAKs, READ responses, atomics, duplicates;
//   CQ engine (cq_engine.cc)    CQEs, the CQ doorbell record and arm doorbell,
//                               completion events.
// It works on the object tables (sim/objects/) and host memory behind the IOMMU, and
// never calls a command handler. What it needs from the rest of the function -- the
// wire, events on EQs, Q counters -- it asks through transport_hooks, which the
// device implements (sim/device.h); the firmware calls it at a few named points.
//
// The seam between requester and responder is the InfiniBand transport packet
// (sim/wire/packet.h): the requester cuts each message into path-MTU packets, and every
// packet leaves through transport_hooks::transmit (requests, ACKs, NAKs, responses) and
// enters through receive(), whether it came over the fabric from another function or
// looped back to this one.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "hw/cqe.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "sim/device_config.h"
#include "sim/objects/objects.h"
#include "sim/objects/tables.h"
#include "sim/pci/bar.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"
#include "sim/transport/cq_engine.h"
#include "sim/transport/eth_headers.h"
#include "sim/transport/transport_type.h"
#include "sim/transport/hooks.h"
#include "sim/transport/mkey_translate.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

// A short list of QP numbers without repeats (the QPs with work in flight; the QPs that
// owe an ACK): a few at a time, so a vector searched from the front, which allocates
// nothing once it has grown.
template <typename V>
class qpn_list {
public:
    bool empty() const noexcept { return items_.empty(); }
    V* find(std::uint32_t qpn) {
        for (auto& [q, v] : items_) {
            if (q == qpn) return &v;
        }
        return nullptr;
    }
    // The entry of `qpn`, added (value-initialized) when missing; `fresh` says which.
    V& get(std::uint32_t qpn, bool& fresh) {
        fresh = false;
        if (V* v = find(qpn)) return *v;
        fresh = true;
        items_.emplace_back(qpn, V{});
        return items_.back().second;
    }
    void insert(std::uint32_t qpn) {
        bool fresh = false;
        get(qpn, fresh);
    }
    void erase(std::uint32_t qpn) {
        for (std::size_t i = 0; i < items_.size(); ++i) {
            if (items_[i].first != qpn) continue;
            items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
    }
    void clear() noexcept { items_.clear(); }
    std::uint32_t first_qpn() const { return items_.front().first; }
    // The QP numbers, oldest first, into `out` (which keeps its capacity).
    void qpns(std::vector<std::uint32_t>& out) const {
        out.clear();
        for (const auto& [q, v] : items_) out.push_back(q);
    }

private:
    std::vector<std::pair<std::uint32_t, V>> items_;
};

class transport_engine {
public:
    transport_engine(const device_config& cfg, bar0& bar, iommu& mmu, trace& tr, object_tables& t,
                     transport_hooks& hooks);
    transport_engine(const transport_engine&) = delete;
    transport_engine& operator=(const transport_engine&) = delete;

    // --- entry points (the model thread and the firmware) ---
    // A send doorbell the model thread found at byte `off` of UAR page `uar` (a
    // BlueFlame register half): `qword0` is its first 8 bytes as written (the first 8
    // bytes of a WQE's control segment); the rest of the half may hold a BlueFlame copy.
    void sq_doorbell(std::uint32_t uar, std::size_t off, std::uint64_t qword0);
    // A CQ arm doorbell (UAR + 0x20, 64 bits: arm word, cqn).
    void cq_doorbell(std::uint64_t value) { cqs_.doorbell(value); }
    // A message for one of this function's QPs, from the wire (requests go to the
    // responder, answers to the requester). Dropped when no such QP exists; false then.
    bool receive(wire::packet& p);
    // A multicast packet's destination QP (IBA 10.5.2.3).
    static constexpr std::uint32_t kMulticastQpn = 0xffffff;
    // An Ethernet frame from the wire that is no RoCE packet of this function's: through
    // the NIC receive flow tables to the RQs they steer it to (xport_eth_rx.cc). False
    // when no RQ took it. `known`: the checksums its sender computed (the frame unchanged
    // since), which hold without being summed again.
    bool receive_frame(std::span<const std::byte> frame, wire::ip_checksums known = {});
    // Timers (RNR waits, ACK timeouts), stalled send queues and receive queues of QPs in
    // error. True when something happened.
    bool tick(std::chrono::steady_clock::time_point now);
    // The device took a batch of packets from the wire and delivered them: every ACK the
    // responder still owes goes out now (coalescing never holds one past the batch).
    // True when one went.
    bool end_of_batch();
    // A device round's CQE writes gathered (cq_engine::begin_batch), written at its end.
    void begin_cq_batch() noexcept { cqs_.begin_batch(); }
    void end_cq_batch() { cqs_.end_batch(); }

    // The firmware's calls: a QP was created on UAR page `uar` (its BlueFlame registers
    // get their sentinels), a modify command changed its state (from `from`: taking it
    // to error flushes it, to reset clears the transport state), it is being destroyed.
    void watch_bf_page(std::uint32_t uar);
    void on_qp_transition(qp_object& qp, qp_state from);
    void on_qp_destroyed(std::uint32_t qpn) {
        active_qps_.erase(qpn);
        owed_acks_.erase(qpn);
    }
    // Every object is gone (teardown, reset).
    void reset();
    // Whether some QP has work in flight (requests awaiting answers, timers, a send
    // queue not yet drained): the model thread then keeps polling rather than sleeping,
    // since the doorbells that follow are memory writes nothing can wake it for.
    bool busy() const noexcept { return !active_qps_.empty(); }

private:
    // Work queues and data (xport_queues.cc).
    bool wq_read(const qp_object& qp, std::uint64_t off, void* dst, std::size_t len);
    bool wq_read(const wq_object& q, std::uint64_t off, void* dst, std::size_t len);
    std::optional<std::uint32_t> wq_dbr(const wq_object& q, bool send);
    // A receive WQE's scatter list (xport_recv.cc).
    static void parse_scatter(const std::byte* at, std::size_t bytes, std::vector<local_sge>& out);
    bool srq_read(const srq_object& srq, std::uint64_t off, void* dst, std::size_t len);
    std::optional<std::uint32_t> qp_dbr(const qp_object& qp, bool send);
    std::optional<std::uint32_t> srq_dbr(const srq_object& srq);
    // Data through memory keys: every piece translated and checked before any byte moves.
    hw::cqe_syndrome gather(std::uint32_t pd, const std::vector<local_sge>& sges, wire::payload_buffer& out);
    hw::cqe_syndrome scatter(std::uint32_t pd, const std::vector<local_sge>& sges, std::size_t skip,
                             std::span<const std::byte> data, std::size_t capacity_needed);
    bool remote_access(std::uint32_t pd, std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                       unsigned access, iova_list& out);
    bool remote_access(std::uint32_t pd, std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                       unsigned access, std::vector<iova_range>& out);
    // A UMR's change to the key `key` names (xport_queues.cc): every check first, then the
    // context fields its mask names and the translation entries `xlt` from `first` on.
    hw::cqe_syndrome modify_mkey(const qp_object& qp, std::uint32_t key, const hw::wqe_umr_ctrl_seg& u,
                                 const std::byte* mkey_seg, std::uint64_t first, std::span<const std::uint64_t> xlt);
    // A SEND with invalidate's R_Key (IETH, as on the wire) freed: a fast-registration key
    // (umr_en) of the QP's PD whose variant it names; false, the key untouched, otherwise.
    bool invalidate_rkey(const qp_object& qp, const std::array<std::byte, 4>& ieth);
    bool push_cqe(std::uint32_t cqn, const hw::cqe64& cqe, bool solicited) {
        return cqs_.push(cqn, cqe, solicited);
    }

    // Requester (xport_send.cc): the send queue, then one WQE, dispatched by opcode
    // family to a function that reads its segments and issues its message.
    struct wqe_exec;
    void sq_progress(qp_object& qp);
    bool execute_wqe(qp_object& qp, std::uint32_t at, std::uint32_t& bbs);
    bool stale_bf_control(const qp_object& qp, std::uint64_t base, std::uint32_t mask, std::uint32_t at,
                          const std::byte* copy8);
    // How far back (in WQE-BBs) a BlueFlame copy's control bytes are looked for among the
    // ring's WQEs posted before it: see stale_bf_control().
    static constexpr std::uint32_t kBfStaleWindow = 64;
    bool exec_send(wqe_exec& e);
    bool exec_rdma_write(wqe_exec& e);
    bool exec_rdma_read(wqe_exec& e);
    bool exec_atomic(wqe_exec& e);
    bool exec_umr(wqe_exec& e);
    void start_message(wqe_exec& e);
    std::array<std::uint8_t, 16> source_gid(unsigned index) const;
    std::array<std::uint8_t, 16> port_gid() const;
    void fill_route(wire::route& n, const std::uint8_t* dgid, unsigned sgid_index, bool grh) const;
    hw::cqe_syndrome ud_address(wqe_exec& e);
    void connected_address(wqe_exec& e);
    hw::cqe_syndrome take_raddr(wqe_exec& e);
    hw::cqe_syndrome take_data(wqe_exec& e, bool payload);
    bool issue_for_response(wqe_exec& e);
    bool issue(wqe_exec& e);
    bool finish_wqe(wqe_exec& e, hw::cqe_syndrome why);
    // Answers (xport_ack.cc): ACKs, NAKs and responses, go-back-N, timers, completions.
    void complete_front(qp_object& qp);
    void arm_ack_timer(qp_object& qp);
    void on_response(qp_object& qp, wire::packet& p);
    bool ack_through(qp_object& qp, std::uint32_t psn);
    void on_nak(qp_object& qp, const wire::packet& p);
    void on_read_response(qp_object& qp, wire::packet& p);
    void on_atomic_ack(qp_object& qp, wire::packet& p);
    void progress(qp_object& qp, bool nak);
    void retransmit_from(qp_object& qp, std::uint32_t psn);
    void implied_nak(qp_object& qp, std::uint32_t psn);
    // Responder (xport_recv.cc, xport_respond.cc).
    bool receive_multicast(wire::packet& p);
    void on_request(qp_object& qp, wire::packet& p);
    void on_ud_request(qp_object& qp, wire::packet& p);
    void recv_send(qp_object& qp, wire::packet& p);
    void recv_write(qp_object& qp, wire::packet& p);
    void recv_read(qp_object& qp, wire::packet& p);
    void recv_atomic(qp_object& qp, wire::packet& p);
    void on_duplicate(qp_object& qp, wire::packet& p);
    bool read_responses(qp_object& qp, const wire::packet& req);
    wire::packet answer(const qp_object& qp, const wire::packet& req, std::uint8_t op, std::uint32_t psn) const;
    void address_answer(wire::packet& a, const qp_object& qp, const wire::packet& req, std::uint8_t op,
                        std::uint32_t psn) const;
    void ack(qp_object& qp, const wire::packet& req, std::uint32_t psn);
    void respond(qp_object& qp, wire::packet&& a);
    void send_owed_ack(std::uint32_t qpn);
    void nak(qp_object& qp, const wire::packet& req, std::uint8_t syndrome);
    void no_wqe(qp_object& qp, const wire::packet& req);
    void fail_request(qp_object& qp, const wire::packet& req, std::uint8_t syndrome, hw::event_type ev);
    void receive_cqe(qp_object& qp, const wire::packet& p, hw::cqe_opcode op, const recv_slot& w, std::uint32_t bytes);
    bool take_recv_wqe(qp_object& qp, recv_slot& out);
    void responder_error(qp_object& qp, const recv_slot* w, hw::cqe_syndrome why);
    // Errors and flushes (xport_queues.cc).
    void qp_to_error(qp_object& qp, bool send_queue_only);
    void flush_sq(qp_object& qp);
    void flush_rq(qp_object& qp);
    void qp_event(hw::event_type t, std::uint32_t qpn);
    void send_packet(wire::packet&& p) { hooks_.transmit(std::move(p)); }
    // The Ethernet pipeline (xport_eth_rx.cc). What the flow tables decide for a frame:
    // the counters its entries count into, and the TIRs (each with the entry's flow tag)
    // it goes to. The last frame's is kept: the next one with the same match image meets
    // the same entries while the tables' generation stays (a stream's frames differ in
    // no header the tables see).
    struct steered_tir {
        std::uint32_t tirn = 0, flow_tag = 0;
        const tir_object* tir = nullptr;  // null: no such TIR
        wq_object* rq = nullptr;          // a direct TIR's RQ (null: none, or an indirect TIR)
    };
    struct steering_decision {
        std::uint64_t generation = ~std::uint64_t{0};
        eth_match_fields fields;  // the frame's, which decided
        std::vector<flow_counter*> counters;
        std::vector<steered_tir> tirs;
    };
    void steer(steering_decision& d);
    bool deliver_to_tir(const steered_tir& to, std::span<const std::byte> frame, const eth_headers& h);
    bool deliver_to_rq(wq_object& rq, std::span<const std::byte> frame, const eth_headers& h,
                       const rx_hash_result& hash, std::uint32_t flow_tag);
    hw::cqe_syndrome scatter_mpwqe(wq_object& rq, std::size_t skip, std::span<const std::byte> data);
    // (xport_eth_tx.cc) An SQ's posted WQEs, each a frame on the wire.
    void eth_sq_progress(wq_object& sq);
    hw::cqe_syndrome send_frame(const wq_object& sq, std::span<const std::byte> wqe, bool lso);
    [[gnu::noinline]] hw::cqe_syndrome lso_begin(std::size_t header, std::size_t mss, std::size_t& frames);
    [[gnu::noinline]] void lso_cut(std::size_t i, std::size_t frames);
    hw::cqe_syndrome gather_into(std::uint32_t pd, const std::vector<local_sge>& sges, std::size_t max_bytes);

    const device_config& cfg_;
    bar0& bar_;
    iommu& mmu_;
    trace& trace_;
    object_tables& t_;
    transport_hooks& hooks_;
    cq_engine cqs_;
    struct none {};
    qpn_list<none> active_qps_;           // QPs the tick must visit
    std::vector<std::uint32_t> todo_;     // the tick's copy of them
    std::vector<local_sge> wqe_sges_;     // the data segments of the WQE being executed
    std::vector<std::uint64_t> umr_xlt_;  // the translation entries of the UMR being executed
    std::vector<local_sge> rx_sges_;      // the receive WQE a frame goes to
    std::vector<std::byte> rx_frame_;     // a frame whose VLAN tag is stripped
    steering_decision steered_;           // the last frame's
    eth_parse_memo rx_parse_;             // the last received frame's headers
    eth_parse_memo tx_parse_;             // the last sent frame's, before its checksums
    std::vector<iova_range> rx_ranges_;   // a striding RQ's buffer being translated
    std::vector<local_sge> tx_sges_;      // an SQ WQE's data segments
    std::vector<std::byte> tx_frame_;     // the frame an SQ WQE builds
    std::set<std::uint32_t> bf_pages_;    // UAR pages with BlueFlame sentinels
    // The ACK each RC responder owes (IBA 9.7.5.1.1 "coalesced"): for the last request
    // packet carried out that asked for one, with the MSN after it; a later one replaces
    // it, anything else the responder sends goes after it.
    qpn_list<wire::packet> owed_acks_;
    // The LSO WQE being cut into frames (lso_begin, lso_cut): its message, the length of
    // its headers and their parse, its payload bytes a frame, its first IP id and TCP
    // sequence number.
    struct lso_state {
        std::vector<std::byte> message;
        std::size_t header = 0, mss = 0;
        eth_headers h;
        std::uint16_t ip_id = 0;
        std::uint32_t seq = 0;
    } lso_;
};

}  // namespace cxv::sim
