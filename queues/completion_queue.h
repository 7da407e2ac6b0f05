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

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
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

// Per-opcode words of a completion, as poll() stores them: the word at offset 8 of an
// ibv_wc (status in the low half, opcode in the high half), by send WQE opcode (low 5
// bits; every send WQE opcode is < 32) and by responder CQE opcode (1..4).
inline constexpr auto kSendWords = [] {
    std::array<std::uint64_t, 32> t{};
    for (unsigned i = 0; i < 32; ++i) t[i] = std::uint64_t{send_opcode_of(static_cast<std::uint8_t>(i))} << 32;
    return t;
}();
// RESP_WR_IMM (1): a write with immediate; RESP_SEND (2), RESP_SEND_IMM (3),
// RESP_SEND_INV (4): a receive. Immediate data with opcodes 1 and 3.
inline constexpr std::uint64_t kRecvWords[5] = {0, std::uint64_t{wc_recv_rdma_with_imm} << 32,
                                                std::uint64_t{wc_recv} << 32, std::uint64_t{wc_recv} << 32,
                                                std::uint64_t{wc_recv} << 32};
inline constexpr std::uint32_t kImmMask[5] = {0, ~0u, 0, ~0u, 0};
// The wc_flags half of the word at offset 32: with_imm by opcode, with_grh by
// flags_rqpn bits 31:28 (GRH presence is bits 29:28).
inline constexpr std::uint64_t kImmFlag[5] = {0, std::uint64_t{wc_with_imm} << 32, 0,
                                              std::uint64_t{wc_with_imm} << 32, 0};
inline constexpr auto kGrhFlag = [] {
    std::array<std::uint64_t, 16> t{};
    for (unsigned i = 0; i < 16; ++i) t[i] = (i & 3) ? std::uint64_t{wc_with_grh} << 32 : 0;
    return t;
}();

// A CQ's QP cache before any QP is attached, and what an unknown QPN finds: its number
// matches no 24-bit QPN, and it has no rings.
inline constexpr qp_rings kNoQp{~0u, nullptr, nullptr, nullptr, nullptr};

}  // namespace detail

class completion_queue {
public:
    completion_queue() = default;
    completion_queue(std::byte* cqes, unsigned log_count, hw::cq_doorbell_record* dbrec) noexcept
        : cqes_(cqes), dbrec_(dbrec), mask_((1u << log_count) - 1), log_(log_count) {}

    // The QPs whose completions arrive here; looked up by QP number (the last one is
    // remembered, so a CQ serving one QP pays one compare).
    void attach(const qp_rings* qps, unsigned count) noexcept {
        qps_ = qps;
        nqps_ = count;
        last_ = count ? &qps[0] : &detail::kNoQp;
    }

    // Up to `max` completions into `out`; returns how many.
    //
    // The loop walks the ring in runs that end at its wrap (so the owner parity is fixed
    // for a run and the entry pointer just advances). An entry is the driver's when
    // (op_own ^ parity) rotated right by one is below 0x78: the owner bit lands in bit 7
    // and the opcode in bits 6:3, so that one compare says "owner matches and the opcode
    // is not INVALID" (PRM "CQE Format"), and the same value sorts requester (< 8),
    // responder (< 0x28) and every other opcode.
    int poll(work_completion* out, int max) noexcept {
        if (max <= 0) [[unlikely]] return 0;
        work_completion* const first = out;
        work_completion* const end = out + max;
        const std::uint32_t ci0 = ci_;
        for (;;) {
            const std::uint32_t ci = ci0 + static_cast<std::uint32_t>(out - first);
            const std::uint32_t idx = ci & mask_;
            const std::size_t room = mask_ + 1 - idx;
            work_completion* const stop = static_cast<std::size_t>(end - out) > room ? out + room : end;
            const auto parity = static_cast<std::uint8_t>((ci >> log_) & 1);
            const std::byte* cqe = cqes_ + (std::size_t{idx} << 6);
            for (; out != stop; ++out, cqe += 64) {
                const auto x = static_cast<std::uint8_t>(reinterpret_cast<const hw::cqe64*>(cqe)->op_own ^ parity);
                const auto r = static_cast<std::uint8_t>((x >> 1) | (x << 7));
                if (r >= 0x78) goto done;
                hw::from_device();
                decode(*reinterpret_cast<const hw::cqe64*>(cqe), r, *out);
            }
            if (out == end) break;
        }
    done:
        const auto n = static_cast<int>(out - first);
        if (n) [[likely]] {
            const std::uint32_t ci = ci0 + static_cast<std::uint32_t>(n);
            ci_ = ci;
            hw::to_device();
            dbrec_->update_ci = hw::be32::from(ci & 0xffffff);
        }
        return n;
    }

    std::uint32_t consumer_index() const noexcept { return ci_; }

private:
    [[gnu::noinline]] const qp_rings* find_slow(std::uint32_t qpn) noexcept {
        for (unsigned i = 0; i < nqps_; ++i) {
            if (qps_[i].qpn == qpn) return last_ = &qps_[i];
        }
        return &detail::kNoQp;
    }

    // Stores of a completion: whole 8-byte words (two 32-bit fields each) and halves.
    [[gnu::always_inline]] static void put64(work_completion& wc, std::size_t off, std::uint64_t v) noexcept {
        std::memcpy(reinterpret_cast<std::byte*>(&wc) + off, &v, sizeof(v));
    }
    [[gnu::always_inline]] static void put2(work_completion& wc, std::size_t off, std::uint32_t lo,
                                            std::uint32_t hi) noexcept {
        put64(wc, off, (std::uint64_t{hi} << 32) | lo);
    }

    // `r`: the rotated op_own of poll().
    [[gnu::always_inline]] void decode(const hw::cqe64& c, std::uint8_t r, work_completion& wc) noexcept {
        static_assert(offsetof(work_completion, status) == 8 && offsetof(work_completion, vendor_err) == 16 &&
                      offsetof(work_completion, imm_data) == 24 && offsetof(work_completion, qp_num) == 28 &&
                      offsetof(work_completion, src_qp) == 32 && offsetof(work_completion, pkey_index) == 40);
        const std::uint32_t qpn = c.sop_drop_qpn.value() & 0xffffff;
        const std::uint16_t counter = c.wqe_counter.value();
        const qp_rings* q = last_;
        if (q->qpn != qpn) [[unlikely]] q = find_slow(qpn);
        const std::uint32_t byte_len = c.byte_cnt.value();
        if (r < 8) [[likely]] {  // REQ
            send_queue* const sq = q->sq;
            const std::uint64_t id = sq != nullptr ? sq->retire(counter) : retire_mp(q, counter);
            // status, opcode | vendor_err, byte_len | imm_data, qp_num | src_qp, wc_flags | the rest
            put64(wc, 8, detail::kSendWords[c.sop_drop_qpn.raw & 0x1f]);
            put2(wc, 16, 0, byte_len);
            put2(wc, 24, 0, qpn);
            put64(wc, 32, 0);
            put64(wc, 40, 0);
            wc.wr_id = id;
            return;
        }
        if (r >= 0x28) [[unlikely]] {  // opcodes 5 and up: errors (and nothing else we enable)
            decode_error(c, wc, q, qpn, counter, byte_len);
            return;
        }
        // Responder: RESP_WR_IMM, RESP_SEND, RESP_SEND_IMM, RESP_SEND_INV (1..4).
        const unsigned op = r >> 3;
        recv_queue* const rq = q->rq;
        const std::uint64_t id = rq != nullptr ? rq->retire(counter) : retire_shared(q, counter);
        const std::uint32_t flags_rqpn = c.flags_rqpn.value();
        put64(wc, 8, detail::kRecvWords[op]);
        put2(wc, 16, 0, byte_len);
        put2(wc, 24, c.imm_inval_pkey.raw & detail::kImmMask[op], qpn);
        put64(wc, 32, (flags_rqpn & 0xffffff) | detail::kGrhFlag[flags_rqpn >> 28] | detail::kImmFlag[op]);
        put64(wc, 40, std::uint64_t{c.slid.value()} << 16);  // pkey_index 0, slid, sl 0, path bits 0
        wc.wr_id = id;
    }

    [[gnu::noinline]] static void decode_error(const hw::cqe64& c, work_completion& wc, const qp_rings* q,
                                               std::uint32_t qpn, std::uint16_t counter,
                                               std::uint32_t byte_len) noexcept {
        const auto op = hw::cqe_get_opcode(c.op_own);
        const auto& e = reinterpret_cast<const hw::err_cqe64&>(c);
        const bool req = op == hw::cqe_opcode::REQ_ERR;
        put2(wc, 8, status_of(static_cast<hw::cqe_syndrome>(e.syndrome)),
             req ? send_opcode_of(hw::err_cqe_wqe_opcode(e)) : wc_recv);
        put2(wc, 16, (std::uint32_t{e.syndrome} << 8) | e.vendor_err_synd, byte_len);
        put2(wc, 24, 0, qpn);
        put2(wc, 32, 0, 0);
        put2(wc, 40, 0, 0);
        if (req) {
            wc.wr_id = q->sq != nullptr ? q->sq->retire(counter) : retire_mp(q, counter);
        } else {
            wc.wr_id = q->rq != nullptr ? q->rq->retire(counter) : retire_shared(q, counter);
        }
    }
    // A send completion of a multi-producer ring (or of an unknown QP: wr_id 0).
    [[gnu::noinline]] static std::uint64_t retire_mp(const qp_rings* q, std::uint16_t counter) noexcept {
        return q->mpsq != nullptr ? q->mpsq->retire(counter) : 0;
    }
    // A receive completion through an SRQ (or of an unknown QP: wr_id 0).
    [[gnu::noinline]] static std::uint64_t retire_shared(const qp_rings* q, std::uint16_t counter) noexcept {
        return q->srq != nullptr ? q->srq->retire(counter) : 0;
    }

    std::byte* cqes_ = nullptr;
    hw::cq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t mask_ = 0;
    unsigned log_ = 0;
    std::uint32_t ci_ = 0;
    const qp_rings* qps_ = nullptr;
    unsigned nqps_ = 0;
    const qp_rings* last_ = &detail::kNoQp;
};

}  // namespace cxv::queues
