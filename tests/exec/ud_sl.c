/* What a UD receive completion says of the packet, as rdma-core's mlx5 provider reads
 * it from the CQE (flags_rqpn bits 27:24): on InfiniBand the SL the sender's address
 * handle gave, on RoCE the packet type (bit 3 a UDP header, bits 1:0 the L3 header: 1
 * IPv6, 2 IPv4), which UCX's UD transports read as wc.sl to tell an IPv4 GRH area from
 * an IPv6 one. Two UD QPs on port 1 of one function, datagrams to the port's own
 * address: on RoCE by GID index 0 (IPv6 link-local) and the IPv4 GID, on InfiniBand
 * with SL 3 by LID. */
#include <arpa/inet.h>

#include "tests/exec/check.h"

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq) {
    struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *qp = ibv_create_qp(pd, &qa);
    if (qp == NULL) DIE("ibv_create_qp");
    to_init(qp, 1);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) DIE("RTR");
    struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = 0};
    if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_SQ_PSN)) DIE("RTS");
    return qp;
}

/* One datagram from `a` to `b` through an AH of `attr`; the receive's wc.sl, -1 if none. */
static int datagram_sl(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp *a, struct ibv_qp *b,
                       struct ibv_mr *mr, char *buf, struct ibv_ah_attr *attr) {
    struct ibv_ah *ah = ibv_create_ah(pd, attr);
    if (ah == NULL) DIE("ibv_create_ah");
    struct ibv_sge rs = {.addr = (uintptr_t)(buf + 1024), .length = 40 + 64, .lkey = mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 2, .sg_list = &rs, .num_sge = 1}, *bad_r;
    struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey};
    struct ibv_send_wr sw = {.wr_id = 1, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .wr = {.ud = {.ah = ah, .remote_qpn = b->qp_num, .remote_qkey = 0x11111111}}},
                       *bad_s;
    if (ibv_post_recv(b, &rw, &bad_r) || ibv_post_send(a, &sw, &bad_s)) DIE("post");
    int sl = -1, done = 0;
    for (long spin = 0; spin < 200000000L && done < 2; ++spin) {
        struct ibv_wc wc;
        if (ibv_poll_cq(cq, 1, &wc) != 1) continue;
        ++done;
        if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_GRH || !roce)) sl = wc.sl;
    }
    ibv_destroy_ah(ah);
    return sl;
}

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (pd == NULL || cq == NULL) DIE("objects");
    static char buf[4096];
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) DIE("ibv_reg_mr");
    struct ibv_qp *a = ud_qp(pd, cq), *b = ud_qp(pd, cq);
    if (roce) {
        int v4 = -1;
        for (int i = 0; i < port.gid_tbl_len && v4 < 0; ++i) {
            union ibv_gid g;
            static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (ibv_query_gid(ctx, 1, i, &g) == 0 && memcmp(g.raw, mapped, 12) == 0) v4 = i;
        }
        struct ibv_ah_attr v6 = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = 0, .hop_limit = 1}};
        const int sl6 = datagram_sl(pd, cq, a, b, mr, buf, &v6);
        CHECK("RoCE over IPv6: wc.sl is 0x9 (UDP, IPv6)", sl6 == 0x9, "sl %d", sl6);
        CHECK("an IPv4 GID", v4 >= 0, "none in %d entries", port.gid_tbl_len);
        if (v4 >= 0) {
            union ibv_gid g4;
            ibv_query_gid(ctx, 1, v4, &g4);
            struct ibv_ah_attr a4 = {.is_global = 1, .port_num = 1,
                                     .grh = {.dgid = g4, .sgid_index = (uint8_t)v4, .hop_limit = 1}};
            const int sl4 = datagram_sl(pd, cq, a, b, mr, buf, &a4);
            CHECK("RoCE over IPv4: wc.sl is 0xa (UDP, IPv4)", sl4 == 0xa, "sl %d", sl4);
        }
    } else {
        struct ibv_ah_attr ib = {.dlid = port.lid, .sl = 3, .port_num = 1};
        const int sl = datagram_sl(pd, cq, a, b, mr, buf, &ib);
        CHECK("InfiniBand: wc.sl is the sender's SL", sl == 3, "sl %d", sl);
    }
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures != 0;
}
