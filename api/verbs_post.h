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

#include <cerrno>
#include <cstdint>

#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "queues/completion_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
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
    queues::send_queue* sq;
    unsigned max_sge;
    unsigned max_inline;
    ibv_qp_type type;  // IBV_QPT_RC, IBV_QPT_UC or IBV_QPT_UD
};

// The receive side: its own RQ, or none when an SRQ serves it.
struct recv_side {
    queues::recv_queue* rq;  // null: the QP uses an SRQ
    unsigned max_sge;
};

inline int post_recv(const recv_side& q, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
    int err = 0;
    bool any = false;
    for (; wr != nullptr; wr = wr->next) {
        if (q.rq == nullptr || wr->num_sge < 0 || static_cast<unsigned>(wr->num_sge) > q.max_sge) {
            err = EINVAL;
            break;
        }
        if (!q.rq->put(sges(wr->sg_list), static_cast<unsigned>(wr->num_sge), wr->wr_id)) {
            err = ENOMEM;
            break;
        }
        any = true;
    }
    if (any) q.rq->commit();
    if (err) *bad_wr = wr;
    return err;
}

inline int post_srq_recv(queues::srq_ring& srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept {
    int err = 0;
    bool any = false;
    for (; wr != nullptr; wr = wr->next) {
        if (wr->num_sge < 0 || static_cast<unsigned>(wr->num_sge) > srq.max_sge()) {
            err = EINVAL;
            break;
        }
        if (!srq.put(sges(wr->sg_list), static_cast<unsigned>(wr->num_sge), wr->wr_id)) {
            err = ENOMEM;
            break;
        }
        any = true;
    }
    if (any) srq.commit();
    if (err) *bad_wr = wr;
    return err;
}

// The WQE opcode of a verbs opcode on a transport, or false when it has none.
inline bool wqe_opcode_of(ibv_wr_opcode op, ibv_qp_type type, hw::wqe_opcode& out) noexcept {
    const bool rc = type == IBV_QPT_RC, uc = type == IBV_QPT_UC;
    switch (op) {
    case IBV_WR_SEND: out = hw::wqe_opcode::SEND; return true;
    case IBV_WR_SEND_WITH_IMM: out = hw::wqe_opcode::SEND_IMM; return true;
    case IBV_WR_RDMA_WRITE: out = hw::wqe_opcode::RDMA_WRITE; return rc || uc;
    case IBV_WR_RDMA_WRITE_WITH_IMM: out = hw::wqe_opcode::RDMA_WRITE_IMM; return rc || uc;
    case IBV_WR_RDMA_READ: out = hw::wqe_opcode::RDMA_READ; return rc;
    case IBV_WR_ATOMIC_CMP_AND_SWP: out = hw::wqe_opcode::ATOMIC_CS; return rc;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: out = hw::wqe_opcode::ATOMIC_FA; return rc;
    default: return false;
    }
}

inline int post_send(const send_side& q, ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
    int err = 0;
    for (; wr != nullptr; wr = wr->next) {
        queues::send_request r;
        if (!wqe_opcode_of(wr->opcode, q.type, r.opcode) || wr->num_sge < 0) {
            err = EINVAL;
            break;
        }
        r.inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
        r.sg = sges(wr->sg_list);
        r.num_sge = static_cast<unsigned>(wr->num_sge);
        if (r.inline_data) {
            std::uint64_t total = 0;
            for (unsigned i = 0; i < r.num_sge; ++i) total += r.sg[i].length;
            if (total > q.max_inline || r.opcode == hw::wqe_opcode::RDMA_READ ||
                r.opcode == hw::wqe_opcode::ATOMIC_CS || r.opcode == hw::wqe_opcode::ATOMIC_FA) {
                err = EINVAL;
                break;
            }
        } else if (r.num_sge > q.max_sge) {
            err = EINVAL;
            break;
        }
        r.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
        r.solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
        r.fence = (wr->send_flags & IBV_SEND_FENCE) != 0;
        r.imm = wr->imm_data;
        r.wr_id = wr->wr_id;
        if (q.type == IBV_QPT_UD) {
            if (wr->wr.ud.ah == nullptr) {
                err = EINVAL;
                break;
            }
            r.av = &reinterpret_cast<const address_handle*>(wr->wr.ud.ah)->av;
        } else if (r.opcode == hw::wqe_opcode::ATOMIC_CS || r.opcode == hw::wqe_opcode::ATOMIC_FA) {
            r.remote_addr = wr->wr.atomic.remote_addr;
            r.rkey = wr->wr.atomic.rkey;
            r.compare_add = wr->wr.atomic.compare_add;
            r.swap = wr->wr.atomic.swap;
        } else {
            r.remote_addr = wr->wr.rdma.remote_addr;
            r.rkey = wr->wr.rdma.rkey;
        }
        if (!q.sq->put(r)) {
            err = ENOMEM;
            break;
        }
    }
    q.sq->ring();  // nothing when nothing was put
    if (err) *bad_wr = wr;
    return err;
}

inline int poll_cq(queues::completion_queue& cq, int num_entries, ibv_wc* wc) noexcept {
    return cq.poll(reinterpret_cast<queues::work_completion*>(wc), num_entries);
}

}  // namespace cxv::api
