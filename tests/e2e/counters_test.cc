// Counters end to end: cxv::device::counters() and cxv::qp::counters() after real
// traffic and real errors between two functions -- requests counted where the responder
// executed them, RNR NAKs at both ends, remote access errors, error and flush
// completions, a QP's own set kept apart from the device's, and clear.
#include <doctest/doctest.h>

#include "tests/e2e/fixture.h"

using namespace cxv;
using namespace cxv::test;

namespace {

std::shared_ptr<cxv::qp> make_counted_qp(node& n) {
    cxv::qp::attr a;
    a.type = qp_type::rc;
    a.domain = n.pd;
    a.send_cq = n.cq;
    a.recv_cq = n.cq;
    a.cap = {16, 16, 2, 2, 0};
    a.doorbell = doorbell_mode::doorbell;
    a.own_counters = true;
    return take(cxv::qp::create(*n.dev, a));
}

// Node a's QP (its own Q counter set when `own`) connected to node b's.
struct pair_fixture {
    std::unique_ptr<node> a = make_node("0000:c5:00.0");
    std::unique_ptr<node> b = make_node("0000:c5:00.1");
    std::shared_ptr<cxv::qp> qa, qb;

    explicit pair_fixture(bool own = false, std::uint8_t rnr_retry = 7) {
        qa = own ? make_counted_qp(*a) : make_qp(*a, qp_type::rc, {16, 16, 2, 2, 0});
        qb = make_qp(*b, qp_type::rc, {16, 16, 2, 2, 0});
        auto ma = link_to(*qb, *b);
        ma.rnr_retry = rnr_retry;
        bring_to_rts(*qa, ma);
        bring_to_rts(*qb, link_to(*qa, *a));
    }
};

cxv::q_counter_values device_set(node& n) {
    auto c = take(n.dev->counters());
    REQUIRE(c.q.has_value());
    return *c.q;
}

}  // namespace

TEST_CASE("WRITE, READ and atomic requests count where the responder executed them") {
    pair_fixture f;
    REQUIRE(f.a->dev->q_counter() != nullptr);
    ibv_sge s = sge(*f.a, 0, 256);
    for (int i = 0; i < 3; ++i) {
        REQUIRE(post_send(*f.qa, i, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0x1000), f.b->mr->rkey()) == 0);
    }
    for (int i = 0; i < 2; ++i) {
        REQUIRE(post_send(*f.qa, 10 + i, IBV_WR_RDMA_READ, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0x2000), f.b->mr->rkey()) == 0);
    }
    ibv_send_wr fa{};
    ibv_sge s8 = sge(*f.a, 0x3000, 8);
    fa.wr_id = 20;
    fa.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    fa.sg_list = &s8;
    fa.num_sge = 1;
    fa.send_flags = IBV_SEND_SIGNALED;
    fa.wr.atomic.remote_addr = f.b->addr(0x4000);
    fa.wr.atomic.rkey = f.b->mr->rkey();
    fa.wr.atomic.compare_add = 5;
    ibv_send_wr* bad = nullptr;
    REQUIRE(f.qa->post_send(&fa, &bad) == 0);
    for (const auto& wc : wait_wc(*f.a->cq, 6)) CHECK(wc.status == IBV_WC_SUCCESS);

    const auto rb = device_set(*f.b);
    CHECK(rb.rx_write_requests == 3);
    CHECK(rb.rx_read_requests == 2);
    CHECK(rb.rx_atomic_requests == 1);
    CHECK(rb.out_of_buffer == 0);
    CHECK(rb.resp_cqe_error == 0);
    const auto ra = device_set(*f.a);  // the requester executed nothing
    CHECK(ra.rx_write_requests == 0);
    CHECK(ra.rx_read_requests == 0);
    CHECK(ra.rx_atomic_requests == 0);
    CHECK(ra.req_cqe_error == 0);

    // The vports: what one function sent the other received (one fabric, nothing lost).
    const auto va = take(f.a->dev->counters()).vport, vb = take(f.b->dev->counters()).vport;
    const bool eth = f.a->ethernet;
    const auto& a_tx = eth ? va.transmitted_eth_unicast : va.transmitted_ib_unicast;
    const auto& b_rx = eth ? vb.received_eth_unicast : vb.received_ib_unicast;
    CHECK(a_tx.packets == b_rx.packets);
    CHECK(a_tx.octets == b_rx.octets);
    CHECK(va.transmit_errors.packets == 0);
    CHECK(vb.received_errors.packets == 0);

    // clear: this read has the counts, the next starts from 0.
    CHECK(take(f.b->dev->counters(true)).q->rx_write_requests == 3);
    const auto cleared = device_set(*f.b);
    CHECK(cleared.rx_write_requests == 0);
    CHECK(cleared.rx_read_requests == 0);
    CHECK(cleared.rx_atomic_requests == 0);
    // A QP without its own set has no counters of its own.
    CHECK(f.qa->counters().error().code == ENOENT);
}

TEST_CASE("RNR: out_of_buffer at the responder, rnr_nak_retry_err on the requester's own set") {
    {
        pair_fixture f(true);  // rnr_retry 7: retried until a receive is posted
        ibv_sge s = sge(*f.a, 0, 32);
        REQUIRE(post_send(*f.qa, 1, IBV_WR_SEND, &s, 1) == 0);
        expect_no_wc(*f.a->cq, std::chrono::milliseconds(30));
        ibv_sge r = sge(*f.b, 0x1000, 32);
        REQUIRE(post_recv(*f.qb, 2, &r, 1) == 0);
        CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_SUCCESS);
        CHECK(wait_wc(*f.b->cq, 1)[0].status == IBV_WC_SUCCESS);
        const auto own = take(f.qa->counters());
        const auto rb = device_set(*f.b);
        CHECK(rb.out_of_buffer >= 1);
        CHECK(own.rnr_nak_retry_err == rb.out_of_buffer);  // every RNR NAK was retried
        CHECK(own.req_cqe_error == 0);
        CHECK(device_set(*f.a).rnr_nak_retry_err == 0);  // the QP counts to its own set
    }
    pair_fixture f(true, 1);  // one retry
    ibv_sge s = sge(*f.a, 0, 32);
    REQUIRE(post_send(*f.qa, 1, IBV_WR_SEND, &s, 1) == 0);
    ibv_sge own_r = sge(*f.a, 0x2000, 32);
    REQUIRE(post_recv(*f.qa, 3, &own_r, 1) == 0);
    const auto wc = wait_wc(*f.a->cq, 2);
    CHECK(wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
    const auto own = take(f.qa->counters());
    CHECK(own.rnr_nak_retry_err == 1);  // the first, retried; the second ended it
    CHECK(own.req_cqe_error == 1);
    CHECK(own.resp_cqe_flush_error == 1);  // the receive posted to the QP
    CHECK(own.req_cqe_flush_error == 0);
    CHECK(device_set(*f.b).out_of_buffer == 2);
    // clear on the QP's own set.
    CHECK(take(f.qa->counters(true)).req_cqe_error == 1);
    CHECK(take(f.qa->counters()).req_cqe_error == 0);
}

TEST_CASE("a remote access error counts at both ends; the write is not counted as executed") {
    pair_fixture f;
    ibv_sge s = sge(*f.a, 0, 64);
    REQUIRE(post_send(*f.qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0), f.b->mr->rkey() + 1) == 0);
    REQUIRE(post_send(*f.qa, 2, IBV_WR_RDMA_WRITE, &s, 1, 0, f.b->addr(0), f.b->mr->rkey()) == 0);
    const auto wc = wait_wc(*f.a->cq, 2);
    CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
    const auto ra = device_set(*f.a);
    CHECK(ra.req_remote_access_errors == 1);
    CHECK(ra.req_cqe_error == 1);
    CHECK(ra.req_cqe_flush_error == 1);
    const auto rb = device_set(*f.b);
    CHECK(rb.resp_remote_access_errors == 1);
    CHECK(rb.rx_write_requests == 0);
    CHECK(rb.resp_cqe_error == 0);  // no receive WQE to report it on
}

TEST_CASE("requests ahead of the expected PSN count as out_of_sequence, one per RNR round") {
    pair_fixture f;
    ibv_sge s = sge(*f.a, 0, 32);
    ibv_send_wr w[2]{};
    for (int i = 0; i < 2; ++i) {
        w[i].wr_id = i;
        w[i].opcode = IBV_WR_SEND;
        w[i].sg_list = &s;
        w[i].num_sge = 1;
        w[i].send_flags = IBV_SEND_SIGNALED;
    }
    w[0].next = &w[1];
    ibv_send_wr* bad = nullptr;
    REQUIRE(f.qa->post_send(w, &bad) == 0);  // one doorbell: both on the wire before any answer
    expect_no_wc(*f.a->cq, std::chrono::milliseconds(30));
    ibv_sge r[2] = {sge(*f.b, 0x1000, 32), sge(*f.b, 0x2000, 32)};
    ibv_recv_wr rw[2]{};
    for (int i = 0; i < 2; ++i) {
        rw[i].wr_id = 10 + i;
        rw[i].sg_list = &r[i];
        rw[i].num_sge = 1;
    }
    ibv_recv_wr* rbad = nullptr;
    REQUIRE(f.qb->post_recv(std::span<ibv_recv_wr>(rw, 2), &rbad) == 0);  // one record update
    for (const auto& wc : wait_wc(*f.a->cq, 2)) CHECK(wc.status == IBV_WC_SUCCESS);
    wait_wc(*f.b->cq, 2);
    const auto rb = device_set(*f.b);
    // Each round the first SEND found no receive (RNR NAK) and the second came after a
    // PSN the responder had not accepted; the last round executed both.
    CHECK(rb.out_of_buffer >= 1);
    CHECK(rb.out_of_sequence == rb.out_of_buffer);
    CHECK(rb.duplicate_request == 0);
    CHECK(device_set(*f.a).rnr_nak_retry_err == rb.out_of_buffer);
}

TEST_CASE("local and remote errors count on their side with their cause") {
    {
        // A receive buffer too small: a local length error at the responder, a remote
        // invalid request at the requester.
        pair_fixture f;
        ibv_sge r = sge(*f.b, 0x1000, 100);
        REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
        ibv_sge s = sge(*f.a, 0, 200);
        REQUIRE(post_send(*f.qa, 2, IBV_WR_SEND, &s, 1) == 0);
        CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_REM_INV_REQ_ERR);
        CHECK(wait_wc(*f.b->cq, 1)[0].status == IBV_WC_LOC_LEN_ERR);
        const auto ra = device_set(*f.a), rb = device_set(*f.b);
        CHECK(rb.resp_local_length_error == 1);
        CHECK(rb.resp_cqe_error == 1);
        CHECK(ra.req_remote_invalid_request == 1);
        CHECK(ra.req_cqe_error == 1);
        CHECK(ra.resp_local_length_error == 0);
    }
    {
        // A bad lkey: a local protection error, nothing sent.
        pair_fixture f;
        ibv_sge s = sge(*f.a, 0, 64);
        s.lkey ^= 0x100;
        REQUIRE(post_send(*f.qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0), f.b->mr->rkey()) == 0);
        CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_LOC_PROT_ERR);
        const auto ra = device_set(*f.a);
        CHECK(ra.req_local_protection == 1);
        CHECK(ra.req_cqe_error == 1);
        CHECK(device_set(*f.b).rx_write_requests == 0);
    }
    {
        // A peer that never answers, retry_cnt 1: one timeout retried, the next ends it.
        std::unique_ptr<node> a = make_node("0000:c5:00.0"), b = make_node("0000:c5:00.1");
        auto qa = make_qp(*a, qp_type::rc, {16, 16, 2, 2, 0});
        auto qb = make_qp(*b, qp_type::rc, {16, 16, 2, 2, 0});
        auto ma = link_to(*qb, *b);
        ma.retry_cnt = 1;
        bring_to_rts(*qa, ma);
        bring_to_rts(*qb, link_to(*qa, *a));
        check_ok(qb->modify(qp_state::error, {}));
        ibv_sge s = sge(*a, 0, 8);
        REQUIRE(post_send(*qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, b->addr(0), b->mr->rkey()) == 0);
        CHECK(wait_wc(*a->cq, 1)[0].status == IBV_WC_RETRY_EXC_ERR);
        const auto ra = device_set(*a);
        CHECK(ra.local_ack_timeout_err == 1);
        CHECK(ra.req_transport_retries_exceeded == 1);
        CHECK(ra.req_cqe_error == 1);
        const auto rb = device_set(*b);
        CHECK(rb.rx_write_requests == 0);  // a QP in error executes nothing
        CHECK(rb.out_of_sequence == 0);
    }
}
