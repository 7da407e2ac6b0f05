/* rdma-core's mlx5 provider on plain memory, in the shapes of bench/fastpath.cc: the
 * same 1024-entry rings, WRs and refills, no device and no kernel. Compiled by build.sh
 * against a user's rdma-core source tree with the provider's own qp.c, cq.c and srq.c
 * (never kept in this repository), so that `fastpath --rdma-core DIR` measures both
 * providers in one run, with one compiler and one set of flags.
 *
 * The provider's objects are set up by hand as mlx5_create_qp, mlx5_create_cq and
 * mlx5_create_srq leave them for a context with MLX5_SINGLE_THREADED=1 (no spinlock
 * taken, only the misuse check) and CQE version 1 (what a ConnectX-4 or later with a
 * current kernel negotiates: mlx5_poll_cq_v1, resources found by user index). The QP's
 * BlueFlame register is a dedicated one (bf->need_lock 0), plain memory here. Each
 * measured call goes through the ibv_* inline dispatch (context->ops), as a program's
 * does, inside a noinline rc_bench_* function that callgrind --toggle-collect counts.
 *
 *   rc_fastpath --list                               OP PER_CALL, one a line
 *   rc_fastpath --loop OP --iters N                  N measured calls (for callgrind)
 *   rc_fastpath --time OP --repeats R --calls C      median ns per WR or CQE
 *   [--locks]                                        pthread spinlocks, as by default
 *   [--cqe-version 0]                                mlx5_poll_cq, resources by QPN
 *
 * A small C program with its own argument loop: it is built outside Bazel, by build.sh,
 * where cxv's CLI11 is not at hand. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "mlx5.h"
#include "wqe.h"

#ifdef RC_HAVE_IBV_BUF /* rdma-core 64: struct mlx5_buf holds a struct ibv_buf */
#define BUF_ADDR(b) ((b).ibv_buf.addr)
#else
#define BUF_ADDR(b) ((b).buf)
#endif

enum { LOG = 10, ENTRIES = 1 << LOG, QPN = 0x123, UIDX = 1, SRQN = 0x45, CQN = 7 };

static int locks;           /* --locks: need_lock 1 on the QP, CQ and SRQ locks */
static int cqe_version = 1; /* --cqe-version */

struct rings {
    struct mlx5_context *ctx;
    struct mlx5_qp *qp;
    struct mlx5_cq *cq;
    struct mlx5_srq *srq;
    struct mlx5_bf bf;
    void *qp_buf;  /* the RQ (1024 x 16 B), then the SQ (1024 x 64 B), as one buffer */
    void *cq_buf;  /* 1024 CQEs of 64 B */
    void *srq_buf; /* 2048 x 32 B: 1024 WQEs and the wait queue behind them */
    void *bf_reg;  /* the "BlueFlame register": two 256-byte halves of plain memory */
    __be32 qp_db[2], cq_db[2], srq_db[1];
    char buf[4096];
    uint32_t device_pi; /* CQEs written by the stand-in device */
};

struct state {
    struct rings *r;
    struct ibv_sge sge;
    struct ibv_recv_wr rwr[32];
    struct ibv_send_wr swr;
    struct ibv_wc wc[16];
    uint32_t rq_counter; /* the next receive WQE completed, or SRQ WQE recycled */
    uint32_t sq_posted;
};

static void die(const char *what) {
    fprintf(stderr, "rc_fastpath: %s\n", what);
    exit(3);
}

static void *zalloc(size_t align, size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, align, size) != 0) die("out of memory");
    memset(p, 0, size);
    return p;
}

static void *zcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (p == NULL) die("out of memory");
    return p;
}

static void init_context(struct rings *r) {
    /* Only the ops (the ibv_* dispatch), the BlueFlame policy, the resource tables
     * poll_cq searches and dbg_fp are read on these paths. */
    struct mlx5_context *ctx = zalloc(64, sizeof(*ctx));
    r->ctx = ctx;
    ctx->ibv_ctx.context.ops.poll_cq = cqe_version ? mlx5_poll_cq_v1 : mlx5_poll_cq;
    ctx->ibv_ctx.context.ops.post_send = mlx5_post_send;
    ctx->ibv_ctx.context.ops.post_recv = mlx5_post_recv;
    ctx->ibv_ctx.context.ops.post_srq_recv = mlx5_post_srq_recv;
    ctx->cqe_version = cqe_version;
    ctx->shut_up_bf = 0;   /* MLX5_SHUT_UP_BF unset */
    ctx->prefer_bf = 0;    /* MLX5_POST_SEND_PREFER_BF unset */
    ctx->stall_enable = 0; /* MLX5_STALL_CQ_POLL unset */
    ctx->dbg_fp = stderr;
}

static void init_cq(struct rings *r) {
    struct mlx5_cq *cq = zalloc(64, sizeof(*cq));
    r->cq = cq;
    r->cq_buf = zalloc(4096, ENTRIES * 64);
    for (unsigned i = 0; i < ENTRIES; ++i) {
        ((struct mlx5_cqe64 *)((char *)r->cq_buf + i * 64))->op_own = MLX5_CQE_INVALID << 4;
    }
    cq->verbs_cq.cq.context = &r->ctx->ibv_ctx.context;
    cq->verbs_cq.cq.cqe = ENTRIES - 1;
    BUF_ADDR(cq->buf_a) = r->cq_buf;
    cq->active_buf = &cq->buf_a;
    cq->cqe_sz = 64;
    cq->dbrec = r->cq_db;
    cq->cqn = CQN;
    mlx5_spinlock_init(&cq->lock, locks);
}

static void init_bf(struct rings *r) {
    r->bf_reg = zalloc(64, 512);
    r->bf.reg = r->bf_reg;
    r->bf.need_lock = 0; /* a dedicated (low-latency) register */
    r->bf.buf_size = 256;
    r->bf.uuarn = 1; /* not the shared register 0: BlueFlame allowed */
    mlx5_spinlock_init(&r->bf.lock, 0);
}

static void init_queue(struct mlx5_wq *wq, unsigned max_post, unsigned shift, unsigned offset) {
    wq->wrid = zcalloc(ENTRIES, sizeof(uint64_t));
    wq->wqe_cnt = ENTRIES;
    wq->max_post = max_post;
    wq->max_gs = 1;
#ifdef RC_HAVE_QP_STATE_MAX_GS
    wq->qp_state_max_gs = 1;
#endif
    wq->wqe_shift = shift;
    wq->offset = offset;
    mlx5_spinlock_init(&wq->lock, locks);
}

static void init_qp(struct rings *r, unsigned sq_max_post) {
    struct mlx5_qp *qp = zalloc(64, sizeof(*qp));
    r->qp = qp;
    r->qp_buf = zalloc(4096, ENTRIES * 16 + ENTRIES * 64);
    qp->ibv_qp = &qp->verbs_qp.qp;
    qp->ibv_qp->context = &r->ctx->ibv_ctx.context;
    qp->ibv_qp->qp_num = QPN;
    qp->ibv_qp->qp_type = IBV_QPT_RC;
    qp->ibv_qp->state = IBV_QPS_RTS;
    qp->ibv_qp->send_cq = &r->cq->verbs_cq.cq;
    qp->ibv_qp->recv_cq = &r->cq->verbs_cq.cq;
    qp->rsc.type = MLX5_RSC_TYPE_QP;
    qp->rsc.rsn = cqe_version ? UIDX : QPN;
    BUF_ADDR(qp->buf) = r->qp_buf;
    qp->buf_size = ENTRIES * 16 + ENTRIES * 64;
    qp->max_inline_data = 64;
    qp->bf = &r->bf;
    qp->db = r->qp_db;
    qp->atomics_enabled = 1;
    init_queue(&qp->rq, ENTRIES, 4, 0);
    init_queue(&qp->sq, sq_max_post, 6, ENTRIES * 16);
    qp->sq.wqe_head = zcalloc(ENTRIES, sizeof(unsigned));
    qp->sq.wr_data = zcalloc(ENTRIES, sizeof(uint32_t));
    qp->sq_start = (char *)r->qp_buf + qp->sq.offset;
    qp->sq.qend = (char *)qp->sq_start + (ENTRIES << 6);

    /* The tables poll_cq finds the QP in, as mlx5_store_qp and mlx5_store_uidx fill them. */
    static struct mlx5_qp *qp_table[MLX5_QP_TABLE_MASK + 1];
    static struct mlx5_resource *uidx_table[MLX5_UIDX_TABLE_MASK + 1];
    qp_table[QPN & MLX5_QP_TABLE_MASK] = qp;
    r->ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].table = qp_table;
    r->ctx->qp_table[QPN >> MLX5_QP_TABLE_SHIFT].refcnt = 1;
    uidx_table[UIDX & MLX5_UIDX_TABLE_MASK] = &qp->rsc;
    r->ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].table = uidx_table;
    r->ctx->uidx_table[UIDX >> MLX5_UIDX_TABLE_SHIFT].refcnt = 1;
}

/* max_wr 1023 and one SGE: 32-byte WQEs, 1024 of them and as many again for the wait
 * queue, as mlx5_alloc_srq_buf lays them out when the device allows 2 * max_wr + 1. */
static void init_srq(struct rings *r) {
    struct mlx5_srq *srq = zalloc(64, sizeof(*srq));
    r->srq = srq;
    r->srq_buf = zalloc(4096, 2 * ENTRIES * 32);
    srq->vsrq.srq.context = &r->ctx->ibv_ctx.context;
    srq->vsrq.srq_type = IBV_SRQT_BASIC;
    srq->rsc.type = MLX5_RSC_TYPE_SRQ;
    srq->rsc.rsn = SRQN;
    srq->srqn = SRQN;
    BUF_ADDR(srq->buf) = r->srq_buf;
    srq->wrid = zcalloc(2 * ENTRIES, sizeof(uint64_t));
    srq->max = 2 * ENTRIES;
    srq->max_gs = 1;
    srq->wqe_shift = 5;
    srq->head = 0;
    srq->tail = ENTRIES - 1;
#ifdef RC_HAVE_SRQ_BITMAP /* rdma-core 48 and later: freed WQEs marked, relinked by a post */
    srq->nwqes = ENTRIES;
    srq->free_wqe_bitmap = zcalloc(2 * ENTRIES / 64, sizeof(unsigned long));
#endif
    srq->waitq_head = ENTRIES;
    srq->waitq_tail = 2 * ENTRIES - 1;
    srq->db = r->srq_db;
    for (int i = 0; i < 2 * ENTRIES - 1; ++i) {
        if (i == ENTRIES - 1) continue; /* the SRQ's tail; the wait queue follows apart */
        ((struct mlx5_wqe_srq_next_seg *)((char *)r->srq_buf + i * 32))->next_wqe_index = htobe16(i + 1);
    }
    mlx5_spinlock_init(&srq->lock, locks);
}

static struct rings *make_rings(unsigned sq_max_post) {
    struct rings *r = zalloc(4096, sizeof(*r));
    init_context(r);
    init_cq(r);
    init_bf(r);
    init_qp(r, sq_max_post);
    init_srq(r);
    return r;
}

/* What a device would write for the WQE at `counter`. */
static void device_cqe(struct rings *r, uint8_t op, uint16_t counter) {
    struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)((char *)r->cq_buf + (r->device_pi & (ENTRIES - 1)) * 64);
    memset(c, 0, 63);
    c->sop_drop_qpn = htobe32(QPN | (op == MLX5_CQE_REQ ? (uint32_t)MLX5_OPCODE_RDMA_WRITE << 24 : 0));
    c->srqn_uidx = htobe32(cqe_version ? UIDX : 0);
    c->wqe_counter = htobe16(counter);
    c->byte_cnt = htobe32(64);
    udma_to_device_barrier();
    c->op_own = (uint8_t)(op << 4 | ((r->device_pi >> LOG) & 1));
    ++r->device_pi;
}

/* Measured: one call each, never inlined, so that callgrind counts exactly them. */
__attribute__((noinline)) int rc_bench_post_recv(struct state *s) {
    struct ibv_recv_wr *bad;
    return ibv_post_recv(s->r->qp->ibv_qp, s->rwr, &bad);
}
__attribute__((noinline)) int rc_bench_post_srq_recv(struct state *s) {
    struct ibv_recv_wr *bad;
    return ibv_post_srq_recv(&s->r->srq->vsrq.srq, s->rwr, &bad);
}
__attribute__((noinline)) int rc_bench_post_send(struct state *s) {
    struct ibv_send_wr *bad;
    return ibv_post_send(s->r->qp->ibv_qp, &s->swr, &bad);
}
__attribute__((noinline)) int rc_bench_poll_cq(struct state *s) {
    return ibv_poll_cq(&s->r->cq->verbs_cq.cq, 16, s->wc);
}
/* A raw packet QP's receive as an application runs it: a poll of 16 packets, then the 16
 * receive WQEs posted again (cxv's eth_recv_queue::poll does both in one call). */
__attribute__((noinline)) int rc_bench_poll_repost(struct state *s) {
    const int n = ibv_poll_cq(&s->r->cq->verbs_cq.cq, 16, s->wc);
    struct ibv_recv_wr *bad;
    if (ibv_post_recv(s->r->qp->ibv_qp, s->rwr, &bad) != 0) return -1;
    return n;
}

static void expect(int got, int want) {
    if (got != want) {
        fprintf(stderr, "rc_fastpath: a measured call returned %d, not %d\n", got, want);
        exit(4);
    }
}

static void prepare_recv(struct state *s, unsigned n) {
    s->r = make_rings(ENTRIES);
    s->sge.addr = (uintptr_t)s->r->buf;
    s->sge.length = 64;
    s->sge.lkey = 0x1234;
    for (unsigned i = 0; i < 32; ++i) {
        s->rwr[i].wr_id = i;
        s->rwr[i].sg_list = &s->sge;
        s->rwr[i].num_sge = 1;
        s->rwr[i].next = i + 1 < n ? &s->rwr[i + 1] : NULL;
    }
}

/* Receives: the ring is emptied when full, as completions would (rq.tail catches up). */
static void setup_recv_1(struct state *s) { prepare_recv(s, 1); }
static void setup_recv_32(struct state *s) { prepare_recv(s, 32); }
static void refill_recv(struct state *s) { s->r->qp->rq.tail = s->r->qp->rq.head; }
static void call_recv(struct state *s) { expect(rc_bench_post_recv(s), 0); }

/* The SRQ's steady state: full; before each post the oldest WQE is freed, as poll_cq
 * frees it with mlx5_free_srq_wqe. */
static void setup_srq(struct state *s) {
    prepare_recv(s, 1);
    struct ibv_recv_wr *bad;
    for (unsigned i = 0; i + 1 < ENTRIES; ++i) {
        if (ibv_post_srq_recv(&s->r->srq->vsrq.srq, s->rwr, &bad) != 0) die("filling the SRQ failed");
    }
    s->rq_counter = 0;
}
static void refill_srq(struct state *s) { mlx5_free_srq_wqe(s->r->srq, (int)(s->rq_counter++ % ENTRIES)); }
static void call_srq(struct state *s) { expect(rc_bench_post_srq_recv(s), 0); }

static void setup_send(struct state *s, int inl) {
    /* sq.max_post as mlx5_calc_sq_size gives it: 128-byte WQEs for 64 bytes inline. */
    s->r = make_rings(inl ? ENTRIES / 2 : ENTRIES);
    s->sge.addr = (uintptr_t)s->r->buf;
    s->sge.length = inl ? 64 : 4096;
    s->sge.lkey = 0x1234;
    memset(&s->swr, 0, sizeof(s->swr));
    s->swr.sg_list = &s->sge;
    s->swr.num_sge = 1;
    s->swr.opcode = inl ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
    s->swr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
    s->swr.wr.rdma.remote_addr = 0x7f0000001000;
    s->swr.wr.rdma.rkey = 0x5678;
}
static void setup_send_inline(struct state *s) { setup_send(s, 1); }
static void setup_send_write(struct state *s) { setup_send(s, 0); }
/* Sends: completed in bulk when the ring is full (sq.tail catches up). */
static void refill_send(struct state *s) { s->r->qp->sq.tail = s->r->qp->sq.head; }
static void call_send(struct state *s) { expect(rc_bench_post_send(s), 0); }

/* Polls: 16 valid CQEs per call, written (and their WQEs posted) beforehand. */
static void refill_poll_recv(struct state *s) {
    struct ibv_recv_wr *bad;
    if (ibv_post_recv(s->r->qp->ibv_qp, s->rwr, &bad) != 0) die("posting receives to complete failed");
    for (int i = 0; i < 16; ++i) device_cqe(s->r, MLX5_CQE_RESP_SEND, (uint16_t)s->rq_counter++);
}
static void setup_poll_recv(struct state *s) { prepare_recv(s, 16); }
static void refill_poll_send(struct state *s) {
    struct ibv_send_wr *bad;
    for (int i = 0; i < 16; ++i) {
        if (ibv_post_send(s->r->qp->ibv_qp, &s->swr, &bad) != 0) die("posting sends to complete failed");
        device_cqe(s->r, MLX5_CQE_REQ, (uint16_t)s->sq_posted++);
    }
}
static void call_poll(struct state *s) {
    expect(rc_bench_poll_cq(s), 16);
    for (int i = 0; i < 16; ++i) {
        if (s->wc[i].status != IBV_WC_SUCCESS || s->wc[i].qp_num != QPN) die("a completion is not what was written");
    }
}

/* A raw packet QP (IBV_QPT_RAW_PACKET) as mlx5_create_qp leaves it on a ConnectX whose
 * minimum inline mode is L2 (eth_min_inline_size 18, MLX5_ETH_L2_INLINE_HEADER_SIZE) and
 * which offloads checksums (MLX5_CSUM_SUPPORT_RAW_OVER_ETH, MLX5_RX_CSUM_VALID). */
static void make_raw(struct rings *r) {
    r->ctx->eth_min_inline_size = 18;
    r->qp->ibv_qp->qp_type = IBV_QPT_RAW_PACKET;
    r->qp->qp_cap_cache |= MLX5_CSUM_SUPPORT_RAW_OVER_ETH | MLX5_RX_CSUM_VALID;
}
/* A 64-byte frame, unsignaled, with IBV_SEND_IP_CSUM: by pointer, or inline. */
static void setup_eth_send(struct state *s, int inl) {
    s->r = make_rings(inl ? ENTRIES / 2 : ENTRIES);
    make_raw(s->r);
    s->sge.addr = (uintptr_t)s->r->buf;
    s->sge.length = 64;
    s->sge.lkey = 0x1234;
    memset(&s->swr, 0, sizeof(s->swr));
    s->swr.sg_list = &s->sge;
    s->swr.num_sge = 1;
    s->swr.opcode = IBV_WR_SEND;
    s->swr.send_flags = IBV_SEND_IP_CSUM | (inl ? IBV_SEND_INLINE : 0);
}
static void setup_eth_frame(struct state *s) { setup_eth_send(s, 0); }
static void setup_eth_inline(struct state *s) { setup_eth_send(s, 1); }
/* Raw receive: the ring full of receive WQEs; before each call 16 packet CQEs. */
static void setup_eth_recv(struct state *s) {
    prepare_recv(s, 16);
    make_raw(s->r);
    struct ibv_recv_wr *bad;
    for (unsigned i = 0; i < ENTRIES / 16; ++i) {
        if (ibv_post_recv(s->r->qp->ibv_qp, s->rwr, &bad) != 0) die("filling the RQ failed");
    }
}
static void refill_eth_recv(struct state *s) {
    for (int i = 0; i < 16; ++i) device_cqe(s->r, MLX5_CQE_RESP_SEND, (uint16_t)s->rq_counter++);
}
static void call_poll_repost(struct state *s) { expect(rc_bench_poll_repost(s), 16); }

struct op {
    const char *name; /* bench/fastpath.cc's names */
    unsigned per_call; /* WRs or CQEs per measured call */
    void (*setup)(struct state *);
    void (*refill)(struct state *); /* outside the measured region, before each batch */
    void (*call)(struct state *);
    unsigned calls_per_refill;
};

static const struct op ops[] = {
    {"post_recv_1", 1, setup_recv_1, refill_recv, call_recv, ENTRIES},
    {"post_recv_32", 32, setup_recv_32, refill_recv, call_recv, ENTRIES / 32},
    {"post_srq_recv_1", 1, setup_srq, refill_srq, call_srq, 1},
    {"post_send_inline64_bf", 1, setup_send_inline, refill_send, call_send, ENTRIES / 2},
    {"post_send_write4k_db", 1, setup_send_write, refill_send, call_send, ENTRIES},
    {"poll_cq_recv_16", 16, setup_poll_recv, refill_poll_recv, call_poll, 1},
    {"poll_cq_send_16", 16, setup_send_write, refill_poll_send, call_poll, 1},
    {"eth_send_frame64_bf", 1, setup_eth_frame, refill_send, call_send, ENTRIES},
    {"eth_send_inline64_bf", 1, setup_eth_inline, refill_send, call_send, ENTRIES / 2},
    {"eth_poll_recv_16", 16, setup_eth_recv, refill_eth_recv, call_poll_repost, 1},
};
enum { OPS = sizeof(ops) / sizeof(ops[0]) };

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* `calls` measured calls, refilled as the operation says; the ns spent inside them. A
 * call refilled before every call is timed alone, as fastpath.cc times it. */
static double run(const struct op *o, struct state *s, unsigned calls) {
    double inside = 0;
    unsigned done = 0;
    while (done < calls) {
        o->refill(s);
        const unsigned batch = o->calls_per_refill < calls - done ? o->calls_per_refill : calls - done;
        const double t0 = now_ns();
        for (unsigned i = 0; i < batch; ++i) o->call(s);
        inside += now_ns() - t0;
        done += batch;
    }
    return inside;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over `repeats` fresh setups of ns per WR or CQE, after a warm-up of a tenth
 * of the calls: fastpath.cc's ns_per_op. */
static double ns_per_op(const struct op *o, unsigned repeats, unsigned calls) {
    double *samples = zcalloc(repeats, sizeof(double));
    for (unsigned i = 0; i < repeats; ++i) {
        struct state s;
        memset(&s, 0, sizeof s);
        o->setup(&s);
        (void)run(o, &s, calls / 10);
        samples[i] = run(o, &s, calls) / ((double)calls * o->per_call);
    }
    qsort(samples, repeats, sizeof(double), by_value);
    const double median = samples[repeats / 2];
    free(samples);
    return median;
}

static const struct op *find(const char *name) {
    for (int i = 0; i < OPS; ++i) {
        if (strcmp(ops[i].name, name) == 0) return &ops[i];
    }
    fprintf(stderr, "rc_fastpath: no operation %s\n", name);
    exit(2);
}

static unsigned number(const char *s) {
    char *end;
    const unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0 || v > 100000000ul) {
        fprintf(stderr, "rc_fastpath: not a count: %s\n", s);
        exit(2);
    }
    return (unsigned)v;
}

static int usage(void) {
    fprintf(stderr, "usage: rc_fastpath --list | --loop OP --iters N | --time OP --repeats R --calls C "
                    "[--locks] [--cqe-version 0|1]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *loop = NULL, *timed = NULL;
    unsigned iters = 0, repeats = 0, calls = 0;
    int list = 0;
    for (int i = 1; i < argc; ++i) {
        const int has_value = i + 1 < argc;
        if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "--locks") == 0) {
            locks = 1;
        } else if (strcmp(argv[i], "--loop") == 0 && has_value) {
            loop = argv[++i];
        } else if (strcmp(argv[i], "--time") == 0 && has_value) {
            timed = argv[++i];
        } else if (strcmp(argv[i], "--iters") == 0 && has_value) {
            iters = number(argv[++i]);
        } else if (strcmp(argv[i], "--repeats") == 0 && has_value) {
            repeats = number(argv[++i]);
        } else if (strcmp(argv[i], "--calls") == 0 && has_value) {
            calls = number(argv[++i]);
        } else if (strcmp(argv[i], "--cqe-version") == 0 && has_value) {
            ++i;
            if (strcmp(argv[i], "0") != 0 && strcmp(argv[i], "1") != 0) return usage();
            cqe_version = argv[i][0] - '0';
        } else {
            return usage();
        }
    }
    if (list) {
        for (int i = 0; i < OPS; ++i) printf("%s %u\n", ops[i].name, ops[i].per_call);
        return 0;
    }
    if (loop != NULL && iters != 0) {
        const struct op *o = find(loop);
        struct state s;
        memset(&s, 0, sizeof s);
        o->setup(&s);
        (void)run(o, &s, iters);
        return 0;
    }
    if (timed != NULL && repeats != 0 && calls != 0) {
        printf("%.4f\n", ns_per_op(find(timed), repeats, calls));
        return 0;
    }
    return usage();
}
