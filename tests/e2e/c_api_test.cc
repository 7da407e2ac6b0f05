// The C API (api/cxv_verbs.h) end to end on two emulated functions: objects and their
// errors, libibverbs' own inline entry points (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, ibv_req_notify_cq, ibv_post_srq_recv from <infiniband/verbs.h>)
// dispatching through the handles' ops, and the rdma_cm-style calls -- cxv's and
// librdmacm's own inline rdma_post_*() of <rdma/rdma_verbs.h> on an rdma_cm_id that
// holds cxv's QP -- with the man pages' semantics.
#include <doctest/doctest.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv_verbs.h"

namespace {

constexpr const char* kBdf0 = "0000:c5:00.0";
constexpr const char* kBdf1 = "0000:c5:00.1";
constexpr int kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;

// One function through the C API: context, PD, a registered 1 MiB buffer, a CQ.
struct c_node {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    std::vector<unsigned char> mem = std::vector<unsigned char>(std::size_t{1} << 20);
    ibv_mr* mr = nullptr;
    ibv_cq* cq = nullptr;
    ibv_port_attr port{};

    explicit c_node(const char* bdf) {
        ctx = cxv_open_device(bdf);
        REQUIRE_MESSAGE(ctx != nullptr, cxv_last_error());
        pd = cxv_alloc_pd(ctx);
        REQUIRE_MESSAGE(pd != nullptr, cxv_last_error());
        mr = cxv_reg_mr(pd, mem.data(), mem.size(), kAll);
        REQUIRE_MESSAGE(mr != nullptr, cxv_last_error());
        cq = cxv_create_cq(ctx, 256, this);
        REQUIRE_MESSAGE(cq != nullptr, cxv_last_error());
        REQUIRE(cxv_query_port(ctx, 1, &port) == 0);
    }
    ~c_node() {
        CHECK(cxv_destroy_cq(cq) == 0);
        CHECK(cxv_dereg_mr(mr) == 0);
        CHECK(cxv_dealloc_pd(pd) == 0);
        CHECK_MESSAGE(cxv_close_device(ctx) == 0, cxv_last_error());
    }
    unsigned char* at(std::size_t off) { return mem.data() + off; }
    std::uint64_t addr(std::size_t off) { return reinterpret_cast<std::uintptr_t>(at(off)); }
    ibv_sge sge(std::size_t off, std::uint32_t len) { return {addr(off), len, mr->lkey}; }
};

// cap: what was granted.
ibv_qp* make_qp(c_node& n, ibv_qp_type type, ibv_srq* srq = nullptr, int sig_all = 0, ibv_qp_cap* cap = nullptr) {
    ibv_qp_init_attr a{};
    a.send_cq = n.cq;
    a.recv_cq = n.cq;
    a.srq = srq;
    a.qp_type = type;
    a.sq_sig_all = sig_all;
    a.cap = {16, 16, 4, 4, 64};
    ibv_qp* qp = cxv_create_qp(n.pd, &a);
    REQUIRE_MESSAGE(qp != nullptr, cxv_last_error());
    if (cap != nullptr) *cap = a.cap;
    return qp;
}

// RESET -> INIT -> RTR -> RTS as a verbs program does it, masks and all.
void connect(ibv_qp* qp, std::uint32_t dest_qpn, std::uint16_t dlid) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = kAll;
    a.qkey = RDMA_UDP_QKEY;
    const bool ud = qp->qp_type == IBV_QPT_UD;
    REQUIRE_MESSAGE(cxv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                              (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)) == 0,
                    cxv_last_error());
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = 1;
    const int rtr = ud ? IBV_QP_STATE
                       : IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             (qp->qp_type == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
    REQUIRE_MESSAGE(cxv_modify_qp(qp, &a, rtr) == 0, cxv_last_error());
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = 10;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    const int rts = qp->qp_type == IBV_QPT_RC ? IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
                                              : IBV_QP_STATE | IBV_QP_SQ_PSN;
    REQUIRE_MESSAGE(cxv_modify_qp(qp, &a, rts) == 0, cxv_last_error());
    CHECK(qp->state == IBV_QPS_RTS);
}

// Exactly n completions through libibverbs' inline ibv_poll_cq within 5 s.
std::vector<ibv_wc> wait_wc(ibv_cq* cq, std::size_t n) {
    std::vector<ibv_wc> out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
        ibv_wc wc[8];
        const int got = ibv_poll_cq(cq, 8, wc);
        REQUIRE(got >= 0);
        out.insert(out.end(), wc, wc + got);
        if (got == 0) std::this_thread::yield();
    }
    REQUIRE_MESSAGE(out.size() == n, "completions: ", out.size(), " of ", n);
    return out;
}

void no_wc(ibv_cq* cq) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ibv_wc wc;
    CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
}

void fill(unsigned char* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(seed * 29 + i * 13 + (i >> 8));
}

struct rc_pair {
    c_node a{kBdf0}, b{kBdf1};
    ibv_qp* qa = nullptr;
    ibv_qp* qb = nullptr;
    ibv_qp_cap cap{};  // as granted (both QPs alike)
    explicit rc_pair(ibv_qp_type type = IBV_QPT_RC) {
        qa = make_qp(a, type, nullptr, 0, &cap);
        qb = make_qp(b, type);
        connect(qa, qb->qp_num, b.port.lid);
        connect(qb, qa->qp_num, a.port.lid);
    }
    ~rc_pair() {
        CHECK(cxv_destroy_qp(qa) == 0);
        CHECK(cxv_destroy_qp(qb) == 0);
    }
};

}  // namespace

TEST_CASE("C API: objects, what they report, and their errors") {
    errno = 0;
    CHECK(cxv_open_device("0000:c5:07.0") == nullptr);
    CHECK(errno != 0);
    CHECK(std::string(cxv_last_error()).find("0000:c5:07.0") != std::string::npos);

    c_node n(kBdf0);
    CHECK(std::string(n.ctx->device->name) == std::string("cxv_") + kBdf0);
    CHECK(n.port.state == IBV_PORT_ACTIVE);
    CHECK(n.port.link_layer == IBV_LINK_LAYER_INFINIBAND);
    CHECK(n.port.lid != 0);
    CHECK(n.cq->cqe >= 256);
    CHECK(n.cq->cq_context == &n);
    CHECK(n.mr->lkey == n.mr->rkey);
    CHECK(n.mr->addr == n.mem.data());

    // ibv_reg_mr(3)'s rule: remote write needs local write; unknown access bits.
    errno = 0;
    CHECK(cxv_reg_mr(n.pd, n.mem.data(), 4096, IBV_ACCESS_REMOTE_WRITE) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(cxv_reg_mr(n.pd, n.mem.data(), 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) == nullptr);
    CHECK(errno == EINVAL);
    CHECK(cxv_create_cq(n.ctx, 0, nullptr) == nullptr);
    CHECK(errno == EINVAL);

    // Granted capabilities come back in the init attributes.
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = n.cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap = {100, 30, 3, 5, 40};
    ibv_qp* qp = cxv_create_qp(n.pd, &qa);
    REQUIRE_MESSAGE(qp != nullptr, cxv_last_error());
    CHECK(qa.cap.max_send_wr >= 100);
    CHECK(qa.cap.max_recv_wr >= 30);
    CHECK(qa.cap.max_send_sge >= 3);
    CHECK(qa.cap.max_recv_sge >= 5);
    CHECK(qa.cap.max_inline_data >= 40);
    CHECK(qp->state == IBV_QPS_RESET);
    CHECK(qp->qp_num != 0);
    CHECK(qp->pd == n.pd);
    qa.qp_type = IBV_QPT_XRC_SEND;
    CHECK(cxv_create_qp(n.pd, &qa) == nullptr);
    CHECK(errno == EOPNOTSUPP);

    // A transition without the attributes it requires changes nothing.
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    CHECK(cxv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);
    CHECK(std::string(cxv_last_error()).find("mask") != std::string::npos);
    CHECK(qp->state == IBV_QPS_RESET);
    // RESET -> RTS is not a transition.
    m.qp_state = IBV_QPS_RTS;
    CHECK(cxv_modify_qp(qp, &m, IBV_QP_STATE) == EINVAL);
    ibv_qp_state st = IBV_QPS_UNKNOWN;
    REQUIRE(cxv_query_qp_state(qp, &st) == 0);
    CHECK(st == IBV_QPS_RESET);
    m.qp_state = IBV_QPS_INIT;
    m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    REQUIRE(cxv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    REQUIRE(cxv_query_qp_state(qp, &st) == 0);
    CHECK(st == IBV_QPS_INIT);

    // Users keep what they use: EBUSY, and nothing is destroyed.
    CHECK(cxv_destroy_cq(n.cq) == EBUSY);
    CHECK(cxv_dealloc_pd(n.pd) == EBUSY);
    CHECK(cxv_close_device(n.ctx) == EBUSY);
    CHECK(std::string(cxv_last_error()).find("alive") != std::string::npos);
    CHECK(cxv_destroy_qp(qp) == 0);

    // An SRQ: granted sizes; EBUSY while a QP uses it; no resize.
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 20;
    sa.attr.max_sge = 2;
    ibv_srq* srq = cxv_create_srq(n.pd, &sa);
    REQUIRE_MESSAGE(srq != nullptr, cxv_last_error());
    CHECK(sa.attr.max_wr >= 20);
    CHECK(sa.attr.max_sge >= 2);
    ibv_qp* sq = make_qp(n, IBV_QPT_RC, srq);
    CHECK(sq->srq == srq);
    CHECK(cxv_destroy_srq(srq) == EBUSY);
    ibv_srq_attr resize{64, 0, 0};
    CHECK(cxv_modify_srq(srq, &resize, IBV_SRQ_MAX_WR) == EINVAL);
    ibv_srq_attr limit{0, 0, 4};
    CHECK(cxv_modify_srq(srq, &limit, IBV_SRQ_LIMIT) == 0);
    // ibv_post_recv(3): a QP attached to an SRQ takes no receives of its own.
    ibv_sge s = n.sge(0, 64);
    ibv_recv_wr rw{};
    rw.sg_list = &s;
    rw.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    CHECK(ibv_post_recv(sq, &rw, &bad) == EINVAL);
    CHECK(bad == &rw);
    CHECK(cxv_destroy_qp(sq) == 0);
    CHECK(cxv_destroy_srq(srq) == 0);
}

TEST_CASE("libibverbs' inline ibv_post_* and ibv_poll_cq run cxv's fast path through the handles") {
    rc_pair p;
    fill(p.a.at(0), 8192, 3);

    // SEND_IMM: receive with two scatter entries, send with two gather entries.
    ibv_sge rs[2] = {p.b.sge(0x10000, 1000), p.b.sge(0x20000, 5000)};
    ibv_recv_wr rw{};
    rw.wr_id = 41;
    rw.sg_list = rs;
    rw.num_sge = 2;
    ibv_recv_wr* rbad = nullptr;
    REQUIRE(ibv_post_recv(p.qb, &rw, &rbad) == 0);
    ibv_sge ss[2] = {p.a.sge(0, 3000), p.a.sge(3000, 3000)};
    ibv_send_wr sw{};
    sw.wr_id = 42;
    sw.opcode = IBV_WR_SEND_WITH_IMM;
    sw.imm_data = htobe32(0x5eed);
    sw.sg_list = ss;
    sw.num_sge = 2;
    sw.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* sbad = nullptr;
    REQUIRE(ibv_post_send(p.qa, &sw, &sbad) == 0);
    auto wa = wait_wc(p.a.cq, 1);
    CHECK(wa[0].status == IBV_WC_SUCCESS);
    CHECK(wa[0].opcode == IBV_WC_SEND);
    CHECK(wa[0].wr_id == 42);
    CHECK(wa[0].qp_num == p.qa->qp_num);
    auto wb = wait_wc(p.b.cq, 1);
    CHECK(wb[0].status == IBV_WC_SUCCESS);
    CHECK(wb[0].opcode == IBV_WC_RECV);
    CHECK(wb[0].wr_id == 41);
    CHECK(wb[0].byte_len == 6000);
    CHECK((wb[0].wc_flags & IBV_WC_WITH_IMM) != 0);
    CHECK(be32toh(wb[0].imm_data) == 0x5eed);
    CHECK(std::memcmp(p.b.at(0x10000), p.a.at(0), 1000) == 0);
    CHECK(std::memcmp(p.b.at(0x20000), p.a.at(1000), 5000) == 0);

    // ibv_post_send(3): the list stops at the first bad WR, which comes back in bad_wr;
    // the one before it is posted and completes, the one after it is not.
    ibv_send_wr list[3]{};
    ibv_sge one = p.a.sge(0, 256);
    std::vector<ibv_sge> many(p.cap.max_send_sge + 1, one);
    for (int i = 0; i < 3; ++i) {
        list[i].wr_id = 100 + i;
        list[i].opcode = IBV_WR_RDMA_WRITE;
        list[i].sg_list = &one;
        list[i].num_sge = 1;
        list[i].send_flags = IBV_SEND_SIGNALED;
        list[i].wr.rdma.remote_addr = p.b.addr(0x40000 + 0x1000 * i);
        list[i].wr.rdma.rkey = p.b.mr->rkey;
        list[i].next = i < 2 ? &list[i + 1] : nullptr;
    }
    list[1].sg_list = many.data();
    list[1].num_sge = static_cast<int>(many.size());  // one more than the QP has
    REQUIRE(ibv_post_send(p.qa, list, &sbad) == EINVAL);
    CHECK(sbad == &list[1]);
    wa = wait_wc(p.a.cq, 1);
    CHECK(wa[0].wr_id == 100);
    CHECK(wa[0].opcode == IBV_WC_RDMA_WRITE);
    no_wc(p.a.cq);
    CHECK(std::memcmp(p.b.at(0x40000), p.a.at(0), 256) == 0);
    CHECK(p.b.at(0x42000)[0] == 0);

    // Interrupt mode through ibv_req_notify_cq and the CQ's event.
    REQUIRE(ibv_req_notify_cq(p.a.cq, 0) == 0);
    CHECK(cxv_get_cq_event(p.a.cq, 0) == ETIMEDOUT);
    list[2].next = nullptr;
    REQUIRE(ibv_post_send(p.qa, &list[2], &sbad) == 0);
    REQUIRE(cxv_get_cq_event(p.a.cq, 5000) == 0);
    CHECK(p.a.cq->comp_events_completed == 1);
    wa = wait_wc(p.a.cq, 1);
    CHECK(wa[0].wr_id == 102);
    CHECK(std::memcmp(p.b.at(0x42000), p.a.at(0), 256) == 0);
}

TEST_CASE("rdma_post_recvv and rdma_post_writev: librdmacm's own calls on an rdma_cm_id holding cxv's QP") {
    rc_pair p;
    // What rdma_create_qp() leaves in an id, filled in by hand: no librdmacm runs.
    rdma_cm_id ia{}, ib{};
    ia.qp = p.qa;
    ia.pd = p.a.pd;
    ia.send_cq = ia.recv_cq = p.a.cq;
    ib.qp = p.qb;
    ib.pd = p.b.pd;
    ib.send_cq = ib.recv_cq = p.b.cq;
    fill(p.a.at(0), 0x10000, 5);

    // rdma_post_writev(3): a gather list to one remote address; context -> wr_id.
    ibv_sge g[3] = {p.a.sge(0, 100), p.a.sge(0x1000, 2000), p.a.sge(0x3000, 4000)};
    int ctx_a = 0, ctx_c = 0;
    REQUIRE(rdma_post_writev(&ia, &ctx_a, g, 3, IBV_SEND_SIGNALED, p.b.addr(0x50000), p.b.mr->rkey) == 0);
    // cxv's own form of the same call, to another place.
    REQUIRE(cxv_rdma_post_writev(p.qa, &ctx_c, g, 3, IBV_SEND_SIGNALED, p.b.addr(0x60000), p.b.mr->rkey) == 0);
    auto wa = wait_wc(p.a.cq, 2);
    CHECK(wa[0].wr_id == reinterpret_cast<std::uintptr_t>(&ctx_a));
    CHECK(wa[1].wr_id == reinterpret_cast<std::uintptr_t>(&ctx_c));
    for (const auto& w : wa) {
        CHECK(w.status == IBV_WC_SUCCESS);
        CHECK(w.opcode == IBV_WC_RDMA_WRITE);
    }
    for (std::size_t base : {0x50000, 0x60000}) {
        CHECK(std::memcmp(p.b.at(base), p.a.at(0), 100) == 0);
        CHECK(std::memcmp(p.b.at(base + 100), p.a.at(0x1000), 2000) == 0);
        CHECK(std::memcmp(p.b.at(base + 2100), p.a.at(0x3000), 4000) == 0);
        CHECK(p.b.at(base + 6100)[0] == 0);
    }

    // rdma_post_recvv(3): a scatter list; then an inline send from rdma_post_send with
    // no MR, and cxv_rdma_post_recvv / cxv_rdma_post_send the same way.
    ibv_sge r[2] = {p.b.sge(0x70000, 10), p.b.sge(0x71000, 54)};
    int rctx_a = 0, rctx_c = 0;
    REQUIRE(rdma_post_recvv(&ib, &rctx_a, r, 2) == 0);
    ibv_sge r2[2] = {p.b.sge(0x72000, 10), p.b.sge(0x73000, 54)};
    REQUIRE(cxv_rdma_post_recvv(p.qb, &rctx_c, r2, 2) == 0);
    REQUIRE(rdma_post_send(&ia, nullptr, p.a.at(0x100), 64, nullptr, IBV_SEND_INLINE) == 0);
    REQUIRE(cxv_rdma_post_send(p.qa, nullptr, p.a.at(0x200), 64, nullptr, IBV_SEND_INLINE | IBV_SEND_SIGNALED) == 0);
    auto wb = wait_wc(p.b.cq, 2);
    CHECK(wb[0].wr_id == reinterpret_cast<std::uintptr_t>(&rctx_a));
    CHECK(wb[1].wr_id == reinterpret_cast<std::uintptr_t>(&rctx_c));
    CHECK(wb[0].byte_len == 64);
    CHECK(std::memcmp(p.b.at(0x70000), p.a.at(0x100), 10) == 0);
    CHECK(std::memcmp(p.b.at(0x71000), p.a.at(0x10a), 54) == 0);
    CHECK(std::memcmp(p.b.at(0x72000), p.a.at(0x200), 10) == 0);
    CHECK(std::memcmp(p.b.at(0x73000), p.a.at(0x20a), 54) == 0);
    wa = wait_wc(p.a.cq, 1);  // the unsignaled inline send completes with the signaled one
    CHECK(wa[0].wr_id == 0);

    // Errors: -1 with errno, nothing posted. Too many SGEs (EINVAL), both ways.
    std::vector<ibv_sge> recv_many(p.cap.max_recv_sge + 1, r[0]), send_many(p.cap.max_send_sge + 1, g[0]);
    const int nr = static_cast<int>(recv_many.size()), ns = static_cast<int>(send_many.size());
    errno = 0;
    CHECK(rdma_post_recvv(&ib, nullptr, recv_many.data(), nr) == -1);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(cxv_rdma_post_recvv(p.qb, nullptr, recv_many.data(), nr) == -1);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(rdma_post_writev(&ia, nullptr, send_many.data(), ns, 0, p.b.addr(0), p.b.mr->rkey) == -1);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(cxv_rdma_post_writev(p.qa, nullptr, send_many.data(), ns, 0, p.b.addr(0), p.b.mr->rkey) == -1);
    CHECK(errno == EINVAL);
    no_wc(p.a.cq);
    no_wc(p.b.cq);
    // A receive buffer outside its MR: cxv refuses what librdmacm asserts on.
    errno = 0;
    CHECK(cxv_rdma_post_recv(p.qb, nullptr, p.b.at(p.b.mem.size() - 8), 64, p.b.mr) == -1);
    CHECK(errno == EINVAL);
    CHECK(cxv_rdma_post_recv(p.qb, nullptr, p.b.at(0), 64, nullptr) == -1);
    // A full receive queue: ENOMEM once every slot is posted.
    int posted = 0;
    while (rdma_post_recv(&ib, nullptr, p.b.at(0), 64, p.b.mr) == 0) ++posted;
    CHECK(errno == ENOMEM);
    CHECK(posted == static_cast<int>(p.cap.max_recv_wr));  // what create granted, all of it
    errno = 0;
    CHECK(cxv_rdma_post_recv(p.qb, nullptr, p.b.at(0), 64, p.b.mr) == -1);
    CHECK(errno == ENOMEM);
}

TEST_CASE("rdma_post_recvv on an SRQ's QP goes to the SRQ; cxv_rdma_get_*_comp wait for events") {
    c_node a(kBdf0), b(kBdf1);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 32;
    sa.attr.max_sge = 1;
    ibv_srq* srq = cxv_create_srq(b.pd, &sa);
    REQUIRE_MESSAGE(srq != nullptr, cxv_last_error());
    ibv_qp* qa = make_qp(a, IBV_QPT_RC);
    ibv_qp* qb = make_qp(b, IBV_QPT_RC, srq);
    connect(qa, qb->qp_num, b.port.lid);
    connect(qb, qa->qp_num, a.port.lid);
    rdma_cm_id ib{};
    ib.qp = qb;
    ib.srq = srq;  // rdma_create_qp() sets it for a QP made with an SRQ
    ib.recv_cq = ib.send_cq = b.cq;

    fill(a.at(0), 256, 9);
    int c1 = 0, c2 = 0;
    REQUIRE(rdma_post_recv(&ib, &c1, b.at(0x1000), 128, b.mr) == 0);
    REQUIRE(cxv_rdma_post_recv(qb, &c2, b.at(0x2000), 128, b.mr) == 0);

    // The receiver waits (events) before the sender posts.
    std::thread sender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHECK(cxv_rdma_post_send(qa, &c1, a.at(0), 100, a.mr, IBV_SEND_SIGNALED) == 0);
        CHECK(cxv_rdma_post_send(qa, &c2, a.at(100), 100, a.mr, IBV_SEND_SIGNALED) == 0);
    });
    ibv_wc wc{};
    REQUIRE(cxv_rdma_get_recv_comp(qb, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.wr_id == reinterpret_cast<std::uintptr_t>(&c1));
    CHECK(wc.byte_len == 100);
    REQUIRE(cxv_rdma_get_recv_comp(qb, &wc) == 1);
    CHECK(wc.wr_id == reinterpret_cast<std::uintptr_t>(&c2));
    sender.join();
    REQUIRE(cxv_rdma_get_send_comp(qa, &wc) == 1);
    CHECK(wc.opcode == IBV_WC_SEND);
    REQUIRE(cxv_rdma_get_send_comp(qa, &wc) == 1);
    CHECK(std::memcmp(b.at(0x1000), a.at(0), 100) == 0);
    CHECK(std::memcmp(b.at(0x2000), a.at(100), 100) == 0);

    CHECK(cxv_destroy_qp(qa) == 0);
    CHECK(cxv_destroy_qp(qb) == 0);
    CHECK(cxv_destroy_srq(srq) == 0);
}

TEST_CASE("UD through the C API: address handles, rdma_post_ud_send's Q_Key, the GRH area, sq_sig_all") {
    c_node a(kBdf0), b(kBdf1);
    ibv_qp* qa = make_qp(a, IBV_QPT_UD, nullptr, /*sig_all=*/1);
    ibv_qp* qb = make_qp(b, IBV_QPT_UD);
    connect(qa, 0, 0);
    connect(qb, 0, 0);
    ibv_ah_attr ah_attr{};
    ah_attr.dlid = b.port.lid;
    ah_attr.port_num = 1;
    ibv_ah* ah = cxv_create_ah(a.pd, &ah_attr);
    REQUIRE_MESSAGE(ah != nullptr, cxv_last_error());
    CHECK(ah->pd == a.pd);
    CHECK(cxv_dealloc_pd(a.pd) == EBUSY);  // the AH uses it

    rdma_cm_id ia{};
    ia.qp = qa;
    fill(a.at(0), 512, 11);
    std::memset(b.at(0), 0xee, 1024);
    // The receive buffer: 40 bytes of GRH area first, then the message.
    REQUIRE(cxv_rdma_post_recv(qb, nullptr, b.at(0), 40 + 300, b.mr) == 0);
    REQUIRE(cxv_rdma_post_recv(qb, nullptr, b.at(0x1000), 40 + 300, b.mr) == 0);
    // Unsignaled by their flags, yet each completes (sq_sig_all).
    REQUIRE(rdma_post_ud_send(&ia, nullptr, a.at(0), 300, a.mr, 0, ah, qb->qp_num) == 0);
    REQUIRE(cxv_rdma_post_ud_send(qa, nullptr, a.at(100), 300, a.mr, 0, ah, qb->qp_num) == 0);
    const auto wa = wait_wc(a.cq, 2);
    CHECK(wa[0].status == IBV_WC_SUCCESS);
    CHECK(wa[1].status == IBV_WC_SUCCESS);
    const auto wb = wait_wc(b.cq, 2);
    for (const auto& w : wb) {
        CHECK(w.status == IBV_WC_SUCCESS);
        CHECK(w.byte_len == 40 + 300);
        CHECK(w.src_qp == qa->qp_num);
    }
    CHECK(std::memcmp(b.at(40), a.at(0), 300) == 0);
    CHECK(std::memcmp(b.at(0x1000 + 40), a.at(100), 300) == 0);
    CHECK(b.at(40 + 300)[0] == 0xee);

    // Another Q_Key than the receiver's: dropped (no receive completion).
    ibv_sge s = a.sge(0, 16);
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qb->qp_num;
    wr.wr.ud.remote_qkey = RDMA_UDP_QKEY + 1;
    ibv_send_wr* bad = nullptr;
    REQUIRE(cxv_rdma_post_recv(qb, nullptr, b.at(0x2000), 40 + 64, b.mr) == 0);
    REQUIRE(ibv_post_send(qa, &wr, &bad) == 0);
    wait_wc(a.cq, 1);
    no_wc(b.cq);

    // sq_sig_all over a list longer than one chunk of copies, the 18th WR bad (no AH):
    // 17 completions, bad_wr names the caller's own 18th WR, the caller's flags untouched.
    std::vector<ibv_send_wr> list(20, wr);
    for (std::size_t i = 0; i < list.size(); ++i) {
        list[i].wr_id = 1000 + i;
        list[i].wr.ud.remote_qkey = RDMA_UDP_QKEY;
        list[i].next = i + 1 < list.size() ? &list[i + 1] : nullptr;
    }
    list[17].wr.ud.ah = nullptr;
    REQUIRE(ibv_post_send(qa, list.data(), &bad) == EINVAL);
    CHECK(bad == &list[17]);
    const auto many = wait_wc(a.cq, 17);
    for (std::size_t i = 0; i < many.size(); ++i) CHECK(many[i].wr_id == 1000 + i);
    no_wc(a.cq);
    for (const auto& w : list) CHECK(w.send_flags == 0);

    CHECK(cxv_destroy_ah(ah) == 0);
    CHECK(cxv_destroy_qp(qa) == 0);
    CHECK(cxv_destroy_qp(qb) == 0);
}
