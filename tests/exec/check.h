/* What the C test programs run under cxv exec share: their check and exit macros, the
 * device they use, and RC QPs connected to each other on port 1 of one function. Each
 * check prints "ok NAME" or "FAIL NAME: ..." (exec_test reads them). */
#ifndef CXV_TESTS_EXEC_CHECK_H
#define CXV_TESTS_EXEC_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int failures;

#define CHECK(name, cond, ...)                        \
    do {                                              \
        if (cond) {                                   \
            printf("ok %s\n", name);                  \
        } else {                                      \
            ++failures;                               \
            printf("FAIL %s: ", name);                \
            printf(__VA_ARGS__);                      \
            printf("\n");                             \
        }                                             \
    } while (0)
#define DIE(what)                                                                \
    do {                                                                         \
        fprintf(stderr, "%s failed: %s\n", what, strerror(errno ? errno : EIO)); \
        exit(1);                                                                 \
    } while (0)

static struct ibv_context *ctx;
static struct ibv_port_attr port;
static union ibv_gid gid;
static int roce;

/* Opens the first device the list has into `ctx`, with port 1's attributes and GID 0;
 * returns the list (for ibv_free_device_list). */
static inline struct ibv_device **open_first_device(void) {
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (list == NULL || list[0] == NULL) DIE("ibv_get_device_list");
    ctx = ibv_open_device(list[0]);
    if (ctx == NULL) DIE("ibv_open_device");
    if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid)) DIE("ibv_query_port");
    roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    return list;
}

static inline void to_init(struct ibv_qp *qp, int ud) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11111111,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                  (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS))) {
        DIE("INIT");
    }
}

static inline void connect_rc(struct ibv_qp *qp, uint32_t dest) {
    to_init(qp, 0);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dest,
                            .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                            .ah_attr = {.dlid = port.lid, .port_num = 1}};
    if (roce) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.hop_limit = 1;
    }
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        DIE("RTR");
    }
    struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .max_rd_atomic = 1};
    if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        DIE("RTS");
    }
}

#endif
