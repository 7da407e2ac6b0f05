// cxv's librdmacm.so.1, the machinery: the function and its PD, event channels, the
// side-channel messages, the QP steps, and the worker thread that reads every socket
// and turns what arrives into events (rdma_cm(7)).
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "api/abi/cm.h"
#include "base/unique_fd.h"

namespace cxv::cm {

std::mutex mu;

namespace {

ibv_context* g_ctx = nullptr;
ibv_pd* g_pd = nullptr;
// Never destroyed: the worker thread runs on while the process's exit handlers run.
struct lists {
    std::vector<cm_id*> watched;
    std::vector<channel*> channels;  // the live ones
    std::vector<int> to_close;
};
lists& g_lists = *new lists;
int g_wake = -1;
bool g_worker_started = false;

void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(g_wake, &one, sizeof one);
}

void start_worker();

}  // namespace

// The function and its default PD are opened once, by whichever thread asks first (a
// lock of their own: callers may or may not hold mu).
std::mutex g_device_mu;

ibv_context* device(int* err) {
    std::lock_guard lock(g_device_mu);
    if (g_ctx != nullptr) return g_ctx;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr || n == 0) {
        *err = list == nullptr ? errno : ENODEV;
        if (list != nullptr) ibv_free_device_list(list);
        return nullptr;
    }
    g_ctx = ibv_open_device(list[0]);
    *err = errno;
    ibv_free_device_list(list);
    return g_ctx;
}

ibv_pd* default_pd(ibv_context* ctx) {
    std::lock_guard lock(g_device_mu);
    if (g_pd == nullptr) g_pd = ibv_alloc_pd(ctx);
    return g_pd;
}

std::uint32_t random_psn() {
    static std::mutex gen_mu;  // the program's threads and the worker draw
    static std::mt19937 gen{std::random_device{}()};
    std::lock_guard lock(gen_mu);
    return gen() & 0xffffff;
}

channel* new_channel() {
    auto* ch = new (std::nothrow) channel;
    if (ch == nullptr) {
        errno = ENOMEM;
        return nullptr;
    }
    ch->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    if (ch->ch.fd < 0) {
        const int saved = errno;
        delete ch;
        errno = saved;
        return nullptr;
    }
    g_lists.channels.push_back(ch);
    return ch;
}

void delete_channel(channel* ch) {
    g_lists.channels.erase(std::remove(g_lists.channels.begin(), g_lists.channels.end(), ch), g_lists.channels.end());
    for (cm_event* e : ch->queue) delete e;
    ::close(ch->ch.fd);
    delete ch;
}

void queue_event(cm_id* id, rdma_cm_event_type type, int status, const wire_msg* msg, cm_id* listen_id,
                 channel* ch) {
    auto* e = new (std::nothrow) cm_event;
    if (e == nullptr) return;
    e->ev.id = &id->id;
    e->ev.listen_id = listen_id != nullptr ? &listen_id->id : nullptr;
    e->ev.event = type;
    e->ev.status = status;
    if (msg != nullptr) {
        std::memcpy(e->private_data, msg->private_data, msg->private_data_len);
        if (id->id.qp_type == IBV_QPT_UD) {
            auto& ud = e->ev.param.ud;
            ud.private_data = e->private_data;
            ud.private_data_len = msg->private_data_len;
            ud.qp_num = msg->qpn;
            ud.qkey = msg->qkey;
            if (type == RDMA_CM_EVENT_ESTABLISHED) ud.ah_attr = peer_ah(id);
        } else {
            auto& c = e->ev.param.conn;
            copy_conn_param(c, *msg);
            c.private_data = e->private_data;
            c.qp_num = msg->qpn;
        }
    }
    if (ch == nullptr) ch = reinterpret_cast<channel*>(id->id.channel);
    ch->queue.push_back(e);
    add_count(ch);
}

// The channel's count equals its queue's length: both change together under mu, so the
// fd is readable exactly while an event waits, and a read with mu held never blocks.
int take_event(channel* ch, cm_event** out) {
    for (;;) {
        int fd = -1;
        {
            std::unique_lock lock(mu);
            if (std::find(g_lists.channels.begin(), g_lists.channels.end(), ch) == g_lists.channels.end()) {
                // The channel was destroyed while this thread waited on it (rping's event
                // thread at exit). librdmacm's waiter stays blocked in read(2) on the
                // closed file until the process ends; so does this one.
                lock.unlock();
                for (;;) ::pause();
            }
            if (!ch->queue.empty()) {
                *out = ch->queue.front();
                ch->queue.pop_front();
                drop_count(ch);
                // As librdmacm does in rdma_get_cm_event, on the program's thread: a
                // connection that failed leaves the active side's QP in the error state.
                const rdma_cm_event_type type = (*out)->ev.event;
                if (type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_UNREACHABLE) {
                    move_qp(reinterpret_cast<cm_id*>((*out)->ev.id), IBV_QPS_ERR);
                }
                return 0;
            }
            fd = ch->ch.fd;
        }
        const int flags = ::fcntl(fd, F_GETFL);
        // EBADF: the channel was destroyed (its fd closed) since the check above; the next
        // round finds it gone and waits as librdmacm's reader does, rather than fail (rping's
        // event thread calls exit(3) on a failure, racing its main thread's exit).
        if (flags < 0 && errno == EBADF) continue;
        if (flags < 0) return -1;
        if ((flags & O_NONBLOCK) != 0) {
            errno = EAGAIN;
            return -1;
        }
        pollfd p{fd, POLLIN, 0};
        // Bounded, so that a destroyed channel is seen even if its fd is never ready.
        if (::poll(&p, 1, 1000) < 0 && errno != EINTR) return -1;
    }
}

int wait_sync(cm_id* c) {
    if (!c->sync) return 0;
    if (c->id.event != nullptr) {
        delete reinterpret_cast<cm_event*>(c->id.event);
        c->id.event = nullptr;
    }
    cm_event* e = nullptr;
    if (take_event(reinterpret_cast<channel*>(c->id.channel), &e) != 0) return -1;
    c->id.event = &e->ev;
    if (e->ev.status == 0) return 0;
    errno = e->ev.event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED
            : e->ev.status < 0                   ? -e->ev.status
                                                 : e->ev.status;
    return -1;
}

void drop_count(channel* ch) {
    std::uint64_t v = 0;
    [[maybe_unused]] auto n = ::read(ch->ch.fd, &v, sizeof v);
}

void add_count(channel* ch) {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(ch->ch.fd, &one, sizeof one);
}

void watch(cm_id* id) {
    if (std::find(g_lists.watched.begin(), g_lists.watched.end(), id) == g_lists.watched.end()) g_lists.watched.push_back(id);
    start_worker();
    wake();
}

void forget(cm_id* id) {
    g_lists.watched.erase(std::remove(g_lists.watched.begin(), g_lists.watched.end(), id), g_lists.watched.end());
    if (id->sock >= 0) {
        ::shutdown(id->sock, SHUT_RDWR);
        g_lists.to_close.push_back(id->sock);  // closed by the worker after its poll returns
        id->sock = -1;
        if (g_worker_started) {
            wake();
        } else {
            ::close(g_lists.to_close.back());
            g_lists.to_close.pop_back();
        }
    }
}

void drop_incoming(cm_id* l) {
    std::vector<cm_id*> gone;
    for (cm_id* id : g_lists.watched) {
        if (id->st == state::incoming && id->listener == l) gone.push_back(id);
    }
    for (cm_id* id : gone) {
        forget(id);
        delete id;
    }
}

bool alive(cm_id* id) { return std::find(g_lists.watched.begin(), g_lists.watched.end(), id) != g_lists.watched.end(); }

// --- messages and QP steps -----------------------------------------------------------------

int fill_local(cm_id* id, wire_msg& m) {
    ibv_port_attr pa{};
    if (ibv_query_port(id->id.verbs, id->id.port_num, &pa) != 0) return -1;
    ibv_gid g{};
    if (ibv_query_gid(id->id.verbs, id->id.port_num, 0, &g) != 0) std::memset(&g, 0, sizeof g);
    m.magic = kMagic;
    m.lid = pa.lid;
    m.link_layer = pa.link_layer;
    m.mtu = static_cast<std::uint8_t>(pa.active_mtu);
    std::memcpy(m.gid, g.raw, 16);
    m.qpn = id->id.qp != nullptr ? id->id.qp->qp_num : 0;
    m.psn = id->psn;
    m.qkey = RDMA_UDP_QKEY;
    return 0;
}

ibv_ah_attr peer_ah(cm_id* id) {
    ibv_ah_attr ah{};
    ah.port_num = id->id.port_num;
    ah.dlid = id->peer.lid;
    if (id->peer.link_layer == IBV_LINK_LAYER_ETHERNET || id->peer.lid == 0) {
        ah.is_global = 1;
        std::memcpy(ah.grh.dgid.raw, id->peer.gid, 16);
        ah.grh.sgid_index = 0;
        ah.grh.hop_limit = 64;
    }
    return ah;
}

int qp_attrs(cm_id* id, ibv_qp_state to, ibv_qp_attr& a, int& mask) {
    a = ibv_qp_attr{};
    a.qp_state = to;
    const bool ud = id->id.qp_type == IBV_QPT_UD;
    switch (to) {
    case IBV_QPS_INIT:
        a.pkey_index = 0;
        a.port_num = id->id.port_num;
        mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        if (ud) {
            a.qkey = RDMA_UDP_QKEY;
            mask |= IBV_QP_QKEY;
        } else {
            // As the kernel's CM: remote atomics too (rdma_cm users post them on RC).
            a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                                IBV_ACCESS_REMOTE_ATOMIC;
            mask |= IBV_QP_ACCESS_FLAGS;
        }
        return 0;
    case IBV_QPS_RTR:
        mask = IBV_QP_STATE;
        if (ud) return 0;
        if (id->peer.magic != kMagic) return errno = EINVAL, -1;
        {
            ibv_port_attr pa{};
            if (ibv_query_port(id->id.verbs, id->id.port_num, &pa) != 0) return -1;
            a.path_mtu = std::min(pa.active_mtu, static_cast<ibv_mtu>(id->peer.mtu));
        }
        a.dest_qp_num = id->peer.qpn;
        a.rq_psn = id->peer.psn;
        a.ah_attr = peer_ah(id);
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (id->id.qp_type == IBV_QPT_RC) {
            // The responder resources we give: the peer's initiator depth (IBTA 12.7.29).
            a.max_dest_rd_atomic = std::max<std::uint8_t>(1, id->peer.initiator_depth);
            a.min_rnr_timer = 12;  // 0.64 ms
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
        return 0;
    case IBV_QPS_RTS:
        a.sq_psn = id->psn;
        mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        if (id->id.qp_type == IBV_QPT_RC) {
            a.timeout = id->ack_timeout;
            a.retry_cnt = std::min<std::uint8_t>(7, id->peer.retry_count);
            a.rnr_retry = std::min<std::uint8_t>(7, id->peer.rnr_retry_count);
            a.max_rd_atomic = std::max<std::uint8_t>(1, id->peer.responder_resources);
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        return 0;
    case IBV_QPS_ERR:
        mask = IBV_QP_STATE;
        return 0;
    default:
        return errno = EINVAL, -1;
    }
}

int move_qp(cm_id* id, ibv_qp_state to) {
    if (id->id.qp == nullptr) return 0;
    ibv_qp_attr a;
    int mask = 0;
    if (qp_attrs(id, to, a, mask) != 0) return -1;
    const int r = ibv_modify_qp(id->id.qp, &a, mask);
    if (r != 0) return errno = r, -1;
    return 0;
}

int finish_active(cm_id* id, bool report) {
    wire_msg rtu{};
    fill_local(id, rtu);
    rtu.type = msg_type::rtu;
    if (send_msg(id->sock, rtu) != 0) return -1;
    id->st = state::established;
    if (report) queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, &id->peer);
    return 0;
}

// --- the worker ------------------------------------------------------------------------

namespace {

// Makes the id of a connection a listener accepted.
void on_accept(cm_id* l) {
    cxv::unique_fd fd(::accept4(l->sock, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) return;
    auto* c = new (std::nothrow) cm_id;
    if (c == nullptr) return;
    c->st = state::incoming;
    c->psn = random_psn();  // the passive side's own start, as rdma_cm draws one for each
    c->sock = fd.release();  // the id's from here on (closed with it)
    c->listener = l;
    g_lists.watched.push_back(c);
}

void peer_gone(cm_id* id) {
    switch (id->st) {
    case state::incoming:
        forget(id);
        delete id;
        return;
    case state::connecting:
        // The listener went away before it answered: as a REJ for no listener.
        id->st = state::rejected;
        queue_event(id, RDMA_CM_EVENT_REJECTED, kRejectNoListener);
        break;
    case state::accepted:
    case state::established:
    case state::connect_response:
        // The program's QP is left as it is (the kernel's CM does not touch a user QP on
        // a disconnect: rdma_disconnect moves it): this thread never modifies a QP the
        // program may be destroying.
        id->st = state::disconnected;
        queue_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
    case state::req_received:
        id->st = state::disconnected;  // rdma_accept will say ECONNRESET
        break;
    default:
        break;
    }
    forget(id);
}

void on_message(cm_id* id, wire_msg& m) {
    switch (m.type) {
    case msg_type::req:
        if (id->st != state::incoming) return;
        {
            cm_id* l = id->listener;
            id->peer = m;
            id->st = state::req_received;
            id->id.verbs = l->id.verbs;
            id->id.port_num = l->id.port_num;
            id->id.ps = l->id.ps;
            id->id.qp_type = l->id.qp_type;
            id->id.context = l->id.context;
            id->id.pd = l->id.pd;
            id->ack_timeout = l->ack_timeout;
            socklen_t len = sizeof id->id.route.addr.src_storage;
            ::getsockname(id->sock, &id->id.route.addr.src_addr, &len);
            len = sizeof id->id.route.addr.dst_storage;
            ::getpeername(id->sock, &id->id.route.addr.dst_addr, &len);
            if (l->sync) {
                channel* own = new_channel();
                if (own == nullptr) return peer_gone(id);
                id->sync = true;
                id->id.channel = &own->ch;
            } else {
                id->id.channel = l->id.channel;
            }
            queue_event(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &m, l, reinterpret_cast<channel*>(l->id.channel));
        }
        return;
    case msg_type::rep:
        if (id->st != state::connecting) return;
        {
            const std::uint8_t retry = id->peer.retry_count;  // ours, from our REQ
            id->peer = m;
            id->peer.retry_count = retry;
        }
        if (id->id.qp_type == IBV_QPT_UD) {
            id->st = state::established;
            queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, &m);
            return;
        }
        if (id->id.qp == nullptr) {
            // A QP of the program's own: it moves it and calls rdma_establish.
            id->st = state::connect_response;
            queue_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &m);
            return;
        }
        if (move_qp(id, IBV_QPS_RTR) != 0 || move_qp(id, IBV_QPS_RTS) != 0) {
            id->st = state::rejected;
            queue_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -errno);
            forget(id);
            return;
        }
        if (finish_active(id, true) != 0) peer_gone(id);
        return;
    case msg_type::rej:
        if (id->st != state::connecting) return;
        id->st = state::rejected;
        queue_event(id, RDMA_CM_EVENT_REJECTED, m.reason, &m);
        forget(id);
        return;
    case msg_type::rtu:
        if (id->st != state::accepted) return;
        id->st = state::established;
        queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
        return;
    case msg_type::dreq:
        if (id->st != state::established && id->st != state::accepted) return;
        id->st = state::disconnected;  // the QP as it is (see peer_gone)
        queue_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        return;
    }
}

// The REQs whose REP did not come in time.
void expire_requests() {
    const auto now = std::chrono::steady_clock::now();
    std::vector<cm_id*> late;
    for (cm_id* id : g_lists.watched) {
        if (id->st == state::connecting && now >= id->reply_deadline) late.push_back(id);
    }
    for (cm_id* id : late) {
        id->st = state::rejected;  // its QP goes to ERR when the program takes the event
        queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        forget(id);
    }
}

void run_worker() {
    std::vector<pollfd> fds;
    std::vector<cm_id*> who;
    int timeout = -1;
    for (;;) {
        {
            std::lock_guard lock(mu);
            fds.assign(1, pollfd{g_wake, POLLIN, 0});
            who.assign(1, nullptr);
            timeout = -1;
            const auto now = std::chrono::steady_clock::now();
            for (cm_id* id : g_lists.watched) {
                if (id->st == state::connecting) {
                    const auto left = std::chrono::ceil<std::chrono::milliseconds>(id->reply_deadline - now).count();
                    const int ms = static_cast<int>(std::max<long long>(0, left));
                    timeout = timeout < 0 ? ms : std::min(timeout, ms);
                }
                if (id->sock < 0) continue;
                fds.push_back(pollfd{id->sock, POLLIN, 0});
                who.push_back(id);
            }
        }
        if (::poll(fds.data(), fds.size(), timeout) < 0) continue;
        std::lock_guard lock(mu);
        expire_requests();
        if ((fds[0].revents & POLLIN) != 0) {
            std::uint64_t v;
            [[maybe_unused]] auto n = ::read(g_wake, &v, sizeof v);
        }
        for (std::size_t i = 1; i < fds.size(); ++i) {
            cm_id* id = who[i];
            if (fds[i].revents == 0 || !alive(id) || id->sock != fds[i].fd) continue;
            if (id->st == state::listening) {
                on_accept(id);
                continue;
            }
            // What has come of the message, without waiting for the rest (mu is held).
            const ssize_t r = ::recv(id->sock, id->rx.data() + id->rx_len, id->rx.size() - id->rx_len, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) {
                peer_gone(id);
                continue;
            }
            id->rx_len += static_cast<std::size_t>(r);
            if (id->rx_len < id->rx.size()) continue;
            id->rx_len = 0;
            wire_msg m{};
            std::memcpy(&m, id->rx.data(), sizeof m);
            to_host(m);
            // Every field is checked before use: a message that is not ours, or claims more
            // private data than a message holds, ends the connection.
            if (!well_formed(m)) {
                peer_gone(id);
                continue;
            }
            on_message(id, m);
        }
        for (int fd : g_lists.to_close) ::close(fd);
        g_lists.to_close.clear();
    }
}

void start_worker() {
    if (g_worker_started) return;
    g_wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    std::thread(run_worker).detach();
    g_worker_started = true;
}

}  // namespace

}  // namespace cxv::cm
