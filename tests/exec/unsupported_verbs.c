/* A libibverbs program built against rdma-core (linked with -libverbs) that calls verbs
 * cxv does not offer and prints what each returned: run with `cxv exec`, each must fail
 * with the errno libibverbs documents, never crash. One line per call:
 * "NAME result errno". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

static void report(const char *name, int failed, int err) {
    printf("%s %s %s\n", name, failed ? "failed" : "succeeded", failed ? strerror(err) : "-");
}

int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        fprintf(stderr, "no device\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (ctx == NULL) {
        perror("ibv_open_device");
        return 1;
    }
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (pd == NULL) {
        perror("ibv_alloc_pd");
        return 1;
    }

    /* ibv_open_xrcd(3): NULL, errno EOPNOTSUPP (an extended verb the context lacks). */
    struct ibv_xrcd_init_attr xa = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
                                    .fd = -1, .oflags = O_CREAT};
    errno = 0;
    struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
    report("ibv_open_xrcd", xrcd == NULL, errno);

    /* ibv_alloc_mw(3): NULL, errno EOPNOTSUPP. */
    errno = 0;
    struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    report("ibv_alloc_mw", mw == NULL, errno);

    /* ibv_create_cq_ex(3) asking for the tag matching field: NULL, errno EOPNOTSUPP. */
    struct ibv_cq_init_attr_ex ca = {.cqe = 16, .wc_flags = IBV_WC_EX_WITH_TM_INFO};
    errno = 0;
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
    report("ibv_create_cq_ex_tm_info", cqx == NULL, errno);

    /* ibv_create_qp(3) of a type cxv lacks (XRC send): NULL, errno EOPNOTSUPP. */
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_XRC_SEND,
                                  .cap = {.max_send_wr = 4, .max_send_sge = 1}};
    errno = 0;
    struct ibv_qp *qp = ibv_create_qp(pd, &qa);
    report("ibv_create_qp_xrc", qp == NULL, errno);

    /* ibv_resize_cq(3): returns the errno value. */
    const int rs = ibv_resize_cq(cq, 64);
    report("ibv_resize_cq", rs != 0, rs);

    /* ibv_attach_mcast(3): returns the errno value; a GID that is no group is EINVAL, as
     * ib_core refuses it. */
    union ibv_gid g;
    memset(&g, 0, sizeof g);
    struct ibv_qp_init_attr ua = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *ud = ibv_create_qp(pd, &ua);
    const int am = ud ? ibv_attach_mcast(ud, &g, 0xc001) : -1;
    report("ibv_attach_mcast", am != 0, am);

    /* A supported call still works after the refusals. */
    errno = 0;
    struct ibv_cq *cq2 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
    report("ibv_create_cq", cq2 == NULL, errno);

    if (cq2) ibv_destroy_cq(cq2);
    if (ud) ibv_destroy_qp(ud);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    const int closed = ibv_close_device(ctx);
    report("ibv_close_device", closed != 0, errno);
    ibv_free_device_list(list);
    return 0;
}
