/* Asynchronous events through cxv exec, in a program built against rdma-core: an SRQ
 * whose limit is armed gets IBV_EVENT_SRQ_LIMIT_REACHED from ibv_get_async_event(3) once
 * fewer receives than the limit are left, after sends between two RC QPs of one device.
 * Prints what ibv_query_srq says before and after and "event SRQ_LIMIT_REACHED
 * srq-matches", and exits 0, or says what failed (exit 1). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define FAIL(what)                                                          \
    do {                                                                    \
        fprintf(stderr, "%s failed: %s\n", what, strerror(errno ? errno : EIO)); \
        return 1;                                                           \
    } while (0)

static int connect_qp(struct ibv_qp *qp, uint32_t dest, uint16_t lid, int roce, union ibv_gid *gid) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return -1;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dest;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = lid;
    a.ah_attr.port_num = 1;
    if (roce) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = *gid;
        a.ah_attr.grh.sgid_index = 0;
        a.ah_attr.grh.hop_limit = 1;
    }
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(void) {
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (list == NULL || list[0] == NULL) FAIL("ibv_get_device_list");
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (ctx == NULL) FAIL("ibv_open_device");
    struct ibv_port_attr port;
    if (ibv_query_port(ctx, 1, &port)) FAIL("ibv_query_port");
    union ibv_gid gid;
    if (ibv_query_gid(ctx, 1, 0, &gid)) FAIL("ibv_query_gid");
    const int roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;

    /* Nothing has happened yet: a non-blocking async_fd says so. */
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    if (poll(&p, 1, 0) != 0) FAIL("an event before any (poll on async_fd)");

    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    static char buf[64 * 16];
    struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
    struct ibv_srq *srq = pd ? ibv_create_srq(pd, &sa) : NULL;
    if (!mr || !cq || !srq) FAIL("setup");
    for (int i = 0; i < 8; ++i) {
        struct ibv_sge s = {.addr = (uintptr_t)(buf + 64 * i), .length = 64, .lkey = mr->lkey};
        struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1}, *bad;
        if (ibv_post_srq_recv(srq, &wr, &bad)) FAIL("ibv_post_srq_recv");
    }
    struct ibv_srq_attr limit = {.srq_limit = 4};
    if (ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT)) FAIL("ibv_modify_srq");
    struct ibv_srq_attr q;
    if (ibv_query_srq(srq, &q)) FAIL("ibv_query_srq");
    printf("srq max_wr>=16 %d max_sge %u limit %u\n", q.max_wr >= 16, q.max_sge, q.srq_limit);

    struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *sender = ibv_create_qp(pd, &qa);
    qa.srq = srq;
    struct ibv_qp *receiver = ibv_create_qp(pd, &qa);
    if (!sender || !receiver) FAIL("ibv_create_qp");
    if (connect_qp(sender, receiver->qp_num, port.lid, roce, &gid) ||
        connect_qp(receiver, sender->qp_num, port.lid, roce, &gid)) {
        FAIL("connecting the QPs");
    }
    /* Five sends take five of the eight receives: three left, below the limit of 4. */
    for (int i = 0; i < 5; ++i) {
        struct ibv_sge s = {.addr = (uintptr_t)(buf + 64 * 15), .length = 8, .lkey = mr->lkey};
        struct ibv_send_wr wr = {.wr_id = 100 + (uint64_t)i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED}, *bad;
        if (ibv_post_send(sender, &wr, &bad)) FAIL("ibv_post_send");
    }
    int done = 0;
    for (int spins = 0; done < 10 && spins < 50000000; ++spins) {
        struct ibv_wc wc;
        const int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) FAIL("ibv_poll_cq");
        if (n == 1 && wc.status != IBV_WC_SUCCESS) {
            fprintf(stderr, "completion %s\n", ibv_wc_status_str(wc.status));
            return 1;
        }
        done += n;
    }
    if (done != 10) FAIL("the ten completions");

    /* The event, within 10 s. A port's events (should its link change meanwhile; a late
     * report of the state the port had at the open is not one: the library drops it) are
     * told apart and passed over, as a program does with events it does not wait for. */
    struct ibv_async_event ev;
    for (int tries = 0;; ++tries) {
        if (tries == 8 || poll(&p, 1, 10000) != 1) FAIL("no event on async_fd");
        if (ibv_get_async_event(ctx, &ev)) FAIL("ibv_get_async_event");
        if (ev.event_type != IBV_EVENT_PORT_ACTIVE && ev.event_type != IBV_EVENT_PORT_ERR &&
            ev.event_type != IBV_EVENT_LID_CHANGE && ev.event_type != IBV_EVENT_GID_CHANGE) {
            break;
        }
        fprintf(stderr, "passed over: %s\n", ibv_event_type_str(ev.event_type));
        ibv_ack_async_event(&ev);
    }
    printf("event %s %s\n", ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED ? "SRQ_LIMIT_REACHED" : ibv_event_type_str(ev.event_type),
           ev.element.srq == srq ? "srq-matches" : "srq-differs");
    ibv_ack_async_event(&ev);
    /* The limit fired, so it is disarmed (ibv_modify_srq(3): the limit event is armed once). */
    if (ibv_query_srq(srq, &q)) FAIL("ibv_query_srq");
    printf("srq limit after the event %u\n", q.srq_limit);

    ibv_destroy_qp(receiver);
    ibv_destroy_qp(sender);
    ibv_destroy_srq(srq);
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    if (ibv_close_device(ctx)) FAIL("ibv_close_device");
    ibv_free_device_list(list);
    return 0;
}
