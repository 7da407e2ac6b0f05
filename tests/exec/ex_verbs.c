/* The extended CQ (ibv_create_cq_ex(3)) and the extended send interface (ibv_wr_post(3))
 * through cxv exec, in a program built against rdma-core: two RC QPs and two UD QPs of one
 * function, made with ibv_create_qp_ex(IBV_QP_INIT_ATTR_SEND_OPS_FLAGS), completing to one
 * ibv_cq_ex polled with ibv_start_poll / ibv_next_poll / ibv_end_poll. Each check prints
 * "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tests/exec/check.h"

/* One completion as the extended CQ reads it. */
struct done {
    uint64_t wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t byte_len, qp_num, src_qp, imm;
    unsigned wc_flags;
};

/* Polls `want` completions (bounded) into out[]; the number taken. */
/* A poll loop's bound: 10 s from `t0`, looked at every 1024 spins. A fixed count of
 * spins was not enough on a loaded machine, where the model's thread waits for a CPU
 * while this one spins. */
static int polling(long spins, const struct timespec *t0) {
    if (spins & 1023) return 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) + (now.tv_nsec - t0->tv_nsec) / 1e9 < 10.0;
}

static int poll_ex(struct ibv_cq_ex *cq, struct done *out, int want) {
    int got = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spins = 0; got < want && polling(spins, &t0); ++spins) {
        struct ibv_poll_cq_attr pa = {.comp_mask = 0};
        int r = ibv_start_poll(cq, &pa);
        if (r == ENOENT) continue;
        if (r != 0) DIE("ibv_start_poll");
        do {
            struct done *d = &out[got++];
            d->wr_id = cq->wr_id;
            d->status = cq->status;
            d->opcode = ibv_wc_read_opcode(cq);
            d->byte_len = ibv_wc_read_byte_len(cq);
            d->qp_num = ibv_wc_read_qp_num(cq);
            d->src_qp = ibv_wc_read_src_qp(cq);
            d->wc_flags = ibv_wc_read_wc_flags(cq);
            d->imm = (d->wc_flags & IBV_WC_WITH_IMM) ? be32toh(ibv_wc_read_imm_data(cq)) : 0;
            (void)ibv_wc_read_slid(cq);
            (void)ibv_wc_read_sl(cq);
            (void)ibv_wc_read_dlid_path_bits(cq);
        } while (got < want && (r = ibv_next_poll(cq)) == 0);
        ibv_end_poll(cq);
        if (r != 0 && r != ENOENT) DIE("ibv_next_poll");
    }
    return got;
}

/* For a check that nothing completes: polls for one completion for 0.5 s at most (a
 * completion comes within milliseconds on the model). A stray that came later still
 * fails the test: the checks after it take exact counts of completions from the same CQ
 * (a stray of the wr_* batches would come before the next send's, its send queue
 * completing in order). */
static int poll_none(struct ibv_cq_ex *cq, struct done *out) {
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        struct ibv_poll_cq_attr pa = {.comp_mask = 0};
        const int r = ibv_start_poll(cq, &pa);
        if (r == 0) {
            out->wr_id = cq->wr_id;
            ibv_end_poll(cq);
            return 1;
        }
        if (r != ENOENT) DIE("ibv_start_poll");
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 < 0.5);
    return 0;
}

static const struct done *find(const struct done *d, int n, uint64_t wr_id) {
    for (int i = 0; i < n; ++i) {
        if (d[i].wr_id == wr_id) return &d[i];
    }
    return NULL;
}

/* `want` completions, all successful; the one of `wr_id` (or NULL). */
static const struct done *expect(struct ibv_cq_ex *cq, int want, uint64_t wr_id, struct done *d) {
    const int n = poll_ex(cq, d, want);
    for (int i = 0; i < n; ++i) {
        if (d[i].status != IBV_WC_SUCCESS) {
            printf("completion %llu: %s\n", (unsigned long long)d[i].wr_id, ibv_wc_status_str(d[i].status));
        }
    }
    return n == want ? find(d, n, wr_id) : NULL;
}

static void ready_ud(struct ibv_qp *qp) {
    to_init(qp, 1);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) DIE("UD RTR");
    a.qp_state = IBV_QPS_RTS;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) DIE("UD RTS");
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type, uint64_t ops) {
    struct ibv_qp_init_attr_ex a = {
        .send_cq = cq, .recv_cq = cq, .qp_type = type,
        .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 1, .max_inline_data = 32},
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd, .send_ops_flags = ops};
    return ibv_create_qp_ex(ctx, &a);
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey) {
    struct ibv_sge s = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
    if (ibv_post_recv(qp, &wr, &bad)) DIE("ibv_post_recv");
}

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    static char a_buf[4096] __attribute__((aligned(64))), b_buf[4096] __attribute__((aligned(64)));
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                       IBV_ACCESS_REMOTE_ATOMIC;
    struct ibv_mr *amr = pd ? ibv_reg_mr(pd, a_buf, sizeof a_buf, access) : NULL;
    struct ibv_mr *bmr = pd ? ibv_reg_mr(pd, b_buf, sizeof b_buf, access) : NULL;
    if (!amr || !bmr) DIE("setup");

    /* --- ibv_create_cq_ex ------------------------------------------------------------ */
    /* Completion timestamps: the CQ reads the CQE's (ibv_wc_read_completion_ts), in
     * wall-clock time too (tests/api:raw_qp_test checks the values). */
    struct ibv_cq_init_attr_ex ts = {
        .cqe = 16, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK};
    errno = 0;
    struct ibv_cq_ex *tcq = ibv_create_cq_ex(ctx, &ts);
    CHECK("cq_ex timestamps",
          tcq != NULL && tcq->read_completion_ts != NULL && tcq->read_completion_wallclock_ns != NULL &&
              ibv_destroy_cq(ibv_cq_ex_to_cq(tcq)) == 0,
          "%p errno %d", (void *)tcq, errno);

    /* The device clock: its frequency (kHz) in ibv_query_device_ex, and its raw ticks
     * from ibv_query_rt_values_ex, advancing at about that rate (within a factor of two:
     * the model updates its timer as its thread sweeps, later on a loaded machine). */
    struct ibv_device_attr_ex dx;
    const int qdx = ibv_query_device_ex(ctx, NULL, &dx);
    CHECK("hca_core_clock", qdx == 0 && dx.hca_core_clock == 156250 && dx.completion_timestamp_mask == 0x7fffffffffffffffULL,
          "%d %llu %llu", qdx, (unsigned long long)dx.hca_core_clock, (unsigned long long)dx.completion_timestamp_mask);
    /* Raw packet QPs on an Ethernet port: IP checksums and C-VLAN stripping. */
    CHECK("raw_packet_caps",
          dx.raw_packet_caps == (roce ? (IBV_RAW_PACKET_CAP_IP_CSUM | IBV_RAW_PACKET_CAP_CVLAN_STRIPPING) : 0u),
          "%#x", dx.raw_packet_caps);
    struct ibv_values_ex v1 = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK}, v2 = v1;
    struct timespec m1, m2;
    clock_gettime(CLOCK_MONOTONIC, &m1);
    const int q1 = ibv_query_rt_values_ex(ctx, &v1);
    usleep(100000);
    const int q2 = ibv_query_rt_values_ex(ctx, &v2);
    clock_gettime(CLOCK_MONOTONIC, &m2);
    const double khz = (double)(v2.raw_clock.tv_nsec - v1.raw_clock.tv_nsec) /
                       ((m2.tv_sec - m1.tv_sec) * 1e3 + (m2.tv_nsec - m1.tv_nsec) / 1e6);
    CHECK("raw clock advances", q1 == 0 && q2 == 0 && v1.comp_mask == IBV_VALUES_MASK_RAW_CLOCK &&
          v1.raw_clock.tv_sec == 0 && v2.raw_clock.tv_nsec > v1.raw_clock.tv_nsec && khz > 78125 && khz < 312500,
          "%d %d mask %u: %.0f kHz", q1, q2, v1.comp_mask, khz);
    struct ibv_values_ex unknown = {.comp_mask = 1u << 7};
    const int qu = ibv_query_rt_values_ex(ctx, &unknown);
    CHECK("rt_values unknown mask EINVAL", qu == EINVAL, "%d", qu);

    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    struct ibv_cq_init_attr_ex ca = {.cqe = 64, .cq_context = &ca, .channel = ch, .wc_flags = IBV_WC_STANDARD_FLAGS,
                                     .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
                                     .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED};
    struct ibv_cq_ex *cqx = ch ? ibv_create_cq_ex(ctx, &ca) : NULL;
    if (cqx == NULL) DIE("ibv_create_cq_ex");
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct ibv_poll_cq_attr pa = {.comp_mask = 0};
    int r = ibv_start_poll(cqx, &pa);
    CHECK("cq_ex empty ENOENT", r == ENOENT, "start_poll %d", r);

    const uint64_t rc_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    struct ibv_qp *qa = make_qp(pd, cq, IBV_QPT_RC, rc_ops), *qb = make_qp(pd, cq, IBV_QPT_RC, rc_ops);
    if (!qa || !qb) DIE("ibv_create_qp_ex");
    connect_rc(qa, qb->qp_num);
    connect_rc(qb, qa->qp_num);

    /* A SEND and an RDMA WRITE with immediate (ibv_post_send), read through the ibv_cq_ex;
     * the CQ armed first, so its channel has an event. */
    if (ibv_req_notify_cq(cq, 0)) DIE("ibv_req_notify_cq");
    post_recv(qb, 10, b_buf, 256, bmr->lkey);
    post_recv(qb, 11, b_buf + 256, 256, bmr->lkey);
    memset(a_buf, 'S', 100);
    struct ibv_sge s1 = {.addr = (uintptr_t)a_buf, .length = 100, .lkey = amr->lkey};
    struct ibv_sge s2 = {.addr = (uintptr_t)a_buf, .length = 200, .lkey = amr->lkey};
    struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0x12345678),
                             .wr.rdma = {.remote_addr = (uintptr_t)(b_buf + 1024), .rkey = bmr->rkey}};
    struct ibv_send_wr w1 = {.wr_id = 1, .next = &w2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (ibv_post_send(qa, &w1, &bad)) DIE("ibv_post_send");
    struct done d[16];
    const struct done *c;
    c = expect(cqx, 4, 1, d);
    CHECK("cq_ex send", c && c->status == IBV_WC_SUCCESS && c->opcode == IBV_WC_SEND && c->qp_num == qa->qp_num,
          "%p", (const void *)c);
    c = find(d, 4, 2);
    CHECK("cq_ex write_imm", c && c->opcode == IBV_WC_RDMA_WRITE && c->qp_num == qa->qp_num, "%p", (const void *)c);
    c = find(d, 4, 10);
    CHECK("cq_ex recv", c && c->opcode == IBV_WC_RECV && c->byte_len == 100 && c->qp_num == qb->qp_num &&
                            !(c->wc_flags & IBV_WC_WITH_IMM) && memcmp(b_buf, a_buf, 100) == 0,
          "%p len %u", (const void *)c, c ? c->byte_len : 0);
    c = find(d, 4, 11);
    CHECK("cq_ex recv_rdma_with_imm", c && c->opcode == IBV_WC_RECV_RDMA_WITH_IMM && c->byte_len == 200 &&
                                          c->imm == 0x12345678 && (c->wc_flags & IBV_WC_WITH_IMM) &&
                                          c->qp_num == qb->qp_num && memcmp(b_buf + 1024, a_buf, 200) == 0,
          "%p imm %x", (const void *)c, c ? c->imm : 0);
    struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    const int ready = poll(&pf, 1, 5000);
    r = ready == 1 ? ibv_get_cq_event(ch, &ev_cq, &ev_ctx) : -1;
    CHECK("cq_ex channel event", r == 0 && ev_cq == cq && ev_ctx == &ca, "poll %d get %d", ready, r);
    if (r == 0) ibv_ack_cq_events(cq, 1);
    /* ibv_poll_cq on ibv_cq_ex_to_cq() takes completions from the same CQ. */
    post_recv(qb, 12, b_buf, 256, bmr->lkey);
    w1.next = NULL;
    w1.wr_id = 3;
    if (ibv_post_send(qa, &w1, &bad)) DIE("ibv_post_send");
    int taken = 0;
    struct ibv_wc wc[4];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spins = 0; taken < 2 && polling(spins, &t0); ++spins) taken += ibv_poll_cq(cq, 2 - taken, wc + taken);
    CHECK("ibv_poll_cq on the cq_ex", taken == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS,
          "%d", taken);

    /* --- ibv_wr_* on RC ---------------------------------------------------------------- */
    struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qa);
    if (x == NULL) DIE("ibv_qp_to_qp_ex");
    /* SEND with a gather list of two entries. */
    post_recv(qb, 20, b_buf, 256, bmr->lkey);
    memcpy(a_buf, "hello ", 6);
    memcpy(a_buf + 512, "world", 5);
    ibv_wr_start(x);
    x->wr_id = 21;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    struct ibv_sge two[2] = {{(uintptr_t)a_buf, 6, amr->lkey}, {(uintptr_t)(a_buf + 512), 5, amr->lkey}};
    ibv_wr_set_sge_list(x, 2, two);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 2, 20, d) : NULL;
    CHECK("wr_send sge list", c && c->byte_len == 11 && memcmp(b_buf, "hello world", 11) == 0 &&
                                  find(d, 2, 21) && find(d, 2, 21)->opcode == IBV_WC_SEND,
          "complete %d", r);
    /* SEND with immediate and inline data: the buffer is reused before the complete. */
    post_recv(qb, 22, b_buf, 256, bmr->lkey);
    char text[16] = "inline-data";
    ibv_wr_start(x);
    x->wr_id = 23;
    ibv_wr_send_imm(x, htobe32(0xabcdef01));
    ibv_wr_set_inline_data(x, text, 11);
    memset(text, 'X', sizeof text);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 2, 22, d) : NULL;
    CHECK("wr_send_imm inline", c && c->byte_len == 11 && c->imm == 0xabcdef01 &&
                                    memcmp(b_buf, "inline-data", 11) == 0,
          "complete %d", r);
    /* RDMA WRITE, then RDMA READ back into another place. */
    for (int i = 0; i < 64; ++i) a_buf[i] = (char)i;
    ibv_wr_start(x);
    x->wr_id = 24;
    ibv_wr_rdma_write(x, bmr->rkey, (uintptr_t)(b_buf + 2048));
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 64);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 1, 24, d) : NULL;
    CHECK("wr_rdma_write", c && c->opcode == IBV_WC_RDMA_WRITE && memcmp(b_buf + 2048, a_buf, 64) == 0,
          "complete %d", r);
    ibv_wr_start(x);
    x->wr_id = 25;
    ibv_wr_rdma_read(x, bmr->rkey, (uintptr_t)(b_buf + 2048));
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)(a_buf + 1024), 64);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 1, 25, d) : NULL;
    CHECK("wr_rdma_read", c && c->opcode == IBV_WC_RDMA_READ && c->byte_len == 64 &&
                              memcmp(a_buf + 1024, a_buf, 64) == 0,
          "complete %d", r);
    /* Atomics on an 8-byte word of B's buffer; the old value lands in A's. */
    uint64_t *word = (uint64_t *)(b_buf + 3072), *old = (uint64_t *)(a_buf + 3072);
    *word = 5;
    ibv_wr_start(x);
    x->wr_id = 26;
    ibv_wr_atomic_cmp_swp(x, bmr->rkey, (uintptr_t)word, 5, 42);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)old, 8);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 1, 26, d) : NULL;
    CHECK("wr_atomic_cmp_swp", c && c->opcode == IBV_WC_COMP_SWAP && *old == 5 && *word == 42,
          "complete %d old %llu word %llu", r, (unsigned long long)*old, (unsigned long long)*word);
    ibv_wr_start(x);
    x->wr_id = 27;
    ibv_wr_atomic_fetch_add(x, bmr->rkey, (uintptr_t)word, 8);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)old, 8);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 1, 27, d) : NULL;
    CHECK("wr_atomic_fetch_add", c && c->opcode == IBV_WC_FETCH_ADD && *old == 42 && *word == 50,
          "complete %d old %llu word %llu", r, (unsigned long long)*old, (unsigned long long)*word);
    /* A batch of four in one start/complete: two writes, a write with immediate, a send. */
    post_recv(qb, 30, b_buf, 256, bmr->lkey);
    post_recv(qb, 31, b_buf + 256, 256, bmr->lkey);
    memset(a_buf, 'B', 300);
    ibv_wr_start(x);
    for (int i = 0; i < 2; ++i) {
        x->wr_id = 32 + (uint64_t)i;
        ibv_wr_rdma_write(x, bmr->rkey, (uintptr_t)(b_buf + 1024 + 100 * i));
        ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 100);
    }
    x->wr_id = 34;
    ibv_wr_rdma_write_imm(x, bmr->rkey, (uintptr_t)(b_buf + 1300), htobe32(7));
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 50);
    x->wr_id = 35;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 250);
    r = ibv_wr_complete(x);
    const int got = r == 0 ? poll_ex(cqx, d, 6) : 0;
    int batch_ok = got == 6;
    for (uint64_t id = 30; id <= 35; ++id) batch_ok = batch_ok && find(d, got, id) && find(d, got, id)->status == 0;
    batch_ok = batch_ok && find(d, got, 30)->imm == 7 && find(d, got, 31)->byte_len == 250 &&
               memcmp(b_buf + 1024, a_buf, 200) == 0 && memcmp(b_buf + 1300, a_buf, 50) == 0;
    CHECK("wr batch of four", batch_ok, "complete %d, %d completions", r, got);
    if (!batch_ok) {
        for (int i = 0; i < got; ++i) {
            printf("  wr_id %llu status %d opcode %d len %u imm %u\n", (unsigned long long)d[i].wr_id, d[i].status,
                   d[i].opcode, d[i].byte_len, d[i].imm);
        }
    }
    /* wr_abort posts nothing: the receive posted stays unused and no completion comes. */
    post_recv(qb, 40, b_buf, 256, bmr->lkey);
    ibv_wr_start(x);
    x->wr_id = 41;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 8);
    ibv_wr_abort(x);
    CHECK("wr_abort posts nothing", poll_none(cqx, d) == 0, "a completion of %llu", (unsigned long long)d[0].wr_id);
    /* A batch with an error posts none of it: more gather entries than the QP has, and
     * more WRs than its send queue holds. */
    struct ibv_qp_attr qattr;
    struct ibv_qp_init_attr qinit;
    if (ibv_query_qp(qa, &qattr, IBV_QP_CAP, &qinit)) DIE("ibv_query_qp");
    ibv_wr_start(x);
    x->wr_id = 42;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 8);
    x->wr_id = 43;
    ibv_wr_send(x);
    struct ibv_sge many[64];
    const unsigned nmany = qattr.cap.max_send_sge + 1;
    for (unsigned i = 0; i < nmany && i < 64; ++i) many[i] = (struct ibv_sge){(uintptr_t)a_buf, 1, amr->lkey};
    ibv_wr_set_sge_list(x, nmany, many);
    r = ibv_wr_complete(x);
    CHECK("wr batch with too many sge", nmany <= 64 && r == EINVAL && poll_none(cqx, d) == 0, "complete %d", r);
    ibv_wr_start(x);
    for (unsigned i = 0; i <= qattr.cap.max_send_wr; ++i) {
        x->wr_id = 100 + i;
        ibv_wr_rdma_write(x, bmr->rkey, (uintptr_t)b_buf);
        ibv_wr_set_sge(x, amr->lkey, (uintptr_t)a_buf, 8);
    }
    r = ibv_wr_complete(x);
    CHECK("wr batch beyond the queue", r == ENOMEM && poll_none(cqx, d) == 0, "complete %d", r);
    /* The receive of the aborted send is still there for the next one. */
    ibv_wr_start(x);
    x->wr_id = 44;
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, "after", 5);
    r = ibv_wr_complete(x);
    c = r == 0 ? expect(cqx, 2, 40, d) : NULL;
    CHECK("send after abort", c && c->byte_len == 5 && memcmp(b_buf, "after", 5) == 0, "complete %d", r);

    /* All or nothing when the send queue fills up: unsignaled RDMA WRITEs (whose slots
     * only a later signaled completion would free), each of its own 8-byte value, in
     * batches of three until ibv_wr_complete says ENOMEM; none of the refused batch
     * reaches the peer, though part of it would have fitted. */
    static uint64_t big[8192];
    struct ibv_mr *cmr = ibv_reg_mr(pd, big, sizeof big, access);
    struct ibv_qp *qc = make_qp(pd, cq, IBV_QPT_RC, rc_ops), *qd = make_qp(pd, cq, IBV_QPT_RC, rc_ops);
    if (!cmr || !qc || !qd) DIE("the second RC pair");
    connect_rc(qc, qd->qp_num);
    connect_rc(qd, qc->qp_num);
    struct ibv_qp_ex *cx = ibv_qp_to_qp_ex(qc);
    unsigned g = 0;
    int rr = 0;
    while (g + 3 <= 8192) {
        ibv_wr_start(cx);
        cx->wr_flags = 0;
        for (unsigned i = 0; i < 3; ++i) {
            const uint64_t v = g + i + 1;
            cx->wr_id = v;
            ibv_wr_rdma_write(cx, cmr->rkey, (uintptr_t)&big[g + i]);
            ibv_wr_set_inline_data(cx, (void *)&v, 8);
        }
        rr = ibv_wr_complete(cx);
        if (rr != 0) break;
        g += 3;
    }
    volatile uint64_t *vbig = big;
    for (long spins = 0; g > 0 && vbig[g - 1] != g && spins < 200000000; ++spins) {
    }
    usleep(200000);  /* time for anything of the refused batch to land, were it posted */
    CHECK("wr batch on a full send queue", rr == ENOMEM && g >= 3 && g < 8192 && vbig[g - 1] == g &&
                                               vbig[g] == 0 && vbig[g + 1] == 0 && vbig[g + 2] == 0,
          "complete %d after %u WRs, last %llu, next %llu", rr, g, g ? (unsigned long long)vbig[g - 1] : 0ull,
          g < 8192 ? (unsigned long long)vbig[g] : 0ull);
    CHECK("full send queue: no completion", poll_none(cqx, d) == 0, "wr_id %llu", (unsigned long long)d[0].wr_id);
    ibv_destroy_qp(qc);
    ibv_destroy_qp(qd);
    ibv_dereg_mr(cmr);

    /* --- UD: ibv_wr_set_ud_addr; the receiver's completion names the sender ------------- */
    struct ibv_qp *ua = make_qp(pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
    struct ibv_qp *ub = make_qp(pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND);
    if (!ua || !ub) DIE("UD ibv_create_qp_ex");
    ready_ud(ua);
    ready_ud(ub);
    struct ibv_ah_attr aa = {.dlid = port.lid, .port_num = 1};
    if (roce) {
        aa.is_global = 1;
        aa.grh.dgid = gid;
        aa.grh.hop_limit = 1;
    }
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    if (ah == NULL) DIE("ibv_create_ah");
    post_recv(ub, 50, b_buf, 40 + 256, bmr->lkey);
    struct ibv_qp_ex *ux = ibv_qp_to_qp_ex(ua);
    ibv_wr_start(ux);
    ux->wr_id = 51;
    ux->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(ux, htobe32(99));
    ibv_wr_set_ud_addr(ux, ah, ub->qp_num, 0x11111111);
    ibv_wr_set_sge(ux, amr->lkey, (uintptr_t)a_buf, 64);
    r = ibv_wr_complete(ux);
    c = r == 0 ? expect(cqx, 2, 50, d) : NULL;
    CHECK("wr_set_ud_addr", c && c->byte_len == 40 + 64 && c->src_qp == ua->qp_num && c->imm == 99 &&
                                c->qp_num == ub->qp_num && memcmp(b_buf + 40, a_buf, 64) == 0,
          "complete %d src_qp %u", r, c ? c->src_qp : 0);

    /* --- what is refused ----------------------------------------------------------------- */
    errno = 0;
    struct ibv_qp *nq = make_qp(pd, cq, IBV_QPT_RC, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW);
    CHECK("send_ops bind_mw refused", nq == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    errno = 0;
    nq = make_qp(pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE);
    CHECK("send_ops rdma_write on UD refused", nq == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    struct ibv_qp_init_attr plain = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                     .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *pq = ibv_create_qp(pd, &plain);
    CHECK("qp_to_qp_ex of a plain QP", pq != NULL && ibv_qp_to_qp_ex(pq) == NULL, "%p", (void *)pq);

    ibv_destroy_qp(pq);
    ibv_destroy_ah(ah);
    ibv_destroy_qp(ua);
    ibv_destroy_qp(ub);
    ibv_destroy_qp(qa);
    ibv_destroy_qp(qb);
    r = ibv_destroy_cq(cq);
    CHECK("destroy cq_ex", r == 0, "%d", r);
    r = ibv_destroy_comp_channel(ch);
    CHECK("destroy channel after its cq_ex", r == 0, "%d", r);
    ibv_dereg_mr(amr);
    ibv_dereg_mr(bmr);
    ibv_dealloc_pd(pd);
    if (ibv_close_device(ctx)) DIE("ibv_close_device");
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
