// The C API's handles (cxv_verbs.cc, verbs_ex.cc): each libibverbs struct as the base of
// what cxv keeps with it, so a handle converts back with one cast. Private to api/.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "api/cxv.h"
#include "api/verbs_async.h"

namespace cxv::api::handles {

// The context handed out is the `context` member of a struct verbs_context, as a
// provider's is: <infiniband/verbs.h>'s inline extended calls find that struct in front
// of the ibv_context (verbs_get_ctx()) once abi_compat holds the extended marker, and its
// ops that are NULL make them fail with EOPNOTSUPP as the man pages say.
struct c_device : verbs_context {
    ibv_device info{};
    // Shared by every context of the function in this process (cxv_open_device).
    std::shared_ptr<cxv::device> dev;
    bool ethernet = false;
    std::atomic<unsigned> objects{0};  // PDs, MRs, AHs, CQs, SRQs, QPs alive
    // What keeps the context: itself until it is closed, and each object. Whoever takes
    // it to 0 (the close, or the destroy of the last object after a deferred close)
    // frees it, exactly once, whichever threads race.
    std::atomic<unsigned> holds{1};
    std::shared_ptr<api::verbs_async> async;  // shared with the driver's event callback
};
struct c_pd : ibv_pd {
    std::shared_ptr<cxv::pd> pd;
    std::atomic<unsigned> ahs{0};  // AHs hold no reference of their own
};
struct c_mr : ibv_mr {
    std::shared_ptr<cxv::mr> mr;
};

// Every CQ is an ibv_cq_ex, whose first members are ibv_cq's (ibv_cq_ex_to_cq() is a
// cast): the extended poll functions are set on those made by cxv_create_cq_ex, and
// `polled` holds the completion they read.
struct c_cq : ibv_cq_ex {
    std::shared_ptr<cxv::cq> cq;
    ibv_wc polled{};
    std::uint64_t wc_flags = 0;  // IBV_WC_EX_WITH_* asked for
    driver::device_clock* clock = nullptr;  // for IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK
};
static_assert(offsetof(ibv_cq_ex, context) == offsetof(ibv_cq, context) &&
              offsetof(ibv_cq_ex, channel) == offsetof(ibv_cq, channel) &&
              offsetof(ibv_cq_ex, cq_context) == offsetof(ibv_cq, cq_context) &&
              offsetof(ibv_cq_ex, handle) == offsetof(ibv_cq, handle) &&
              offsetof(ibv_cq_ex, cqe) == offsetof(ibv_cq, cqe) &&
              offsetof(ibv_cq_ex, mutex) == offsetof(ibv_cq, mutex) &&
              offsetof(ibv_cq_ex, cond) == offsetof(ibv_cq, cond) &&
              offsetof(ibv_cq_ex, comp_events_completed) == offsetof(ibv_cq, comp_events_completed) &&
              offsetof(ibv_cq_ex, async_events_completed) == offsetof(ibv_cq, async_events_completed) &&
              sizeof(ibv_cq) <= offsetof(ibv_cq_ex, comp_mask));

struct c_srq : ibv_srq {
    std::shared_ptr<cxv::srq> srq;
};

// The WRs of an ibv_wr_* batch (verbs_ex.cc).
struct wr_batch;
struct wr_batch_free {
    void operator()(wr_batch* b) const noexcept;
};

// Every QP is an ibv_qp_ex (whose qp_base is the ibv_qp the caller holds); the ibv_wr_*
// functions and `batch` are set on those made with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.
struct c_qp : ibv_qp_ex {
    std::shared_ptr<cxv::qp> qp;
    cxv::qp::modify_attr attrs;  // what the caller has set so far
    bool sig_all = false;
    std::unique_ptr<wr_batch, wr_batch_free> batch;
    std::atomic<unsigned> flows{0};  // ibv_create_flow's flows steering to it (a raw packet QP)
};
static_assert(offsetof(ibv_qp_ex, qp_base) == 0);

inline c_device* dev_of(ibv_context* c) {
    return static_cast<c_device*>(
        reinterpret_cast<verbs_context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context)));
}
inline c_pd* pd_of(ibv_pd* p) { return static_cast<c_pd*>(p); }
inline c_cq* cq_of(ibv_cq* c) { return static_cast<c_cq*>(reinterpret_cast<ibv_cq_ex*>(c)); }
inline c_cq* cq_of(ibv_cq_ex* c) { return static_cast<c_cq*>(c); }
inline ibv_cq* cq_base(c_cq* c) { return reinterpret_cast<ibv_cq*>(static_cast<ibv_cq_ex*>(c)); }
inline c_srq* srq_of(ibv_srq* s) { return static_cast<c_srq*>(s); }
inline c_qp* qp_of(ibv_qp* q) { return static_cast<c_qp*>(reinterpret_cast<ibv_qp_ex*>(q)); }
inline c_qp* qp_of(ibv_qp_ex* q) { return static_cast<c_qp*>(q); }

// A failed control call: errno and the message for cxv_last_error(); returns the errno
// value (cxv_verbs.cc).
int fail(int code, std::string message);

// An object of the context made or gone outside cxv_verbs.cc (WQs, indirection tables,
// RSS QPs): the context does not close under it (cxv_verbs.cc's hold and drop).
void hold_context(ibv_context* ctx);
void release_context(ibv_context* ctx);

// An RSS QP (verbs_wq.cc): ibv_create_qp_ex with rx_hash_conf and an indirection table.
ibv_qp* create_rss_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr);

// cxv_create_cq with the CQ's options (cxv_verbs.cc): what cxv_create_cq_ex and
// mlx5dv_create_cq ask beyond the count.
ibv_cq* create_cq_with(ibv_context* ctx, int cqe, void* cq_context, const cxv::cq::options& o);

// cxv_create_qp_ex with what ibv_create_qp_ex's create flags ask beyond it (cxv_verbs.cc):
// a raw packet QP's VLAN stripping.
ibv_qp* create_qp_with(ibv_pd* pd, ibv_qp_init_attr* attr, const cxv_qp_options* options, bool strip_vlan);

}  // namespace cxv::api::handles
