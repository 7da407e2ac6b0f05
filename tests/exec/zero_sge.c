/* Scatter/gather entries of length 0, which rdma-core's mlx5 provider leaves out of the
 * WQE (a data segment's byte_count of 0 means 2 GiB to the device): a SEND of one empty
 * SGE (the one-pass path) and an RDMA WRITE of one, a SEND whose first SGE is empty, a
 * receive whose first SGE is empty (the data lands in the second), a receive of one empty
 * SGE taking a zero-byte SEND, and a list of receives mixing both. Between two RC QPs of
 * one function, through cxv exec, in a program built against rdma-core. Each check
 * prints "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

static char a_buf[8192] __attribute__((aligned(64))), b_buf[8192] __attribute__((aligned(64)));
static struct ibv_mr *amr, *bmr;
static struct ibv_qp *qa, *qb;
static struct ibv_cq *cq;

/* The next completion: its status, byte_len and wr_id; -1 when none came. */
static int next_wc(struct ibv_wc *wc) {
    int ne = 0;
    for (long spins = 0; ne == 0 && spins < 100000000; ++spins) ne = ibv_poll_cq(cq, 1, wc);
    return ne == 1 ? (int)wc->status : -1;
}

static struct ibv_sge a_sge(size_t off, uint32_t len) {
    return (struct ibv_sge){.addr = (uintptr_t)(a_buf + off), .length = len, .lkey = amr->lkey};
}
static struct ibv_sge b_sge(size_t off, uint32_t len) {
    return (struct ibv_sge){.addr = (uintptr_t)(b_buf + off), .length = len, .lkey = bmr->lkey};
}

/* Posts `w` on qa (and, when `r`, `r` on qb first); takes the two completions (or one
 * without `r`). 1 when both succeeded; the receive's completion in *rwc. */
static int run(struct ibv_send_wr *w, struct ibv_recv_wr *r, struct ibv_wc *rwc) {
    struct ibv_send_wr *sbad = NULL;
    struct ibv_recv_wr *rbad = NULL;
    if (r != NULL && ibv_post_recv(qb, r, &rbad) != 0) return printf("  post_recv refused\n"), 0;
    if (ibv_post_send(qa, w, &sbad) != 0) return printf("  post_send refused\n"), 0;
    int good = 1;
    for (int i = 0; i < (r != NULL ? 2 : 1); ++i) {
        struct ibv_wc wc;
        const int st = next_wc(&wc);
        if (st != IBV_WC_SUCCESS) {
            printf("  completion %d: status %d (%s)\n", i, st, st < 0 ? "none" : ibv_wc_status_str(wc.status));
            good = 0;
        }
        if (wc.opcode & IBV_WC_RECV) *rwc = wc;
    }
    return good;
}

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    amr = pd ? ibv_reg_mr(pd, a_buf, sizeof a_buf, access) : NULL;
    bmr = pd ? ibv_reg_mr(pd, b_buf, sizeof b_buf, access) : NULL;
    cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    if (!amr || !bmr || !cq) DIE("setup");
    /* Two pairs: receive WQEs of one data segment (the receive path's one-pass loop)
     * and of two. */
    struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                  .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2, .max_recv_sge = 1}};
    struct ibv_qp *one_a = ibv_create_qp(pd, &ia), *one_b = ibv_create_qp(pd, &ia);
    ia.cap.max_recv_sge = 2;
    struct ibv_qp *two_a = ibv_create_qp(pd, &ia), *two_b = ibv_create_qp(pd, &ia);
    if (!one_a || !one_b || !two_a || !two_b) DIE("ibv_create_qp");
    connect_rc(one_a, one_b->qp_num);
    connect_rc(one_b, one_a->qp_num);
    connect_rc(two_a, two_b->qp_num);
    connect_rc(two_b, two_a->qp_num);
    struct ibv_wc rwc;
    qa = one_a;
    qb = one_b;

    /* A SEND of one empty SGE, into a receive of 64 bytes: a zero-byte message. */
    struct ibv_sge s1 = a_sge(0, 0), r1 = b_sge(0, 64);
    struct ibv_send_wr w1 = {.wr_id = 1, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND};
    struct ibv_recv_wr rw1 = {.wr_id = 101, .sg_list = &r1, .num_sge = 1};
    memset(&rwc, 0xff, sizeof rwc);
    CHECK("SEND of one empty SGE", run(&w1, &rw1, &rwc) && rwc.byte_len == 0 && rwc.wr_id == 101, "byte_len %u",
          rwc.byte_len);

    /* An RDMA WRITE of one empty SGE. */
    struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                             .wr.rdma = {.remote_addr = (uintptr_t)b_buf, .rkey = bmr->rkey}};
    CHECK("RDMA WRITE of one empty SGE", run(&w2, NULL, &rwc), "-");

    /* A SEND whose first SGE is empty, into a receive whose first SGE is empty: the
     * 48 bytes come from the second and land in the second. */
    qa = two_a;
    qb = two_b;
    memset(a_buf, 0, sizeof a_buf);
    memset(a_buf + 1024, 0x6b, 48);
    memset(b_buf, 0x11, sizeof b_buf);
    struct ibv_sge s3[2] = {a_sge(0, 0), a_sge(1024, 48)}, r3[2] = {b_sge(0, 0), b_sge(2048, 64)};
    struct ibv_send_wr w3 = {.wr_id = 3, .sg_list = s3, .num_sge = 2, .opcode = IBV_WR_SEND};
    struct ibv_recv_wr rw3 = {.wr_id = 103, .sg_list = r3, .num_sge = 2};
    const int ok3 = run(&w3, &rw3, &rwc);
    CHECK("empty first SGEs on both sides", ok3 && rwc.byte_len == 48 && b_buf[2048] == 0x6b &&
          b_buf[2048 + 47] == 0x6b && b_buf[2048 + 48] == 0x11 && b_buf[0] == 0x11,
          "byte_len %u, landed 0x%x at the second SGE, 0x%x at the first", rwc.byte_len,
          (unsigned char)b_buf[2048], (unsigned char)b_buf[0]);

    /* A receive of one empty SGE takes a zero-byte SEND (no SGE at all), on either pair. */
    struct ibv_sge e4 = b_sge(0, 0);
    struct ibv_recv_wr rw4 = {.wr_id = 104, .sg_list = &e4, .num_sge = 1};
    struct ibv_send_wr w4 = {.wr_id = 4, .sg_list = NULL, .num_sge = 0, .opcode = IBV_WR_SEND};
    CHECK("receive of one empty SGE, two-segment WQEs", run(&w4, &rw4, &rwc) && rwc.byte_len == 0 &&
          rwc.wr_id == 104, "byte_len %u", rwc.byte_len);
    qa = one_a;
    qb = one_b;
    CHECK("receive of one empty SGE, one-segment WQEs", run(&w4, &rw4, &rwc) && rwc.byte_len == 0 &&
          rwc.wr_id == 104, "byte_len %u", rwc.byte_len);

    /* A list (one-segment WQEs): an empty one-SGE receive, then a 64-byte one; two SENDs
     * (0 and 16 bytes). */
    memset(a_buf + 512, 0x3c, 16);
    memset(b_buf, 0, sizeof b_buf);
    struct ibv_sge r5 = b_sge(4096, 64);
    struct ibv_recv_wr rw5b = {.wr_id = 106, .sg_list = &r5, .num_sge = 1};
    struct ibv_recv_wr rw5a = {.wr_id = 105, .next = &rw5b, .sg_list = &e4, .num_sge = 1};
    struct ibv_sge s5 = a_sge(512, 16);
    struct ibv_send_wr w5b = {.wr_id = 6, .sg_list = &s5, .num_sge = 1, .opcode = IBV_WR_SEND};
    struct ibv_send_wr w5a = {.wr_id = 5, .next = &w5b, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND};
    struct ibv_recv_wr *rbad;
    struct ibv_send_wr *sbad;
    int good = ibv_post_recv(qb, &rw5a, &rbad) == 0 && ibv_post_send(qa, &w5a, &sbad) == 0;
    unsigned lens[2] = {99, 99};
    for (int i = 0; i < 4 && good; ++i) {
        struct ibv_wc wc;
        if (next_wc(&wc) != IBV_WC_SUCCESS) good = 0;
        if (wc.opcode & IBV_WC_RECV && wc.wr_id >= 105 && wc.wr_id <= 106) lens[wc.wr_id - 105] = wc.byte_len;
    }
    CHECK("a list of receives and sends with empty SGEs", good && lens[0] == 0 && lens[1] == 16 &&
          b_buf[4096] == 0x3c, "lens %u %u", lens[0], lens[1]);

    ibv_destroy_qp(one_a);
    ibv_destroy_qp(one_b);
    ibv_destroy_qp(two_a);
    ibv_destroy_qp(two_b);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(amr);
    ibv_dereg_mr(bmr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
