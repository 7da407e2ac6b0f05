/* ibv_poll_cq after ibv_destroy_qp returns none of the destroyed QP's completions, as
 * rdma-core's mlx5 provider has it (mlx5_destroy_qp takes them out of its CQs), while
 * those of the other QPs on the CQ still come. libfabric's verbs provider relies on it:
 * closing an endpoint, it destroys the QP and then polls the CQ, taking every wr_id for a
 * context of its own (a completion of the destroyed QP, with a wr_id naming nothing,
 * crashed it). Two RC QPs on one CQ, connected to each other on port 1: A receives one
 * message from B and is moved to the error state (its other receives flushed), all
 * before anything is polled; A is destroyed; then the CQ must give B's send completion
 * and nothing of A's. Built against rdma-core's libibverbs; run under cxv exec. Each
 * check prints "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed. */
#include <time.h>
#include <unistd.h>

#include "tests/exec/check.h"

enum { kReceives = 4 };

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (pd == NULL || cq == NULL) DIE("ibv_alloc_pd/ibv_create_cq");
    static char buf[2][64];
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) DIE("ibv_reg_mr");
    struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = kReceives, .max_send_sge = 1,
                                          .max_recv_sge = 1}};
    struct ibv_qp *a = ibv_create_qp(pd, &qa), *b = ibv_create_qp(pd, &qa);
    if (a == NULL || b == NULL) DIE("ibv_create_qp");
    connect_rc(a, b->qp_num);
    connect_rc(b, a->qp_num);
    const uint32_t a_num = a->qp_num, b_num = b->qp_num;

    for (int i = 0; i < kReceives; ++i) {
        struct ibv_sge sge = {.addr = (uintptr_t)buf[0], .length = sizeof buf[0], .lkey = mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = 0xa0 + (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
        if (ibv_post_recv(a, &wr, &bad)) DIE("ibv_post_recv");
    }
    struct ibv_sge sge = {.addr = (uintptr_t)buf[1], .length = 8, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.wr_id = 0xb1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (ibv_post_send(b, &wr, &bad)) DIE("ibv_post_send");
    usleep(200000);  // the message delivered (A's first receive completes)
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    if (ibv_modify_qp(a, &err, IBV_QP_STATE)) DIE("ibv_modify_qp ERR");
    usleep(200000);  // A's other receives flushed
    const int destroyed = ibv_destroy_qp(a);
    CHECK("ibv_destroy_qp of a QP with completions in its CQ", destroyed == 0, "returned %d", destroyed);

    int of_a = 0, of_b = 0, others = 0;
    uint64_t b_wr_id = 0;
    const time_t until = time(NULL) + 5;
    while (of_b == 0 && time(NULL) < until) {
        struct ibv_wc wc[8];
        const int n = ibv_poll_cq(cq, 8, wc);
        if (n < 0) DIE("ibv_poll_cq");
        for (int i = 0; i < n; ++i) {
            if (wc[i].qp_num == a_num) {
                ++of_a;
            } else if (wc[i].qp_num == b_num && wc[i].status == IBV_WC_SUCCESS) {
                ++of_b;
                b_wr_id = wc[i].wr_id;
            } else {
                ++others;
            }
        }
    }
    usleep(100000);
    struct ibv_wc late[8];
    const int more = ibv_poll_cq(cq, 8, late);
    CHECK("the other QP's completion still comes", of_b == 1 && b_wr_id == 0xb1 && others == 0,
          "%d of B (wr_id 0x%llx), %d others", of_b, (unsigned long long)b_wr_id, others);
    CHECK("none of the destroyed QP's", of_a == 0 && more == 0, "%d of A, then %d more", of_a, more);

    ibv_destroy_qp(b);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
