/* mlx5dv_create_cq(3) and mlx5dv_create_qp(3) as UCX's mlx5 transports call them, built
 * and linked against rdma-core's libibverbs and libmlx5 and run under cxv exec
 * (ucx_test):
 * - a CQ of 128-byte CQEs (MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, with
 *   IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN as UCX asks): mlx5dv_init_obj gives cqe_size 128,
 *   and the device writes each CQE in the second half of its entry (PRM "CQE Format");
 *   ibv_poll_cq on it takes every completion of more sends than the ring has entries
 *   (so across its wrap), in order;
 * - rdma-core's refusals: a CQE size other than 64 or 128, CQE compression and 128-byte
 *   padding (the function offers neither), unknown comp_mask bits (EINVAL); DC and tunnel
 *   offloads (EOPNOTSUPP), both scatter-to-CQE flags at once (EINVAL);
 * - the device's RDMA class directory UCX looks for: realpath(ibdev_path) less two
 *   components is a directory whose vendor file names Mellanox (0x15b3). */
#include <endian.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mlx5dv.h>

#include "tests/exec/check.h"

#define CHECK_ERRNO(name, expr, want)                                                             \
    do {                                                                                          \
        errno = 0;                                                                                \
        const int null_ = (expr) == NULL;                                                         \
        CHECK(name, null_ && errno == (want), "returned %s, errno %d", null_ ? "NULL" : "an object", errno); \
    } while (0)

static struct ibv_cq_ex *create_cq(unsigned cqe, uint64_t dv_mask, unsigned cqe_size, uint32_t dv_flags) {
    struct ibv_cq_init_attr_ex ca = {.cqe = cqe, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
                                     .flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN};
    struct mlx5dv_cq_init_attr dca = {.comp_mask = dv_mask, .cqe_size = (uint16_t)cqe_size, .flags = dv_flags};
    return mlx5dv_create_cq(ctx, &ca, &dca);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type, uint64_t dv_mask,
                                uint32_t create_flags) {
    struct ibv_qp_init_attr_ex qa = {.send_cq = cq, .recv_cq = cq, .qp_type = type,
                                     .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
                                     .cap = {.max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1,
                                             .max_recv_sge = 1}};
    struct mlx5dv_qp_init_attr dqa = {.comp_mask = dv_mask, .create_flags = create_flags,
                                      .dc_init_attr = {.dc_type = MLX5DV_DCTYPE_DCI}};
    return mlx5dv_create_qp(ctx, &qa, &dqa);
}

int main(void) {
    struct ibv_device **list = open_first_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (pd == NULL) DIE("ibv_alloc_pd");

    /* What UCX reads to know the device: vendor and device two levels above ibdev_path. */
    char real[PATH_MAX] = "";
    char vendor[16] = "";
    if (realpath(list[0]->ibdev_path, real) != NULL) {
        for (int up = 0; up < 2; ++up) {
            char *slash = strrchr(real, '/');
            if (slash != NULL) *slash = '\0';
        }
        char file[PATH_MAX + 16];
        snprintf(file, sizeof file, "%s/vendor", real);
        FILE *f = fopen(file, "r");
        if (f != NULL) {
            if (fgets(vendor, sizeof vendor, f) == NULL) vendor[0] = '\0';
            fclose(f);
        }
    }
    CHECK("the PCI function two levels above ibdev_path", strncmp(vendor, "0x15b3", 6) == 0,
          "ibdev_path %s, directory '%s', vendor '%s'", list[0]->ibdev_path, real, vendor);

    /* A 16-entry CQ of 128-byte CQEs for both sides of two connected RC QPs. */
    struct ibv_cq_ex *cqx = create_cq(16, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 128, 0);
    CHECK("mlx5dv_create_cq: 128-byte CQEs, overruns ignored", cqx != NULL, "errno %d", errno);
    if (cqx == NULL) return 1;
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct mlx5dv_cq dcq = {0};
    struct mlx5dv_obj obj = {.cq = {.in = cq, .out = &dcq}};
    CHECK("mlx5dv_init_obj of it", mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0, "errno %d", errno);
    CHECK("its cqe_size is 128", dcq.cqe_size == 128 && dcq.cqe_cnt >= 16, "cqe_size %u cqe_cnt %u", dcq.cqe_size,
          dcq.cqe_cnt);

    struct ibv_qp *a = create_qp(pd, cq, IBV_QPT_RC, MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
                                 MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE);
    struct ibv_qp *b = create_qp(pd, cq, IBV_QPT_RC, MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
                                 MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE);
    CHECK("mlx5dv_create_qp: RC QPs with either scatter-to-CQE flag", a != NULL && b != NULL, "errno %d", errno);
    if (a == NULL || b == NULL) return 1;
    connect_rc(a, b->qp_num);
    connect_rc(b, a->qp_num);
    static char buf[4096];
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
    if (mr == NULL) DIE("ibv_reg_mr");

    /* 40 SENDs of 8 bytes from a to b, one at a time, each taken by ibv_poll_cq (a send
     * and a receive completion each): 80 completions through a 16-entry ring. */
    enum { kRounds = 40 };
    int good = 0, order = 1, seen_data = 1;
    for (int i = 0; i < kRounds; ++i) {
        struct ibv_sge rs = {.addr = (uintptr_t)(buf + 2048), .length = 64, .lkey = mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = 1000 + i, .sg_list = &rs, .num_sge = 1}, *bad_r = NULL;
        snprintf(buf, 16, "msg %04d", i);
        struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
        struct ibv_send_wr sw = {.wr_id = (uint64_t)i, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED},
                           *bad_s = NULL;
        if (ibv_post_recv(b, &rw, &bad_r) || ibv_post_send(a, &sw, &bad_s)) DIE("post");
        int send_done = 0, recv_done = 0;
        for (long spin = 0; spin < 200000000L && !(send_done && recv_done); ++spin) {
            struct ibv_wc wc;
            if (ibv_poll_cq(cq, 1, &wc) != 1) continue;
            if (wc.status != IBV_WC_SUCCESS) break;
            if (wc.opcode == IBV_WC_SEND) {
                send_done = 1;
                if (wc.wr_id != (uint64_t)i || wc.qp_num != a->qp_num) order = 0;
            } else if (wc.opcode == IBV_WC_RECV) {
                recv_done = 1;
                if (wc.wr_id != (uint64_t)(1000 + i) || wc.byte_len != 8 || wc.qp_num != b->qp_num) order = 0;
                if (memcmp(buf + 2048, buf, 8) != 0) seen_data = 0;
            }
        }
        good += send_done && recv_done;
    }
    CHECK("ibv_poll_cq takes every completion across the wrap", good == kRounds && order && seen_data,
          "%d of %d rounds, in order %d, data %d", good, kRounds, order, seen_data);
    /* The ring itself: entry i's CQE in its second half, the first half not written. */
    int halves = 1;
    for (unsigned i = 0; i < dcq.cqe_cnt; ++i) {
        const unsigned char *entry = (const unsigned char *)dcq.buf + (size_t)i * 128;
        struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)(uintptr_t)(entry + 64);
        const uint8_t op = mlx5dv_get_cqe_opcode(c);
        static const unsigned char zeros[64];
        if ((op != MLX5_CQE_REQ && op != MLX5_CQE_RESP_SEND) || memcmp(entry, zeros, 64) != 0) halves = 0;
    }
    CHECK("each CQE in the second half of its 128-byte entry", halves, "an entry not laid out so");

    /* rdma-core's refusals. */
    CHECK_ERRNO("mlx5dv_create_cq: a 96-byte CQE is EINVAL", create_cq(4, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, 96, 0),
                EINVAL);
    CHECK_ERRNO("mlx5dv_create_cq: CQE compression is EINVAL",
                create_cq(4, MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE, 64, 0), EINVAL);
    CHECK_ERRNO("mlx5dv_create_cq: 128-byte padding is EINVAL",
                create_cq(4, MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE | MLX5DV_CQ_INIT_ATTR_MASK_FLAGS, 128,
                          MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD),
                EINVAL);
    CHECK_ERRNO("mlx5dv_create_cq: an unknown comp_mask bit is EINVAL", create_cq(4, 1u << 20, 64, 0), EINVAL);
    CHECK_ERRNO("mlx5dv_create_qp: both scatter-to-CQE flags are EINVAL",
                create_qp(pd, cq, IBV_QPT_RC, MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
                          MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE | MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE),
                EINVAL);
    CHECK_ERRNO("mlx5dv_create_qp: tunnel offloads are EOPNOTSUPP",
                create_qp(pd, cq, IBV_QPT_RC, MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
                          MLX5DV_QP_CREATE_TUNNEL_OFFLOADS),
                EOPNOTSUPP);
    CHECK_ERRNO("mlx5dv_create_qp: a DCI is EOPNOTSUPP", create_qp(pd, cq, IBV_QPT_DRIVER, MLX5DV_QP_INIT_ATTR_MASK_DC, 0),
                EOPNOTSUPP);
    CHECK_ERRNO("mlx5dv_create_qp: DC attributes on an RC QP are EINVAL",
                create_qp(pd, cq, IBV_QPT_RC, MLX5DV_QP_INIT_ATTR_MASK_DC, 0), EINVAL);

    if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd)) {
        DIE("teardown");
    }
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("%d failed\n", failures);
    return failures != 0;
}
