// The one description of a send WQE's segments by opcode (PRM "Send WQE Format": a
// control segment, then for UD the datagram segment, then the remote address segment of
// RDMA and atomic operations, the atomic segment of atomics, and last the data: gather
// entries or inline bytes). Every ring that builds send WQEs -- send_queue,
// mp_send_queue, and api/verbs_post.h's general loop -- takes from here which segments an
// opcode carries, their size in octowords (the control segment's ds field), the control
// byte's fence policy and the segment writers, so that the three cannot disagree.
//
// Everything is constexpr or inline: the rings fold it into per-QP tables at create time
// or into constants, and the fast path pays nothing for the indirection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/endian.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "queues/recv_queue.h"
#include "queues/types.h"

namespace cxv::queues::send_wqe {

// Segments are counted in octowords (16 bytes), as the control segment's ds field counts
// them (PRM "Control Segment").
inline constexpr unsigned octoword = 16;

// The datagram segment of a UD WQE, in octowords.
inline constexpr unsigned datagram_ds = sizeof(hw::wqe_datagram_seg) / octoword;

// RDMA READ/WRITE and the atomics name a remote buffer: a remote address segment.
constexpr bool has_raddr(hw::wqe_opcode op) noexcept {
    return op == hw::wqe_opcode::RDMA_WRITE || op == hw::wqe_opcode::RDMA_WRITE_IMM ||
           op == hw::wqe_opcode::RDMA_READ || op == hw::wqe_opcode::ATOMIC_CS || op == hw::wqe_opcode::ATOMIC_FA;
}
// Compare-and-swap and fetch-and-add carry their operands in an atomic segment.
constexpr bool has_atomic(hw::wqe_opcode op) noexcept {
    return op == hw::wqe_opcode::ATOMIC_CS || op == hw::wqe_opcode::ATOMIC_FA;
}
// SEND_IMM and RDMA_WRITE_IMM carry immediate data in the control segment.
constexpr bool has_imm(hw::wqe_opcode op) noexcept {
    return op == hw::wqe_opcode::SEND_IMM || op == hw::wqe_opcode::RDMA_WRITE_IMM;
}
// Inline data is data the WQE sends: not with RDMA READ or the atomics, whose local
// buffer is written by the response.
constexpr bool allows_inline(hw::wqe_opcode op) noexcept {
    return !has_atomic(op) && op != hw::wqe_opcode::RDMA_READ;
}

// Octowords of the segments before the data: control, datagram (a UD WQE with an
// address vector), remote address, atomic.
constexpr unsigned fixed_ds(hw::wqe_opcode op, bool datagram) noexcept {
    return static_cast<unsigned>((sizeof(hw::wqe_ctrl_seg) + (datagram ? datagram_ds * octoword : 0) +
                                  (has_raddr(op) ? sizeof(hw::wqe_raddr_seg) : 0) +
                                  (has_atomic(op) ? sizeof(hw::wqe_atomic_seg) : 0)) /
                                 octoword);
}
// Octowords of the data: `n` gather entries, or `total` inline bytes behind the inline
// header padded to an octoword (no segment at all when there are none).
constexpr unsigned gather_ds(unsigned n) noexcept {
    return n * static_cast<unsigned>(sizeof(hw::wqe_data_seg) / octoword);
}
// The gather entries of a list that go into the WQE: those with bytes. A data segment's
// byte_count of 0 means 2 GiB (PRM "Data Segment"), so an empty SGE is left out, as
// rdma-core's mlx5 provider leaves it.
inline unsigned gathered(const sge* sg, unsigned n) noexcept {
    unsigned k = 0;
    for (unsigned i = 0; i < n; ++i) k += sg[i].length != 0;
    return k;
}
constexpr unsigned inline_ds(std::uint32_t total) noexcept {
    return total != 0 ? (static_cast<unsigned>(sizeof(hw::wqe_inline_seg)) + total + octoword - 1) / octoword : 0;
}
static_assert(fixed_ds(hw::wqe_opcode::SEND, false) == 1 && fixed_ds(hw::wqe_opcode::RDMA_WRITE, false) == 2 &&
              fixed_ds(hw::wqe_opcode::ATOMIC_FA, false) == 3 && fixed_ds(hw::wqe_opcode::SEND, true) == 4);

// The control byte (fm_ce_se): completion and solicited event as asked; a fenced WR
// waits for earlier RDMA READs and atomics to complete (small-and-fence, as rdma-core's
// mlx5 provider asks for IBV_SEND_FENCE).
constexpr std::uint8_t control(bool fence, bool signaled, bool solicited) noexcept {
    return hw::fm_ce_se(fence ? hw::fence_mode::small_and_fence : hw::fence_mode::none, signaled, solicited);
}
// The same by send_flags bits (libibverbs' IBV_SEND_FENCE 1, IBV_SEND_SIGNALED 2,
// IBV_SEND_SOLICITED 4; api/verbs_post.h asserts the values).
inline constexpr unsigned flag_fence = 1, flag_signaled = 2, flag_solicited = 4;
inline constexpr std::array<std::uint8_t, 8> kControl = [] {
    std::array<std::uint8_t, 8> t{};
    for (unsigned f = 0; f < 8; ++f) {
        t[f] = control((f & flag_fence) != 0, (f & flag_signaled) != 0, (f & flag_solicited) != 0);
    }
    return t;
}();

// Segment writers; each returns where the next segment goes.

// The datagram segment (PRM "Datagram Segment"): the address handle's vector with the
// WR's destination QP and Q_Key.
inline hw::wqe_av with_destination(const hw::wqe_av& ah, std::uint32_t remote_qpn, std::uint32_t qkey) noexcept {
    hw::wqe_av av = ah;
    av.qkey = hw::be32::from(qkey);
    av.dqp_dct = hw::be32::from((remote_qpn & 0xffffff) | hw::extended_ud_av);
    return av;
}
inline std::byte* put_datagram(std::byte* seg, const hw::wqe_av& av) noexcept {
    std::memcpy(seg, &av, sizeof(hw::wqe_av));
    return seg + sizeof(hw::wqe_datagram_seg);
}
// PRM "Remote Address Segment": the address, the key, then 4 reserved bytes (zero). On a
// little-endian host the key and the reserved bytes are one 8-byte store: the key's
// byte swap zero-extended (one BSWAP of a 32-bit register on x86-64).
inline std::byte* put_raddr(std::byte* seg, std::uint64_t raddr, std::uint32_t rkey) noexcept {
    static_assert(offsetof(hw::wqe_raddr_seg, rkey) == 8 && offsetof(hw::wqe_raddr_seg, reserved) == 12);
    if constexpr (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
        const std::uint64_t addr = hw::to_be(raddr), key = hw::from_be_widened(rkey);
        std::memcpy(seg, &addr, sizeof(addr));
        std::memcpy(seg + 8, &key, sizeof(key));
    } else {
        hw::set_raddr_seg(*reinterpret_cast<hw::wqe_raddr_seg*>(seg), raddr, rkey);
    }
    return seg + sizeof(hw::wqe_raddr_seg);
}
// The atomic segment (PRM "Atomic Segment"): for compare-and-swap the swap value, then
// the compare value; for fetch-and-add the addend, then 0.
inline std::byte* put_atomic(std::byte* seg, hw::wqe_opcode op, std::uint64_t compare_add,
                             std::uint64_t swap) noexcept {
    const bool cs = op == hw::wqe_opcode::ATOMIC_CS;
    hw::set_atomic_seg(*reinterpret_cast<hw::wqe_atomic_seg*>(seg), cs ? swap : compare_add, cs ? compare_add : 0);
    return seg + sizeof(hw::wqe_atomic_seg);
}
// The gather list's data segments, its empty SGEs left out (gathered()).
inline std::byte* put_gather(std::byte* seg, const sge* sg, unsigned n) noexcept {
    auto* d = reinterpret_cast<hw::wqe_data_seg*>(seg);
    for (unsigned i = 0; i < n; ++i) {
        if (sg[i].length != 0) [[likely]] detail::put_data(d++, sg[i]);
    }
    return reinterpret_cast<std::byte*>(d);
}
// The gather list's bytes copied into the WQE behind an inline header, padded to an
// octoword (nothing at all when the list holds no byte).
inline std::byte* put_inline(std::byte* seg, const sge* sg, unsigned n) noexcept {
    std::uint32_t total = 0;
    std::byte* data = seg + sizeof(hw::wqe_inline_seg);
    for (unsigned i = 0; i < n; ++i) {
        std::memcpy(data + total, reinterpret_cast<const void*>(sg[i].addr), sg[i].length);
        total += sg[i].length;
    }
    if (total == 0) return seg;
    hw::set_inline_seg(*reinterpret_cast<hw::wqe_inline_seg*>(seg), total);
    return seg + std::size_t{inline_ds(total)} * octoword;
}

}  // namespace cxv::queues::send_wqe
