// completion_queue::arm() on plain memory: the arm word in the CQ doorbell record and the
// 64-bit store to the UAR's CQ doorbell, checked against values built from rdma-core's
// mlx5dv.h constants (MLX5_CQ_DOORBELL, MLX5_CQ_DB_REQ_NOT, MLX5_CQ_DB_REQ_NOT_SOL) and
// struct mlx5_cqe64, not from hw/.
#include <doctest/doctest.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "queues/completion_queue.h"

using namespace cxv;

namespace {

constexpr std::uint32_t kCqn = 0x00abcd;

struct cq_rig {
    alignas(64) std::array<mlx5_cqe64, 8> cqes{};
    alignas(8) std::uint32_t dbrec[2] = {};  // set_ci, arm_ci (big-endian)
    alignas(64) std::array<std::byte, 4096> uar{};
    queues::completion_queue cq;
    cq_rig()
        : cq(reinterpret_cast<std::byte*>(cqes.data()), 3, reinterpret_cast<hw::cq_doorbell_record*>(dbrec),
             uar.data(), kCqn) {
        for (auto& c : cqes) c.op_own = MLX5_CQE_INVALID << 4;
    }
    // `n` good send completions of a QP the CQ does not know, taken by poll() (and not
    // reported: no QP's rings name them).
    void complete(unsigned n) {
        for (unsigned i = 0; i < n; ++i) {
            cqes[i].sop_drop_qpn = htobe32(0x77);
            cqes[i].op_own = MLX5_CQE_REQ << 4;
        }
        queues::work_completion wc[8];
        const std::uint32_t before = cq.consumer_index();
        REQUIRE(cq.poll(wc, 8) == 0);
        REQUIRE(cq.consumer_index() == before + n);
    }
    std::uint32_t record_arm() const { return be32toh(dbrec[1]); }
    std::uint64_t uar_doorbell() const {
        std::uint64_t v;
        std::memcpy(&v, uar.data() + MLX5_CQ_DOORBELL, sizeof v);
        return be64toh(v);
    }
};

std::uint32_t arm_word(std::uint32_t sn, std::uint32_t cmd, std::uint32_t ci) {
    return ((sn & 3) << 28) | cmd | (ci & 0xffffff);
}

}  // namespace

TEST_CASE("arm: the record's arm word, then the arm word and CQ number at the UAR's CQ doorbell") {
    cq_rig r;
    r.complete(3);

    r.cq.arm(false);
    CHECK(r.record_arm() == arm_word(0, MLX5_CQ_DB_REQ_NOT, 3));
    CHECK(r.uar_doorbell() == ((std::uint64_t{arm_word(0, MLX5_CQ_DB_REQ_NOT, 3)} << 32) | kCqn));
    // Only the arm half of the record and only the CQ doorbell of the UAR are written.
    CHECK(be32toh(r.dbrec[0]) == 3);
    for (std::size_t i = 0; i < r.uar.size(); ++i) {
        if (i >= MLX5_CQ_DOORBELL && i < MLX5_CQ_DOORBELL + 8) continue;
        REQUIRE(r.uar[i] == std::byte{0});
    }

    SUBCASE("solicited only, after an event: the next sequence number") {
        r.cq.on_event();
        r.cq.arm(true);
        CHECK(r.record_arm() == arm_word(1, MLX5_CQ_DB_REQ_NOT_SOL, 3));
        CHECK(r.uar_doorbell() == ((std::uint64_t{arm_word(1, MLX5_CQ_DB_REQ_NOT_SOL, 3)} << 32) | kCqn));
    }
    SUBCASE("the sequence number is two bits: five events later it is 1 again") {
        r.cq.on_event(2);
        r.cq.on_event(3);
        r.cq.arm(false);
        CHECK(r.record_arm() == arm_word(1, MLX5_CQ_DB_REQ_NOT, 3));
        CHECK(r.cq.arm_sn() == 5);
    }
}
