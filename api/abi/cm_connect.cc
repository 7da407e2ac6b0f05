// cxv's librdmacm.so.1: QPs on ids, connecting, accepting and disconnecting
// (rdma_connect(3), rdma_accept(3), rdma_disconnect(3)), and the synchronous endpoint
// calls (rdma_getaddrinfo(3), rdma_create_ep(3), rdma_get_request(3)).
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "api/abi/cm.h"

using namespace cxv::cm;

namespace {

// The CQs rdma_create_qp makes when the attributes name none, each with a completion
// channel of its own (rdma_get_send_comp/rdma_get_recv_comp wait on those).
// The CQs the caller did not give (each with a completion channel of its own, what
// rdma_get_send_comp/rdma_get_recv_comp wait on); a CQ the caller gave is kept.
int make_cqs(cm_id* c, ibv_qp_init_attr* attr) {
    ibv_context* ctx = c->id.verbs;
    if (attr->recv_cq == nullptr) {
        c->owns_recv_cq = true;
        c->id.recv_cq_channel = ibv_create_comp_channel(ctx);
        if (c->id.recv_cq_channel == nullptr) return -1;
        c->id.recv_cq = ibv_create_cq(ctx, static_cast<int>(std::max(1u, attr->cap.max_recv_wr)), c,
                                      c->id.recv_cq_channel, 0);
        if (c->id.recv_cq == nullptr) return -1;
    }
    if (attr->send_cq == nullptr) {
        c->owns_send_cq = true;
        c->id.send_cq_channel = ibv_create_comp_channel(ctx);
        if (c->id.send_cq_channel == nullptr) return -1;
        c->id.send_cq = ibv_create_cq(ctx, static_cast<int>(std::max(1u, attr->cap.max_send_wr)), c,
                                      c->id.send_cq_channel, 0);
        if (c->id.send_cq == nullptr) return -1;
    }
    return 0;
}

void drop_cqs(cm_id* c) {
    if (c->owns_recv_cq) {
        if (c->id.recv_cq != nullptr) ibv_destroy_cq(c->id.recv_cq);
        if (c->id.recv_cq_channel != nullptr) ibv_destroy_comp_channel(c->id.recv_cq_channel);
        c->id.recv_cq = nullptr;
        c->id.recv_cq_channel = nullptr;
        c->owns_recv_cq = false;
    }
    if (c->owns_send_cq) {
        if (c->id.send_cq != nullptr) ibv_destroy_cq(c->id.send_cq);
        if (c->id.send_cq_channel != nullptr) ibv_destroy_comp_channel(c->id.send_cq_channel);
        c->id.send_cq = nullptr;
        c->id.send_cq_channel = nullptr;
        c->owns_send_cq = false;
    }
}

// Connects the id's socket to its destination, bounded: 0, or the errno of the failure
// (ETIMEDOUT after 3 s).
int tcp_connect(cm_id* c) {
    sockaddr* dst = &c->id.route.addr.dst_addr;
    // An id bound with rdma_bind_addr connects from its bound socket.
    int fd = c->sock;
    c->sock = -1;
    if (fd >= 0) {
        ::fcntl(fd, F_SETFL, O_NONBLOCK);
    } else {
        fd = ::socket(dst->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    }
    if (fd < 0) return errno;
    const socklen_t len = dst->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    int err = 0;
    if (::connect(fd, dst, len) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            const int n = ::poll(&p, 1, 3000);
            socklen_t el = sizeof err;
            if (n == 0) {
                err = ETIMEDOUT;
            } else {
                err = 0;
                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
            }
        }
    }
    if (err != 0) {
        ::close(fd);
        return err;
    }
    const int flags = 0;
    ::fcntl(fd, F_SETFL, flags);  // blocking from here on
    socklen_t sl = sizeof c->id.route.addr.src_storage;
    ::getsockname(fd, &c->id.route.addr.src_addr, &sl);
    c->sock = fd;
    c->rx_len = 0;
    return 0;
}

}  // namespace

// --- QPs -----------------------------------------------------------------------------------

namespace {

// rdma_create_qp and rdma_create_qp_ex: the QP made with `attr` (and, for the extended
// call, `ex`'s further attributes), with CQs of its own where the caller gave none.
int create_qp(cm_id* c, ibv_pd* pd, ibv_qp_init_attr* attr, const ibv_qp_init_attr_ex* ex) {
    if (c->id.verbs == nullptr || attr == nullptr) return fail(EINVAL);
    if (c->id.qp != nullptr) return fail(EINVAL);  // one QP per id, as rdma-core has it
    if (pd == nullptr) pd = c->id.pd != nullptr ? c->id.pd : default_pd(c->id.verbs);
    if (pd == nullptr) return -1;
    if (attr->qp_type != c->id.qp_type) return fail(EINVAL);
    if (attr->send_cq == nullptr || attr->recv_cq == nullptr) {
        if (make_cqs(c, attr) != 0) {
            const int saved = errno;
            drop_cqs(c);
            return fail(saved);
        }
        if (attr->send_cq == nullptr) attr->send_cq = c->id.send_cq;
        if (attr->recv_cq == nullptr) attr->recv_cq = c->id.recv_cq;
    }
    ibv_qp* qp = nullptr;
    if (ex == nullptr) {
        qp = ibv_create_qp(pd, attr);
    } else {
        ibv_qp_init_attr_ex x = *ex;
        x.send_cq = attr->send_cq;
        x.recv_cq = attr->recv_cq;
        x.pd = pd;
        x.comp_mask |= IBV_QP_INIT_ATTR_PD;
        qp = ibv_create_qp_ex(c->id.verbs, &x);
        if (qp != nullptr) attr->cap = x.cap;
    }
    if (qp == nullptr) {
        const int saved = errno;
        drop_cqs(c);
        return fail(saved);
    }
    // The worker moves an id's QP to the error state when the peer goes (under mu): the
    // QP is published, moved and withdrawn under mu too.
    std::unique_lock lock(mu);
    c->id.qp = qp;
    c->id.pd = pd;
    c->id.send_cq = attr->send_cq;
    c->id.recv_cq = attr->recv_cq;
    c->id.srq = attr->srq;
    // rdma_create_qp(3): the QP is made ready for connecting (INIT); a UD QP is ready to
    // send (RTS) at once.
    int r = move_qp(c, IBV_QPS_INIT);
    if (r == 0 && c->id.qp_type == IBV_QPT_UD) r = move_qp(c, IBV_QPS_RTR) == 0 ? move_qp(c, IBV_QPS_RTS) : -1;
    if (r != 0) {
        const int saved = errno;
        c->id.qp = nullptr;
        lock.unlock();
        ibv_destroy_qp(qp);
        drop_cqs(c);
        return fail(saved);
    }
    return 0;
}

}  // namespace

CXV_CM_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
    return create_qp(of(id), pd, attr, nullptr);
}

// rdma_create_qp_ex(3): the extended attributes as far as cxv's libibverbs makes QPs
// (a PD, the ibv_wr_* send operations: ibv_create_qp_ex(3)); anything more (XRC, TSO,
// create flags, ...) is refused.
CXV_CM_EXPORT int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
    if (attr == nullptr) return fail(EINVAL);
    constexpr std::uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if ((attr->comp_mask & ~known) != 0) return fail(EOPNOTSUPP);
    ibv_qp_init_attr a{attr->qp_context, attr->send_cq, attr->recv_cq, attr->srq, attr->cap, attr->qp_type, attr->sq_sig_all};
    ibv_pd* pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) != 0 ? attr->pd : nullptr;
    if (create_qp(of(id), pd, &a, attr) != 0) return -1;
    attr->cap = a.cap;
    attr->send_cq = a.send_cq;
    attr->recv_cq = a.recv_cq;
    return 0;
}

CXV_CM_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
    cm_id* c = of(id);
    ibv_qp* qp = nullptr;
    {
        std::lock_guard lock(mu);  // the worker is not moving it (peer_gone) meanwhile
        qp = std::exchange(c->id.qp, nullptr);
    }
    if (qp != nullptr) ibv_destroy_qp(qp);
    drop_cqs(c);
}

CXV_CM_EXPORT int rdma_create_srq(rdma_cm_id*, ibv_pd*, ibv_srq_init_attr*) { return fail(EOPNOTSUPP); }
CXV_CM_EXPORT void rdma_destroy_srq(rdma_cm_id*) {}

CXV_CM_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
    cm_id* c = of(id);
    if (qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
    ibv_qp_state to = qp_attr->qp_state;
    std::lock_guard lock(mu);
    return qp_attrs(c, to, *qp_attr, *qp_attr_mask);
}

// --- connecting ----------------------------------------------------------------------------

CXV_CM_EXPORT int rdma_connect(rdma_cm_id* id, rdma_conn_param* param) {
    cm_id* c = of(id);
    if (c->id.verbs == nullptr || (c->st != state::idle && c->st != state::bound)) return fail(EINVAL);
    const bool ud = c->id.qp_type == IBV_QPT_UD;
    wire_msg m{};
    if (param != nullptr) {
        const unsigned limit = ud ? kUdConnectPrivate : kConnectPrivate;
        if (param->private_data_len > limit) return fail(EINVAL);
        if (param->private_data_len != 0) std::memcpy(m.private_data, param->private_data, param->private_data_len);
        copy_conn_param(m, *param);
    } else {
        m.responder_resources = m.initiator_depth = 1;
        m.retry_count = m.rnr_retry_count = 7;
    }
    const long long began = trace_clock();
    const int err = tcp_connect(c);
    trace(err == 0 ? "connect" : err == ECONNREFUSED ? "refused" : "unreachable", &c->id.route.addr.dst_addr, 0,
          began);
    std::unique_lock lock(mu);
    if (err == ECONNREFUSED) {
        c->st = state::rejected;
        queue_event(c, RDMA_CM_EVENT_REJECTED, kRejectNoListener);
    } else if (err != 0) {
        c->st = state::rejected;
        queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -err);
    } else {
        fill_local(c, m);
        if (c->id.qp == nullptr && param != nullptr) m.qpn = param->qp_num;
        m.type = msg_type::req;
        // What the RTR and RTS steps read back: our own request's retry counts.
        c->peer.retry_count = m.retry_count;
        if (send_msg(c->sock, m) != 0) {
            const int saved = errno;
            forget(c);
            return fail(saved);
        }
        c->st = state::connecting;
        c->reply_deadline = std::chrono::steady_clock::now() + kReplyTimeout;
        watch(c);
    }
    lock.unlock();
    return wait_sync(c);
}

CXV_CM_EXPORT int rdma_establish(rdma_cm_id* id) {
    cm_id* c = of(id);
    std::lock_guard lock(mu);
    if (c->st != state::connect_response) return fail(EINVAL);
    if (finish_active(c, false) != 0) return fail(ECONNRESET);
    return 0;
}

CXV_CM_EXPORT int rdma_accept(rdma_cm_id* id, rdma_conn_param* param) {
    cm_id* c = of(id);
    std::unique_lock lock(mu);
    if (c->st == state::disconnected) return fail(ECONNRESET);
    if (c->st != state::req_received) return fail(EINVAL);
    const bool ud = c->id.qp_type == IBV_QPT_UD;
    wire_msg m{};
    fill_local(c, m);
    m.type = msg_type::rep;
    if (param != nullptr) {
        if (param->private_data_len > (ud ? kUdAcceptPrivate : kAcceptPrivate)) return fail(EINVAL);
        if (param->private_data_len != 0) std::memcpy(m.private_data, param->private_data, param->private_data_len);
        copy_conn_param(m, *param);
        m.retry_count = c->peer.retry_count;  // a REP carries none of its own: the REQ's stands
        if (c->id.qp == nullptr) m.qpn = param->qp_num;
    } else {
        m.retry_count = c->peer.retry_count;
        m.responder_resources = c->peer.initiator_depth;
        m.initiator_depth = c->peer.responder_resources;
        m.rnr_retry_count = 7;
    }
    if (!ud) {
        // Our RTS takes the retry and RNR retry counts of the peer's REQ (IBTA 12.7.38,
        // 12.7.39); the read depths are what both ends allow.
        c->peer.responder_resources = std::min(c->peer.responder_resources, m.initiator_depth);
        c->peer.initiator_depth = std::min(c->peer.initiator_depth, m.responder_resources);
        if (c->id.qp != nullptr && (move_qp(c, IBV_QPS_RTR) != 0 || move_qp(c, IBV_QPS_RTS) != 0)) return -1;
    }
    if (send_msg(c->sock, m) != 0) return fail(ECONNRESET);
    c->st = ud ? state::established : state::accepted;
    watch(c);
    lock.unlock();
    return ud ? 0 : wait_sync(c);
}

namespace {

// A REJ with `reason` (IBTA 12.6.7) and the private data, for an id holding a request.
int reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len, int reason) {
    cm_id* c = of(id);
    if (private_data_len > kRejectPrivate) return fail(EINVAL);
    std::lock_guard lock(mu);
    if (c->st != state::req_received) return fail(EINVAL);
    wire_msg m{};
    fill_local(c, m);
    m.type = msg_type::rej;
    m.reason = static_cast<std::uint8_t>(reason);
    if (private_data_len != 0) std::memcpy(m.private_data, private_data, private_data_len);
    m.private_data_len = private_data_len;
    send_msg(c->sock, m);
    c->st = state::rejected;
    forget(c);
    return 0;
}

}  // namespace

CXV_CM_EXPORT int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len, kRejectConsumer);
}

// rdma_reject_ece(3): the reject rdma-core sends when the ECE options do not match, reason
// 35 (vendor option not supported); cxv's connections carry no ECE options to compare.
CXV_CM_EXPORT int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
    return reject(id, private_data, private_data_len, kRejectVendorOption);
}

CXV_CM_EXPORT int rdma_disconnect(rdma_cm_id* id) {
    cm_id* c = of(id);
    std::unique_lock lock(mu);
    if (c->st == state::disconnected) {
        // The peer's DREQ came first: the QP still goes to the error state (librdmacm
        // moves it here; its outstanding WRs flush), as the worker left it.
        move_qp(c, IBV_QPS_ERR);
        return 0;
    }
    if (c->st != state::established && c->st != state::accepted && c->st != state::connect_response) {
        return fail(EINVAL);
    }
    move_qp(c, IBV_QPS_ERR);
    if (c->sock >= 0) {
        wire_msg m{};
        fill_local(c, m);
        m.type = msg_type::dreq;
        send_msg(c->sock, m);
    }
    c->st = state::disconnected;
    queue_event(c, RDMA_CM_EVENT_DISCONNECTED, 0);
    lock.unlock();
    return wait_sync(c);
}

// --- the synchronous endpoint calls ----------------------------------------------------

namespace {

// A copy of `len` bytes of address in `*to` (malloc'd, as rdma_freeaddrinfo frees it).
bool copy_addr(sockaddr*& to, socklen_t& to_len, const sockaddr* from, socklen_t len) {
    to = static_cast<sockaddr*>(std::malloc(len));
    if (to == nullptr) return false;
    std::memcpy(to, from, len);
    to_len = len;
    return true;
}

// Neither node nor service: the hints' own addresses and fields, as rdma-core answers
// (libfabric asks so, with both addresses in the hints).
int addrinfo_from_hints(const rdma_addrinfo& hints, rdma_addrinfo** res) {
    auto* ai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    if (ai == nullptr) return fail(ENOMEM);
    ai->ai_flags = hints.ai_flags;
    ai->ai_family = hints.ai_family;
    ai->ai_qp_type = hints.ai_qp_type;
    ai->ai_port_space = hints.ai_port_space;
    const bool ok =
        (hints.ai_dst_len == 0 || copy_addr(ai->ai_dst_addr, ai->ai_dst_len, hints.ai_dst_addr, hints.ai_dst_len)) &&
        (hints.ai_src_len == 0 || copy_addr(ai->ai_src_addr, ai->ai_src_len, hints.ai_src_addr, hints.ai_src_len));
    if (!ok) {
        rdma_freeaddrinfo(ai);
        return fail(ENOMEM);
    }
    *res = ai;
    return 0;
}

}  // namespace

// rdma_getaddrinfo(3): the first address getaddrinfo(3) gives for node/service, as the
// source of a passive (RAI_PASSIVE) or the destination of an active endpoint; with
// neither, the addresses the hints carry (-1 and EINVAL without hints either). Returns
// 0, getaddrinfo's error code, or -1 with errno.
CXV_CM_EXPORT int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                                   rdma_addrinfo** res) {
    if (node == nullptr && service == nullptr) {
        if (hints == nullptr || res == nullptr) return fail(EINVAL);
        return addrinfo_from_hints(*hints, res);
    }
    addrinfo h{};
    h.ai_socktype = SOCK_STREAM;
    h.ai_family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
    const int flags = hints != nullptr ? hints->ai_flags : 0;
    if ((flags & RAI_PASSIVE) != 0) h.ai_flags |= AI_PASSIVE;
    if ((flags & RAI_NUMERICHOST) != 0) h.ai_flags |= AI_NUMERICHOST;
    addrinfo* got = nullptr;
    if (const int r = ::getaddrinfo(node, service, &h, &got); r != 0) return r;
    auto* ai = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    auto* addr = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
    if (ai == nullptr || addr == nullptr) {
        std::free(ai);
        std::free(addr);
        ::freeaddrinfo(got);
        errno = ENOMEM;
        return EAI_MEMORY;
    }
    std::memcpy(addr, got->ai_addr, got->ai_addrlen);
    ai->ai_flags = flags;
    ai->ai_family = got->ai_family;
    ai->ai_port_space = hints != nullptr && hints->ai_port_space != 0 ? hints->ai_port_space : RDMA_PS_TCP;
    ai->ai_qp_type = hints != nullptr && hints->ai_qp_type != 0 ? hints->ai_qp_type
                     : ai->ai_port_space == RDMA_PS_UDP                ? IBV_QPT_UD
                                                                       : IBV_QPT_RC;
    if ((flags & RAI_PASSIVE) != 0) {
        ai->ai_src_addr = addr;
        ai->ai_src_len = got->ai_addrlen;
    } else {
        ai->ai_dst_addr = addr;
        ai->ai_dst_len = got->ai_addrlen;
        if (hints != nullptr && hints->ai_src_addr != nullptr && hints->ai_src_len <= sizeof(sockaddr_storage)) {
            ai->ai_src_addr = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
            if (ai->ai_src_addr != nullptr) {
                std::memcpy(ai->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
                ai->ai_src_len = hints->ai_src_len;
            }
        }
    }
    ::freeaddrinfo(got);
    *res = ai;
    return 0;
}

CXV_CM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
    while (res != nullptr) {
        rdma_addrinfo* next = res->ai_next;
        std::free(res->ai_src_addr);
        std::free(res->ai_dst_addr);
        std::free(res->ai_src_canonname);
        std::free(res->ai_dst_canonname);
        std::free(res->ai_route);
        std::free(res->ai_connect);
        std::free(res);
        res = next;
    }
}

CXV_CM_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (id == nullptr || res == nullptr) return fail(EINVAL);
    if (res->ai_qp_type != IBV_QPT_RC && res->ai_qp_type != IBV_QPT_UC && res->ai_qp_type != IBV_QPT_UD) {
        return fail(EOPNOTSUPP);  // XRC and the rest: cxv's libibverbs makes no such QPs
    }
    rdma_cm_id* made = nullptr;
    if (rdma_create_id(nullptr, &made, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0) return -1;
    cm_id* c = of(made);
    c->id.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    int r = 0;
    if ((res->ai_flags & RAI_PASSIVE) != 0) {
        r = rdma_bind_addr(made, res->ai_src_addr);
        if (r == 0 && qp_init_attr != nullptr) c->pending_qp_attr = *qp_init_attr;
        c->pending_pd = pd;
        c->id.pd = pd;
    } else {
        r = rdma_resolve_addr(made, res->ai_src_addr, res->ai_dst_addr, 2000);
        if (r == 0) r = rdma_resolve_route(made, 2000);
        if (r == 0) c->id.pd = pd;
        if (r == 0 && qp_init_attr != nullptr) {
            qp_init_attr->qp_type = c->id.qp_type;
            r = rdma_create_qp(made, pd, qp_init_attr);
        }
    }
    if (r != 0) {
        const int saved = errno;
        rdma_destroy_ep(made);
        return fail(saved);
    }
    *id = made;
    return 0;
}

CXV_CM_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
    if (id->qp != nullptr) rdma_destroy_qp(id);
    rdma_destroy_id(id);
}

CXV_CM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
    cm_id* l = of(listen);
    if (!l->sync || l->st != state::listening) return fail(EINVAL);
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(l->id.channel, &e) != 0) return -1;
    if (e->status != 0) {
        const int s = e->status;
        rdma_ack_cm_event(e);
        return fail(s < 0 ? -s : s);
    }
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(e);
        return fail(EINVAL);
    }
    rdma_cm_id* got = e->id;
    if (l->pending_qp_attr) {
        ibv_qp_init_attr a = *l->pending_qp_attr;
        a.qp_type = got->qp_type;
        if (rdma_create_qp(got, l->pending_pd, &a) != 0) {
            const int saved = errno;
            rdma_ack_cm_event(e);
            rdma_reject(got, nullptr, 0);
            rdma_destroy_id(got);
            return fail(saved);
        }
    }
    got->event = e;
    *id = got;
    return 0;
}
