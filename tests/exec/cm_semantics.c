/* librdmacm calls where cxv's librdmacm follows rdma-core's as qperf and libfabric use
 * them: rdma_getaddrinfo with no node or service and the addresses in the hints,
 * rdma_get_src_port / rdma_get_dst_port, rdma_reject_ece (REJECTED with IBTA reason 35),
 * and the calls cxv does not offer failing cleanly with -1 and errno (multicast, ECE
 * options, extended SRQs, rsockets). Built and linked against rdma-core's librdmacm (every
 * name imported with its symbol version); run with cxv exec it binds to cxv's. Each check
 * prints "ok NAME" or "FAIL NAME: ..."; exits 0 when every check passed.
 * Usage: cm_semantics PORT */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "tests/exec/check.h"

/* rsockets (<rdma/rsocket.h>, which the build's header set does not carry). */
int rsocket(int domain, int type, int protocol);
int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen);
ssize_t rsend(int socket, const void *buf, size_t len, int flags);
ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt);
int rclose(int socket);
int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout);
int rfcntl(int socket, int cmd, ...);
off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset);
size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags);


/* The next event on `ch` within 10 s (NULL when none came). */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch) {
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    struct rdma_cm_event *e = NULL;
    if (poll(&p, 1, 10000) != 1 || rdma_get_cm_event(ch, &e) != 0) return NULL;
    return e;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int same(const struct sockaddr *got, socklen_t len, const struct sockaddr_in *want) {
    return got != NULL && len == sizeof *want && memcmp(got, want, sizeof *want) == 0;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const int port = atoi(argv[1]);
    struct sockaddr_in src = loopback(port), dst = loopback(port + 1);

    /* rdma_getaddrinfo(NULL, NULL, hints): the hints' addresses, as libfabric asks. */
    struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP, .ai_qp_type = IBV_QPT_RC};
    hints.ai_src_addr = (struct sockaddr *)&src;
    hints.ai_src_len = sizeof src;
    hints.ai_dst_addr = (struct sockaddr *)&dst;
    hints.ai_dst_len = sizeof dst;
    struct rdma_addrinfo *res = NULL;
    int r = rdma_getaddrinfo(NULL, NULL, &hints, &res);
    CHECK("rdma_getaddrinfo with the addresses in the hints", r == 0 && res != NULL &&
          same(res->ai_src_addr, res->ai_src_len, &src) && same(res->ai_dst_addr, res->ai_dst_len, &dst) &&
          res->ai_port_space == RDMA_PS_TCP && res->ai_qp_type == IBV_QPT_RC,
          "returned %d errno %d", r, errno);
    if (r == 0) rdma_freeaddrinfo(res);
    struct rdma_addrinfo passive_hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
    passive_hints.ai_src_addr = (struct sockaddr *)&src;
    passive_hints.ai_src_len = sizeof src;
    res = NULL;
    r = rdma_getaddrinfo(NULL, NULL, &passive_hints, &res);
    CHECK("rdma_getaddrinfo passive with the source in the hints", r == 0 && res != NULL &&
          same(res->ai_src_addr, res->ai_src_len, &src) && res->ai_dst_addr == NULL &&
          (res->ai_flags & RAI_PASSIVE), "returned %d errno %d", r, errno);
    if (r == 0) rdma_freeaddrinfo(res);
    errno = 0;
    r = rdma_getaddrinfo(NULL, NULL, NULL, &res);
    CHECK("rdma_getaddrinfo with nothing: EINVAL", r == -1 && errno == EINVAL, "returned %d errno %d", r, errno);

    /* The ports of an id, in network order. */
    struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
    if (sch == NULL || cch == NULL) DIE("rdma_create_event_channel");
    struct rdma_cm_id *listener, *client;
    if (rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) || rdma_create_id(cch, &client, NULL, RDMA_PS_TCP)) {
        DIE("rdma_create_id");
    }
    if (rdma_bind_addr(listener, (struct sockaddr *)&src) || rdma_listen(listener, 4)) DIE("listen");
    CHECK("rdma_get_src_port of a bound id", rdma_get_src_port(listener) == htons((uint16_t)port), "0x%x",
          rdma_get_src_port(listener));
    struct sockaddr_in to = loopback(port);
    if (rdma_resolve_addr(client, NULL, (struct sockaddr *)&to, 2000)) DIE("rdma_resolve_addr");
    struct rdma_cm_event *e = next_event(cch);
    if (e == NULL || e->event != RDMA_CM_EVENT_ADDR_RESOLVED) DIE("ADDR_RESOLVED");
    rdma_ack_cm_event(e);
    CHECK("rdma_get_dst_port of a resolved id", rdma_get_dst_port(client) == htons((uint16_t)port), "0x%x",
          rdma_get_dst_port(client));

    /* What cxv does not offer: -1 and errno, nothing else. */
    struct ibv_ece ece = {.vendor_id = 0x15b3, .options = 1};
    errno = 0;
    r = rdma_set_local_ece(client, &ece);
    CHECK("rdma_set_local_ece: EOPNOTSUPP", r == -1 && errno == EOPNOTSUPP, "returned %d errno %d", r, errno);
    errno = 0;
    r = rdma_get_remote_ece(client, &ece);
    CHECK("rdma_get_remote_ece: EOPNOTSUPP", r == -1 && errno == EOPNOTSUPP, "returned %d errno %d", r, errno);
    /* Multicast: the join flags are required (librdmacm's check); on InfiniBand (this
     * test's port) a join asks the subnet administrator, which cxv cannot: ENOSYS. */
    struct rdma_cm_join_mc_attr_ex mc = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS,
                                         .addr = (struct sockaddr *)&dst};
    errno = 0;
    r = rdma_join_multicast_ex(client, &mc, NULL);
    CHECK("rdma_join_multicast_ex without join flags: EINVAL", r == -1 && errno == EINVAL, "returned %d errno %d", r,
          errno);
    mc.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    mc.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
    errno = 0;
    r = rdma_join_multicast_ex(client, &mc, NULL);
    CHECK("rdma_join_multicast_ex on InfiniBand: ENOSYS", r == -1 && errno == ENOSYS, "returned %d errno %d", r, errno);
    struct ibv_srq_init_attr_ex sx = {.attr = {.max_wr = 4, .max_sge = 1}};
    errno = 0;
    r = rdma_create_srq_ex(client, &sx);
    CHECK("rdma_create_srq_ex: EOPNOTSUPP", r == -1 && errno == EOPNOTSUPP, "returned %d errno %d", r, errno);
    errno = 0;
    r = rsocket(AF_INET, SOCK_STREAM, 0);
    CHECK("rsocket: ENOSYS", r == -1 && errno == ENOSYS, "returned %d errno %d", r, errno);
    char byte = 0;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    errno = 0;
    const ssize_t sent = rsend(0, &byte, 1, 0);
    const int e1 = errno;
    errno = 0;
    const ssize_t got = rreadv(0, &iov, 1);
    const int e2 = errno;
    errno = 0;
    const int bound = rbind(0, (struct sockaddr *)&src, sizeof src);
    const int e3 = errno;
    errno = 0;
    const int fcntl_r = rfcntl(0, 1 /* F_GETFD */);
    const int e4 = errno;
    errno = 0;
    const off_t mapped = riomap(0, &byte, 1, 0, 0, 0);
    const int e5 = errno;
    errno = 0;
    const size_t written = riowrite(0, &byte, 1, 0, 0);
    const int e6 = errno;
    errno = 0;
    const int closed = rclose(0);
    const int e7 = errno;
    CHECK("rsockets calls on a descriptor that is no rsocket: EBADF",
          sent == -1 && e1 == EBADF && got == -1 && e2 == EBADF && bound == -1 && e3 == EBADF && fcntl_r == -1 &&
          e4 == EBADF && mapped == -1 && e5 == EBADF && written == (size_t)-1 && e6 == EBADF && closed == -1 &&
          e7 == EBADF,
          "%zd/%d %zd/%d %d/%d %d/%d %lld/%d %zu/%d %d/%d", sent, e1, got, e2, bound, e3, fcntl_r, e4,
          (long long)mapped, e5, written, e6, closed, e7);
    struct timeval zero = {0, 0};
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(cch->fd, &rd);
    r = rselect(cch->fd + 1, &rd, NULL, NULL, &zero);
    CHECK("rselect of an ordinary descriptor is select", r == 0, "returned %d errno %d", r, errno);

    /* rdma_reject_ece: the peer sees REJECTED with reason 35 (vendor option not supported). */
    if (rdma_resolve_route(client, 2000)) DIE("rdma_resolve_route");
    e = next_event(cch);
    if (e == NULL || e->event != RDMA_CM_EVENT_ROUTE_RESOLVED) DIE("ROUTE_RESOLVED");
    rdma_ack_cm_event(e);
    struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                                    .rnr_retry_count = 7, .qp_num = 0x123};
    if (rdma_connect(client, &param)) DIE("rdma_connect");
    e = next_event(sch);
    if (e == NULL || e->event != RDMA_CM_EVENT_CONNECT_REQUEST) DIE("CONNECT_REQUEST");
    struct rdma_cm_id *child = e->id;
    rdma_ack_cm_event(e);
    r = rdma_reject_ece(child, "ece", 4);
    e = next_event(cch);
    CHECK("rdma_reject_ece: REJECTED with reason 35", r == 0 && e != NULL && e->event == RDMA_CM_EVENT_REJECTED &&
          e->status == 35, "returned %d, event %s status %d", r, e ? rdma_event_str(e->event) : "none",
          e ? e->status : 0);
    if (e != NULL) rdma_ack_cm_event(e);

    rdma_destroy_id(child);
    rdma_destroy_id(client);
    rdma_destroy_id(listener);
    rdma_destroy_event_channel(sch);
    rdma_destroy_event_channel(cch);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
