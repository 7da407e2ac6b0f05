/* The direct-verbs calls of rdma-core's provider libraries, libmlx5 (mlx5dv(7)) and
 * libefa (efadv(7)), in a program linked against rdma-core's copies and run under cxv
 * exec, where cxv's answer them: the libraries come from cxv's directory; what libmlx5
 * answers (mlx5dv_is_supported, mlx5dv_open_device, mlx5dv_query_device) and a sample of
 * what it refuses, each in the form its man page gives; every efadv call refusing a
 * device that is not EFA. Each check prints "ok NAME" or "FAIL NAME: ..."; exits 0 when
 * every check passed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include "tests/exec/check.h"

/* A call that returns an errno value (or a negative one): the value it returned. */
#define CHECK_RET(name, expr, want)                              \
    do {                                                         \
        const long got_ = (long)(expr);                          \
        CHECK(name, got_ == (long)(want), "returned %ld", got_); \
    } while (0)

/* The directory of the object that defines `fn`. */
static const char *dir_of(void *fn, char *buf, size_t len) {
    Dl_info info;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL) return "?";
    snprintf(buf, len, "%s", info.dli_fname);
    char *slash = strrchr(buf, '/');
    if (slash != NULL) *slash = '\0';
    return buf;
}

static void where_from(void) {
    char v[512], m[512], e[512];
    dir_of((void *)ibv_open_device, v, sizeof v);
    dir_of((void *)mlx5dv_query_device, m, sizeof m);
    dir_of((void *)efadv_query_device, e, sizeof e);
    CHECK("libmlx5 and libefa beside cxv's libibverbs", strcmp(v, m) == 0 && strcmp(v, e) == 0,
          "libibverbs in %s, libmlx5 in %s, libefa in %s", v, m, e);
    CHECK("not rdma-core's libmlx5", strstr(m, "/usr/lib") != m, "libmlx5 in %s", m);
}

static void open_device(struct ibv_device *dev) {
    struct ibv_device other;
    memset(&other, 0, sizeof other);
    CHECK("mlx5dv_is_supported of cxv's device", mlx5dv_is_supported(dev), "false");
    CHECK("mlx5dv_is_supported of another device", !mlx5dv_is_supported(&other), "true");

    struct mlx5dv_context_attr devx = {.flags = MLX5DV_CONTEXT_FLAGS_DEVX};
    errno = 0;
    struct ibv_context *c = mlx5dv_open_device(dev, &devx);
    CHECK("mlx5dv_open_device with DevX: EOPNOTSUPP", c == NULL && errno == EOPNOTSUPP, "%p, errno %d", (void *)c,
          errno);
    struct mlx5dv_context_attr masked = {.comp_mask = 1};
    errno = 0;
    c = mlx5dv_open_device(dev, &masked);
    CHECK("mlx5dv_open_device with a comp_mask: EINVAL", c == NULL && errno == EINVAL, "%p, errno %d", (void *)c,
          errno);
    struct mlx5dv_context_attr plain = {0};
    c = mlx5dv_open_device(dev, &plain);
    struct ibv_device_attr attr;
    CHECK("mlx5dv_open_device without flags opens the device", c != NULL && ibv_query_device(c, &attr) == 0,
          "errno %d (%s)", errno, strerror(errno));
    if (c != NULL) CHECK("its context closes", ibv_close_device(c) == 0, "errno %d", errno);
}

static void query_device(void) {
    const uint64_t all = (MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD << 1) - 1;
    const uint64_t absent =
        MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE | MLX5DV_CONTEXT_MASK_HCA_CORE_CLOCK | MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS;
    struct mlx5dv_context dv;
    memset(&dv, 0xa5, sizeof dv);
    dv.comp_mask = all;
    const int r = mlx5dv_query_device(ctx, &dv);
    CHECK("mlx5dv_query_device", r == 0 && dv.version == 0, "returned %d, version %u", r, dv.version);
    CHECK("mlx5dv_query_device: version-1 CQEs and nothing else", dv.flags == MLX5DV_CONTEXT_FLAGS_CQE_V1,
          "flags %#llx", (unsigned long long)dv.flags);
    CHECK("mlx5dv_query_device: the fields filled", dv.comp_mask == (all & ~absent), "comp_mask %#llx",
          (unsigned long long)dv.comp_mask);
    CHECK("mlx5dv_query_device: no CQE compression, striding RQ, offloads",
          dv.cqe_comp_caps.max_num == 0 && dv.cqe_comp_caps.supported_format == 0 &&
              dv.striding_rq_caps.supported_qpts == 0 && dv.sw_parsing_caps.sw_parsing_offloads == 0 &&
              dv.tunnel_offloads_caps == 0 && dv.max_dynamic_bfregs == 0 && dv.flow_action_flags == 0 &&
              dv.dc_odp_caps == 0 && dv.max_wr_memcpy_length == 0 && dv.crypto_caps.flags == 0,
          "cqe_comp max_num %u", dv.cqe_comp_caps.max_num);
    dv.comp_mask = 0;
    CHECK("mlx5dv_query_device asking for nothing", mlx5dv_query_device(ctx, &dv) == 0 && dv.comp_mask == 0,
          "comp_mask %#llx", (unsigned long long)dv.comp_mask);
}

static void refused(struct ibv_pd *pd, struct ibv_cq *cq) {
    struct mlx5dv_cq dvcq;
    struct mlx5dv_obj obj = {.cq = {.in = cq, .out = &dvcq}};
    CHECK_RET("mlx5dv_init_obj of a CQ: its ring (dv_objects.c)", mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0);
    CHECK_RET("mlx5dv_init_obj of nothing: EINVAL", mlx5dv_init_obj(&obj, 0), EINVAL);

    struct ibv_qp_init_attr_ex qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                     .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
                                     .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
                                             .max_recv_sge = 1}};
    struct mlx5dv_qp_init_attr dqa = {0};
    struct ibv_qp *dv_qp = mlx5dv_create_qp(ctx, &qa, &dqa);
    CHECK("mlx5dv_create_qp without mlx5 attributes: an RC QP", dv_qp != NULL && dv_qp->qp_type == IBV_QPT_RC,
          "errno %d", errno);
    if (dv_qp != NULL) ibv_destroy_qp(dv_qp);
    struct ibv_cq_init_attr_ex ca = {.cqe = 4};
    struct mlx5dv_cq_init_attr dca = {0};
    struct ibv_cq_ex *dv_cq = mlx5dv_create_cq(ctx, &ca, &dca);
    CHECK("mlx5dv_create_cq without mlx5 attributes: a CQ", dv_cq != NULL && dv_cq->cqe >= 4, "errno %d", errno);
    if (dv_cq != NULL) ibv_destroy_cq(ibv_cq_ex_to_cq(dv_cq));
    uint32_t in[4] = {0}, out[4];
    CHECK_RET("mlx5dv_devx_general_cmd: EOPNOTSUPP", mlx5dv_devx_general_cmd(ctx, in, sizeof in, out, sizeof out),
              EOPNOTSUPP);
    errno = 0;
    CHECK("mlx5dv_devx_obj_create: NULL, EOPNOTSUPP",
          mlx5dv_devx_obj_create(ctx, in, sizeof in, out, sizeof out) == NULL && errno == EOPNOTSUPP, "errno %d",
          errno);
    errno = 0;
    CHECK("mlx5dv_devx_get_event: -1, EOPNOTSUPP", mlx5dv_devx_get_event(NULL, NULL, 0) == -1 && errno == EOPNOTSUPP,
          "errno %d", errno);
    errno = 0;
    CHECK("mlx5dv_dr_domain_create: NULL, EOPNOTSUPP",
          mlx5dv_dr_domain_create(ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_RX) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    CHECK_RET("mlx5dv_qp_cancel_posted_send_wrs: -EOPNOTSUPP", mlx5dv_qp_cancel_posted_send_wrs(NULL, 0),
              -EOPNOTSUPP);
    struct mlx5dv_clock_info clock;
    CHECK_RET("mlx5dv_get_clock_info: EOPNOTSUPP", mlx5dv_get_clock_info(ctx, &clock), EOPNOTSUPP);
    struct mlx5dv_port dvport;
    CHECK_RET("mlx5dv_query_port: EOPNOTSUPP", mlx5dv_query_port(ctx, 1, &dvport), EOPNOTSUPP);
    struct mlx5dv_crypto_login_attr login = {0};
    CHECK_RET("mlx5dv_crypto_login: EOPNOTSUPP", mlx5dv_crypto_login(ctx, &login), EOPNOTSUPP);
}

static void efa(struct ibv_pd *pd, struct ibv_cq *cq) {
    struct efadv_device_attr da;
    CHECK_RET("efadv_query_device: EOPNOTSUPP", efadv_query_device(ctx, &da, sizeof da), EOPNOTSUPP);
    struct ibv_qp_init_attr_ex qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_DRIVER,
                                     .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd};
    struct efadv_qp_init_attr eqa = {.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD};
    errno = 0;
    CHECK("efadv_create_qp_ex: NULL, EOPNOTSUPP",
          efadv_create_qp_ex(ctx, &qa, &eqa, sizeof eqa) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_DRIVER};
    errno = 0;
    CHECK("efadv_create_driver_qp: NULL, EOPNOTSUPP",
          efadv_create_driver_qp(pd, &a, EFADV_QP_DRIVER_TYPE_SRD) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    struct ibv_cq_init_attr_ex ca = {.cqe = 4};
    struct efadv_cq_init_attr eca = {0};
    errno = 0;
    CHECK("efadv_create_cq: NULL, EOPNOTSUPP",
          efadv_create_cq(ctx, &ca, &eca, sizeof eca) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
    if (cqx == NULL) DIE("ibv_create_cq_ex");
    errno = 0;
    CHECK("efadv_cq_from_ibv_cq_ex of cxv's CQ: NULL, EOPNOTSUPP",
          efadv_cq_from_ibv_cq_ex(cqx) == NULL && errno == EOPNOTSUPP, "errno %d", errno);
    ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
    struct ibv_ah_attr aa = {.dlid = port.lid, .port_num = 1};
    if (roce) {
        aa.is_global = 1;
        aa.grh.dgid = gid;
        aa.grh.hop_limit = 1;
    }
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    if (ah == NULL) DIE("ibv_create_ah");
    struct efadv_ah_attr eah;
    CHECK_RET("efadv_query_ah: EOPNOTSUPP", efadv_query_ah(ah, &eah, sizeof eah), EOPNOTSUPP);
    ibv_destroy_ah(ah);
}

int main(void) {
    struct ibv_device **list = open_first_device();
    where_from();
    open_device(list[0]);
    query_device();
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    if (pd == NULL || cq == NULL) DIE("ibv_alloc_pd/ibv_create_cq");
    refused(pd, cq);
    efa(pd, cq);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    CHECK("ibv_close_device", ibv_close_device(ctx) == 0, "errno %d", errno);
    ibv_free_device_list(list);
    return failures == 0 ? 0 : 1;
}
