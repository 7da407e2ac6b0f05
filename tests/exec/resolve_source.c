/* rdma_resolve_addr binds an id that was not bound, as rdma_cm does: its source address
 * (rdma_get_local_addr, rdma_get_src_port) is set by the time the address is resolved,
 * before any connection; libfabric's verbs provider reads it there to give its
 * endpoints a source address (ofi_rxm listens on it). Without a source given it is the
 * address the kernel routes the destination from, with a port of its own; a source given
 * keeps its address and port; a wildcard source gets the routed address; and the
 * connection comes from that port. Built and linked against rdma-core's librdmacm; run
 * under cxv exec it binds to cxv's. Each check prints "ok NAME" or "FAIL NAME: ...";
 * exits 0 when every check passed.
 * Usage: resolve_source PORT GIVEN (two free TCP ports of 127.0.0.1: the listener's, and
 * the source port given) */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "tests/exec/check.h"

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* The next event on `ch` within 10 s (NULL when none came). */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch) {
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    struct rdma_cm_event *e = NULL;
    if (poll(&p, 1, 10000) != 1 || rdma_get_cm_event(ch, &e) != 0) return NULL;
    return e;
}

static int is_loopback4(const struct sockaddr *a) {
    return a->sa_family == AF_INET && ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}

static unsigned port_of(const struct sockaddr *a) {
    return ntohs(a->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
                                          : ((const struct sockaddr_in *)a)->sin_port);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const int port = atoi(argv[1]), given_port = atoi(argv[2]);

    /* A listener, and an id of an event channel resolving to it with no source. */
    struct rdma_event_channel *sch = rdma_create_event_channel(), *cch = rdma_create_event_channel();
    if (sch == NULL || cch == NULL) DIE("rdma_create_event_channel");
    struct rdma_cm_id *listener, *client;
    if (rdma_create_id(sch, &listener, NULL, RDMA_PS_TCP) || rdma_create_id(cch, &client, NULL, RDMA_PS_TCP)) {
        DIE("rdma_create_id");
    }
    struct sockaddr_in at = loopback(port);
    if (rdma_bind_addr(listener, (struct sockaddr *)&at) || rdma_listen(listener, 4)) DIE("listen");
    if (rdma_resolve_addr(client, NULL, (struct sockaddr *)&at, 2000)) DIE("rdma_resolve_addr");
    struct rdma_cm_event *e = next_event(cch);
    if (e == NULL || e->event != RDMA_CM_EVENT_ADDR_RESOLVED) DIE("ADDR_RESOLVED");
    rdma_ack_cm_event(e);
    const struct sockaddr *local = rdma_get_local_addr(client);
    const unsigned src_port = ntohs(rdma_get_src_port(client));
    CHECK("no source: the routed address with a port of its own", is_loopback4(local) && src_port != 0 &&
          port_of(local) == src_port, "family %d port %u", local->sa_family, src_port);

    /* The connection comes from that address and port. */
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
    const struct sockaddr *peer = rdma_get_peer_addr(child);
    CHECK("the connection comes from the resolved source", is_loopback4(peer) && port_of(peer) == src_port,
          "peer family %d port %u, source port %u", peer->sa_family, port_of(peer), src_port);
    rdma_reject(child, NULL, 0);
    e = next_event(cch);
    if (e != NULL) rdma_ack_cm_event(e);
    rdma_destroy_id(child);
    rdma_destroy_id(client);

    /* Synchronous ids: a source given keeps its port; a wildcard one gets the address. */
    struct rdma_cm_id *id;
    struct sockaddr_in given = loopback(given_port);
    if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) DIE("rdma_create_id");
    int r = rdma_resolve_addr(id, (struct sockaddr *)&given, (struct sockaddr *)&at, 2000);
    local = rdma_get_local_addr(id);
    CHECK("a source given keeps its address and port", r == 0 && is_loopback4(local) &&
          port_of(local) == (unsigned)given_port, "returned %d errno %d, family %d port %u", r, errno,
          local->sa_family, port_of(local));
    rdma_destroy_id(id);

    struct sockaddr_in any = {.sin_family = AF_INET};
    if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) DIE("rdma_create_id");
    r = rdma_resolve_addr(id, (struct sockaddr *)&any, (struct sockaddr *)&at, 2000);
    local = rdma_get_local_addr(id);
    CHECK("a wildcard source gets the routed address", r == 0 && is_loopback4(local) && port_of(local) != 0,
          "returned %d errno %d, family %d port %u", r, errno, local->sa_family, port_of(local));
    rdma_destroy_id(id);

    struct sockaddr_in6 at6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                               .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP)) DIE("rdma_create_id");
    r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&at6, 2000);
    local = rdma_get_local_addr(id);
    CHECK("IPv6: the routed address ::1", r == 0 && local->sa_family == AF_INET6 &&
          IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)local)->sin6_addr) && port_of(local) != 0,
          "returned %d errno %d, family %d port %u", r, errno, local->sa_family, port_of(local));
    rdma_destroy_id(id);

    rdma_destroy_id(listener);
    rdma_destroy_event_channel(sch);
    rdma_destroy_event_channel(cch);
    printf("%d failed\n", failures);
    return failures == 0 ? 0 : 1;
}
