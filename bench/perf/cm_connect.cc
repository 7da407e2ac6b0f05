#include "bench/perf/cm_connect.h"

#include <endian.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "base/errno_text.h"

namespace cxv::perf {

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// The link's messages: one slot each, kRecvSlots receives posted, one send at a time.
constexpr std::size_t kSlot = 256;
constexpr unsigned kRecvSlots = 8;
// REJECTED's status when nobody listens (IBTA 12.6.7 reason 8, as rdma_cm reports it).
constexpr int kNobodyListens = 8;
// A bound on the wait for a request's answer (the manager itself reports UNREACHABLE
// when no reply came within 10 s).
constexpr auto kReplyWait = 15s;

// cxv-perf's private data in a REQ or REP, big-endian.
struct cm_private {
    char tag[4] = {'c', 'x', 'v', 'p'};
    std::uint8_t op = 0, conn = 0, latency = 0, what = 0;  // what: 0 the link, 1 a test QP
    std::uint32_t qp_index = 0, qps = 0;
    std::uint64_t vaddr = 0, length = 0;
    std::uint32_t rkey = 0;
    std::uint16_t lid = 0, pad = 0;
    std::uint8_t gid[16] = {};
};
static_assert(sizeof(cm_private) <= 56, "rdma_connect(3)'s private data on an RDMA_PS_TCP id");

cm_private private_of(const options& o, const side* s, unsigned q) {
    cm_private p;
    p.op = static_cast<std::uint8_t>(o.op);
    p.conn = static_cast<std::uint8_t>(o.conn);
    p.latency = o.latency;
    p.qps = htobe32(o.qps);
    if (s == nullptr) return p;
    const wire_qp& w = s->local[q];
    p.what = 1;
    p.qp_index = htobe32(q);
    p.rkey = htobe32(w.rkey);
    p.vaddr = htobe64(w.vaddr);
    p.length = htobe64(w.length);
    p.lid = htobe16(static_cast<std::uint16_t>(w.lid));
    std::memcpy(p.gid, w.gid, 16);
    return p;
}

using event = cm_event_copy;

// Copies and acknowledges an event.
event copied(rdma_cm_event* e) {
    event got;
    got.type = e->event;
    got.status = e->status;
    got.id = e->id;
    got.listen_id = e->listen_id;
    const bool ud = e->id != nullptr && e->id->qp_type == IBV_QPT_UD;
    const void* data = ud ? e->param.ud.private_data : e->param.conn.private_data;
    const std::size_t len = ud ? e->param.ud.private_data_len : e->param.conn.private_data_len;
    got.qp_num = ud ? e->param.ud.qp_num : e->param.conn.qp_num;
    if (data != nullptr) got.data.assign(static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + len);
    rdma_ack_cm_event(e);
    return got;
}

// Why the peer's private data does not fit this run ("" when it does); for a test QP's
// connection (s given) also its QP, into s->remote[q].
std::string take_private(const options& o, bool server, const event& e, side* s, unsigned q) {
    cm_private p;
    if (e.data.size() < sizeof p) return "its private data is not cxv-perf's";
    std::memcpy(&p, e.data.data(), sizeof p);
    if (std::memcmp(p.tag, "cxvp", 4) != 0 || p.what != (s != nullptr ? 1 : 0)) return "its private data is not cxv-perf's";
    const std::string peer = server ? "the client" : "the server", self = server ? "the server" : "the client";
    if (p.op != static_cast<std::uint8_t>(o.op) || p.conn != static_cast<std::uint8_t>(o.conn) || p.latency != o.latency) {
        return peer + " runs another test or transport";
    }
    if (be32toh(p.qps) != o.qps) {
        return peer + " has " + std::to_string(be32toh(p.qps)) + " QPs, " + self + " " + std::to_string(o.qps);
    }
    if (s == nullptr) return {};
    if (be32toh(p.qp_index) != q) return "its QPs come out of order";
    wire_qp& r = s->remote.at(q);
    r.qpn = e.qp_num;
    r.lid = be16toh(p.lid);
    r.rkey = be32toh(p.rkey);
    r.vaddr = be64toh(p.vaddr);
    r.length = be64toh(p.length);
    std::memcpy(r.gid, p.gid, 16);
    return {};
}

// The PSNs the manager chose for QP q's connection (rdma_init_qp_attr): ours to send
// from, the peer's to expect (none over UD).
status take_psns(rdma_cm_id* id, side& s, unsigned q) {
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_RTS;
    if (rdma_init_qp_attr(id, &a, &mask) != 0) return sys_error(errno, "rdma_init_qp_attr");
    s.local[q].psn = a.sq_psn;
    if (id->qp_type == IBV_QPT_UD) return ok_status();
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &a, &mask) != 0) return sys_error(errno, "rdma_init_qp_attr");
    s.remote[q].psn = a.rq_psn;
    return ok_status();
}

rdma_conn_param conn_param(const cm_private& p, std::uint32_t qp_num) {
    rdma_conn_param c{};
    c.private_data = &p;
    c.private_data_len = sizeof p;
    c.responder_resources = c.initiator_depth = kOutstandingReads;
    c.retry_count = c.rnr_retry_count = 7;
    c.qp_num = qp_num;
    return c;
}

int left_ms(clock_type::time_point end) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_type::now()).count();
    return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1000000));
}

// The link's QP takes the test QPs' ACK timeout (RDMA_OPTION_ID_ACK_TIMEOUT).
void set_ack_timeout(rdma_cm_id* id, const options& o) {
    std::uint8_t timeout = ack_timeout(o);
    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout);
}

error cm_error(const std::string& what, int e) { return sys_error(e, "rdma_cm: " + what); }

// rdma_reject(3) with the reason as private data, which the client prints.
error reject(rdma_cm_id* id, const std::string& why) {
    const std::string text = "the server rejected the connection: " + why;
    rdma_reject(id, text.data(), static_cast<std::uint8_t>(std::min<std::size_t>(text.size(), 147)));
    return error{EINVAL, "rdma_cm: rejected the client's connection: " + why};
}

// The client's error for a REJECTED: the server's reason where it gave one.
error rejected(const event& e, const std::string& otherwise) {
    const std::string text(e.data.begin(), std::find(e.data.begin(), e.data.end(), 0));
    return error{ECONNREFUSED, "rdma_cm: " + (text.empty() ? otherwise : text)};
}

}  // namespace

result<event> cm_link::next_event(rdma_cm_id* want, std::chrono::milliseconds timeout, const std::string& what) {
    const auto end = clock_type::now() + timeout;
    for (;;) {
        event got;
        if (!backlog_.empty()) {
            got = std::move(backlog_.front());
            backlog_.pop_front();
        } else {
            if (peer_gone_) return error{ECONNRESET, "rdma_cm: " + what + ": the peer disconnected"};
            pollfd p{ec_->fd, POLLIN, 0};
            const int n = ::poll(&p, 1, left_ms(end));
            if (n < 0 && errno == EINTR) continue;
            if (n == 0) return error{ETIMEDOUT, "rdma_cm: " + what + ": nothing within " + std::to_string(timeout.count() / 1000) + " s"};
            rdma_cm_event* e = nullptr;
            if (rdma_get_cm_event(ec_, &e) != 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                return cm_error("rdma_get_cm_event", errno);
            }
            got = copied(e);
        }
        if (got.id == want || (got.listen_id != nullptr && got.listen_id == want)) return got;
        if (got.type == RDMA_CM_EVENT_DISCONNECTED) {
            peer_gone_ = true;
            return error{ECONNRESET, "rdma_cm: " + what + ": the peer disconnected"};
        }
    }
}

status cm_link::open_channel(const function& fn) {
    // cxv's librdmacm answers every address with the function CXV_DEVICE names (cm.h): this
    // one, which its context then shares with ours.
    ::setenv("CXV_DEVICE", fn.opened_as.c_str(), 1);
    ec_ = rdma_create_event_channel();
    if (ec_ == nullptr) return cm_error("rdma_create_event_channel", errno);
    return ok_status();
}

// The link's QP (its CQs and channels the manager's), its buffer, the receives posted.
status cm_link::make_link_qp() {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 2;
    a.cap.max_recv_wr = kRecvSlots;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    a.sq_sig_all = 1;
    if (rdma_create_qp(link_, nullptr, &a) != 0) return cm_error("rdma_create_qp", errno);
    buf_ = std::make_unique<std::byte[]>(kSlot * (kRecvSlots + 1));
    mr_ = rdma_reg_msgs(link_, buf_.get(), kSlot * (kRecvSlots + 1));
    if (mr_ == nullptr) return cm_error("rdma_reg_msgs", errno);
    for (unsigned i = 0; i < kRecvSlots; ++i) {
        if (rdma_post_recv(link_, reinterpret_cast<void*>(std::uintptr_t{i}), buf_.get() + i * kSlot, kSlot, mr_) != 0) {
            return cm_error("rdma_post_recv", errno);
        }
    }
    return ok_status();
}

status cm_link::listen(unsigned port, rdma_port_space ps) {
    if (rdma_create_id(ec_, &listener_, nullptr, ps) != 0) return cm_error("rdma_create_id", errno);
    set_ack_timeout(listener_, o_);  // its connections inherit it
    // Every address, IPv4 clients too where there is IPv6.
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<std::uint16_t>(port));
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = any6.sin6_port;
    if (rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&any6)) != 0 &&
        rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&any4)) != 0) {
        return cm_error("cannot listen on port " + std::to_string(port), errno);
    }
    if (rdma_listen(listener_, 16) != 0) return cm_error("cannot listen on port " + std::to_string(port), errno);
    return ok_status();
}

result<std::unique_ptr<cm_link>> cm_link::accept(const options& o, const function& fn, unsigned port,
                                                 std::chrono::milliseconds timeout) {
    std::unique_ptr<cm_link> l(new cm_link(o));
    l->server_ = true;
    if (auto r = l->open_channel(fn); !r) return r.error();
    if (auto r = l->listen(port, RDMA_PS_TCP); !r) return r.error();
    auto req = l->next_event(l->listener_, timeout, "no client connected to port " + std::to_string(port));
    if (!req) return req.error();
    if (req->type != RDMA_CM_EVENT_CONNECT_REQUEST) return error{EPROTO, "rdma_cm: the client's connection failed"};
    l->link_ = req->id;
    if (const std::string why = take_private(o, true, req.value(), nullptr, 0); !why.empty()) return reject(l->link_, why);
    if (auto r = l->make_link_qp(); !r) return r.error();
    const cm_private mine = private_of(o, nullptr, 0);
    rdma_conn_param p = conn_param(mine, 0);
    if (rdma_accept(l->link_, &p) != 0) return cm_error("rdma_accept", errno);
    auto est = l->next_event(l->link_, timeout, "the client's link");
    if (!est) return est.error();
    if (est->type != RDMA_CM_EVENT_ESTABLISHED) return error{EPROTO, std::string("rdma_cm: the client's link: ") + rdma_event_str(est->type)};
    l->linked_ = true;
    // The test QPs' listener, on the same port, before the parameters' answer lets the
    // client connect them.
    rdma_destroy_id(std::exchange(l->listener_, nullptr));
    if (auto r = l->listen(port, o.conn == transport::ud ? RDMA_PS_UDP : RDMA_PS_TCP); !r) return r.error();
    return l;
}

result<std::unique_ptr<cm_link>> cm_link::connect(const options& o, const function& fn, const std::string& host,
                                                  unsigned port, std::chrono::milliseconds retry_for) {
    const std::string where = host + ":" + std::to_string(port);
    rdma_addrinfo hints{};
    hints.ai_port_space = RDMA_PS_TCP;
    rdma_addrinfo* found = nullptr;
    if (const int r = rdma_getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); r != 0) {
        return error{EHOSTUNREACH, "rdma_cm: cannot connect to " + where + ": " + (r == -1 ? std::strerror(errno) : ::gai_strerror(r))};
    }
    sockaddr_storage dst{};
    std::memcpy(&dst, found->ai_dst_addr, std::min<std::size_t>(found->ai_dst_len, sizeof dst));
    rdma_freeaddrinfo(found);
    const auto end = clock_type::now() + retry_for;
    for (;;) {
        std::unique_ptr<cm_link> l(new cm_link(o));
        l->peer_ = where;
        l->dst_ = dst;
        if (auto r = l->open_channel(fn); !r) return r.error();
        if (rdma_create_id(l->ec_, &l->link_, nullptr, RDMA_PS_TCP) != 0) return cm_error("rdma_create_id", errno);
        set_ack_timeout(l->link_, o);
        if (auto r = l->resolve(l->link_); !r) return r.error();
        if (auto r = l->make_link_qp(); !r) return r.error();
        const cm_private mine = private_of(o, nullptr, 0);
        rdma_conn_param p = conn_param(mine, 0);
        if (rdma_connect(l->link_, &p) != 0) return cm_error("rdma_connect", errno);
        auto ev = l->next_event(l->link_, kReplyWait, "the link to " + where);
        if (!ev) return ev.error();
        if (ev->type == RDMA_CM_EVENT_ESTABLISHED) {
            l->linked_ = true;
            return l;
        }
        if (ev->type == RDMA_CM_EVENT_REJECTED && ev->status == kNobodyListens) {
            // The server may still be opening its function.
            if (clock_type::now() < end) {
                std::this_thread::sleep_for(50ms);
                continue;
            }
            return error{ECONNREFUSED, "rdma_cm: cannot connect to " + where + ": " + std::strerror(ECONNREFUSED)};
        }
        if (ev->type == RDMA_CM_EVENT_REJECTED) return rejected(ev.value(), "rejected (reason " + std::to_string(ev->status) + ")");
        const int e = ev->status < 0 ? -ev->status : EPROTO;
        return error{e, "rdma_cm: cannot connect to " + where + ": " + rdma_event_str(ev->type) + " (" + std::strerror(e) + ")"};
    }
}

status cm_link::resolve(rdma_cm_id* id) {
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst_), 2000) != 0) return cm_error("rdma_resolve_addr", errno);
    auto addr = next_event(id, 5s, "resolve " + peer_);
    if (!addr) return addr.error();
    if (addr->type != RDMA_CM_EVENT_ADDR_RESOLVED) return error{EHOSTUNREACH, "rdma_cm: cannot resolve " + peer_};
    if (rdma_resolve_route(id, 2000) != 0) return cm_error("rdma_resolve_route", errno);
    auto route = next_event(id, 5s, "route to " + peer_);
    if (!route) return route.error();
    if (route->type != RDMA_CM_EVENT_ROUTE_RESOLVED) return error{EHOSTUNREACH, "rdma_cm: no route to " + peer_};
    return ok_status();
}

status cm_link::connect_qps(side& s, std::chrono::milliseconds timeout) {
    const bool ud = o_.conn == transport::ud;
    s.remote.assign(o_.qps, wire_qp{});
    for (unsigned q = 0; q < o_.qps; ++q) {
        const std::string which = "QP " + std::to_string(q) + "'s connection";
        const cm_private mine = private_of(o_, &s, q);
        rdma_conn_param p = conn_param(mine, s.qps[q]->qpn());
        rdma_cm_id* id = nullptr;
        if (server_) {
            auto req = next_event(listener_, timeout, which);
            if (!req) return req.error();
            if (req->type != RDMA_CM_EVENT_CONNECT_REQUEST) return error{EPROTO, "rdma_cm: " + which + " failed"};
            id = req->id;
            if (const std::string why = take_private(o_, true, req.value(), &s, q); !why.empty()) {
                auto refused = reject(id, why);
                rdma_destroy_id(id);
                return refused;
            }
            qp_ids_.push_back(id);
            // As rdma_accept(3) on an id with a QP: ready to receive and send before the REP.
            if (auto r = take_psns(id, s, q); !r) return r;
            if (auto r = connect_qp(s, q); !r) return r;
            if (rdma_accept(id, &p) != 0) return cm_error("rdma_accept of " + which, errno);
            if (!ud) {
                auto est = next_event(id, timeout, which);
                if (!est) return est.error();
                if (est->type != RDMA_CM_EVENT_ESTABLISHED) return error{EPROTO, "rdma_cm: " + which + ": " + rdma_event_str(est->type)};
            }
            continue;
        }
        if (rdma_create_id(ec_, &id, nullptr, ud ? RDMA_PS_UDP : RDMA_PS_TCP) != 0) return cm_error("rdma_create_id", errno);
        qp_ids_.push_back(id);
        if (auto r = resolve(id); !r) return r;
        if (rdma_connect(id, &p) != 0) return cm_error("rdma_connect of " + which, errno);
        auto rep = next_event(id, kReplyWait, which);
        if (!rep) return rep.error();
        if (rep->type == RDMA_CM_EVENT_REJECTED) return rejected(rep.value(), which + " rejected");
        const auto want = ud ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE;
        if (rep->type != want) return error{EPROTO, "rdma_cm: " + which + ": " + rdma_event_str(rep->type)};
        if (const std::string why = take_private(o_, false, rep.value(), &s, q); !why.empty()) {
            return error{EINVAL, "rdma_cm: " + which + ": " + why};
        }
        // As rdma_connect(3) on the active side: RTR and RTS from the reply, then the RTU.
        if (auto r = take_psns(id, s, q); !r) return r;
        if (auto r = connect_qp(s, q); !r) return r;
        if (!ud && rdma_establish(id) != 0) return cm_error("rdma_establish of " + which, errno);
    }
    return ok_status();
}

cm_link::~cm_link() {
    for (rdma_cm_id* id : qp_ids_) {
        rdma_disconnect(id);  // fails harmlessly where the connection never was
        rdma_destroy_id(id);
    }
    if (link_ != nullptr) {
        if (linked_) rdma_disconnect(link_);
        if (mr_ != nullptr) ibv_dereg_mr(mr_);
        rdma_destroy_qp(link_);
        rdma_destroy_id(link_);
    }
    if (listener_ != nullptr) rdma_destroy_id(listener_);
    if (ec_ != nullptr) rdma_destroy_event_channel(ec_);
}

int cm_link::take(ibv_cq* cq, ibv_comp_channel* cc, ibv_wc& wc, clock_type::time_point end) {
    for (;;) {
        if (ibv_poll_cq(cq, 1, &wc) == 1) return 1;
        if (peer_gone_) return -1;
        // Armed, then polled again: what came before the arm is taken now, after it wakes us.
        if (ibv_req_notify_cq(cq, 0) != 0) return -1;
        if (ibv_poll_cq(cq, 1, &wc) == 1) return 1;
        pollfd p[2] = {{cc->fd, POLLIN, 0}, {ec_->fd, POLLIN, 0}};
        const int n = ::poll(p, 2, left_ms(end));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ibv_poll_cq(cq, 1, &wc) == 1 ? 1 : 0;
        if ((p[0].revents & POLLIN) != 0) {
            ibv_cq* got = nullptr;
            void* context = nullptr;
            if (ibv_get_cq_event(cc, &got, &context) == 0) ibv_ack_cq_events(got, 1);
        }
        if ((p[1].revents & POLLIN) != 0) {
            rdma_cm_event* e = nullptr;
            if (rdma_get_cm_event(ec_, &e) == 0) {
                event got = copied(e);
                if (got.type == RDMA_CM_EVENT_DISCONNECTED) {
                    peer_gone_ = true;
                } else {
                    backlog_.push_back(std::move(got));
                }
            }
        }
    }
}

status cm_link::send(const void* p, std::size_t n) {
    if (n > kSlot) return error{EMSGSIZE, "a message of " + std::to_string(n) + " bytes"};
    std::byte* slot = buf_.get() + kRecvSlots * kSlot;
    std::memcpy(slot, p, n);
    if (rdma_post_send(link_, nullptr, slot, n, mr_, IBV_SEND_SIGNALED) != 0) {
        return error{errno, std::string("lost the connection to the peer: ") + std::strerror(errno)};
    }
    ibv_wc wc{};
    const int r = take(link_->send_cq, link_->send_cq_channel, wc, clock_type::now() + 10s);
    if (r == 0) return error{ETIMEDOUT, "the peer does not take messages"};
    // The peer left before its acknowledgement was taken (its last message read, it
    // exits): as a TCP send, this one has left; the next receive says the peer is gone.
    if (r < 0) return ok_status();
    if (wc.status != IBV_WC_SUCCESS) return error{EIO, std::string("lost the connection to the peer: ") + ibv_wc_status_str(wc.status)};
    return ok_status();
}

bool cm_link::readable() {
    if (pending_) return true;
    ibv_wc wc;
    if (ibv_poll_cq(link_->recv_cq, 1, &wc) == 1) pending_ = wc;
    return pending_.has_value();
}

status cm_link::recv(void* p, std::size_t n, std::chrono::milliseconds timeout) {
    ibv_wc wc{};
    if (pending_) {
        wc = *pending_;
        pending_.reset();
    } else {
        const int r = take(link_->recv_cq, link_->recv_cq_channel, wc, clock_type::now() + timeout);
        if (r == 0) return error{ETIMEDOUT, "the peer did not answer within " + std::to_string(timeout.count() / 1000) + " s"};
        if (r < 0) return error{ECONNRESET, "the peer closed the connection"};
    }
    if (wc.status != IBV_WC_SUCCESS) return error{EIO, std::string("lost the connection to the peer: ") + ibv_wc_status_str(wc.status)};
    const auto i = static_cast<unsigned>(wc.wr_id);
    std::byte* slot = buf_.get() + i * kSlot;
    if (wc.byte_len != n) {
        return error{EPROTO, "the peer is out of step (a message of " + std::to_string(wc.byte_len) + " bytes, not " + std::to_string(n) + ")"};
    }
    std::memcpy(p, slot, n);
    if (rdma_post_recv(link_, reinterpret_cast<void*>(std::uintptr_t{i}), slot, kSlot, mr_) != 0) {
        return error{errno, std::string("post a receive: ") + std::strerror(errno)};
    }
    return ok_status();
}

}  // namespace cxv::perf
