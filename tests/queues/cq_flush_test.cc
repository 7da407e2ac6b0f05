// A dead device's flush (completion_queue::set_dead_flag): where poll finds no CQE, the
// WRs still posted on the CQ's QPs come back with wc_wr_flush_err, oldest first, sends
// before receives of each QP, never one twice, none already completed, and never more
// than asked for. On plain memory: no device writes a CQE here, as none would.
#include <doctest/doctest.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <thread>

#include <endian.h>

#include "queues/completion_queue.h"
#include "queues/mp_send_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/types.h"

using namespace cxv;
using namespace cxv::queues;

TEST_CASE("a dead flag makes an empty poll flush the posted WRs, in order, each once") {
    constexpr std::uint32_t qpn = 0x123;
    alignas(64) std::array<std::byte, 16 * 64> bbs{};
    std::array<std::uint64_t, 16> sq_ids{};
    std::array<std::uint32_t, 16> ends{};
    hw::wq_doorbell_record wq_dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    send_queue sq(bbs.data(), 4, qpn, false, sq_ids.data(), ends.data(), &wq_dbrec, bf.data(), 256,
                  doorbell_mode::doorbell, 4);
    alignas(64) std::array<std::byte, 8 * 16> rq_wqes{};
    std::array<std::uint64_t, 8> rq_ids{};
    recv_queue rq(rq_wqes.data(), 3, 4, rq_ids.data(), &wq_dbrec, 1);

    std::array<mlx5_cqe64, 16> cqes{};
    for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(MLX5_CQE_INVALID << 4 | 1);
    hw::cq_doorbell_record cq_dbrec{};
    completion_queue cq(reinterpret_cast<std::byte*>(cqes.data()), 4, &cq_dbrec);
    const qp_rings entry{qpn, &sq, &rq, nullptr, nullptr};
    cq.attach(&entry, 1);

    const sge sg{0x1000, 64, 0x77};
    REQUIRE(sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1, .wr_id = 10}));
    REQUIRE(sq.put({.opcode = hw::wqe_opcode::RDMA_WRITE, .sg = &sg, .num_sge = 1, .remote_addr = 0x2000, .rkey = 5,
                    .wr_id = 11}));  // unsignaled: flushed all the same
    REQUIRE(sq.put({.opcode = hw::wqe_opcode::SEND, .signaled = true, .sg = &sg, .num_sge = 1, .wr_id = 12}));
    for (std::uint64_t id : {20, 21, 22}) REQUIRE(rq.put(&sg, 1, id));
    // The first send and the first receive completed before the death (as their CQEs
    // would have retired them): they are not flushed.
    CHECK(sq.retire(0) == 10);
    CHECK(rq.retire() == 20);

    work_completion wc[8]{};
    CHECK(cq.poll(wc, 8) == 0);  // alive: an empty ring is just empty

    std::atomic<bool> dead{false};
    cq.set_dead_flag(&dead);
    CHECK(cq.poll(wc, 8) == 0);
    dead.store(true);
    // At most what is asked for per call, and the rest at the next.
    REQUIRE(cq.poll(wc, 3) == 3);
    REQUIRE(cq.poll(wc + 3, 8) == 1);
    CHECK(cq.poll(wc + 4, 8) == 0);  // nothing twice
    const std::uint64_t ids[] = {11, 12, 21, 22};
    const std::uint32_t ops[] = {wc_rdma_write, wc_send, wc_recv, wc_recv};
    for (int i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(wc[i].wr_id == ids[i]);
        CHECK(wc[i].status == wc_wr_flush_err);
        CHECK(wc[i].opcode == ops[i]);
        CHECK(wc[i].qp_num == qpn);
        CHECK(wc[i].byte_len == 0);
    }
    // The rings are empty again: room for a whole ring of new WRs.
    CHECK(rq.posted() == 0);
    CHECK(sq.free_bbs() == sq.capacity_bbs());
    // A WR posted after the death is flushed too.
    REQUIRE(rq.put(&sg, 1, 23));
    REQUIRE(cq.poll(wc, 8) == 1);
    CHECK(wc[0].wr_id == 23);
    CHECK(wc[0].status == wc_wr_flush_err);

    // A dead device not reset yet (on a card, another process still holds it open)
    // writes a good CQE for a WR already flushed, where the consumer index is: the CQ,
    // which has flushed, never takes it (it would be reported twice and retire a WQE the
    // poster owns again).
    cqes[0].sop_drop_qpn = htobe32(qpn | std::uint32_t{MLX5_OPCODE_SEND} << 24);
    cqes[0].wqe_counter = htobe16(2);
    cqes[0].byte_cnt = htobe32(64);
    cqes[0].op_own = static_cast<std::uint8_t>(MLX5_CQE_REQ << 4);  // owner bit of the first pass
    CHECK(cq.poll(wc, 1) == 0);
    CHECK(cq.poll(wc, 8) == 0);
    CHECK(cq_dbrec.update_ci.value() == 0);
}

TEST_CASE("the multi-producer ring flushes each WQE with its own opcode, past the NOP that pads a short one") {
    constexpr std::uint32_t qpn = 0x321;
    alignas(64) std::array<std::byte, 16 * 64> bbs{};
    hw::wq_doorbell_record dbrec{};
    alignas(8) std::array<std::byte, 8> doorbell{};
    // Slots of 2 BBs: a WQE of one BB sits behind a one-BB NOP.
    mp_send_queue sq(bbs.data(), 4, qpn, false, 2, &dbrec, doorbell.data());

    std::array<mlx5_cqe64, 16> cqes{};
    for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(MLX5_CQE_INVALID << 4 | 1);
    hw::cq_doorbell_record cq_dbrec{};
    completion_queue cq(reinterpret_cast<std::byte*>(cqes.data()), 4, &cq_dbrec);
    const qp_rings entry{qpn, nullptr, nullptr, nullptr, &sq};
    cq.attach(&entry, 1);

    const sge sg{0x1000, 64, 0x77};
    const std::array<sge, 5> five{sg, sg, sg, sg, sg};  // 6 octowords: the whole slot, no NOP
    REQUIRE(sq.post({.opcode = hw::wqe_opcode::RDMA_WRITE, .sg = &sg, .num_sge = 1, .remote_addr = 0x2000, .rkey = 5,
                     .wr_id = 30}));
    REQUIRE(sq.post({.opcode = hw::wqe_opcode::RDMA_READ, .sg = &sg, .num_sge = 1, .remote_addr = 0x2000, .rkey = 5,
                     .wr_id = 31}));
    REQUIRE(sq.post({.opcode = hw::wqe_opcode::SEND, .sg = five.data(), .num_sge = 5, .wr_id = 32}));
    REQUIRE(sq.post({.opcode = hw::wqe_opcode::SEND, .sg = &sg, .num_sge = 1, .wr_id = 33}));
    // The short ones are padded (the check above would be void otherwise).
    CHECK(reinterpret_cast<const hw::wqe_ctrl_seg*>(bbs.data())->opmod_idx_opcode.value() % 256 ==
          static_cast<unsigned>(hw::wqe_opcode::NOP));

    std::atomic<bool> dead{true};
    cq.set_dead_flag(&dead);
    work_completion wc[8]{};
    REQUIRE(cq.poll(wc, 8) == 4);
    const std::uint64_t ids[] = {30, 31, 32, 33};
    const std::uint32_t ops[] = {wc_rdma_write, wc_rdma_read, wc_send, wc_send};
    for (int i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(wc[i].wr_id == ids[i]);
        CHECK(wc[i].status == wc_wr_flush_err);
        CHECK(wc[i].opcode == ops[i]);
        CHECK(wc[i].qp_num == qpn);
    }
    CHECK(cq.poll(wc, 8) == 0);
}

TEST_CASE("a flush while another thread posts: every WR completes once, in order, with its opcode") {
    // The poster does not know of the death; the poller flushes. A WR whose post returned
    // is flushed by a later poll at the latest, never twice, never skipped (a stale NOP
    // read for a WQE not written yet would skip it), and with the opcode it was posted with.
    constexpr std::uint32_t qpn = 0x456;
    constexpr std::uint64_t kWrs = 200000;
    alignas(64) std::array<std::byte, 16 * 64> bbs{};
    std::array<std::uint64_t, 16> ids{};
    std::array<std::uint32_t, 16> ends{};
    hw::wq_doorbell_record wq_dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    send_queue sq(bbs.data(), 4, qpn, false, ids.data(), ends.data(), &wq_dbrec, bf.data(), 256,
                  doorbell_mode::doorbell, 2);
    std::array<mlx5_cqe64, 16> cqes{};
    for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(MLX5_CQE_INVALID << 4 | 1);
    hw::cq_doorbell_record cq_dbrec{};
    completion_queue cq(reinterpret_cast<std::byte*>(cqes.data()), 4, &cq_dbrec);
    const qp_rings entry{qpn, &sq, nullptr, nullptr, nullptr};
    cq.attach(&entry, 1);
    std::atomic<bool> dead{true};
    cq.set_dead_flag(&dead);

    std::atomic<std::uint64_t> posted{0};
    std::thread poster([&] {
        const sge sg{0x1000, 64, 0x77};
        for (std::uint64_t i = 0; i < kWrs;) {
            const bool write = i % 3 == 1;
            send_request r{.opcode = write ? hw::wqe_opcode::RDMA_WRITE : hw::wqe_opcode::SEND, .sg = &sg, .num_sge = 1,
                           .wr_id = i};
            if (write) {
                r.remote_addr = 0x2000;
                r.rkey = 5;
            }
            if (sq.put(r)) {
                ++i;
                posted.store(i, std::memory_order_release);
            }
        }
    });
    std::uint64_t next = 0, bad = 0;
    work_completion wc[8]{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (next < kWrs && std::chrono::steady_clock::now() < end) {
        const std::uint64_t before = posted.load(std::memory_order_acquire);
        const int n = cq.poll(wc, 8);
        for (int i = 0; i < n; ++i) {
            const std::uint32_t op = next % 3 == 1 ? wc_rdma_write : wc_send;
            if (wc[i].wr_id != next || wc[i].opcode != op || wc[i].status != wc_wr_flush_err) ++bad;
            ++next;
        }
        // An empty poll: every WR whose post had returned before it was flushed.
        if (n == 0 && next < before) ++bad;
    }
    poster.join();
    CHECK(next == kWrs);
    CHECK(bad == 0);
}
