/*
 * cxv's C API: a device opened over VFIO and its verbs objects, handed out as
 * libibverbs' own structs (struct ibv_context, ibv_pd, ibv_mr, ibv_cq, ibv_srq, ibv_qp,
 * ibv_ah from <infiniband/verbs.h>, used as types only: nothing here links libibverbs).
 *
 * The fast path has the semantics of the verbs man pages (ibv_post_send(3),
 * ibv_post_recv(3), ibv_post_srq_recv(3), ibv_poll_cq(3)):
 *   - a WR list is taken in order and stops at the first WR that cannot be posted,
 *     which *bad_wr names; the WRs before it are posted (one doorbell record update
 *     and one doorbell for the list), the ones from it on are not;
 *   - the return value is 0 or an errno value: ENOMEM when the queue is full, EINVAL
 *     for too many SGEs, inline data beyond the QP's limit, an opcode the QP's
 *     transport does not have, a UD WR without an address handle, or a post to the
 *     receive queue of a QP whose receives come from an SRQ;
 *   - nothing allocates, locks, makes a system call or logs.
 *
 * The handles are filled in as a provider fills them, so libibverbs' inline entry points
 * work on them unchanged: ibv_post_send(qp, ...), ibv_post_recv, ibv_post_srq_recv,
 * ibv_poll_cq and ibv_req_notify_cq dispatch through handle->context->ops to the same
 * functions as cxv_post_send() and the others below. So do librdmacm's inline
 * rdma_post_*() of <rdma/rdma_verbs.h> on an rdma_cm_id whose qp (and srq) are cxv's.
 * The rdma_cm-style calls below (cxv_rdma_post_recvv, ...) take the QP directly.
 *
 * Control calls return NULL or an errno value as their ibv_* namesakes do, with errno
 * set; cxv_last_error() then says what failed in words (for a firmware refusal: the
 * command, status and syndrome).
 *
 * Threads: control calls on one device from one thread at a time; per QP one thread
 * posting sends (any number on a QP created with cxv_qp_options.multi_producer), one
 * posting receives; per CQ one thread polling. Create every QP of a CQ before another
 * thread polls that CQ.
 *
 *   struct ibv_context *ctx = cxv_open_device("0000:3b:00.0");
 *   struct ibv_pd *pd = cxv_alloc_pd(ctx);
 *   struct ibv_mr *mr = cxv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
 *   struct ibv_cq *cq = cxv_create_cq(ctx, 256, NULL);
 *   struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
 *                                 .cap = {.max_send_wr = 64, .max_recv_wr = 64,
 *                                         .max_send_sge = 1, .max_recv_sge = 1}};
 *   struct ibv_qp *qp = cxv_create_qp(pd, &qa);
 *   cxv_modify_qp(qp, &attr, IBV_QP_STATE | ...);   INIT, RTR, RTS as with ibv_modify_qp
 *   ibv_post_send(qp, &wr, &bad);                    or cxv_post_send(qp, &wr, &bad)
 *   n = ibv_poll_cq(cq, 16, wc);
 */
#ifndef CXV_API_CXV_VERBS_H
#define CXV_API_CXV_VERBS_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Device --------------------------------------------------------------------- */

/* Opens the function at PCI address `bdf` ("0000:3b:00.0") through VFIO and brings the
 * HCA up. NULL with errno set when it cannot (cxv_last_error() says why and what to do,
 * e.g. bind the function to vfio-pci). */
struct ibv_context *cxv_open_device(const char *bdf);
/* Tears the HCA down and closes the function. EBUSY (nothing done) while any PD, CQ, QP,
 * SRQ, MR or AH made on it is alive. */
int cxv_close_device(struct ibv_context *ctx);
/* As cxv_close_device, but with objects of the context still alive it returns 0 at once
 * and leaves the context to go with the last of them: they stay usable, and destroying
 * the last one closes the context (and the function, if no other context has it open).
 * Objects never destroyed keep it until the process exits. ibv_close_device(3)'s
 * semantics: rdma-core's returns 0 with objects open. */
int cxv_close_device_deferred(struct ibv_context *ctx);

/* ibv_get_async_event(3): the next asynchronous event of the context (port active or
 * in error, a CQ, QP or SRQ error, an SRQ's limit reached, ...), waiting for one unless
 * ctx->async_fd (readable while one waits) is O_NONBLOCK: 0, or -1 with errno (EAGAIN).
 * Events of a queue already destroyed are dropped. */
int cxv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event);

/* The last failing control call's message on this thread ("" when none failed). */
const char *cxv_last_error(void);

/* What ibv_query_port(3) would say of port `port_num`, the fields cxv knows: state
 * (IBV_PORT_ACTIVE or IBV_PORT_DOWN), max_mtu and active_mtu, lid, link_layer. */
int cxv_query_port(struct ibv_context *ctx, uint8_t port_num, struct ibv_port_attr *attr);

/* ibv_query_gid(3): GID `index` of port `port_num`. RoCE: 0 is the IPv6 link-local
 * address of the port's MAC, 1 the IPv4-mapped address of the function's IPv4 address,
 * both programmed at cxv_open_device; InfiniBand: 0 is the subnet prefix and port GUID.
 * EINVAL for an index that holds no GID. */
int cxv_query_gid(struct ibv_context *ctx, uint8_t port_num, int index, union ibv_gid *gid);

/* ---- Protection domains, memory regions, address handles ------------------------- */

struct ibv_pd *cxv_alloc_pd(struct ibv_context *ctx);
/* EBUSY while an MR, QP, SRQ or AH uses the PD. */
int cxv_dealloc_pd(struct ibv_pd *pd);

/* Registers [addr, addr + length) for the device with IBV_ACCESS_LOCAL_WRITE,
 * IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC (others:
 * EINVAL; remote write or atomic without local write: EINVAL, as ibv_reg_mr(3) says). */
struct ibv_mr *cxv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
int cxv_dereg_mr(struct ibv_mr *mr);

/* A UD destination (ibv_create_ah(3)): dlid, sl and, with is_global, the GRH fields. The
 * address vector is copied into each UD send WQE that names it. */
struct ibv_ah *cxv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int cxv_destroy_ah(struct ibv_ah *ah);

/* ---- Completion queues ---------------------------------------------------------- */

/* At least `cqe` entries (cq->cqe says how many it has); `cq_context` is kept in
 * cq->cq_context. */
struct ibv_cq *cxv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context);
/* EBUSY while a QP completes to it. */
int cxv_destroy_cq(struct ibv_cq *cq);

/* ibv_poll_cq(3): up to `num_entries` completions into `wc`; the number taken. */
int cxv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
/* ibv_req_notify_cq(3): an event for the next completion (the next solicited or error
 * one with `solicited_only`). Arm again after each event. */
int cxv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
/* A file descriptor that is readable when an event of `cq` has come (for poll/epoll);
 * take the event with cxv_get_cq_event(cq, 0). */
int cxv_cq_event_fd(struct ibv_cq *cq);
/* Waits up to `timeout_ms` (-1: no limit) for a completion event of an armed CQ and
 * takes it: 0, or ETIMEDOUT. */
int cxv_get_cq_event(struct ibv_cq *cq, int timeout_ms);

/* ibv_create_cq_ex(3): a CQ whose ibv_start_poll / ibv_next_poll / ibv_end_poll take
 * one completion at a time from the same poller as ibv_poll_cq (ENOENT when empty), read
 * with the ibv_wc_read_* accessors of the wc_flags asked for (IBV_WC_STANDARD_FLAGS;
 * timestamps, CVLAN, flow tag, tag matching: EOPNOTSUPP). comp_mask: flags
 * (IBV_CREATE_CQ_ATTR_SINGLE_THREADED only) and no parent domain. attr->channel is not
 * used here (libibverbs.so.1 wires it as for ibv_create_cq). ibv_cq_ex_to_cq() of it is
 * an ibv_cq for every call that takes one, cxv_destroy_cq included. */
struct ibv_cq_ex *cxv_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);

/* ---- Shared receive queues ------------------------------------------------------ */

/* attr->attr.max_wr and max_sge in, the granted values out; a srq_limit other than 0
 * arms the limit event at once. */
struct ibv_srq *cxv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
/* IBV_SRQ_LIMIT only (the limit event, armed once); IBV_SRQ_MAX_WR: EINVAL (no resize). */
int cxv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
/* ibv_query_srq(3): max_wr and max_sge as granted, srq_limit as the device has it now
 * (QUERY_RMP's lwm: 0 once the limit event has fired). */
int cxv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
/* EBUSY while a QP takes its receives from it. */
int cxv_destroy_srq(struct ibv_srq *srq);
int cxv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* ---- Queue pairs ---------------------------------------------------------------- */

enum cxv_doorbell {
    CXV_DOORBELL_AUTO = 0,  /* chosen by the write-combining self-test, once per device */
    CXV_DOORBELL_8B = 1,    /* 8-byte doorbells (always work) */
    CXV_DOORBELL_BLUEFLAME = 2,  /* 64-byte write-combined BlueFlame copies */
    CXV_DOORBELL_MOVDIR64B = 3,  /* BlueFlame copies as MOVDIR64B stores */
};
struct cxv_qp_options {
    enum cxv_doorbell doorbell;
    /* Several threads may post sends to the QP at once, with no lock (fixed slots of the
     * largest WQE, 8-byte doorbells). */
    int multi_producer;
};

/* RC, UC or UD (other types: EOPNOTSUPP). attr->cap in, the granted capabilities out.
 * sq_sig_all makes every send WQE signaled whatever its flags. The QP starts in RESET. */
struct ibv_qp *cxv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *cxv_create_qp_ex(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                                const struct cxv_qp_options *options);
/* ibv_modify_qp(3): IBV_QP_STATE with the attributes that transition takes (the masks
 * as ibv_modify_qp(3) lists them per transport; attributes given once are kept for
 * later transitions). A transition the QP state machine does not have: EINVAL. */
int cxv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
/* The QP's state as the device has it now (it may have moved to ERR on its own). */
int cxv_query_qp_state(struct ibv_qp *qp, enum ibv_qp_state *state);
/* ibv_query_qp(3): the state as the device has it now, the capabilities granted at
 * creation and the attributes set so far with cxv_modify_qp (whatever `attr_mask` asks
 * for; init_attr gets the creation attributes). */
int cxv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr);
int cxv_destroy_qp(struct ibv_qp *qp);
/* ibv_attach_mcast(3), ibv_detach_mcast(3): a UD QP joins or leaves a multicast group
 * (cxv::qp::attach_multicast: EINVAL for a GID that is no group, a QP not UD, or an
 * InfiniBand LID outside 0xC000-0xFFFE). On RoCE the group's MAC joins the vport's
 * filter too. ibv_destroy_qp(3) of a QP still in a group: EBUSY. */
int cxv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int cxv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

/* ibv_create_flow(3) on a raw packet QP (IBV_QPT_RAW_PACKET): a rule of the function's
 * receive steering that sends what it matches to the QP. IBV_FLOW_ATTR_NORMAL on port 1;
 * specs eth (MACs, ethertype, the VLAN tag's ID, CFI and priority), ipv4, ipv4_ext (with
 * TOS), ipv6 (with traffic class), tcp, udp, each field matched on its mask's bits (a
 * value with bits outside its mask: EINVAL), action tag and drop. A packet meets the
 * flows by priority (0 to 15; past 15: ENOMEM, as mlx5_ib), then in the order they were
 * made. Else EOPNOTSUPP (the message says what). The context's ibv_create_flow and
 * ibv_destroy_flow ops are these. */
struct ibv_flow *cxv_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *flow);
int cxv_destroy_flow(struct ibv_flow *flow);

/* ibv_create_wq(3) (IBV_WQT_RQ, on an Ethernet port; no create flags), ibv_modify_wq(3)
 * (RESET→RDY, →ERR, →RESET), ibv_destroy_wq(3) (EBUSY while a table lists it),
 * ibv_create_rwq_ind_table(3) and ibv_destroy_rwq_ind_table(3) (EBUSY while an RSS QP
 * hashes over it). A WQ's receives (ibv_post_wq_recv) complete on its CQ with qp_num
 * the WQ's number. cxv_create_qp_init_ex with IBV_QP_INIT_ATTR_RX_HASH and
 * IBV_QP_INIT_ATTR_IND_TABLE makes an RSS QP that flows steer to (Toeplitz, 40-byte key;
 * IPv4 or IPv6 addresses, TCP or UDP ports). The context's ops are these. */
struct ibv_wq *cxv_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *attr);
int cxv_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr);
int cxv_destroy_wq(struct ibv_wq *wq);
struct ibv_rwq_ind_table *cxv_create_rwq_ind_table(struct ibv_context *ctx, struct ibv_rwq_ind_table_init_attr *attr);
int cxv_destroy_rwq_ind_table(struct ibv_rwq_ind_table *table);

/* ibv_create_qp_ex(3): IBV_QP_INIT_ATTR_PD, with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS the
 * ibv_wr_* interface (ibv_wr_post(3)) for the opcodes the transport has (RDMA write
 * with and without immediate, send with and without immediate, and on RC RDMA read and
 * the two atomics; others: EOPNOTSUPP). A batch holds up to max_send_wr WRs, in storage
 * allocated here; ibv_wr_complete posts all of it or, returning the error, none. */
struct ibv_qp *cxv_create_qp_init_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
/* ibv_qp_to_qp_ex(3): the QP's ibv_qp_ex, NULL (errno EOPNOTSUPP) for a QP created
 * without send ops flags. */
struct ibv_qp_ex *cxv_qp_to_qp_ex(struct ibv_qp *qp);

int cxv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
/* EINVAL (the first WR in *bad_wr) on a QP whose receives come from an SRQ. */
int cxv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);

/* ---- rdma_cm-style calls (rdma_post_recvv(3), rdma_post_writev(3), ...) -----------
 *
 * One WR each, built from the arguments: `context` comes back as the completion's
 * wr_id, `flags` are ibv_send_flags. 0 on success, or -1 with errno set to what the
 * post returned (ENOMEM, EINVAL). As with an rdma_cm_id that has an SRQ, receives
 * posted to a QP that takes them from an SRQ go to that SRQ. The single-buffer forms
 * take the lkey from `mr`: a receive's or a READ's buffer must lie in it (EINVAL where
 * librdmacm asserts); sends and writes may pass NULL (lkey 0, e.g. for inline data). */

static inline int cxv_rdma_errno_(int ret) {
    if (ret == 0) return 0;
    errno = ret;
    return -1;
}

static inline int cxv_rdma_post_recvv(struct ibv_qp *qp, void *context, struct ibv_sge *sgl, int nsge) {
    struct ibv_recv_wr wr, *bad;
    wr.wr_id = (uintptr_t)context;
    wr.next = NULL;
    wr.sg_list = sgl;
    wr.num_sge = nsge;
    return cxv_rdma_errno_(qp->srq ? cxv_post_srq_recv(qp->srq, &wr, &bad) : cxv_post_recv(qp, &wr, &bad));
}

static inline int cxv_rdma_post_send_wr_(struct ibv_qp *qp, void *context, struct ibv_sge *sgl, int nsge, int flags,
                                         enum ibv_wr_opcode opcode, uint64_t remote_addr, uint32_t rkey) {
    struct ibv_send_wr wr, *bad;
    wr.wr_id = (uintptr_t)context;
    wr.next = NULL;
    wr.sg_list = sgl;
    wr.num_sge = nsge;
    wr.opcode = opcode;
    wr.send_flags = (unsigned)flags;
    wr.imm_data = 0;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return cxv_rdma_errno_(cxv_post_send(qp, &wr, &bad));
}

static inline int cxv_rdma_post_sendv(struct ibv_qp *qp, void *context, struct ibv_sge *sgl, int nsge, int flags) {
    return cxv_rdma_post_send_wr_(qp, context, sgl, nsge, flags, IBV_WR_SEND, 0, 0);
}

static inline int cxv_rdma_post_readv(struct ibv_qp *qp, void *context, struct ibv_sge *sgl, int nsge, int flags,
                                      uint64_t remote_addr, uint32_t rkey) {
    return cxv_rdma_post_send_wr_(qp, context, sgl, nsge, flags, IBV_WR_RDMA_READ, remote_addr, rkey);
}

static inline int cxv_rdma_post_writev(struct ibv_qp *qp, void *context, struct ibv_sge *sgl, int nsge, int flags,
                                       uint64_t remote_addr, uint32_t rkey) {
    return cxv_rdma_post_send_wr_(qp, context, sgl, nsge, flags, IBV_WR_RDMA_WRITE, remote_addr, rkey);
}

static inline struct ibv_sge cxv_rdma_sge_(void *addr, size_t length, struct ibv_mr *mr) {
    struct ibv_sge s;
    s.addr = (uintptr_t)addr;
    s.length = (uint32_t)length;
    s.lkey = mr ? mr->lkey : 0;
    return s;
}

/* Whether [addr, addr + length) lies inside `mr` (a receive or a READ's target must). */
static inline int cxv_rdma_in_mr_(const void *addr, size_t length, const struct ibv_mr *mr) {
    const uintptr_t a = (uintptr_t)addr, base = mr ? (uintptr_t)mr->addr : 0;
    return mr != NULL && a >= base && length <= mr->length && a - base <= mr->length - length;
}

/* `mr` is required and must hold the buffer (EINVAL otherwise). */
static inline int cxv_rdma_post_recv(struct ibv_qp *qp, void *context, void *addr, size_t length,
                                     struct ibv_mr *mr) {
    if (!cxv_rdma_in_mr_(addr, length, mr)) return cxv_rdma_errno_(EINVAL);
    struct ibv_sge s = cxv_rdma_sge_(addr, length, mr);
    return cxv_rdma_post_recvv(qp, context, &s, 1);
}

static inline int cxv_rdma_post_send(struct ibv_qp *qp, void *context, void *addr, size_t length,
                                     struct ibv_mr *mr, int flags) {
    struct ibv_sge s = cxv_rdma_sge_(addr, length, mr);
    return cxv_rdma_post_sendv(qp, context, &s, 1, flags);
}

static inline int cxv_rdma_post_read(struct ibv_qp *qp, void *context, void *addr, size_t length,
                                     struct ibv_mr *mr, int flags, uint64_t remote_addr, uint32_t rkey) {
    if (!cxv_rdma_in_mr_(addr, length, mr)) return cxv_rdma_errno_(EINVAL);
    struct ibv_sge s = cxv_rdma_sge_(addr, length, mr);
    return cxv_rdma_post_readv(qp, context, &s, 1, flags, remote_addr, rkey);
}

static inline int cxv_rdma_post_write(struct ibv_qp *qp, void *context, void *addr, size_t length,
                                      struct ibv_mr *mr, int flags, uint64_t remote_addr, uint32_t rkey) {
    struct ibv_sge s = cxv_rdma_sge_(addr, length, mr);
    return cxv_rdma_post_writev(qp, context, &s, 1, flags, remote_addr, rkey);
}

/* The Q_Key rdma_cm gives UD QPs (RDMA_UDP_QKEY of <rdma/rdma_cma.h>). */
#define CXV_RDMA_UDP_QKEY 0x01234567u

static inline int cxv_rdma_post_ud_send(struct ibv_qp *qp, void *context, void *addr, size_t length,
                                        struct ibv_mr *mr, int flags, struct ibv_ah *ah, uint32_t remote_qpn) {
    struct ibv_sge s = cxv_rdma_sge_(addr, length, mr);
    struct ibv_send_wr wr, *bad;
    wr.wr_id = (uintptr_t)context;
    wr.next = NULL;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = (unsigned)flags;
    wr.imm_data = 0;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = CXV_RDMA_UDP_QKEY;
    return cxv_rdma_errno_(cxv_post_send(qp, &wr, &bad));
}

/* rdma_get_send_comp(3) / rdma_get_recv_comp(3): waits for one completion on the QP's
 * send (receive) CQ -- polling, then arming the CQ and sleeping on its event -- and
 * returns the number taken (1), or -1 with errno set. */
int cxv_rdma_get_send_comp(struct ibv_qp *qp, struct ibv_wc *wc);
int cxv_rdma_get_recv_comp(struct ibv_qp *qp, struct ibv_wc *wc);

#ifdef __cplusplus
}

namespace cxv {
class device;
class cq;
class pd;
class qp;
class srq;
/* The cxv::device (api/cxv.h) under a context of cxv_open_device, for what the C API
 * does not say (capabilities, firmware commands). */
device& verbs_device(struct ibv_context *ctx);
/* The cxv objects under handles of the C API, for what it does not say: their rings'
 * memory, doorbell records and registers (mlx5dv_init_obj(3), api/abi). */
cq& verbs_cq(struct ibv_cq *cq);
pd& verbs_pd(struct ibv_pd *pd);
qp& verbs_qp(struct ibv_qp *qp);
srq& verbs_srq(struct ibv_srq *srq);
/* cxv_create_cq_ex with the entry stride mlx5dv_create_cq(3) asks: 64 or 128 bytes. */
struct ibv_cq_ex *create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr, unsigned cqe_size);
}  // namespace cxv
#endif

#endif /* CXV_API_CXV_VERBS_H */
