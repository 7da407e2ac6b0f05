// The man pages' rules for the verbs-shaped fast path, on rings in plain memory: a WR
// list stops at the first WR that fails, that WR comes back in bad_wr, the WRs before
// it are posted (and made visible with one record update and one doorbell), errno
// values as ibv_post_recv(3) / ibv_post_send(3) name them.
#include <doctest/doctest.h>

#include <array>
#include <cstring>

#include "api/verbs_post.h"

using namespace cxv;

namespace {

struct rq_rig {
    alignas(64) std::array<std::byte, 8 * 32> wqes{};
    std::array<std::uint64_t, 8> ids{};
    hw::wq_doorbell_record dbrec{};
    queues::recv_queue rq{wqes.data(), 3, 5, ids.data(), &dbrec};  // 8 WQEs of 2 SGEs
};

struct sq_rig {
    alignas(64) std::array<std::byte, 8 * 64> bbs{};
    std::array<std::uint64_t, 8> ids{};
    std::array<std::uint32_t, 8> ends{};
    hw::wq_doorbell_record dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    queues::send_queue sq;
    explicit sq_rig(bool ud = false)
        : sq(bbs.data(), 3, 0x99, ud, ids.data(), ends.data(), &dbrec, bf.data(), 256,
             queues::doorbell_mode::doorbell, 2) {}
};

}  // namespace

TEST_CASE("ibv_post_recv: in order, stops at the first failure, earlier WRs posted") {
    rq_rig r;
    ibv_sge sg[3] = {{0x1000, 64, 1}, {0x2000, 64, 1}, {0x3000, 64, 1}};
    std::array<ibv_recv_wr, 4> wr{};
    for (int i = 0; i < 4; ++i) {
        wr[i].wr_id = 10 + i;
        wr[i].sg_list = sg;
        wr[i].num_sge = 1;
        wr[i].next = i < 3 ? &wr[i + 1] : nullptr;
    }
    wr[2].num_sge = 3;  // more than the QP's 2
    ibv_recv_wr* bad = nullptr;
    CHECK(api::post_recv(r.rq, wr.data(), &bad) == EINVAL);
    CHECK(bad == &wr[2]);
    CHECK(r.dbrec.rcv_counter.value() == 2);  // the first two are posted and visible
    CHECK(r.rq.posted() == 2);

    // Queue full: ENOMEM at the WR that does not fit.
    std::array<ibv_recv_wr, 8> more{};
    for (int i = 0; i < 8; ++i) {
        more[i].sg_list = sg;
        more[i].num_sge = 2;
        more[i].next = i < 7 ? &more[i + 1] : nullptr;
    }
    CHECK(api::post_recv(r.rq, more.data(), &bad) == ENOMEM);
    CHECK(bad == &more[6]);
    CHECK(r.dbrec.rcv_counter.value() == 8);

    // A QP whose receives come from an SRQ refuses post_recv.
    ibv_recv_wr one{};
    one.sg_list = sg;
    one.num_sge = 1;
    auto served = queues::recv_queue::srq_attached();
    CHECK(api::post_recv(served, &one, &bad) == EINVAL);
    CHECK(bad == &one);
    // An empty list posts nothing and succeeds.
    CHECK(api::post_recv(r.rq, nullptr, &bad) == 0);
}

TEST_CASE("ibv_post_srq_recv: the same rules on an SRQ") {
    alignas(64) std::array<std::byte, 4 * 32> wqes{};
    for (unsigned i = 0; i < 4; ++i) {
        reinterpret_cast<hw::wqe_srq_next_seg*>(wqes.data() + i * 32)->next_wqe_index =
            hw::be16::from(static_cast<std::uint16_t>((i + 1) % 4));
    }
    std::array<std::uint64_t, 4> ids{};
    hw::wq_doorbell_record dbrec{};
    queues::srq_ring srq(wqes.data(), 2, 5, ids.data(), &dbrec);
    ibv_sge sg{0x1000, 64, 1};
    std::array<ibv_recv_wr, 4> wr{};
    for (int i = 0; i < 4; ++i) {
        wr[i].sg_list = &sg;
        wr[i].num_sge = 1;
        wr[i].next = i < 3 ? &wr[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    CHECK(api::post_srq_recv(srq, wr.data(), &bad) == ENOMEM);  // 3 fit (one sentinel)
    CHECK(bad == &wr[3]);
    CHECK(dbrec.rcv_counter.value() == 3);
}

TEST_CASE("ibv_post_send: opcodes per transport, inline limits, full ring, one doorbell") {
    sq_rig r;
    const api::send_side rc{&r.sq, 2, 64, IBV_QPT_RC};
    char payload[100] = {};
    ibv_sge sg{reinterpret_cast<std::uintptr_t>(payload), 64, 5};
    ibv_send_wr wr[3] = {};
    for (int i = 0; i < 3; ++i) {
        wr[i].wr_id = i;
        wr[i].sg_list = &sg;
        wr[i].num_sge = 1;
        wr[i].opcode = IBV_WR_RDMA_WRITE;
        wr[i].send_flags = IBV_SEND_SIGNALED;
        wr[i].next = i < 2 ? &wr[i + 1] : nullptr;
    }
    wr[1].opcode = IBV_WR_SEND;
    wr[1].send_flags |= IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    REQUIRE(api::post_send(rc, wr, &bad) == 0);
    CHECK(r.dbrec.snd_counter.value() == 4);  // 1 + 2 (inline 64 bytes) + 1 BBs
    CHECK(std::memcmp(r.bf.data(), r.bbs.data() + 3 * 64, 8) == 0);  // doorbell: the last WQE

    // Inline beyond the limit, and an opcode UC or UD does not have: EINVAL at that WR.
    sg.length = 100;
    wr[0].opcode = IBV_WR_SEND;
    wr[0].send_flags = IBV_SEND_INLINE;
    wr[0].next = nullptr;
    CHECK(api::post_send(rc, wr, &bad) == EINVAL);
    CHECK(bad == &wr[0]);
    sg.length = 8;
    wr[0].send_flags = 0;
    wr[0].opcode = IBV_WR_RDMA_READ;
    CHECK(api::post_send(api::send_side{&r.sq, 2, 64, IBV_QPT_UC}, wr, &bad) == EINVAL);
    wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    CHECK(api::post_send(rc, wr, &bad) == 0);

    // Full: 8 BBs, 5 used, room kept for the largest WQE (2 BBs): two more 1-BB WRs
    // fit, the third is ENOMEM.
    ibv_send_wr four[4] = {};
    for (int i = 0; i < 4; ++i) {
        four[i].sg_list = &sg;
        four[i].num_sge = 1;
        four[i].opcode = IBV_WR_SEND;
        four[i].next = i < 3 ? &four[i + 1] : nullptr;
    }
    CHECK(api::post_send(rc, four, &bad) == ENOMEM);
    CHECK(bad == &four[2]);
    CHECK(r.dbrec.snd_counter.value() == 7);

    // UD: SEND only, and an address handle is required.
    sq_rig u(true);
    const api::send_side ud{&u.sq, 1, 0, IBV_QPT_UD};
    ibv_send_wr s{};
    s.sg_list = &sg;
    s.num_sge = 1;
    s.opcode = IBV_WR_SEND;
    CHECK(api::post_send(ud, &s, &bad) == EINVAL);  // no AH
    api::address_handle ah{};
    s.wr.ud.ah = &ah.base;
    CHECK(api::post_send(ud, &s, &bad) == 0);
    s.opcode = IBV_WR_RDMA_WRITE;
    CHECK(api::post_send(ud, &s, &bad) == EINVAL);
}
