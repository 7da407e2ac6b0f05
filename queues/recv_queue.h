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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/wqe.h"
#include "queues/types.h"

namespace cxv::queues {

namespace detail {

// An SGE's length and lkey as one host-order word (length in the low half): they are
// adjacent in both the SGE and the data segment, so they move as one 8-byte word.
inline std::uint64_t len_key_of(const sge& s) noexcept {
    static_assert(offsetof(sge, lkey) == offsetof(sge, length) + 4 && offsetof(hw::wqe_data_seg, lkey) == 4);
    std::uint64_t len_key;
    std::memcpy(&len_key, &s.length, sizeof(len_key));
    return len_key;
}

// One data segment, byte-swapped into place (PRM "Data Segment"), at 8-byte word `word`
// of `base`: swapping all eight bytes of the length and lkey word reverses each half and
// exchanges them; rotating by 32 puts them back. `len_key` is len_key_of(s), read by the
// caller; the address is read after the first store. Each store's address is written as
// `base + word * 8` plus a constant, which the addressing mode takes whole (a pointer to
// the segment computed once would hold a register of its own across the posting loop).
inline void put_data_at(std::byte* base, std::ptrdiff_t word, std::uint64_t len_key, const sge& s,
                        std::size_t at = 0) noexcept {
    std::uint64_t v = hw::to_be(len_key);
    v = (v << 32) | (v >> 32);
    std::memcpy(base + (at + offsetof(hw::wqe_data_seg, byte_count)) + word * 8, &v, sizeof(v));
    v = hw::to_be(s.addr);
    std::memcpy(base + (at + offsetof(hw::wqe_data_seg, addr)) + word * 8, &v, sizeof(v));
}
inline void put_data(hw::wqe_data_seg* d, const sge& s) noexcept {
    put_data_at(reinterpret_cast<std::byte*>(d), 0, len_key_of(s), s);
}

// `p`, computed where it is used from the address of `*p` as a memory operand (on
// x86-64 an LEA of the base and displacement the fields are addressed with): a posting
// path's out-of-line call takes its ring's (or its WR's) address through it, so that
// the address is computed on the way to the call rather than kept in a register from
// the entry, which GCC 12 does for a pointer it has as a value (docs/performance.md).
// Elsewhere, `p` plus a zero the compiler cannot see.
template <class T>
[[gnu::always_inline]] inline T* hidden(T* p) noexcept {
#if defined(__x86_64__)
    T* q;
    __asm__("lea %1, %0" : "=r"(q) : "m"(*p));
    return q;
#else
    std::size_t zero = 0;
    __asm__("" : "+r"(zero));
    return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(p) + zero);
#endif
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
    // `dbrec`: the QP's doorbell record (receive counter first); `max_sge`: the most
    // SGEs a WR may have (the QP's max_recv_sge; 0: as many as a WQE holds).
    recv_queue(std::byte* wqes, unsigned log_count, unsigned wqe_shift, std::uint64_t* wr_ids,
               hw::wq_doorbell_record* dbrec, unsigned max_sge = 0) noexcept
        : limit_(1u << log_count), mask_((1u << log_count) - 1), mask2_(mask_ * 2), shift_(wqe_shift), wqes_(wqes),
          wr_ids_(wr_ids),
          dbrec_(dbrec), seg_slots_((1u << wqe_shift) / sizeof(hw::wqe_data_seg)),
          max_sge_(max_sge != 0 && max_sge < seg_slots_ ? max_sge : seg_slots_),
          one_sge_(seg_slots_ == 1 ? 1 : std::int64_t{1} << 32) {
        if (dbrec != nullptr) hw::clear_wq_counter_reserved(dbrec->rcv_counter);  // (store_wq_counter)
    }
    // The receive side of a QP whose receives come from an SRQ: always full, and
    // srq_attached() says why (ibv_post_recv(3) refuses it with EINVAL).
    static recv_queue srq_attached() noexcept {
        recv_queue q;
        q.limit_ = 0;
        q.srq_ = true;
        return q;
    }

    unsigned capacity() const noexcept { return srq_ ? 0 : mask_ + 1; }
    unsigned max_sge() const noexcept { return max_sge_; }
    unsigned posted() const noexcept { return head_ - (limit_ - capacity()); }
    bool srq() const noexcept { return srq_; }

    // Writes one WQE; false when the ring is full (nothing written). The caller has
    // checked n <= max_sge().
    bool put(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
        const std::uint32_t head = head_;
        if (head == limit_) return false;
        const unsigned slot = head & mask_;
        wr_ids_[slot] = wr_id;
        std::atomic_ref<std::uint32_t>(head_).store(head + 1, std::memory_order_release);  // flush_next
        put_wqe(wqe(slot), sg, n);
        return true;
    }
    // Makes every WQE put so far visible to the device (PRM: the WQE before the record).
    void commit() noexcept {
        hw::to_device();
        hw::store_wq_counter(dbrec_->rcv_counter, head_);
    }

    // Posts a list of WRs shaped like ibv_recv_wr (next, sg_list of sge layout, num_sge,
    // wr_id), in order, with one record update for the list.
    //
    // Inlined: the first WR when it has one SGE (the common receive: a lone WR is the
    // common call) on a ring of one data segment per WQE, with the ring's state in
    // caller-saved registers. The rest of a list, and a first WR it cannot take (other
    // SGE counts, an empty SGE, a full ring, and every WR of a ring of several segments
    // per WQE, whose end mark the general loop writes), go to rest(wr, head), which the
    // caller makes an out-of-line call to post_rest() (its runs, then the general loop):
    // the inlined part keeps nothing live across a call, and has that one call. Returns
    // what rest() returns, or a value-initialized one (0) when the one WR was taken here.
    template <class Wr, class Rest>
    [[gnu::always_inline]] auto post_list(Wr* wr, Rest rest) noexcept -> decltype(rest(*this, wr, 0u)) {
        if (wr == nullptr) [[unlikely]] return {};
        // The producer index in a register; the other fields are read where they are used
        // (a load folded into an instruction costs none).
        std::uint32_t head = head_;
        // The first WR's SGE count against one_sge_ (1, or on a ring of several segments
        // per WQE a value no int is): the ring's shape and the WR's in one compare.
        unsigned taken = 0;  // (the stop's producer index is head + taken: see below)
        if (head == limit_ || std::int64_t{wr->num_sge} != one_sge_) [[unlikely]] goto stop;
        {
            // Twice the slot: in 4-byte units the slot's wr_id (8 bytes a slot), in 8-byte
            // units its one-segment WQE (16 bytes: PRM, the receive WQE stride is a power
            // of two of at least 16), both scaled by the addressing mode.
            const std::size_t slot2 = (head * 2) & mask2_;
            const auto at = static_cast<std::ptrdiff_t>(slot2);
            if (!put_one(reinterpret_cast<std::byte*>(wr_ids_), wqes_, at, *wr)) [[unlikely]] goto stop;
            if (wr->next == nullptr) [[likely]] {
                publish(head + 1);
                return {};
            }
            taken = 1;
        }
    stop:
        // The WR to go on from and the producer index, from the first WR and whether it
        // was taken: no register holds either on the inlined path. (With head + 1 kept
        // to here, a register that held it would be filled by loading limit_ before the
        // first test, which head == limit_ makes equal there, and that test would not
        // take limit_ from memory; the first WR's address, or its next, is computed here.)
        {
            Wr* const from = detail::hidden(wr);
            return rest(*detail::hidden(this), taken != 0 ? from->next : from, head + taken);
        }
    }
    // What post_rest stopped at (the WR it names is not posted).
    enum class stop { done, full, too_many_sge };
    // From the WR post_list did not take: the runs (post_runs), then the general loop
    // (any SGE count, the checks) from the first WR they do not take; posts until a WR
    // cannot be posted, which goes to *at; publishes what was put (`head`: post_list's
    // producer index; head_ is still where it began).
    template <class Wr>
    [[gnu::always_inline]] stop post_rest(Wr* wr, std::uint32_t head, Wr** at) noexcept {
        stop why = stop::done;
        head = post_runs(wr, head);
        if (wr == nullptr) [[likely]] {  // (the list's WRs all put)
            publish(head);
            return why;
        }
        const std::uint32_t start = head_;
        for (; wr != nullptr; wr = wr->next) {
            if (static_cast<unsigned>(wr->num_sge) > max_sge_) [[unlikely]] {  // (negative too)
                why = stop::too_many_sge;
                break;
            }
            if (head == limit_) [[unlikely]] {
                why = stop::full;
                break;
            }
            const unsigned slot = head & mask_;
            wr_ids_[slot] = wr->wr_id;
            put_wqe(wqe(slot), reinterpret_cast<const sge*>(wr->sg_list), static_cast<unsigned>(wr->num_sge));
            ++head;
        }
        if (head != start) publish(head);
        if (why != stop::done) *at = wr;
        return why;
    }

    // A receive completion: returns its wr_id. A receive queue's WQEs complete in the
    // order they were posted, so a completion is the oldest posted WQE's, whatever WQE
    // counter its CQE carries: rdma-core's mlx5 provider takes a QP's own receives the
    // same way (its ring's tail, in cq.c), and so do error and flush completions here.
    // (limit_ & mask_ is the oldest's slot: limit_ is the oldest plus the capacity.)
    std::uint64_t retire() noexcept {
        run_retirer r = run();
        const std::uint64_t id = r.retire();
        retired(r);
        return id;
    }
    // retire() for a poller's run of completions (completion_queue::poll()): the
    // counter in the run's registers, stored once, by retired(), when the run ends.
    // (retire() is a run of one.)
    struct run_retirer {
        std::uint64_t* ids;
        std::uint32_t mask;
        std::uint32_t limit;
        std::uint64_t retire() noexcept { return ids[limit++ & mask]; }
    };
    run_retirer run() const noexcept { return {wr_ids_, mask_, limit_}; }
    void retired(const run_retirer& r) noexcept { limit_ = r.limit; }
    // All outstanding WQEs given up (a QP reset): the ring is empty again.
    void reset() noexcept {
        head_ = 0;
        limit_ = capacity();
    }
    // The device will complete nothing more: the oldest posted WQE, retired with its
    // wr_id as a flush completes it; false when none is left. The poller's thread.
    bool flush_next(std::uint64_t& wr_id) noexcept {
        const std::uint32_t oldest = limit_ - capacity();
        if (srq_ || oldest == std::atomic_ref<std::uint32_t>(head_).load(std::memory_order_acquire)) return false;
        wr_id = wr_ids_[oldest & mask_];
        ++limit_;
        return true;
    }

private:
    std::byte* wqe(unsigned slot) const noexcept { return wqes_ + (std::size_t{slot} << shift_); }
    // The scatter list, its empty SGEs left out (a data segment's byte_count of 0 means
    // 2 GiB, PRM "Data Segment"; rdma-core's mlx5 provider leaves them out too), ended by
    // the invalid lkey when the WQE has room left.
    void put_wqe(std::byte* w, const sge* sg, unsigned n) const noexcept {
        auto* d = reinterpret_cast<hw::wqe_data_seg*>(w);
        unsigned k = 0;
        for (unsigned i = 0; i < n; ++i) {
            if (sg[i].length != 0) [[likely]] detail::put_data(d + k++, sg[i]);
        }
        if (k < seg_slots_) detail::put_end(d + k);
    }

    // post_rest's first part, on a ring of one data segment per WQE: the WRs of one SGE
    // from `wr` on (the rest of a list after post_list's first) in runs, each into the
    // WQEs from the producer index `head` up to the first that is not free or the
    // ring's end, whichever comes first. A run's length is known before its loop, which
    // runs a negative index up to 0 (one ADD and its flag per WR: no mask, no compare
    // with the limit) and counts the producer index once, after it. Returns the
    // producer index; `wr` is left at the first WR not put (null when all were): the
    // general loop takes it (another SGE count, an empty SGE, or a full ring).
    template <class Wr>
    [[gnu::always_inline]] std::uint32_t post_runs(Wr*& wr, std::uint32_t head) noexcept {
        // (one_sge_: the ring's shape and the WR's in one compare, as post_list's)
        while (wr != nullptr && std::int64_t{wr->num_sge} == one_sge_ && head != limit_) {
            // Twice the slots (post_list): from `from` up to `end` (at most the ring's
            // end, mask2 + 2), as an index below 0 from the end's wr_id and WQE.
            const std::size_t mask2 = mask2_;
            const std::size_t from = (std::size_t{head} * 2) & mask2;
            std::size_t end = from + std::size_t{limit_ - head} * 2;  // (limit_ - head: the free WQEs)
            if (end > mask2 + 2) end = mask2 + 2;
            std::byte* const ids_end = reinterpret_cast<std::byte*>(wr_ids_) + end * 4;
            std::byte* const wqes_end = wqes_ + end * 8;
            const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(from - end);
            std::ptrdiff_t i = first;
            // (`whole` is implied by i reaching 0, as a WR not taken leaves i below 0, but
            // gcc 12 lays the loop out one instruction shorter with it)
            bool whole = true;  // the run's WQEs all taken (or the list ended)
            do {
                if (!put_one(ids_end, wqes_end, i, *wr)) [[unlikely]] {
                    whole = false;
                    break;
                }
                wr = wr->next;
                i += 2;
            } while (i != 0 && wr != nullptr && wr->num_sge == 1);
            head += static_cast<std::uint32_t>(static_cast<std::size_t>(i - first) >> 1);
            // A run stops short at a WR it does not take or the list's end; at the ring's
            // end or the limit (i at 0) the next run, if any, follows.
            if (!whole || i != 0) [[likely]] break;
        }
        return head;
    }
    // One WR of one SGE into the one-segment WQE at twice-slot `at` (an index from
    // `ids` and `wqes`, which may be below 0): its wr_id, then its data segment; false,
    // after the wr_id, for an empty SGE, which is left out of the WQE (put_wqe: the
    // general loop takes the WR, and writes its wr_id again).
    template <class Wr>
    [[gnu::always_inline]] static bool put_one(std::byte* ids, std::byte* wqes, std::ptrdiff_t at,
                                               const Wr& wr) noexcept {
        std::memcpy(ids + at * 4, &wr.wr_id, sizeof(std::uint64_t));
        const sge& sg = *reinterpret_cast<const sge*>(wr.sg_list);
        const std::uint64_t len_key = detail::len_key_of(sg);
        if (static_cast<std::uint32_t>(len_key) == 0) [[unlikely]] return false;
        detail::put_data_at(wqes, at, len_key, sg);
        return true;
    }

    void publish(std::uint32_t head) noexcept {
        // Release: a flush on the poller's thread (flush_next) that sees the index sees
        // the wr_ids before it (a plain store on x86).
        std::atomic_ref<std::uint32_t>(head_).store(head, std::memory_order_release);
        hw::to_device();
        hw::store_wq_counter(dbrec_->rcv_counter, head);
    }

    // The posting loop's fields first.
    std::uint32_t head_ = 0;
    std::uint32_t limit_ = 0;  // head_ may not reach it: the oldest incomplete WQE + capacity
    std::uint32_t mask_ = 0;
    std::uint32_t mask2_ = 0;  // mask_ * 2 (post_loop's doubled slot)
    unsigned shift_ = 4;
    std::byte* wqes_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    unsigned seg_slots_ = 1;  // data segments a WQE holds
    unsigned max_sge_ = 1;
    std::int64_t one_sge_ = 1;  // post_list's first compare: 1, or 2^32 with seg_slots_ > 1
    bool srq_ = false;
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
        : tail4_(((1u << log_count) - 1) * 4), mask_((1u << log_count) - 1), shift_(wqe_shift), wqes_(wqes),
          wr_ids_(wr_ids), dbrec_(dbrec),
          max_sge_(((1u << wqe_shift) - sizeof(hw::wqe_srq_next_seg)) / sizeof(hw::wqe_data_seg)),
          one_sge_(max_sge_ == 1 ? 1 : std::int64_t{1} << 32) {
        if (dbrec != nullptr) hw::clear_wq_counter_reserved(dbrec->rcv_counter);  // (store_wq_counter)
    }

    unsigned capacity() const noexcept { return mask_; }  // one sentinel
    unsigned max_sge() const noexcept { return max_sge_; }
    // The free list as it stands: the WQE the next receive takes, and the last free one.
    std::uint32_t head() const noexcept { return head4_ / 4; }
    std::uint32_t tail() const noexcept { return tail4_ / 4; }

    bool put(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
        if (head4_ == tail4_) return false;  // only the sentinel is left
        put_wqe(sg, n, wr_id);
        return true;
    }
    void commit() noexcept { publish(counter_); }

    // As recv_queue::post_list: WRs of one SGE on a ring of one data segment per WQE in
    // the inlined loop; anything else, and a ring with only its sentinel left, returns
    // rest(wr, counter) for an out-of-line call to post_rest().
    template <class Wr, class Rest>
    [[gnu::always_inline]] auto post_list(Wr* wr, Rest rest) noexcept -> decltype(rest(*this, wr, 0u)) {
        if (wr == nullptr) [[unlikely]] return {};
        std::uint32_t counter = counter_;
        std::uint32_t head4 = head4_;
        std::byte* const wqes = wqes_;
        std::byte* const ids = reinterpret_cast<std::byte*>(wr_ids_);
        // The ring's shape and the first WR's in one compare (recv_queue::post_list).
        if (head4 == tail4_ || std::int64_t{wr->num_sge} != one_sge_) [[unlikely]] goto stop;
        for (;;) {
            // A one-segment SRQ WQE is 32 bytes, the next segment then the data segment:
            // 4 words of 8 bytes, as its wr_id is 4 units of 2 bytes into the array, so
            // that the addressing mode scales the index for every access.
            const std::size_t word = head4;
            std::memcpy(ids + word * 2, &wr->wr_id, sizeof(std::uint64_t));
            const sge& sg = *reinterpret_cast<const sge*>(wr->sg_list);
            detail::put_data_at(wqes, word, detail::len_key_of(sg), sg, sizeof(hw::wqe_srq_next_seg));
            head4 = next_index(wqes + word * 8) * 4;
            ++counter;
            wr = wr->next;
            if (wr == nullptr) [[likely]] break;
            if (head4 == tail4_ || wr->num_sge != 1) [[unlikely]] goto stop;
        }
        head4_ = head4;
        publish(counter);
        return {};
    stop:
        head4_ = head4;
        return rest(*detail::hidden(this), wr, counter);
    }
    enum class stop { done, full, too_many_sge };
    // The general loop (any SGE count, the checks), from where post_list stopped
    // (`counter`: its count of posted WQEs; counter_ is still where it began).
    template <class Wr>
    [[gnu::always_inline]] stop post_rest(Wr* wr, std::uint32_t counter, Wr** at) noexcept {
        const std::uint32_t start = counter_;
        counter_ = counter;
        stop why = stop::done;
        for (; wr != nullptr; wr = wr->next) {
            if (static_cast<unsigned>(wr->num_sge) > max_sge_) [[unlikely]] {  // (negative too)
                why = stop::too_many_sge;
                break;
            }
            if (head4_ == tail4_) [[unlikely]] {
                why = stop::full;
                break;
            }
            put_wqe(reinterpret_cast<const sge*>(wr->sg_list), static_cast<unsigned>(wr->num_sge), wr->wr_id);
        }
        if (counter_ != start) publish(counter_);
        if (why != stop::done) *at = wr;
        return why;
    }

    // A completion for WQE `index`: it goes to the end of the free list.
    std::uint64_t retire(std::uint16_t index) noexcept {
        const unsigned i = index & mask_;
        const std::uint64_t id = wr_ids_[i];
        reinterpret_cast<hw::wqe_srq_next_seg*>(wqe(tail4_))->next_wqe_index =
            hw::be16::from(static_cast<std::uint16_t>(i));
        tail4_ = i * 4;
        return id;
    }

private:
    // The WQE of index4 (an index times 4; the stride is at least 32 bytes).
    std::byte* wqe(std::uint32_t index4) const noexcept { return wqes_ + (std::size_t{index4} << (shift_ - 2)); }
    void put_wqe(const sge* sg, unsigned n, std::uint64_t wr_id) noexcept {
        std::byte* w = wqe(head4_);
        auto* d = reinterpret_cast<hw::wqe_data_seg*>(w + sizeof(hw::wqe_srq_next_seg));
        for (unsigned i = 0; i < n; ++i) detail::put_data(d + i, sg[i]);
        if (n < max_sge_) detail::put_end(d + n);
        wr_ids_[head4_ / 4] = wr_id;
        head4_ = next_index(w) * 4;
        ++counter_;
    }
    // The WQE after `w` in the free list. Read as the segment's first four bytes (two
    // reserved, then next_wqe_index): one big-endian load, and the mask (< 2^16) drops
    // the reserved half.
    std::uint32_t next_index(const std::byte* w) const noexcept {
        static_assert(offsetof(hw::wqe_srq_next_seg, next_wqe_index) == 2);
        std::uint32_t word;
        std::memcpy(&word, w, sizeof(word));
        return hw::from_be(word) & mask_;
    }
    void publish(std::uint32_t counter) noexcept {
        counter_ = counter;
        hw::to_device();
        hw::store_wq_counter(dbrec_->rcv_counter, counter);
    }

    // The posting loop's fields first.
    // The first free WQE and the last (the sentinel), as their indexes times 4: a
    // one-segment WQE's address in 8-byte words, its wr_id's in 2-byte units.
    std::uint32_t head4_ = 0;
    std::uint32_t tail4_ = 0;
    std::uint32_t counter_ = 0;
    std::uint32_t mask_ = 0;
    unsigned shift_ = 5;
    std::byte* wqes_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    unsigned max_sge_ = 1;
    std::int64_t one_sge_ = 1;  // post_list's first compare: 1, or 2^32 with max_sge_ > 1
};

}  // namespace cxv::queues
