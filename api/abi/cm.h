// cxv's librdmacm.so.1: what its parts share. A connection manager over a TCP side
// channel between the two ends' IP addresses (no kernel RDMA CM): the TCP connection
// carries the connect request, the reply or reject, the ready-to-use and the disconnect,
// each as one `wire_msg`. QPs, CQs and PDs are made with cxv's libibverbs.so.1 (linked,
// not rdma-core's), so the handles the programs see are that library's.
//
// Address-to-function rule: every IP address (the tests use 127.0.0.1) maps to the first
// function cxv's libibverbs lists (CXV_DEVICE chooses it), port 1. The port's LID, GID 0,
// link layer and active MTU travel in the messages, and each end builds its QP's address
// vector from the other's: by LID on InfiniBand, by GID index 0 (the link-local GID) on
// RoCE.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "api/abi/cm_wire.h"

#define CXV_CM_EXPORT extern "C" __attribute__((visibility("default")))

namespace cxv::cm {


struct channel;

enum class state { idle, bound, listening, incoming, req_received, connecting, connect_response, accepted,
                   established, disconnected, rejected };

// An rdma_cm_id and what the manager keeps about it (the handle first, so it converts
// back).
struct cm_id {
    rdma_cm_id id{};
    state st = state::idle;
    int sock = -1;                   // the listener or the connection
    // The message being read from `sock`: the worker takes what has come and never waits
    // for the rest, so a peer that stops half-way holds up nobody but itself.
    std::array<std::byte, sizeof(wire_msg)> rx{};
    std::size_t rx_len = 0;
    bool sync = false;               // made with no channel: a channel of its own
    cm_id* listener = nullptr;       // for an incoming connection
    wire_msg peer{};                 // the peer's REQ (passive) or REP (active), host order
    std::uint32_t psn = 0;
    std::chrono::steady_clock::time_point reply_deadline{};  // while connecting
    std::uint8_t ack_timeout = 16;   // 4.096 us * 2^16 = 268 ms (RDMA_OPTION_ID_ACK_TIMEOUT)
    bool owns_send_cq = false, owns_recv_cq = false;  // made by rdma_create_qp, with their channels
    // rdma_create_ep on a passive endpoint: what rdma_get_request creates the QP with.
    std::optional<ibv_qp_init_attr> pending_qp_attr;
    ibv_pd* pending_pd = nullptr;
    // The multicast groups joined (rdma_join_multicast; cm_multicast.cc).
    struct group {
        sockaddr_storage addr{};
        ibv_gid mgid{};
        bool attached = false;  // the id's QP is in it (ibv_attach_mcast)
    };
    std::vector<group> groups;
};

// The id behind a handle (cm_id begins with it).
inline cm_id* of(rdma_cm_id* id) { return reinterpret_cast<cm_id*>(id); }

// A call's failure as librdmacm reports it: -1 with errno set.
inline int fail(int code) {
    errno = code;
    return -1;
}

struct cm_event {
    rdma_cm_event ev{};
    std::uint8_t private_data[kAcceptPrivate] = {};
};

struct channel {
    rdma_event_channel ch{};  // ch.fd: an eventfd (semaphore) counting queued events
    std::deque<cm_event*> queue;
};

// The one lock of the manager: ids, channels, and the worker's view of the sockets.
extern std::mutex mu;

// The function (see above) and its default PD, opened once.
ibv_context* device(int* err);
ibv_pd* default_pd(ibv_context* ctx);

// A connection's starting PSN (24 bits), drawn for each id, active or passive.
std::uint32_t random_psn();

channel* new_channel();              // mu held
void delete_channel(channel* ch);    // mu held
// Queues an event for `id` on `ch` (the id's own channel when null). Called with mu held.
void queue_event(cm_id* id, rdma_cm_event_type type, int status, const wire_msg* msg = nullptr,
                 cm_id* listen_id = nullptr, channel* ch = nullptr);
// Takes the next event of `ch`: blocking unless its fd is O_NONBLOCK. 0 or -1 and errno.
int take_event(channel* ch, cm_event** out);
// For a synchronous id (ucma_complete's part): waits for the id's next event and keeps
// it in id->event, acknowledging the one before; 0, or -1 with errno: ECONNREFUSED for
// REJECTED, else the event's status.
int wait_sync(cm_id* c);
// The channel fd's count, kept equal to the queue's length (mu held).
void add_count(channel* ch);
void drop_count(channel* ch);

// The sockets the worker thread watches: adds or wakes it after a change (mu held).
void watch(cm_id* id);
void forget(cm_id* id);  // stops watching and closes the id's socket (mu held)
bool alive(cm_id* id);
void drop_incoming(cm_id* listener);  // connections not yet requested (mu held)

// The rdma_conn_param fields a REQ or REP carries, by the same names in both: from a
// program's parameters into a message, or from a received message into an event. The
// private data itself is the caller's: its limit depends on the message.
template <typename To, typename From>
void copy_conn_param(To& to, const From& from) {
    to.private_data_len = from.private_data_len;
    to.responder_resources = from.responder_resources;
    to.initiator_depth = from.initiator_depth;
    to.retry_count = from.retry_count;
    to.rnr_retry_count = from.rnr_retry_count;
    to.srq = from.srq;
}

// Fills `m`'s address fields (QPN, LID, GID 0, MTU, link layer) from `id`'s port.
int fill_local(cm_id* id, wire_msg& m);
ibv_ah_attr peer_ah(cm_id* id);
// The QP's steps of rdma_init_qp_attr(3), from the peer's message.
int qp_attrs(cm_id* id, ibv_qp_state to, ibv_qp_attr& a, int& mask);
int move_qp(cm_id* id, ibv_qp_state to);

// Sends the RTU (active side, once the QP is ready) and, when `report`, queues
// ESTABLISHED. After a CONNECT_RESPONSE the program's rdma_establish sends it and no
// event follows, as with rdma_cm, whose ESTABLISHED comes only for its own QPs.
int finish_active(cm_id* id, bool report);

}  // namespace cxv::cm
