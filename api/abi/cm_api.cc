// cxv's librdmacm.so.1, the calls: rdma-core's rdma_* names (librdmacm.map) with the
// return conventions of their man pages: 0, or -1 with errno set. Ids made with no
// event channel (rdma_create_ep, rdma_create_id(NULL, ...)) are synchronous: each call
// waits for its own event, as rdma_cm(7) describes.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "api/abi/cm.h"
#include "base/unique_fd.h"

using namespace cxv::cm;

namespace {

socklen_t addr_len(const sockaddr* a) {
    return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int take_device(cm_id* c) {
    if (c->id.verbs != nullptr) return 0;
    int err = 0;
    c->id.verbs = device(&err);
    if (c->id.verbs == nullptr) return fail(err != 0 ? err : ENODEV);
    c->id.port_num = 1;
    return 0;
}

bool wildcard(const sockaddr* a) {
    if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == INADDR_ANY;
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

// rdma_resolve_addr of an id not yet bound binds it, as rdma_cm does: to the source
// address given or, where none (or a wildcard) is, to the one the kernel routes `dst`
// from, with the port given or one of its own. rdma_get_local_addr then reads it, before
// any connection (libfabric's verbs provider takes its endpoints' source addresses
// from it), and rdma_connect connects from that socket. Where no route to `dst` is
// found, the id stays unbound and the connection's own source is taken when it comes.
int bind_source(cm_id* c, const sockaddr* src, const sockaddr* dst) {
    sockaddr_storage local{};
    const bool given = src != nullptr && src->sa_family == dst->sa_family;
    if (given) std::memcpy(&local, src, addr_len(src));
    if (!given || wildcard(reinterpret_cast<const sockaddr*>(&local))) {
        const cxv::unique_fd probe(::socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!probe) return -1;
        sockaddr_storage routed{};
        socklen_t len = sizeof routed;
        const bool found = ::connect(probe.get(), dst, addr_len(dst)) == 0 &&
                           ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&routed), &len) == 0;
        if (!found) return 0;
        const in_port_t port = given ? reinterpret_cast<const sockaddr_in*>(src)->sin_port : 0;
        local = routed;
        reinterpret_cast<sockaddr_in*>(&local)->sin_port = port;  // sin6_port at the same offset
    }
    return rdma_bind_addr(&c->id, reinterpret_cast<sockaddr*>(&local));
}

}  // namespace

// --- event channels and events ------------------------------------------------------------

CXV_CM_EXPORT rdma_event_channel* rdma_create_event_channel() {
    std::lock_guard lock(mu);
    channel* ch = new_channel();
    return ch != nullptr ? &ch->ch : nullptr;
}

CXV_CM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
    std::lock_guard lock(mu);
    delete_channel(reinterpret_cast<cxv::cm::channel*>(channel));
}

CXV_CM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
    if (channel == nullptr || event == nullptr) return fail(EINVAL);
    cm_event* e = nullptr;
    if (take_event(reinterpret_cast<cxv::cm::channel*>(channel), &e) != 0) return -1;
    *event = &e->ev;
    return 0;
}

CXV_CM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
    if (event == nullptr) return fail(EINVAL);
    delete reinterpret_cast<cm_event*>(event);
    return 0;
}

CXV_CM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
    static const char* const names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
        "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
        "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
        "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
        "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
    const auto i = static_cast<unsigned>(event);
    return i < sizeof names / sizeof names[0] ? names[i] : "UNKNOWN EVENT";
}

// rpoll(3) is rsockets' poll; these programs give it only ordinary fds (the event
// channel's), for which it is poll(2). rsockets themselves are not offered.
CXV_CM_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return ::poll(fds, nfds, timeout); }

// --- ids -----------------------------------------------------------------------------------

CXV_CM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                 rdma_port_space ps) {
    ibv_qp_type type;
    switch (ps) {
    case RDMA_PS_TCP: type = IBV_QPT_RC; break;
    case RDMA_PS_UDP: type = IBV_QPT_UD; break;
    case RDMA_PS_IB: type = IBV_QPT_RC; break;
    default: return fail(EINVAL);
    }
    auto* c = new (std::nothrow) cm_id;
    if (c == nullptr) return fail(ENOMEM);
    if (channel == nullptr) {
        std::lock_guard lock(mu);
        cxv::cm::channel* own = new_channel();
        if (own == nullptr) {
            delete c;
            return -1;
        }
        channel = &own->ch;
        c->sync = true;
    }
    c->id.channel = channel;
    c->id.context = context;
    c->id.ps = ps;
    c->id.qp_type = type;
    c->psn = random_psn();
    *id = &c->id;
    return 0;
}

CXV_CM_EXPORT int rdma_destroy_id(rdma_cm_id* id) {
    cm_id* c = of(id);
    if (c->id.event != nullptr) {
        rdma_ack_cm_event(c->id.event);
        c->id.event = nullptr;
    }
    std::lock_guard lock(mu);
    const long long closing = trace_clock();  // a listener's: from here on nobody listens
    forget(c);
    if (c->st == state::listening) {
        trace("unlisten", &c->id.route.addr.src_addr, closing);
        drop_incoming(c);
    }
    auto* ch = reinterpret_cast<channel*>(c->id.channel);
    // Events of this id still queued go with it.
    for (auto it = ch->queue.begin(); it != ch->queue.end();) {
        if ((*it)->ev.id == id && (*it)->ev.event != RDMA_CM_EVENT_CONNECT_REQUEST) {
            delete *it;
            it = ch->queue.erase(it);
            drop_count(ch);
        } else {
            ++it;
        }
    }
    if (c->sync) delete_channel(ch);
    delete c;
    return 0;
}

CXV_CM_EXPORT int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
    cm_id* c = of(id);
    std::lock_guard lock(mu);
    auto* from = reinterpret_cast<cxv::cm::channel*>(c->id.channel);
    cxv::cm::channel* to = nullptr;
    if (channel == nullptr) {
        to = new_channel();
        if (to == nullptr) return -1;
    } else {
        to = reinterpret_cast<cxv::cm::channel*>(channel);
    }
    if (to == from) return 0;  // already there
    for (auto it = from->queue.begin(); it != from->queue.end();) {
        if ((*it)->ev.id == id) {
            to->queue.push_back(*it);
            add_count(to);
            it = from->queue.erase(it);
            drop_count(from);
        } else {
            ++it;
        }
    }
    if (c->sync) delete_channel(from);
    c->sync = channel == nullptr;
    c->id.channel = &to->ch;
    return 0;
}

CXV_CM_EXPORT int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
    cm_id* c = of(id);
    if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) return fail(EAFNOSUPPORT);
    if (c->st != state::idle) return fail(EINVAL);
    if (take_device(c) != 0) return -1;
    cxv::unique_fd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return -1;
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), addr, addr_len(addr)) != 0) return fail(errno);
    socklen_t len = sizeof c->id.route.addr.src_storage;
    ::getsockname(fd.get(), &c->id.route.addr.src_addr, &len);
    c->sock = fd.release();  // the id's from here on (closed with it)
    c->st = state::bound;
    return 0;
}

CXV_CM_EXPORT int rdma_listen(rdma_cm_id* id, int backlog) {
    cm_id* c = of(id);
    if (c->st != state::bound) return fail(EINVAL);
    if (::listen(c->sock, backlog > 0 ? backlog : 16) != 0) return -1;
    trace("listen", &c->id.route.addr.src_addr);
    std::lock_guard lock(mu);
    c->st = state::listening;
    watch(c);
    return 0;
}

// Any address is the function of the rule in cm.h: resolved at once.
CXV_CM_EXPORT int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int) {
    cm_id* c = of(id);
    if (dst_addr == nullptr || (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6)) {
        return fail(EAFNOSUPPORT);
    }
    if (take_device(c) != 0) return -1;
    std::memcpy(&c->id.route.addr.dst_storage, dst_addr, addr_len(dst_addr));
    if (c->st == state::idle && bind_source(c, src_addr, dst_addr) != 0) return -1;
    {
        std::lock_guard lock(mu);
        queue_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
    return wait_sync(c);
}

CXV_CM_EXPORT int rdma_resolve_route(rdma_cm_id* id, int) {
    cm_id* c = of(id);
    if (c->id.verbs == nullptr) return fail(EINVAL);
    {
        std::lock_guard lock(mu);
        queue_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
    }
    return wait_sync(c);
}

CXV_CM_EXPORT int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
    if (level == RDMA_OPTION_ID) {
        switch (optname) {
        case RDMA_OPTION_ID_TOS:
        case RDMA_OPTION_ID_REUSEADDR:
        case RDMA_OPTION_ID_AFONLY:
            return 0;  // accepted; the model's traffic class and the TCP port are not changed
        case RDMA_OPTION_ID_ACK_TIMEOUT:
            if (optval == nullptr || optlen != sizeof(std::uint8_t)) return fail(EINVAL);
            of(id)->ack_timeout = std::min<std::uint8_t>(31, *static_cast<std::uint8_t*>(optval));
            return 0;
        default:
            return fail(EINVAL);
        }
    }
    if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) return fail(ENOSYS);
    return fail(EINVAL);
}

CXV_CM_EXPORT int rdma_notify(rdma_cm_id*, ibv_event_type) { return 0; }

CXV_CM_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
    int err = 0;
    ibv_context* ctx = device(&err);
    auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
    if (list == nullptr) return nullptr;
    list[0] = ctx;
    if (num_devices != nullptr) *num_devices = ctx != nullptr ? 1 : 0;
    return list;
}
CXV_CM_EXPORT void rdma_free_devices(ibv_context** list) { std::free(list); }
