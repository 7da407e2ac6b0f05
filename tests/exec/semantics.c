/* Control-path calls where cxv's libibverbs follows rdma-core (libibverbs and its mlx5
 * provider) as the programs people run expect it: a receive-only QP (max_send_wr 0, as
 * qperf's server makes it), an AH or an RC QP's path without a GRH on RoCE,
 * ibv_close_device with objects still open, IBV_ACCESS_MW_BIND on an MR, CQ sizes at and
 * past max_cqe, phys_port_cnt_ex, and a cmd_fd that is a real descriptor. Through cxv
 * exec, in a program built against rdma-core. Each check prints "ok NAME" or "FAIL NAME:
 * ..."; exits 0 when every check passed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

static char a_buf[4096] __attribute__((aligned(64))), b_buf[4096] __attribute__((aligned(64)));

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc) {
    int ne = 0;
    for (long spins = 0; ne == 0 && spins < 100000000; ++spins) ne = ibv_poll_cq(cq, 1, wc);
    return ne == 1;
}

/* A receive-only RC QP (max_send_wr 0): made, reported with no send queue, refuses a send
 * with ENOMEM (mlx5's answer for a full or absent send queue) and receives. */
static void receive_only_qp(struct ibv_pd *pd, struct ibv_mr *amr, struct ibv_mr *bmr) {
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (cq == NULL) DIE("ibv_create_cq");
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *sender = ibv_create_qp(pd, &ia);
    struct ibv_qp_init_attr ra = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 0, .max_recv_wr = 4, .max_send_sge = 0, .max_recv_sge = 1}};
    struct ibv_qp *rx = ibv_create_qp(pd, &ra);
    CHECK("receive-only QP created", rx != NULL, "errno %d (%s)", errno, strerror(errno));
    if (rx == NULL || sender == NULL) return;
    CHECK("receive-only QP reports max_send_wr 0", ra.cap.max_send_wr == 0 && ra.cap.max_recv_wr >= 4,
          "max_send_wr %u max_recv_wr %u", ra.cap.max_send_wr, ra.cap.max_recv_wr);
    connect_rc(sender, rx->qp_num);
    connect_rc(rx, sender->qp_num);

    struct ibv_sge rs = {.addr = (uintptr_t)b_buf, .length = 64, .lkey = bmr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 7, .sg_list = &rs, .num_sge = 1}, *rbad = NULL;
    struct ibv_sge ss = {.addr = (uintptr_t)a_buf, .length = 64, .lkey = amr->lkey};
    struct ibv_send_wr sw = {.wr_id = 8, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND}, *sbad = NULL;
    const int refused = ibv_post_send(rx, &sw, &sbad);
    CHECK("receive-only QP refuses a send with ENOMEM", refused == ENOMEM && sbad == &sw, "returned %d", refused);

    memset(a_buf, 0x5a, 64);
    memset(b_buf, 0, 64);
    struct ibv_wc wc[2];
    int got = 0;
    if (ibv_post_recv(rx, &rw, &rbad) == 0 && ibv_post_send(sender, &sw, &sbad) == 0) {
        for (int i = 0; i < 2 && wait_wc(cq, &wc[i]); ++i) got += wc[i].status == IBV_WC_SUCCESS;
    }
    CHECK("receive-only QP receives", got == 2 && b_buf[0] == 0x5a && b_buf[63] == 0x5a, "%d completions, byte %d",
          got, b_buf[0]);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    CHECK("receive-only QP queried", ibv_query_qp(rx, &qa, IBV_QP_CAP, &qi) == 0 && qa.cap.max_send_wr == 0,
          "max_send_wr %u", qa.cap.max_send_wr);
    ibv_destroy_qp(rx);
    ibv_destroy_qp(sender);
    ibv_destroy_cq(cq);
}

/* mlx5_create_ah: a RoCE port needs a GRH (EINVAL without); InfiniBand does not. */
static void ah_without_grh(struct ibv_pd *pd) {
    struct ibv_ah_attr aa = {.dlid = port.lid, .port_num = 1, .is_global = 0};
    errno = 0;
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    if (roce) {
        CHECK("RoCE AH without a GRH: EINVAL", ah == NULL && errno == EINVAL, "ah %p errno %d", (void *)ah, errno);
    } else {
        CHECK("InfiniBand AH without a GRH", ah != NULL, "errno %d", errno);
    }
    if (ah != NULL) ibv_destroy_ah(ah);
    aa.is_global = 1;
    aa.grh.dgid = gid;
    aa.grh.hop_limit = 1;
    ah = ibv_create_ah(pd, &aa);
    CHECK("AH with a GRH", ah != NULL, "errno %d", errno);
    if (ah != NULL) ibv_destroy_ah(ah);
}

/* ib_core's check of an RC QP's address vector (rdma_check_ah_attr): without a GRH on
 * RoCE, INIT to RTR is EINVAL even when the GID is filled in; InfiniBand routes by LID. */
static void rtr_without_grh(struct ibv_pd *pd) {
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
    if (qp == NULL) DIE("ibv_create_qp");
    to_init(qp, 0);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qp->qp_num,
                            .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                            .ah_attr = {.dlid = port.lid, .port_num = 1, .is_global = 0}};
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.hop_limit = 1;
    errno = 0;
    const int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (roce) {
        CHECK("RoCE RTR without a GRH: EINVAL", r == EINVAL && errno == EINVAL, "returned %d errno %d", r, errno);
    } else {
        CHECK("InfiniBand RTR without a GRH", r == 0, "returned %d errno %d", r, errno);
    }
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
}

/* ibv_close_device with objects open returns 0, as rdma-core's does; what was left can
 * still be destroyed, and the function opens again. A PD of the closed context is
 * returned, for the caller to free last: it outlives another open and close. */
static struct ibv_pd *close_with_objects(struct ibv_device *dev) {
    static char buf[4096];
    struct ibv_context *c = ibv_open_device(dev);
    if (c == NULL) DIE("ibv_open_device");
    struct ibv_pd *pd = ibv_alloc_pd(c), *kept = ibv_alloc_pd(c);
    struct ibv_cq *cq = ibv_create_cq(c, 8, NULL, NULL, 0);
    struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!pd || !kept || !cq || !mr) DIE("objects");
    errno = 0;
    const int r = ibv_close_device(c);
    CHECK("ibv_close_device with objects open returns 0", r == 0, "returned %d errno %d", r, errno);
    const int d = ibv_dereg_mr(mr), q = ibv_destroy_cq(cq), p = ibv_dealloc_pd(pd);
    CHECK("objects of a closed context are destroyed after the close", d == 0 && q == 0 && p == 0, "%d %d %d", d,
          q, p);
    struct ibv_context *again = ibv_open_device(dev);
    struct ibv_pd *pd2 = again ? ibv_alloc_pd(again) : NULL;
    CHECK("the function opens again after", pd2 != NULL, "errno %d", errno);
    if (pd2 != NULL) ibv_dealloc_pd(pd2);
    if (again != NULL) ibv_close_device(again);
    return kept;
}

/* CQ sizes: max_cqe + 1 is EINVAL (mlx5_ib's check); 1M entries and max_cqe itself are
 * made and complete a WR. */
static void cq_sizes(struct ibv_pd *pd, struct ibv_mr *amr) {
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da)) DIE("ibv_query_device");
    errno = 0;
    struct ibv_cq *cq = ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0);
    CHECK("a CQ of max_cqe + 1: EINVAL", cq == NULL && errno == EINVAL, "cq %p errno %d (max_cqe %d)", (void *)cq,
          errno, da.max_cqe);
    if (cq != NULL) ibv_destroy_cq(cq);
    const int sizes[2] = {1 << 20, da.max_cqe};
    const char *names[2] = {"a CQ of 1M entries completes a WR", "a CQ of max_cqe entries completes a WR"};
    for (int k = 0; k < 2; ++k) {
        errno = 0;
        cq = ibv_create_cq(ctx, sizes[k], NULL, NULL, 0);
        int ok = 0;
        if (cq != NULL && cq->cqe >= sizes[k]) {
            struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                          .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
                                                  .max_recv_sge = 1}};
            struct ibv_qp *qp = ibv_create_qp(pd, &ia);
            if (qp != NULL) {
                connect_rc(qp, qp->qp_num);  /* to itself */
                struct ibv_sge s = {.addr = (uintptr_t)a_buf, .length = 8, .lkey = amr->lkey};
                struct ibv_send_wr w = {.wr_id = 3, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                        .wr.rdma = {.remote_addr = (uintptr_t)(a_buf + 64), .rkey = amr->rkey}},
                                   *bad;
                struct ibv_wc wc;
                ok = ibv_post_send(qp, &w, &bad) == 0 && wait_wc(cq, &wc) && wc.status == IBV_WC_SUCCESS &&
                     wc.wr_id == 3;
                ibv_destroy_qp(qp);
            }
        }
        CHECK(names[k], ok, "cq %p cqe %d errno %d (%s)", (void *)cq, cq ? cq->cqe : 0, errno, strerror(errno));
        if (cq != NULL) ibv_destroy_cq(cq);
    }
}

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    struct ibv_mr *amr = pd ? ibv_reg_mr(pd, a_buf, sizeof a_buf, access) : NULL;
    struct ibv_mr *bmr = pd ? ibv_reg_mr(pd, b_buf, sizeof b_buf, access) : NULL;
    if (!amr || !bmr) DIE("setup");

    receive_only_qp(pd, amr, bmr);
    ah_without_grh(pd);
    rtr_without_grh(pd);

    /* The flag alone does not refuse the registration (memory windows are another matter). */
    struct ibv_mr *mw_mr = ibv_reg_mr(pd, b_buf, sizeof b_buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    CHECK("ibv_reg_mr with IBV_ACCESS_MW_BIND", mw_mr != NULL, "errno %d", errno);
    if (mw_mr != NULL) ibv_dereg_mr(mw_mr);

    cq_sizes(pd, amr);

    struct ibv_device_attr_ex dx;
    memset(&dx, 0, sizeof dx);
    const int qx = ibv_query_device_ex(ctx, NULL, &dx);
    CHECK("phys_port_cnt_ex is 1", qx == 0 && dx.phys_port_cnt_ex == 1 && dx.orig_attr.phys_port_cnt == 1,
          "returned %d, phys_port_cnt_ex %u", qx, dx.phys_port_cnt_ex);

    /* cmd_fd: a descriptor a program may dup, poll and close (its copy), as uverbs' is. */
    const int copy = dup(ctx->cmd_fd);
    struct pollfd pf = {.fd = ctx->cmd_fd, .events = POLLIN};
    const int polled = poll(&pf, 1, 0);
    CHECK("dup of cmd_fd", copy >= 0 && copy != ctx->async_fd, "cmd_fd %d dup %d errno %d", ctx->cmd_fd, copy,
          errno);
    CHECK("poll of cmd_fd", polled >= 0 && (pf.revents & POLLNVAL) == 0, "poll %d revents 0x%x", polled,
          pf.revents);
    CHECK("close of the copy", copy >= 0 && close(copy) == 0 && fcntl(ctx->cmd_fd, F_GETFD) >= 0, "errno %d",
          errno);

    struct ibv_pd *kept = close_with_objects(list[0]);

    ibv_dereg_mr(amr);
    ibv_dereg_mr(bmr);
    ibv_dealloc_pd(pd);
    CHECK("ibv_close_device", ibv_close_device(ctx) == 0, "errno %d", errno);
    CHECK("the last object of a closed context, destroyed last, frees it", ibv_dealloc_pd(kept) == 0, "errno %d",
          errno);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
