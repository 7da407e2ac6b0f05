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

// send_opcode_of as a table, by the opcode's low 5 bits (every send WQE opcode is < 32).
inline constexpr auto kSendOpcodes = [] {
    std::array<std::uint8_t, 32> t{};
    for (unsigned i = 0; i < 32; ++i) t[i] = static_cast<std::uint8_t>(send_opcode_of(static_cast<std::uint8_t>(i)));
    return t;
}();

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
        last_ = count ? &qps[0] : nullptr;
    }

    // Up to `max` completions into `out`; returns how many.
    int poll(work_completion* out, int max) noexcept {
        // Ring state in locals (the completion stores may alias the members).
        std::uint32_t ci = ci_;
        const std::uint32_t mask = mask_;
        const unsigned log = log_;
        std::byte* const cqes = cqes_;
        int n = 0;
        for (; n < max; ++n) {
            auto* cqe = reinterpret_cast<const hw::cqe64*>(cqes + (std::size_t{ci & mask} << 6));
            const std::uint8_t op_own = cqe->op_own;
            const auto op = hw::cqe_get_opcode(op_own);
            if (hw::cqe_get_owner(op_own) != ((ci >> log) & 1) || op == hw::cqe_opcode::INVALID) break;
            hw::from_device();
            decode(*cqe, op, out[n]);
            ++ci;
        }
        if (n) {
            ci_ = ci;
            hw::to_device();
            dbrec_->update_ci = hw::be32::from(ci & 0xffffff);
        }
        return n;
    }

    std::uint32_t consumer_index() const noexcept { return ci_; }

private:
    [[gnu::always_inline]] const qp_rings* find(std::uint32_t qpn) noexcept {
        if (last_ && last_->qpn == qpn) [[likely]] return last_;
        return find_slow(qpn);
    }
    [[gnu::noinline]] const qp_rings* find_slow(std::uint32_t qpn) noexcept {
        for (unsigned i = 0; i < nqps_; ++i) {
            if (qps_[i].qpn == qpn) return last_ = &qps_[i];
        }
        return nullptr;
    }

    // Two 32-bit fields of the completion stored as one 8-byte store (`lo` at `off`).
    [[gnu::always_inline]] static void put2(work_completion& wc, std::size_t off, std::uint32_t lo,
                                            std::uint32_t hi) noexcept {
        const std::uint64_t v = (std::uint64_t{hi} << 32) | lo;
        std::memcpy(reinterpret_cast<std::byte*>(&wc) + off, &v, sizeof(v));
    }

    [[gnu::always_inline]] void decode(const hw::cqe64& c, hw::cqe_opcode op, work_completion& wc) noexcept {
        static_assert(offsetof(work_completion, status) == 8 && offsetof(work_completion, vendor_err) == 16 &&
                      offsetof(work_completion, imm_data) == 24 && offsetof(work_completion, src_qp) == 32 &&
                      offsetof(work_completion, pkey_index) == 40);
        const std::uint32_t qpn = hw::cqe_qpn(c);
        const std::uint16_t counter = c.wqe_counter.value();
        const qp_rings* q = find(qpn);
        const std::uint32_t byte_len = c.byte_cnt.value();
        if (op == hw::cqe_opcode::REQ) [[likely]] {
            // status, opcode | vendor_err, byte_len | imm_data, qp_num | src_qp, wc_flags | the rest
            put2(wc, 8, wc_success, kSendOpcodes[(c.sop_drop_qpn.raw & 0xff) & 0x1f]);
            put2(wc, 16, 0, byte_len);
            put2(wc, 24, 0, qpn);
            put2(wc, 32, 0, 0);
            put2(wc, 40, 0, 0);
            wc.wr_id = q && q->sq ? q->sq->retire(counter) : retire_mp(q, counter);
            return;
        }
        decode_other(c, op, wc, q, qpn, counter, byte_len);
    }

    [[gnu::always_inline]] void decode_other(const hw::cqe64& c, hw::cqe_opcode op, work_completion& wc,
                                             const qp_rings* q, std::uint32_t qpn, std::uint16_t counter,
                                             std::uint32_t byte_len) noexcept {
        // Responder opcodes are 1..4; anything else here is an error CQE.
        if (static_cast<unsigned>(op) > static_cast<unsigned>(hw::cqe_opcode::RESP_SEND_INV)) [[unlikely]] {
            decode_error(c, op, wc, q, qpn, counter, byte_len);
            return;
        }
        // Responder: a receive (with immediate data, or an RDMA write with it). The
        // opcodes with immediate data are the odd ones (RESP_WR_IMM 1, RESP_SEND_IMM 3).
        static_assert(static_cast<unsigned>(hw::cqe_opcode::RESP_WR_IMM) == 1 &&
                      static_cast<unsigned>(hw::cqe_opcode::RESP_SEND_IMM) == 3 &&
                      static_cast<unsigned>(hw::cqe_opcode::RESP_SEND) == 2 && wc_with_imm == 2 && wc_with_grh == 1);
        std::uint32_t imm_data = 0, flags = 0, opcode = wc_recv;
        if (static_cast<unsigned>(op) & 1) {
            imm_data = c.imm_inval_pkey.raw;
            flags = wc_with_imm;
            if (op == hw::cqe_opcode::RESP_WR_IMM) opcode = wc_recv_rdma_with_imm;
        }
        if (hw::cqe_grh(c)) flags |= wc_with_grh;
        put2(wc, 8, wc_success, opcode);
        put2(wc, 16, 0, byte_len);
        put2(wc, 24, imm_data, qpn);
        put2(wc, 32, hw::cqe_src_qpn(c), flags);
        put2(wc, 40, std::uint32_t{c.slid.value()} << 16, 0);  // pkey_index 0, slid, sl 0, path bits 0
        wc.wr_id = retire_any(q, false, counter);
    }

    [[gnu::noinline]] static void decode_error(const hw::cqe64& c, hw::cqe_opcode op, work_completion& wc,
                                               const qp_rings* q, std::uint32_t qpn, std::uint16_t counter,
                                               std::uint32_t byte_len) noexcept {
        const auto& e = reinterpret_cast<const hw::err_cqe64&>(c);
        put2(wc, 8, status_of(static_cast<hw::cqe_syndrome>(e.syndrome)),
             op == hw::cqe_opcode::REQ_ERR ? send_opcode_of(hw::err_cqe_wqe_opcode(e)) : wc_recv);
        put2(wc, 16, (std::uint32_t{e.syndrome} << 8) | e.vendor_err_synd, byte_len);
        put2(wc, 24, 0, qpn);
        put2(wc, 32, 0, 0);
        put2(wc, 40, 0, 0);
        wc.wr_id = retire_any(q, op == hw::cqe_opcode::REQ_ERR, counter);
    }

    [[gnu::noinline]] static std::uint64_t retire_mp(const qp_rings* q, std::uint16_t counter) noexcept {
        return q && q->mpsq ? q->mpsq->retire(counter) : 0;
    }
    static std::uint64_t retire_any(const qp_rings* q, bool send, std::uint16_t counter) noexcept {
        if (q == nullptr) return 0;
        if (send) return q->sq ? q->sq->retire(counter) : retire_mp(q, counter);
        if (q->srq) return q->srq->retire(counter);
        return q->rq ? q->rq->retire(counter) : 0;
    }

    std::byte* cqes_ = nullptr;
    hw::cq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t mask_ = 0;
    unsigned log_ = 0;
    std::uint32_t ci_ = 0;
    const qp_rings* qps_ = nullptr;
    unsigned nqps_ = 0;
    const qp_rings* last_ = nullptr;
};

}  // namespace cxv::queues
