// Receive rings: a QP's receive queue and a shared receive queue (PRM "Receive WQE",
// "SRQ"). Single producer: one thread posts to a ring at a time; the poller that
// retires completions may be another thread only through the ring's own retire()
// (an atomic-free handoff is not offered: api/ keeps the poller on the posting thread
// or takes its own lock).
//
// Posting a receive is: the scatter list into the WQE at the producer index (a short
// list is ended by an entry with the invalid lkey), the wr_id kept for the completion,
// then, once per batch, a device barrier and the WQE counter into the doorbell record.
// Receive queues have no MMIO doorbell: the device reads the record.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/wqe.h"
#include "queues/types.h"

namespace cxv::queues {

namespace detail {

// One data segment, byte-swapped into place (PRM "Data Segment").
inline void put_data(hw::wqe_data_seg* d, const sge& s) noexcept {
    d->byte_count = hw::be32::from(s.length);
    d->lkey = hw::be32::from(s.lkey);
    d->addr = hw::be64::from(s.addr);
}

inline void put_end(hw::wqe_data_seg* d) noexcept {
    d->byte_count = {};
    d->lkey = hw::be32::from(hw::invalid_lkey);
    d->addr = {};
}

}  // namespace detail

class recv_queue {
public:
    recv_queue() = default;
    // `wqes`: 1 << log_count WQEs of 1 << wqe_shift bytes; `wr_ids`: as many slots;
    // `dbrec`: the QP's doorbell record (receive counter first).
    recv_queue(std::byte* wqes, unsigned log_count, unsigned wqe_shift, std::uint64_t* wr_ids,
               hw::wq_doorbell_record* dbrec) noexcept
        : wqes_(wqes), wr_ids_(wr_ids), dbrec_(dbrec), mask_((1u << log_count) - 1), shift_(wqe_shift),
          max_sge_((1u << wqe_shift) / sizeof(hw::wqe_data_seg)) {}

    unsigned capacity() const noexcept { return mask_ + 1; }
    unsigned max_sge() const noexcept { return max_sge_; }
    unsigned posted() const noexcept { return head_ - tail_; }

    // Writes one WQE; false when the ring is full (nothing written). The caller has
    // checked n <= max_sge().
    bool put(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
        // Members into locals first: the WQE stores below may alias them as far as the
        // compiler knows, and would force a reload of each after every store.
        const std::uint32_t head = head_, mask = mask_;
        if (head - tail_ > mask) return false;
        const unsigned slot = head & mask;
        auto* d = reinterpret_cast<hw::wqe_data_seg*>(wqes_ + (std::size_t{slot} << shift_));
        const unsigned max = max_sge_;
        wr_ids_[slot] = wr_id;
        head_ = head + 1;
        for (unsigned i = 0; i < n; ++i) detail::put_data(d + i, sg[i]);
        if (n < max) detail::put_end(d + n);
        return true;
    }
    // Makes every WQE put so far visible to the device (PRM: the WQE before the record).
    void commit() noexcept {
        hw::to_device();
        dbrec_->rcv_counter = hw::be32::from(head_ & 0xffff);
    }

    // A list of posts with the ring's state in registers: begin(), put() per WR,
    // end() (which stores the producer index and, if anything was put, commits).
    struct writer {
        std::byte* wqes;
        std::uint64_t* wr_ids;
        std::uint32_t head, start, limit, mask;
        unsigned shift, max_sge;
        [[gnu::always_inline]] bool put(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
            if (head == limit) return false;
            const unsigned slot = head & mask;
            auto* d = reinterpret_cast<hw::wqe_data_seg*>(wqes + (std::size_t{slot} << shift));
            wr_ids[slot] = wr_id;
            ++head;
            for (unsigned i = 0; i < n; ++i) detail::put_data(d + i, sg[i]);
            if (n < max_sge) detail::put_end(d + n);
            return true;
        }
    };
    [[gnu::always_inline]] writer begin() const noexcept {
        return {wqes_, wr_ids_, head_, head_, tail_ + mask_ + 1, mask_, shift_, max_sge_};
    }
    [[gnu::always_inline]] void end(const writer& w) noexcept {
        if (w.head == w.start) return;
        head_ = w.head;
        hw::to_device();
        dbrec_->rcv_counter = hw::be32::from(w.head & 0xffff);
    }
    // A receive completion for WQE `wqe_counter`: returns its wr_id. Every receive WQE
    // completes, in order, so each completion retires exactly one.
    std::uint64_t retire(std::uint16_t wqe_counter) noexcept {
        ++tail_;
        return wr_ids_[wqe_counter & mask_];
    }
    // All outstanding WQEs given up (a QP reset): the ring is empty again.
    void reset() noexcept { head_ = tail_ = 0; }

private:
    std::byte* wqes_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t head_ = 0, tail_ = 0;
    std::uint32_t mask_ = 0;
    unsigned shift_ = 4;
    unsigned max_sge_ = 1;
};

// An SRQ: WQEs are a linked free list (each WQE's next segment names the next free
// one); posting takes the head, a completion returns its WQE to the tail. One WQE is
// always kept as the list's sentinel, as the device requires a next WQE to link to.
class srq_ring {
public:
    srq_ring() = default;
    // The ring must be initialised as driver::srq leaves it: WQE i links to i + 1.
    srq_ring(std::byte* wqes, unsigned log_count, unsigned wqe_shift, std::uint64_t* wr_ids,
             hw::wq_doorbell_record* dbrec) noexcept
        : wqes_(wqes), wr_ids_(wr_ids), dbrec_(dbrec), mask_((1u << log_count) - 1), shift_(wqe_shift),
          max_sge_(((1u << wqe_shift) - sizeof(hw::wqe_srq_next_seg)) / sizeof(hw::wqe_data_seg)),
          tail_(mask_) {}

    unsigned capacity() const noexcept { return mask_; }  // one sentinel
    unsigned max_sge() const noexcept { return max_sge_; }

    bool put(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
        if (head_ == tail_) return false;  // only the sentinel is left
        std::byte* w = wqes_ + (std::size_t{head_} << shift_);
        auto* d = reinterpret_cast<hw::wqe_data_seg*>(w + sizeof(hw::wqe_srq_next_seg));
        for (unsigned i = 0; i < n; ++i) detail::put_data(d + i, sg[i]);
        if (n < max_sge_) detail::put_end(d + n);
        wr_ids_[head_] = wr_id;
        head_ = reinterpret_cast<const hw::wqe_srq_next_seg*>(w)->next_wqe_index.value() & mask_;
        ++counter_;
        return true;
    }
    void commit() noexcept {
        hw::to_device();
        dbrec_->rcv_counter = hw::be32::from(counter_ & 0xffff);
    }
    // A completion for WQE `index`: it goes to the end of the free list.
    std::uint64_t retire(std::uint16_t index) noexcept {
        const unsigned i = index & mask_;
        const std::uint64_t id = wr_ids_[i];
        reinterpret_cast<hw::wqe_srq_next_seg*>(wqes_ + (std::size_t{tail_} << shift_))->next_wqe_index =
            hw::be16::from(static_cast<std::uint16_t>(i));
        tail_ = i;
        return id;
    }

private:
    std::byte* wqes_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t mask_ = 0;
    unsigned shift_ = 5;
    unsigned max_sge_ = 1;
    std::uint32_t head_ = 0;
    std::uint32_t tail_ = 0;
    std::uint32_t counter_ = 0;
};

}  // namespace cxv::queues
