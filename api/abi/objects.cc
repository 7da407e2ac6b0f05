// PDs, MRs, completion channels and CQs, SRQs, QPs and AHs: cxv's C API under rdma-core's
// names, with libibverbs' return conventions (ibv_*(3): a pointer or NULL with errno
// set; an int that is 0 or an errno value). Posting and polling never come here: the
// programs inline them through context->ops, which point at cxv's fast path.
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "api/abi/abi.h"
#include "api/abi/providers.h"
#include "api/cxv.h"
#include "api/cxv_verbs.h"
#include "driver/hca/hca.h"

using namespace cxv::abi;

// Marks registered memory MADV_DONTFORK after ibv_fork_init() (devices.cc).
extern "C" int ibv_dontfork_range(void* base, size_t size);
extern "C" int ibv_dofork_range(void* base, size_t size);

// --- PD and MR ---------------------------------------------------------------------------

CXV_ABI_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) { return cxv_alloc_pd(context); }
CXV_ABI_EXPORT int ibv_dealloc_pd(ibv_pd* pd) { return cxv_dealloc_pd(pd); }

// IBV_ACCESS_MW_BIND lets memory windows be bound to the MR; cxv has no memory windows
// (ibv_alloc_mw: EOPNOTSUPP), so the flag has nothing to allow and is dropped, as a
// registration that asks for it succeeds with rdma-core.
#undef ibv_reg_mr
CXV_ABI_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    if (const int r = ibv_dontfork_range(addr, length); r != 0) return fail_null<ibv_mr>(r);
    ibv_mr* mr = cxv_reg_mr(pd, addr, length, access & ~IBV_ACCESS_MW_BIND);
    if (mr == nullptr) {
        const int saved = errno;
        ibv_dofork_range(addr, length);
        errno = saved;
    } else if (ibv_is_fork_initialized() == IBV_FORK_ENABLED) {
        // Through a cxvd, registration may have re-backed the pages with a memfd mapped
        // over them (docs/daemon.md), a new mapping without the advice: given again.
        const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        const auto lo = reinterpret_cast<std::uintptr_t>(addr) & ~(page - 1);
        const auto hi = (reinterpret_cast<std::uintptr_t>(addr) + length + page - 1) & ~(page - 1);
        ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTFORK);
    }
    return mr;
}

// An I/O virtual address other than the buffer's own is not offered (EOPNOTSUPP);
// access flags in IBV_ACCESS_OPTIONAL_RANGE are hints and are dropped.
CXV_ABI_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                        unsigned int access) {
    if (iova != reinterpret_cast<std::uintptr_t>(addr)) return fail_null<ibv_mr>(EOPNOTSUPP);
    return ibv_reg_mr(pd, addr, length, static_cast<int>(access & ~IBV_ACCESS_OPTIONAL_RANGE));
}
#undef ibv_reg_mr_iova
CXV_ABI_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

CXV_ABI_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
    void* addr = mr->addr;
    const size_t length = mr->length;
    if (const int r = cxv_dereg_mr(mr); r != 0) return r;
    ibv_dofork_range(addr, length);
    return 0;
}

CXV_ABI_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
    return fail_null<ibv_mr>(EOPNOTSUPP);
}
CXV_ABI_EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail_null<ibv_pd>(EOPNOTSUPP); }
CXV_ABI_EXPORT void ibv_unimport_pd(ibv_pd*) {}
CXV_ABI_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail_null<ibv_mr>(EOPNOTSUPP); }
CXV_ABI_EXPORT void ibv_unimport_mr(ibv_mr*) {}
CXV_ABI_EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail_null<ibv_dm>(EOPNOTSUPP); }
CXV_ABI_EXPORT void ibv_unimport_dm(ibv_dm*) {}

// --- completion channels and CQs -----------------------------------------------------------
//
// A channel's fd is an epoll instance holding the event fd of each CQ made with it: it
// is readable (poll/epoll/select) when one of them has an event, and
// ibv_get_cq_event() takes one event of one CQ.

CXV_ABI_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
    auto* ch = new (std::nothrow) ibv_comp_channel{};
    if (ch == nullptr) return fail_null<ibv_comp_channel>(ENOMEM);
    ch->context = context;
    ch->fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (ch->fd < 0) {
        const int saved = errno;
        delete ch;
        return fail_null<ibv_comp_channel>(saved);
    }
    return ch;
}

namespace cxv::abi {
std::mutex g_channel_mu;  // the completion channels' CQ counts (refcnt)
}  // namespace cxv::abi

// EBUSY (returned, as an errno value) while a CQ uses the channel.
CXV_ABI_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
    std::unique_lock lock(cxv::abi::g_channel_mu);
    if (channel->refcnt != 0) return fail_errno(EBUSY);
    lock.unlock();
    ::close(channel->fd);
    delete channel;
    return 0;
}

namespace cxv::abi {

// Puts a new CQ's event fd in its completion channel (or destroys the CQ: errno set).
bool join_channel(ibv_cq* cq, ibv_comp_channel* channel) {
    cq->channel = channel;
    if (channel == nullptr) return true;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = cq;
    if (::epoll_ctl(channel->fd, EPOLL_CTL_ADD, cxv_cq_event_fd(cq), &ev) != 0) {
        const int saved = errno;
        cxv_destroy_cq(cq);
        errno = saved;
        return false;
    }
    std::lock_guard lock(g_channel_mu);
    ++channel->refcnt;
    return true;
}

// verbs_context's create_cq_ex, which <infiniband/verbs.h>'s inline ibv_create_cq_ex()
// calls: cxv_create_cq_ex with the completion channel as ibv_create_cq has it.
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) { return cxv_abi_create_cq(context, attr, 64); }

// rdma-core's mlx5 provider sizes a send WQE for the largest segment set the QP type
// could need, whatever the program asks: for RC and UC a memory-window bind (control,
// UMR control, mkey context and 64 bytes of KLMs: 192 bytes), for UD the control and
// datagram segments (64), plus the gather list or the inline data asked for, rounded up
// to 64-byte blocks; what the block leaves after that overhead and the 4-byte inline
// header is the max_inline_data it reports (60 bytes for one SGE). Programs written on it
// post small inline sends without asking (rdma_xclient: 16 bytes, max_inline_data 0), so
// this library asks cxv for as much.
unsigned provider_inline_room(ibv_qp_type type, unsigned max_send_sge, unsigned max_inline_data) {
    if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD) return max_inline_data;
    const unsigned overhead = type == IBV_QPT_UD ? 64 : 192;
    const unsigned gather = overhead + max_send_sge * 16;
    const unsigned inl = max_inline_data == 0 ? 0 : overhead + (4 + max_inline_data + 15) / 16 * 16;
    const unsigned wqe = (std::max(gather, inl) + 63) / 64 * 64;
    return wqe > overhead + 4 ? std::max(max_inline_data, wqe - overhead - 4) : max_inline_data;
}

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
    if (attr != nullptr) {
        attr->cap.max_inline_data =
            provider_inline_room(attr->qp_type, attr->cap.max_send_sge, attr->cap.max_inline_data);
    }
    return cxv_create_qp_init_ex(context, attr);
}

}  // namespace cxv::abi

// More than max_cqe entries (ibv_query_device(3)) is EINVAL, as mlx5_ib refuses it.
CXV_ABI_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                                     int comp_vector) {
    if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) return fail_null<ibv_cq>(EINVAL);
    if (cqe > max_cqe(context)) return fail_null<ibv_cq>(EINVAL);
    ibv_cq* cq = cxv_create_cq(context, cqe, cq_context);
    if (cq == nullptr) return nullptr;
    if (!join_channel(cq, channel)) return nullptr;
    return cq;
}

CXV_ABI_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
    ibv_comp_channel* ch = cq->channel;
    const int fd = cxv_cq_event_fd(cq);
    // Off the channel while the fd is still this CQ's (once closed, its number may be a
    // new CQ's); back on it if the CQ cannot go.
    if (ch != nullptr) ::epoll_ctl(ch->fd, EPOLL_CTL_DEL, fd, nullptr);
    if (const int r = cxv_destroy_cq(cq); r != 0) {
        if (ch != nullptr) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.ptr = cq;
            ::epoll_ctl(ch->fd, EPOLL_CTL_ADD, fd, &ev);
        }
        return r;
    }
    if (ch != nullptr) {
        std::lock_guard lock(cxv::abi::g_channel_mu);
        --ch->refcnt;
    }
    return 0;
}

namespace {

// Whether a signal handler that does not ask for SA_RESTART is installed. rdma-core waits
// in read(2) of the channel fd, which a handler with SA_RESTART restarts and one without
// interrupts (EINTR); epoll_wait(2) is never restarted, and does not say which signal
// interrupted it. So an interrupted wait ends with EINTR when some handler could have
// been one without SA_RESTART, and goes on when every handler has it (signal(3)'s) or
// none is installed (a stop and SIGCONT). Handlers of the synchronous signals, which a
// thread raises by what it executes and so never while it sleeps in the wait (a fault,
// a trap, abort(3): what debuggers' and sanitizers' runtimes catch), do not count. Only
// after an interruption: a slow path.
bool non_restarting_handler() {
    for (int s = 1; s < NSIG; ++s) {
        if (s == SIGSEGV || s == SIGBUS || s == SIGFPE || s == SIGILL || s == SIGTRAP || s == SIGSYS || s == SIGABRT) {
            continue;
        }
        struct sigaction sa {};
        if (::sigaction(s, nullptr, &sa) != 0) continue;  // glibc's own signals
        if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) continue;
        if ((sa.sa_flags & SA_RESTART) == 0) return true;
    }
    return false;
}

}  // namespace

// ibv_get_cq_event(3): waits (or, on a channel fd set O_NONBLOCK, fails with EAGAIN) for
// an event of one of the channel's CQs, and takes it; -1 with EINTR when a signal
// handler without SA_RESTART interrupts the wait, as rdma-core's read() of the fd does.
CXV_ABI_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
    const int flags = ::fcntl(channel->fd, F_GETFL);
    const bool nonblocking = flags >= 0 && (flags & O_NONBLOCK) != 0;
    for (;;) {
        epoll_event ev{};
        const int n = ::epoll_wait(channel->fd, &ev, 1, nonblocking ? 0 : -1);
        if (n < 0 && errno == EINTR && !nonblocking && !non_restarting_handler()) continue;
        if (n < 0) return -1;
        if (n == 0) return fail_errno(EAGAIN), -1;
        auto* got = static_cast<ibv_cq*>(ev.data.ptr);
        if (cxv_get_cq_event(got, 0) != 0) continue;  // another thread took it
        *cq = got;
        *cq_context = got->cq_context;
        return 0;
    }
}

// The events are counted (comp_events_completed) as ibv_get_cq_event takes them
// (cxv_get_cq_event); an event holds nothing that must be given back, and ibv_destroy_cq
// has nothing to wait for: acknowledging is a no-op.
CXV_ABI_EXPORT void ibv_ack_cq_events(ibv_cq*, unsigned int) {}

CXV_ABI_EXPORT int ibv_resize_cq(ibv_cq*, int) { return fail_errno(EOPNOTSUPP); }

// --- SRQ ---------------------------------------------------------------------------------

CXV_ABI_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
    return cxv_create_srq(pd, srq_init_attr);
}
CXV_ABI_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
    return cxv_modify_srq(srq, srq_attr, srq_attr_mask);
}
CXV_ABI_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) { return cxv_query_srq(srq, srq_attr); }
CXV_ABI_EXPORT int ibv_destroy_srq(ibv_srq* srq) { return cxv_destroy_srq(srq); }

// --- QP ----------------------------------------------------------------------------------

// RC, UC, UD and raw packet (on an Ethernet port); other types (XRC, DC): NULL with
// EOPNOTSUPP.
CXV_ABI_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    if (qp_init_attr != nullptr) {
        qp_init_attr->cap.max_inline_data = cxv::abi::provider_inline_room(
            qp_init_attr->qp_type, qp_init_attr->cap.max_send_sge, qp_init_attr->cap.max_inline_data);
    }
    return cxv_create_qp(pd, qp_init_attr);
}
// Linux's ib_core checks an address vector before the provider sees it
// (rdma_check_ah_attr): on an Ethernet port it must carry a GRH, RoCE's IP header, else
// EINVAL, whatever GID the attributes hold. cxv's driver would address the GID anyway;
// a program that forgot is_global (qperf's RC tests without -cm1 on RoCE) fails here as
// it does on rdma-core.
CXV_ABI_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    if (attr != nullptr && (attr_mask & IBV_QP_AV) != 0 && attr->ah_attr.is_global == 0 &&
        cxv::verbs_device(qp->context).hca().ethernet()) {
        return fail_errno(EINVAL);
    }
    return cxv_modify_qp(qp, attr, attr_mask);
}
CXV_ABI_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
    return cxv_query_qp(qp, attr, attr_mask, init_attr);
}
CXV_ABI_EXPORT int ibv_destroy_qp(ibv_qp* qp) { return cxv_destroy_qp(qp); }

// The ibv_wr_* interface of a QP made by ibv_create_qp_ex() with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (the context's create_qp_ex, cxv_create_qp_init_ex);
// NULL (errno EOPNOTSUPP) for any other QP.
CXV_ABI_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return cxv_qp_to_qp_ex(qp); }
CXV_ABI_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) { return 0; }
CXV_ABI_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return cxv_attach_mcast(qp, gid, lid);
}
CXV_ABI_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return cxv_detach_mcast(qp, gid, lid);
}

// --- AH ----------------------------------------------------------------------------------

// mlx5_create_ah: an Ethernet port's packets need the GRH (RoCE's IP header), so an AH
// without one is EINVAL there.
CXV_ABI_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    if (attr != nullptr && attr->is_global == 0 && cxv::verbs_device(pd->context).hca().ethernet()) {
        return fail_null<ibv_ah>(EINVAL);
    }
    return cxv_create_ah(pd, attr);
}
CXV_ABI_EXPORT int ibv_destroy_ah(ibv_ah* ah) { return cxv_destroy_ah(ah); }

// ibv_init_ah_from_wc(3): the path back to a UD message's sender. With a GRH (IBTA 8.3)
// the source GID comes from it; on RoCE v2 over IPv4 the 40 bytes hold 20 zero bytes and
// the IPv4 header, whose addresses are taken as IPv4-mapped GIDs.
CXV_ABI_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                                       ibv_ah_attr* ah_attr) {
    std::memset(ah_attr, 0, sizeof(*ah_attr));
    ah_attr->dlid = wc->slid;
    ah_attr->sl = wc->sl;
    ah_attr->src_path_bits = wc->dlid_path_bits;
    ah_attr->port_num = port_num;
    if ((wc->wc_flags & IBV_WC_GRH) == 0) return 0;
    ibv_gid sgid{}, dgid{};
    const auto* raw = reinterpret_cast<const std::uint8_t*>(grh);
    bool zero20 = true;
    for (int i = 0; i < 20; ++i) zero20 = zero20 && raw[i] == 0;
    if (zero20 && (raw[20] >> 4) == 4) {  // an IPv4 header: version 4
        sgid.raw[10] = sgid.raw[11] = dgid.raw[10] = dgid.raw[11] = 0xff;
        std::memcpy(&sgid.raw[12], raw + 20 + 12, 4);  // source address
        std::memcpy(&dgid.raw[12], raw + 20 + 16, 4);  // destination address
        ah_attr->grh.traffic_class = raw[21];
    } else {
        sgid = grh->sgid;
        dgid = grh->dgid;
        const std::uint32_t vtf = be32toh(grh->version_tclass_flow);
        ah_attr->grh.flow_label = vtf & 0xfffff;
        ah_attr->grh.traffic_class = static_cast<std::uint8_t>(vtf >> 20);
    }
    ah_attr->is_global = 1;
    ah_attr->grh.dgid = sgid;
    ah_attr->grh.hop_limit = 0xff;
    // The local GID the message came to is the one to send back from.
    for (int i = 0;; ++i) {
        ibv_gid g;
        if (ibv_query_gid(context, port_num, i, &g) != 0) return fail_errno(ENOENT), -1;
        if (std::memcmp(g.raw, dgid.raw, 16) == 0) {
            ah_attr->grh.sgid_index = static_cast<std::uint8_t>(i);
            return 0;
        }
    }
}

CXV_ABI_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
    ibv_ah_attr attr;
    if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
    return cxv_create_ah(pd, &attr);
}

CXV_ABI_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) {
    return fail_errno(EOPNOTSUPP);
}

// --- asynchronous events ------------------------------------------------------------------

CXV_ABI_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
    return cxv_get_async_event(context, event);
}
// Destroying a queue does not wait for its events' acknowledgement (its later events are
// dropped instead), so there is nothing to count.
CXV_ABI_EXPORT void ibv_ack_async_event(ibv_async_event*) {}

// create_cq_ex with the entry stride mlx5dv_create_cq(3) asks (cxv's libmlx5.so.1).
CXV_ABI_EXPORT ibv_cq_ex* cxv_abi_create_cq(ibv_context* context, ibv_cq_init_attr_ex* attr, unsigned cqe_size) {
    if (attr == nullptr) return fail_null<ibv_cq_ex>(EINVAL);
    if (attr->comp_vector >= static_cast<std::uint32_t>(context->num_comp_vectors) ||
        attr->cqe > static_cast<std::uint32_t>(max_cqe(context))) {
        return fail_null<ibv_cq_ex>(EINVAL);
    }
    ibv_cq_ex* cq = cxv::create_cq_ex(context, attr, cqe_size);
    if (cq == nullptr) return nullptr;
    if (!join_channel(ibv_cq_ex_to_cq(cq), attr->channel)) return nullptr;
    return cq;
}
