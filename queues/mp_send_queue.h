// A send ring several threads post to with no lock (PRM "Send WQE", "Doorbells").
//
// Every WQE gets a slot of the same size (the QP's largest WQE, a power of two of BBs). A
// shorter WQE sits at the end of its slot behind a NOP that fills the start, so that the
// device, which walks WQEs by their sizes, never meets a gap, and so that the WQE's
// completion also means the device is past the NOP: the poller frees the whole slot.
//
// Publication passes a token along the ring: the owner of the slot at `published_` (the
// prefix of the ring whose WQEs are all written and rung) is the only thread that may
// write the doorbell record and doorbell and then advance `published_`. A producer:
//
//   1. reserves a slot with a CAS on `reserved_` if the ring has room (the poller's
//      `retired_`, acquire, says what the device is done with);
//   2. writes its WQE into the slot, concurrently with other producers' slots;
//   3. takes the token if `published_` is at its slot (acquire): the previous owner is
//      done, and every earlier WQE is written. Otherwise it leaves a done mark (its
//      slot's start counter, seq_cst) and re-reads `published_` (seq_cst): if the
//      token has reached its slot meanwhile, it claims its own mark by CAS; if not, the
//      thread that moves `published_` to its slot will find the mark and claim it;
//   4. as owner: record, doorbell (the last owned WQE's first 8 bytes), then
//      `published_` = the end of what it owns (seq_cst), which hands the token on; then
//      it reads the next slot's mark (seq_cst) and, if there is one, claims it by CAS
//      (its producer may be claiming it too: one CAS wins), with any marks after it,
//      and rings again for them.
//
// Why it holds (docs/fastpath.md, "The multi-producer ring", has the argument in full):
// exactly one thread owns the token at a time, and each owner's record and doorbell
// stores happen-before the next owner's (the hand-over is a release store read by an
// acquire load or CAS), so they reach memory in ring order and the last one written is
// the last owner's, which covers every published WQE. A mark and the hand-over are a
// store-then-load pair on each side (seq_cst on both), so at least one of the two
// threads sees the other's store and no WQE is left unpublished. Nothing waits for
// another thread: a producer preempted after reserving delays only the publication of
// the slots after its own (their producers leave marks and return).
// BlueFlame is not used here (two threads' 64-byte bursts to one register would mix).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "hw/wqe.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/send_wqe.h"
#include "queues/types.h"

namespace cxv::queues {

class mp_send_queue {
public:
    // `slot_bbs`: the QP's largest WQE in BBs, rounded up to a power of two (≤ 8);
    // `doorbell`: the QP's register (8-byte doorbells only).
    mp_send_queue(std::byte* bbs, unsigned log_bbs, std::uint32_t qpn, bool ud, unsigned slot_bbs,
                  hw::wq_doorbell_record* dbrec, std::byte* doorbell)
        : bbs_(bbs), dbrec_(dbrec), doorbell_(doorbell), bb_mask_((std::uint64_t{1} << log_bbs) - 1),
          room_(static_cast<std::int64_t>((std::uint64_t{1} << log_bbs) - slot_bbs)), slot_bbs_(slot_bbs),
          ud_(ud), done_(new std::atomic<std::uint64_t>[bb_mask_ + 1]), first_(new std::uint64_t[bb_mask_ + 1]),
          wr_ids_(new std::uint64_t[bb_mask_ + 1]) {
        for (std::size_t i = 0; i <= bb_mask_; ++i) done_[i].store(kNoMark, std::memory_order_relaxed);
        // Per opcode, the first 8 bytes of the control segment but the WQE index: the
        // opcode, the QPN, and in the size byte the octowords of the control, remote
        // address and atomic segments (the datagram and data segments are added per WQE).
        const std::uint64_t qpn_word = std::uint64_t{hw::be32::from(qpn << 8).raw} << 32;
        for (unsigned op = 0; op < 32; ++op) {
            const std::uint64_t ds = send_wqe::fixed_ds(static_cast<hw::wqe_opcode>(op), false);
            ctrl0_[op] = qpn_word | (ds << 56) | (std::uint64_t{op} << 24);
        }
    }

    // All outstanding WQEs given up (a QP reset, with no producer posting): the ring is
    // empty again, its counters at 0 as the device's are.
    void reset() noexcept {
        for (std::size_t i = 0; i <= bb_mask_; ++i) done_[i].store(kNoMark, std::memory_order_relaxed);
        reserved_.store(0, std::memory_order_relaxed);
        published_.store(0, std::memory_order_relaxed);
        retired_.store(0, std::memory_order_release);
    }

    unsigned slot_bbs() const noexcept { return slot_bbs_; }
    std::size_t slots() const noexcept { return (bb_mask_ + 1) / slot_bbs_; }

    // Points where post() calls its hook (tests stall a producer there to force each
    // interleaving; the default hook does nothing and costs nothing).
    enum class stage {
        before_token,  // the WQE is written, the token not yet looked for
        after_mark,    // the token was elsewhere: the mark is stored, published_ not re-read
        before_claim,  // as owner, about to claim the next slot's mark
    };
    struct no_hook {
        void operator()(stage) const noexcept {}
    };

    // Posts one WQE (any thread); false when the ring is full. The WQE must fit the slot
    // (the caller checks SGEs and inline size against the QP's limits).
    template <class Hook = no_hook>
    [[gnu::always_inline]] bool post(const send_request& r, const Hook& hook = Hook{}) noexcept {
        // The WQE's size in octowords, from the opcode's entry and the request.
        const auto op = static_cast<unsigned>(r.opcode) & 31;
        std::uint64_t ctrl0 = ctrl0_[op];
        const unsigned fixed = static_cast<unsigned>(ctrl0 >> 56);  // control, raddr, atomic
        const bool av = ud_ && r.av != nullptr;  // (api/ refuses a UD WR without an address handle)
        std::uint32_t total = 0;
        unsigned ds = fixed + (av ? send_wqe::datagram_ds : 0);
        // The common gather list: one SGE with bytes (an empty one is left out of the WQE).
        const bool one = r.num_sge == 1 && r.sg[0].length != 0;
        if (r.inline_data) [[unlikely]] {
            for (unsigned i = 0; i < r.num_sge; ++i) total += r.sg[i].length;
            ds += send_wqe::inline_ds(total);
        } else {
            ds += send_wqe::gather_ds(one ? 1 : send_wqe::gathered(r.sg, r.num_sge));
        }
        const unsigned pad = slot_bbs_ - (ds + 3) / 4;

        // 1. reserve. `start - retired` is negative when `start` was read before the
        // poller retired past it: stale, and the CAS fails and reloads it.
        std::uint64_t start = reserved_.load(std::memory_order_relaxed);
        do {
            if (static_cast<std::int64_t>(start - retired_.load(std::memory_order_acquire)) > room_) [[unlikely]] {
                return false;
            }
        } while (!reserved_.compare_exchange_weak(start, start + slot_bbs_, std::memory_order_relaxed,
                                                  std::memory_order_relaxed));
        const std::uint64_t end = start + slot_bbs_;
        const std::size_t slot = slot_of(start);

        // 2. write: a NOP over the start of the slot if the WQE is shorter, the WQE after it
        std::byte* w = bbs_ + (slot << hw::send_wqe_shift);
        if (pad != 0) [[unlikely]] {
            const std::uint64_t nop[2] = {(ctrl0_[0] & ~(std::uint64_t{0xff} << 56)) | index_bits(start) |
                                              (std::uint64_t{pad * 4} << 56),
                                          0};
            std::memcpy(w, nop, sizeof nop);
            w += std::size_t{pad} << hw::send_wqe_shift;
        }
        ctrl0 += (std::uint64_t{ds - fixed} << 56) | index_bits(start + pad);
        std::byte* seg = w + sizeof(hw::wqe_ctrl_seg);
        if (av) [[unlikely]] seg = send_wqe::put_datagram(seg, *r.av);
        // (fixed: 1 control only, 2 with the remote address, 3 with the atomic segment too)
        if (fixed != 1) {
            seg = send_wqe::put_raddr(seg, r.remote_addr, r.rkey);
            if (fixed == 3) [[unlikely]] seg = send_wqe::put_atomic(seg, r.opcode, r.compare_add, r.swap);
        }
        if (r.inline_data) [[unlikely]] {
            put_inline(seg, r);
        } else {
            if (one) [[likely]] {
                detail::put_data(reinterpret_cast<hw::wqe_data_seg*>(seg), r.sg[0]);
            } else {
                send_wqe::put_gather(seg, r.sg, r.num_sge);  // empty SGEs left out
            }
        }
        // The second 8 bytes: signature and DCI stream channel (0), fm_ce_se, immediate.
        const std::uint64_t ctrl1 =
            (std::uint64_t{r.imm} << 32) | (std::uint64_t{send_wqe::control(r.fence, r.signaled, r.solicited)} << 24);
        std::memcpy(w, &ctrl0, sizeof ctrl0);
        std::memcpy(w + 8, &ctrl1, sizeof ctrl1);
        wr_ids_[slot] = r.wr_id;
        hook(stage::before_token);

        // 3. the token: ours if every earlier slot is published; else a mark.
        if (published_.load(std::memory_order_acquire) != start) [[unlikely]] {
            if (!mark(slot, start, ctrl0, hook)) return true;
        }
        // 4. ring and hand on
        ring(end, ctrl0);
        if (done_[slot_of(end)].load(std::memory_order_seq_cst) == end) [[unlikely]] claim_from(end, hook);
        return true;
    }

    // The poller (one thread): a completion of the WQE at BB `wqe_counter` frees its
    // slot and every slot before it. Returns its wr_id.
    std::uint64_t retire(std::uint16_t wqe_counter) noexcept {
        const std::uint64_t base = retired_.load(std::memory_order_relaxed);
        const std::uint64_t at = base + static_cast<std::uint16_t>(wqe_counter - static_cast<std::uint16_t>(base));
        const std::uint64_t id = wr_ids_[slot_of(at & ~std::uint64_t{slot_bbs_ - 1})];
        retired_.store((at | (slot_bbs_ - 1)) + 1, std::memory_order_release);
        return id;
    }

    // The device will complete nothing more: the oldest published WQE not yet completed,
    // retired with its wr_id and WQE opcode as a flush completes it; false when none is
    // left. The poller's thread. The WQE ends its slot: a NOP before it (a WQE shorter
    // than the slot) is padding, skipped by its size (its ds, in octowords).
    bool flush_next(std::uint64_t& wr_id, std::uint8_t& opcode) noexcept {
        const std::uint64_t at = retired_.load(std::memory_order_relaxed);
        if (at >= published_.load(std::memory_order_acquire)) return false;
        std::uint64_t bb = at;
        for (;;) {
            const auto* ctrl = reinterpret_cast<const hw::wqe_ctrl_seg*>(bbs_ + (bb & bb_mask_) * hw::send_wqe_bb);
            opcode = static_cast<std::uint8_t>(ctrl->opmod_idx_opcode.value() & 0xff);
            const std::uint64_t nbb = std::max<std::uint64_t>(1, ((ctrl->qpn_ds.value() & 0x3f) + 3) / 4);
            if (opcode != static_cast<std::uint8_t>(hw::wqe_opcode::NOP) || bb + nbb >= at + slot_bbs_) break;
            bb += nbb;
        }
        wr_id = wr_ids_[slot_of(at)];
        retired_.store(at + slot_bbs_, std::memory_order_release);
        return true;
    }

    // Bytes of a request's WQE (control and every segment, inline data padded to 16).
    std::size_t wqe_bytes(const send_request& r) const noexcept {
        unsigned ds = send_wqe::fixed_ds(r.opcode, ud_ && r.av != nullptr);
        if (r.inline_data) {
            std::uint32_t total = 0;
            for (unsigned i = 0; i < r.num_sge; ++i) total += r.sg[i].length;
            ds += send_wqe::inline_ds(total);
        } else {
            ds += send_wqe::gather_ds(send_wqe::gathered(r.sg, r.num_sge));
        }
        return std::size_t{ds} * send_wqe::octoword;
    }

    std::uint64_t published() const noexcept { return published_.load(std::memory_order_acquire); }

private:
    static constexpr std::uint64_t kNoMark = ~std::uint64_t{0};  // no slot starts there

    // The per-slot arrays have an entry per BB; a slot's is at its first BB.
    std::size_t slot_of(std::uint64_t slot_start) const noexcept {
        return static_cast<std::size_t>(slot_start & bb_mask_);
    }
    // The WQE index field of the control segment's first 8 bytes (bits 23:8, big-endian).
    static std::uint64_t index_bits(std::uint64_t counter) noexcept {
        return __builtin_bswap32(static_cast<std::uint32_t>(counter & 0xffff) << 8);
    }

    // The token is not ours yet: the mark, with what an owner needs to ring for it (the
    // doorbell value; the wr_id is stored already), then the re-read. True when the
    // token reached our slot and we claimed our own mark.
    template <class Hook>
    [[gnu::noinline]] bool mark(std::size_t slot, std::uint64_t start, std::uint64_t ctrl0, const Hook& hook) noexcept {
        first_[slot] = ctrl0;
        done_[slot].store(start, std::memory_order_seq_cst);
        hook(stage::after_mark);
        if (published_.load(std::memory_order_seq_cst) != start) return false;
        std::uint64_t m = start;
        return done_[slot].compare_exchange_strong(m, kNoMark, std::memory_order_acquire, std::memory_order_relaxed);
    }

    // As owner of everything below `q`: the record, then the doorbell, then the token on.
    [[gnu::always_inline]] void ring(std::uint64_t q, std::uint64_t first) noexcept {
        hw::to_device();
        // An atomic store (a plain mov on x86-64): several threads store the record,
        // one owner at a time.
        std::atomic_ref<std::uint32_t>(dbrec_->snd_counter.raw)
            .store(hw::be32::from(static_cast<std::uint32_t>(q) & 0xffff).raw, std::memory_order_relaxed);
        hw::to_device();
        hw::mmio_window(doorbell_, 8).write64_raw_shared(0, &first);
        published_.store(q, std::memory_order_seq_cst);
    }

    // `published_` is at `q` and the slot there has a mark: claim it (its producer may
    // too), and every consecutive mark after it, ring for them, and go on while the
    // hand-over finds another mark.
    template <class Hook>
    [[gnu::noinline]] void claim_from(std::uint64_t q, const Hook& hook) noexcept {
        for (;;) {
            hook(stage::before_claim);
            std::uint64_t m = q;
            if (!done_[slot_of(q)].compare_exchange_strong(m, kNoMark, std::memory_order_acquire,
                                                           std::memory_order_relaxed)) {
                return;  // its producer claimed it: the token is its
            }
            q += slot_bbs_;
            // Later marks cannot be claimed by their producers while `published_` is
            // below them; take them now and ring once.
            while (done_[slot_of(q)].load(std::memory_order_acquire) == q) {
                m = q;
                if (!done_[slot_of(q)].compare_exchange_strong(m, kNoMark, std::memory_order_acquire,
                                                               std::memory_order_relaxed)) {
                    break;
                }
                q += slot_bbs_;
            }
            ring(q, first_[slot_of(q - slot_bbs_)]);
            if (done_[slot_of(q)].load(std::memory_order_seq_cst) != q) return;
        }
    }

    // The gather list's bytes behind an inline header (out of line: rare here).
    [[gnu::noinline]] static void put_inline(std::byte* seg, const send_request& r) noexcept {
        send_wqe::put_inline(seg, r.sg, r.num_sge);
    }

    std::byte* bbs_;
    hw::wq_doorbell_record* dbrec_;
    std::byte* doorbell_;
    std::uint64_t bb_mask_;
    std::int64_t room_;  // the ring's BBs less a slot: the most `reserved_ - retired_` before a reservation
    unsigned slot_bbs_;
    bool ud_;
    std::uint64_t ctrl0_[32];
    // Per slot, at the index of its first BB (the entries between are unused):
    std::unique_ptr<std::atomic<std::uint64_t>[]> done_;  // the start counter of a marked WQE, or kNoMark
    std::unique_ptr<std::uint64_t[]> first_;              // a marked WQE's doorbell value
    std::unique_ptr<std::uint64_t[]> wr_ids_;
    alignas(64) std::atomic<std::uint64_t> reserved_{0};
    alignas(64) std::atomic<std::uint64_t> published_{0};
    alignas(64) std::atomic<std::uint64_t> retired_{0};
};

}  // namespace cxv::queues
