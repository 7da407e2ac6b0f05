// The CQ poller (PRM "Completion Queue", "CQE Format"): a CQE is the driver's when its
// owner bit equals the parity of the pass over the ring (and its opcode is not INVALID);
// only then are its other bytes read (from_device()). Each CQE names its QP and the
// WQE it completes; the poller asks the QP's rings for the wr_id and retires the WQE.
// After a batch, the consumer index goes to the doorbell record so that the device may
// reuse the entries.
//
// Error CQEs (REQ_ERR, RESP_ERR) become their ibv_wc_status, with the PRM syndrome
// and the vendor syndrome in vendor_err (syndrome << 8 | vendor syndrome).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "hw/opcodes.h"
#include "queues/mp_send_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/types.h"

namespace cxv::queues {

// The rings of one QP, as a CQ sees them (any may be null).
struct qp_rings {
    std::uint32_t qpn = 0;
    send_queue* sq = nullptr;
    recv_queue* rq = nullptr;
    srq_ring* srq = nullptr;
    mp_send_queue* mpsq = nullptr;  // a multi-producer send ring (sq is null then)
    // A raw packet QP's (IBV_QPT_RAW_PACKET): an SQ and an RQ of the Ethernet transport
    // (PRM "Transport Interface"). Its send CQEs name the SQ, whose number is `qpn`; its
    // receive CQEs carry the steering rule's flow tag where a QP's carry the QPN, and the
    // RQ's user_index (below) in srqn_uidx, by which the poller finds them, as
    // rdma-core's mlx5 provider finds every receive with CQE version 1. Their completions
    // report IBV_WC_IP_CSUM_OK where the device found the IPv4 and L4 checksums good.
    bool raw_packet = false;
    std::uint32_t user_index = 0;  // a raw packet QP's RQ's rqc.user_index
};

// The ibv_wc_status of an error CQE's syndrome.
constexpr std::uint32_t status_of(hw::cqe_syndrome s) noexcept {
    switch (s) {
    case hw::cqe_syndrome::LOCAL_LENGTH_ERR: return wc_loc_len_err;
    case hw::cqe_syndrome::LOCAL_QP_OP_ERR: return wc_loc_qp_op_err;
    case hw::cqe_syndrome::LOCAL_PROT_ERR: return wc_loc_prot_err;
    case hw::cqe_syndrome::WR_FLUSH_ERR: return wc_wr_flush_err;
    case hw::cqe_syndrome::MW_BIND_ERR: return wc_mw_bind_err;
    case hw::cqe_syndrome::BAD_RESP_ERR: return wc_bad_resp_err;
    case hw::cqe_syndrome::LOCAL_ACCESS_ERR: return wc_loc_access_err;
    case hw::cqe_syndrome::REMOTE_INVAL_REQ_ERR: return wc_rem_inv_req_err;
    case hw::cqe_syndrome::REMOTE_ACCESS_ERR: return wc_rem_access_err;
    case hw::cqe_syndrome::REMOTE_OP_ERR: return wc_rem_op_err;
    case hw::cqe_syndrome::TRANSPORT_RETRY_EXC_ERR: return wc_retry_exc_err;
    case hw::cqe_syndrome::RNR_RETRY_EXC_ERR: return wc_rnr_retry_exc_err;
    case hw::cqe_syndrome::REMOTE_ABORTED_ERR: return wc_rem_abort_err;
    }
    return wc_general_err;
}

// The ibv_wc_opcode of a send WQE opcode (a REQ CQE carries it in sop_drop_qpn 31:24).
constexpr std::uint32_t send_opcode_of(std::uint8_t wqe_opcode) noexcept {
    switch (static_cast<hw::wqe_opcode>(wqe_opcode)) {
    case hw::wqe_opcode::RDMA_WRITE:
    case hw::wqe_opcode::RDMA_WRITE_IMM: return wc_rdma_write;
    case hw::wqe_opcode::RDMA_READ: return wc_rdma_read;
    case hw::wqe_opcode::ATOMIC_CS: return wc_comp_swap;
    case hw::wqe_opcode::ATOMIC_FA: return wc_fetch_add;
    default: return wc_send;
    }
}

namespace detail {

// What poll() makes of a CQE by its op_own byte and the ring pass's owner parity (PRM
// "CQE Format": op_own is the opcode (7:4), other flags (3:1, any value) and the owner
// bit (0), which is the pass's parity on the driver's entries).
enum entry_kind : std::uint8_t {
    kind_req = 0,    // REQ: a good send completion
    kind_resp = 1,   // RESP_WR_IMM, RESP_SEND, RESP_SEND_IMM, RESP_SEND_INV (1..4)
    kind_other = 2,  // the driver's, any other opcode (REQ_ERR, RESP_ERR, ...)
    kind_stop = 3,   // the device's (owner bit of the other pass, or opcode INVALID)
};

// Tables of poll(), one object per owner parity so that one base register reaches them
// all and op_own indexes them as it is: by op_own, by the send WQE opcode of a REQ CQE
// (its sop_drop_qpn byte) and by the first byte of flags_rqpn.
struct poll_tables {
    std::array<std::uint8_t, 256> kind;
    // The status and opcode word (kStatusOpcode below): status low, opcode high.
    std::array<std::uint64_t, 256> send_word;
    std::array<std::uint64_t, 256> recv_word;
    // Immediate data kept, and the with_imm flag (wc_flags, the high half of the
    // kSrcQpFlags word), with RESP_WR_IMM and RESP_SEND_IMM.
    std::array<std::uint32_t, 256> imm_mask;
    std::array<std::uint64_t, 256> imm_flag;
    // By flags_rqpn's first byte: with_grh (GRH presence is its bits 5:4) less the byte
    // where it sits in flags_rqpn's host-order value (bits 31:24), so that the value plus
    // this is the kSrcQpFlags word: src_qp (23:0) low, with_grh high.
    std::array<std::uint64_t, 256> src_grh;
    // The kPkeySlid word by the same byte: sl (its bits 3:0: the SL, or over RoCE the
    // packet type), pkey_index, slid and dlid_path_bits 0.
    std::array<std::uint64_t, 256> sl_word;
};
inline constexpr std::array<poll_tables, 2> kPoll = [] {
    std::array<poll_tables, 2> sets{};
    for (unsigned parity = 0; parity < 2; ++parity) {
        poll_tables& t = sets[parity];
        for (unsigned b = 0; b < 256; ++b) {
            const unsigned op = b >> 4;
            const bool ours = (b & 1) == parity && op != static_cast<unsigned>(hw::cqe_opcode::INVALID);
            t.kind[b] = !ours ? kind_stop : op == 0 ? kind_req : op <= 4 ? kind_resp : kind_other;
            t.send_word[b] = std::uint64_t{send_opcode_of(static_cast<std::uint8_t>(b))} << 32;
            if (t.kind[b] == kind_resp) {
                const bool imm = op == 1 || op == 3;
                t.recv_word[b] = std::uint64_t{op == 1 ? wc_recv_rdma_with_imm : wc_recv} << 32;
                t.imm_mask[b] = imm ? ~0u : 0u;
                t.imm_flag[b] = imm ? std::uint64_t{wc_with_imm} << 32 : 0;
            }
            t.src_grh[b] = ((b & 0x30) ? std::uint64_t{wc_with_grh} << 32 : 0) - (std::uint64_t{b} << 24);
            t.sl_word[b] = std::uint64_t{b & 0xf} << 32;  // sl is the word's fifth byte (asserted below)
        }
    }
    return sets;
}();

// The tables of a pass's parity, as one pointer the loop keeps in a register: every
// table is then one displacement from it (the empty asm hides where the pointer came
// from, so that the compiler does not keep a pointer per table instead).
[[gnu::always_inline]] inline const poll_tables& tables_of(unsigned parity) noexcept {
    const poll_tables* t = &kPoll[parity];
    __asm__("" : "+r"(t));
    return *t;
}

// What a CQ's dead flag points to until set_dead_flag(): never dead.
inline const std::atomic<bool> kNeverDead{false};

// The one-entry ring a CQ polls once it has flushed (completion_queue::flush): opcode
// INVALID (PRM "CQE Format"), which poll() takes for the device's whatever the owner
// parity, so nothing is ever taken from it. Read-only: nothing writes it.
alignas(64) inline constexpr std::array<std::byte, 64> kDeadRing = [] {
    std::array<std::byte, 64> r{};
    r[offsetof(hw::cqe64, op_own)] = std::byte{static_cast<std::uint8_t>(hw::cqe_opcode::INVALID) << 4};
    return r;
}();

// A CQ's QP cache before any QP is attached, and what an unknown QPN finds: its number
// matches no 24-bit QPN, and it has no rings.
inline constexpr qp_rings kNoQp{~0u, nullptr, nullptr, nullptr, nullptr, false, ~0u};

// poll() stores a completion's fields two at a time where two 32-bit fields share an
// 8-byte word (one store instead of two): these name the words by their first field.
// work_completion is ibv_wc's layout (asserted against <infiniband/verbs.h> in
// api/verbs_post.h and tests/queues).
inline constexpr std::size_t kStatusOpcode = offsetof(work_completion, status);        // status, opcode
inline constexpr std::size_t kSrcQpFlags = offsetof(work_completion, src_qp);           // src_qp, wc_flags
inline constexpr std::size_t kPkeySlid = offsetof(work_completion, pkey_index);         // pkey_index .. dlid_path_bits, padding
static_assert(offsetof(work_completion, opcode) == kStatusOpcode + 4 &&
              offsetof(work_completion, wc_flags) == kSrcQpFlags + 4 &&
              offsetof(work_completion, sl) == kPkeySlid + 4 && offsetof(work_completion, dlid_path_bits) == kPkeySlid + 5 && sizeof(work_completion) == kPkeySlid + 8 && kStatusOpcode % 8 == 0 &&
              kSrcQpFlags % 8 == 0 && kPkeySlid % 8 == 0);

// One 8-byte word of a completion (the field at `off` in the low half, the next in the
// high half, as x86-64 lays out a little-endian word).
[[gnu::always_inline]] inline void put64(work_completion& wc, std::size_t off, std::uint64_t v) noexcept {
    std::memcpy(reinterpret_cast<std::byte*>(&wc) + off, &v, sizeof(v));
}

}  // namespace detail

// Which fields a completion sets, as ibv_poll_cq(3) and rdma-core's mlx5 provider do:
// always wr_id, status, opcode, qp_num and wc_flags; byte_len; vendor_err only with an
// error status; imm_data only with IBV_WC_WITH_IMM; for a receive also src_qp,
// pkey_index, slid, sl and dlid_path_bits (meaningful on UD). Other fields of `wc` are
// left as they were.
class completion_queue {
public:
    completion_queue() = default;
    // `uar`: the UAR page whose CQ doorbell arms this CQ (CQ number `cqn`); only arm()
    // uses it. `cqe_size`: the ring's stride, 64 or 128 (cqc.cqe_sz); a 128-byte entry's
    // CQE is its second half (PRM "CQE Format"), so the poller reads the ring from its
    // 64th byte on, stepping by the stride. poll()'s own loop steps by 64 bytes: a ring of
    // 128-byte entries goes to poll_rest() whole (rest_only_), which steps by the stride.
    completion_queue(std::byte* cqes, unsigned log_count, hw::cq_doorbell_record* dbrec, std::byte* uar = nullptr,
                     std::uint32_t cqn = 0, unsigned cqe_size = 64) noexcept
        : cqes_(cqes + (cqe_size - sizeof(hw::cqe64))),
          dbrec_(dbrec),
          mask_((1u << log_count) - 1),
          log_(log_count),
          shift_(cqe_size == 128 ? 7 : 6),
          rest_only_(cqe_size == 128 ? ~0u : 0u),
          uar_(uar),
          cqn_(cqn) {}

    // The QPs whose completions arrive here; looked up by QP number (the last one is
    // remembered, so a CQ serving one QP pays one compare). poll() caches the rings of
    // the remembered entry: call attach() again after changing any entry, from the
    // poller's thread or while no thread polls (detach() is the one change another
    // thread may make while one polls).
    void attach(const qp_rings* qps, unsigned count) noexcept {
        qps_ = qps;
        nqps_ = count;
        raw_packet_ = std::any_of(qps, qps + count, [](const qp_rings& q) { return q.raw_packet; });
        remember(count ? &qps[0] : &detail::kNoQp);
    }

    // Up to `max` completions into `out`; returns how many.
    //
    // While the batch does not reach the ring's wrap, the owner parity is fixed and the
    // entry pointer just advances (a batch that does goes to poll_rest(), which takes
    // the wrap: once per pass over the ring). One table load, in the pass's parity's
    // tables, sorts an entry by owner bit and opcode (detail::entry_kind); only an entry
    // of the driver's is read further (from_device()).
    //
    // The loop here takes the common entries only: a REQ or responder CQE of the
    // remembered QP with a single-producer SQ or its own RQ, in runs of one kind (a run
    // of REQs checks kind and QP in one load: next_is_req()). It makes no call; at the
    // first other entry the rest of the batch goes to poll_rest(), which takes every
    // kind.
    [[gnu::always_inline]] int poll(work_completion* out, int max) noexcept {
        // A QP detached since the last call: drop its cached rings first (cold path).
        if (std::atomic_ref<std::uint32_t>(detached_).load(std::memory_order_relaxed) != seen_) [[unlikely]] {
            let_go();
        }
        const std::uint32_t ci0 = ci_;
        const std::uint32_t idx = ci0 & mask_;
        std::uint32_t ci = ci0;
        int n;  // completions written: poll_rest() may take entries it does not report
        // One compare for "max <= 0", "the batch may reach the wrap" and "the entries are
        // 128 bytes" (rest_only_ all ones).
        if (((static_cast<std::uint32_t>(max) - 1) | rest_only_) >= mask_ + 1 - idx) [[unlikely]] {
            if (max <= 0) return 0;
            const auto r = poll_rest(out, static_cast<std::uint32_t>(max), ci);  // up to the wrap and past it
            n = r.n;
            ci = r.ci;
        } else {
            const unsigned parity = (ci0 >> log_) & 1;
            const detail::poll_tables& t = detail::tables_of(parity);
            const std::uint32_t qpn = qpn_;
            const std::byte* const first = cqes_ + (std::size_t{idx} << 6);
            const std::byte* const end = first + (static_cast<std::size_t>(max) << 6);
            const std::byte* p = first;
            // Runs of one kind of entry of the remembered QP: each run's loop holds only
            // its own ring's state (the ring's retirer), and the next entry of another
            // kind or QP comes back here.
            while (p != end) {
                const auto& c = *reinterpret_cast<const hw::cqe64*>(p);
                std::size_t op = c.op_own;
                const unsigned kind = t.kind[op];
                if (kind == detail::kind_resp) {
                    hw::from_device();
                    if (!owns(c, rq_key_)) goto other;
                    auto r = rq_->run();
                    const std::uint32_t key = rq_key_;
                    do {
                        decode_recv(*reinterpret_cast<const hw::cqe64*>(p), op, t, qpn, r, *out);
                        p += 64;
                        ++out;
                    } while (next_is_resp(p, end, op, t, key));
                    rq_->retired(r);
                } else if (kind == detail::kind_req) {
                    hw::from_device();
                    if (!owns(c, sq_key_)) goto other;
                    auto r = sq_->run();
                    const std::uint64_t want = std::uint64_t{parity} << 56 | sq_key_;
                    do {
                        decode_send(*reinterpret_cast<const hw::cqe64*>(p), t, qpn, r, *out);
                        p += 64;
                        ++out;
                    } while (next_is_req(p, end, want));
                    sq_->retired(r);
                } else if (kind == detail::kind_stop) {
                    break;
                } else {
                    goto other;
                }
            }
            // (Counted back from the end, and the consumer index read again below: fewer
            // values live through the loop.)
            n = max - static_cast<int>((end - p) >> 6);
            ci = ci_ + static_cast<std::uint32_t>(n);
            goto done;
        other:
            const auto taken = static_cast<std::uint32_t>(max - ((end - p) >> 6));
            const auto r = poll_rest(out, static_cast<std::uint32_t>(max) - taken, ci_ + taken);
            n = static_cast<int>(taken) + r.n;
            ci = r.ci;
        }
    done:
        if (ci != ci_) [[likely]] {
            ci_ = ci;
            hw::to_device();
            dbrec_->update_ci = hw::be32::from(ci & 0xffffff);
        } else if (dead_->load(std::memory_order_relaxed)) [[unlikely]] {
            // Only where the ring had nothing: a device known dead completes nothing
            // more, so the posted WQEs complete here, flushed.
            return flush(out, max);
        }
        return n;
    }

    // The flag that says the device is dead (the API's, set at its fatal event): from
    // then on, a poll that finds no CQE completes every WQE still posted on the QPs of
    // this CQ (their send queues on their send CQ, receive queues on their receive CQ)
    // with wc_wr_flush_err, oldest first, as Linux's mlx5_ib does for its consumers
    // after an internal error. Receives of an SRQ are not flushed (as there): the SRQ
    // outlives its QPs.
    void set_dead_flag(const std::atomic<bool>* dead) noexcept { dead_ = dead != nullptr ? dead : &detail::kNeverDead; }

    std::uint32_t consumer_index() const noexcept { return ci_; }

    // From now on the CQE's timestamp, flow tag and VLAN of the last completion a poll()
    // returned are kept (last_timestamp, last_flow_tag, last_cvlan): what
    // ibv_create_cq_ex's IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, _FLOW_TAG and _CVLAN read.
    // Every batch then takes poll_rest(), which keeps them. From the poller's thread,
    // before it polls.
    void keep_cqe_fields() noexcept {
        keep_ = true;
        rest_only_ = ~0u;
    }
    // The device clock's ticks when the completion was made (PRM "CQE Format" timestamp).
    std::uint64_t last_timestamp() const noexcept { return last_ts_; }
    // A raw packet QP's receive: the steering rule's flow tag (sop_drop_qpn 23:0); 0
    // for other completions.
    std::uint32_t last_flow_tag() const noexcept { return last_tag_; }
    // A raw packet QP's receive: the C-VLAN tag its RQ stripped (the CQE's vlan_info: the
    // TCI); 0 for other completions.
    std::uint16_t last_cvlan() const noexcept { return last_vlan_; }

    // Takes QP `qpn`'s completions out of the ring, for a QP reset: 2RST_QP makes the
    // device forget the QP's WQEs (PRM "QP State Transitions"), and the rings that start
    // again at 0 must not retire them. As rdma-core's mlx5 cleans a CQ: from the newest
    // entry of the driver's back to the consumer index, each other QP's entry moves up
    // over the ones taken out, keeping the owner bit of the slot it lands in, and the
    // consumer index moves past the slots freed. A receive that came from `srq` goes back
    // to its free list. No poll() may run meanwhile (the caller's rule, as for reset).
    // Of a 128-byte entry only the CQE half moves: the QPs cxv makes scatter no data to
    // the CQE.
    // A raw packet QP's receives are those of its RQ's user index (`raw_user_index`).
    template <class Srq>
    void discard(std::uint32_t qpn, Srq* srq, const std::uint32_t* raw_user_index = nullptr) noexcept {
        std::uint32_t end = ci_;
        while (end != ci_ + mask_ + 1 && detail::kPoll[(end >> log_) & 1].kind[at(end).op_own] !=
                                              detail::kind_stop) {
            ++end;
        }
        hw::from_device();
        std::uint32_t freed = 0;
        for (std::uint32_t i = end; i != ci_;) {
            --i;
            hw::cqe64& c = at(i);
            const auto op = hw::cqe_get_opcode(c.op_own);
            const bool receive = detail::kPoll[(i >> log_) & 1].kind[c.op_own] == detail::kind_resp ||
                                 op == hw::cqe_opcode::RESP_ERR;
            if (raw_user_index != nullptr && receive ? hw::cqe_srqn(c) == *raw_user_index
                                                     : (c.sop_drop_qpn.value() & 0xffffff) == qpn) {
                if (srq != nullptr && receive) srq->retire(c.wqe_counter.value());
                ++freed;
            } else if (freed != 0) {
                hw::cqe64& to = at(i + freed);
                const std::uint8_t owner = to.op_own & hw::cqe_owner_mask;
                std::memcpy(&to, &c, sizeof c);
                to.op_own = static_cast<std::uint8_t>((to.op_own & ~hw::cqe_owner_mask) | owner);
            }
        }
        if (freed != 0) {
            ci_ += freed;
            hw::to_device();
            dbrec_->update_ci = hw::be32::from(ci_ & 0xffffff);
        }
    }

    // A QP leaves the CQ, from any thread, while the poller may be in poll(): `entry`
    // (one of the attached table's) loses its rings, and the poller lets go of any it
    // holds at the start of its next poll(). The poll path takes no lock for this: it
    // reads one counter per call (detached_) and acknowledges a change from a cold
    // function (let_go()). Returns the detach's number: once released() says so for it,
    // the poller holds nothing of the entry's old rings and they may be freed.
    std::uint32_t detach(qp_rings& entry) noexcept {
        std::atomic_ref<send_queue*>(entry.sq).store(nullptr, std::memory_order_relaxed);
        std::atomic_ref<recv_queue*>(entry.rq).store(nullptr, std::memory_order_relaxed);
        std::atomic_ref<srq_ring*>(entry.srq).store(nullptr, std::memory_order_relaxed);
        std::atomic_ref<mp_send_queue*>(entry.mpsq).store(nullptr, std::memory_order_relaxed);
        return std::atomic_ref<std::uint32_t>(detached_).fetch_add(1, std::memory_order_release) + 1;
    }
    // Whether the poller has let go of what detach() number `n` took away: it has
    // started a poll() since (until then, nothing of those rings may be freed).
    bool released(std::uint32_t n) const noexcept {
        return static_cast<std::int32_t>(std::atomic_ref<std::uint32_t>(released_).load(std::memory_order_acquire) -
                                         n) >= 0;
    }

    // Requests a completion event for the next completion (the next solicited or error
    // one with `solicited_only`), from the poller's thread. PRM "CQ Doorbell Record" and
    // "UAR": the arm word (arm sequence number, command, consumer index) goes to the
    // record first, then, after a to-device barrier, with the CQ number to the UAR's
    // 64-bit CQ doorbell. Completions already past the consumer index raise the event
    // at once.
    void arm(bool solicited_only) noexcept {
        const std::uint32_t word =
            hw::cq_arm_value(arm_sn_, solicited_only ? hw::cq_db_req_not_sol : hw::cq_db_req_not, ci_);
        dbrec_->arm_ci = hw::be32::from(word);
        hw::to_device();
        hw::mmio_window(uar_, hw::uar_page_size).write64_be(hw::uar_cq_doorbell, hw::cq_doorbell_value(word, cqn_));
    }
    // `events` completion events were taken: each one advances the arm sequence number
    // (PRM "Completion Event"), which the next arm() carries so that the device tells a
    // new request from one it already answered.
    void on_event(std::uint32_t events = 1) noexcept { arm_sn_ += events; }
    std::uint32_t arm_sn() const noexcept { return arm_sn_; }

private:
    // Whether CQE `c` is the remembered QP's for the side of `key` (kNoKey: never).
    // The QPN bytes of sop_drop_qpn as they are in memory, against the key.
    [[gnu::always_inline]] static bool owns(const hw::cqe64& c, std::uint32_t key) noexcept {
        return (c.sop_drop_qpn.raw & kQpnBytes) == key;
    }
    // Within a run of receives: whether there is an entry at `p` (before `end`), the
    // driver's, a responder's and the run's QP's, whose key (a QPN's, not kNoKey) has its
    // low byte 0:
    // sop_drop_qpn's raw value XOR the key leaves only the low byte (the first in
    // memory, not the QPN's) when the QPN bytes match. `op` gets the entry's op_own;
    // its body is read after from_device().
    [[gnu::always_inline]] static bool next_is_resp(const std::byte* p, const std::byte* end, std::size_t& op,
                                                    const detail::poll_tables& t, std::uint32_t key) noexcept {
        if (p == end) [[unlikely]] return false;
        const auto& c = *reinterpret_cast<const hw::cqe64*>(p);
        op = c.op_own;
        if (t.kind[op] != detail::kind_resp) [[unlikely]] return false;
        hw::from_device();
        return (c.sop_drop_qpn.raw ^ key) <= 0xff;
    }
    // next_is_resp() for a run of REQ entries, in one 8-byte load of the CQE's last eight
    // bytes: sop_drop_qpn (its QPN bytes against the key, whose low byte is 0),
    // wqe_counter, signature and op_own (opcode REQ, 0, and the owner bit the pass's
    // parity, bit 56 of `want`; bits 3:1 any), which the device writes together: the
    // owner bit and the bytes beside it come from the same load, as DPDK's mlx5 vector
    // receive reads op_own in one 8-byte block with sop_drop_qpn and wqe_counter. The
    // rest of the body is read after from_device().
    [[gnu::always_inline]] static bool next_is_req(const std::byte* p, const std::byte* end,
                                                   std::uint64_t want) noexcept {
        static_assert(offsetof(hw::cqe64, sop_drop_qpn) == 56 && offsetof(hw::cqe64, op_own) == 63);
        if (p == end) [[unlikely]] return false;
        std::uint64_t tail;
        std::memcpy(&tail, p + offsetof(hw::cqe64, sop_drop_qpn), sizeof(tail));
        constexpr std::uint64_t mask = std::uint64_t{0xf1} << 56 | kQpnBytes;
        if (((tail ^ want) & mask) != 0) [[unlikely]] return false;
        hw::from_device();
        return true;
    }
    // A good completion into `wc`. The status and opcode word is stored before the ring's
    // retire() and wr_id after it: a store to the ring in between keeps the compiler
    // from pairing the two 8-byte stores through a vector register (three instructions
    // instead of two).
    template <class Retirer>
    [[gnu::always_inline]] static void decode_send(const hw::cqe64& c, const detail::poll_tables& t,
                                                   std::uint32_t qpn, Retirer& sq, work_completion& wc) noexcept {
        detail::put64(wc, detail::kStatusOpcode, t.send_word[c.sop_drop_qpn.raw & 0xff]);
        const std::uint64_t id = sq.retire(hw::from_be16_widened(c.wqe_counter.raw));
        wc.wr_id = id;
        wc.byte_len = c.byte_cnt.value();
        wc.qp_num = qpn;
        detail::put64(wc, detail::kSrcQpFlags, 0);
    }
    // A good receive completion; `r` gives its wr_id: an SRQ's retire(counter), or a
    // receive queue's (or its run's) retire() of its oldest WQE.
    template <class Retirer>
    [[gnu::always_inline]] static void decode_recv(const hw::cqe64& c, std::size_t op, const detail::poll_tables& t,
                                                   std::uint32_t qpn, Retirer& r, work_completion& wc) noexcept {
        detail::put64(wc, detail::kStatusOpcode, t.recv_word[op]);
        std::uint64_t id;
        if constexpr (requires { r.retire(); }) {
            id = r.retire();
        } else {
            id = r.retire(std::uint32_t{c.wqe_counter.value()});
        }
        wc.wr_id = id;
        wc.byte_len = c.byte_cnt.value();
        wc.imm_data = c.imm_inval_pkey.raw & t.imm_mask[op];
        wc.qp_num = qpn;
        const auto flags = static_cast<std::uint8_t>(c.flags_rqpn.raw & 0xff);  // bits 31:24
        // src_qp, and wc_flags (with_grh, with_imm) in the high half.
        detail::put64(wc, detail::kSrcQpFlags,
                      hw::from_be_widened(c.flags_rqpn.raw) + t.src_grh[flags] + t.imm_flag[op]);
        detail::put64(wc, detail::kPkeySlid, t.sl_word[flags]);  // sl; pkey_index, slid, dlid_path_bits 0
        wc.slid = c.slid.value();
    }

    // poll()'s loop for every kind of entry, from consumer index `ci` with `left`
    // entries of room at `out`; returns how many it wrote and the consumer index it
    // reached (in registers: a consumer index passed by reference kept poll()'s own in
    // memory). An entry of a QP whose rings are gone on its side (destroyed: detached,
    // or a QPN the CQ never had) is taken and not reported, as rdma-core's mlx5 provider
    // takes a destroyed QP's completions out of its CQs (mlx5_destroy_qp cleans them):
    // ibv_poll_cq(3) never returns a completion of a QP that ibv_destroy_qp(3) has
    // destroyed, whose wr_id would name nothing (libfabric's verbs provider polls its
    // CQ right after destroying a QP and takes every wr_id for its own context).
    struct rest_result {
        int n;
        std::uint32_t ci;
    };
    [[gnu::noinline]] rest_result poll_rest(work_completion* out, std::uint32_t left, std::uint32_t ci) noexcept {
        int n = 0;
        for (; left != 0; ++ci) {
            const auto& c = *reinterpret_cast<const hw::cqe64*>(cqes_ + (std::size_t{ci & mask_} << shift_));
            const detail::poll_tables& t = detail::kPoll[(ci >> log_) & 1];
            const unsigned kind = t.kind[c.op_own];
            if (kind == detail::kind_stop) break;
            hw::from_device();
            std::uint32_t qpn = c.sop_drop_qpn.value() & 0xffffff;
            const qp_rings* q = last_;
            if (q->qpn != qpn) q = find(qpn);
            if (raw_packet_ && kind != detail::kind_req && hw::cqe_get_opcode(c.op_own) != hw::cqe_opcode::REQ_ERR &&
                (q->raw_packet || (ring_of(q->rq) == nullptr && ring_of(q->srq) == nullptr))) [[unlikely]] {
                // A receive whose QPN bytes name no QP's receive ring here: a raw packet
                // QP's, found by its user index (qp_rings::raw_packet).
                q = find_raw(hw::cqe_srqn(c));
                qpn = q->qpn;
            }
            if (kind == detail::kind_req) {
                if (send_queue* sq = ring_of(q->sq)) {
                    decode_send(c, t, qpn, *sq, *out);
                } else if (mp_send_queue* mpsq = ring_of(q->mpsq)) {
                    decode_send(c, t, qpn, *mpsq, *out);
                } else {
                    continue;
                }
            } else if (kind == detail::kind_resp) {
                if (recv_queue* rq = ring_of(q->rq)) {
                    decode_recv(c, c.op_own, t, qpn, *rq, *out);
                    if (q->raw_packet) decode_raw(c, *out);
                } else if (srq_ring* srq = ring_of(q->srq)) {
                    decode_recv(c, c.op_own, t, qpn, *srq, *out);
                } else {
                    continue;
                }
            } else {
                const bool req = hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ_ERR;
                if (req ? ring_of(q->sq) == nullptr && ring_of(q->mpsq) == nullptr
                        : ring_of(q->rq) == nullptr && ring_of(q->srq) == nullptr) {
                    continue;
                }
                decode_error(c, *out, q, qpn, c.wqe_counter.value());
            }
            if (keep_) [[unlikely]] {
                last_ts_ = c.timestamp.value();
                const bool raw_recv = q->raw_packet && kind == detail::kind_resp;
                last_tag_ = raw_recv ? c.sop_drop_qpn.value() & 0xffffff : 0;
                last_vlan_ = raw_recv ? c.vlan_info.value() : 0;
            }
            ++out;
            ++n;
            --left;
        }
        return {n, ci};
    }

    // The flushed completions of a dead device (set_dead_flag), up to `max`. First the
    // CQ lets go of the device's ring for good: a dead device's function may not be reset
    // yet (on a card, another process may still hold the VFIO device open) and may still
    // write CQEs, for WRs flushed here — taken, they would be reported twice and retire
    // WQEs the poster has reused. From here on poll() reads kDeadRing, which has none.
    [[gnu::noinline]] int flush(work_completion* out, int max) noexcept {
        cqes_ = const_cast<std::byte*>(detail::kDeadRing.data());
        mask_ = 0;
        log_ = 0;
        shift_ = 6;
        rest_only_ = 0;
        int n = 0;
        auto put = [&](std::uint32_t qpn, std::uint64_t wr_id, std::uint32_t opcode) {
            work_completion& wc = out[n++];
            wc.wr_id = wr_id;
            wc.status = wc_wr_flush_err;
            wc.opcode = opcode;
            wc.vendor_err = 0;
            wc.byte_len = 0;
            wc.imm_data = 0;
            wc.qp_num = qpn;
            detail::put64(wc, detail::kSrcQpFlags, 0);
            detail::put64(wc, detail::kPkeySlid, 0);
        };
        for (unsigned i = 0; i < nqps_ && n < max; ++i) {
            const qp_rings& q = qps_[i];
            std::uint64_t wr_id = 0;
            std::uint8_t op = 0;
            if (send_queue* sq = ring_of(q.sq)) {
                while (n < max && sq->flush_next(wr_id, op)) put(q.qpn, wr_id, send_opcode_of(op));
            }
            if (mp_send_queue* mpsq = ring_of(q.mpsq)) {
                while (n < max && mpsq->flush_next(wr_id, op)) put(q.qpn, wr_id, send_opcode_of(op));
            }
            if (recv_queue* rq = ring_of(q.rq)) {
                while (n < max && rq->flush_next(wr_id)) put(q.qpn, wr_id, wc_recv);
            }
        }
        return n;
    }

    hw::cqe64& at(std::uint32_t index) const noexcept {
        return *reinterpret_cast<hw::cqe64*>(cqes_ + (std::size_t{index & mask_} << shift_));
    }
    const qp_rings* find(std::uint32_t qpn) noexcept {
        for (unsigned i = 0; i < nqps_; ++i) {
            if (qps_[i].qpn == qpn) return remember(&qps_[i]);
        }
        return &detail::kNoQp;
    }
    const qp_rings* find_raw(std::uint32_t user_index) noexcept {
        for (unsigned i = 0; i < nqps_; ++i) {
            if (qps_[i].raw_packet && qps_[i].user_index == user_index) return remember(&qps_[i]);
        }
        return &detail::kNoQp;
    }
    // What a raw packet QP's receive reports beyond a QP's: with_ip_csum_ok where the
    // packet is IPv4 and the device found its IP and L4 checksums good (hds_ip_ext's
    // L3_OK and L4_OK, PRM "Completion Queue Entry Format"), as rdma-core's mlx5 reports
    // it; no source QP, SL or GRH (those bytes of an Ethernet CQE are not a QP's).
    static void decode_raw(const hw::cqe64& c, work_completion& wc) noexcept {
        const bool ipv4 = ((c.l4_hdr_type_etc >> 2) & 3) == static_cast<unsigned>(hw::cqe_l3_hdr_type::IPV4);
        const bool good = (c.hds_ip_ext & (hw::cqe_l3_ok | hw::cqe_l4_ok)) == (hw::cqe_l3_ok | hw::cqe_l4_ok);
        wc.src_qp = 0;
        wc.wc_flags = ipv4 && good ? wc_with_ip_csum_ok : 0;
        detail::put64(wc, detail::kPkeySlid, 0);
    }
    // The QP poll()'s loop serves. Its key, for each side whose ring the loop retires, is
    // its QPN as the bytes of a CQE's sop_drop_qpn hold it (kQpnBytes of the raw word);
    // kNoKey, which no CQE matches, for a side the loop leaves to poll_rest().
    static constexpr std::uint32_t kQpnBytes = hw::be32::from(0xffffff).raw;
    static constexpr std::uint32_t kNoKey = ~kQpnBytes;
    const qp_rings* remember(const qp_rings* q) noexcept {
        last_ = q;
        sq_ = ring_of(q->sq);
        rq_ = ring_of(q->rq);
        const std::uint32_t key = hw::be32::from(q->qpn & 0xffffff).raw;
        sq_key_ = sq_ != nullptr ? key : kNoKey;
        // (a raw packet QP's receives carry no QPN: poll_rest() finds them)
        rq_key_ = rq_ != nullptr && !q->raw_packet ? key : kNoKey;
        qpn_ = q->qpn;
        return q;
    }
    // An entry's ring pointer, which detach() may null from another thread meanwhile
    // (an atomic load: a plain load on x86-64).
    template <class Ring>
    static Ring* ring_of(Ring* const& p) noexcept {
        return std::atomic_ref<Ring*>(const_cast<Ring*&>(p)).load(std::memory_order_relaxed);
    }
    // detach() has run since the last poll(): the entries' nulled rings are seen from
    // here on (acquire), the cache is taken again from them, and the detaches are
    // acknowledged (release: every use of the old rings came before).
    [[gnu::noinline]] void let_go() noexcept {
        const std::uint32_t n = std::atomic_ref<std::uint32_t>(detached_).load(std::memory_order_acquire);
        remember(last_);
        seen_ = n;
        std::atomic_ref<std::uint32_t>(released_).store(n, std::memory_order_release);
    }

    // Opcodes 5 and up: REQ_ERR and RESP_ERR (no other opcode is enabled on our CQs);
    // the WQE the CQE names is retired as with a good completion.
    static void decode_error(const hw::cqe64& c, work_completion& wc, const qp_rings* q, std::uint32_t qpn,
                             std::uint16_t counter) noexcept {
        const auto op = hw::cqe_get_opcode(c.op_own);
        const auto& e = reinterpret_cast<const hw::err_cqe64&>(c);
        const bool req = op == hw::cqe_opcode::REQ_ERR;
        const std::uint32_t status = req || op == hw::cqe_opcode::RESP_ERR
                                         ? status_of(static_cast<hw::cqe_syndrome>(e.syndrome))
                                         : wc_general_err;
        wc.status = status;
        wc.opcode = req ? send_opcode_of(hw::err_cqe_wqe_opcode(e)) : wc_recv;
        wc.vendor_err = (std::uint32_t{e.syndrome} << 8) | e.vendor_err_synd;
        wc.byte_len = c.byte_cnt.value();
        wc.imm_data = 0;
        wc.qp_num = qpn;
        detail::put64(wc, detail::kSrcQpFlags, 0);
        detail::put64(wc, detail::kPkeySlid, 0);
        if (req) {
            send_queue* const sq = ring_of(q->sq);
            mp_send_queue* const mpsq = ring_of(q->mpsq);
            wc.wr_id = sq != nullptr ? sq->retire(counter) : mpsq != nullptr ? mpsq->retire(counter) : 0;
        } else {
            recv_queue* const rq = ring_of(q->rq);
            srq_ring* const srq = ring_of(q->srq);
            wc.wr_id = rq != nullptr ? rq->retire() : srq != nullptr ? srq->retire(counter) : 0;
        }
    }

    std::byte* cqes_ = nullptr;
    hw::cq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t mask_ = 0;
    unsigned log_ = 0;
    unsigned shift_ = 6;          // log2 of the entry stride
    std::uint32_t rest_only_ = 0;  // ~0u: 128-byte entries, every batch to poll_rest()
    std::uint32_t ci_ = 0;
    // detach() counts here (any thread); the poller's seen_ is the count its cache
    // reflects, and released_ (read by detaching threads) the count it has let go of.
    std::uint32_t detached_ = 0;
    std::uint32_t seen_ = 0;
    mutable std::uint32_t released_ = 0;  // (read by released() with an atomic load)
    const qp_rings* qps_ = nullptr;
    unsigned nqps_ = 0;
    bool keep_ = false;  // keep_cqe_fields()
    std::uint64_t last_ts_ = 0;
    std::uint32_t last_tag_ = 0;
    std::uint16_t last_vlan_ = 0;
    bool raw_packet_ = false;  // a raw packet QP among qps_
    const qp_rings* last_ = &detail::kNoQp;
    send_queue* sq_ = nullptr;
    recv_queue* rq_ = nullptr;
    std::uint32_t sq_key_ = kNoKey;
    std::uint32_t rq_key_ = kNoKey;
    std::uint32_t qpn_ = 0;
    // arm() only.
    std::byte* uar_ = nullptr;
    std::uint32_t cqn_ = 0;
    std::uint32_t arm_sn_ = 0;
    const std::atomic<bool>* dead_ = &detail::kNeverDead;  // set_dead_flag()
};

// The QPs a CQ serves, kept for the control path (api's cq): the table the poller looks
// up (capacity fixed at init, never reallocated: the poller holds pointers into it), and
// the rings of detached QPs, held until the poller has let go of them (then freed at the
// next attach() or detach(), or with the table).
class qp_table {
public:
    void init(unsigned max_qps) { entries_.reserve(max_qps); }

    // A QP's rings (replacing an entry of the same QPN), while no thread polls `cq`;
    // false when the table is full.
    bool attach(completion_queue& cq, const qp_rings& r) {
        std::lock_guard lock(mu_);
        reclaim(cq);
        for (auto& q : entries_) {
            if (q.qpn == r.qpn) {
                // The number of a destroyed QP, given again: what the ring still holds of
                // the old QP's is not the new one's; it goes, as poll() would have passed
                // over it while the number had no rings.
                cq.discard(r.qpn, static_cast<srq_ring*>(nullptr));
                q = r;
                cq.attach(entries_.data(), static_cast<unsigned>(entries_.size()));
                return true;
            }
        }
        if (entries_.size() == entries_.capacity()) return false;
        entries_.push_back(r);
        cq.attach(entries_.data(), static_cast<unsigned>(entries_.size()));
        return true;
    }
    // The QP `qpn` leaves `cq`, from any thread, while another may poll it: its entry
    // loses its rings (completion_queue::detach), and `rings` -- what keeps the memory
    // its retire() touches alive -- is held until the poller has let go.
    void detach(completion_queue& cq, std::uint32_t qpn, std::shared_ptr<const void> rings) {
        std::lock_guard lock(mu_);
        for (auto& q : entries_) {
            if (q.qpn == qpn) {
                const std::uint32_t n = cq.detach(q);
                if (rings) held_.push_back({n, std::move(rings)});
            }
        }
        reclaim(cq);
    }
    std::size_t held() {
        std::lock_guard lock(mu_);
        return held_.size();
    }

private:
    void reclaim(const completion_queue& cq) {
        std::erase_if(held_, [&cq](const held_rings& h) { return cq.released(h.detach); });
    }
    struct held_rings {
        std::uint32_t detach;
        std::shared_ptr<const void> rings;
    };
    std::mutex mu_;
    std::vector<qp_rings> entries_;
    std::vector<held_rings> held_;
};

}  // namespace cxv::queues
