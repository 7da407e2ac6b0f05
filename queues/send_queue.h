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
// bursts never merge. (8-byte doorbells through an uncached mapping stay in the first
// half: nothing combines them, and Linux's mlx5e rings its SQs the same way.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/mmio.h"
#include "hw/wqe.h"
#include "queues/recv_queue.h"
#include "queues/send_wqe.h"
#include "queues/types.h"

namespace cxv::queues {

namespace detail {

// `n` (Min..64, Min 1 or 4) bytes from `src` to `dst` in a few overlapping loads and
// stores that never touch a byte outside [src, src + n) or [dst, dst + n): what memcpy
// does for small sizes, without the call. (Min 4 leaves out the byte copies of 1 to 3
// bytes, which need registers of their own.)
template <unsigned Min = 1>
[[gnu::always_inline]] inline void copy_small(std::byte* base, std::size_t off, const std::byte* src,
                                              std::uint32_t n32) noexcept {
    static_assert(Min == 1 || Min == 4);
    typedef char v16 __attribute__((vector_size(16)));
    auto copy = [base, off, src]<class T>(T, std::size_t at) {
        T v;
        std::memcpy(&v, src + at, sizeof(T));
        std::memcpy(base + (off + at), &v, sizeof(T));
    };
    // (n widened once: `n - 16` and the like then become displacements of the
    // addressing mode, as 32-bit differences widened each could not)
    const std::size_t n = n32;
    if (__builtin_expect_with_probability(n > 32, true, 0.5)) {  // (no size preferred: laid out as GCC likes)
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
    } else if (Min == 4 || n >= 4) {
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
    // the BB counter just past the WQE that starts there plus the ring's size, the room
    // limit once its completion frees it);
    // `bf`: the QP's BlueFlame register (two halves of `bf_half` bytes), mapped
    // uncached for `doorbell`, write-combining for `blueflame`; `max_wqe_bbs`: the
    // largest WQE the QP was sized for (driver::qp::max_send_wqebbs()).
    send_queue(std::byte* bbs, unsigned log_bbs, std::uint32_t qpn, bool ud, std::uint64_t* wr_ids,
               std::uint32_t* ends, hw::wq_doorbell_record* dbrec, std::byte* bf, std::size_t bf_half,
               doorbell_mode mode, unsigned max_wqe_bbs) noexcept
        : bbs_(bbs), wr_ids_(wr_ids), ends_(ends), dbrec_(dbrec), bf_cur_(bf), bf_half_(bf_half),
          bf_flip_(reinterpret_cast<std::uintptr_t>(bf) ^ (reinterpret_cast<std::uintptr_t>(bf) + bf_half)),
          mask_((1u << log_bbs) - 1), limit_(1u << log_bbs), qpn_shifted_(qpn << 8), max_bbs_(max_wqe_bbs),
          bf_bbs_(mode == doorbell_mode::blueflame ? static_cast<unsigned>(bf_half / hw::send_wqe_bb) : 0),
          ud_(ud), mode_(mode), size_(1u << log_bbs) {
        if (dbrec != nullptr) hw::clear_wq_counter_reserved(dbrec->snd_counter);  // (store_wq_counter)
        // Per QP, so that every load of put_small() is off the ring's own address.
        constexpr hw::wqe_opcode ops[small_ops] = {hw::wqe_opcode::RDMA_WRITE, hw::wqe_opcode::RDMA_WRITE_IMM,
                                                   hw::wqe_opcode::SEND, hw::wqe_opcode::SEND_IMM,
                                                   hw::wqe_opcode::RDMA_READ};
        for (unsigned i = 0; i < small_ops; ++i) {
            // ds: control, the remote address segment if the opcode has one, one data
            // segment (3 or 2, odd exactly with the remote address: put_small's test).
            const unsigned ds = send_wqe::fixed_ds(ops[i], false) + send_wqe::gather_ds(1);
            ctrl_op_[i] = (std::uint64_t{static_cast<std::uint8_t>(ops[i])} << 32) | qpn_shifted_ | ds;
        }
        for (unsigned f = 0; f < 8; ++f) ctrl_fm_[f] = std::uint32_t{send_wqe::kControl[f]} << 24;
    }

    // The send side of a QP with no send queue (max_send_wr 0, qpc.no_sq): a ring of
    // nothing, which refuses every WQE (reserve() and put_small() find no room, so
    // post_send says ENOMEM, as rdma-core's mlx5 provider does) and touches no memory.
    static send_queue none(std::uint32_t qpn) noexcept {
        send_queue q;
        q.qpn_shifted_ = qpn << 8;
        q.size_ = 0;
        return q;
    }

    unsigned capacity_bbs() const noexcept { return mask_ + 1; }
    unsigned max_wqe_bbs() const noexcept { return max_bbs_; }
    unsigned free_bbs() const noexcept { return limit_ - pi_; }
    std::uint32_t producer() const noexcept { return pi_; }  // the next WQE's BB counter
    std::uint32_t limit() const noexcept { return limit_; }  // the counter pi may reach
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
        if (limit_ - pi < max_bbs + (to_end < max_bbs ? to_end : 0)) [[unlikely]] return false;
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
        ends_[s.slot] = s.pi + nbb + mask_ + 1;
        last_ = s.w;
        last_bbs_ = nbb;
        ++batch_;
        publish(s.pi + nbb);
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
    // segment, a remote address segment when the opcode has one, then one data segment,
    // or (when `Inline`) 4 to kSmallInline bytes inline. The caller has checked the
    // opcode against the QP type and the inline length against the QP's limit. False,
    // with nothing written, when the ring has no room or the WQE would cross the ring's
    // end (the general path, reserve(), pads with NOPs then).
    //
    // `op`: op_*. `wr`: an ibv_send_wr-shaped request (sg_list, wr.rdma, imm_data,
    // wr_id, and send_flags, whose low three bits are send_wqe::flag_*), each field read where it
    // is stored and when it is needed (send_flags after the bookkeeping stores, which
    // keeps it out of a register meanwhile). The WQEs put this way are counted in `b`
    // (in registers, not in the ring) until ring(b) or ring_one(b), or adopt(b) before
    // the general path goes on.
    static constexpr unsigned kSmallInline = 64;
    static constexpr unsigned op_rdma_write = 0, op_rdma_write_imm = 1, op_send = 2, op_send_imm = 3,
                              op_rdma_read = 4, small_ops = 5;  // `op`
    struct batch {
        std::byte* last = nullptr;  // the last WQE
        unsigned last_bbs = 0;      // its size in BBs
        unsigned count = 0;         // WQEs
        std::uint32_t pi = 0;       // the producer counter after them (what the record gets)
        std::uint64_t head = 0;     // put_small(): the WQE's first 8 bytes, as in memory (ring_one's doorbell)
    };
    // `len_key`: without `Inline`, the SGE's length and lkey as detail::len_key_of()
    // reads them (the caller's test of the length read them already).
    template <bool Inline, class Wr>
    [[gnu::always_inline]] bool put_small(const Wr& wr, unsigned op, batch& b, std::uint64_t len_key = 0) noexcept {
        // The segments' layout is fixed per branch: ds (bits 5:0 of the table entry) 3
        // for control, remote address and data, 2 without the remote address.
        const std::uint64_t op_ds = ctrl_op_[op];
        if constexpr (Inline) {
            // (inline data goes mostly with SENDs: their branch is laid out first)
            if ((op_ds & 1) == 0) [[likely]] return put_small_as<Inline, false>(wr, op_ds, b, len_key);
            return put_small_as<Inline, true>(wr, op_ds, b, len_key);
        }
        if (op_ds & 1) return put_small_as<Inline, true>(wr, op_ds, b, len_key);
        return put_small_as<Inline, false>(wr, op_ds, b, len_key);
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
        if (ud && r.av != nullptr) seg = send_wqe::put_datagram(seg, *r.av);  // (api/ refuses a UD WR without one)
        const hw::wqe_opcode op = r.opcode;
        if (send_wqe::has_raddr(op)) seg = send_wqe::put_raddr(seg, r.remote_addr, r.rkey);
        if (send_wqe::has_atomic(op)) seg = send_wqe::put_atomic(seg, op, r.compare_add, r.swap);
        return r.inline_data ? send_wqe::put_inline(seg, r.sg, r.num_sge) : send_wqe::put_gather(seg, r.sg, r.num_sge);
    }
    // The control byte of a request (send_wqe::control: completion, solicited event,
    // fence).
    static std::uint8_t control(const send_request& r) noexcept {
        return send_wqe::control(r.fence, r.signaled, r.solicited);
    }

    // Hands every WQE put since the last ring to the device: the record, then the
    // doorbell (BlueFlame copy for a batch of one WQE that fits a register half).
    [[gnu::always_inline]] void ring() noexcept {
        ring(batch{last_, last_bbs_, batch_, pi_});
        batch_ = 0;
    }
    // The same for a batch of put_small() (nothing when it is empty).
    [[gnu::always_inline]] void ring(const batch& b) noexcept {
        if (b.count == 0) return;
        // PRM "Doorbell Record": the WQE counter after the last WQE, once the WQEs are
        // in memory; then the doorbell ("Send Doorbell"/"BlueFlame").
        hw::to_device();
        hw::store_wq_counter(dbrec_->snd_counter, b.pi);
        if (mode_ == doorbell_mode::doorbell) {
            hw::to_device();
            hw::mmio_window(bf_cur_, 8).write64_raw(0, b.last);
        } else if (b.count == 1 && b.last_bbs <= bf_bbs_) {
            blueflame(next_register(), b.last, b.last_bbs);
        } else {
            detail::hidden(this)->ring_wc(next_register(), b.last, b.count == 1 ? b.last_bbs : 0);
        }
    }
    // ring() for a batch of exactly one WQE (`b.count == 1`): with a write-combining
    // mapping the whole WQE goes to the register when it fits a half (PRM "BlueFlame");
    // that case is tested first (bf_bbs_ is 0 with 8-byte doorbells), as it is the
    // one a lone small WR is posted for.
    [[gnu::always_inline]] void ring_one(const batch& b) noexcept {
        hw::to_device();
        hw::store_wq_counter(dbrec_->snd_counter, b.pi);  // (pi_, from a register)
        // (never with 8-byte doorbells: bf_bbs_ is 0; no preference between the two)
        if (__builtin_expect_with_probability(b.last_bbs <= bf_bbs_, true, 0.5)) {
            blueflame(next_register(), b.last, b.last_bbs);
        } else if (mode_ == doorbell_mode::doorbell) {
            hw::to_device();
            hw::mmio_window(bf_cur_, 8).write64_bytes(0, b.head);
        } else {
            detail::hidden(this)->ring_wc(next_register(), b.last, b.last_bbs);
        }
    }

    // ring() for the lone one-BB WQE just put, with `copy` (64 bytes) as its BlueFlame
    // copy instead of the ring's bytes: the write-combining self-test (driver/wc) makes
    // the two differ to learn which one the device executed. A BlueFlame ring only.
    void ring_blueflame_copy(const std::byte* copy) noexcept {
        hw::to_device();
        hw::store_wq_counter(dbrec_->snd_counter, pi_);
        hw::to_device();
        blueflame(next_register(), copy, 1);
        batch_ = 0;
    }

    // A send completion for the WQE starting at BB `wqe_counter`: that WQE and every
    // unsignaled one before it are done (the room limit moves past it). Returns its wr_id.
    std::uint64_t retire(std::uint32_t wqe_counter) noexcept {
        run_retirer r = run();
        const std::uint64_t id = r.retire(wqe_counter);
        retired(r);
        return id;
    }
    // retire() for a poller's run of completions (completion_queue::poll()): the arrays
    // and the mask in the run's registers, the room limit kept there too and stored once,
    // by retired(), when the run ends. (retire() is a run of one.)
    struct run_retirer {
        std::uint64_t* ids;
        std::uint32_t* ends;
        std::uint32_t mask;
        std::uint32_t limit;
        std::uint64_t retire(std::uint32_t wqe_counter) noexcept {
            const unsigned slot = wqe_counter & mask;
            limit = ends[slot];
            return ids[slot];
        }
    };
    run_retirer run() const noexcept { return {wr_ids_, ends_, mask_, limit_}; }
    void retired(const run_retirer& r) noexcept { limit_ = r.limit; }
    void reset() noexcept {
        pi_ = batch_ = 0;
        limit_ = size_;
    }
    // The device will complete nothing more (it is dead): the oldest posted WQE not yet
    // completed, signaled or not, retired here with its wr_id and WQE opcode, as a flush
    // completes it (NOP padding skipped). False when none is left. The poller's thread,
    // while the poster may post on its own: a WQE whose post returned before this is
    // called is flushed now; one being posted meanwhile now or at the next call (publish()
    // orders the WQE before the counter that shows it), never twice, never lost.
    bool flush_next(std::uint64_t& wr_id, std::uint8_t& opcode) noexcept {
        for (;;) {
            const std::uint32_t oldest = limit_ - size_;
            if (oldest == std::atomic_ref<std::uint32_t>(pi_).load(std::memory_order_acquire)) return false;
            const unsigned slot = oldest & mask_;
            const auto* ctrl = reinterpret_cast<const hw::wqe_ctrl_seg*>(bbs_ + std::size_t{slot} * hw::send_wqe_bb);
            opcode = static_cast<std::uint8_t>(ctrl->opmod_idx_opcode.value() & 0xff);
            limit_ = ends_[slot];
            wr_id = wr_ids_[slot];
            if (opcode != static_cast<std::uint8_t>(hw::wqe_opcode::NOP)) return true;
        }
    }

private:
    // put_small() for a WQE with (`Raddr`) or without a remote address segment.
    template <bool Inline, bool Raddr, class Wr>
    [[gnu::always_inline]] bool put_small_as(const Wr& wr, std::uint64_t op_ds, batch& b,
                                             std::uint64_t len_key) noexcept {
        const sge& sg = *reinterpret_cast<const sge*>(wr.sg_list);
        const std::uint32_t pi = pi_;
        const std::uint32_t mask = mask_;
        const unsigned slot = pi & mask;
        // The control segment's first 8 bytes in host order: the table's opcode, QPN and
        // size, and the WQE index (bits 55:40).
        std::uint64_t word0 = op_ds + (std::uint64_t{static_cast<std::uint16_t>(pi)} << 40);
        constexpr unsigned data_at = Raddr ? 32 : 16;  // the data or inline segment
        unsigned nbb = 1;
        // (read once: the WQE's stores below might alias it as far as the compiler knows)
        const std::uint32_t len = Inline ? sg.length : 0;
        if constexpr (Inline) {
            // The inline header (4 bytes) and the data padded to 16 instead of the
            // 16-byte data segment: ds grows by (4 + len + 15) / 16 - 1; the WQE takes
            // (data_at + 4 + len + 63) / 64 BBs.
            word0 += (len + 3) >> 4;
            nbb = (len + data_at + 4 + 63) >> 6;
            // No room (limit_ - pi < nbb), or the WQE would cross the ring's end.
            if (static_cast<std::int32_t>(limit_ - (pi + nbb)) < 0 || slot + nbb - 1 > mask) [[unlikely]] {
                return false;
            }
        } else {
            if (pi == limit_) [[unlikely]] return false;  // one BB, which never crosses the end
        }
        // The bookkeeping first: the ring's state need not stay in registers while the
        // WQE is written (nothing is visible to the device before ring()); the room limit
        // before the wr_id, as its value can take the mask's register (the two stores then
        // need one temporary register fewer). The producer counter last (publish()).
        ends_[slot] = pi + nbb + mask + 1;
        wr_ids_[slot] = wr.wr_id;
        std::byte* const w = bbs_ + std::size_t{slot} * hw::send_wqe_bb;
        static_assert(offsetof(hw::wqe_ctrl_seg, fm_ce_se) == 11 && offsetof(hw::wqe_ctrl_seg, imm) == 12);
        const std::uint64_t ctrl0 = hw::to_be(word0);
        std::memcpy(w, &ctrl0, sizeof(ctrl0));
        std::memcpy(w + 8, &ctrl_fm_[wr.send_flags & 7], 4);
        std::memcpy(w + 12, &wr.imm_data, 4);
        if constexpr (Raddr) send_wqe::put_raddr(w + sizeof(hw::wqe_ctrl_seg), wr.wr.rdma.remote_addr, wr.wr.rdma.rkey);
        if constexpr (Inline) {
            // The header (PRM "Inline Data Segment"), big-endian byte_count |
            // inline_seg_flag. With len at most 64 its bytes are 0x80, 0, 0, len: the
            // flag's constant stored whole (its last byte 0), then len's byte over that
            // last byte, with no byte swap and no register for the header.
            static_assert(hw::inline_seg_flag == 0x80000000u && kSmallInline <= 0xff);
            constexpr std::size_t hdr = data_at + offsetof(hw::wqe_inline_seg, byte_count);
            const hw::be32 flag = hw::be32::from(hw::inline_seg_flag);
            std::memcpy(w + hdr, &flag, sizeof(flag));
            const auto len_byte = static_cast<std::uint8_t>(len);
            std::memcpy(w + hdr + 3, &len_byte, 1);
            detail::copy_small<4>(w, data_at + sizeof(hw::wqe_inline_seg), reinterpret_cast<const std::byte*>(sg.addr),
                               len);
        } else {
            detail::put_data_at(w + data_at, 0, len_key, sg);
        }
        b.last = w;
        b.last_bbs = nbb;
        ++b.count;
        b.pi = pi + nbb;
        b.head = ctrl0;
        publish(pi + nbb);
        return true;
    }
    // The producer counter moves past a WQE once the WQE and its bookkeeping are written
    // (a release store: a plain store on x86, which keeps the order of stores): a dead
    // device's flush on the poller's thread (flush_next, acquire) that sees the counter
    // sees the whole WQE, and one that does not leaves the WQE for its next poll.
    [[gnu::always_inline]] void publish(std::uint32_t pi) noexcept {
        std::atomic_ref<std::uint32_t>(pi_).store(pi, std::memory_order_release);
    }
    // The register half this doorbell goes to; the next one goes to the other half (XOR
    // with bf_flip_ swaps the two addresses), so two bursts never merge.
    // (The register is read apart from the XOR, which then needs no copy of it: on x86-64
    // the XOR goes to memory.)
    [[gnu::always_inline]] std::byte* next_register() noexcept {
        std::byte* const reg = *static_cast<std::byte* const volatile*>(&bf_cur_);
        bf_cur_ = reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(bf_cur_) ^ bf_flip_);
        return reg;
    }
    // The WQE's BBs (1 to bf_bbs_) to the BlueFlame register half `reg`, 64 bytes at a time.
    [[gnu::always_inline]] void blueflame(std::byte* reg, const std::byte* wqe, unsigned nbb) noexcept {
        const hw::mmio_window win(reg, bf_half_);
        hw::wc_start();
        win.copy64(0, wqe);
        // (a 64-byte inline SEND takes two BBs; no preference between one and more)
        if (__builtin_expect_with_probability(nbb > 1, true, 0.5)) {
            win.copy64(hw::send_wqe_bb, wqe + hw::send_wqe_bb);
            for (unsigned i = 2; i < nbb; ++i) win.copy64(std::size_t{i} * hw::send_wqe_bb, wqe + i * hw::send_wqe_bb);
        }
        hw::wc_flush();
    }
    // The doorbell through a write-combining mapping other than an SSE BlueFlame copy: a
    // lone WQE of `nbb` BBs (0: a batch) with MOVDIR64B when it fits a half, or else the
    // 8-byte doorbell, flushed out of the write-combining buffers.
    [[gnu::noinline, gnu::noipa]] void ring_wc(std::byte* reg, const std::byte* wqe, unsigned nbb) noexcept {
        const hw::mmio_window win(reg, bf_half_);
        if (mode_ == doorbell_mode::movdir64b && nbb != 0 && nbb * hw::send_wqe_bb <= bf_half_) {
            hw::wc_start();
            for (unsigned i = 0; i < nbb; ++i) win.movdir64b(std::size_t{i} * hw::send_wqe_bb, wqe + i * hw::send_wqe_bb);
        } else {
            hw::to_device();
            win.write64_raw(0, wqe);
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
            ends_[slot + i] = pi + i + 1 + mask_ + 1;
        }
        batch_ += nbb;
    }

    std::byte* bbs_ = nullptr;
    std::uint64_t* wr_ids_ = nullptr;
    // Per slot, the room limit once the WQE starting there has completed: the BB counter
    // past it plus the ring's size (retire() is one load and one store).
    std::uint32_t* ends_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    std::byte* bf_cur_ = nullptr;  // the register half of the next doorbell
    std::size_t bf_half_ = 256;
    std::uintptr_t bf_flip_ = 0;   // the two halves' addresses XORed
    std::uint32_t mask_ = 0;
    std::uint32_t pi_ = 0;
    std::uint32_t limit_ = 0;  // pi_ may reach it: the completed counter plus the ring's size
    std::uint32_t qpn_shifted_ = 0;
    unsigned max_bbs_ = 1;
    unsigned bf_bbs_ = 0;  // the largest WQE an SSE BlueFlame copy takes (0: none)
    bool ud_ = false;
    doorbell_mode mode_ = doorbell_mode::doorbell;
    unsigned batch_ = 0;
    std::byte* last_ = nullptr;
    unsigned last_bbs_ = 0;
    // put_small()'s control words, computed with the QPN at construction (PRM "Control
    // Segment"). Per op_*: the first 8 bytes in host order before the WQE index is
    // added (opmod 0, index 0, opcode | QPN, ds with one data segment), so that one
    // 8-byte byte swap makes both big-endian words. Per send_wqe::flag_* combination:
    // send_wqe::kControl's fm_ce_se byte where it sits in the second 8 bytes (signature
    // and DCI stream channel 0, fm_ce_se, then the immediate).
    std::uint64_t ctrl_op_[small_ops] = {};
    std::uint32_t ctrl_fm_[8] = {};
    std::uint32_t size_ = 0;  // the BBs the ring holds (mask_ + 1); 0: no send queue (none())
};

}  // namespace cxv::queues
