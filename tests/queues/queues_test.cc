// queues/ on plain memory, checked against code we did not write: every send WQE our
// ring builds is compared byte for byte with the same WQE built by rdma-core's mlx5dv.h
// helpers and structures (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg,
// mlx5dv_set_dgram_seg, struct mlx5_wqe_raddr_seg ...); receive and SRQ WQEs likewise;
// CQEs laid out with struct mlx5_cqe64 and mlx5dv_set_cqe_owner are decoded by the poller.
#include <doctest/doctest.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <vector>

#include "queues/completion_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/types.h"
#include "tests/queues/expected_wqe.h"

using namespace cxv;
using namespace cxv::queues;

namespace {

using test::check_same;
using test::expected;
using test::kQpn;
using test::sq_rig;


// A CQ on `cqes` as the driver leaves a new one: every entry invalid, its owner bit 1 (the
// hardware's until the first pass writes it).
template <std::size_t N>
completion_queue fresh_cq(std::array<mlx5_cqe64, N>& cqes, hw::cq_doorbell_record& dbrec) {
    static_assert(std::has_single_bit(N));
    for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(MLX5_CQE_INVALID << 4 | 1);
    return completion_queue(reinterpret_cast<std::byte*>(cqes.data()), std::countr_zero(N), &dbrec);
}

// A CQ of N entries serving one QP: its send ring (sq_rig) and a receive ring of R
// one-segment WQEs, attached.
template <std::size_t N, std::size_t R>
struct cq_rig {
    alignas(64) std::array<mlx5_cqe64, N> cqes{};
    hw::cq_doorbell_record dbrec{};
    completion_queue cq = fresh_cq(cqes, dbrec);
    sq_rig s;
    alignas(64) std::array<std::byte, R * 16> rwqes{};
    std::array<std::uint64_t, R> rids{};
    hw::wq_doorbell_record rdb{};
    recv_queue rq{rwqes.data(), static_cast<unsigned>(std::countr_zero(R)), 4, rids.data(), &rdb};
    const qp_rings rings{kQpn, &s.sq, &rq, nullptr};
    cq_rig() { cq.attach(&rings, 1); }
    cq_rig(const cq_rig&) = delete;
    cq_rig& operator=(const cq_rig&) = delete;
};

}  // namespace

TEST_CASE("send WQEs are byte-exact with mlx5dv.h's: SEND, SEND_IMM, RDMA, atomics, inline") {
    const sge sg[3] = {{0x1000'2000'3000ull, 100, 0x1111}, {0x7fff'0000'1000ull, 4096, 0x2222}, {0x42, 1, 0x3333}};

    SUBCASE("SEND, 3 SGEs, signaled") {
        sq_rig r;
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = sg, .num_sge = 3, .wr_id = 7}));
        expected e;
        for (const auto& s : sg) mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), s.length, s.lkey, s.addr);
        e.ctrl(0, MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE);
        check_same(r.bbs.data(), e);
    }
    SUBCASE("SEND_IMM, solicited, fenced") {
        sq_rig r;
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND_IMM, .solicited = true, .fence = true, .imm = htobe32(0xabcdef01),
                          .sg = sg, .num_sge = 1}));
        expected e;
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg[0].length, sg[0].lkey, sg[0].addr);
        e.ctrl(0, MLX5_OPCODE_SEND_IMM, MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE, htobe32(0xabcdef01));
        check_same(r.bbs.data(), e);
    }
    SUBCASE("RDMA_WRITE, RDMA_WRITE_IMM and RDMA_READ") {
        for (auto [ours, theirs] : {std::pair{hw::wqe_opcode::RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE},
                                    std::pair{hw::wqe_opcode::RDMA_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM},
                                    std::pair{hw::wqe_opcode::RDMA_READ, MLX5_OPCODE_RDMA_READ}}) {
            sq_rig r;
            REQUIRE(r.sq.put({.opcode = ours, .signaled = true, .imm = 0x5a5a5a5a, .sg = sg, .num_sge = 2,
                              .remote_addr = 0xdead'beef'0000ull, .rkey = 0x77665544}));
            expected e;
            e.raddr(0xdead'beef'0000ull, 0x77665544);
            for (int i = 0; i < 2; ++i) mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg[i].length, sg[i].lkey, sg[i].addr);
            e.ctrl(0, static_cast<std::uint8_t>(theirs), MLX5_WQE_CTRL_CQ_UPDATE, 0x5a5a5a5a);
            check_same(r.bbs.data(), e);
        }
    }
    SUBCASE("ATOMIC_CS and ATOMIC_FA") {
        const sge result{0x9000, 8, 0x4444};
        sq_rig r;
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::ATOMIC_CS, .signaled = true, .sg = &result, .num_sge = 1,
                          .remote_addr = 0x10000, .rkey = 9, .compare_add = 5, .swap = 6}));
        expected e;
        e.raddr(0x10000, 9);
        e.atomic(6, 5);
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), 8, 0x4444, 0x9000);
        e.ctrl(0, MLX5_OPCODE_ATOMIC_CS, MLX5_WQE_CTRL_CQ_UPDATE);
        check_same(r.bbs.data(), e);

        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::ATOMIC_FA, .signaled = true, .sg = &result, .num_sge = 1,
                          .remote_addr = 0x10008, .rkey = 9, .compare_add = 1000}));
        expected f;
        f.raddr(0x10008, 9);
        f.atomic(1000, 0);
        mlx5dv_set_data_seg(f.next<mlx5_wqe_data_seg>(), 8, 0x4444, 0x9000);
        f.ctrl(1, MLX5_OPCODE_ATOMIC_FA, MLX5_WQE_CTRL_CQ_UPDATE);
        check_same(r.bbs.data() + 64, f);
    }
    SUBCASE("SEND of 64 inline bytes from two SGEs") {
        std::array<std::uint8_t, 64> data;
        for (int i = 0; i < 64; ++i) data[i] = static_cast<std::uint8_t>(i * 3);
        const sge two[2] = {{reinterpret_cast<std::uintptr_t>(data.data()), 40, 0},
                            {reinterpret_cast<std::uintptr_t>(data.data() + 40), 24, 0}};
        sq_rig r;
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .inline_data = true, .sg = two, .num_sge = 2}));
        expected e;
        auto* inl = e.next<mlx5_wqe_inl_data_seg>();
        inl->byte_count = htobe32(64 | MLX5_INLINE_SEG);
        std::memcpy(e.bytes.data() + e.off, data.data(), 64);
        e.off += 64;
        e.off = (e.off + 15) / 16 * 16;
        e.ctrl(0, MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE);
        check_same(r.bbs.data(), e);
        CHECK(r.ends[0] == 16 + 2);  // 16 + 4 + 64 = 84 → 96 bytes → 2 BBs (plus the ring's 16: the room limit)
    }
    SUBCASE("UD SEND with its address vector") {
        hw::wqe_av av{};
        std::uint8_t rmac[6] = {}, rgid[16] = {1, 2, 3};
        hw::set_datagram_seg(*reinterpret_cast<hw::wqe_datagram_seg*>(&av), 0x11111111, 0x345, true, 0x12, 0, 0x1f,
                             rmac, 0, 64, 0, rgid);
        sq_rig r(doorbell_mode::doorbell, true);
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = sg, .num_sge = 1, .av = &av}));
        expected e;
        mlx5dv_set_dgram_seg(e.next<mlx5_wqe_datagram_seg>(), 0x11111111ull << 32, 0x345, 1, 0x12, 0, 0x1f, rmac, 0,
                             64, 0, rgid);
        mlx5dv_set_data_seg(e.next<mlx5_wqe_data_seg>(), sg[0].length, sg[0].lkey, sg[0].addr);
        e.ctrl(0, MLX5_OPCODE_SEND, MLX5_WQE_CTRL_CQ_UPDATE);
        check_same(r.bbs.data(), e);
    }
}

TEST_CASE("doorbells: record then register; BlueFlame copies a lone WQE, alternating halves") {
    const sge sg{0x1000, 64, 1};
    sq_rig r(doorbell_mode::blueflame);
    REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1}));
    r.sq.ring();
    CHECK(r.dbrec.snd_counter.value() == 1);
    CHECK(std::memcmp(r.bf.data(), r.bbs.data(), 64) == 0);  // the whole WQE, first half
    REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1}));
    r.sq.ring();
    CHECK(std::memcmp(r.bf.data() + 256, r.bbs.data() + 64, 64) == 0);  // second half
    // Two WQEs in one batch: one record update and an 8-byte doorbell with the last.
    std::memset(r.bf.data(), 0, r.bf.size());
    REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .sg = &sg, .num_sge = 1}));
    REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1}));
    r.sq.ring();
    CHECK(r.dbrec.snd_counter.value() == 4);
    CHECK(std::memcmp(r.bf.data(), r.bbs.data() + 3 * 64, 8) == 0);
    CHECK(std::to_integer<int>(r.bf[8]) == 0);  // nothing beyond the 8 bytes

    sq_rig d(doorbell_mode::doorbell);
    REQUIRE(d.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1}));
    d.sq.ring();
    CHECK(std::memcmp(d.bf.data(), d.bbs.data(), 8) == 0);
    CHECK(std::to_integer<int>(d.bf[8]) == 0);
    // 8-byte doorbells through an uncached mapping stay in the first half (nothing
    // combines them), as Linux's mlx5e rings: the second goes where the first went.
    REQUIRE(d.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1}));
    d.sq.ring();
    CHECK(std::memcmp(d.bf.data(), d.bbs.data() + 64, 8) == 0);
    CHECK(std::all_of(d.bf.begin() + 256, d.bf.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("the send ring: full, NOP padding instead of wrapping, retire by completion") {
    const sge sg{0x1000, 64, 1};
    sq_rig r;
    // 3-BB WQEs (RC-sized gather lists) into 16 BBs: five fit, the sixth would wrap.
    const sge many[10] = {sg, sg, sg, sg, sg, sg, sg, sg, sg, sg};
    for (int i = 0; i < 5; ++i) {
        REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = i == 4, .sg = many, .num_sge = 10,
                          .wr_id = 100u + i}));
    }
    CHECK(r.sq.free_bbs() == 1);
    CHECK_FALSE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .sg = many, .num_sge = 10}));
    // The completion of the fifth (BB 12) retires all five.
    CHECK(r.sq.retire(12) == 104);
    CHECK(r.sq.free_bbs() == 16);
    // Now the next 3-BB WQE would wrap at BB 15: a 1-BB NOP pads, the WQE starts at 0.
    REQUIRE(r.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = many, .num_sge = 10, .wr_id = 200}));
    const auto* nop = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(r.bbs.data() + 15 * 64);
    CHECK((be32toh(nop->opmod_idx_opcode) & 0xff) == MLX5_OPCODE_NOP);
    CHECK((be32toh(nop->qpn_ds) & 0x3f) == 4);
    const auto* ctrl = reinterpret_cast<const mlx5_wqe_ctrl_seg*>(r.bbs.data());
    CHECK(((be32toh(ctrl->opmod_idx_opcode) >> 8) & 0xffff) == 16);  // its counter
    CHECK(r.sq.retire(16) == 200);
    CHECK(r.sq.free_bbs() == 16);
}

TEST_CASE("receive WQEs: data segments and the invalid-lkey end, byte-exact; the record") {
    alignas(64) std::array<std::byte, 8 * 64> wqes{};
    std::array<std::uint64_t, 8> ids{};
    hw::wq_doorbell_record dbrec{};
    recv_queue rq(wqes.data(), 3, 6, ids.data(), &dbrec);  // 4 SGEs per WQE
    CHECK(rq.max_sge() == 4);
    const sge sg[2] = {{0xabc0, 512, 0x10}, {0xdef0, 256, 0x20}};
    REQUIRE(rq.put(sg, 2, 55));
    rq.commit();
    std::array<std::byte, 64> e{};
    auto* d = reinterpret_cast<mlx5_wqe_data_seg*>(e.data());
    mlx5dv_set_data_seg(&d[0], 512, 0x10, 0xabc0);
    mlx5dv_set_data_seg(&d[1], 256, 0x20, 0xdef0);
    mlx5dv_set_data_seg(&d[2], 0, MLX5_INVALID_LKEY, 0);
    CHECK(std::memcmp(wqes.data(), e.data(), 48) == 0);
    CHECK(dbrec.rcv_counter.value() == 1);
    for (int i = 1; i < 8; ++i) REQUIRE(rq.put(sg, 1, 55 + i));
    CHECK_FALSE(rq.put(sg, 1, 99));  // full
    rq.commit();
    CHECK(dbrec.rcv_counter.value() == 8);
    CHECK(rq.retire() == 55);
    CHECK(rq.retire() == 56);
    CHECK(rq.posted() == 6);
    REQUIRE(rq.put(sg, 1, 63));
}

// The receive counters go to the record as a 16-bit store of its low half
// (hw::store_wq_counter); the record must read as rdma-core's mlx5 provider writes it
// (htobe32(head & 0xffff)) at every count, past the 16-bit wrap, and the constructors
// clear a reserved half that held anything.
TEST_CASE("the receive doorbell records are rdma-core's word at every count, past 16 bits") {
    alignas(64) std::array<std::byte, 8 * 16> wqes{};
    std::array<std::uint64_t, 8> ids{};
    hw::wq_doorbell_record dbrec;
    std::memset(&dbrec, 0xff, sizeof dbrec);
    recv_queue rq(wqes.data(), 3, 4, ids.data(), &dbrec);
    const sge sg{0xabc0, 512, 0x10};
    std::uint32_t posted = 0, completed = 0;
    for (unsigned round = 0; round < 16000; ++round) {  // 72 000 WQEs: past one wrap of 65 536
        const unsigned n = 1 + round % 8;
        for (unsigned i = 0; i < n; ++i) REQUIRE(rq.put(&sg, 1, posted + i));
        posted += n;
        rq.commit();
        const std::uint32_t want = htobe32(posted & 0xffff);
        REQUIRE(std::memcmp(&dbrec.rcv_counter, &want, 4) == 0);
        for (; completed != posted; ++completed) {
            if (rq.retire() != completed) FAIL("retire() of ", completed, " gave another wr_id");
        }
    }
    CHECK(posted > 0x10000);

    constexpr unsigned kCount = 8;
    alignas(64) std::array<std::byte, kCount * 32> srq_wqes{};
    for (unsigned i = 0; i < kCount; ++i) {
        reinterpret_cast<mlx5_wqe_srq_next_seg*>(srq_wqes.data() + i * 32)->next_wqe_index =
            htobe16(static_cast<std::uint16_t>((i + 1) % kCount));
    }
    std::memset(&dbrec, 0xff, sizeof dbrec);
    srq_ring srq(srq_wqes.data(), 3, 5, ids.data(), &dbrec);
    posted = 0;
    for (unsigned round = 0; round < 10000; ++round) {  // 70 000 WQEs
        std::uint32_t taken[7];
        for (unsigned i = 0; i < 7; ++i) {
            taken[i] = srq.head();
            REQUIRE(srq.put(&sg, 1, posted + i));
        }
        posted += 7;
        srq.commit();
        const std::uint32_t want = htobe32(posted & 0xffff);
        REQUIRE(std::memcmp(&dbrec.rcv_counter, &want, 4) == 0);
        for (std::uint32_t t : taken) srq.retire(static_cast<std::uint16_t>(t));
    }
}

TEST_CASE("SRQ: the free list is followed and refilled in completion order") {
    constexpr unsigned kCount = 8;
    alignas(64) std::array<std::byte, kCount * 32> wqes{};
    for (unsigned i = 0; i < kCount; ++i) {
        auto* n = reinterpret_cast<mlx5_wqe_srq_next_seg*>(wqes.data() + i * 32);
        n->next_wqe_index = htobe16(static_cast<std::uint16_t>((i + 1) % kCount));
    }
    std::array<std::uint64_t, kCount> ids{};
    hw::wq_doorbell_record dbrec{};
    srq_ring srq(wqes.data(), 3, 5, ids.data(), &dbrec);
    CHECK(srq.max_sge() == 1);
    const sge sg{0x5000, 128, 7};
    for (unsigned i = 0; i < kCount - 1; ++i) REQUIRE(srq.put(&sg, 1, i));
    CHECK_FALSE(srq.put(&sg, 1, 99));  // the sentinel stays
    srq.commit();
    CHECK(dbrec.rcv_counter.value() == kCount - 1);
    auto* d = reinterpret_cast<mlx5_wqe_data_seg*>(wqes.data() + 3 * 32 + 16);
    CHECK(be32toh(d->byte_count) == 128);
    CHECK(be64toh(d->addr) == 0x5000);
    // Completions out of order (an SRQ serves many QPs): 4 then 2 come back.
    CHECK(srq.retire(4) == 4);
    CHECK(srq.retire(2) == 2);
    // The sentinel (7) now links to 4, and 4 to 2.
    CHECK(be16toh(reinterpret_cast<mlx5_wqe_srq_next_seg*>(wqes.data() + 7 * 32)->next_wqe_index) == 4);
    CHECK(be16toh(reinterpret_cast<mlx5_wqe_srq_next_seg*>(wqes.data() + 4 * 32)->next_wqe_index) == 2);
    REQUIRE(srq.put(&sg, 1, 100));  // into 7
    REQUIRE(srq.put(&sg, 1, 101));  // into 4
    CHECK_FALSE(srq.put(&sg, 1, 102));
    CHECK(srq.retire(7) == 100);
    CHECK(srq.retire(4) == 101);
}

TEST_CASE("poll: owner parity, send/receive/immediate/error CQEs as rdma-core lays them out") {
    cq_rig<4, 4> rig;
    auto [cqes, dbrec, cq, s, rq] = std::tie(rig.cqes, rig.dbrec, rig.cq, rig.s, rig.rq);

    const sge sg{0x1000, 64, 1};
    REQUIRE(s.sq.put({.opcode = hw::wqe_opcode::RDMA_WRITE, .signaled = true, .sg = &sg, .num_sge = 1, .wr_id = 11}));
    REQUIRE(rq.put(&sg, 1, 21));
    REQUIRE(rq.put(&sg, 1, 22));
    REQUIRE(rq.put(&sg, 1, 23));

    auto write = [&](unsigned i, std::uint8_t opcode, std::uint8_t owner, std::uint16_t counter) {
        mlx5_cqe64& c = cqes[i];
        std::memset(&c, 0, sizeof c);
        c.sop_drop_qpn = htobe32(kQpn | (opcode == MLX5_CQE_REQ ? std::uint32_t{MLX5_OPCODE_RDMA_WRITE} << 24 : 0));
        c.wqe_counter = htobe16(counter);
        c.byte_cnt = htobe32(64);
        c.op_own = static_cast<std::uint8_t>(opcode << 4);
        mlx5dv_set_cqe_owner(&c, owner);
    };
    work_completion wc[8];
    CHECK(cq.poll(wc, 8) == 0);  // nothing yet (owner 1 on the first pass is the device's)
    write(0, MLX5_CQE_REQ, 0, 0);
    write(1, MLX5_CQE_RESP_SEND, 0, 0);
    write(2, MLX5_CQE_RESP_SEND_IMM, 0, 1);
    cqes[2].imm_inval_pkey = htobe32(0x01020304);
    REQUIRE(cq.poll(wc, 8) == 3);
    CHECK(wc[0].wr_id == 11);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
    CHECK(wc[0].qp_num == kQpn);
    CHECK(wc[1].wr_id == 21);
    CHECK(wc[1].opcode == IBV_WC_RECV);
    CHECK(wc[1].byte_len == 64);
    CHECK(wc[2].wr_id == 22);
    CHECK((wc[2].wc_flags & IBV_WC_WITH_IMM) != 0);
    CHECK(wc[2].imm_data == htobe32(0x01020304));
    CHECK(dbrec.update_ci.value() == 3);

    // Wrap: entry 3 on the first pass, then entry 0 on the second (owner 1).
    auto* err = reinterpret_cast<mlx5_err_cqe*>(&cqes[3]);
    write(3, MLX5_CQE_RESP_ERR, 0, 2);
    err->syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    err->vendor_err_synd = 0x77;
    err->s_wqe_opcode_qpn = htobe32(kQpn);
    CHECK(cq.poll(wc, 1) == 1);
    CHECK(wc[0].status == IBV_WC_LOC_LEN_ERR);
    CHECK(wc[0].vendor_err == ((MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR << 8) | 0x77));
    CHECK(wc[0].wr_id == 23);
    CHECK(cq.poll(wc, 1) == 0);  // entry 0 still holds the first pass's CQE (owner 0)
    write(0, MLX5_CQE_RESP_ERR, 1, 3);
    reinterpret_cast<mlx5_err_cqe*>(&cqes[0])->syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
    reinterpret_cast<mlx5_err_cqe*>(&cqes[0])->s_wqe_opcode_qpn = htobe32(kQpn);
    REQUIRE(rq.put(&sg, 1, 24));
    CHECK(cq.poll(wc, 4) == 1);
    CHECK(wc[0].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wc[0].wr_id == 24);
    CHECK(dbrec.update_ci.value() == 5);
}

TEST_CASE("poll: mixed QPs, an SRQ, an unknown QPN, errors and the wrap in one batch") {
    // poll() takes REQ and responder CQEs of the last QP it served in its fast loop and
    // hands anything else (another QP, an SRQ, an error, a batch reaching the wrap) to
    // its general loop; every entry must come out the same either way. An entry of a QPN
    // with no rings (a destroyed QP's) is taken and not reported, as rdma-core's CQs hold
    // none of a destroyed QP.
    alignas(64) std::array<mlx5_cqe64, 8> cqes{};
    hw::cq_doorbell_record dbrec{};
    completion_queue cq = fresh_cq(cqes, dbrec);

    constexpr std::uint32_t kQpnB = 0x000102;
    sq_rig a;
    alignas(64) std::array<std::byte, 8 * 16> rwqes{};
    std::array<std::uint64_t, 8> rids{};
    hw::wq_doorbell_record rdb{};
    recv_queue rq(rwqes.data(), 3, 4, rids.data(), &rdb);
    alignas(64) std::array<std::byte, 8 * 32> swqes{};
    for (unsigned i = 0; i < 8; ++i) {
        reinterpret_cast<mlx5_wqe_srq_next_seg*>(swqes.data() + i * 32)->next_wqe_index =
            htobe16(static_cast<std::uint16_t>((i + 1) % 8));
    }
    std::array<std::uint64_t, 8> sids{};
    hw::wq_doorbell_record sdb{};
    srq_ring srq(swqes.data(), 3, 5, sids.data(), &sdb);
    const std::array<qp_rings, 2> rings{{{kQpn, &a.sq, &rq, nullptr, nullptr}, {kQpnB, nullptr, nullptr, &srq, nullptr}}};
    cq.attach(rings.data(), 2);

    const sge sg{0x1000, 64, 1};
    for (std::uint64_t id = 1; id <= 3; ++id) {
        REQUIRE(a.sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1, .wr_id = id}));
    }
    for (std::uint64_t id = 11; id <= 14; ++id) REQUIRE(rq.put(&sg, 1, id));
    for (std::uint64_t id = 31; id <= 33; ++id) REQUIRE(srq.put(&sg, 1, id));

    unsigned next = 0;  // CQEs written so far: entry next % 8, owner of pass next / 8
    auto write = [&](std::uint32_t qpn, std::uint8_t opcode, std::uint16_t counter) -> mlx5_cqe64& {
        mlx5_cqe64& c = cqes[next % 8];
        std::memset(&c, 0, sizeof c);
        c.sop_drop_qpn = htobe32(qpn | (opcode == MLX5_CQE_REQ ? std::uint32_t{MLX5_OPCODE_SEND} << 24 : 0));
        c.wqe_counter = htobe16(counter);
        c.byte_cnt = htobe32(64);
        c.op_own = static_cast<std::uint8_t>(opcode << 4);
        mlx5dv_set_cqe_owner(&c, (next / 8) & 1);
        ++next;
        return c;
    };
    write(kQpn, MLX5_CQE_REQ, 0);                     // fast
    write(kQpn, MLX5_CQE_RESP_SEND, 0);               // fast
    write(kQpnB, MLX5_CQE_RESP_SEND, 0);              // SRQ: general from here on
    write(kQpn, MLX5_CQE_REQ, 1);                     // back to QP A
    write(0x777777, MLX5_CQE_RESP_SEND, 9);           // nobody's: taken, not reported
    auto& ud = write(kQpn, MLX5_CQE_RESP_SEND_IMM, 1);  // with a GRH, source QP and LID
    ud.flags_rqpn = htobe32(2u << 28 | 0x00abcd);
    ud.slid = htobe16(0x0203);
    ud.imm_inval_pkey = htobe32(0x0badcafe);
    work_completion wc[8];
    for (auto& w : wc) w.wr_id = 0xdead;
    REQUIRE(cq.poll(wc, 8) == 5);
    CHECK(wc[0].wr_id == 1);
    CHECK(wc[0].opcode == IBV_WC_SEND);
    CHECK(wc[1].wr_id == 11);
    CHECK(wc[1].opcode == IBV_WC_RECV);
    CHECK(wc[1].wc_flags == 0);
    CHECK(wc[2].wr_id == 31);
    CHECK(wc[2].qp_num == kQpnB);
    CHECK(wc[3].wr_id == 2);
    CHECK(wc[3].qp_num == kQpn);
    CHECK(wc[4].wr_id == 12);
    CHECK(wc[4].wc_flags == (IBV_WC_GRH | IBV_WC_WITH_IMM));
    CHECK(wc[4].imm_data == htobe32(0x0badcafe));
    CHECK(wc[4].src_qp == 0x00abcd);
    CHECK(wc[4].slid == 0x0203);
    CHECK(wc[5].wr_id == 0xdead);  // not written past the last completion
    CHECK(cq.consumer_index() == 6);
    CHECK(dbrec.update_ci.value() == 6);

    // A batch that reaches the wrap: entries 6, 7 (pass 0) and 0, 1 (pass 1), with an
    // error in the middle of it; the next batch starts in the fast loop on pass 1.
    write(kQpn, MLX5_CQE_RESP_SEND, 2);
    auto& e = reinterpret_cast<mlx5_err_cqe&>(write(kQpn, MLX5_CQE_REQ_ERR, 2));
    e.syndrome = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    e.vendor_err_synd = 0x11;
    e.s_wqe_opcode_qpn = htobe32(std::uint32_t{MLX5_OPCODE_SEND} << 24 | kQpn);
    write(kQpn, MLX5_CQE_RESP_SEND, 3);
    CHECK(cq.poll(wc, 8) == 3);
    CHECK(wc[0].wr_id == 13);
    CHECK(wc[1].wr_id == 3);
    CHECK(wc[1].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(wc[1].vendor_err == ((MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR << 8) | 0x11));
    CHECK(wc[2].wr_id == 14);
    CHECK(cq.consumer_index() == 9);
    CHECK(dbrec.update_ci.value() == 9);
    CHECK(cq.poll(wc, 4) == 0);  // entry 1 is still pass 0's (owner 0)
    REQUIRE(rq.put(&sg, 1, 15));
    write(kQpn, MLX5_CQE_RESP_WR_IMM, 4);
    CHECK(cq.poll(wc, 4) == 1);
    CHECK(wc[0].wr_id == 15);
    CHECK(wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    CHECK(cq.poll(wc, 0) == 0);
    CHECK(cq.poll(wc, -1) == 0);
    CHECK(cq.consumer_index() == 10);
}

TEST_CASE("poll: runs of send and receive entries in one batch, every field, each ring's room after") {
    // poll()'s loop takes a run of one kind of entry of the remembered QP at a time (its
    // ring's state in registers, stored when the run ends) and goes back to sorting at
    // a change of kind or of QP. Here the kinds alternate, the entries carry every
    // receive field with different values (flags byte: GRH presence and SL; source QP
    // and LID; immediate data), a responder's first sop_drop_qpn byte is not 0, op_own's
    // flag bits are set, and a QPN one bit away from the QP's ends a run of sends (taken,
    // not reported: nobody's).
    cq_rig<16, 8> rig;
    auto [cqes, dbrec, cq, s, rq] = std::tie(rig.cqes, rig.dbrec, rig.cq, rig.s, rig.rq);

    const sge sg{0x1000, 64, 1};
    for (std::uint64_t id = 1; id <= 4; ++id) {
        REQUIRE(s.sq.put({.opcode = id == 2 ? hw::wqe_opcode::RDMA_WRITE : hw::wqe_opcode::SEND,
                          .signaled = true, .sg = &sg, .num_sge = 1, .wr_id = id}));
    }
    for (std::uint64_t id = 11; id <= 16; ++id) REQUIRE(rq.put(&sg, 1, id));
    const unsigned send_room = s.sq.free_bbs();
    REQUIRE(rq.posted() == 6);

    unsigned next = 0;
    auto write = [&](std::uint32_t qpn, std::uint8_t opcode, std::uint16_t counter, std::uint8_t sop,
                     std::uint32_t bytes) -> mlx5_cqe64& {
        mlx5_cqe64& c = cqes[next++];
        std::memset(&c, 0, sizeof c);
        c.sop_drop_qpn = htobe32(std::uint32_t{sop} << 24 | qpn);
        c.wqe_counter = htobe16(counter);
        c.byte_cnt = htobe32(bytes);
        c.op_own = static_cast<std::uint8_t>(opcode << 4 | 0x2);  // with a flag bit (se) set
        mlx5dv_set_cqe_owner(&c, 0);
        return c;
    };
    auto recv = [&](std::uint8_t opcode, std::uint8_t flags, std::uint32_t src, std::uint16_t slid,
                    std::uint32_t imm, std::uint32_t bytes) {
        mlx5_cqe64& c = write(kQpn, opcode, 0x7777, 0x5a, bytes);  // (a receive's counter is not read)
        c.flags_rqpn = htobe32(std::uint32_t{flags} << 24 | src);
        c.slid = htobe16(slid);
        c.imm_inval_pkey = htobe32(imm);
    };
    write(kQpn, MLX5_CQE_REQ, 0, MLX5_OPCODE_SEND, 0);
    write(kQpn, MLX5_CQE_REQ, 1, MLX5_OPCODE_RDMA_WRITE, 0);
    recv(MLX5_CQE_RESP_SEND, 0x25, 0xabcdef, 0x0a0b, 0x01020304, 100);  // GRH (2), SL 5
    recv(MLX5_CQE_RESP_SEND_IMM, 0x03, 0x000001, 0xfffe, 0x11223344, 200);  // no GRH, SL 3
    recv(MLX5_CQE_RESP_WR_IMM, 0x1f, 0x800000, 0x0001, 0xa5a5a5a5, 300);  // GRH (1), SL 15
    recv(MLX5_CQE_RESP_SEND_INV, 0x30, 0x123456, 0x1234, 0x55667788, 400);  // GRH (3), SL 0
    write(kQpn, MLX5_CQE_REQ, 2, MLX5_OPCODE_SEND, 0);
    write(kQpn ^ 0x010000, MLX5_CQE_REQ, 3, MLX5_OPCODE_SEND, 0);  // nobody's, in a run of sends
    write(kQpn, MLX5_CQE_REQ, 3, MLX5_OPCODE_SEND, 0);

    work_completion wc[10];
    for (auto& w : wc) std::memset(&w, 0xee, sizeof w);
    REQUIRE(cq.poll(wc, 10) == 8);
    struct want {
        std::uint64_t wr_id;
        int opcode;
        std::uint32_t byte_len, src_qp, wc_flags;
        std::uint16_t slid;
        std::uint8_t sl;
        std::uint32_t imm;  // receives only
    };
    const want w[8] = {
        {1, IBV_WC_SEND, 0, 0, 0, 0, 0, 0},
        {2, IBV_WC_RDMA_WRITE, 0, 0, 0, 0, 0, 0},
        {11, IBV_WC_RECV, 100, 0xabcdef, IBV_WC_GRH, 0x0a0b, 5, 0},
        {12, IBV_WC_RECV, 200, 0x000001, IBV_WC_WITH_IMM, 0xfffe, 3, htobe32(0x11223344)},
        {13, IBV_WC_RECV_RDMA_WITH_IMM, 300, 0x800000, IBV_WC_GRH | IBV_WC_WITH_IMM, 0x0001, 15,
         htobe32(0xa5a5a5a5)},
        {14, IBV_WC_RECV, 400, 0x123456, IBV_WC_GRH, 0x1234, 0, 0},
        {3, IBV_WC_SEND, 0, 0, 0, 0, 0, 0},
        {4, IBV_WC_SEND, 0, 0, 0, 0, 0, 0},
    };
    for (unsigned i = 0; i < 8; ++i) {
        CAPTURE(i);
        const bool receive = w[i].wr_id > 10;
        CHECK(wc[i].wr_id == w[i].wr_id);
        CHECK(wc[i].status == IBV_WC_SUCCESS);
        CHECK(static_cast<int>(wc[i].opcode) == w[i].opcode);
        CHECK(wc[i].byte_len == w[i].byte_len);
        CHECK(wc[i].qp_num == kQpn);
        CHECK(wc[i].src_qp == w[i].src_qp);
        CHECK(wc[i].wc_flags == w[i].wc_flags);
        if (receive) {
            CHECK(wc[i].imm_data == w[i].imm);
            CHECK(wc[i].pkey_index == 0);
            CHECK(wc[i].slid == w[i].slid);
            CHECK(wc[i].sl == w[i].sl);
            CHECK(wc[i].dlid_path_bits == 0);
        }
    }
    CHECK(wc[8].wr_id == 0xeeeeeeeeeeeeeeee);  // not written past the last completion
    CHECK(cq.consumer_index() == 9);
    CHECK(dbrec.update_ci.value() == 9);
    // Each run's retirements reached its ring: every send WQE is done (its room is back),
    // four receives are, two are still posted and complete next, in order.
    CHECK(s.sq.free_bbs() == send_room + 4);
    CHECK(rq.posted() == 2);
    recv(MLX5_CQE_RESP_SEND, 0, 7, 0, 0, 1);
    recv(MLX5_CQE_RESP_SEND, 0, 8, 0, 0, 2);
    REQUIRE(cq.poll(wc, 10) == 2);
    CHECK(wc[0].wr_id == 15);
    CHECK(wc[0].src_qp == 7);
    CHECK(wc[1].wr_id == 16);
    CHECK(rq.posted() == 0);
}

TEST_CASE("poll: attach() again drops the rings it cached for a QP") {
    alignas(64) std::array<mlx5_cqe64, 4> cqes{};
    hw::cq_doorbell_record dbrec{};
    completion_queue cq = fresh_cq(cqes, dbrec);
    alignas(64) std::array<std::byte, 4 * 16> rwqes{};
    std::array<std::uint64_t, 4> rids{};
    hw::wq_doorbell_record rdb{};
    recv_queue rq(rwqes.data(), 2, 4, rids.data(), &rdb);
    std::array<qp_rings, 1> rings{{{kQpn, nullptr, &rq, nullptr, nullptr}}};
    cq.attach(rings.data(), 1);
    const sge sg{0x1000, 64, 1};
    REQUIRE(rq.put(&sg, 1, 5));
    REQUIRE(rq.put(&sg, 1, 6));
    auto write = [&](unsigned i, std::uint16_t counter) {
        mlx5_cqe64& c = cqes[i];
        std::memset(&c, 0, sizeof c);
        c.sop_drop_qpn = htobe32(kQpn);
        c.wqe_counter = htobe16(counter);
        c.op_own = static_cast<std::uint8_t>(MLX5_CQE_RESP_SEND << 4);
    };
    write(0, 0);
    work_completion wc[2];
    REQUIRE(cq.poll(wc, 2) == 1);
    CHECK(wc[0].wr_id == 5);
    CHECK(rq.posted() == 1);
    // The QP goes (its CQEs are flushed later, say): the entry loses its rings.
    rings[0] = qp_rings{kQpn, nullptr, nullptr, nullptr, nullptr};
    cq.attach(rings.data(), 1);
    write(1, 1);
    REQUIRE(cq.poll(wc, 2) == 0);  // taken, not reported: a destroyed QP's
    CHECK(cq.consumer_index() == 2);
    CHECK(rq.posted() == 1);  // the ring it had is not touched
}

TEST_CASE("our completion and gather entries are libibverbs' own layouts and codes") {
    static_assert(sizeof(work_completion) == sizeof(ibv_wc));
    static_assert(offsetof(work_completion, status) == offsetof(ibv_wc, status));
    static_assert(offsetof(work_completion, opcode) == offsetof(ibv_wc, opcode));
    static_assert(offsetof(work_completion, vendor_err) == offsetof(ibv_wc, vendor_err));
    static_assert(offsetof(work_completion, byte_len) == offsetof(ibv_wc, byte_len));
    static_assert(offsetof(work_completion, imm_data) == offsetof(ibv_wc, imm_data));
    static_assert(offsetof(work_completion, qp_num) == offsetof(ibv_wc, qp_num));
    static_assert(offsetof(work_completion, src_qp) == offsetof(ibv_wc, src_qp));
    static_assert(offsetof(work_completion, wc_flags) == offsetof(ibv_wc, wc_flags));
    static_assert(offsetof(work_completion, slid) == offsetof(ibv_wc, slid));
    static_assert(offsetof(work_completion, dlid_path_bits) == offsetof(ibv_wc, dlid_path_bits));
    static_assert(sizeof(sge) == sizeof(ibv_sge) && offsetof(sge, lkey) == offsetof(ibv_sge, lkey));
    constexpr auto u = [](auto v) { return static_cast<unsigned>(v); };
    static_assert(u(wc_loc_len_err) == u(IBV_WC_LOC_LEN_ERR) && u(wc_rem_abort_err) == u(IBV_WC_REM_ABORT_ERR) &&
                  u(wc_rnr_retry_exc_err) == u(IBV_WC_RNR_RETRY_EXC_ERR) && u(wc_general_err) == u(IBV_WC_GENERAL_ERR) &&
                  u(wc_loc_prot_err) == u(IBV_WC_LOC_PROT_ERR) && u(wc_wr_flush_err) == u(IBV_WC_WR_FLUSH_ERR) &&
                  u(wc_rem_inv_req_err) == u(IBV_WC_REM_INV_REQ_ERR) && u(wc_rem_access_err) == u(IBV_WC_REM_ACCESS_ERR));
    static_assert(u(wc_recv) == u(IBV_WC_RECV) && u(wc_recv_rdma_with_imm) == u(IBV_WC_RECV_RDMA_WITH_IMM) &&
                  u(wc_fetch_add) == u(IBV_WC_FETCH_ADD) && u(wc_comp_swap) == u(IBV_WC_COMP_SWAP) &&
                  u(wc_rdma_read) == u(IBV_WC_RDMA_READ) && wc_with_imm == u(IBV_WC_WITH_IMM) &&
                  wc_with_grh == u(IBV_WC_GRH));
    CHECK(status_of(hw::cqe_syndrome::REMOTE_ACCESS_ERR) == IBV_WC_REM_ACCESS_ERR);
    CHECK(status_of(hw::cqe_syndrome::TRANSPORT_RETRY_EXC_ERR) == IBV_WC_RETRY_EXC_ERR);
}
