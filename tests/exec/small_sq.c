/* A send queue of one WR whose WQEs take two basic blocks (five SGEs), as perftest's
 * latency tests make it (tx depth 1): every opcode is posted and completed one at a
 * time, over and over, so WQEs land at every place in the small ring, including its
 * last BB, where a WQE that may take two BBs has to wait for NOPs to pad the ring's end.
 * Through cxv exec, in a program built against rdma-core. Each check prints "ok NAME" or
 * "FAIL NAME: ..."; exits 0 when every check passed. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    static uint64_t a_buf[512] __attribute__((aligned(64))), b_buf[512] __attribute__((aligned(64)));
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                       IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_mr *amr = pd ? ibv_reg_mr(pd, a_buf, sizeof a_buf, access) : NULL;
    struct ibv_mr *bmr = pd ? ibv_reg_mr(pd, b_buf, sizeof b_buf, access) : NULL;
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (!amr || !bmr || !cq) DIE("setup");
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                  .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 5, .max_recv_sge = 1}};
    struct ibv_qp *qa = ibv_create_qp(pd, &ia);
    struct ibv_qp *qb = ibv_create_qp(pd, &ia);
    if (!qa || !qb) DIE("ibv_create_qp");
    CHECK("max_send_wr at least 1", ia.cap.max_send_wr >= 1 && ia.cap.max_send_sge >= 5, "wr %u sge %u",
          ia.cap.max_send_wr, ia.cap.max_send_sge);
    connect_rc(qa, qb->qp_num);
    connect_rc(qb, qa->qp_num);

    static const struct { const char *name; enum ibv_wr_opcode op; int sges; } ops[] = {
        {"fetch and add, one WR at a time", IBV_WR_ATOMIC_FETCH_AND_ADD, 1},
        {"compare and swap, one WR at a time", IBV_WR_ATOMIC_CMP_AND_SWP, 1},
        {"RDMA READ of five SGEs, one WR at a time", IBV_WR_RDMA_READ, 5},
        {"RDMA WRITE of five SGEs, one WR at a time", IBV_WR_RDMA_WRITE, 5},
    };
    b_buf[0] = 0;
    for (unsigned k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
        int done = 0, err = 0;
        for (int i = 0; i < 9 && err == 0; ++i) {
            struct ibv_sge s[5];
            for (int j = 0; j < 5; ++j) {
                s[j] = (struct ibv_sge){.addr = (uintptr_t)&a_buf[8 + 8 * j], .length = 8, .lkey = amr->lkey};
            }
            struct ibv_send_wr w = {.wr_id = (uint64_t)i, .sg_list = s, .num_sge = ops[k].sges, .opcode = ops[k].op,
                                    .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
            if (ops[k].op == IBV_WR_ATOMIC_FETCH_AND_ADD || ops[k].op == IBV_WR_ATOMIC_CMP_AND_SWP) {
                w.wr.atomic.remote_addr = (uintptr_t)&b_buf[0];
                w.wr.atomic.rkey = bmr->rkey;
                w.wr.atomic.compare_add = ops[k].op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : b_buf[0];
                w.wr.atomic.swap = b_buf[0] + 1;
            } else {
                w.wr.rdma.remote_addr = (uintptr_t)&b_buf[64];
                w.wr.rdma.rkey = bmr->rkey;
            }
            if ((err = ibv_post_send(qa, &w, &bad)) != 0) break;
            struct ibv_wc wc;
            int ne = 0;
            for (long spins = 0; ne == 0 && spins < 100000000; ++spins) ne = ibv_poll_cq(cq, 1, &wc);
            if (ne != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i) {
                err = -1;
                break;
            }
            ++done;
        }
        CHECK(ops[k].name, done == 9, "%d of 9 done, the next post gave %d", done, err);
    }
    CHECK("the atomics added up", b_buf[0] == 18, "the counter is %llu", (unsigned long long)b_buf[0]);

    ibv_destroy_qp(qa);
    ibv_destroy_qp(qb);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(amr);
    ibv_dereg_mr(bmr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
