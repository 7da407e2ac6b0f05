// The extended CQ (ibv_create_cq_ex(3): ibv_start_poll / ibv_next_poll / ibv_end_poll and
// the ibv_wc_read_* accessors) and the extended send interface of a QP (ibv_wr_post(3):
// ibv_wr_start, the ibv_wr_<opcode> builders and their setters, ibv_wr_complete,
// ibv_wr_abort), on the same fast path as ibv_poll_cq and ibv_post_send: the poll
// functions take one completion at a time from cxv's CQ poller, and a batch is a list
// of ibv_send_wr in storage the QP allocated at its creation, posted with its
// post_send. Neither allocates, locks or makes a system call.
#include <cerrno>
#include <cstring>
#include <new>

#include "api/cxv_verbs.h"
#include "api/verbs_handles.h"
#include "api/verbs_post.h"
#include "driver/hca/clock.h"
#include "queues/send_wqe.h"

namespace cxv::api::handles {

// The WRs of one ibv_wr_start .. ibv_wr_complete batch: up to the QP's send queue depth,
// each with room for the QP's gather entries and its inline data (copied at the setter,
// as ibv_wr_set_inline_data(3) lets the caller reuse its buffer at once).
struct wr_batch {
    unsigned cap = 0, per_sge = 1, max_sge = 0, max_inline = 0;
    ibv_qp_type type = IBV_QPT_RC;
    std::uint64_t ops = 0;  // IBV_QP_EX_WITH_* the QP was created with
    std::unique_ptr<ibv_send_wr[]> wrs;
    std::unique_ptr<ibv_sge[]> sges;      // cap * per_sge
    std::unique_ptr<std::byte[]> inline_;  // cap * max_inline
    unsigned n = 0;                 // WRs built
    ibv_send_wr* cur = nullptr;     // the one the setters fill (NULL after a refused builder)
    int err = 0;                    // the first error of the batch: ibv_wr_complete returns it
    bool open = false;
};

void wr_batch_free::operator()(wr_batch* b) const noexcept { delete b; }

}  // namespace cxv::api::handles

namespace {

using namespace cxv;
using namespace cxv::api::handles;

// --- extended CQ -----------------------------------------------------------------------

c_cq* ex(ibv_cq_ex* c) noexcept { return cq_of(c); }

int cq_next_poll(ibv_cq_ex* c) noexcept {
    c_cq* q = ex(c);
    if (q->cq->poll(1, &q->polled) == 0) return ENOENT;
    c->status = q->polled.status;
    c->wr_id = q->polled.wr_id;
    return 0;
}
// ibv_start_poll(3): attr->comp_mask must be 0; ENOENT when the CQ is empty (and then
// ibv_end_poll is not to be called).
int cq_start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) noexcept {
    if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
    return cq_next_poll(c);
}
void cq_end_poll(ibv_cq_ex*) noexcept {}  // nothing held between start and end: no lock to drop

ibv_wc_opcode read_opcode(ibv_cq_ex* c) noexcept { return ex(c)->polled.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* c) noexcept { return ex(c)->polled.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) noexcept { return ex(c)->polled.byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) noexcept { return ex(c)->polled.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* c) noexcept { return ex(c)->polled.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) noexcept { return ex(c)->polled.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) noexcept { return ex(c)->polled.wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) noexcept { return ex(c)->polled.slid; }
uint8_t read_sl(ibv_cq_ex* c) noexcept { return ex(c)->polled.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) noexcept { return ex(c)->polled.dlid_path_bits; }
// The CQE's own fields, which the CQ keeps (cxv::cq::keep_cqe_fields): the device clock's
// ticks, those in CLOCK_REALTIME nanoseconds by the device clock's measured rate, and a
// raw packet receive's flow tag.
uint64_t read_completion_ts(ibv_cq_ex* c) noexcept { return ex(c)->cq->last_timestamp(); }
uint64_t read_completion_wallclock_ns(ibv_cq_ex* c) noexcept {
    const c_cq* q = ex(c);
    return static_cast<uint64_t>(q->clock->to_realtime_ns(q->cq->last_timestamp()));
}
uint32_t read_flow_tag(ibv_cq_ex* c) noexcept { return ex(c)->cq->last_flow_tag(); }
// A raw packet receive's stripped C-VLAN tag (its TCI), as rdma-core's mlx5 reads vlan_info.
uint16_t read_cvlan(ibv_cq_ex* c) noexcept { return ex(c)->cq->last_cvlan(); }

// --- extended send: the batch's builders and setters ------------------------------------

wr_batch& batch_of(ibv_qp_ex* q) noexcept { return *qp_of(q)->batch; }

// A new WR of `op` at the end of the batch (NULL, the batch's error set, when the QP was
// not created with the opcode, no batch is open, or the batch is full).
ibv_send_wr* begin(ibv_qp_ex* q, ibv_wr_opcode op, std::uint64_t with) noexcept {
    wr_batch& b = batch_of(q);
    b.cur = nullptr;
    int e = 0;
    if (!b.open || (b.ops & with) == 0) {
        e = EINVAL;
    } else if (b.n == b.cap) {
        e = ENOMEM;
    }
    if (e != 0) {
        if (b.err == 0) b.err = e;
        return nullptr;
    }
    const unsigned i = b.n++;
    ibv_send_wr& w = b.wrs[i];
    w = ibv_send_wr{};
    w.wr_id = q->wr_id;
    w.send_flags = q->wr_flags;
    w.opcode = op;
    w.sg_list = &b.sges[std::size_t{i} * b.per_sge];
    b.cur = &w;
    return &w;
}

void set_rdma(ibv_send_wr* w, uint32_t rkey, uint64_t remote_addr) noexcept {
    if (w == nullptr) return;
    w->wr.rdma.rkey = rkey;
    w->wr.rdma.remote_addr = remote_addr;
}

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) noexcept {
    set_rdma(begin(q, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE), rkey, addr);
}
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) noexcept {
    ibv_send_wr* w = begin(q, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    set_rdma(w, rkey, addr);
    if (w != nullptr) w->imm_data = imm;
}
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) noexcept {
    set_rdma(begin(q, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ), rkey, addr);
}
void wr_send(ibv_qp_ex* q) noexcept { begin(q, IBV_WR_SEND, IBV_QP_EX_WITH_SEND); }
void wr_send_imm(ibv_qp_ex* q, __be32 imm) noexcept {
    if (ibv_send_wr* w = begin(q, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM)) w->imm_data = imm;
}
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) noexcept {
    if (ibv_send_wr* w = begin(q, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)) {
        w->wr.atomic = {addr, compare, swap, rkey};
    }
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) noexcept {
    if (ibv_send_wr* w = begin(q, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)) {
        w->wr.atomic = {addr, add, 0, rkey};
    }
}

// The setters fill the last WR built; a refused builder leaves nothing to fill.
void refuse(wr_batch& b, int e) noexcept {
    if (b.err == 0) b.err = e;
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) noexcept {
    wr_batch& b = batch_of(q);
    if (b.cur == nullptr || b.type != IBV_QPT_UD) return;  // ignored on connected QPs
    b.cur->wr.ud.ah = ah;
    b.cur->wr.ud.remote_qpn = remote_qpn;
    b.cur->wr.ud.remote_qkey = remote_qkey;
}

void wr_set_sge_list(ibv_qp_ex* q, size_t num_sge, const ibv_sge* sg_list) noexcept {
    wr_batch& b = batch_of(q);
    if (b.cur == nullptr) return;
    if (num_sge > b.max_sge) return refuse(b, EINVAL);
    if (num_sge != 0) std::memcpy(b.cur->sg_list, sg_list, num_sge * sizeof(ibv_sge));
    b.cur->num_sge = static_cast<int>(num_sge);
    b.cur->send_flags &= ~static_cast<unsigned>(IBV_SEND_INLINE);
}
void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) noexcept {
    const ibv_sge s{addr, length, lkey};
    wr_set_sge_list(q, 1, &s);
}

// Inline data is copied into the batch's storage now, gathered into one entry.
void wr_set_inline_data_list(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* bufs) noexcept {
    wr_batch& b = batch_of(q);
    if (b.cur == nullptr) return;
    std::size_t total = 0;
    for (std::size_t i = 0; i < num_buf; ++i) total += bufs[i].length;
    if (total > b.max_inline) return refuse(b, EINVAL);
    const auto i = static_cast<std::size_t>(b.cur - b.wrs.get());
    std::byte* at = b.inline_.get() + i * b.max_inline;
    std::size_t off = 0;
    for (std::size_t k = 0; k < num_buf; ++k) {
        if (bufs[k].length != 0) std::memcpy(at + off, bufs[k].addr, bufs[k].length);
        off += bufs[k].length;
    }
    b.cur->sg_list[0] = ibv_sge{reinterpret_cast<std::uintptr_t>(at), static_cast<uint32_t>(total), 0};
    b.cur->num_sge = total == 0 ? 0 : 1;
    b.cur->send_flags |= IBV_SEND_INLINE;
}
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) noexcept {
    const ibv_data_buf d{addr, length};
    wr_set_inline_data_list(q, 1, &d);
}

// An empty batch, open (ibv_wr_start) or closed (ibv_wr_abort, and after ibv_wr_complete).
void reset_batch(ibv_qp_ex* q, bool open) noexcept {
    wr_batch& b = batch_of(q);
    b.open = open;
    b.n = 0;
    b.cur = nullptr;
    b.err = 0;
}
void wr_start(ibv_qp_ex* q) noexcept { reset_batch(q, true); }
void wr_abort(ibv_qp_ex* q) noexcept { reset_batch(q, false); }

// ibv_wr_complete(3): posts the batch, all of it or (returning the error) none of it:
// an error of a builder or setter, or ENOMEM when the send queue has no room for it all.
int wr_complete(ibv_qp_ex* q) noexcept {
    wr_batch& b = batch_of(q);
    const unsigned n = b.n;
    const int err = b.open ? b.err : EINVAL;
    wr_abort(q);
    if (err != 0) return err;
    if (n == 0) return 0;
    // What post_send would refuse part-way is checked first, so that it posts all of the
    // batch: a UD WR without its address, inline data on an opcode that has none, the
    // ring's room for every WQE.
    for (unsigned i = 0; i < n; ++i) {
        const ibv_send_wr& w = b.wrs[i];
        hw::wqe_opcode op{};
        if (!api::wqe_opcode_of(w.opcode, b.type, op)) return EINVAL;
        if (b.type == IBV_QPT_UD && w.wr.ud.ah == nullptr) return EINVAL;
        if ((w.send_flags & IBV_SEND_INLINE) != 0 && !queues::send_wqe::allows_inline(op)) return EINVAL;
        b.wrs[i].next = i + 1 < n ? &b.wrs[i + 1] : nullptr;
    }
    cxv::qp& qp = *qp_of(q)->qp;
    if (!qp.send_fits(&b.wrs[0])) return ENOMEM;
    ibv_send_wr* bad = nullptr;
    return qp.post_send(&b.wrs[0], &bad);
}

// The send_ops_flags each transport has (IBTA: atomics and RDMA READ on RC only, RDMA
// WRITE on RC and UC, SEND everywhere).
constexpr std::uint64_t kSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr std::uint64_t kWriteOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
constexpr std::uint64_t kRcOps = kSendOps | kWriteOps | IBV_QP_EX_WITH_RDMA_READ |
                                 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
std::uint64_t ops_of(ibv_qp_type t) {
    return t == IBV_QPT_RC                ? kRcOps
           : t == IBV_QPT_UC              ? kSendOps | kWriteOps
           : t == IBV_QPT_UD              ? kSendOps
           : t == IBV_QPT_RAW_PACKET      ? std::uint64_t{IBV_QP_EX_WITH_SEND}
                                          : 0;
}

}  // namespace

extern "C" {

ibv_cq_ex* cxv_create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr) { return cxv::create_cq_ex(ctx, attr, 64); }

}  // extern "C"

ibv_cq_ex* cxv::create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr, unsigned cqe_size) {
    if (attr == nullptr) {
        fail(EINVAL, "cxv_create_cq_ex: no attributes");
        return nullptr;
    }
    constexpr std::uint32_t known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    if ((attr->comp_mask & ~known_mask) != 0) {
        fail(EINVAL, "cxv_create_cq_ex: unknown comp_mask bits");
        return nullptr;
    }
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0 && attr->parent_domain != nullptr) {
        fail(EOPNOTSUPP, "cxv_create_cq_ex: parent domains are not supported");
        return nullptr;
    }
    cq::options o;
    o.cqe_size = cqe_size;
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0) {
        // Single-threaded polling is what cxv's CQs assume anyway. Ignoring overruns is
        // the CQ context's oi bit, as mlx5_ib sets it. Other flags: EINVAL, as rdma-core.
        constexpr std::uint32_t known_flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        if ((attr->flags & ~known_flags) != 0) {
            fail(EINVAL, "cxv_create_cq_ex: unknown flags");
            return nullptr;
        }
        o.ignore_overrun = (attr->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0;
    }
    constexpr std::uint64_t kCqeFields = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                         IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_FLOW_TAG |
                                         IBV_WC_EX_WITH_CVLAN;
    if ((attr->wc_flags & ~(std::uint64_t{IBV_WC_STANDARD_FLAGS} | kCqeFields)) != 0) {
        fail(EOPNOTSUPP, "cxv_create_cq_ex: tag matching fields are not supported");
        return nullptr;
    }
    driver::device_clock* clock = nullptr;
    if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) {
        auto c = verbs_device(ctx).clock();
        if (!c) {
            fail(EOPNOTSUPP, "cxv_create_cq_ex: wall-clock timestamps need the device clock, which " +
                                 c.error().message);
            return nullptr;
        }
        clock = *c;
    }
    if (attr->cqe == 0 || attr->cqe > 0x7fffffffu) {
        fail(EINVAL, "cxv_create_cq_ex: cqe must be at least 1");
        return nullptr;
    }
    ibv_cq* base = create_cq_with(ctx, static_cast<int>(attr->cqe), attr->cq_context, o);
    if (base == nullptr) return nullptr;
    c_cq* q = cq_of(base);
    q->wc_flags = attr->wc_flags;
    q->comp_mask = 0;
    q->clock = clock;
    if (attr->wc_flags & kCqeFields) q->cq->keep_cqe_fields();
    if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) q->read_completion_ts = read_completion_ts;
    if (clock != nullptr) q->read_completion_wallclock_ns = read_completion_wallclock_ns;
    if (attr->wc_flags & IBV_WC_EX_WITH_FLOW_TAG) q->read_flow_tag = read_flow_tag;
    if (attr->wc_flags & IBV_WC_EX_WITH_CVLAN) q->read_cvlan = read_cvlan;
    q->start_poll = cq_start_poll;
    q->next_poll = cq_next_poll;
    q->end_poll = cq_end_poll;
    q->read_opcode = read_opcode;
    q->read_vendor_err = read_vendor_err;
    q->read_wc_flags = read_wc_flags;
    const std::uint64_t f = attr->wc_flags;
    if (f & IBV_WC_EX_WITH_BYTE_LEN) q->read_byte_len = read_byte_len;
    if (f & IBV_WC_EX_WITH_IMM) q->read_imm_data = read_imm_data;
    if (f & IBV_WC_EX_WITH_QP_NUM) q->read_qp_num = read_qp_num;
    if (f & IBV_WC_EX_WITH_SRC_QP) q->read_src_qp = read_src_qp;
    if (f & IBV_WC_EX_WITH_SLID) q->read_slid = read_slid;
    if (f & IBV_WC_EX_WITH_SL) q->read_sl = read_sl;
    if (f & IBV_WC_EX_WITH_DLID_PATH_BITS) q->read_dlid_path_bits = read_dlid_path_bits;
    return q;
}

extern "C" {

ibv_qp* cxv_create_qp_init_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
    if (attr == nullptr || (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
        fail(EINVAL, "cxv_create_qp_init_ex: a PD is needed (IBV_QP_INIT_ATTR_PD)");
        return nullptr;
    }
    if ((attr->comp_mask & (IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE)) != 0) {
        return create_rss_qp(ctx, attr);
    }
    const std::uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    const std::uint32_t flags = (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 ? attr->create_flags : 0;
    // Of the create flags, a raw packet QP's VLAN stripping (as mlx5_ib takes it).
    const std::uint32_t flags_taken = attr->qp_type == IBV_QPT_RAW_PACKET ? IBV_QP_CREATE_CVLAN_STRIPPING : 0;
    if ((attr->comp_mask & ~known) != 0 || (flags & ~flags_taken) != 0) {
        fail(EOPNOTSUPP, "cxv_create_qp_init_ex: XRC, TSO, source QPN and create flags other than a raw packet "
                         "QP's VLAN stripping are not supported");
        return nullptr;
    }
    const bool send_ops = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if (send_ops && (attr->send_ops_flags & ~ops_of(attr->qp_type)) != 0) {
        fail(EOPNOTSUPP, "cxv_create_qp_init_ex: send_ops_flags the QP type does not have, or bind MW, local "
                         "invalidate, send with invalidate, TSO or atomic write");
        return nullptr;
    }
    ibv_qp_init_attr a{};
    a.qp_context = attr->qp_context;
    a.send_cq = attr->send_cq;
    a.recv_cq = attr->recv_cq;
    a.srq = attr->srq;
    a.cap = attr->cap;
    a.qp_type = attr->qp_type;
    a.sq_sig_all = attr->sq_sig_all;
    ibv_qp* qp = create_qp_with(attr->pd, &a, nullptr, (flags & IBV_QP_CREATE_CVLAN_STRIPPING) != 0);
    if (qp == nullptr) return nullptr;
    attr->cap = a.cap;
    if (!send_ops) return qp;
    c_qp* q = qp_of(qp);
    auto* b = new (std::nothrow) wr_batch();
    if (b != nullptr) {
        q->batch.reset(b);
        b->cap = a.cap.max_send_wr;
        b->max_sge = a.cap.max_send_sge;
        b->per_sge = b->max_sge == 0 ? 1 : b->max_sge;
        b->max_inline = a.cap.max_inline_data;
        b->type = a.qp_type;
        b->ops = attr->send_ops_flags;
        b->wrs.reset(new (std::nothrow) ibv_send_wr[b->cap]);
        b->sges.reset(new (std::nothrow) ibv_sge[std::size_t{b->cap} * b->per_sge]);
        b->inline_.reset(new (std::nothrow) std::byte[std::size_t{b->cap} * b->max_inline + 1]);
    }
    if (b == nullptr || !b->wrs || !b->sges || !b->inline_) {
        cxv_destroy_qp(qp);
        fail(ENOMEM, "cxv_create_qp_init_ex: out of memory");
        return nullptr;
    }
    q->comp_mask = 0;
    q->wr_rdma_write = wr_rdma_write;
    q->wr_rdma_write_imm = wr_rdma_write_imm;
    q->wr_rdma_read = wr_rdma_read;
    q->wr_send = wr_send;
    q->wr_send_imm = wr_send_imm;
    q->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    q->wr_atomic_fetch_add = wr_atomic_fetch_add;
    q->wr_set_ud_addr = wr_set_ud_addr;
    q->wr_set_sge = wr_set_sge;
    q->wr_set_sge_list = wr_set_sge_list;
    q->wr_set_inline_data = wr_set_inline_data;
    q->wr_set_inline_data_list = wr_set_inline_data_list;
    q->wr_start = wr_start;
    q->wr_complete = wr_complete;
    q->wr_abort = wr_abort;
    return qp;
}

ibv_qp_ex* cxv_qp_to_qp_ex(ibv_qp* qp) {
    c_qp* q = qp_of(qp);
    if (!q->batch) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    return q;
}

}  // extern "C"
