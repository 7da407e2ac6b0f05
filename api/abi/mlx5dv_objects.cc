// mlx5dv_init_obj(3) for cxv's libmlx5.so.1 (mlx5dv.cc), answered in libibverbs.so.1,
// which holds the objects: the real rings, doorbell records and registers of cxv's
// queues on the device, so a program may write WQEs, ring doorbells and read CQEs itself
// as on rdma-core's provider (UCX's mlx5 transports do). Layouts as <infiniband/mlx5dv.h>
// gives them (PRM "Work Queue", "Completion Queue", "Doorbells and BlueFlame", "SRQ"):
//
//   QP   dbrec: the two big-endian counters (receive, then send) of the doorbell record;
//        sq: the send ring in 64-byte basic blocks; rq: the receive ring, WQEs of
//        1 << wqe_shift bytes (none with an SRQ); bf: the QP's BlueFlame register, its
//        half size where cxv writes BlueFlame copies (a write-combining mapping), 0
//        where it rings 8-byte doorbells (uncached), as rdma-core gives size 0 for a
//        register without BlueFlame.
//   CQ   the CQE ring (64- or 128-byte entries), its record (consumer index, then the arm word),
//        the CQE count, and the UAR page whose CQ doorbell (offset 0x20) arms it.
//   SRQ  the WQE ring, its record, the stride, and the free list (head: where the next
//        receive goes; tail: the last free WQE), linked by the WQEs' next segments.
//   PD   the PD number; AH: the address vector UD send WQEs carry.
//
// Not given: a UAR mmap offset (cxv maps no UAR through a command fd, so the bit stays
// clear in comp_mask), DEVX objects, receive WQs and device memory (cxv has none of
// them: EOPNOTSUPP).
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "api/abi/abi.h"
#include "api/abi/providers.h"
#include "api/cxv.h"
#include "api/cxv_verbs.h"
#include "api/verbs_post.h"
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/eth.h"
#include "driver/res/qp.h"
#include "driver/res/srq.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/wqe.h"

namespace {

static_assert(sizeof(cxv::hw::wqe_av) == sizeof(mlx5_wqe_av));
static_assert(sizeof(cxv::hw::wq_doorbell_record) == 2 * sizeof(__be32));

void get_qp(ibv_qp* in, mlx5dv_qp* out) {
    cxv::qp& q = cxv::verbs_qp(in);
    const cxv::driver::qp& o = *q.object();
    out->dbrec = reinterpret_cast<__be32*>(o.doorbell_record());
    out->sq.buf = o.has_sq() ? o.sq() : nullptr;
    out->sq.wqe_cnt = o.has_sq() ? o.sq_wqebb_count() : 0;
    out->sq.stride = cxv::hw::send_wqe_bb;
    out->rq.buf = o.rq_wqe_count() != 0 ? o.rq() : nullptr;
    out->rq.wqe_cnt = o.rq_wqe_count();
    out->rq.stride = o.rq_wqe_count() != 0 ? 1u << o.rq_wqe_shift() : 0;
    const bool blueflame = q.doorbell() != cxv::doorbell_mode::doorbell;
    out->bf.reg = o.bf_register(blueflame);
    out->bf.size = blueflame ? static_cast<std::uint32_t>(o.bf().size / 2) : 0;
    std::uint64_t filled = 0;
    // Raw packet QPs' TIR, TIS, RQ and SQ numbers: an RC, UC or UD QP has none (zeros,
    // as rdma-core reports them for one).
    if (out->comp_mask & MLX5DV_QP_MASK_RAW_QP_HANDLES) {
        out->tirn = out->tisn = out->rqn = out->sqn = 0;
        filled |= MLX5DV_QP_MASK_RAW_QP_HANDLES;
    }
    if (out->comp_mask & MLX5DV_QP_MASK_RAW_QP_TIR_ADDR) {
        out->tir_icm_addr = 0;
        filled |= MLX5DV_QP_MASK_RAW_QP_TIR_ADDR;
    }
    out->comp_mask = filled;
}

// A raw packet QP (IBV_QPT_RAW_PACKET): its SQ's and RQ's rings, their one doorbell
// record (as the QP's: receive counter, then send counter), the SQ's BlueFlame register,
// and with MLX5DV_QP_MASK_RAW_QP_HANDLES the TIR, TIS, RQ and SQ numbers, as rdma-core
// reports them for the QP mlx5_ib made. The TIR's ICM address (for software steering) is
// not known to cxv: that bit stays clear.
void get_raw_qp(ibv_qp* in, mlx5dv_qp* out) {
    cxv::qp& q = cxv::verbs_qp(in);
    const auto sq = q.raw_sq();
    const auto rq = q.raw_rq();
    const auto tir = q.raw_tir();
    const auto tis = q.raw_tis();
    out->dbrec = reinterpret_cast<__be32*>(sq ? sq->doorbell_record() : rq->doorbell_record());
    out->sq.buf = sq ? sq->wqes() : nullptr;
    out->sq.wqe_cnt = sq ? sq->wqebb_count() : 0;
    out->sq.stride = cxv::hw::send_wqe_bb;
    out->rq.buf = rq ? rq->wqes() : nullptr;
    out->rq.wqe_cnt = rq ? rq->wqe_count() : 0;
    out->rq.stride = rq ? 1u << rq->wqe_shift() : 0;
    const bool blueflame = sq && q.doorbell() != cxv::doorbell_mode::doorbell;
    out->bf.reg = sq ? sq->bf_register(blueflame) : nullptr;
    out->bf.size = blueflame ? static_cast<std::uint32_t>(sq->bf().size / 2) : 0;
    std::uint64_t filled = 0;
    if (out->comp_mask & MLX5DV_QP_MASK_RAW_QP_HANDLES) {
        out->tirn = tir ? tir->tirn() : 0;
        out->tisn = tis ? tis->tisn() : 0;
        out->rqn = rq ? rq->rqn() : 0;
        out->sqn = sq ? sq->sqn() : 0;
        filled |= MLX5DV_QP_MASK_RAW_QP_HANDLES;
    }
    out->comp_mask = filled;
}

void get_cq(ibv_cq* in, mlx5dv_cq* out) {
    const cxv::driver::cq& c = *cxv::verbs_cq(in).object();
    out->comp_mask = 0;
    out->buf = c.cqes();
    out->dbrec = reinterpret_cast<__be32*>(c.doorbell_record());
    out->cqe_cnt = c.entries();
    out->cqe_size = c.cqe_size();  // 64, or 128 from mlx5dv_create_cq (its CQE the second half)
    out->cqn = c.cqn();
    // The CQ's UAR page (cqc.uar_page), uncached: the arm doorbell is one 8-byte store.
    out->cq_uar = c.device().device().bar0().base() + std::size_t{c.uar()} * cxv::hw::uar_page_size;
}

void get_srq(ibv_srq* in, mlx5dv_srq* out) {
    const cxv::srq& s = cxv::verbs_srq(in);
    const cxv::driver::srq& o = *s.object();
    out->buf = o.wqes();
    out->dbrec = reinterpret_cast<__be32*>(o.doorbell_record());
    out->stride = 1u << o.wqe_shift();
    out->head = s.free_head();
    out->tail = s.free_tail();
    std::uint64_t filled = 0;
    if (out->comp_mask & MLX5DV_SRQ_MASK_SRQN) {
        out->srqn = s.srqn();
        filled |= MLX5DV_SRQ_MASK_SRQN;
    }
    out->comp_mask = filled;
}

}  // namespace

// Each object named in `type`, in mlx5dv_obj's order; the first failure stops. 0 or an
// errno value (mlx5dv.cc sets errno).
CXV_ABI_EXPORT int cxv_abi_init_obj(mlx5dv_obj* obj, std::uint64_t type) {
    if (type & (MLX5DV_OBJ_RWQ | MLX5DV_OBJ_DM)) return EOPNOTSUPP;  // cxv makes neither
    if (type & MLX5DV_OBJ_QP) {
        cxv::qp& q = cxv::verbs_qp(obj->qp.in);
        if (q.type() == cxv::qp_type::raw_packet && (q.raw_sq() || q.raw_rq())) {
            get_raw_qp(obj->qp.in, obj->qp.out);
        } else if (q.type() == cxv::qp_type::raw_packet) {
            return EOPNOTSUPP;  // an RSS QP: no rings (nor has rdma-core's one)
        } else {
            get_qp(obj->qp.in, obj->qp.out);
        }
    }
    if (type & MLX5DV_OBJ_CQ) get_cq(obj->cq.in, obj->cq.out);
    if (type & MLX5DV_OBJ_SRQ) get_srq(obj->srq.in, obj->srq.out);
    if (type & MLX5DV_OBJ_AH) {
        obj->ah.out->comp_mask = 0;
        obj->ah.out->av = reinterpret_cast<mlx5_wqe_av*>(&reinterpret_cast<cxv::api::address_handle*>(obj->ah.in)->av);
    }
    if (type & MLX5DV_OBJ_PD) {
        obj->pd.out->comp_mask = 0;
        obj->pd.out->pdn = cxv::verbs_pd(obj->pd.in).pdn();
    }
    return 0;
}
