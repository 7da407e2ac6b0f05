// RC traffic between two emulated functions (and on one, in loopback) through the C++
// API and the verbs-shaped fast path: every opcode, gather/scatter lists, inline data,
// immediate data, solicited events, fences, unsignaled WRs, messages beyond the path
// MTU, and both doorbell modes. Completions are checked field by field and data byte
// by byte.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/e2e/fixture.h"

using namespace cxv;
using namespace cxv::test;

namespace {

struct pair_fixture {
    std::unique_ptr<node> a = make_node("0000:c5:00.0");
    std::unique_ptr<node> b = make_node("0000:c5:00.1");
    std::shared_ptr<cxv::qp> qa, qb;

    explicit pair_fixture(cxv::qp::caps cap = {4, 4, 4, 4, 64}, doorbell_mode mode = doorbell_mode::doorbell,
                          std::uint32_t mtu = 5) {
        qa = make_qp(*a, qp_type::rc, cap, nullptr, mode);
        qb = make_qp(*b, qp_type::rc, cap, nullptr, mode);
        auto ma = link_to(*qb, *b);
        auto mb = link_to(*qa, *a);
        ma.path_mtu = mb.path_mtu = mtu;
        bring_to_rts(*qa, ma);
        bring_to_rts(*qb, mb);
    }
};

}  // namespace

TEST_CASE("RC SEND between two devices, both directions, with gather and scatter lists") {
    pair_fixture f;
    auto& a = *f.a;
    auto& b = *f.b;
    fill(a.at(0), 4096, 1);
    // Three gather pieces (100 + 1000 + 2996 bytes) into two scatter pieces (2048 + 4096).
    ibv_sge rs[2] = {sge(b, 0x10000, 2048), sge(b, 0x20000, 4096)};
    REQUIRE(post_recv(*f.qb, 77, rs, 2) == 0);
    ibv_sge ss[3] = {sge(a, 0, 100), sge(a, 100, 1000), sge(a, 1100, 2996)};
    REQUIRE(post_send(*f.qa, 11, IBV_WR_SEND, ss, 3) == 0);

    const auto sw = wait_wc(*a.cq, 1);
    CHECK(sw[0].status == IBV_WC_SUCCESS);
    CHECK(sw[0].opcode == IBV_WC_SEND);
    CHECK(sw[0].wr_id == 11);
    CHECK(sw[0].qp_num == f.qa->qpn());
    const auto rw = wait_wc(*b.cq, 1);
    CHECK(rw[0].status == IBV_WC_SUCCESS);
    CHECK(rw[0].opcode == IBV_WC_RECV);
    CHECK(rw[0].wr_id == 77);
    CHECK(rw[0].byte_len == 4096);
    CHECK(rw[0].qp_num == f.qb->qpn());
    CHECK(rw[0].slid == a.lid);
    CHECK((rw[0].wc_flags & IBV_WC_WITH_IMM) == 0);
    CHECK(std::memcmp(b.at(0x10000), a.at(0), 2048) == 0);
    CHECK(std::memcmp(b.at(0x20000), a.at(2048), 2048) == 0);
    // Nothing beyond the message was written.
    CHECK(b.at(0x20000)[2048] == std::byte{0});

    // Back: SEND_IMM, solicited, inline.
    fill(b.at(0x30000), 48, 2);
    ibv_sge back = sge(a, 0x40000, 64);
    REQUIRE(post_recv(*f.qa, 5, &back, 1) == 0);
    ibv_send_wr wr{};
    ibv_sge in = sge(b, 0x30000, 48);
    wr.wr_id = 6;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32(0xc0ffee01);
    wr.sg_list = &in;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    REQUIRE(f.qb->post_send(&wr, &bad) == 0);
    std::memset(b.at(0x30000), 0, 48);  // inline: the WQE holds the data already
    const auto rw2 = wait_wc(*a.cq, 1);
    CHECK(rw2[0].status == IBV_WC_SUCCESS);
    CHECK(rw2[0].opcode == IBV_WC_RECV);
    CHECK(rw2[0].byte_len == 48);
    CHECK((rw2[0].wc_flags & IBV_WC_WITH_IMM) != 0);
    CHECK(rw2[0].imm_data == htobe32(0xc0ffee01));
    std::vector<std::byte> expect(48);
    fill(expect.data(), 48, 2);
    CHECK(std::memcmp(a.at(0x40000), expect.data(), 48) == 0);
    const auto sw2 = wait_wc(*b.cq, 1);
    CHECK(sw2[0].wr_id == 6);
    CHECK(sw2[0].opcode == IBV_WC_SEND);
}

TEST_CASE("RDMA WRITE, WRITE with immediate, READ and atomics") {
    pair_fixture f;
    auto& a = *f.a;
    auto& b = *f.b;
    // WRITE 8 KiB: no receive WQE is consumed, no completion at the responder.
    fill(a.at(0), 8192, 3);
    ibv_sge s = sge(a, 0, 8192);
    REQUIRE(post_send(*f.qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, b.addr(0x8000), b.mr->rkey()) == 0);
    auto wc = wait_wc(*a.cq, 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
    CHECK(std::memcmp(b.at(0x8000), a.at(0), 8192) == 0);
    expect_no_wc(*b.cq);

    // WRITE_WITH_IMM consumes a receive WQE; its completion carries the length and data.
    ibv_sge r = sge(b, 0x80000, 16);
    REQUIRE(post_recv(*f.qb, 9, &r, 1) == 0);
    ibv_send_wr wr{};
    s = sge(a, 100, 300);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htobe32(42);
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = b.addr(0x9000);
    wr.wr.rdma.rkey = b.mr->rkey();
    ibv_send_wr* bad = nullptr;
    REQUIRE(f.qa->post_send(&wr, &bad) == 0);
    wc = wait_wc(*b.cq, 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(wc[0].byte_len == 300);
    CHECK(wc[0].imm_data == htobe32(42));
    CHECK(wc[0].wr_id == 9);
    CHECK(std::memcmp(b.at(0x9000), a.at(100), 300) == 0);
    wait_wc(*a.cq, 1);

    // READ 4 KiB back into another place.
    fill(b.at(0x40000), 4096, 4);
    s = sge(a, 0x50000, 4096);
    REQUIRE(post_send(*f.qa, 3, IBV_WR_RDMA_READ, &s, 1, IBV_SEND_SIGNALED, b.addr(0x40000), b.mr->rkey()) == 0);
    wc = wait_wc(*a.cq, 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_RDMA_READ);
    CHECK(wc[0].byte_len == 4096);
    CHECK(std::memcmp(a.at(0x50000), b.at(0x40000), 4096) == 0);

    // Fetch-and-add, then compare-and-swap that matches and one that does not.
    std::uint64_t v = 100;
    std::memcpy(b.at(0x60000), &v, 8);
    auto atomic = [&](std::uint64_t id, ibv_wr_opcode op, std::uint64_t compare_add, std::uint64_t swap) {
        ibv_send_wr w{};
        ibv_sge out = sge(a, 0x61000 + 8 * id, 8);
        w.wr_id = id;
        w.opcode = op;
        w.sg_list = &out;
        w.num_sge = 1;
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.atomic.remote_addr = b.addr(0x60000);
        w.wr.atomic.rkey = b.mr->rkey();
        w.wr.atomic.compare_add = compare_add;
        w.wr.atomic.swap = swap;
        ibv_send_wr* bw = nullptr;
        REQUIRE(f.qa->post_send(&w, &bw) == 0);
        const auto c = wait_wc(*a.cq, 1);
        CHECK(c[0].status == IBV_WC_SUCCESS);
        CHECK(c[0].opcode == (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP));
        CHECK(c[0].byte_len == 8);
        std::uint64_t old = 0, now = 0;
        std::memcpy(&old, a.at(0x61000 + 8 * id), 8);
        std::memcpy(&now, b.at(0x60000), 8);
        return std::pair{old, now};
    };
    CHECK(atomic(1, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0) == std::pair<std::uint64_t, std::uint64_t>{100, 105});
    CHECK(atomic(2, IBV_WR_ATOMIC_CMP_AND_SWP, 105, 7) == std::pair<std::uint64_t, std::uint64_t>{105, 7});
    CHECK(atomic(3, IBV_WR_ATOMIC_CMP_AND_SWP, 1, 9) == std::pair<std::uint64_t, std::uint64_t>{7, 7});

    // A fenced SEND after a READ: the READ's data is in place before the SEND goes.
    fill(b.at(0x42000), 64, 5);
    ibv_sge rd = sge(a, 0x70000, 64);
    ibv_sge rr = sge(b, 0x90000, 64);
    REQUIRE(post_recv(*f.qb, 20, &rr, 1) == 0);
    ibv_send_wr two[2] = {};
    two[0].wr_id = 30;
    two[0].opcode = IBV_WR_RDMA_READ;
    two[0].sg_list = &rd;
    two[0].num_sge = 1;
    two[0].send_flags = IBV_SEND_SIGNALED;
    two[0].wr.rdma.remote_addr = b.addr(0x42000);
    two[0].wr.rdma.rkey = b.mr->rkey();
    ibv_sge echo = sge(a, 0x70000, 64);  // sends what the READ brought
    two[1].wr_id = 31;
    two[1].opcode = IBV_WR_SEND;
    two[1].sg_list = &echo;
    two[1].num_sge = 1;
    two[1].send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
    REQUIRE(f.qa->post_send(std::span<ibv_send_wr>(two, 2), &bad) == 0);
    wc = wait_wc(*a.cq, 2);
    CHECK(wc[0].wr_id == 30);
    CHECK(wc[1].wr_id == 31);
    wait_wc(*b.cq, 1);
    CHECK(std::memcmp(b.at(0x90000), b.at(0x42000), 64) == 0);
}

TEST_CASE("unsignaled WRs complete silently; messages larger than the path MTU") {
    pair_fixture f({64, 64, 1, 1, 0}, doorbell_mode::doorbell, 1);  // 256-byte MTU
    auto& a = *f.a;
    auto& b = *f.b;
    // 10 unsignaled writes, one signaled: one completion, for the signaled one.
    for (unsigned i = 0; i < 10; ++i) {
        fill(a.at(i * 512), 512, 10 + i);
        ibv_sge s = sge(a, i * 512, 512);
        REQUIRE(post_send(*f.qa, 100 + i, IBV_WR_RDMA_WRITE, &s, 1, 0, b.addr(0x10000 + i * 512), b.mr->rkey()) == 0);
    }
    ibv_sge s = sge(a, 0, 1);
    REQUIRE(post_send(*f.qa, 200, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, b.addr(0x20000), b.mr->rkey()) == 0);
    const auto wc = wait_wc(*a.cq, 1);
    CHECK(wc[0].wr_id == 200);
    CHECK(std::memcmp(b.at(0x10000), a.at(0), 5120) == 0);
    expect_no_wc(*a.cq, std::chrono::milliseconds(20));

    // A 64 KiB SEND over 256-byte packets arrives whole.
    fill(a.at(0x20000), 65536, 7);
    ibv_sge r = sge(b, 0x40000, 65536);
    REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
    s = sge(a, 0x20000, 65536);
    REQUIRE(post_send(*f.qa, 2, IBV_WR_SEND, &s, 1) == 0);
    const auto rw = wait_wc(*b.cq, 1);
    CHECK(rw[0].status == IBV_WC_SUCCESS);
    CHECK(rw[0].byte_len == 65536);
    CHECK(std::memcmp(b.at(0x40000), a.at(0x20000), 65536) == 0);
    wait_wc(*a.cq, 1);
}

TEST_CASE("loopback on one device, with BlueFlame doorbells, many messages in flight") {
    auto n = make_node("0000:c5:00.0", 1024);
    const cxv::qp::caps cap{256, 256, 1, 1, 64};
    auto q1 = make_qp(*n, qp_type::rc, cap, nullptr, doorbell_mode::blueflame);
    auto q2 = make_qp(*n, qp_type::rc, cap, nullptr, doorbell_mode::blueflame);
    connect_qps(*q1, *q2, *n);
    constexpr unsigned kCount = 1000;
    unsigned sent = 0, received = 0, send_done = 0;
    std::vector<std::uint32_t> seen;
    for (unsigned i = 0; i < 128; ++i) {
        ibv_sge r = sge(*n, 0x80000 + (i % 128) * 64, 64);
        REQUIRE(post_recv(*q2, i, &r, 1) == 0);
    }
    unsigned posted_recv = 128;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((received < kCount || send_done < kCount) && std::chrono::steady_clock::now() < end) {
        if (sent < kCount && sent - send_done < 64 && sent < received + 128) {
            std::uint32_t v = sent;
            std::memcpy(n->at(0x1000), &v, 4);
            ibv_sge s = sge(*n, 0x1000, 4);
            REQUIRE(post_send(*q1, sent, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE) == 0);
            ++sent;
        }
        ibv_wc wc[16];
        const int got = n->cq->poll(16, wc);
        for (int i = 0; i < got; ++i) {
            REQUIRE(wc[i].status == IBV_WC_SUCCESS);
            if (wc[i].opcode == IBV_WC_SEND) {
                CHECK(wc[i].wr_id == send_done);
                ++send_done;
            } else {
                std::uint32_t v = 0;
                std::memcpy(&v, n->at(0x80000 + (wc[i].wr_id % 128) * 64), 4);
                seen.push_back(v);
                ++received;
                if (posted_recv < kCount) {
                    ibv_sge r = sge(*n, 0x80000 + (wc[i].wr_id % 128) * 64, 64);
                    REQUIRE(post_recv(*q2, wc[i].wr_id, &r, 1) == 0);
                    ++posted_recv;
                }
            }
        }
    }
    REQUIRE(received == kCount);
    REQUIRE(send_done == kCount);
    for (unsigned i = 0; i < kCount; ++i) REQUIRE(seen[i] == i);
}

TEST_CASE("interrupt mode: an armed CQ signals its event fd; solicited-only arming waits for a solicited CQE") {
    pair_fixture f;
    auto& a = *f.a;
    auto& b = *f.b;
    // Armed for any completion: the RECV raises the event.
    b.cq->request_notify(false);
    CHECK_FALSE(b.cq->wait_event(std::chrono::milliseconds(20)));
    ibv_sge r = sge(b, 0x1000, 64);
    REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
    REQUIRE(post_recv(*f.qb, 2, &r, 1) == 0);
    REQUIRE(post_recv(*f.qb, 3, &r, 1) == 0);
    ibv_sge s = sge(a, 0, 64);
    REQUIRE(post_send(*f.qa, 10, IBV_WR_SEND, &s, 1) == 0);
    CHECK(b.cq->wait_event(std::chrono::milliseconds(3000)));
    CHECK(wait_wc(*b.cq, 1)[0].wr_id == 1);
    // Not armed again: the next completion raises nothing.
    REQUIRE(post_send(*f.qa, 11, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*b.cq, 1)[0].wr_id == 2);
    CHECK_FALSE(b.cq->wait_event(std::chrono::milliseconds(20)));
    // Armed for solicited completions: an unsolicited SEND raises nothing, a solicited one does.
    b.cq->request_notify(true);
    REQUIRE(post_send(*f.qa, 12, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED) == 0);
    CHECK(b.cq->wait_event(std::chrono::milliseconds(3000)));
    const auto wc = wait_wc(*b.cq, 1);
    CHECK(wc[0].wr_id == 3);
    wait_wc(*a.cq, 3);
    b.cq->request_notify(true);
    ibv_sge r2 = sge(b, 0x2000, 64);
    REQUIRE(post_recv(*f.qb, 4, &r2, 1) == 0);
    REQUIRE(post_send(*f.qa, 13, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*b.cq, 1)[0].wr_id == 4);
    CHECK_FALSE(b.cq->wait_event(std::chrono::milliseconds(30)));
}

TEST_CASE("multi-producer QP: four threads post SENDs at once; every message arrives, in each thread's order") {
    auto n = make_node("0000:c5:00.0", 4096);
    cxv::qp::attr a;
    a.type = qp_type::rc;
    a.domain = n->pd;
    a.send_cq = a.recv_cq = n->cq;
    a.cap = {512, 1024, 1, 1, 16};
    a.multi_producer = true;
    auto tx = take(cxv::qp::create(*n->dev, a));
    a.multi_producer = false;
    auto rx = take(cxv::qp::create(*n->dev, a));
    CHECK(tx->doorbell() == doorbell_mode::doorbell);
    connect_qps(*tx, *rx, *n);
    constexpr unsigned kThreads = 4, kPerThread = 200;
    for (unsigned i = 0; i < kThreads * kPerThread; ++i) {
        ibv_sge r = sge(*n, 0x10000 + i * 16, 16);
        REQUIRE(post_recv(*rx, i, &r, 1) == 0);
    }
    std::atomic<unsigned> posted{0};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (unsigned i = 0; i < kPerThread; ++i) {
                const std::uint32_t v = t << 16 | i;
                ibv_sge s{reinterpret_cast<std::uint64_t>(&v), 4, n->mr->lkey()};
                ibv_send_wr wr{};
                wr.wr_id = v;
                wr.opcode = IBV_WR_SEND;
                wr.sg_list = &s;
                wr.num_sge = 1;
                wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
                ibv_send_wr* bad = nullptr;
                while (tx->post_send(&wr, &bad) == ENOMEM) std::this_thread::yield();
                posted.fetch_add(1);
            }
        });
    }
    // One poller: every SEND completes, every message arrives once, each thread's in order.
    std::vector<std::vector<unsigned>> order(kThreads);
    unsigned sends = 0, recvs = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((sends < kThreads * kPerThread || recvs < kThreads * kPerThread) && std::chrono::steady_clock::now() < end) {
        ibv_wc wc[32];
        const int got = n->cq->poll(32, wc);
        for (int i = 0; i < got; ++i) {
            REQUIRE(wc[i].status == IBV_WC_SUCCESS);
            if (wc[i].opcode == IBV_WC_SEND) {
                ++sends;
            } else {
                std::uint32_t v = 0;
                std::memcpy(&v, n->at(0x10000 + wc[i].wr_id * 16), 4);
                order[v >> 16].push_back(v & 0xffff);
                ++recvs;
            }
        }
    }
    for (auto& t : threads) t.join();
    CHECK(posted.load() == kThreads * kPerThread);
    REQUIRE(sends == kThreads * kPerThread);
    REQUIRE(recvs == kThreads * kPerThread);
    for (unsigned t = 0; t < kThreads; ++t) {
        REQUIRE(order[t].size() == kPerThread);
        for (unsigned i = 0; i < kPerThread; ++i) REQUIRE(order[t][i] == i);
    }
}
