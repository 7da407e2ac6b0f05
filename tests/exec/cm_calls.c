/* librdmacm calls the Debian tools do not reach, in one process, both ends on the
 * event-channel API without QPs: the connect request's private data, a reject with
 * private data (REJECTED, status 28), an accept answered by CONNECT_RESPONSE and
 * rdma_establish, the disconnect on both sides, and the documented errno values of
 * rdma_set_option, rdma_create_srq, rdma_getaddrinfo and an over-long private data.
 * Built and linked against rdma-core's librdmacm; run with cxv exec it binds to cxv's.
 * Prints "cm_calls: ok" and exits 0 when every check holds, else names the first that
 * failed and exits 1. Usage: cm_calls PORT */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

static int failed(const char* what) {
    printf("cm_calls: FAILED: %s (errno %d)\n", what, errno);
    exit(1);
}
#define EXPECT(cond) ((cond) ? (void)0 : (void)failed(#cond))

/* The next event on `ch` within 10 s, of type `want`. */
static struct rdma_cm_event* next_event(struct rdma_event_channel* ch, enum rdma_cm_event_type want) {
    struct pollfd p = {.fd = ch->fd, .events = POLLIN};
    EXPECT(poll(&p, 1, 10000) == 1);
    struct rdma_cm_event* e = NULL;
    EXPECT(rdma_get_cm_event(ch, &e) == 0);
    if (e->event != want) {
        printf("cm_calls: got %s (status %d), wanted %s\n", rdma_event_str(e->event), e->status,
               rdma_event_str(want));
        exit(1);
    }
    return e;
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const char* port = argv[1];
    struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST, .ai_port_space = RDMA_PS_TCP};
    struct rdma_addrinfo* passive = NULL;
    struct rdma_addrinfo* active = NULL;
    EXPECT(rdma_getaddrinfo("127.0.0.1", port, &hints, &passive) == 0);
    EXPECT(passive->ai_src_addr != NULL && passive->ai_qp_type == IBV_QPT_RC);
    hints.ai_flags = RAI_NUMERICHOST;
    EXPECT(rdma_getaddrinfo("not-a-number", port, &hints, &active) == EAI_NONAME);
    hints.ai_flags = 0;
    hints.ai_family = AF_INET; /* the listener is on 127.0.0.1, localhost may be ::1 first */
    EXPECT(rdma_getaddrinfo("localhost", port, &hints, &active) == 0);
    EXPECT(active->ai_dst_addr != NULL);

    struct rdma_event_channel* sch = rdma_create_event_channel();
    struct rdma_event_channel* cch = rdma_create_event_channel();
    EXPECT(sch != NULL && cch != NULL);
    struct rdma_cm_id *listen_id, *client;
    EXPECT(rdma_create_id(sch, &listen_id, NULL, RDMA_PS_TCP) == 0);
    EXPECT(rdma_bind_addr(listen_id, passive->ai_src_addr) == 0);
    EXPECT(rdma_listen(listen_id, 4) == 0);

    /* An empty channel set O_NONBLOCK: EAGAIN. */
    EXPECT(fcntl(cch->fd, F_SETFL, O_NONBLOCK) == 0);
    struct rdma_cm_event* e = NULL;
    EXPECT(rdma_get_cm_event(cch, &e) == -1 && errno == EAGAIN);
    EXPECT(fcntl(cch->fd, F_SETFL, 0) == 0);

    /* Options and refusals. */
    EXPECT(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
    uint8_t timeout = 18, tos = 0;
    EXPECT(rdma_set_option(client, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) == 0);
    EXPECT(rdma_set_option(client, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) == 0);
    EXPECT(rdma_set_option(client, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, NULL, 0) == -1 && errno == ENOSYS);
    EXPECT(rdma_set_option(client, 77, 1, NULL, 0) == -1 && errno == EINVAL);
    EXPECT(strcmp(rdma_event_str(RDMA_CM_EVENT_REJECTED), "RDMA_CM_EVENT_REJECTED") == 0);

    /* 1: a request with private data, rejected with private data. */
    EXPECT(rdma_resolve_addr(client, NULL, active->ai_dst_addr, 2000) == 0);
    rdma_ack_cm_event(next_event(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT(client->verbs != NULL);
    EXPECT(rdma_create_srq(client, NULL, NULL) == -1 && errno == EOPNOTSUPP);
    EXPECT(rdma_resolve_route(client, 2000) == 0);
    rdma_ack_cm_event(next_event(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    char big[64] = {0};
    struct rdma_conn_param param = {.private_data = big, .private_data_len = 57, .responder_resources = 1,
                                    .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7, .qp_num = 0x123};
    EXPECT(rdma_connect(client, &param) == -1 && errno == EINVAL); /* over the 56 bytes of a REQ */
    param.private_data = "hello";
    param.private_data_len = 6;
    EXPECT(rdma_connect(client, &param) == 0);
    e = next_event(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    EXPECT(e->listen_id == listen_id && e->id != listen_id);
    EXPECT(e->param.conn.private_data_len >= 6 && strcmp(e->param.conn.private_data, "hello") == 0);
    EXPECT(e->param.conn.qp_num == 0x123);
    struct rdma_cm_id* child = e->id;
    rdma_ack_cm_event(e);
    EXPECT(rdma_reject(child, "go away", 8) == 0);
    e = next_event(cch, RDMA_CM_EVENT_REJECTED);
    EXPECT(e->status == 28);
    EXPECT(e->param.conn.private_data_len >= 8 && strcmp(e->param.conn.private_data, "go away") == 0);
    rdma_ack_cm_event(e);
    EXPECT(rdma_destroy_id(child) == 0);
    EXPECT(rdma_destroy_id(client) == 0);

    /* 2: accepted without QPs: CONNECT_RESPONSE, rdma_establish, ESTABLISHED on the
     * passive side, then a disconnect seen by both. */
    EXPECT(rdma_create_id(cch, &client, NULL, RDMA_PS_TCP) == 0);
    EXPECT(rdma_resolve_addr(client, NULL, active->ai_dst_addr, 2000) == 0);
    rdma_ack_cm_event(next_event(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
    EXPECT(rdma_resolve_route(client, 2000) == 0);
    rdma_ack_cm_event(next_event(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    EXPECT(rdma_connect(client, &param) == 0);
    e = next_event(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
    child = e->id;
    rdma_ack_cm_event(e);
    struct rdma_conn_param reply = {.private_data = "welcome", .private_data_len = 8, .responder_resources = 1,
                                    .initiator_depth = 1, .rnr_retry_count = 7, .qp_num = 0x456};
    EXPECT(rdma_accept(child, &reply) == 0);
    e = next_event(cch, RDMA_CM_EVENT_CONNECT_RESPONSE);
    EXPECT(e->param.conn.qp_num == 0x456 && strcmp(e->param.conn.private_data, "welcome") == 0);
    rdma_ack_cm_event(e);
    EXPECT(rdma_establish(client) == 0);
    rdma_ack_cm_event(next_event(sch, RDMA_CM_EVENT_ESTABLISHED));
    EXPECT(rdma_disconnect(client) == 0);
    rdma_ack_cm_event(next_event(cch, RDMA_CM_EVENT_DISCONNECTED));
    rdma_ack_cm_event(next_event(sch, RDMA_CM_EVENT_DISCONNECTED));
    EXPECT(rdma_disconnect(child) == 0); /* already disconnected by the peer: nothing more */

    /* 3: migrating the passive id to the client's channel. */
    EXPECT(rdma_migrate_id(child, cch) == 0);
    EXPECT(child->channel == cch);

    EXPECT(rdma_destroy_id(child) == 0);
    EXPECT(rdma_destroy_id(client) == 0);
    EXPECT(rdma_destroy_id(listen_id) == 0);
    rdma_destroy_event_channel(sch);
    rdma_destroy_event_channel(cch);
    rdma_freeaddrinfo(passive);
    rdma_freeaddrinfo(active);
    printf("cm_calls: ok\n");
    return 0;
}
