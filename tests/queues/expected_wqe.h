// The WQE a test expects, built with rdma-core's mlx5dv.h helpers (an independent
// description of the layouts), the byte-for-byte comparison with ours, and the send ring
// on plain memory the tests build theirs with.
#pragma once

#include <doctest/doctest.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "queues/send_queue.h"

namespace cxv::test {

constexpr std::uint32_t kQpn = 0x1a2b3c;

// Segments are appended after the 16-byte control segment with next<T>(); ctrl() then
// writes the control segment with the size reached (zeroed first).
struct expected {
    alignas(64) std::array<std::byte, 256> bytes{};
    std::size_t off = 16;
    template <typename T>
    T* next() {
        auto* p = reinterpret_cast<T*>(bytes.data() + off);
        off += sizeof(T);
        return p;
    }
    // mlx5_wqe_raddr_seg: the remote address and key.
    void raddr(std::uint64_t addr, std::uint32_t rkey) {
        auto* ra = next<mlx5_wqe_raddr_seg>();
        ra->raddr = htobe64(addr);
        ra->rkey = htobe32(rkey);
    }
    // mlx5_wqe_atomic_seg: the swap value (compare-and-swap) or the addend (fetch-and-add),
    // then the compare value (0 for fetch-and-add).
    void atomic(std::uint64_t swap_add, std::uint64_t compare) {
        auto* at = next<mlx5_wqe_atomic_seg>();
        at->swap_add = htobe64(swap_add);
        at->compare = htobe64(compare);
    }
    void ctrl(std::uint16_t pi, std::uint8_t opcode, std::uint8_t fm_ce_se, std::uint32_t imm = 0) {
        mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(bytes.data()), pi, opcode, 0, kQpn, fm_ce_se,
                            static_cast<std::uint8_t>((off + 15) / 16), 0, imm);
    }
};

// A send ring of 16 BBs on plain memory, with a plain-memory "BlueFlame register";
// `max_bbs`: the largest WQE it is sized for.
struct sq_rig {
    alignas(64) std::array<std::byte, 16 * 64> bbs{};
    std::array<std::uint64_t, 16> wr_ids{};
    std::array<std::uint32_t, 16> ends{};
    hw::wq_doorbell_record dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    queues::send_queue sq;
    explicit sq_rig(queues::doorbell_mode mode = queues::doorbell_mode::doorbell, bool ud = false,
                    unsigned max_bbs = 4)
        : sq(bbs.data(), 4, kQpn, ud, wr_ids.data(), ends.data(), &dbrec, bf.data(), 256, mode, max_bbs) {}
};

// Our WQE at `ours` is `e`, byte for byte, over e.off bytes.
inline void check_same(const std::byte* ours, const expected& e) {
    for (std::size_t i = 0; i < e.off; ++i) {
        CAPTURE(i);
        REQUIRE(std::to_integer<int>(ours[i]) == std::to_integer<int>(e.bytes[i]));
    }
}

}  // namespace cxv::test
