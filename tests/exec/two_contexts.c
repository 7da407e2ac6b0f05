/* Two contexts of one function in one process (ibv_open_device twice, as librdmacm does
 * beside its program): an RC QP of each sends to the other, every payload checked; each
 * context's async queue holds its own QP's event and not the other's; closing the
 * first context leaves the second working; a third open after both closed brings the
 * function up again. Through cxv exec, in a program built against rdma-core. Each check
 * prints "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    char buf[4096];
};

static void make_side(struct ibv_device *dev, struct side *s) {
    s->ctx = ibv_open_device(dev);
    if (s->ctx == NULL) DIE("ibv_open_device");
    s->pd = ibv_alloc_pd(s->ctx);
    s->cq = s->pd ? ibv_create_cq(s->ctx, 64, NULL, NULL, 0) : NULL;
    s->mr = s->cq ? ibv_reg_mr(s->pd, s->buf, sizeof s->buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
    struct ibv_qp_init_attr ia = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                  .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
    s->qp = s->mr ? ibv_create_qp(s->pd, &ia) : NULL;
    if (s->qp == NULL) DIE("objects");
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc) {
    int ne = 0;
    for (long spins = 0; ne == 0 && spins < 100000000; ++spins) ne = ibv_poll_cq(cq, 1, wc);
    return ne == 1 && wc->status == IBV_WC_SUCCESS;
}

/* `n` SENDs of 64 bytes from a to b, each checked where it lands. */
static int exchange(struct side *a, struct side *b, int n, char tag) {
    for (int i = 0; i < n; ++i) {
        struct ibv_sge rs = {.addr = (uintptr_t)b->buf, .length = 64, .lkey = b->mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &rs, .num_sge = 1}, *rbad;
        if (ibv_post_recv(b->qp, &rw, &rbad)) return fprintf(stderr, "post_recv %d: %s\n", i, strerror(errno)), 0;
        memset(a->buf, tag + i % 16, 64);
        memset(b->buf, 0, 64);
        struct ibv_sge ss = {.addr = (uintptr_t)a->buf, .length = 64, .lkey = a->mr->lkey};
        struct ibv_send_wr sw = {.wr_id = (uint64_t)i, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND}, *sbad;
        if (ibv_post_send(a->qp, &sw, &sbad)) return fprintf(stderr, "post_send %d failed\n", i), 0;
        struct ibv_wc wc;
        if (!wait_wc(a->cq, &wc)) return fprintf(stderr, "send %d: status %d\n", i, (int)wc.status), 0;
        if (!wait_wc(b->cq, &wc) || wc.byte_len != 64) return fprintf(stderr, "recv %d: status %d\n", i, (int)wc.status), 0;
        for (int k = 0; k < 64; ++k) {
            if (b->buf[k] != (char)(tag + i % 16)) return fprintf(stderr, "payload %d byte %d\n", i, k), 0;
        }
    }
    return 1;
}

/* The next async event of `c` within 10 s (a sanitizer build on a loaded machine took
 * more than 1 s), or -1. */
static int next_event(struct ibv_context *c, struct ibv_async_event *ev) {
    struct pollfd p = {.fd = c->async_fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1) return -1;
    return ibv_get_async_event(c, ev);
}

int main(void) {
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (list == NULL || list[0] == NULL) DIE("ibv_get_device_list");
    static struct side a, b;
    make_side(list[0], &a);
    make_side(list[0], &b);
    CHECK("two contexts of one function", a.ctx != b.ctx, "the same context twice");
    ctx = a.ctx;
    if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid)) DIE("ibv_query_port");
    roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    connect_rc(a.qp, b.qp->qp_num);
    connect_rc(b.qp, a.qp->qp_num);
    CHECK("sends from the first context's QP to the second's", exchange(&a, &b, 20, 'A'), "a payload went wrong");
    CHECK("and back", exchange(&b, &a, 20, 'a'), "a payload went wrong");

    /* Receives left on b, to be flushed when its QP fails and left unpolled in its CQ:
     * the reset below must take them out. */
    for (int i = 0; i < 3; ++i) {
        struct ibv_sge rs = {.addr = (uintptr_t)b.buf, .length = 64, .lkey = b.mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = 1000 + (uint64_t)i, .sg_list = &rs, .num_sge = 1}, *rbad;
        if (ibv_post_recv(b.qp, &rw, &rbad)) DIE("ibv_post_recv");
    }
    /* A WRITE with a bad remote key: the requester (a) completes in error; the
     * responder's QP (b) has the access error, an event for b's context alone. */
    struct ibv_sge ss = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
    struct ibv_send_wr w = {.wr_id = 99, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                            .wr.rdma = {.remote_addr = (uintptr_t)b.buf, .rkey = b.mr->rkey ^ 0x5500}}, *bad;
    struct ibv_wc wc;
    if (ibv_post_send(a.qp, &w, &bad)) DIE("ibv_post_send");
    int ne = 0;
    for (long spins = 0; ne == 0 && spins < 100000000; ++spins) ne = ibv_poll_cq(a.cq, 1, &wc);
    CHECK("a bad rkey fails the WR", ne == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "ne %d status %d", ne,
          ne == 1 ? (int)wc.status : -1);
    struct ibv_async_event ev;
    int on_b = -1;
    for (int tries = 0; tries < 5 && on_b < 0; ++tries) {
        if (next_event(b.ctx, &ev) != 0) break;
        if (ev.event_type == IBV_EVENT_QP_ACCESS_ERR) on_b = ev.element.qp == b.qp;
        ibv_ack_async_event(&ev);
    }
    CHECK("the responder's event on its own context", on_b == 1, "got %d", on_b);
    int fl = fcntl(a.ctx->async_fd, F_GETFL);
    fcntl(a.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    int leaked = 0;
    while (ibv_get_async_event(a.ctx, &ev) == 0) {
        if ((ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_ACCESS_ERR ||
             ev.event_type == IBV_EVENT_QP_REQ_ERR) && ev.element.qp != a.qp) {
            leaked = 1;
        }
        ibv_ack_async_event(&ev);
    }
    CHECK("not on the other context", !leaked, "the first context saw the second's QP event");

    /* The first context goes; the second keeps the function. */
    ibv_destroy_qp(a.qp);
    ibv_dereg_mr(a.mr);
    ibv_destroy_cq(a.cq);
    ibv_dealloc_pd(a.pd);
    CHECK("the first context closes", ibv_close_device(a.ctx) == 0, "errno %d", errno);
    struct side c;
    make_side(list[0], &c);
    ctx = c.ctx;
    struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
    if (ibv_modify_qp(b.qp, &reset, IBV_QP_STATE)) DIE("reset");
    connect_rc(b.qp, c.qp->qp_num);
    connect_rc(c.qp, b.qp->qp_num);
    CHECK("the second context, its QP reset (its flushed receives gone) and connected again, works on with a third", exchange(&b, &c, 10, 'B') && exchange(&c, &b, 10, 'b'),
          "a payload went wrong");
    struct side *sides[] = {&b, &c};
    for (int i = 0; i < 2; ++i) {
        ibv_destroy_qp(sides[i]->qp);
        ibv_dereg_mr(sides[i]->mr);
        ibv_destroy_cq(sides[i]->cq);
        ibv_dealloc_pd(sides[i]->pd);
        if (ibv_close_device(sides[i]->ctx)) DIE("ibv_close_device");
    }
    /* Every context closed: the function was torn down, and opens again. */
    struct side d;
    make_side(list[0], &d);
    CHECK("a new open after the last close", d.ctx != NULL, "no context");
    ibv_destroy_qp(d.qp);
    ibv_dereg_mr(d.mr);
    ibv_destroy_cq(d.cq);
    ibv_dealloc_pd(d.pd);
    ibv_close_device(d.ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
