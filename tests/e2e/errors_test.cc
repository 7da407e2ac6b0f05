// What goes wrong, end to end: RNR NAKs retried and exhausted, local protection and
// length errors, remote access errors (the responder's memory untouched, its QP in
// error with an affiliated event), flushes of every WR posted after an error (send and
// receive), CQ overrun, and the doorbell protocol itself (a doorbell without a record
// update, and a record update without a doorbell, execute nothing).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

// Below the API: the HCA, the QP's BlueFlame register and the CQ's number.
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/qp.h"
#include "driver/vfio/vfio.h"
#include "hw/doorbell.h"
#include "hw/wqe.h"
#include "tests/e2e/fixture.h"

using namespace cxv;
using namespace cxv::test;

namespace {

struct pair_fixture {
    std::unique_ptr<node> a = make_node("0000:c5:00.0");
    std::unique_ptr<node> b = make_node("0000:c5:00.1", 16);
    std::shared_ptr<cxv::qp> qa, qb;

    explicit pair_fixture(std::uint8_t rnr_retry = 7, std::uint8_t retry_cnt = 7) {
        qa = make_qp(*a, qp_type::rc, {16, 16, 2, 2, 0});
        qb = make_qp(*b, qp_type::rc, {16, 16, 2, 2, 0});
        auto ma = link_to(*qb, *b);
        auto mb = link_to(*qa, *a);
        ma.rnr_retry = rnr_retry;
        ma.retry_cnt = retry_cnt;
        bring_to_rts(*qa, ma);
        bring_to_rts(*qb, mb);
    }
};

}  // namespace

TEST_CASE("RNR: a SEND waits for a receive to be posted; with rnr_retry 1 it fails") {
    {
        pair_fixture f;  // rnr_retry 7: forever
        ibv_sge s = sge(*f.a, 0, 32);
        REQUIRE(post_send(*f.qa, 1, IBV_WR_SEND, &s, 1) == 0);
        expect_no_wc(*f.a->cq, std::chrono::milliseconds(30));
        ibv_sge r = sge(*f.b, 0x1000, 32);
        REQUIRE(post_recv(*f.qb, 2, &r, 1) == 0);
        const auto wc = wait_wc(*f.a->cq, 1);
        CHECK(wc[0].status == IBV_WC_SUCCESS);
        CHECK(wait_wc(*f.b->cq, 1)[0].wr_id == 2);
    }
    {
        pair_fixture f(1);
        ibv_sge s = sge(*f.a, 0, 32);
        REQUIRE(post_send(*f.qa, 1, IBV_WR_SEND, &s, 1) == 0);
        REQUIRE(post_send(*f.qa, 2, IBV_WR_SEND, &s, 1, 0) == 0);  // unsignaled: flushed all the same
        ibv_sge own = sge(*f.a, 0x2000, 32);
        REQUIRE(post_recv(*f.qa, 3, &own, 1) == 0);
        const auto wc = wait_wc(*f.a->cq, 3);
        CHECK(wc[0].wr_id == 1);
        CHECK(wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
        CHECK(wc[0].opcode == IBV_WC_SEND);
        // The QP went to error: the rest of the send queue and the receive queue flush.
        CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
        CHECK(wc[2].status == IBV_WC_WR_FLUSH_ERR);
        std::set<std::uint64_t> ids{wc[1].wr_id, wc[2].wr_id};
        CHECK(ids == std::set<std::uint64_t>{2, 3});
        CHECK(take(f.qa->query()) == qp_state::error);
        // Posting to a QP in error: the WR completes with a flush error (send and receive).
        REQUIRE(post_send(*f.qa, 4, IBV_WR_SEND, &s, 1) == 0);
        REQUIRE(post_recv(*f.qa, 5, &own, 1) == 0);
        const auto late = wait_wc(*f.a->cq, 2);
        CHECK(late[0].status == IBV_WC_WR_FLUSH_ERR);
        CHECK(late[1].status == IBV_WC_WR_FLUSH_ERR);
        std::set<std::uint64_t> late_ids{late[0].wr_id, late[1].wr_id};
        CHECK(late_ids == std::set<std::uint64_t>{4, 5});
    }
}

TEST_CASE("local protection: a bad lkey fails the WR and nothing is sent") {
    {
        pair_fixture f;
        ibv_sge r = sge(*f.b, 0x1000, 64);
        REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
        ibv_sge s = sge(*f.a, 0, 64);
        s.lkey ^= 0x100;  // another key index
        REQUIRE(post_send(*f.qa, 7, IBV_WR_SEND, &s, 1) == 0);
        const auto wc = wait_wc(*f.a->cq, 1);
        CHECK(wc[0].status == IBV_WC_LOC_PROT_ERR);
        CHECK(wc[0].wr_id == 7);
        expect_no_wc(*f.b->cq);
    }
    // Beyond the region's end: also a protection error.
    pair_fixture g;
    ibv_sge over{g.a->addr(0), 64, g.a->mr->lkey()};
    over.addr = g.a->addr(g.a->mem.size() - 32);
    REQUIRE(post_send(*g.qa, 8, IBV_WR_RDMA_WRITE, &over, 1, IBV_SEND_SIGNALED, g.b->addr(0), g.b->mr->rkey()) == 0);
    CHECK(wait_wc(*g.a->cq, 1)[0].status == IBV_WC_LOC_PROT_ERR);
}

TEST_CASE("remote access: a bad rkey or a read-only region leaves the responder's memory untouched") {
    {
        pair_fixture f;
        std::vector<std::byte> before(f.b->at(0), f.b->at(0) + 4096);
        fill(f.a->at(0), 4096, 9);
        ibv_sge s = sge(*f.a, 0, 4096);
        REQUIRE(post_send(*f.qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0), f.b->mr->rkey() + 1) == 0);
        const auto wc = wait_wc(*f.a->cq, 1);
        CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
        CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
        CHECK(std::memcmp(f.b->at(0), before.data(), 4096) == 0);
        // The responder QP is in error, and says why with an affiliated event.
        CHECK(f.b->saw_event("WQ_ACCESS_ERROR", f.qb->qpn()));
        CHECK(take(f.qb->query()) == qp_state::error);
        CHECK(take(f.qa->query()) == qp_state::error);
    }
    // A region registered without remote write: the same.
    pair_fixture g;
    std::vector<std::byte> ro(8192);
    auto ro_mr = take(cxv::mr::create(g.b->pd, ro.data(), ro.size(), access_remote_read));
    ibv_sge gs = sge(*g.a, 0, 4096);
    REQUIRE(post_send(*g.qa, 2, IBV_WR_RDMA_WRITE, &gs, 1, IBV_SEND_SIGNALED,
                      reinterpret_cast<std::uint64_t>(ro.data()), ro_mr->rkey()) == 0);
    const auto wc2 = wait_wc(*g.a->cq, 1);
    CHECK(wc2[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(std::all_of(ro.begin(), ro.end(), [](std::byte x) { return x == std::byte{0}; }));
}

TEST_CASE("a receive buffer released while still registered: the write lands as in a card's pinned pages") {
    // glibc's free() unmaps a large block with a system call of its own, which no preload
    // sees, and a program may exit with its buffers still registered: the pages go from
    // under a DMA mapping that still names them. On a card vfio pinned them, and the
    // device's write lands there, out of the program's sight. The model reaches memory
    // through the program's addresses, so that write faults: it must not take the
    // process down (sim/pci/host_guard.h).
    pair_fixture f;
    constexpr std::size_t len = 2 * 4096;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    auto mr = take(cxv::mr::create(f.b->pd, p, len, access_local_write));
    ibv_sge r{reinterpret_cast<std::uint64_t>(p), 4096, mr->lkey()};
    REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
    // Released with the system call itself; then nothing may be mapped there meanwhile
    // (a later mapping at that address would take the write): a page nobody may touch.
    REQUIRE(::syscall(SYS_munmap, p, len) == 0);
    REQUIRE(::mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == p);
    fill(f.a->at(0), 4096, 5);
    ibv_sge s = sge(*f.a, 0, 4096);
    REQUIRE(post_send(*f.qa, 2, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_SUCCESS);
    const auto wc = wait_wc(*f.b->cq, 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].byte_len == 4096);
    // The device goes on: the next receive, in memory the program kept, gets its bytes.
    ibv_sge r2 = sge(*f.b, 0x2000, 4096);
    REQUIRE(post_recv(*f.qb, 3, &r2, 1) == 0);
    REQUIRE(post_send(*f.qa, 4, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_SUCCESS);
    CHECK(wait_wc(*f.b->cq, 1)[0].status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(f.b->at(0x2000), f.a->at(0), 4096) == 0);
    mr.reset();
    ::munmap(p, len);
}

TEST_CASE("a receive buffer too small: LOC_LEN_ERR at the responder, REM_INV_REQ_ERR at the requester") {
    pair_fixture f;
    ibv_sge r = sge(*f.b, 0x1000, 100);
    REQUIRE(post_recv(*f.qb, 1, &r, 1) == 0);
    ibv_sge r2 = sge(*f.b, 0x2000, 100);
    REQUIRE(post_recv(*f.qb, 2, &r2, 1) == 0);
    ibv_sge s = sge(*f.a, 0, 200);
    REQUIRE(post_send(*f.qa, 3, IBV_WR_SEND, &s, 1) == 0);
    const auto rw = wait_wc(*f.b->cq, 2);
    CHECK(rw[0].wr_id == 1);
    CHECK(rw[0].status == IBV_WC_LOC_LEN_ERR);
    CHECK(rw[0].opcode == IBV_WC_RECV);
    CHECK(rw[1].wr_id == 2);
    CHECK(rw[1].status == IBV_WC_WR_FLUSH_ERR);
    const auto sw = wait_wc(*f.a->cq, 1);
    CHECK(sw[0].status == IBV_WC_REM_INV_REQ_ERR);
    // Nothing was written beyond the 100 bytes the WQE offered.
    CHECK(f.b->at(0x1000)[100] == std::byte{0});
}

TEST_CASE("a peer that never answers: retry_cnt exhausted") {
    pair_fixture f(7, 1);
    check_ok(f.qb->modify(qp_state::error, {}));
    ibv_sge s = sge(*f.a, 0, 8);
    REQUIRE(post_send(*f.qa, 1, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, f.b->addr(0), f.b->mr->rkey()) == 0);
    const auto wc = wait_wc(*f.a->cq, 1);
    CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
}

TEST_CASE("a port that is down: RC sends retry to RETRY_EXC_ERR and deliver nothing; back up, they go through") {
    pair_fixture f(7, 2);
    // The model's control file: the cable of function 0 pulled, as on a card.
    auto link = [](const char* how) {
        const std::string cmd = std::string("link ") + how;
        const int fd = ::open("/sys/bus/pci/devices/0000:c5:00.0/cxv_sim_control", O_WRONLY);
        REQUIRE(fd >= 0);
        CHECK(::write(fd, cmd.data(), cmd.size()) == static_cast<ssize_t>(cmd.size()));
        ::close(fd);
    };
    link("down");
    ibv_sge r = sge(*f.b, 0x100, 64);
    REQUIRE(post_recv(*f.qb, 10, &r, 1) == 0);
    fill(f.a->at(0), 64, 3);
    ibv_sge s = sge(*f.a, 0, 64);
    REQUIRE(post_send(*f.qa, 1, IBV_WR_SEND, &s, 1) == 0);
    const auto wc = wait_wc(*f.a->cq, 1);
    CHECK(wc[0].wr_id == 1);
    CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
    expect_no_wc(*f.b->cq);  // nothing reached the peer
    CHECK(f.b->at(0x100)[0] == std::byte{0});
    // The cable again: once the port is ACTIVE, a new pair of QPs moves the data.
    link("up");
    check_ok(f.a->dev->hca().wait_port_active(1, std::chrono::seconds(5)));
    auto qa = make_qp(*f.a, qp_type::rc, {16, 16, 2, 2, 0});
    auto qb = make_qp(*f.b, qp_type::rc, {16, 16, 2, 2, 0});
    connect_qps(*qa, *f.a, *qb, *f.b);
    ibv_sge r2 = sge(*f.b, 0x200, 64);
    REQUIRE(post_recv(*qb, 11, &r2, 1) == 0);
    REQUIRE(post_send(*qa, 2, IBV_WR_SEND, &s, 1) == 0);
    CHECK(wait_wc(*f.a->cq, 1)[0].status == IBV_WC_SUCCESS);
    CHECK(wait_wc(*f.b->cq, 1)[0].status == IBV_WC_SUCCESS);
    CHECK(std::memcmp(f.b->at(0x200), f.a->at(0), 64) == 0);
}

TEST_CASE("CQ overrun: a CQ error event, and the CQEs already written are kept") {
    auto n = make_node("0000:c5:00.0", 4);
    auto q1 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    auto q2 = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    connect_qps(*q1, *q2, *n);
    ibv_sge s = sge(*n, 0, 8);
    for (unsigned i = 0; i < 6; ++i) {
        REQUIRE(post_send(*q1, i, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, n->addr(0x1000), n->mr->rkey()) == 0);
    }
    CHECK(n->saw_event("CQ_ERROR", n->cq->object()->cqn()));
    const auto wc = wait_wc(*n->cq, 4);
    for (unsigned i = 0; i < 4; ++i) CHECK(wc[i].wr_id == i);
    expect_no_wc(*n->cq, std::chrono::milliseconds(20));
}

// The QP's BlueFlame register (both halves) in the BAR, for writing doorbells by hand.
static std::byte* bf_register(node& n, const driver::qp& o) {
    return n.dev->hca().device().bar0().base() + std::size_t{o.bf().uar} * hw::uar_page_size + o.bf().offset;
}

TEST_CASE("the device acts on a doorbell after the record, and on nothing less") {
    auto n = make_node("0000:c5:00.0");
    auto q = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    auto peer = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    connect_qps(*q, *peer, *n);
    // A signaled NOP at BB 0, written by hand.
    const auto& o = *q->object();
    auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(o.sq());
    hw::set_ctrl_seg(*ctrl, 0, hw::wqe_opcode::NOP, 0, o.qpn(), 1, hw::fm_ce_se(hw::fence_mode::none, true, false));
    auto* dbr = reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record());
    std::byte* reg = bf_register(*n, o);
    const auto doorbell = [&](std::size_t half) {
        std::uint64_t first;
        std::memcpy(&first, ctrl, 8);
        *reinterpret_cast<volatile std::uint64_t*>(reg + half) = first;
    };
    // 1. The doorbell alone: the record still says 0 WQEs.
    doorbell(0);
    expect_no_wc(*n->cq, std::chrono::milliseconds(50));
    // 2. The record alone: nothing tells the device to look.
    dbr->snd_counter = hw::be32::from(1);
    expect_no_wc(*n->cq, std::chrono::milliseconds(50));
    // 3. Both: the NOP completes.
    doorbell(o.bf().size / 2);
    ibv_wc wc;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int got = 0;
    while (got == 0 && std::chrono::steady_clock::now() < end) got = n->cq->poll(1, &wc);
    REQUIRE(got == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.qp_num == o.qpn());
}

// The model sees a BlueFlame register as memory: when the driver writes a half twice before
// the device reads it, the later bytes of the burst it missed can be read with the next
// burst's first 8. Such a copy carries an earlier WQE's control bytes (here: no CQ_UPDATE)
// and must not execute; the ring's WQE does, and its completion comes.
TEST_CASE("a BlueFlame copy carrying an earlier WQE's control bytes: the ring's WQE executes") {
    auto n = make_node("0000:c5:00.0");
    auto q = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    auto peer = make_qp(*n, qp_type::rc, {16, 16, 1, 1, 0});
    connect_qps(*q, *peer, *n);
    const auto& o = *q->object();
    auto* bb = reinterpret_cast<hw::wqe_ctrl_seg*>(o.sq());
    // NOP 0 unsignaled, NOP 1 signaled, in the ring.
    hw::set_ctrl_seg(bb[0], 0, hw::wqe_opcode::NOP, 0, o.qpn(), 1, hw::fm_ce_se(hw::fence_mode::none, false, false));
    auto* ctrl1 = reinterpret_cast<hw::wqe_ctrl_seg*>(o.sq() + hw::send_wqe_bb);
    hw::set_ctrl_seg(*ctrl1, 1, hw::wqe_opcode::NOP, 0, o.qpn(), 1, hw::fm_ce_se(hw::fence_mode::none, true, false));
    auto* dbr = reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record());
    std::byte* reg = bf_register(*n, o);
    const std::size_t other = o.bf().size / 2;
    const auto store = [&](std::size_t at, const void* from) {
        std::uint64_t v;
        std::memcpy(&v, from, 8);
        *reinterpret_cast<volatile std::uint64_t*>(reg + at) = v;
    };
    // The burst of NOP 0 in half 0, all but its first 8 bytes (those the next burst
    // overwrote before the device looked): the device sees no doorbell there.
    alignas(64) std::byte burst0[hw::send_wqe_bb] = {};
    std::memcpy(burst0, &bb[0], sizeof(hw::wqe_ctrl_seg));
    for (std::size_t q8 = 8; q8 < sizeof(burst0); q8 += 8) store(q8, burst0 + q8);
    // NOP 0 rung with an 8-byte doorbell on the other half: it executes (no completion).
    dbr->snd_counter = hw::be32::from(1);
    store(other, &bb[0]);
    expect_no_wc(*n->cq, std::chrono::milliseconds(50));
    // NOP 1's first 8 bytes in half 0: a whole-looking copy with NOP 0's flags.
    dbr->snd_counter = hw::be32::from(2);
    store(0, ctrl1);
    const auto wcs = wait_wc(*n->cq, 1);
    CHECK(wcs[0].status == IBV_WC_SUCCESS);
    CHECK(wcs[0].qp_num == o.qpn());
}
