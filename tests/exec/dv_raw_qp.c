/* mlx5dv_init_obj(3) on cxv's raw packet QPs, built and linked against rdma-core's
 * libibverbs and libmlx5 and run under cxv exec on two Ethernet functions (ucx_test): the
 * program sends a frame through the SQ of one function's raw packet QP and receives it in
 * the RQ of the other's with nothing but what mlx5dv_init_obj gave it, as DPDK's mlx5
 * driver runs a raw packet QP: a receive WQE in the RQ and the receive counter of the
 * QP's doorbell record, a SEND WQE (control, Ethernet segment with the frame's first 18
 * bytes inline, one data segment) in the SQ, the send counter of the same record and an
 * 8-byte doorbell on the BlueFlame register, both CQEs read from the CQ rings. The SQ's,
 * RQ's, TIR's and TIS's numbers come with MLX5DV_QP_MASK_RAW_QP_HANDLES. */
#include <endian.h>
#include <time.h>

#include <infiniband/mlx5dv.h>

#include "tests/exec/check.h"
#include "tests/exec/dv_cqe.h"

enum { frame_bytes = 64, inline_bytes = 18 };


struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    uint8_t mac[6];
    struct mlx5dv_qp dq;
    struct mlx5dv_cq dscq, drcq;
};

/* Function `i`'s raw packet QP in RTS, its MAC (from the link-local GID 0, EUI-64) and
 * its mlx5dv view. */
static void open_side(struct ibv_device **list, int i, struct side *s) {
    s->ctx = ibv_open_device(list[i]);
    if (s->ctx == NULL) DIE("ibv_open_device");
    union ibv_gid g;
    if (ibv_query_gid(s->ctx, 1, 0, &g)) DIE("ibv_query_gid");
    const uint8_t m[6] = {g.raw[8] ^ 2, g.raw[9], g.raw[10], g.raw[13], g.raw[14], g.raw[15]};
    memcpy(s->mac, m, 6);
    s->pd = ibv_alloc_pd(s->ctx);
    s->scq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
    s->rcq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
    if (s->pd == NULL || s->scq == NULL || s->rcq == NULL) DIE("objects");
    struct ibv_qp_init_attr qa = {.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_RAW_PACKET,
                                  .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
    s->qp = ibv_create_qp(s->pd, &qa);
    if (s->qp == NULL) DIE("ibv_create_qp(IBV_QPT_RAW_PACKET)");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
    if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PORT)) DIE("INIT");
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE)) DIE("RTR");
    a.qp_state = IBV_QPS_RTS;
    if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE)) DIE("RTS");
    s->dq.comp_mask = MLX5DV_QP_MASK_RAW_QP_HANDLES;
    struct mlx5dv_obj obj = {.qp = {.in = s->qp, .out = &s->dq}, .cq = {.in = s->scq, .out = &s->dscq}};
    if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ)) DIE("mlx5dv_init_obj");
    struct mlx5dv_obj objr = {.cq = {.in = s->rcq, .out = &s->drcq}};
    if (mlx5dv_init_obj(&objr, MLX5DV_OBJ_CQ)) DIE("mlx5dv_init_obj");
}

int main(void) {
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (list == NULL || list[0] == NULL || list[1] == NULL) DIE("ibv_get_device_list (two functions)");
    struct side a = {0}, b = {0};
    open_side(list, 0, &a);
    open_side(list, 1, &b);
    const struct mlx5dv_qp *q = &a.dq;
    CHECK("the raw packet QP's rings", q->dbrec != NULL && q->sq.buf != NULL && q->sq.wqe_cnt >= 8 &&
                                          q->sq.stride == 64 && q->rq.buf != NULL && q->rq.wqe_cnt >= 8 &&
                                          q->rq.stride >= 16 && q->bf.reg != NULL,
          "dbrec %p sq %p/%u/%u rq %p/%u/%u bf %p", (void *)q->dbrec, q->sq.buf, q->sq.wqe_cnt, q->sq.stride,
          q->rq.buf, q->rq.wqe_cnt, q->rq.stride, q->bf.reg);
    CHECK("its SQ, RQ, TIR and TIS numbers", q->comp_mask == MLX5DV_QP_MASK_RAW_QP_HANDLES &&
                                                 q->sqn == a.qp->qp_num && q->rqn != 0 && q->tirn != 0 &&
                                                 q->tisn != 0 && q->rqn != q->sqn,
          "comp_mask %#llx sqn %u (qp_num %u) rqn %u tirn %u tisn %u", (unsigned long long)q->comp_mask, q->sqn,
          a.qp->qp_num, q->rqn, q->tirn, q->tisn);

    /* The frame: to b's MAC, IEEE 802's local experimental ethertype, a text. */
    static uint8_t buf[8192];
    struct ibv_mr *amr = ibv_reg_mr(a.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *bmr = ibv_reg_mr(b.pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
    if (amr == NULL || bmr == NULL) DIE("ibv_reg_mr");
    uint8_t *frame = buf, *dst = buf + 4096;
    memcpy(frame, b.mac, 6);
    memcpy(frame + 6, a.mac, 6);
    frame[12] = 0x88;
    frame[13] = 0xb5;
    for (int i = 14; i < frame_bytes; ++i) frame[i] = (uint8_t)(0x40 + i);

    /* b steers frames to its MAC to its QP. */
    struct {
        struct ibv_flow_attr attr;
        struct ibv_flow_spec_eth eth;
    } fl = {0};
    fl.attr.type = IBV_FLOW_ATTR_NORMAL;
    fl.attr.size = sizeof fl;
    fl.attr.num_of_specs = 1;
    fl.attr.port = 1;
    fl.eth.type = IBV_FLOW_SPEC_ETH;
    fl.eth.size = sizeof fl.eth;
    memcpy(fl.eth.val.dst_mac, b.mac, 6);
    memset(fl.eth.mask.dst_mac, 0xff, 6);
    struct ibv_flow *flow = ibv_create_flow(b.qp, &fl.attr);
    if (flow == NULL) DIE("ibv_create_flow");

    /* A receive WQE in b's RQ, then the receive counter of b's doorbell record. */
    struct mlx5_wqe_data_seg *rseg = b.dq.rq.buf;
    mlx5dv_set_data_seg(rseg, 2048, bmr->lkey, (uintptr_t)dst);
    if (b.dq.rq.stride > sizeof *rseg) mlx5dv_set_data_seg(rseg + 1, 0, MLX5_INVALID_LKEY, 0);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    b.dq.dbrec[MLX5_RCV_DBR] = htobe32(1);

    /* A SEND WQE in a's SQ (PRM "Ethernet Segment"): control, the Ethernet segment with
     * the frame's first 18 bytes inline, the rest by a data segment: 4 octowords. */
    struct mlx5_wqe_ctrl_seg *ctrl = a.dq.sq.buf;
    mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_SEND, 0, a.qp->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 4, 0, 0);
    struct mlx5_wqe_eth_seg *eseg = (struct mlx5_wqe_eth_seg *)(ctrl + 1);
    memset(eseg, 0, sizeof *eseg);
    eseg->inline_hdr_sz = htobe16(inline_bytes);
    memcpy(eseg->inline_hdr_start, frame, 2);
    memcpy(eseg->inline_hdr, frame + 2, inline_bytes - 2);
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(eseg + 1), frame_bytes - inline_bytes, amr->lkey,
                        (uintptr_t)(frame + inline_bytes));
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    a.dq.dbrec[MLX5_SND_DBR] = htobe32(1);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile uint64_t *)a.dq.bf.reg = *(const uint64_t *)ctrl;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);

    struct mlx5_cqe64 *sent = wait_cqe(&a.dscq, 0);
    CHECK("the send completion in the send CQ's ring",
          sent != NULL && mlx5dv_get_cqe_opcode(sent) == MLX5_CQE_REQ && be16toh(sent->wqe_counter) == 0,
          "cqe %p opcode %u", (void *)sent, sent ? mlx5dv_get_cqe_opcode(sent) : 0);
    a.dscq.dbrec[cq_set_ci] = htobe32(1);
    struct mlx5_cqe64 *got = wait_cqe(&b.drcq, 0);
    CHECK("the receive completion in the receive CQ's ring",
          got != NULL && mlx5dv_get_cqe_opcode(got) == MLX5_CQE_RESP_SEND && be32toh(got->byte_cnt) == frame_bytes &&
              be16toh(got->wqe_counter) == 0,
          "cqe %p opcode %u byte_cnt %u", (void *)got, got ? mlx5dv_get_cqe_opcode(got) : 0,
          got ? be32toh(got->byte_cnt) : 0);
    b.drcq.dbrec[cq_set_ci] = htobe32(1);
    CHECK("the frame arrived", memcmp(dst, frame, frame_bytes) == 0, "first bytes %02x %02x %02x", dst[0], dst[1],
          dst[12]);

    ibv_destroy_flow(flow);
    ibv_dereg_mr(amr);
    ibv_dereg_mr(bmr);
    struct side *sides[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
        ibv_destroy_qp(sides[i]->qp);
        ibv_destroy_cq(sides[i]->scq);
        ibv_destroy_cq(sides[i]->rcq);
        ibv_dealloc_pd(sides[i]->pd);
        ibv_close_device(sides[i]->ctx);
    }
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures != 0;
}
