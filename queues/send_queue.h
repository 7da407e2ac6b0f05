// The send ring of a QP (PRM "Send WQE", "Doorbells and BlueFlame"): WQEs of 64-byte
// basic blocks (BBs), each a control segment and the segments its opcode needs; the
// doorbell record's send counter; and the QP's own BlueFlame register, written either
// with the first 8 bytes of the last WQE (a plain doorbell) or with the whole WQE (a
// BlueFlame copy, which lets the device skip reading it from memory).
//
// Single producer. A WQE never wraps: when the QP's largest WQE could, NOPs fill the
// ring to its end first (unsignaled; they retire with the next signaled WQE).
//
// Ordering (hw/barrier.h): WQE stores; to_device(); record; then either to_device() and
// the 8-byte doorbell (uncached, one store), or wc_start(), the 64-byte copies and
// wc_flush() (write-combining), the halves of the register alternating so that two
// bursts never merge.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/mmio.h"
#include "hw/wqe.h"
#include "queues/recv_queue.h"
#include "queues/types.h"

namespace cxv::queues {

namespace detail {

// `n` (1..64) bytes from `src` to `dst` in a few overlapping loads and stores that
// never touch a byte outside [src, src + n) or [dst, dst + n): what memcpy does for
// small sizes, without the call.
[[gnu::always_inline]] inline void copy_small(std::byte* dst, const std::byte* src, std::uint32_t n) noexcept {
    typedef char v16 __attribute__((vector_size(16)));
    auto copy = [dst, src]<class T>(T, std::size_t at) {
        T v;
        std::memcpy(&v, src + at, sizeof(T));
        std::memcpy(dst + at, &v, sizeof(T));
    };
    if (n > 32) {
        copy(v16{}, 0);
        copy(v16{}, 16);
        copy(v16{}, n - 32);
        copy(v16{}, n - 16);
    } else if (n > 16) {
        copy(v16{}, 0);
        copy(v16{}, n - 16);
    } else if (n >= 8) {
        copy(std::uint64_t{}, 0);
        copy(std::uint64_t{}, n - 8);
    } else if (n >= 4) {
        copy(std::uint32_t{}, 0);
        copy(std::uint32_t{}, n - 4);
    } else {
        copy(std::uint8_t{}, 0);
        copy(std::uint8_t{}, n / 2);
        copy(std::uint8_t{}, n - 1);
    }
}

}  // namespace detail

enum class doorbell_mode : std::uint8_t {
    doorbell,   // 8-byte store of the last WQE's first 8 bytes (any mapping)
    blueflame,  // 64-byte stores of a one-WQE batch through a write-combining mapping
    movdir64b,  // the same as single 64-byte direct stores (CPUs that have MOVDIR64B)
};

// One send work request as the ring takes it (api/ builds it from ibv_send_wr).
struct send_request {
    hw::wqe_opcode opcode = hw::wqe_opcode::SEND;
    bool signaled = false;
    bool solicited = false;
    bool fence = false;
    bool inline_data = false;  // copy the gather list's bytes into the WQE
    std::uint32_t imm = 0;     // network byte order (SEND_IMM, RDMA_WRITE_IMM)
    const sge* sg = nullptr;
    unsigned num_sge = 0;
    std::uint64_t remote_addr = 0;  // RDMA and atomics
    std::uint32_t rkey = 0;
    std::uint64_t compare_add = 0;  // ATOMIC_CS: compare; ATOMIC_FA: add
    std::uint64_t swap = 0;         // ATOMIC_CS
    const hw::wqe_av* av = nullptr;  // UD: the destination
    std::uint64_t wr_id = 0;
};

class send_queue {
public:
    send_queue() = default;
    // `bbs`: 1 << log_bbs basic blocks; `wr_ids` and `ends`: one slot per BB (`ends`:
    // the BB counter just past the WQE that starts there, what its completion frees);
    // `bf`: the QP's BlueFlame register (two halves of `bf_half` bytes), mapped
    // uncached for `doorbell`, write-combining for `blueflame`; `max_wqe_bbs`: the
    // largest WQE the QP was sized for (driver::qp::max_send_wqebbs()).
    send_queue(std::byte* bbs, unsigned log_bbs, std::uint32_t qpn, bool ud, std::uint64_t* wr_ids,
               std::uint32_t* ends, hw::wq_doorbell_record* dbrec, std::byte* bf, std::size_t bf_half,
               doorbell_mode mode, unsigned max_wqe_bbs) noexcept
        : bbs_(bbs), wr_ids_(wr_ids), ends_(ends), dbrec_(dbrec), bf_(bf), bf_half_(bf_half),
          mask_((1u << log_bbs) - 1), qpn_shifted_(qpn << 8), max_bbs_(max_wqe_bbs), ud_(ud), mode_(mode) {}

    unsigned capacity_bbs() const noexcept { return mask_ + 1; }
    unsigned max_wqe_bbs() const noexcept { return max_bbs_; }
    unsigned free_bbs() const noexcept { return mask_ + 1 - (pi_ - ci_); }
    doorbell_mode mode() const noexcept { return mode_; }

    // Where the next WQE goes: its first byte, its ring slot and its BB counter.
    struct wqe_slot {
        std::byte* w;
        unsigned slot;
        std::uint32_t pi;
    };
    // Room for the largest WQE this QP may post (NOPs pad to the ring's end first when
    // it could wrap); false when the ring is full.
    [[gnu::always_inline]] bool reserve(wqe_slot& s) noexcept {
        std::uint32_t pi = pi_;
        const std::uint32_t mask = mask_;
        const unsigned max_bbs = max_bbs_;
        const unsigned to_end = mask + 1 - (pi & mask);
        if (mask + 1 - (pi - ci_) < max_bbs + (to_end < max_bbs ? to_end : 0)) [[unlikely]] return false;
        if (to_end < max_bbs) [[unlikely]] {
            put_nop(pi, to_end);
            pi += to_end;
        }
        s.slot = pi & mask;
        s.w = bbs_ + std::size_t{s.slot} * hw::send_wqe_bb;
        s.pi = pi;
        return true;
    }
    // The control segment of a WQE whose segments end at `end`, and the bookkeeping.
    // `fm_ce_se`: the control byte (hw::fm_ce_se); `imm`: network byte order.
    [[gnu::always_inline]] void finish(const wqe_slot& s, std::byte* end, hw::wqe_opcode op, std::uint8_t fm_ce_se,
                                       std::uint32_t imm, std::uint64_t wr_id) noexcept {
        const auto ds = static_cast<std::uint32_t>(end - s.w) / 16;
        const unsigned nbb = (ds + 3) / 4;
        auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(s.w);
        ctrl->opmod_idx_opcode = hw::be32::from(((s.pi & 0xffff) << 8) | static_cast<std::uint8_t>(op));
        ctrl->qpn_ds = hw::be32::from(qpn_shifted_ | ds);
        // signature and the DCI stream channel (0), the control byte, the immediate.
        ctrl->signature = 0;
        ctrl->dci_stream_channel_id[0] = ctrl->dci_stream_channel_id[1] = 0;
        ctrl->fm_ce_se = fm_ce_se;
        ctrl->imm = hw::be32{imm};
        wr_ids_[s.slot] = wr_id;
        ends_[s.slot] = s.pi + nbb;
        last_ = s.w;
        last_bbs_ = nbb;
        ++batch_;
        pi_ = s.pi + nbb;
    }
    bool ud() const noexcept { return ud_; }

    // Builds one WQE from a request; false when the ring has no room (nothing
    // written). The caller has checked the request against the QP's limits (SGEs,
    // inline size, opcode): the WQE then fits max_wqe_bbs.
    [[gnu::always_inline]] bool put(const send_request& r) noexcept {
        wqe_slot s;
        if (!reserve(s)) return false;
        finish(s, put_segments(s.w, r, ud_), r.opcode, control(r), r.imm, r.wr_id);
        return true;
    }

    // The common WQEs in one pass, for the fast path of api::post_send: the control
    // segment, a remote address segment when `raddr`, then one data segment, or (when
    // `Inline`) 1 to kSmallInline bytes inline. The caller has checked the opcode
    // against the QP type and the inline length against the QP's limit. False, with
    // nothing written, when the ring has no room or the WQE would cross the ring's end
    // (the general path, reserve(), pads with NOPs then).
    //
    // `wr`: an ibv_send_wr-shaped request (sg_list, wr.rdma, imm_data, wr_id), read
    // where each field is stored. The WQEs put this way are counted in `b` (in
    // registers, not in the ring) until ring(b), or adopt(b) before the general path
    // goes on.
    static constexpr unsigned kSmallInline = 64;
    struct batch {
        std::byte* last = nullptr;  // the last WQE
        unsigned last_bbs = 0;      // its size in BBs
        unsigned count = 0;         // WQEs
    };
    template <bool Inline, class Wr>
    [[gnu::always_inline]] bool put_small(const Wr& wr, hw::wqe_opcode op, std::uint8_t fm_ce_se, bool raddr,
                                          batch& b) noexcept {
        const sge& sg = *reinterpret_cast<const sge*>(wr.sg_list);
        // 16-byte units: control, remote address, then the data segment, or the inline
        // header (4 bytes) and data padded to 16; one BB without inline data.
        unsigned ds = 2 + unsigned{raddr};
        unsigned nbb = 1;
        const std::uint32_t pi = pi_;
        const std::uint32_t mask = mask_;
        const unsigned slot = pi & mask;
        if constexpr (Inline) {
            ds = 1 + unsigned{raddr} + ((sg.length + 4 + 15) >> 4);
            nbb = (ds + 3) >> 2;
            if (mask + 1 - slot < nbb) [[unlikely]] return false;
        }
        if (mask + 1 - (pi - ci_) < nbb) [[unlikely]] return false;
        std::byte* const w = bbs_ + std::size_t{slot} * hw::send_wqe_bb;
        std::byte* seg = w + sizeof(hw::wqe_ctrl_seg);
        if (raddr) seg = put_raddr(seg, wr.wr.rdma.remote_addr, wr.wr.rdma.rkey);
        if constexpr (Inline) {
            const std::uint32_t len = sg.length;
            hw::set_inline_seg(*reinterpret_cast<hw::wqe_inline_seg*>(seg), len);
            detail::copy_small(seg + sizeof(hw::wqe_inline_seg), reinterpret_cast<const std::byte*>(sg.addr), len);
        } else {
            detail::put_data(reinterpret_cast<hw::wqe_data_seg*>(seg), sg);
        }
        // PRM "Control Segment": opcode and WQE index, QPN and size, then signature and
        // DCI stream channel (0), the fm_ce_se byte and the immediate in one 8-byte word.
        auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(w);
        ctrl->opmod_idx_opcode = hw::be32::from(((pi & 0xffff) << 8) | static_cast<std::uint8_t>(op));
        ctrl->qpn_ds = hw::be32::from(qpn_shifted_ | ds);
        const std::uint64_t word = (std::uint64_t{wr.imm_data} << 32) | (std::uint32_t{fm_ce_se} << 24);
        static_assert(offsetof(hw::wqe_ctrl_seg, fm_ce_se) == 11 && offsetof(hw::wqe_ctrl_seg, imm) == 12);
        std::memcpy(w + 8, &word, sizeof(word));
        wr_ids_[slot] = wr.wr_id;
        ends_[slot] = pi + nbb;
        pi_ = pi + nbb;
        b.last = w;
        b.last_bbs = nbb;
        ++b.count;
        return true;
    }
    // Hands a batch of put_small() to the ring's own count (then put() and ring() go on).
    void adopt(const batch& b) noexcept {
        if (b.count == 0) return;
        last_ = b.last;
        last_bbs_ = b.last_bbs;
        batch_ += b.count;
    }

    // Every segment of a request's WQE after the control segment at `w`; returns the end.
    [[gnu::always_inline]] static std::byte* put_segments(std::byte* w, const send_request& r, bool ud) noexcept {
        std::byte* seg = w + sizeof(hw::wqe_ctrl_seg);
        if (ud && r.av != nullptr) {  // (api/ refuses a UD WR without an address handle)
            std::memcpy(seg, r.av, sizeof(hw::wqe_av));
            seg += sizeof(hw::wqe_datagram_seg);
        }
        const hw::wqe_opcode op = r.opcode;
        if (op == hw::wqe_opcode::RDMA_WRITE || op == hw::wqe_opcode::RDMA_WRITE_IMM ||
            op == hw::wqe_opcode::RDMA_READ || op == hw::wqe_opcode::ATOMIC_CS || op == hw::wqe_opcode::ATOMIC_FA) {
            seg = put_raddr(seg, r.remote_addr, r.rkey);
            if (op == hw::wqe_opcode::ATOMIC_CS || op == hw::wqe_opcode::ATOMIC_FA) {
                const bool cs = op == hw::wqe_opcode::ATOMIC_CS;
                seg = put_atomic(seg, cs ? r.swap : r.compare_add, cs ? r.compare_add : 0);
            }
        }
        return r.inline_data ? put_inline(seg, r.sg, r.num_sge) : put_gather(seg, r.sg, r.num_sge);
    }
    // The control byte of a request: completion, solicited event, fence (a fenced WR
    // waits for earlier RDMA READs and atomics, as rdma-core's mlx5 asks).
    static std::uint8_t control(const send_request& r) noexcept {
        return hw::fm_ce_se(r.fence ? hw::fence_mode::small_and_fence : hw::fence_mode::none, r.signaled,
                            r.solicited);
    }

    // Segment writers; each returns where the next segment goes.
    static std::byte* put_raddr(std::byte* seg, std::uint64_t raddr, std::uint32_t rkey) noexcept {
        hw::set_raddr_seg(*reinterpret_cast<hw::wqe_raddr_seg*>(seg), raddr, rkey);
        return seg + sizeof(hw::wqe_raddr_seg);
    }
    static std::byte* put_atomic(std::byte* seg, std::uint64_t swap_add, std::uint64_t compare) noexcept {
        hw::set_atomic_seg(*reinterpret_cast<hw::wqe_atomic_seg*>(seg), swap_add, compare);
        return seg + sizeof(hw::wqe_atomic_seg);
    }
    static std::byte* put_gather(std::byte* seg, const sge* sg, unsigned n) noexcept {
        auto* d = reinterpret_cast<hw::wqe_data_seg*>(seg);
        for (unsigned i = 0; i < n; ++i) detail::put_data(d + i, sg[i]);
        return seg + std::size_t{n} * sizeof(hw::wqe_data_seg);
    }
    // The gather list's bytes copied into the WQE behind an inline header, padded to 16.
    static std::byte* put_inline(std::byte* seg, const sge* sg, unsigned n) noexcept {
        std::uint32_t total = 0;
        std::byte* data = seg + sizeof(hw::wqe_inline_seg);
        for (unsigned i = 0; i < n; ++i) {
            std::memcpy(data + total, reinterpret_cast<const void*>(sg[i].addr), sg[i].length);
            total += sg[i].length;
        }
        if (total == 0) return seg;
        hw::set_inline_seg(*reinterpret_cast<hw::wqe_inline_seg*>(seg), total);
        return seg + ((sizeof(hw::wqe_inline_seg) + total + 15) & ~std::size_t{15});
    }

    // Hands every WQE put since the last ring to the device: the record, then the
    // doorbell (BlueFlame copy for a batch of one WQE that fits a register half).
    void ring() noexcept {
        ring(batch{last_, last_bbs_, batch_});
        batch_ = 0;
    }
    // The same for a batch of put_small() (nothing when it is empty).
    [[gnu::always_inline]] void ring(const batch& b) noexcept {
        if (b.count == 0) return;
        // PRM "Doorbell Record": the WQE counter after the last WQE, once the WQEs are
        // in memory; then the doorbell ("Send Doorbell"/"BlueFlame").
        hw::to_device();
        dbrec_->snd_counter = hw::be32::from(pi_ & 0xffff);
        std::byte* const reg = bf_ + bf_offset_;
        bf_offset_ ^= bf_half_;
        const doorbell_mode mode = mode_;
        if (mode != doorbell_mode::doorbell && b.count == 1 && b.last_bbs * hw::send_wqe_bb <= bf_half_) {
            blueflame(reg, b.last, b.last_bbs, mode);
        } else {
            hw::to_device();
            hw::mmio_window(reg, 8).write64_raw(0, b.last);
            if (mode != doorbell_mode::doorbell) hw::wc_flush();
        }
    }

    // A send completion for the WQE starting at BB `wqe_counter`: that WQE and every
    // unsignaled one before it are done. Returns its wr_id.
    std::uint64_t retire(std::uint32_t wqe_counter) noexcept {
        const unsigned slot = wqe_counter & mask_;
        ci_ = ends_[slot];
        return wr_ids_[slot];
    }
    void reset() noexcept { pi_ = ci_ = batch_ = 0; }

private:
    // The WQE's BBs to the BlueFlame register half `reg`, 64 bytes at a time.
    [[gnu::always_inline]] void blueflame(std::byte* reg, const std::byte* wqe, unsigned nbb,
                                          doorbell_mode mode) noexcept {
        const hw::mmio_window win(reg, bf_half_);
        hw::wc_start();
        if (mode == doorbell_mode::movdir64b) [[unlikely]] {
            for (unsigned i = 0; i < nbb; ++i) win.movdir64b(std::size_t{i} * hw::send_wqe_bb, wqe + i * hw::send_wqe_bb);
        } else {
            for (unsigned i = 0; i < nbb; ++i) win.copy64(std::size_t{i} * hw::send_wqe_bb, wqe + i * hw::send_wqe_bb);
        }
        hw::wc_flush();
    }

    void put_nop(std::uint32_t pi, unsigned nbb) noexcept {
        const unsigned slot = pi & mask_;
        auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(bbs_ + std::size_t{slot} * hw::send_wqe_bb);
        // A NOP's size field is 6 bits of octowords: a long pad is one NOP per BB.
        for (unsigned i = 0; i < nbb; ++i) {
            hw::set_ctrl_seg(ctrl[i * 4], static_cast<std::uint16_t>(pi + i), hw::wqe_opcode::NOP, 0,
                             qpn_shifted_ >> 8, 4, 0);
            wr_ids_[slot + i] = 0;
            ends_[slot + i] = pi + i + 1;
        }
        batch_ += nbb;
    }

    std::byte* bbs_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    std::uint32_t* ends_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    std::byte* bf_ = nullptr;
    std::size_t bf_half_ = 256;
    std::size_t bf_offset_ = 0;
    std::uint32_t mask_ = 0;
    std::uint32_t qpn_shifted_ = 0;
    unsigned max_bbs_ = 1;
    bool ud_ = false;
    doorbell_mode mode_ = doorbell_mode::doorbell;
    std::uint32_t pi_ = 0, ci_ = 0;
    unsigned batch_ = 0;
    std::byte* last_ = nullptr;
    unsigned last_bbs_ = 0;
};

}  // namespace cxv::queues
