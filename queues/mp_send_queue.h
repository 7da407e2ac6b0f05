// A send ring several threads post to with no lock (PRM "Send WQE", "Doorbells").
//
// Every WQE gets a slot of the same size (the QP's largest WQE, a power of two of BBs). A
// shorter WQE sits at the end of its slot behind a NOP that fills the start, so that the
// device, which walks WQEs by their sizes, never meets a gap, and so that the WQE's
// completion also means the device is past the NOP: the poller frees the whole slot.
// Then:
//
//   1. reserve: a CAS on `reserved_` claims the next slot if the ring has room (the
//      poller's retired_ counter, read with acquire, says what the device is done with);
//   2. write: the WQE goes into the slot, concurrently with other producers' slots;
//   3. mark: done[slot] = the slot's end counter (release) — unique per lap, so a stale
//      mark from the previous lap never matches;
//   4. publish: `published_` (the prefix of the ring whose WQEs are all written) is
//      advanced by CAS over every consecutive done mark, by whichever producer finds
//      them: a producer that finishes before an earlier one leaves its WQE to be
//      published by that one;
//   5. ring: a producer that advanced `published_` writes the doorbell record and the
//      8-byte doorbell with the last published WQE's first 8 bytes, then re-reads
//      `published_` and writes again until it did not move — so the last record and
//      doorbell written always cover every published WQE, whatever order threads' stores
//      land in ("the doorbell is never behind a posted WQE").
//
// Memory ordering: the WQE stores happen-before the done mark (release); the publisher
// reads the mark with acquire, so the WQE is visible to it before it writes the record;
// to_device() orders the record before the MMIO doorbell as in the single-producer ring.
// No step waits for another thread: a producer preempted after reserving delays only
// the publication of slots after its own, never another producer's progress.
// BlueFlame is not used here (two threads' 64-byte bursts to one register would mix).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "hw/wqe.h"
#include "queues/send_queue.h"
#include "queues/types.h"

namespace cxv::queues {

class mp_send_queue {
public:
    // `slot_bbs`: the QP's largest WQE in BBs, rounded up to a power of two (≤ 8);
    // `doorbell`: the QP's register (8-byte doorbells only).
    mp_send_queue(std::byte* bbs, unsigned log_bbs, std::uint32_t qpn, bool ud, unsigned slot_bbs,
                  hw::wq_doorbell_record* dbrec, std::byte* doorbell)
        : bbs_(bbs), dbrec_(dbrec), doorbell_(doorbell), log_bbs_(log_bbs), qpn_(qpn), ud_(ud),
          slot_bbs_(slot_bbs), slots_((std::size_t{1} << log_bbs) / slot_bbs),
          done_(new std::atomic<std::uint64_t>[slots_]), first_(new std::atomic<std::uint64_t>[slots_]),
          wr_ids_(new std::uint64_t[slots_]) {
        for (std::size_t i = 0; i < slots_; ++i) done_[i].store(~std::uint64_t{0}, std::memory_order_relaxed);
    }

    unsigned slot_bbs() const noexcept { return slot_bbs_; }
    std::size_t slots() const noexcept { return slots_; }

    // Posts one WQE (any thread); false when the ring is full.
    bool post(const send_request& r) noexcept {
        // 1. reserve
        std::uint64_t start = reserved_.load(std::memory_order_relaxed);
        const std::uint64_t capacity = std::uint64_t{1} << log_bbs_;
        do {
            if (start + slot_bbs_ - retired_.load(std::memory_order_acquire) > capacity) return false;
        } while (!reserved_.compare_exchange_weak(start, start + slot_bbs_, std::memory_order_relaxed));
        const std::uint64_t end = start + slot_bbs_;
        const std::size_t slot = static_cast<std::size_t>(start / slot_bbs_) & (slots_ - 1);
        // 2. write: a NOP over the start of the slot if the WQE is shorter, the WQE after it
        const unsigned nbb = static_cast<unsigned>((wqe_bytes(r) + hw::send_wqe_bb - 1) / hw::send_wqe_bb);
        const unsigned pad = slot_bbs_ - nbb;
        std::byte* const slot_start = bbs_ + (start & (capacity - 1)) * hw::send_wqe_bb;
        if (pad != 0) {
            hw::set_ctrl_seg(*reinterpret_cast<hw::wqe_ctrl_seg*>(slot_start), static_cast<std::uint16_t>(start),
                             hw::wqe_opcode::NOP, 0, qpn_, static_cast<std::uint8_t>(pad * 4), 0);
        }
        const std::uint64_t at = start + pad;
        std::byte* w = slot_start + std::size_t{pad} * hw::send_wqe_bb;
        const std::byte* seg = send_queue::put_segments(w, r, ud_);
        const auto ds = static_cast<std::uint32_t>(seg - w) / 16;
        hw::set_ctrl_seg(*reinterpret_cast<hw::wqe_ctrl_seg*>(w), static_cast<std::uint16_t>(at), r.opcode, 0, qpn_,
                         static_cast<std::uint8_t>(ds), send_queue::control(r), hw::be32{r.imm});
        wr_ids_[slot] = r.wr_id;
        // The doorbell value of this WQE, kept apart: by the time a publisher rings, the
        // slot itself may already hold a later lap's WQE being written.
        std::uint64_t first;
        std::memcpy(&first, w, sizeof(first));
        first_[slot].store(first, std::memory_order_relaxed);
        // 3. mark
        done_[slot].store(end, std::memory_order_release);
        // 4. publish
        bool advanced = false;
        std::uint64_t p = published_.load(std::memory_order_acquire);
        for (;;) {
            std::uint64_t q = p;
            while (done_[static_cast<std::size_t>(q / slot_bbs_) & (slots_ - 1)].load(std::memory_order_acquire) ==
                   q + slot_bbs_) {
                q += slot_bbs_;
            }
            if (q == p) break;  // nothing more is ready (an earlier WQE is still being written)
            if (published_.compare_exchange_weak(p, q, std::memory_order_acq_rel, std::memory_order_acquire)) {
                advanced = true;
                p = q;
            }
        }
        // 5. ring
        if (advanced) ring();
        return true;
    }

    // The poller (one thread): a completion of the WQE at BB `wqe_counter` frees its
    // slot and every slot before it. Returns its wr_id.
    std::uint64_t retire(std::uint16_t wqe_counter) noexcept {
        const std::uint64_t base = retired_.load(std::memory_order_relaxed);
        const std::uint64_t at = base + static_cast<std::uint16_t>(wqe_counter - static_cast<std::uint16_t>(base));
        const std::uint64_t slot_start = at / slot_bbs_ * slot_bbs_;
        const std::uint64_t id = wr_ids_[static_cast<std::size_t>(at / slot_bbs_) & (slots_ - 1)];
        retired_.store(slot_start + slot_bbs_, std::memory_order_release);
        return id;
    }

    // Bytes of a request's WQE (control and every segment, inline data padded to 16).
    std::size_t wqe_bytes(const send_request& r) const noexcept {
        std::size_t n = sizeof(hw::wqe_ctrl_seg) + (ud_ ? sizeof(hw::wqe_datagram_seg) : 0);
        const hw::wqe_opcode op = r.opcode;
        if (op == hw::wqe_opcode::RDMA_WRITE || op == hw::wqe_opcode::RDMA_WRITE_IMM || op == hw::wqe_opcode::RDMA_READ) {
            n += sizeof(hw::wqe_raddr_seg);
        } else if (op == hw::wqe_opcode::ATOMIC_CS || op == hw::wqe_opcode::ATOMIC_FA) {
            n += sizeof(hw::wqe_raddr_seg) + sizeof(hw::wqe_atomic_seg);
        }
        if (r.inline_data) {
            std::size_t total = 0;
            for (unsigned i = 0; i < r.num_sge; ++i) total += r.sg[i].length;
            return n + (total ? (sizeof(hw::wqe_inline_seg) + total + 15) / 16 * 16 : 0);
        }
        return n + std::size_t{r.num_sge} * sizeof(hw::wqe_data_seg);
    }

    std::uint64_t published() const noexcept { return published_.load(std::memory_order_acquire); }

private:
    void ring() noexcept {
        std::uint64_t v = published_.load(std::memory_order_acquire);
        for (;;) {
            hw::to_device();
            // Several producers store the record: an atomic store (a plain mov on x86-64)
            // so that the last one wins by the language's rules too.
            std::atomic_ref<std::uint32_t>(dbrec_->snd_counter.raw)
                .store(hw::be32::from(static_cast<std::uint32_t>(v) & 0xffff).raw, std::memory_order_relaxed);
            hw::to_device();
            // The first 8 bytes of the last published WQE (the last slot's, after its NOP).
            const std::uint64_t first =
                first_[static_cast<std::size_t>((v - slot_bbs_) / slot_bbs_) & (slots_ - 1)].load(std::memory_order_relaxed);
            hw::mmio_window(doorbell_, 8).write64_raw_shared(0, &first);
            const std::uint64_t now = published_.load(std::memory_order_acquire);
            if (now == v) return;
            v = now;
        }
    }

    std::byte* bbs_;
    hw::wq_doorbell_record* dbrec_;
    std::byte* doorbell_;
    unsigned log_bbs_;
    std::uint32_t qpn_;
    bool ud_;
    unsigned slot_bbs_;
    std::size_t slots_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> done_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> first_;  // per slot: its WQE's doorbell value
    std::unique_ptr<std::uint64_t[]> wr_ids_;
    alignas(64) std::atomic<std::uint64_t> reserved_{0};
    alignas(64) std::atomic<std::uint64_t> published_{0};
    alignas(64) std::atomic<std::uint64_t> retired_{0};
};

}  // namespace cxv::queues
