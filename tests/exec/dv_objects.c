/* mlx5dv_init_obj(3) on cxv's objects, built and linked against rdma-core's libibverbs
 * and libmlx5 and run under cxv exec (ucx_test): the program drives two connected RC QPs
 * itself, as UCX's mlx5 transports do, with nothing but what mlx5dv_init_obj gave it:
 * a receive WQE written into the receive ring and its doorbell record, a SEND WQE
 * written into the send ring, its doorbell record and an 8-byte doorbell on the
 * BlueFlame register, both completions read from the CQ rings by their owner bits and
 * the consumer indexes written back; the data must arrive. Then the send CQ armed through
 * its record and its UAR page's CQ doorbell, and the next SEND's completion event must
 * come to its completion channel. Also the SRQ's free list,
 * the PD, an AH's address vector and MLX5_1.0's CQ answer. */
#include <endian.h>
#include <poll.h>
#include <time.h>

#include <infiniband/mlx5dv.h>

#include "tests/exec/check.h"
#include "tests/exec/dv_cqe.h"

#define CHECK_RET(name, expr, want)                              \
    do {                                                         \
        const long got_ = (long)(expr);                          \
        CHECK(name, got_ == (long)(want), "returned %ld", got_); \
    } while (0)

/* MLX5_1.0's mlx5dv_init_obj, whose cq_uar points at the UAR address. */
int init_obj_1_0(struct mlx5dv_obj *obj, uint64_t obj_type);
__asm__(".symver init_obj_1_0,mlx5dv_init_obj@MLX5_1.0");


int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
    if (channel == NULL) DIE("ibv_create_comp_channel");
    struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, channel, 0);
    struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (pd == NULL || scq == NULL || rcq == NULL) DIE("objects");
    struct ibv_qp_init_attr qa = {.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *a = ibv_create_qp(pd, &qa);
    struct ibv_qp *b = ibv_create_qp(pd, &qa);
    if (a == NULL || b == NULL) DIE("ibv_create_qp");
    connect_rc(a, b->qp_num);
    connect_rc(b, a->qp_num);
    static char buf[4096];
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) DIE("ibv_reg_mr");
    const char msg[] = "a SEND the program wrote itself";
    memcpy(buf, msg, sizeof msg);
    char *dst = buf + 2048;

    struct mlx5dv_qp dqa = {0}, dqb = {0};
    struct mlx5dv_cq dscq = {0}, drcq = {0};
    struct mlx5dv_pd dpd = {0};
    struct mlx5dv_obj obj = {.qp = {.in = a, .out = &dqa}, .cq = {.in = scq, .out = &dscq},
                             .pd = {.in = pd, .out = &dpd}};
    CHECK_RET("mlx5dv_init_obj of a QP, a CQ and a PD",
              mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_PD), 0);
    dqb.comp_mask = MLX5DV_QP_MASK_UAR_MMAP_OFFSET;
    struct mlx5dv_obj obj_b = {.qp = {.in = b, .out = &dqb}, .cq = {.in = rcq, .out = &drcq}};
    CHECK_RET("mlx5dv_init_obj of the peer QP and its CQ", mlx5dv_init_obj(&obj_b, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ), 0);
    CHECK("the QP's rings", dqa.dbrec != NULL && dqa.sq.buf != NULL && dqa.sq.wqe_cnt >= 8 &&
                                (dqa.sq.wqe_cnt & (dqa.sq.wqe_cnt - 1)) == 0 && dqa.sq.stride == 64 &&
                                dqa.rq.buf != NULL && dqa.rq.wqe_cnt >= 8 && dqa.rq.stride >= 16 &&
                                dqa.bf.reg != NULL && (dqa.bf.size == 0 || dqa.bf.size == 256),
          "dbrec %p sq %p/%u/%u rq %p/%u/%u bf %p/%u", (void *)dqa.dbrec, dqa.sq.buf, dqa.sq.wqe_cnt, dqa.sq.stride,
          dqa.rq.buf, dqa.rq.wqe_cnt, dqa.rq.stride, dqa.bf.reg, dqa.bf.size);
    CHECK("no UAR mmap offset (comp_mask out)", dqb.comp_mask == 0, "comp_mask %#llx",
          (unsigned long long)dqb.comp_mask);
    CHECK("the CQs' rings", dscq.buf != NULL && dscq.dbrec != NULL && dscq.cqe_cnt >= 16 && dscq.cqe_size == 64 &&
                                dscq.cq_uar != NULL && drcq.cqn != dscq.cqn && dscq.comp_mask == 0,
          "buf %p dbrec %p cqe_cnt %u cqe_size %u uar %p cqn %u/%u", dscq.buf, (void *)dscq.dbrec, dscq.cqe_cnt,
          dscq.cqe_size, dscq.cq_uar, dscq.cqn, drcq.cqn);
    CHECK("the PD number", dpd.comp_mask == 0 && dpd.pdn != 0, "pdn %u", dpd.pdn);

    /* A receive WQE in b's receive ring (PRM "Receive WQE": data segments, the rest
     * ended by one with the invalid L_Key), then its doorbell record's receive counter. */
    struct mlx5_wqe_data_seg *rseg = dqb.rq.buf;
    mlx5dv_set_data_seg(rseg, 512, mr->lkey, (uintptr_t)dst);
    if (dqb.rq.stride > sizeof *rseg) mlx5dv_set_data_seg(rseg + 1, 0, MLX5_INVALID_LKEY, 0);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    dqb.dbrec[MLX5_RCV_DBR] = htobe32(1);

    /* A SEND WQE in a's send ring (control and one data segment), the send counter of the
     * doorbell record, then the WQE's first 8 bytes to the BlueFlame register (PRM
     * "Doorbells and BlueFlame"). */
    struct mlx5_wqe_ctrl_seg *ctrl = dqa.sq.buf;
    mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_SEND, 0, a->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(ctrl + 1), sizeof msg, mr->lkey, (uintptr_t)buf);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    dqa.dbrec[MLX5_SND_DBR] = htobe32(1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)dqa.bf.reg = *(const uint64_t *)ctrl;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);

    struct mlx5_cqe64 *sent = wait_cqe(&dscq, 0);
    CHECK("the send completion in the send CQ's ring",
          sent != NULL && mlx5dv_get_cqe_opcode(sent) == MLX5_CQE_REQ && be16toh(sent->wqe_counter) == 0 &&
              (be32toh(sent->sop_drop_qpn) & 0xffffff) == a->qp_num,
          "cqe %p opcode %u", (void *)sent, sent ? mlx5dv_get_cqe_opcode(sent) : 0);
    dscq.dbrec[cq_set_ci] = htobe32(1);
    struct mlx5_cqe64 *got = wait_cqe(&drcq, 0);
    CHECK("the receive completion in the receive CQ's ring",
          got != NULL && mlx5dv_get_cqe_opcode(got) == MLX5_CQE_RESP_SEND && be32toh(got->byte_cnt) == sizeof msg &&
              (be32toh(got->sop_drop_qpn) & 0xffffff) == b->qp_num,
          "cqe %p opcode %u", (void *)got, got ? mlx5dv_get_cqe_opcode(got) : 0);
    drcq.dbrec[cq_set_ci] = htobe32(1);
    CHECK("the data arrived", memcmp(dst, msg, sizeof msg) == 0, "got '%.40s'", dst);

    /* Arm the send CQ for its next completion (PRM "Completion Event"): the arm word
     * (sequence number 0, any completion, consumer index 1) in the record, then the
     * 64-bit CQ doorbell on the CQ's UAR page, big-endian: the arm word, then the CQN. */
    const uint32_t arm = (0u << 28) | MLX5_CQ_DB_REQ_NOT | 1u;
    dscq.dbrec[cq_arm_db] = htobe32(arm);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)((char *)dscq.cq_uar + MLX5_CQ_DOORBELL) = htobe64((uint64_t)arm << 32 | dscq.cqn);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* The second receive and SEND: WQE index 1 of each ring, counters 2. */
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)((char *)dqb.rq.buf + dqb.rq.stride), 512, mr->lkey,
                        (uintptr_t)dst + 512);
    if (dqb.rq.stride > sizeof *rseg) {
        mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)((char *)dqb.rq.buf + dqb.rq.stride) + 1, 0,
                            MLX5_INVALID_LKEY, 0);
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
    dqb.dbrec[MLX5_RCV_DBR] = htobe32(2);
    ctrl = (struct mlx5_wqe_ctrl_seg *)((char *)dqa.sq.buf + dqa.sq.stride);
    mlx5dv_set_ctrl_seg(ctrl, 1, MLX5_OPCODE_SEND, 0, a->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(ctrl + 1), sizeof msg, mr->lkey, (uintptr_t)buf);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    dqa.dbrec[MLX5_SND_DBR] = htobe32(2);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* The other half of the BlueFlame register, as each doorbell alternates. */
    *(volatile uint64_t *)((char *)dqa.bf.reg + (dqa.bf.size ? dqa.bf.size : 256)) = *(const uint64_t *)ctrl;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    struct pollfd pfd = {.fd = channel->fd, .events = POLLIN};
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    const int ready = poll(&pfd, 1, 10000);
    const int got_event = ready == 1 && ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0;
    CHECK("the completion event of the CQ armed through its UAR page", got_event && ev_cq == scq,
          "poll %d, cq %p", ready, (void *)ev_cq);
    if (got_event) ibv_ack_cq_events(scq, 1);
    sent = wait_cqe(&dscq, 1);
    CHECK("the second send completion", sent != NULL && be16toh(sent->wqe_counter) == 1, "cqe %p", (void *)sent);
    dscq.dbrec[cq_set_ci] = htobe32(2);
    got = wait_cqe(&drcq, 1);
    CHECK("the second receive completion", got != NULL && be32toh(got->byte_cnt) == sizeof msg, "cqe %p",
          (void *)got);
    drcq.dbrec[cq_set_ci] = htobe32(2);

    /* MLX5_1.0: cq_uar holds the address of the UAR page's address. */
    struct mlx5dv_cq old = {0};
    struct mlx5dv_obj obj_old = {.cq = {.in = scq, .out = &old}};
    CHECK_RET("mlx5dv_init_obj@MLX5_1.0 of a CQ", init_obj_1_0(&obj_old, MLX5DV_OBJ_CQ), 0);
    CHECK("MLX5_1.0's cq_uar points at the UAR address", old.cq_uar != NULL && *(void **)old.cq_uar == dscq.cq_uar,
          "%p", old.cq_uar);

    /* The SRQ's free list as it stands: head, where the next receive goes, moves on. */
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 8, .max_sge = 1}};
    struct ibv_srq *srq = ibv_create_srq(pd, &sa);
    if (srq == NULL) DIE("ibv_create_srq");
    struct mlx5dv_srq ds = {.comp_mask = MLX5DV_SRQ_MASK_SRQN};
    struct mlx5dv_obj obj_s = {.srq = {.in = srq, .out = &ds}};
    CHECK_RET("mlx5dv_init_obj of an SRQ", mlx5dv_init_obj(&obj_s, MLX5DV_OBJ_SRQ), 0);
    CHECK("the SRQ's ring, free list and number",
          ds.buf != NULL && ds.dbrec != NULL && ds.stride >= 32 && ds.head == 0 && ds.tail >= 8 &&
              ds.comp_mask == MLX5DV_SRQ_MASK_SRQN && ds.srqn != 0,
          "buf %p stride %u head %u tail %u srqn %u", ds.buf, ds.stride, ds.head, ds.tail, ds.srqn);
    struct ibv_sge sge = {.addr = (uintptr_t)dst, .length = 64, .lkey = mr->lkey};
    struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad = NULL;
    if (ibv_post_srq_recv(srq, &wr, &bad)) DIE("ibv_post_srq_recv");
    struct mlx5dv_srq ds2 = {0};
    obj_s.srq.out = &ds2;
    CHECK_RET("mlx5dv_init_obj of the SRQ again", mlx5dv_init_obj(&obj_s, MLX5DV_OBJ_SRQ), 0);
    CHECK("its head after a receive: the next WQE of the list",
          ds2.head == 1 && ds2.tail == ds.tail && ds2.comp_mask == 0,
          "head %u tail %u", ds2.head, ds2.tail);

    /* An AH's address vector: the port's LID (InfiniBand) or the GID (RoCE). */
    struct ibv_ah_attr aa = {.dlid = port.lid, .port_num = 1};
    if (roce) {
        aa.is_global = 1;
        aa.grh.dgid = gid;
        aa.grh.hop_limit = 1;
    }
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    if (ah == NULL) DIE("ibv_create_ah");
    struct mlx5dv_ah dah = {0};
    struct mlx5dv_obj obj_ah = {.ah = {.in = ah, .out = &dah}};
    CHECK_RET("mlx5dv_init_obj of an AH", mlx5dv_init_obj(&obj_ah, MLX5DV_OBJ_AH), 0);
    CHECK("the AH's address vector",
          dah.av != NULL && dah.comp_mask == 0 &&
              (roce ? memcmp(dah.av->rgid, gid.raw, 16) == 0 : be16toh(dah.av->rlid) == port.lid),
          "av %p", (void *)dah.av);

    ibv_destroy_ah(ah);
    ibv_destroy_srq(srq);
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(scq);
    ibv_destroy_cq(rcq);
    ibv_destroy_comp_channel(channel);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures != 0;
}
