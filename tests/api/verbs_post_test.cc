// The man pages' rules for the verbs-shaped fast path, on rings in plain memory: a WR
// list stops at the first WR that fails, that WR comes back in bad_wr, the WRs before
// it are posted (and made visible with one record update and one doorbell), errno
// values as ibv_post_recv(3) / ibv_post_send(3) name them.
#include <doctest/doctest.h>

#include <algorithm>
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
    // The ring as an RC QP's send side: 2 SGEs, 64 bytes inline.
    api::send_side rc() { return {&sq, 2, 64, IBV_QPT_RC}; }
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

// The inlined first WR and post_rest's runs on a ring of one data segment per WQE,
// against a plain model of ibv_post_recv(3): lists of 1 to 11 WRs from every start
// (across the ring's end) with 0 to 7 WQEs outstanding, each list all good or with one
// WR the runs do not take (an empty SGE, no SGE, or two SGEs, more than the QP's one)
// at each place. Every call: the return value, bad_wr, the WQEs and wr_ids written (and
// nothing else), the producer index and the doorbell record.
TEST_CASE("ibv_post_recv on one-segment WQEs: every start, room and list, each WR as the model says") {
    constexpr unsigned kCount = 8;
    enum kind { good, empty, none, two };
    struct expect_wqe {
        std::uint32_t len, lkey;
        std::uint64_t addr;
    };
    unsigned cases = 0;
    for (unsigned start = 0; start < 2 * kCount; ++start) {
        for (unsigned pending = 0; pending < kCount; ++pending) {
            for (unsigned len = 1; len <= 11; ++len) {
                for (unsigned odd = 0; odd <= len * 3; ++odd) {  // 0: all good; else kind and place
                    const kind k = odd == 0 ? good : static_cast<kind>(1 + (odd - 1) / len);
                    const unsigned at = odd == 0 ? len : (odd - 1) % len;
                    CAPTURE(start);
                    CAPTURE(pending);
                    CAPTURE(len);
                    CAPTURE(static_cast<int>(k));
                    CAPTURE(at);
                    alignas(64) std::array<std::byte, kCount * 16> wqes{};
                    std::array<std::uint64_t, kCount> ids{};
                    hw::wq_doorbell_record dbrec{};
                    queues::recv_queue rq{wqes.data(), 3, 4, ids.data(), &dbrec};
                    REQUIRE(rq.max_sge() == 1);
                    const queues::sge filler{0x9000, 8, 9};
                    for (unsigned i = 0; i < start; ++i) {
                        REQUIRE(rq.put(&filler, 1, 0));
                        rq.retire();
                    }
                    for (unsigned i = 0; i < pending; ++i) REQUIRE(rq.put(&filler, 1, 1000 + i));
                    rq.commit();
                    std::memset(wqes.data(), 0xee, wqes.size());
                    std::fill(ids.begin(), ids.end(), 0xeeeeeeeeeeeeeeeeu);

                    std::array<ibv_sge, 11 * 2> sg{};
                    std::array<ibv_recv_wr, 11> wr{};
                    for (unsigned i = 0; i < len; ++i) {
                        sg[2 * i] = {0x100000u * (i + 1) + start, 64 + i, 0x40 + i};
                        sg[2 * i + 1] = {0x7000, 16, 7};
                        wr[i].wr_id = 500 + i;
                        wr[i].sg_list = &sg[2 * i];
                        wr[i].num_sge = 1;
                        wr[i].next = i + 1 < len ? &wr[i + 1] : nullptr;
                    }
                    if (k == empty) sg[2 * at].length = 0;
                    if (k == none) wr[at].num_sge = 0;
                    if (k == two) wr[at].num_sge = 2;

                    // The model: in order; EINVAL at more SGEs than one, ENOMEM at a full
                    // ring; an empty SGE is left out, and a WQE without a data segment
                    // gets the end mark (the invalid lkey).
                    const std::uint32_t head0 = start + pending;
                    unsigned room = kCount - pending, posted = 0;
                    int want = 0;
                    std::array<bool, kCount> touched{};
                    std::array<expect_wqe, kCount> ew{};
                    std::array<std::uint64_t, kCount> eid{};
                    for (unsigned i = 0; i < len; ++i) {
                        if (wr[i].num_sge > 1) {
                            want = EINVAL;
                            break;
                        }
                        if (room == 0) {
                            want = ENOMEM;
                            break;
                        }
                        const unsigned slot = (head0 + posted) % kCount;
                        touched[slot] = true;
                        eid[slot] = wr[i].wr_id;
                        if (wr[i].num_sge == 1 && wr[i].sg_list[0].length != 0) {
                            ew[slot] = {wr[i].sg_list[0].length, wr[i].sg_list[0].lkey, wr[i].sg_list[0].addr};
                        } else {
                            ew[slot] = {0, hw::invalid_lkey, 0};
                        }
                        ++posted;
                        --room;
                    }

                    ibv_recv_wr* bad = reinterpret_cast<ibv_recv_wr*>(0x1);
                    REQUIRE(api::post_recv(rq, wr.data(), &bad) == want);
                    if (want != 0) {
                        CHECK(bad == &wr[posted]);
                    } else {
                        CHECK(bad == reinterpret_cast<ibv_recv_wr*>(0x1));  // untouched
                    }
                    CHECK(rq.posted() == pending + posted);
                    CHECK(dbrec.rcv_counter.value() == ((head0 + posted) & 0xffff));
                    for (unsigned slot = 0; slot < kCount; ++slot) {
                        const auto* d = reinterpret_cast<const hw::wqe_data_seg*>(wqes.data() + slot * 16);
                        if (!touched[slot]) {
                            CHECK(ids[slot] == 0xeeeeeeeeeeeeeeeeu);
                            CHECK(std::all_of(wqes.begin() + slot * 16, wqes.begin() + slot * 16 + 16,
                                              [](std::byte b) { return b == std::byte{0xee}; }));
                            continue;
                        }
                        CHECK(ids[slot] == eid[slot]);
                        CHECK(d->byte_count.value() == ew[slot].len);
                        CHECK(d->lkey.value() == ew[slot].lkey);
                        CHECK(d->addr.value() == ew[slot].addr);
                    }
                    ++cases;
                }
            }
        }
    }
    CHECK(cases == 2 * kCount * kCount * 209);  // 209: the lists of 1 to 11 WRs, each 3 * len + 1 ways
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

// Links wr[0..N) into one list of one-SGE WRs with ids first, first + 1, ...
template <std::size_t N>
void chain(ibv_send_wr (&wr)[N], std::uint64_t first, ibv_sge* sg, ibv_wr_opcode op, unsigned flags) {
    for (std::size_t i = 0; i < N; ++i) {
        wr[i].wr_id = first + i;
        wr[i].sg_list = sg;
        wr[i].num_sge = 1;
        wr[i].opcode = op;
        wr[i].send_flags = flags;
        wr[i].next = i + 1 < N ? &wr[i + 1] : nullptr;
    }
}

TEST_CASE("ibv_post_send: opcodes per transport, inline limits, full ring, one doorbell") {
    sq_rig r;
    const api::send_side rc = r.rc();
    char payload[100] = {};
    ibv_sge sg{reinterpret_cast<std::uintptr_t>(payload), 64, 5};
    ibv_send_wr wr[3] = {};
    chain(wr, 0, &sg, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED);
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

    // Full: 8 BBs, 5 used. A WR of the common shapes takes exactly its BBs (three more
    // 1-BB WRs fit), the fourth is ENOMEM.
    ibv_send_wr four[4] = {};
    for (int i = 0; i < 4; ++i) {
        four[i].sg_list = &sg;
        four[i].num_sge = 1;
        four[i].opcode = IBV_WR_SEND;
        four[i].next = i < 3 ? &four[i + 1] : nullptr;
    }
    CHECK(api::post_send(rc, four, &bad) == ENOMEM);
    CHECK(bad == &four[3]);
    CHECK(r.dbrec.snd_counter.value() == 8);
    // The general path (here: an atomic) keeps room for the largest WQE (2 BBs).
    r.sq.reset();
    for (auto& w : four) w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    CHECK(api::post_send(rc, four, &bad) == 0);
    ibv_send_wr more[4] = {};
    for (int i = 0; i < 4; ++i) {
        more[i] = four[0];
        more[i].next = i < 3 ? &more[i + 1] : nullptr;
    }
    CHECK(api::post_send(rc, more, &bad) == ENOMEM);
    CHECK(bad == &more[3]);

    // A QP without gather entries takes inline data only.
    r.sq.reset();
    wr[0].opcode = IBV_WR_SEND;
    wr[0].send_flags = 0;
    CHECK(api::post_send(api::send_side{&r.sq, 0, 64, IBV_QPT_RC}, wr, &bad) == EINVAL);
    wr[0].send_flags = IBV_SEND_INLINE;
    CHECK(api::post_send(api::send_side{&r.sq, 0, 64, IBV_QPT_RC}, wr, &bad) == 0);

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

TEST_CASE("ibv_post_send: the one-pass WQEs are the general path's, byte for byte") {
    // post_send builds the common shapes (RC/UC, SEND/SEND_IMM/RDMA_WRITE(_IMM)/READ, one
    // SGE or 1..64 bytes inline) in one pass; send_queue::put (checked against
    // mlx5dv.h's builders in tests/queues) builds every WQE. They must agree.
    std::array<char, 64> payload{};
    for (unsigned i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(0x40 + i);
    const ibv_wr_opcode opcodes[] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
                                     IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ};
    const unsigned lengths[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64};
    for (const ibv_wr_opcode opcode : opcodes) {
        for (int inl = 0; inl < 2; ++inl) {
            for (const unsigned len : lengths) {
                if (inl && opcode == IBV_WR_RDMA_READ) continue;
                CAPTURE(opcode);
                CAPTURE(inl);
                CAPTURE(len);
                sq_rig fast, general;
                // A ring that held other WQEs before: a byte one path writes and the other
                // leaves alone shows.
                fast.bbs.fill(std::byte{0xa5});
                general.bbs.fill(std::byte{0xa5});
                for (int i = 0; i < 3; ++i) {  // put the WQE at BB 3: a nonzero index
                    general.sq.put({.opcode = hw::wqe_opcode::NOP});
                    fast.sq.put({.opcode = hw::wqe_opcode::NOP});
                }
                ibv_sge sg{reinterpret_cast<std::uintptr_t>(payload.data()), len, 0x1234};
                ibv_send_wr wr{};
                wr.wr_id = 77;
                wr.sg_list = &sg;
                wr.num_sge = 1;
                wr.opcode = opcode;
                wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | (inl ? IBV_SEND_INLINE : 0);
                wr.imm_data = 0x11223344;
                wr.wr.rdma.remote_addr = 0x7f0000001000 + len;
                wr.wr.rdma.rkey = 0x5678;
                ibv_send_wr* bad = nullptr;
                REQUIRE(api::post_send(api::send_side{&fast.sq, 2, 64, IBV_QPT_RC}, &wr, &bad) == 0);

                hw::wqe_opcode op{};
                REQUIRE(api::wqe_opcode_of(opcode, IBV_QPT_RC, op));
                const queues::sge qsg{sg.addr, sg.length, sg.lkey};
                queues::send_request r;
                r.opcode = op;
                r.signaled = true;
                r.solicited = true;
                r.inline_data = inl != 0;
                r.imm = wr.imm_data;
                r.sg = &qsg;
                r.num_sge = 1;
                r.remote_addr = wr.wr.rdma.remote_addr;
                r.rkey = wr.wr.rdma.rkey;
                r.wr_id = 77;
                REQUIRE(general.sq.put(r));
                general.sq.ring();
                CHECK(std::memcmp(fast.bbs.data(), general.bbs.data(), fast.bbs.size()) == 0);
                CHECK(fast.ids == general.ids);
                CHECK(fast.ends == general.ends);
                CHECK(fast.dbrec.snd_counter.value() == general.dbrec.snd_counter.value());
                CHECK(std::memcmp(fast.bf.data(), general.bf.data(), fast.bf.size()) == 0);
            }
        }
    }
}

TEST_CASE("ibv_post_send: a list mixing one-pass and general WRs; BlueFlame for a lone WQE") {
    sq_rig r;
    const api::send_side rc = r.rc();
    char payload[64] = {};
    ibv_sge sg{reinterpret_cast<std::uintptr_t>(payload), 16, 5};
    ibv_send_wr wr[4] = {};
    chain(wr, 10, &sg, IBV_WR_SEND, 0);
    wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;  // the general path from here on
    ibv_send_wr* bad = nullptr;
    REQUIRE(api::post_send(rc, wr, &bad) == 0);
    CHECK(r.dbrec.snd_counter.value() == 4);
    CHECK(r.ids[0] == 10);
    CHECK(r.ids[1] == 11);
    CHECK(r.ids[3] == 13);
    CHECK(std::memcmp(r.bf.data(), r.bbs.data() + 3 * 64, 8) == 0);  // one doorbell: the last WQE
    CHECK(std::memcmp(r.bf.data() + 256, std::array<std::byte, 8>{}.data(), 8) == 0);  // just one

    // BlueFlame: a lone 2-BB WQE is copied whole into the register half.
    alignas(64) std::array<std::byte, 8 * 64> bbs{};
    std::array<std::uint64_t, 8> ids{};
    std::array<std::uint32_t, 8> ends{};
    hw::wq_doorbell_record dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    queues::send_queue sq(bbs.data(), 3, 0x99, false, ids.data(), ends.data(), &dbrec, bf.data(), 256,
                          queues::doorbell_mode::blueflame, 2);
    sg.length = 64;
    wr[0].send_flags = IBV_SEND_INLINE;
    wr[0].next = nullptr;
    REQUIRE(api::post_send(api::send_side{&sq, 2, 64, IBV_QPT_RC}, wr, &bad) == 0);
    CHECK(dbrec.snd_counter.value() == 2);
    CHECK(std::memcmp(bf.data(), bbs.data(), 128) == 0);
    REQUIRE(api::post_send(api::send_side{&sq, 2, 64, IBV_QPT_RC}, wr, &bad) == 0);
    CHECK(std::memcmp(bf.data() + 256, bbs.data() + 128, 128) == 0);  // the other half
}

TEST_CASE("ibv_post_send: a lone WR on a full ring, across the ring's end, or refused") {
    sq_rig r;  // 8 BBs, WQEs of up to 2 BBs
    const api::send_side rc = r.rc();
    char payload[64] = {};
    ibv_sge sg{reinterpret_cast<std::uintptr_t>(payload), 64, 5};
    ibv_send_wr wr{};
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    for (int i = 0; i < 7; ++i) REQUIRE(api::post_send(rc, &wr, &bad) == 0);
    CHECK(r.dbrec.snd_counter.value() == 7);
    // 2 BBs of inline SEND do not fit the 1 BB left: ENOMEM, nothing written.
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    bad = nullptr;
    CHECK(api::post_send(rc, &wr, &bad) == ENOMEM);
    CHECK(bad == &wr);
    CHECK(r.dbrec.snd_counter.value() == 7);
    // A 1-BB WQE fits exactly; then the ring is full.
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(api::post_send(rc, &wr, &bad) == 0);
    CHECK(r.sq.free_bbs() == 0);
    bad = nullptr;
    CHECK(api::post_send(rc, &wr, &bad) == ENOMEM);
    CHECK(bad == &wr);
    CHECK(r.dbrec.snd_counter.value() == 8);

    // From BB 7 (the first seven completed), a 2-BB inline SEND would cross the ring's
    // end: the general path pads BB 7 with a NOP and puts the WQE at BB 0.
    r.sq.reset();
    for (int i = 0; i < 7; ++i) REQUIRE(api::post_send(rc, &wr, &bad) == 0);
    CHECK(r.sq.retire(6) == 0);
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    wr.wr_id = 99;
    REQUIRE(api::post_send(rc, &wr, &bad) == 0);
    CHECK(r.dbrec.snd_counter.value() == 10);
    const auto* nop = reinterpret_cast<const hw::wqe_ctrl_seg*>(r.bbs.data() + 7 * 64);
    const auto* send = reinterpret_cast<const hw::wqe_ctrl_seg*>(r.bbs.data());
    CHECK(hw::ctrl_opcode(*nop) == hw::wqe_opcode::NOP);
    CHECK(hw::ctrl_opcode(*send) == hw::wqe_opcode::SEND);
    CHECK(hw::ctrl_wqe_index(*send) == 8);
    CHECK(hw::ctrl_ds(*send) == 6);  // control, inline header and 64 bytes
    CHECK(r.ids[0] == 99);
    // One 8-byte doorbell (two WQEs, the NOP and the SEND) with the SEND's first 8
    // bytes, in the register's first half: 8-byte doorbells through an uncached mapping
    // do not alternate halves (nothing combines them), as Linux's mlx5e rings its SQs.
    CHECK(std::memcmp(r.bf.data(), r.bbs.data(), 8) == 0);
    CHECK(std::memcmp(r.bf.data() + 256, r.bbs.data(), 8) != 0);

    // Refused with EINVAL: inline data with RDMA_READ, or beyond the QP's limit.
    sq_rig e;
    wr.next = nullptr;
    wr.opcode = IBV_WR_RDMA_READ;
    bad = nullptr;
    CHECK(api::post_send(api::send_side{&e.sq, 2, 64, IBV_QPT_RC}, &wr, &bad) == EINVAL);
    CHECK(bad == &wr);
    wr.opcode = IBV_WR_SEND;
    sg.length = 33;
    bad = nullptr;
    CHECK(api::post_send(api::send_side{&e.sq, 2, 32, IBV_QPT_RC}, &wr, &bad) == EINVAL);
    CHECK(bad == &wr);
    CHECK(e.dbrec.snd_counter.value() == 0);
}

// send_fits() says, before anything is written, whether post_send would take a whole
// list: the one-pass path's exact room while it takes the WRs, the general path's from
// the first it does not. Random fill levels, retirements and lists of every shape (one-pass
// and general, 1 and 2 BBs), posted as one list and as chunks of 3.
TEST_CASE("send_fits predicts post_send taking a whole list, on every ring state tried") {
    alignas(8) static std::byte data[256] = {};
    std::uint32_t seed = 2024;
    const auto next = [&seed](unsigned n) {
        seed = seed * 1664525u + 1013904223u;
        return (seed >> 8) % n;
    };
    unsigned yes = 0, no = 0;
    for (unsigned trial = 0; trial < 3000; ++trial) {
        const unsigned chunk = trial % 2 == 0 ? 0 : 3;
        sq_rig r;  // 8 BBs, WQEs of up to 2
        const api::send_side rc = r.rc();
        ibv_sge one{reinterpret_cast<std::uint64_t>(data), 8, 0x10};
        // Fill with k one-BB SENDs (one pass, exact room), then perhaps retire them all.
        const unsigned k = next(9);
        for (unsigned i = 0; i < k; ++i) {
            ibv_send_wr w{};
            w.opcode = IBV_WR_SEND;
            w.sg_list = &one;
            w.num_sge = 1;
            ibv_send_wr* bad = nullptr;
            REQUIRE(api::post_send(rc, &w, &bad) == 0);
        }
        if (k > 0 && next(2) == 0) r.sq.retire(k - 1);
        // A list of n WRs of random shapes.
        const unsigned n = 1 + next(6);
        ibv_send_wr wrs[6]{};
        ibv_sge sg[6][2];
        for (unsigned i = 0; i < n; ++i) {
            ibv_send_wr& w = wrs[i];
            w.sg_list = sg[i];
            sg[i][0] = {reinterpret_cast<std::uint64_t>(data), 8, 0x10};
            sg[i][1] = {reinterpret_cast<std::uint64_t>(data + 64), 8, 0x10};
            w.wr.rdma = {0x1000, 0x20};
            switch (next(6)) {
            case 0: w.opcode = IBV_WR_SEND; w.num_sge = 1; break;                          // one pass, 1 BB
            case 1: w.opcode = IBV_WR_RDMA_WRITE; w.num_sge = 2; break;                    // general, 1 BB
            case 2: w.opcode = IBV_WR_RDMA_READ; w.num_sge = 1; break;                     // one pass
            case 3: w.opcode = IBV_WR_SEND; w.num_sge = 1; w.send_flags = IBV_SEND_INLINE;
                    sg[i][0].length = 60; break;                                           // one pass, 2 BBs
            case 4: w.opcode = IBV_WR_RDMA_WRITE; w.num_sge = 2; w.send_flags = IBV_SEND_INLINE;
                    sg[i][1].length = 40; break;                                           // general, 2 BBs
            default: w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; w.num_sge = 1;
                     w.wr.atomic = {0x1000, 1, 0, 0x20}; break;                             // general
            }
            w.next = i + 1 < n ? &wrs[i + 1] : nullptr;
        }
        const bool predicted = api::send_fits(rc, wrs, chunk);
        bool all = true;
        for (unsigned from = 0; from < n && all; from += chunk == 0 ? n : chunk) {
            const unsigned to = chunk == 0 ? n : std::min(n, from + chunk);
            wrs[to - 1].next = nullptr;
            ibv_send_wr* bad = nullptr;
            all = api::post_send(rc, &wrs[from], &bad) == 0;
        }
        CAPTURE(trial);
        CHECK(predicted == all);
        (predicted ? yes : no) += predicted == all;
    }
    CHECK(yes > 200);  // both answers were exercised
    CHECK(no > 200);
}
