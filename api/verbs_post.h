// The verbs-shaped fast path: libibverbs' own ibv_recv_wr / ibv_send_wr / ibv_wc
// (from <infiniband/verbs.h>, as types only) on cxv's rings, with the man pages'
// semantics (ibv_post_recv(3), ibv_post_srq_recv(3), ibv_post_send(3), ibv_poll_cq(3)):
//
//   - a WR list is taken in order and stops at the first WR that cannot be posted;
//     *bad_wr names it and the WRs before it are posted (one doorbell record update,
//     and for sends one doorbell, for the whole list);
//   - the return value is 0 or an errno value: ENOMEM when the queue is full, EINVAL
//     for too many SGEs, inline data beyond the QP's limit, an opcode the QP's
//     transport does not have, or a post_recv on a QP whose receives come from an SRQ;
//   - nothing allocates, locks, makes a system call or logs.
//
// Header-only, so that each call inlines into the caller's loop.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "queues/completion_queue.h"
#include "queues/eth_queue.h"
#include "queues/mp_send_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/send_wqe.h"
#include "queues/types.h"

namespace cxv::api {

// ibv_sge and ibv_wc are queues' own layouts (checked in tests/queues).
inline const queues::sge* sges(const ibv_sge* s) noexcept { return reinterpret_cast<const queues::sge*>(s); }

// An address handle made by cxv: the ibv_ah the caller holds, and the UD address vector
// the send WQE carries.
struct address_handle {
    ibv_ah base;
    hw::wqe_av av;
};

// The send side of a QP as the fast path needs it.
struct send_side {
    queues::send_queue* sq = nullptr;
    unsigned max_sge = 0;
    unsigned max_inline = 0;
    ibv_qp_type type = IBV_QPT_RC;  // IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD or IBV_QPT_RAW_PACKET
    // Computed once for post_send's one-pass path: it takes the verbs opcodes below
    // fast_ops (RC IBV_WR_RDMA_WRITE .. RDMA_READ, UC up to SEND_WITH_IMM; none on UD,
    // nor on a QP without gather entries, whose limit check is the general loop's), with
    // inline data those below fast_inline_ops (not RDMA_READ) and 4 to 3 + fast_inline_span
    // bytes (the QP's inline limit, at most kSmallInline: a length L is taken when
    // L - 4 < fast_inline_span, unsigned; 1 to 3 bytes go to the general loop).
    unsigned fast_ops = 0;
    unsigned fast_inline_ops = 0;
    unsigned fast_inline_span = 0;

    send_side() = default;
    constexpr send_side(queues::send_queue* q, unsigned sge, unsigned inl, ibv_qp_type t) noexcept
        : sq(q), max_sge(sge), max_inline(inl), type(t),
          fast_ops(sge == 0 ? 0 : t == IBV_QPT_RC ? 5 : t == IBV_QPT_UC ? 4 : 0),
          fast_inline_ops(fast_ops < 4 ? fast_ops : 4),
          fast_inline_span(inl < 4 ? 0 : std::min(inl, queues::send_queue::kSmallInline) - 3) {}
};

namespace detail {
// What a post call's out-of-line part gives back: the errno value (0: every WR posted)
// and the WR it stopped at, for the caller to store in *bad_wr. Returned in registers,
// so that a caller whose bad_wr is a local of its own (a pointer the call only writes
// when it fails) keeps that local out of memory, and needs no stack frame, on the path
// that posts.
template <class Wr>
struct post_outcome {
    int err;
    Wr* bad;
};
template <class Wr>
[[gnu::always_inline]] inline int report(const post_outcome<Wr>& r, Wr** bad_wr) noexcept {
    if (r.err != 0) [[unlikely]] *bad_wr = r.bad;
    return r.err;
}

// post_recv from the first WR its inlined loop could not take.
[[gnu::noinline]] inline post_outcome<ibv_recv_wr> post_recv_rest(queues::recv_queue& rq, ibv_recv_wr* wr,
                                                                  std::uint32_t head) noexcept {
    ibv_recv_wr* bad = nullptr;
    const auto why = rq.post_rest(wr, head, &bad);
    if (why == queues::recv_queue::stop::done) return {0, nullptr};
    return {why == queues::recv_queue::stop::too_many_sge || rq.srq() ? EINVAL : ENOMEM, bad};
}
// The inlined loops reach the general ones by way of cold functions (a jump): the call,
// and the stack frame it needs, then stay out of the loop's own code, and the general
// loops stay compiled for speed, not size.
[[gnu::noinline, gnu::cold]] inline post_outcome<ibv_recv_wr> post_recv_more(queues::recv_queue& rq, ibv_recv_wr* wr,
                                                                             std::uint32_t head) noexcept {
    return post_recv_rest(rq, wr, head);
}
}  // namespace detail

// ibv_post_recv(3) on a QP's receive ring (for a QP served by an SRQ, the ring made by
// recv_queue::srq_attached(), which refuses every WR with EINVAL).
[[gnu::always_inline]] inline int post_recv(queues::recv_queue& rq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
    return detail::report(rq.post_list(wr, [](queues::recv_queue& r, ibv_recv_wr* w, std::uint32_t head) {
        return detail::post_recv_more(r, w, head);
    }), bad_wr);
}

namespace detail {
[[gnu::noinline]] inline post_outcome<ibv_recv_wr> post_srq_recv_rest(queues::srq_ring& srq, ibv_recv_wr* wr,
                                                                      std::uint32_t counter) noexcept {
    ibv_recv_wr* bad = nullptr;
    const auto why = srq.post_rest(wr, counter, &bad);
    if (why == queues::srq_ring::stop::done) return {0, nullptr};
    return {why == queues::srq_ring::stop::too_many_sge ? EINVAL : ENOMEM, bad};
}
[[gnu::noinline, gnu::cold]] inline post_outcome<ibv_recv_wr> post_srq_recv_more(queues::srq_ring& srq,
                                                                                 ibv_recv_wr* wr,
                                                                                 std::uint32_t counter) noexcept {
    return post_srq_recv_rest(srq, wr, counter);
}
}  // namespace detail

// ibv_post_srq_recv(3).
[[gnu::always_inline]] inline int post_srq_recv(queues::srq_ring& srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
    return detail::report(srq.post_list(wr, [](queues::srq_ring& r, ibv_recv_wr* w, std::uint32_t counter) {
        return detail::post_srq_recv_more(r, w, counter);
    }), bad_wr);
}

namespace detail {

// Per verbs opcode (IBV_WR_RDMA_WRITE .. IBV_WR_ATOMIC_FETCH_AND_ADD): the WQE opcode and
// the transports that have it (bit 0 RC, 1 UC, 2 UD, 3 raw packet). Its segments are
// queues/send_wqe.h's (a raw packet's, queues/eth_queue.h's).
struct opcode_info {
    hw::wqe_opcode wqe;
    std::uint8_t transports;
};
inline constexpr opcode_info kOpcodes[] = {
    {hw::wqe_opcode::RDMA_WRITE, 0b011},      // IBV_WR_RDMA_WRITE
    {hw::wqe_opcode::RDMA_WRITE_IMM, 0b011},  // IBV_WR_RDMA_WRITE_WITH_IMM
    {hw::wqe_opcode::SEND, 0b1111},           // IBV_WR_SEND
    {hw::wqe_opcode::SEND_IMM, 0b111},        // IBV_WR_SEND_WITH_IMM
    {hw::wqe_opcode::RDMA_READ, 0b001},       // IBV_WR_RDMA_READ
    {hw::wqe_opcode::ATOMIC_CS, 0b001},       // IBV_WR_ATOMIC_CMP_AND_SWP
    {hw::wqe_opcode::ATOMIC_FA, 0b001},       // IBV_WR_ATOMIC_FETCH_AND_ADD
};
static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_SEND == 2 && IBV_WR_ATOMIC_FETCH_AND_ADD == 6);

// send_wqe::kControl is indexed by send_flags' low three bits.
static_assert(IBV_SEND_FENCE == queues::send_wqe::flag_fence && IBV_SEND_SIGNALED == queues::send_wqe::flag_signaled &&
              IBV_SEND_SOLICITED == queues::send_wqe::flag_solicited);

inline unsigned transport_bit(ibv_qp_type t) noexcept {
    return t == IBV_QPT_RC ? 1 : t == IBV_QPT_UC ? 2 : t == IBV_QPT_UD ? 4 : 8;
}

}  // namespace detail

// The WQE opcode of a verbs opcode on a transport, or false when it has none.
inline bool wqe_opcode_of(ibv_wr_opcode op, ibv_qp_type type, hw::wqe_opcode& out) noexcept {
    const auto i = static_cast<unsigned>(op);
    if (i >= std::size(detail::kOpcodes) || !(detail::kOpcodes[i].transports & detail::transport_bit(type))) return false;
    out = detail::kOpcodes[i].wqe;
    return true;
}

namespace detail {
// post_send's general loop: every opcode, SGE count, inline size and transport, from
// `wr` on; rings the doorbell for everything the call put.
[[gnu::noinline]] inline post_outcome<ibv_send_wr> post_send_rest(queues::send_queue* sq_, unsigned max_sge,
                                                                   unsigned max_inline, ibv_qp_type type,
                                                                   ibv_send_wr* wr) noexcept {
    const send_side q{sq_, max_sge, max_inline, type};
    int err = 0;
    queues::send_queue& sq = *q.sq;
    const unsigned transport = detail::transport_bit(q.type);
    for (; wr != nullptr; wr = wr->next) {
        const auto code = static_cast<unsigned>(wr->opcode);
        if (code >= std::size(detail::kOpcodes) || !(detail::kOpcodes[code].transports & transport) ||
            wr->num_sge < 0) [[unlikely]] {
            err = EINVAL;
            break;
        }
        const detail::opcode_info& op = detail::kOpcodes[code];
        const auto* sg = sges(wr->sg_list);
        const auto n = static_cast<unsigned>(wr->num_sge);
        const bool inl = (wr->send_flags & IBV_SEND_INLINE) != 0;
        if (inl) {
            std::uint64_t total = 0;
            for (unsigned i = 0; i < n; ++i) total += sg[i].length;
            if (total > q.max_inline || !queues::send_wqe::allows_inline(op.wqe)) [[unlikely]] {
                err = EINVAL;
                break;
            }
        } else if (n > q.max_sge) [[unlikely]] {
            err = EINVAL;
            break;
        }
        const hw::wqe_av* av = nullptr;
        if (q.type == IBV_QPT_UD) {
            if (wr->wr.ud.ah == nullptr) [[unlikely]] {
                err = EINVAL;
                break;
            }
            av = &reinterpret_cast<const address_handle*>(wr->wr.ud.ah)->av;
        }
        if (q.type == IBV_QPT_RAW_PACKET) {
            // A whole frame: at least its Ethernet header (14 bytes), which the Ethernet
            // segment carries (queues::eth_wqe::put_sges).
            std::uint64_t total = 0;
            for (unsigned i = 0; i < n; ++i) total += sg[i].length;
            if (total < 14) [[unlikely]] {
                err = EINVAL;
                break;
            }
        }
        queues::send_queue::wqe_slot slot;
        if (!sq.reserve(slot)) [[unlikely]] {
            err = ENOMEM;
            break;
        }
        namespace wqe = queues::send_wqe;
        std::byte* seg = slot.w + sizeof(hw::wqe_ctrl_seg);
        if (q.type == IBV_QPT_RAW_PACKET) {
            const unsigned cs = (wr->send_flags & IBV_SEND_IP_CSUM) ? queues::eth_l3_csum | queues::eth_l4_csum : 0;
            seg = queues::eth_wqe::put_sges(seg, sg, n, cs, inl);
            sq.finish(slot, seg, op.wqe, wqe::kControl[wr->send_flags & 7], 0, wr->wr_id);
            continue;
        }
        if (av != nullptr) {
            // The address from the AH; the destination QP and Q_Key from the WR.
            seg = wqe::put_datagram(seg, wqe::with_destination(*av, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey));
        }
        if (wqe::has_atomic(op.wqe)) {
            seg = wqe::put_raddr(seg, wr->wr.atomic.remote_addr, wr->wr.atomic.rkey);
            seg = wqe::put_atomic(seg, op.wqe, wr->wr.atomic.compare_add, wr->wr.atomic.swap);
        } else if (wqe::has_raddr(op.wqe)) {
            seg = wqe::put_raddr(seg, wr->wr.rdma.remote_addr, wr->wr.rdma.rkey);
        }
        seg = inl ? wqe::put_inline(seg, sg, n) : wqe::put_gather(seg, sg, n);
        sq.finish(slot, seg, op.wqe, wqe::kControl[wr->send_flags & 7], wr->imm_data, wr->wr_id);
    }
    sq.ring();  // nothing when nothing was put
    return {err, err != 0 ? wr : nullptr};
}
}  // namespace detail

namespace detail {

// One WR of the common shapes (RC or UC; SEND, SEND_IMM, RDMA_WRITE, RDMA_WRITE_IMM or
// RDMA_READ; one SGE, or 4 to 64 bytes inline) into the ring in one pass; false, with
// nothing written, for any other WR, a full ring or a WQE that would cross the ring's
// end (the general loop takes those).
[[gnu::always_inline]] inline bool put_fast(const send_side& q, const ibv_send_wr& wr,
                                            queues::send_queue::batch& b) noexcept {
    using sq = queues::send_queue;
    static_assert(IBV_WR_RDMA_WRITE == sq::op_rdma_write && IBV_WR_RDMA_WRITE_WITH_IMM == sq::op_rdma_write_imm &&
                  IBV_WR_SEND == sq::op_send && IBV_WR_SEND_WITH_IMM == sq::op_send_imm &&
                  IBV_WR_RDMA_READ == sq::op_rdma_read && sq::small_ops == 5);
    const auto code = static_cast<unsigned>(wr.opcode);
    if (wr.num_sge != 1) [[unlikely]] return false;
    const unsigned flags = wr.send_flags;
    if (flags & IBV_SEND_INLINE) {
        // (not RDMA_READ, the last of the opcodes: fast_inline_ops is at most 4)
        if (code >= q.fast_inline_ops || sges(wr.sg_list)->length - 4 >= q.fast_inline_span) [[unlikely]] return false;
        return q.sq->put_small<true>(wr, code, b);
    }
    // (an empty SGE is left out of the WQE: the general loop's put_gather)
    const std::uint64_t len_key = queues::detail::len_key_of(*sges(wr.sg_list));
    if (code >= q.fast_ops || static_cast<std::uint32_t>(len_key) == 0) [[unlikely]] return false;
    return q.sq->put_small<false>(wr, code, b, len_key);
}

// post_send for a list (or a first WR the one-pass path does not take): the one-pass
// loop from `wr` on, then the general loop from the first WR it does not take; the WQEs
// the caller put (adopted into the ring) are rung with these, one doorbell for all.
[[gnu::noinline]] inline post_outcome<ibv_send_wr> post_send_list(queues::send_queue* sq, unsigned max_sge,
                                                                   unsigned max_inline, ibv_qp_type type,
                                                                   ibv_send_wr* wr) noexcept {
    const send_side q(sq, max_sge, max_inline, type);
    queues::send_queue::batch b;
    for (; wr != nullptr; wr = wr->next) {
        if (!put_fast(q, *wr, b)) break;
    }
    sq->adopt(b);
    if (wr != nullptr) [[unlikely]] return post_send_rest(sq, max_sge, max_inline, type, wr);
    sq->ring();
    return {0, nullptr};
}

// post_send_list by way of a cold function, as post_recv_more.
[[gnu::noinline, gnu::cold]] inline post_outcome<ibv_send_wr> post_send_more(queues::send_queue* sq,
                                                                            unsigned max_sge, unsigned max_inline,
                                                                            ibv_qp_type type,
                                                                            ibv_send_wr* wr) noexcept {
    return post_send_list(sq, max_sge, max_inline, type, wr);
}

}  // namespace detail

// ibv_post_send(3). A lone WR of the common shapes (detail::put_fast) is built and rung
// here, inlined, with no loop and no call; a list goes on from its second WR in
// post_send_list (one-pass loop, then the general loop), and so does a first WR of any
// other shape. One doorbell for the whole list either way.
[[gnu::always_inline]] inline int post_send(const send_side& q, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
    if (wr == nullptr) [[unlikely]] return 0;
    queues::send_queue::batch b;
    if (detail::put_fast(q, *wr, b)) [[likely]] {
        if (wr->next == nullptr) [[likely]] {
            q.sq->ring_one(b);
            return 0;
        }
        q.sq->adopt(b);
        return detail::report(detail::post_send_more(queues::detail::hidden(q.sq), q.max_sge, q.max_inline, q.type,
                                                     queues::detail::hidden(wr)->next),
                              bad_wr);
    }
    return detail::report(detail::post_send_more(queues::detail::hidden(q.sq), q.max_sge, q.max_inline, q.type,
                                                 queues::detail::hidden(wr)),
                          bad_wr);
}

// The basic blocks of the WQE post_send builds for a valid `wr` (queues/send_wqe.h's
// segments: control, datagram on UD, remote address and atomic where the opcode has
// them, then the gather list or the inline data).
inline unsigned send_wqe_bbs(const ibv_send_wr& wr, ibv_qp_type type) noexcept {
    hw::wqe_opcode op{};
    if (!wqe_opcode_of(wr.opcode, type, op)) return 1;
    unsigned ds = queues::send_wqe::fixed_ds(op, type == IBV_QPT_UD);
    if ((wr.send_flags & IBV_SEND_INLINE) != 0) {
        std::uint64_t total = 0;
        for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
        ds += queues::send_wqe::inline_ds(static_cast<unsigned>(total));
    } else {
        ds += queues::send_wqe::gather_ds(queues::send_wqe::gathered(sges(wr.sg_list), static_cast<unsigned>(wr.num_sge)));
    }
    return (ds + 3) / 4;
}

// Whether post_send would find room in the ring for every WR of the valid list `wr`, a
// list of `chunk` WRs at a time when each is posted as a list of its own (0: one list):
// what an all-or-nothing batch (ibv_wr_complete(3)) asks before it posts. The same tests
// as the posting paths, run ahead without writing: the one-pass path's exact room (no
// crossing of the ring's end) while it takes the WRs, then, from the first it does not
// take, the general path's reservation of the largest WQE with NOPs to the ring's end.
inline bool send_fits(const send_side& q, const ibv_send_wr* wr, unsigned chunk) noexcept {
    const queues::send_queue& sq = *q.sq;
    const std::uint32_t mask = sq.capacity_bbs() - 1, limit = sq.limit();
    const unsigned max_bbs = sq.max_wqe_bbs();
    std::uint32_t pi = sq.producer();
    bool fast = true;
    for (unsigned i = 0; wr != nullptr; wr = wr->next, ++i) {
        if (chunk != 0 && i % chunk == 0) fast = true;  // each chunk starts on the one-pass path
        const unsigned nbb = send_wqe_bbs(*wr, q.type);
        if (fast && wr->num_sge == 1) {
            // put_fast's shape test (room aside).
            const auto code = static_cast<unsigned>(wr->opcode);
            const bool shape = (wr->send_flags & IBV_SEND_INLINE) != 0
                                   ? code < q.fast_inline_ops && wr->sg_list[0].length - 4 < q.fast_inline_span
                                   : code < q.fast_ops && wr->sg_list[0].length != 0;
            if (shape && limit - pi >= nbb && (pi & mask) + nbb - 1 <= mask) {
                pi += nbb;
                continue;
            }
        }
        fast = false;
        const unsigned to_end = mask + 1 - (pi & mask);
        if (limit - pi < max_bbs + (to_end < max_bbs ? to_end : 0)) return false;
        if (to_end < max_bbs) pi += to_end;
        pi += nbb;
    }
    return true;
}

// The send side of a multi-producer QP: any number of threads may call post_send_mp
// at once (each WR is published on its own; see queues/mp_send_queue.h). The same
// checks and errors as post_send; 8-byte doorbells only.
struct mp_send_side {
    queues::mp_send_queue* sq;
    unsigned max_sge;
    unsigned max_inline;
    ibv_qp_type type;
};

inline int post_send_mp(const mp_send_side& q, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
    const unsigned transport = detail::transport_bit(q.type);
    for (; wr != nullptr; wr = wr->next) {
        const auto code = static_cast<unsigned>(wr->opcode);
        if (code >= std::size(detail::kOpcodes) || !(detail::kOpcodes[code].transports & transport) ||
            wr->num_sge < 0 || static_cast<unsigned>(wr->num_sge) > q.max_sge) [[unlikely]] {
            *bad_wr = wr;
            return EINVAL;
        }
        const detail::opcode_info& op = detail::kOpcodes[code];
        queues::send_request r;
        r.opcode = op.wqe;
        r.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
        r.solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
        r.fence = (wr->send_flags & IBV_SEND_FENCE) != 0;
        r.inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
        r.imm = wr->imm_data;
        r.sg = sges(wr->sg_list);
        r.num_sge = static_cast<unsigned>(wr->num_sge);
        r.wr_id = wr->wr_id;
        if (r.inline_data) {
            std::uint64_t total = 0;
            for (unsigned i = 0; i < r.num_sge; ++i) total += r.sg[i].length;
            if (total > q.max_inline || !queues::send_wqe::allows_inline(op.wqe)) [[unlikely]] {
                *bad_wr = wr;
                return EINVAL;
            }
        }
        hw::wqe_av av;
        if (q.type == IBV_QPT_UD) {
            if (wr->wr.ud.ah == nullptr) [[unlikely]] {
                *bad_wr = wr;
                return EINVAL;
            }
            av = queues::send_wqe::with_destination(reinterpret_cast<const address_handle*>(wr->wr.ud.ah)->av,
                                                    wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
            r.av = &av;
        } else if (queues::send_wqe::has_atomic(op.wqe)) {
            r.remote_addr = wr->wr.atomic.remote_addr;
            r.rkey = wr->wr.atomic.rkey;
            r.compare_add = wr->wr.atomic.compare_add;
            r.swap = wr->wr.atomic.swap;
        } else if (queues::send_wqe::has_raddr(op.wqe)) {
            r.remote_addr = wr->wr.rdma.remote_addr;
            r.rkey = wr->wr.rdma.rkey;
        }
        if (!q.sq->post(r)) [[unlikely]] {
            *bad_wr = wr;
            return ENOMEM;
        }
    }
    return 0;
}

// The poller fills the caller's ibv_wc array as work_completion: the same layout, field
// by field (the words it stores whole are named by their first field).
static_assert(sizeof(queues::work_completion) == sizeof(ibv_wc) && alignof(queues::work_completion) == alignof(ibv_wc));
static_assert(offsetof(queues::work_completion, wr_id) == offsetof(ibv_wc, wr_id) &&
              offsetof(queues::work_completion, status) == offsetof(ibv_wc, status) &&
              offsetof(queues::work_completion, opcode) == offsetof(ibv_wc, opcode) &&
              offsetof(queues::work_completion, vendor_err) == offsetof(ibv_wc, vendor_err) &&
              offsetof(queues::work_completion, byte_len) == offsetof(ibv_wc, byte_len) &&
              offsetof(queues::work_completion, imm_data) == offsetof(ibv_wc, imm_data) &&
              offsetof(queues::work_completion, qp_num) == offsetof(ibv_wc, qp_num) &&
              offsetof(queues::work_completion, src_qp) == offsetof(ibv_wc, src_qp) &&
              offsetof(queues::work_completion, wc_flags) == offsetof(ibv_wc, wc_flags) &&
              offsetof(queues::work_completion, pkey_index) == offsetof(ibv_wc, pkey_index) &&
              offsetof(queues::work_completion, slid) == offsetof(ibv_wc, slid) &&
              offsetof(queues::work_completion, sl) == offsetof(ibv_wc, sl) &&
              offsetof(queues::work_completion, dlid_path_bits) == offsetof(ibv_wc, dlid_path_bits));

[[gnu::always_inline]] inline int poll_cq(queues::completion_queue& cq, int num_entries, ibv_wc* wc) noexcept {
    return cq.poll(reinterpret_cast<queues::work_completion*>(wc), num_entries);
}

}  // namespace cxv::api
