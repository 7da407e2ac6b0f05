// UD datagrams (the 40-byte GRH area first, Q_Key checks, the source QP, the MTU
// limit), UC, and shared receive queues (two QPs on one SRQ, the limit event, the last
// WQE event), end to end on the model.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "tests/e2e/fixture.h"

using namespace cxv;
using namespace cxv::test;

namespace {

constexpr std::uint32_t kQkey = 0x11111111;

int post_ud(cxv::qp& q, std::uint64_t id, ibv_sge* s, api::address_handle& ah, std::uint32_t qpn, std::uint32_t qkey) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = &ah.base;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return q.post_send(&wr, &bad);
}

// Functions 0 and 1, a UD QP on each, both brought to RTS with Q_Key kQkey.
struct ud_pair {
    std::unique_ptr<node> a, b;
    std::shared_ptr<cxv::qp> qa, qb;
};

ud_pair ud_pair_at_rts() {
    ud_pair u{make_node("0000:c5:00.0"), make_node("0000:c5:00.1"), nullptr, nullptr};
    u.qa = make_qp(*u.a, qp_type::ud, {16, 16, 1, 1, 0});
    u.qb = make_qp(*u.b, qp_type::ud, {16, 16, 1, 1, 0});
    cxv::qp::modify_attr m;
    m.qkey = kQkey;
    bring_to_rts(*u.qa, m);
    bring_to_rts(*u.qb, m);
    return u;
}

}  // namespace

TEST_CASE("UD: a datagram sent while the port is down completes at the sender and never arrives") {
    auto [a, b, qa, qb] = ud_pair_at_rts();
    ibv_sge r = sge(*b, 0x1000, 40 + 256);
    REQUIRE(post_recv(*qb, 1, &r, 1) == 0);
    // The cable of function 0 out (the model's control file).
    const int fd = ::open("/sys/bus/pci/devices/0000:c5:00.0/cxv_sim_control", O_WRONLY);
    REQUIRE(fd >= 0);
    CHECK(::write(fd, "link down", 9) == 9);
    ::close(fd);
    ibv_sge s = sge(*a, 0, 100);
    cxv::qp::path p;
    p.dlid = b->lid;
    auto ah = make_address_handle(p, false);
    REQUIRE(post_ud(*qa, 2, &s, ah, qb->qpn(), kQkey) == 0);
    const auto wc = wait_wc(*a->cq, 1);
    CHECK(wc[0].wr_id == 2);
    CHECK(wc[0].status == IBV_WC_SUCCESS);  // unreliable: the sender is not told
    expect_no_wc(*b->cq, std::chrono::milliseconds(200));
}

TEST_CASE("UD: the GRH area comes first, Q_Keys are checked, datagrams stay within the MTU") {
    auto [a, b, qa, qb] = ud_pair_at_rts();

    // Without a GRH: the first 40 bytes of the buffer are left alone, byte_len counts them.
    std::memset(b->at(0x1000), 0xee, 40 + 256);
    ibv_sge r = sge(*b, 0x1000, 40 + 256);
    REQUIRE(post_recv(*qb, 1, &r, 1) == 0);
    fill(a->at(0), 100, 3);
    ibv_sge s = sge(*a, 0, 100);
    cxv::qp::path p;
    p.dlid = b->lid;
    p.sl = 5;
    auto ah = make_address_handle(p, false);
    REQUIRE(post_ud(*qa, 2, &s, ah, qb->qpn(), kQkey) == 0);
    auto wc = wait_wc(*b->cq, 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].byte_len == 140);
    CHECK(wc[0].src_qp == qa->qpn());
    CHECK(wc[0].slid == a->lid);
    CHECK(wc[0].sl == 5);  // the LRH's SL, from the CQE's flags_rqpn bits 27:24
    CHECK((wc[0].wc_flags & IBV_WC_GRH) == 0);
    CHECK(std::all_of(b->at(0x1000), b->at(0x1000 + 40), [](std::byte x) { return x == std::byte{0xee}; }));
    CHECK(std::memcmp(b->at(0x1000 + 40), a->at(0), 100) == 0);
    CHECK(wait_wc(*a->cq, 1)[0].status == IBV_WC_SUCCESS);

    // With a GRH: its content is there (IPv6-like header, the destination GID last).
    ibv_sge r2 = sge(*b, 0x2000, 40 + 256);
    REQUIRE(post_recv(*qb, 3, &r2, 1) == 0);
    p.grh = true;
    for (std::size_t i = 0; i < 16; ++i) p.dgid[i] = static_cast<std::uint8_t>(0xa0 + i);
    p.hop_limit = 9;
    auto ah_grh = make_address_handle(p, false);
    REQUIRE(post_ud(*qa, 4, &s, ah_grh, qb->qpn(), kQkey) == 0);
    wc = wait_wc(*b->cq, 1);
    CHECK((wc[0].wc_flags & IBV_WC_GRH) != 0);
    CHECK(wc[0].byte_len == 140);
    CHECK((std::to_integer<unsigned>(b->at(0x2000)[0]) >> 4) == 6);  // IP version 6
    CHECK(std::to_integer<unsigned>(b->at(0x2000)[6]) == 0x1b);      // next header: IBA
    CHECK(std::to_integer<unsigned>(b->at(0x2000)[7]) == 9);         // hop limit
    CHECK(std::memcmp(b->at(0x2000 + 24), p.dgid.data(), 16) == 0);
    CHECK(std::memcmp(b->at(0x2000 + 40), a->at(0), 100) == 0);
    wait_wc(*a->cq, 1);

    // A wrong Q_Key: silently dropped (the sender completes, the receiver sees nothing).
    ibv_sge r3 = sge(*b, 0x3000, 40 + 256);
    REQUIRE(post_recv(*qb, 5, &r3, 1) == 0);
    REQUIRE(post_ud(*qa, 6, &s, ah, qb->qpn(), kQkey + 1) == 0);
    CHECK(wait_wc(*a->cq, 1)[0].status == IBV_WC_SUCCESS);
    expect_no_wc(*b->cq, std::chrono::milliseconds(50));
    // The receive is still there for the next datagram with the right key.
    REQUIRE(post_ud(*qa, 7, &s, ah, qb->qpn(), kQkey) == 0);
    CHECK(wait_wc(*b->cq, 1)[0].wr_id == 5);
    wait_wc(*a->cq, 1);

    // Larger than the path MTU (4096): a local length error at the sender.
    ibv_sge big = sge(*a, 0, 4097);
    REQUIRE(post_ud(*qa, 8, &big, ah, qb->qpn(), kQkey) == 0);
    CHECK(wait_wc(*a->cq, 1)[0].status == IBV_WC_LOC_LEN_ERR);
    CHECK(take(qa->query()) == qp_state::sqerr);
}

TEST_CASE("UC: RDMA WRITE and SEND; a receive missing drops the message, not the QP") {
    auto n = make_node("0000:c5:00.0");
    auto q1 = make_qp(*n, qp_type::uc, {16, 16, 1, 1, 0});
    auto q2 = make_qp(*n, qp_type::uc, {16, 16, 1, 1, 0});
    connect_qps(*q1, *q2, *n);
    fill(n->at(0), 512, 4);
    ibv_sge s = sge(*n, 0, 512);
    REQUIRE(post_send(*q1, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, n->addr(0x10000), n->mr->rkey()) == 0);
    CHECK(wait_wc(*n->cq, 1)[0].status == IBV_WC_SUCCESS);
    // A UC completion says the message left, not that it arrived: wait for the data.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::memcmp(n->at(0x10000), n->at(0), 512) != 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::yield();
    }
    CHECK(std::memcmp(n->at(0x10000), n->at(0), 512) == 0);
    // No receive posted: the SEND completes at the sender and is lost.
    REQUIRE(post_send(*q1, 2, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*n->cq, 1)[0].wr_id == 2);
    expect_no_wc(*n->cq, std::chrono::milliseconds(30));
    ibv_sge r = sge(*n, 0x20000, 512);
    REQUIRE(post_recv(*q2, 3, &r, 1) == 0);
    REQUIRE(post_send(*q1, 4, IBV_WR_SEND, &s, 1) == 0);
    const auto wc = wait_wc(*n->cq, 2);
    std::set<std::uint64_t> ids{wc[0].wr_id, wc[1].wr_id};
    CHECK(ids == std::set<std::uint64_t>{3, 4});
    CHECK(take(q2->query()) == qp_state::rts);
}

TEST_CASE("SRQ: two QPs receive from one SRQ; the limit event fires once armed") {
    auto n = make_node("0000:c5:00.0", 64);
    cxv::srq::attr sa;
    sa.max_wr = 16;
    auto srq = take(cxv::srq::create(n->pd, sa));
    auto s1 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0}, srq);
    auto s2 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0}, srq);
    auto c1 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    auto c2 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    connect_qps(*s1, *c1, *n);
    connect_qps(*s2, *c2, *n);
    // post_recv on an SRQ-attached QP is refused (ibv_post_recv(3)).
    ibv_sge r = sge(*n, 0x1000, 64);
    CHECK(post_recv(*s1, 0, &r, 1) == EINVAL);

    for (unsigned i = 0; i < 8; ++i) {
        ibv_recv_wr wr{};
        ibv_sge e = sge(*n, 0x10000 + i * 64, 64);
        wr.wr_id = 1000 + i;
        wr.sg_list = &e;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        REQUIRE(srq->post_recv(&wr, &bad) == 0);
    }
    check_ok(srq->arm(4));
    ibv_sge s = sge(*n, 0, 16);
    for (unsigned i = 0; i < 5; ++i) REQUIRE(post_send(i % 2 ? *c2 : *c1, i, IBV_WR_SEND, &s, 1) == 0);
    const auto wc = wait_wc(*n->cq, 10);
    std::set<std::uint64_t> recv_ids;
    std::set<std::uint32_t> qps;
    for (const auto& w : wc) {
        CHECK(w.status == IBV_WC_SUCCESS);
        if (w.opcode == IBV_WC_RECV) {
            recv_ids.insert(w.wr_id);
            qps.insert(w.qp_num);
        }
    }
    CHECK(recv_ids.size() == 5);
    CHECK(qps == std::set<std::uint32_t>{s1->qpn(), s2->qpn()});
    CHECK(n->saw_event("SRQ_RQ_LIMIT", srq->srqn()));
    // An SRQ-attached QP going to error reports its last WQE.
    check_ok(s1->modify(qp_state::error, {}));
    CHECK(n->saw_event("SRQ_LAST_WQE", s1->qpn()));
}
