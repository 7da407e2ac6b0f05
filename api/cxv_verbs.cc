// The C API of api/cxv_verbs.h over the C++ objects of api/cxv.h. Each handle is the
// libibverbs struct the caller sees, as the base of the object that carries it, so a
// handle converts back with one static_cast, and the context's ops point at the same
// fast-path functions as cxv_post_send() and the others.
#include "api/cxv_verbs.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "api/cxv.h"
#include "api/verbs_async.h"
#include "api/verbs_handles.h"
#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "driver/res/srq.h"

namespace {

using namespace cxv;

thread_local std::string last_error;

using namespace cxv::api::handles;
using cxv::api::handles::fail;
using c_ah = api::address_handle;  // a UD send WR's wr.ud.ah is read as one (its ibv_ah first)
static_assert(offsetof(api::address_handle, base) == 0);

// A failed control call: errno and the message for cxv_last_error(); returns the errno
// value (the ibv_* convention for int results).
int fail(const cxv::error& e) { return fail(e.code ? e.code : EIO, e.message); }
template <typename T>
T* fail_null(int code, std::string message) {
    fail(code, std::move(message));
    return nullptr;
}
template <typename T>
T* fail_null(const cxv::error& e) {
    fail(e);
    return nullptr;
}
int succeed() {
    last_error.clear();
    return 0;
}

// The libibverbs struct of a handle: a QP's is the ibv_qp at the start of its ibv_qp_ex.
template <typename T>
auto& base_of(T* h) {
    if constexpr (requires { h->qp_base; }) {
        return h->qp_base;
    } else {
        return *h;
    }
}

std::mutex open_mu;  // opens and closes (cxv_open_device); a last close tears the function down under it

void close_context(c_device* c) {
    pthread_mutex_destroy(&c->context.mutex);
    // The last context of the function tears the HCA down with cxv::device, under the
    // lock, so that an open meanwhile does not find the group still held.
    std::lock_guard lock(open_mu);
    delete c;
}

// One object of the device more, or fewer; the last one of a context whose close was
// deferred closes it (cxv_close_device_deferred).
void hold(c_device* c) {
    ++c->objects;
    ++c->holds;
}
void drop_object(c_device* c) {
    --c->objects;
    if (--c->holds == 0) close_context(c);
}

// A handle made: counted by its device (which will not close under it), with its
// mutex and condition variable set up where its struct has them. (Not merged across
// handle types, which g++'s identical code folding would do and then misjudge bounds.)
template <typename T>
[[gnu::noipa]] T* adopt(T* h) {
    auto& b = base_of(h);
    if constexpr (requires { b.cond; }) {
        pthread_mutex_init(&b.mutex, nullptr);
        pthread_cond_init(&b.cond, nullptr);
    }
    hold(dev_of(b.context));
    succeed();
    return h;
}

// A handle whose object the device no longer has: undone as adopt() did it, and freed.
template <typename T>
[[gnu::noipa]] int forget(T* h) {
    auto& b = base_of(h);
    if constexpr (requires { b.cond; }) {
        pthread_mutex_destroy(&b.mutex);
        pthread_cond_destroy(&b.cond);
    }
    c_device* c = dev_of(b.context);
    delete h;
    drop_object(c);
    return succeed();
}

// --- the fast path, as the context's ops and as cxv_* ----------------------------------

int op_post_send(ibv_qp* q, ibv_send_wr* wr, ibv_send_wr** bad_wr) { return qp_of(q)->qp->post_send(wr, bad_wr); }
int op_post_recv(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) { return qp_of(q)->qp->post_recv(wr, bad_wr); }
int op_post_srq_recv(ibv_srq* s, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    return srq_of(s)->srq->post_recv(wr, bad_wr);
}
int op_poll_cq(ibv_cq* c, int n, ibv_wc* wc) { return cq_of(c)->cq->poll(n, wc); }
int op_req_notify_cq(ibv_cq* c, int solicited_only) {
    cq_of(c)->cq->request_notify(solicited_only != 0);
    return 0;
}

// ibv_qp_state <-> the driver's states.
bool to_driver(ibv_qp_state s, qp_state& out) {
    switch (s) {
    case IBV_QPS_RESET: out = qp_state::reset; return true;
    case IBV_QPS_INIT: out = qp_state::init; return true;
    case IBV_QPS_RTR: out = qp_state::rtr; return true;
    case IBV_QPS_RTS: out = qp_state::rts; return true;
    case IBV_QPS_SQD: out = qp_state::sqd; return true;
    case IBV_QPS_SQE: out = qp_state::sqerr; return true;
    case IBV_QPS_ERR: out = qp_state::error; return true;
    default: return false;
    }
}
ibv_qp_state to_verbs(qp_state s) {
    switch (s) {
    case qp_state::reset: return IBV_QPS_RESET;
    case qp_state::init: return IBV_QPS_INIT;
    case qp_state::rtr: return IBV_QPS_RTR;
    case qp_state::rts: return IBV_QPS_RTS;
    case qp_state::sqd: return IBV_QPS_SQD;
    case qp_state::sqerr: return IBV_QPS_SQE;
    case qp_state::error: return IBV_QPS_ERR;
    }
    return IBV_QPS_UNKNOWN;
}

// The attributes a transition requires, per transport (IBTA's QP state table, as
// ibv_modify_qp(3) lists them).
int required_mask(ibv_qp_type t, ibv_qp_state from, ibv_qp_state to) {
    if (t == IBV_QPT_RAW_PACKET) return from == IBV_QPS_RESET && to == IBV_QPS_INIT ? IBV_QP_PORT : 0;
    if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
        return IBV_QP_PKEY_INDEX | IBV_QP_PORT | (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    }
    if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
        if (t == IBV_QPT_UD) return 0;
        const int both = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        return t == IBV_QPT_RC ? both | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : both;
    }
    if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
        return t == IBV_QPT_RC
                   ? IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
                   : IBV_QP_SQ_PSN;
    }
    return 0;
}

void apply(cxv::qp::modify_attr& m, const ibv_qp_attr& a, int mask) {
    if (mask & IBV_QP_PKEY_INDEX) m.pkey_index = a.pkey_index;
    if (mask & IBV_QP_PORT) m.port = a.port_num;
    if (mask & IBV_QP_QKEY) m.qkey = a.qkey;
    if (mask & IBV_QP_ACCESS_FLAGS) m.access = static_cast<unsigned>(a.qp_access_flags);
    if (mask & IBV_QP_PATH_MTU) m.path_mtu = a.path_mtu;  // IBV_MTU_256 = 1 .. 4096 = 5, the QPC's encoding
    if (mask & IBV_QP_DEST_QPN) m.dest_qpn = a.dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) m.rq_psn = a.rq_psn;
    if (mask & IBV_QP_SQ_PSN) m.sq_psn = a.sq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) m.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) m.max_rd_atomic = a.max_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) m.min_rnr_timer = a.min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) m.timeout = a.timeout;
    if (mask & IBV_QP_RETRY_CNT) m.retry_cnt = a.retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) m.rnr_retry = a.rnr_retry;
    if (mask & IBV_QP_AV) {
        const ibv_ah_attr& ah = a.ah_attr;
        m.ah.dlid = ah.dlid;
        m.ah.sl = ah.sl;
        m.ah.grh = ah.is_global != 0;
        std::memcpy(m.ah.dgid.data(), ah.grh.dgid.raw, 16);
        m.ah.sgid_index = ah.grh.sgid_index;
        m.ah.hop_limit = ah.grh.hop_limit;
        m.ah.traffic_class = ah.grh.traffic_class;
        m.ah.flow_label = ah.grh.flow_label;
    }
}

constexpr unsigned bits(unsigned v) { return v; }
static_assert(bits(IBV_ACCESS_LOCAL_WRITE) == bits(access_local_write) &&
              bits(IBV_ACCESS_REMOTE_WRITE) == bits(access_remote_write) &&
              bits(IBV_ACCESS_REMOTE_READ) == bits(access_remote_read) &&
              bits(IBV_ACCESS_REMOTE_ATOMIC) == bits(access_remote_atomic));
static_assert(IBV_MTU_256 == 1 && IBV_MTU_4096 == 5);

// One completion on `cq`, waiting for it (rdma_get_send_comp(3)'s loop).
int get_comp(ibv_cq* c, ibv_wc* wc) {
    cxv::cq& cq = *cq_of(c)->cq;
    for (;;) {
        if (const int n = cq.poll(1, wc); n != 0) return n;
        cq.request_notify(false);
        if (const int n = cq.poll(1, wc); n != 0) return n;  // arrived before the arm
        cq.wait_event(std::chrono::milliseconds(-1));
    }
}

// ibv_attach_mcast(3), ibv_detach_mcast(3): the errno value on failure.
int multicast_group(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, bool attach, const char* call) {
    if (gid == nullptr) return fail(EINVAL, std::string(call) + ": no GID");
    cxv::qp::gid g;
    std::memcpy(g.data(), gid->raw, g.size());
    cxv::qp& q = *qp_of(qp)->qp;
    if (auto s = attach ? q.attach_multicast(g, lid) : q.detach_multicast(g, lid); !s) return fail(s.error());
    return 0;
}

}  // namespace

int cxv::api::handles::fail(int code, std::string message) {
    last_error = std::move(message);
    errno = code;
    return code;
}

extern "C" {

const char* cxv_last_error(void) { return last_error.c_str(); }

int cxv_get_async_event(ibv_context* ctx, ibv_async_event* event) { return dev_of(ctx)->async->get(event); }

// --- device ------------------------------------------------------------------------------

namespace {

// A function opened once per process and shared by its contexts, as rdma-core lets a
// process open a device as often as it likes (librdmacm opens one beside the program's):
// VFIO lets one process hold the group, so a second cxv::device::open would be EBUSY.
// The device's events go to every context's queue; a queue takes the events of its own
// QPs, CQs and SRQs and the device-wide ones (verbs_async).
struct shared_function {
    std::mutex mu;
    std::vector<std::weak_ptr<api::verbs_async>> listeners;
    void push(const cxv::event& e) {
        std::lock_guard lock(mu);
        for (const auto& l : listeners) {
            if (auto a = l.lock()) a->push(e);
        }
    }
};
struct open_function {
    std::weak_ptr<cxv::device> dev;
    std::shared_ptr<shared_function> events;
};
std::map<std::string, open_function> opened;

}  // namespace

ibv_context* cxv_open_device(const char* bdf) {
    if (bdf == nullptr) return fail_null<ibv_context>(EINVAL, "cxv_open_device: no PCI address");
    auto async = std::make_shared<api::verbs_async>();
    std::lock_guard lock(open_mu);
    open_function& f = opened[bdf];
    std::shared_ptr<cxv::device> dev = f.dev.lock();
    if (!dev) {
        auto events = std::make_shared<shared_function>();
        cxv::device::options o;
        o.on_event = [events](const cxv::event& e) { events->push(e); };
        auto d = cxv::device::open(bdf, o);
        if (!d) {
            opened.erase(bdf);
            return fail_null<ibv_context>(d.error());
        }
        dev = std::shared_ptr<cxv::device>(std::move(d).value());
        f.dev = dev;
        f.events = std::move(events);
    }
    {
        std::lock_guard l(f.events->mu);
        std::erase_if(f.events->listeners, [](const auto& w) { return w.expired(); });
        f.events->listeners.push_back(async);
    }
    // (Still under the lock: a failure below drops `dev`, maybe the last reference.)
    auto port = dev->port(1);
    if (!port) return fail_null<ibv_context>(port.error());
    auto* c = new (std::nothrow) c_device();
    if (c == nullptr) return fail_null<ibv_context>(ENOMEM, "cxv_open_device: out of memory");
    c->dev = std::move(dev);
    c->ethernet = port->ethernet;
    ibv_context& ctx = c->context;
    c->sz = sizeof(verbs_context);
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx.device = &c->info;
    c->info.node_type = IBV_NODE_CA;
    c->info.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(c->info.name, sizeof(c->info.name), "cxv_%s", bdf);
    std::snprintf(c->info.dev_name, sizeof(c->info.dev_name), "%s", bdf);
    ctx.ops.post_send = op_post_send;
    ctx.ops.post_recv = op_post_recv;
    ctx.ops.post_srq_recv = op_post_srq_recv;
    ctx.ops.poll_cq = op_poll_cq;
    ctx.ops.req_notify_cq = op_req_notify_cq;
    c->ibv_create_flow = cxv_create_flow;
    c->ibv_destroy_flow = cxv_destroy_flow;
    c->create_wq = cxv_create_wq;
    c->modify_wq = cxv_modify_wq;
    c->destroy_wq = cxv_destroy_wq;
    c->create_rwq_ind_table = cxv_create_rwq_ind_table;
    c->destroy_rwq_ind_table = cxv_destroy_rwq_ind_table;
    ctx.cmd_fd = -1;
    ctx.async_fd = async->fd();
    c->async = std::move(async);
    c->async->start(port->up ? std::uint32_t{1} << 1 : 0);
    ctx.num_comp_vectors = 1;
    pthread_mutex_init(&ctx.mutex, nullptr);
    succeed();
    return &ctx;
}

int cxv_close_device(ibv_context* ctx) {
    c_device* c = dev_of(ctx);
    if (const unsigned n = c->objects.load(); n != 0) {
        return fail(EBUSY, "cxv_close_device: " + std::to_string(n) + " objects of the device are still alive");
    }
    if (--c->holds == 0) close_context(c);
    return succeed();
}

int cxv_close_device_deferred(ibv_context* ctx) {
    c_device* c = dev_of(ctx);
    if (--c->holds == 0) close_context(c);
    return succeed();
}

int cxv_query_port(ibv_context* ctx, uint8_t port_num, ibv_port_attr* attr) {
    auto p = dev_of(ctx)->dev->port(port_num);
    if (!p) return fail(p.error());
    std::memset(attr, 0, sizeof(*attr));
    attr->state = p->up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    attr->max_mtu = static_cast<ibv_mtu>(p->max_mtu);
    attr->active_mtu = static_cast<ibv_mtu>(p->max_mtu);
    attr->lid = p->lid;
    attr->link_layer = p->ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    return succeed();
}

int cxv_query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* gid) {
    if (index < 0) return fail(EINVAL, "cxv_query_gid: negative index");
    auto g = dev_of(ctx)->dev->gid(static_cast<unsigned>(index), port_num);
    if (!g) return fail(g.error());
    std::memcpy(gid->raw, g->data(), sizeof(gid->raw));
    return succeed();
}

// --- PD, MR, AH --------------------------------------------------------------------------

ibv_pd* cxv_alloc_pd(ibv_context* ctx) {
    c_device* c = dev_of(ctx);
    auto p = c->dev->alloc_pd();
    if (!p) return fail_null<ibv_pd>(p.error());
    auto* out = new (std::nothrow) c_pd();
    if (out == nullptr) return fail_null<ibv_pd>(ENOMEM, "out of memory");
    out->context = ctx;
    out->handle = p.value()->pdn();
    out->pd = std::move(p).value();
    return adopt(out);
}

int cxv_dealloc_pd(ibv_pd* pd) {
    c_pd* p = pd_of(pd);
    if (p->pd.use_count() > 1 || p->ahs.load() != 0) {
        return fail(EBUSY, "cxv_dealloc_pd: an MR, QP, SRQ or AH still uses the PD");
    }
    if (auto s = p->pd->object()->destroy(); !s) return fail(s.error());
    return forget(p);
}

ibv_mr* cxv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    constexpr int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;
    if (access & ~known) {
        return fail_null<ibv_mr>(EINVAL, "cxv_reg_mr: access flags other than local write, remote write, remote "
                                         "read and remote atomic are not supported");
    }
    auto m = cxv::mr::create(pd_of(pd)->pd, addr, length, static_cast<unsigned>(access));
    if (!m) return fail_null<ibv_mr>(m.error());
    auto* out = new (std::nothrow) c_mr();
    if (out == nullptr) return fail_null<ibv_mr>(ENOMEM, "out of memory");
    out->context = pd->context;
    out->pd = pd;
    out->addr = addr;
    out->length = length;
    out->lkey = m.value()->lkey();
    out->rkey = m.value()->rkey();
    out->handle = out->lkey >> 8;
    out->mr = std::move(m).value();
    return adopt(out);
}

int cxv_dereg_mr(ibv_mr* mr) {
    auto* m = static_cast<c_mr*>(mr);
    if (auto s = m->mr->object()->destroy(); !s) return fail(s.error());
    return forget(m);
}

ibv_ah* cxv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    if (attr == nullptr) return fail_null<ibv_ah>(EINVAL, "cxv_create_ah: no attributes");
    cxv::qp::path p;
    p.dlid = attr->dlid;
    p.sl = attr->sl;
    p.grh = attr->is_global != 0;
    std::memcpy(p.dgid.data(), attr->grh.dgid.raw, 16);
    p.sgid_index = attr->grh.sgid_index;
    p.hop_limit = attr->grh.hop_limit;
    p.traffic_class = attr->grh.traffic_class;
    p.flow_label = attr->grh.flow_label;
    // On RoCE the peer's MAC goes in the address vector (cxv::device::peer_mac: ARP for an
    // IPv4-mapped GID); EHOSTUNREACH when nobody answers, as rdma-core's ibv_create_ah.
    auto ah = make_address_handle(*dev_of(pd->context)->dev, p);
    if (!ah) return fail_null<ibv_ah>(ah.error().code, ah.error().message);
    auto* out = new (std::nothrow) c_ah(*ah);
    if (out == nullptr) return fail_null<ibv_ah>(ENOMEM, "out of memory");
    out->base.context = pd->context;
    out->base.pd = pd;
    ++pd_of(pd)->ahs;
    hold(dev_of(pd->context));
    succeed();
    return &out->base;
}

int cxv_destroy_ah(ibv_ah* ah) {
    auto* out = reinterpret_cast<c_ah*>(ah);
    c_device* c = dev_of(ah->context);
    --pd_of(ah->pd)->ahs;
    delete out;
    drop_object(c);
    return succeed();
}

// --- CQ ----------------------------------------------------------------------------------

ibv_cq* cxv_create_cq(ibv_context* ctx, int cqe, void* cq_context) {
    return create_cq_with(ctx, cqe, cq_context, cxv::cq::options{});
}

int cxv_destroy_cq(ibv_cq* cq) {
    c_cq* q = cq_of(cq);
    if (q->cq.use_count() > 1) return fail(EBUSY, "cxv_destroy_cq: a QP still completes to the CQ");
    // No event names the CQ once it is going (its queued ones are dropped); back if it stays.
    dev_of(cq->context)->async->remove_cq(cq->handle);
    if (auto s = q->cq->object()->destroy(); !s) {
        dev_of(cq->context)->async->add(cq->handle, cq);
        return fail(s.error());
    }
    return forget(q);
}

int cxv_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) { return op_poll_cq(cq, num_entries, wc); }
int cxv_req_notify_cq(ibv_cq* cq, int solicited_only) { return op_req_notify_cq(cq, solicited_only); }
int cxv_cq_event_fd(ibv_cq* cq) { return cq_of(cq)->cq->event_fd(); }

int cxv_get_cq_event(ibv_cq* cq, int timeout_ms) {
    if (!cq_of(cq)->cq->wait_event(std::chrono::milliseconds(timeout_ms < 0 ? -1 : timeout_ms))) {
        return fail(ETIMEDOUT, "cxv_get_cq_event: no completion event in time");
    }
    ++cq->comp_events_completed;
    return succeed();
}

// --- SRQ ---------------------------------------------------------------------------------

ibv_srq* cxv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (attr == nullptr || attr->attr.max_wr == 0) return fail_null<ibv_srq>(EINVAL, "cxv_create_srq: max_wr is 0");
    cxv::srq::attr a;
    a.max_wr = attr->attr.max_wr + 1;  // one WQE always stays in the list as its sentinel
    a.max_sge = attr->attr.max_sge == 0 ? 1 : attr->attr.max_sge;
    a.limit = attr->attr.srq_limit;
    auto s = cxv::srq::create(pd_of(pd)->pd, a);
    if (!s) return fail_null<ibv_srq>(s.error());
    auto* out = new (std::nothrow) c_srq();
    if (out == nullptr) return fail_null<ibv_srq>(ENOMEM, "out of memory");
    out->context = pd->context;
    out->srq_context = attr->srq_context;
    out->pd = pd;
    out->handle = s.value()->srqn();
    attr->attr.max_wr = s.value()->object()->wqe_count() - 1;
    attr->attr.max_sge = s.value()->object()->max_sge();
    out->srq = std::move(s).value();
    dev_of(pd->context)->async->add(out->handle, static_cast<ibv_srq*>(out));
    return adopt(out);
}

int cxv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask) {
    if (attr_mask & IBV_SRQ_MAX_WR) return fail(EINVAL, "cxv_modify_srq: an SRQ cannot be resized");
    if (attr_mask & IBV_SRQ_LIMIT) {
        if (auto s = srq_of(srq)->srq->arm(attr->srq_limit); !s) return fail(s.error());
    }
    return succeed();
}

int cxv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    const auto& object = srq_of(srq)->srq->object();
    auto st = object->query();
    if (!st) return fail(st.error());
    attr->max_wr = object->wqe_count() - 1;  // as cxv_create_srq granted it
    attr->max_sge = object->max_sge();
    attr->srq_limit = st->lwm;
    return succeed();
}

int cxv_destroy_srq(ibv_srq* srq) {
    c_srq* s = srq_of(srq);
    if (s->srq.use_count() > 1) return fail(EBUSY, "cxv_destroy_srq: a QP still takes its receives from the SRQ");
    dev_of(srq->context)->async->remove_srq(srq->handle);
    if (auto st = s->srq->object()->destroy(); !st) {
        dev_of(srq->context)->async->add(srq->handle, srq);
        return fail(st.error());
    }
    return forget(s);
}

int cxv_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) { return op_post_srq_recv(srq, wr, bad_wr); }

// --- QP ----------------------------------------------------------------------------------

ibv_qp* cxv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) { return cxv_create_qp_ex(pd, attr, nullptr); }

ibv_qp* cxv_create_qp_ex(ibv_pd* pd, ibv_qp_init_attr* attr, const cxv_qp_options* options) {
    return create_qp_with(pd, attr, options, false);
}

int cxv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    c_qp* q = qp_of(qp);
    const ibv_qp_state from = qp->state;
    const ibv_qp_state to = (attr_mask & IBV_QP_STATE) ? attr->qp_state : from;
    qp_state target;
    if (!to_driver(to, target)) return fail(EINVAL, "cxv_modify_qp: unknown target state");
    if (const int missing = required_mask(qp->qp_type, from, to) & ~attr_mask; missing != 0) {
        char text[96];
        std::snprintf(text, sizeof(text), "cxv_modify_qp: this transition needs the attributes of mask 0x%x",
                      missing);
        return fail(EINVAL, text);
    }
    cxv::qp::modify_attr m = q->attrs;
    apply(m, *attr, attr_mask);
    if (auto s = q->qp->modify(target, m); !s) return fail(s.error());
    q->attrs = m;
    qp->state = to;
    return succeed();
}

int cxv_query_qp_state(ibv_qp* qp, ibv_qp_state* state) {
    auto s = qp_of(qp)->qp->query();
    if (!s) return fail(s.error());
    *state = to_verbs(*s);
    qp->state = *state;
    return succeed();
}

int cxv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
    (void)attr_mask;  // everything known is filled in, as providers do
    if (attr == nullptr || init_attr == nullptr) return fail(EINVAL, "cxv_query_qp: no attributes");
    c_qp* q = qp_of(qp);
    ibv_qp_state state;
    if (const int r = cxv_query_qp_state(qp, &state); r != 0) return r;
    std::memset(attr, 0, sizeof(*attr));
    std::memset(init_attr, 0, sizeof(*init_attr));
    const cxv::qp::modify_attr& m = q->attrs;
    attr->qp_state = attr->cur_qp_state = state;
    attr->path_mtu = static_cast<ibv_mtu>(m.path_mtu);
    attr->path_mig_state = IBV_MIG_MIGRATED;
    attr->qkey = m.qkey;
    attr->rq_psn = m.rq_psn;
    attr->sq_psn = m.sq_psn;
    attr->dest_qp_num = m.dest_qpn;
    attr->qp_access_flags = static_cast<unsigned>(m.access);
    attr->ah_attr.dlid = m.ah.dlid;
    attr->ah_attr.sl = m.ah.sl;
    attr->ah_attr.is_global = m.ah.grh ? 1 : 0;
    attr->ah_attr.port_num = m.port;
    std::memcpy(attr->ah_attr.grh.dgid.raw, m.ah.dgid.data(), 16);
    attr->ah_attr.grh.sgid_index = m.ah.sgid_index;
    attr->ah_attr.grh.hop_limit = m.ah.hop_limit;
    attr->ah_attr.grh.traffic_class = m.ah.traffic_class;
    attr->ah_attr.grh.flow_label = m.ah.flow_label;
    attr->pkey_index = m.pkey_index;
    attr->port_num = m.port;
    attr->max_rd_atomic = static_cast<uint8_t>(m.max_rd_atomic);
    attr->max_dest_rd_atomic = static_cast<uint8_t>(m.max_dest_rd_atomic);
    attr->min_rnr_timer = static_cast<uint8_t>(m.min_rnr_timer);
    attr->timeout = static_cast<uint8_t>(m.timeout);
    attr->retry_cnt = static_cast<uint8_t>(m.retry_cnt);
    attr->rnr_retry = static_cast<uint8_t>(m.rnr_retry);
    const cxv::qp::caps granted = q->qp->capabilities();
    attr->cap.max_send_wr = granted.max_send_wr;
    attr->cap.max_recv_wr = qp->srq != nullptr ? 0 : granted.max_recv_wr;
    attr->cap.max_send_sge = granted.max_send_sge;
    attr->cap.max_recv_sge = qp->srq != nullptr ? 0 : granted.max_recv_sge;
    attr->cap.max_inline_data = granted.max_inline_data;
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = q->sig_all ? 1 : 0;
    return succeed();
}

int cxv_destroy_qp(ibv_qp* qp) {
    c_qp* q = qp_of(qp);
    dev_of(qp->context)->async->remove_qp(qp->qp_num);
    if (q->flows.load(std::memory_order_relaxed) != 0) {
        return fail(EBUSY, "cxv_destroy_qp: flows (ibv_create_flow) still steer to the QP");
    }
    if (auto s = q->qp->destroy(); !s) {
        dev_of(qp->context)->async->add(qp->qp_num, qp);
        return fail(s.error());
    }
    return forget(q);
}

int cxv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return multicast_group(qp, gid, lid, true, "cxv_attach_mcast");
}

int cxv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return multicast_group(qp, gid, lid, false, "cxv_detach_mcast");
}

int cxv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) { return op_post_send(qp, wr, bad_wr); }
int cxv_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) { return op_post_recv(qp, wr, bad_wr); }

int cxv_rdma_get_send_comp(ibv_qp* qp, ibv_wc* wc) { return get_comp(qp->send_cq, wc); }
int cxv_rdma_get_recv_comp(ibv_qp* qp, ibv_wc* wc) { return get_comp(qp->recv_cq, wc); }

}  // extern "C"

cxv::device& cxv::verbs_device(ibv_context* ctx) { return *dev_of(ctx)->dev; }
cxv::cq& cxv::verbs_cq(ibv_cq* cq) { return *cq_of(cq)->cq; }
cxv::pd& cxv::verbs_pd(ibv_pd* pd) { return *pd_of(pd)->pd; }
cxv::qp& cxv::verbs_qp(ibv_qp* qp) { return *qp_of(qp)->qp; }
cxv::srq& cxv::verbs_srq(ibv_srq* srq) { return *srq_of(srq)->srq; }

namespace cxv::api::handles {

void hold_context(ibv_context* ctx) { hold(dev_of(ctx)); }
void release_context(ibv_context* ctx) { drop_object(dev_of(ctx)); }

ibv_cq* create_cq_with(ibv_context* ctx, int cqe, void* cq_context, const cxv::cq::options& o) {
    if (cqe <= 0) return fail_null<ibv_cq>(EINVAL, "cxv_create_cq: cqe must be at least 1");
    c_device* c = dev_of(ctx);
    auto q = cxv::cq::create(*c->dev, static_cast<unsigned>(cqe), o);
    if (!q) return fail_null<ibv_cq>(q.error());
    auto* out = new (std::nothrow) c_cq();
    if (out == nullptr) return fail_null<ibv_cq>(ENOMEM, "out of memory");
    out->context = ctx;
    out->cq_context = cq_context;
    out->handle = q.value()->object()->cqn();
    out->cqe = static_cast<int>(q.value()->object()->entries());
    out->cq = std::move(q).value();
    dev_of(ctx)->async->add(out->handle, cq_base(out));
    return cq_base(adopt(out));
}

ibv_qp* create_qp_with(ibv_pd* pd, ibv_qp_init_attr* attr, const cxv_qp_options* options, bool strip_vlan) {
    if (attr == nullptr || attr->send_cq == nullptr || attr->recv_cq == nullptr) {
        return fail_null<ibv_qp>(EINVAL, "cxv_create_qp: a send and a receive CQ are needed");
    }
    cxv::qp::attr a;
    switch (attr->qp_type) {
    case IBV_QPT_RC: a.type = qp_type::rc; break;
    case IBV_QPT_UC: a.type = qp_type::uc; break;
    case IBV_QPT_UD: a.type = qp_type::ud; break;
    case IBV_QPT_RAW_PACKET:
        if (!dev_of(pd->context)->ethernet) {
            return fail_null<ibv_qp>(EOPNOTSUPP, "cxv_create_qp: a raw packet QP needs an Ethernet port");
        }
        a.type = qp_type::raw_packet;
        break;
    default: return fail_null<ibv_qp>(EOPNOTSUPP, "cxv_create_qp: only RC, UC, UD and raw packet QPs");
    }
    a.domain = pd_of(pd)->pd;
    a.send_cq = cq_of(attr->send_cq)->cq;
    a.recv_cq = cq_of(attr->recv_cq)->cq;
    if (attr->srq != nullptr) a.shared = srq_of(attr->srq)->srq;
    a.cap.max_send_wr = attr->cap.max_send_wr;
    a.cap.max_recv_wr = attr->cap.max_recv_wr;
    a.cap.max_send_sge = attr->cap.max_send_sge;
    a.cap.max_recv_sge = attr->cap.max_recv_sge;
    a.cap.max_inline_data = attr->cap.max_inline_data;
    a.signal_all = attr->sq_sig_all != 0;
    if (options != nullptr) {
        switch (options->doorbell) {
        case CXV_DOORBELL_AUTO: break;
        case CXV_DOORBELL_8B: a.doorbell = doorbell_mode::doorbell; break;
        case CXV_DOORBELL_BLUEFLAME: a.doorbell = doorbell_mode::blueflame; break;
        case CXV_DOORBELL_MOVDIR64B: a.doorbell = doorbell_mode::movdir64b; break;
        default: return fail_null<ibv_qp>(EINVAL, "cxv_create_qp_ex: unknown doorbell mode");
        }
        a.multi_producer = options->multi_producer != 0;
    }
    a.strip_vlan = strip_vlan;
    auto q = cxv::qp::create(*dev_of(pd->context)->dev, a);
    if (!q) return fail_null<ibv_qp>(q.error());
    auto* out = new (std::nothrow) c_qp();
    if (out == nullptr) return fail_null<ibv_qp>(ENOMEM, "out of memory");
    ibv_qp& b = out->qp_base;
    b.context = pd->context;
    b.qp_context = attr->qp_context;
    b.pd = pd;
    b.send_cq = attr->send_cq;
    b.recv_cq = attr->recv_cq;
    b.srq = attr->srq;
    b.qp_num = b.handle = q.value()->qpn();
    b.state = IBV_QPS_RESET;
    b.qp_type = attr->qp_type;
    out->sig_all = attr->sq_sig_all != 0;
    const cxv::qp::caps granted = q.value()->capabilities();
    attr->cap.max_send_wr = granted.max_send_wr;
    attr->cap.max_recv_wr = attr->srq != nullptr ? 0 : granted.max_recv_wr;
    attr->cap.max_send_sge = granted.max_send_sge;
    attr->cap.max_recv_sge = attr->srq != nullptr ? 0 : granted.max_recv_sge;
    attr->cap.max_inline_data = granted.max_inline_data;
    out->qp = std::move(q).value();
    dev_of(pd->context)->async->add(b.qp_num, &b);
    return &adopt(out)->qp_base;
}

}  // namespace cxv::api::handles
