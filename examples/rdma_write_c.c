/* The C API in a C program: two RC QPs (on two functions, or one function twice),
 * connected as a verbs program connects them, then rdma_post_recvv / rdma_post_writev-
 * style calls and libibverbs' own ibv_post_send / ibv_poll_cq on cxv's handles. On the
 * model:
 *
 *   cxv-sim run --devices 2 -- bazel-bin/examples/rdma_write_c 0000:c5:00.0 0000:c5:00.1
 *
 * and on cards bound to vfio-pci, with their PCI addresses. Exit status 0 only when
 * every transfer arrived intact. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/cxv_verbs.h"

#define BUF_SIZE 65536

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    struct ibv_port_attr port;
    char *buf;
};

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, cxv_last_error());
    exit(1);
}

static void open_side(struct side *s, const char *bdf) {
    struct ibv_qp_init_attr qa;
    s->ctx = cxv_open_device(bdf);
    if (!s->ctx) die("cxv_open_device");
    if (cxv_query_port(s->ctx, 1, &s->port)) die("cxv_query_port");
    s->pd = cxv_alloc_pd(s->ctx);
    if (!s->pd) die("cxv_alloc_pd");
    s->buf = calloc(1, BUF_SIZE);
    if (!s->buf) exit(1);
    s->mr = cxv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!s->mr) die("cxv_reg_mr");
    s->cq = cxv_create_cq(s->ctx, 64, NULL);
    if (!s->cq) die("cxv_create_cq");
    memset(&qa, 0, sizeof(qa));
    qa.send_cq = qa.recv_cq = s->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
    s->qp = cxv_create_qp(s->pd, &qa);
    if (!s->qp) die("cxv_create_qp");
}

/* RESET -> INIT -> RTR -> RTS towards `peer`, with ibv_modify_qp(3)'s masks. */
static void connect_to(struct side *s, const struct side *peer) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (cxv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer->qp->qp_num;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = peer->port.lid;
    a.ah_attr.port_num = 1;
    if (cxv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (cxv_modify_qp(s->qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC))
        die("RTS");
}

/* One completion, polled with libibverbs' inline ibv_poll_cq (5 s at most). */
static struct ibv_wc wait_one(struct ibv_cq *cq) {
    struct ibv_wc wc;
    time_t end = time(NULL) + 5;
    while (ibv_poll_cq(cq, 1, &wc) == 0) {
        if (time(NULL) > end) {
            fprintf(stderr, "no completion\n");
            exit(1);
        }
    }
    if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "completion error %d (vendor syndrome 0x%x)\n", wc.status, wc.vendor_err);
        exit(1);
    }
    return wc;
}

int main(int argc, char **argv) {
    struct side a, b;
    struct ibv_sge gather[2], scatter[2];
    struct ibv_send_wr wr, *bad;
    struct ibv_wc wc;
    const char *bdf_a = argc > 1 ? argv[1] : "0000:c5:00.0";
    const char *bdf_b = argc > 2 ? argv[2] : "0000:c5:00.1";

    open_side(&a, bdf_a);
    open_side(&b, bdf_b);
    connect_to(&a, &b);
    connect_to(&b, &a);
    printf("QP 0x%x on %s <-> QP 0x%x on %s\n", a.qp->qp_num, bdf_a, b.qp->qp_num, bdf_b);

    /* RDMA WRITE of two pieces to one remote address (rdma_post_writev(3)). */
    strcpy(a.buf, "written by ");
    strcpy(a.buf + 1024, "rdma_post_writev");
    gather[0] = (struct ibv_sge){(uintptr_t)a.buf, 11, a.mr->lkey};
    gather[1] = (struct ibv_sge){(uintptr_t)(a.buf + 1024), 17, a.mr->lkey};
    if (cxv_rdma_post_writev(a.qp, a.buf, gather, 2, IBV_SEND_SIGNALED, (uintptr_t)(b.buf + 4096), b.mr->rkey))
        die("cxv_rdma_post_writev");
    wc = wait_one(a.cq);
    printf("RDMA WRITE: %u bytes at b+4096: \"%s\"\n", 28u, b.buf + 4096);
    if (strcmp(b.buf + 4096, "written by rdma_post_writev") != 0 || wc.wr_id != (uintptr_t)a.buf) return 1;

    /* SEND with immediate into a two-piece receive (rdma_post_recvv(3), ibv_post_send). */
    scatter[0] = (struct ibv_sge){(uintptr_t)(b.buf + 8192), 6, b.mr->lkey};
    scatter[1] = (struct ibv_sge){(uintptr_t)(b.buf + 12288), 64, b.mr->lkey};
    if (cxv_rdma_post_recvv(b.qp, b.buf, scatter, 2)) die("cxv_rdma_post_recvv");
    strcpy(a.buf + 2048, "hello from C");
    gather[0] = (struct ibv_sge){(uintptr_t)(a.buf + 2048), 13, a.mr->lkey};
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = 7;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32(0x1234);
    wr.sg_list = gather;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send");
    wait_one(a.cq);
    wc = wait_one(b.cq);
    printf("RECV: %u bytes, immediate 0x%x: \"%.6s\" + \"%s\"\n", wc.byte_len, be32toh(wc.imm_data), b.buf + 8192,
           b.buf + 12288);
    if (wc.byte_len != 13 || memcmp(b.buf + 8192, "hello ", 6) != 0 || strcmp(b.buf + 12288, "from C") != 0 ||
        be32toh(wc.imm_data) != 0x1234)
        return 1;

    if (cxv_destroy_qp(a.qp) || cxv_destroy_qp(b.qp) || cxv_destroy_cq(a.cq) || cxv_destroy_cq(b.cq) ||
        cxv_dereg_mr(a.mr) || cxv_dereg_mr(b.mr) || cxv_dealloc_pd(a.pd) || cxv_dealloc_pd(b.pd) ||
        cxv_close_device(a.ctx) || cxv_close_device(b.ctx))
        die("teardown");
    free(a.buf);
    free(b.buf);
    printf("ok\n");
    return 0;
}
