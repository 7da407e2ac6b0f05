// The raw Ethernet fast path: frames out of an SQ, packets out of an RQ (PRM "Send WQE"
// with its Ethernet segment, "Receive WQE", "Striding RQ", "Completion Queue Entry
// Format").
//
// Send: a SEND WQE of a control segment, the Ethernet segment carrying the frame's first
// bytes inline (inline_hdr_sz, the checksums asked in cs_flags), and a data segment for
// the rest of a frame in registered memory, or the whole frame inline. The SQ's ring is
// a send_queue (its BlueFlame and doorbell paths); its CQ is read by eth_send_cq.
//
// Receive: every WQE of the RQ is written once, at start, with a buffer of its own; the
// buffers never move. A packet is handed out as a pointer into its buffer, valid until the
// next poll(), which first gives the WQEs the last one emptied back to the device (the
// doorbell record's counter moves on: nothing else is written). A cyclic RQ's WQE holds
// one packet; a striding RQ's holds consecutive packets in its strides, and goes back
// once the device has closed it (its last stride used, or a filler CQE).
//
// Single thread per ring: one sender per SQ, one poller per RQ. Nothing here allocates,
// locks, calls the kernel or logs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"
#include "queues/completion_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"
#include "queues/send_wqe.h"
#include "queues/types.h"

namespace cxv::queues {

// --- send ------------------------------------------------------------------------------

// What a frame's send asks of the device (the flags of put_eth_frame, put_eth_inline).
inline constexpr unsigned eth_signaled = 1u << 0;  // a completion when it is sent
inline constexpr unsigned eth_l3_csum = 1u << 1;   // the IPv4 header checksum filled in
inline constexpr unsigned eth_l4_csum = 1u << 2;   // the TCP or UDP checksum filled in

// The frame's first bytes the Ethernet segment carries when the rest goes by pointer: the
// L2 header with room for one VLAN tag, what a card whose min_wqe_inline_mode is L2 needs
// (PRM "Ethernet Segment"; rdma-core's mlx5 provider inlines as many for a raw packet QP).
inline constexpr std::uint32_t eth_inline_header = 18;
// The largest frame put_eth_inline() carries whole in the WQE.
inline constexpr std::uint32_t eth_max_inline = 256;

namespace eth_wqe {
inline constexpr std::size_t ctrl = sizeof(hw::wqe_ctrl_seg);
// The Ethernet segment's first octoword holds inline_hdr_start's 2 bytes; the rest of the
// inline bytes follow it, padded to an octoword.
inline constexpr std::size_t eseg_head = 16;
constexpr std::uint32_t inline_bytes(std::uint32_t n) noexcept {
    return n <= 2 ? 0 : (n - 2 + 15) / 16 * 16;
}
// The BBs of the largest WQE an SQ takes: a whole eth_max_inline frame, which is larger
// than the header-and-pointer form (ctrl, Ethernet segment with 18 bytes, data segment).
constexpr unsigned max_bbs() noexcept {
    return static_cast<unsigned>((ctrl + eseg_head + inline_bytes(eth_max_inline) + hw::send_wqe_bb - 1) /
                                 hw::send_wqe_bb);
}
static_assert(ctrl + eseg_head + inline_bytes(eth_inline_header) + sizeof(hw::wqe_data_seg) == hw::send_wqe_bb,
              "a frame by pointer is one basic block");
static_assert(offsetof(hw::wqe_eth_seg, inline_hdr_start) == 14 && offsetof(hw::wqe_eth_seg, inline_hdr) == 16);

// The Ethernet segment's head (PRM "Ethernet Segment"): cs_flags, mss 0 (no LSO),
// inline_hdr_sz and the frame's first two bytes; then the rest of `n` inline bytes.
// Returns the end of the inline bytes.
[[gnu::always_inline]] inline std::byte* put_eseg(std::byte* seg, const std::byte* frame, std::uint32_t n,
                                                  unsigned flags) noexcept {
    const std::uint8_t cs = static_cast<std::uint8_t>(((flags & eth_l3_csum) ? hw::eth_wqe_l3_csum : 0) |
                                                      ((flags & eth_l4_csum) ? hw::eth_wqe_l4_csum : 0));
    std::memset(seg, 0, 12);
    seg[offsetof(hw::wqe_eth_seg, cs_flags)] = std::byte{cs};
    const hw::be16 sz = hw::be16::from(static_cast<std::uint16_t>(n));
    std::memcpy(seg + offsetof(hw::wqe_eth_seg, inline_hdr_sz), &sz, 2);
    std::memcpy(seg + offsetof(hw::wqe_eth_seg, inline_hdr_start), frame, 2);
    if (n > 2) {
        const std::uint32_t rest = n - 2;
        std::byte* const tail = seg + eseg_head;
        if (rest <= 64) {
            detail::copy_small(tail, 0, frame + 2, rest);
        } else {
            std::memcpy(tail, frame + 2, rest);
        }
        // The pad of the last octoword: zeros, so that the WQE holds no stale bytes.
        const std::uint32_t padded = inline_bytes(n);
        if (padded != rest) std::memset(tail + rest, 0, padded - rest);
    }
    return seg + eseg_head + inline_bytes(n);
}

// A verbs send of a raw packet QP (ibv_post_send(3) on IBV_QPT_RAW_PACKET) behind its
// control segment: the Ethernet segment with the frame's first eth_inline_header bytes
// (or all of a shorter one) taken from the gather list, then the rest of the list as
// data segments, or with `inl` its bytes inline. The list holds at least 14 bytes (the
// caller's check); empty pieces are left out. Returns the WQE's end.
inline std::byte* put_sges(std::byte* seg, const sge* sg, unsigned n, unsigned flags, bool inl) noexcept {
    std::byte head[eth_inline_header] = {};
    std::uint32_t got = 0, off = 0;
    unsigned i = 0;
    while (i < n && got < eth_inline_header) {
        const std::uint32_t take = std::min(sg[i].length - off, eth_inline_header - got);
        std::memcpy(head + got, reinterpret_cast<const std::byte*>(sg[i].addr) + off, take);
        got += take;
        off += take;
        if (off == sg[i].length) {
            ++i;
            off = 0;
        }
    }
    // The Ethernet segment as put_eseg writes it, for these at most 18 bytes (the clamp
    // tells the compiler so): inline_hdr_start and inline_hdr are contiguous, and the
    // segment's second octoword is zeroed first, its padding included.
    const std::uint32_t hn = got < eth_inline_header ? got : eth_inline_header;
    std::memset(seg, 0, eseg_head + 16);
    seg[offsetof(hw::wqe_eth_seg, cs_flags)] =
        std::byte{static_cast<std::uint8_t>(((flags & eth_l3_csum) ? hw::eth_wqe_l3_csum : 0) |
                                            ((flags & eth_l4_csum) ? hw::eth_wqe_l4_csum : 0))};
    const hw::be16 sz = hw::be16::from(static_cast<std::uint16_t>(hn));
    std::memcpy(seg + offsetof(hw::wqe_eth_seg, inline_hdr_sz), &sz, 2);
    std::memcpy(seg + offsetof(hw::wqe_eth_seg, inline_hdr_start), head, hn);
    std::byte* p = seg + eseg_head + inline_bytes(hn);
    if (inl) {
        std::byte* const data = p + sizeof(hw::wqe_inline_seg);
        std::uint32_t total = 0;
        for (; i < n; ++i, off = 0) {
            std::memcpy(data + total, reinterpret_cast<const std::byte*>(sg[i].addr) + off, sg[i].length - off);
            total += sg[i].length - off;
        }
        if (total == 0) return p;
        hw::set_inline_seg(*reinterpret_cast<hw::wqe_inline_seg*>(p), total);
        return p + std::size_t{send_wqe::inline_ds(total)} * send_wqe::octoword;
    }
    auto* d = reinterpret_cast<hw::wqe_data_seg*>(p);
    for (; i < n; ++i, off = 0) {
        if (sg[i].length != off) detail::put_data(d++, sge{sg[i].addr + off, sg[i].length - off, sg[i].lkey});
    }
    return reinterpret_cast<std::byte*>(d);
}
}  // namespace eth_wqe

// One frame of `len` bytes (at least 14, the Ethernet header; the device pads to the
// minimum and adds the FCS) from memory of `lkey`: its first eth_inline_header bytes in
// the WQE, the rest by a data segment (one BB). False, with nothing written, when the
// ring has no room. The caller rings (q.ring()) after one frame or a batch.
[[gnu::always_inline]] inline bool put_eth_frame(send_queue& q, const std::byte* frame, std::uint32_t len,
                                                 std::uint32_t lkey, unsigned flags, std::uint64_t id) noexcept {
    send_queue::wqe_slot s;
    if (!q.reserve(s)) [[unlikely]] return false;
    const std::uint32_t head = len < eth_inline_header ? len : eth_inline_header;
    std::byte* end = eth_wqe::put_eseg(s.w + eth_wqe::ctrl, frame, head, flags);
    if (len > head) {
        detail::put_data(reinterpret_cast<hw::wqe_data_seg*>(end),
                         sge{reinterpret_cast<std::uint64_t>(frame + head), len - head, lkey});
        end += sizeof(hw::wqe_data_seg);
    }
    q.finish(s, end, hw::wqe_opcode::SEND, (flags & eth_signaled) ? hw::ctrl_cq_update : 0, 0, id);
    return true;
}

// One frame of `len` bytes (14 to eth_max_inline) carried whole in the WQE: no memory
// key, the frame's memory free again on return.
[[gnu::always_inline]] inline bool put_eth_inline(send_queue& q, const std::byte* frame, std::uint32_t len,
                                                  unsigned flags, std::uint64_t id) noexcept {
    send_queue::wqe_slot s;
    if (!q.reserve(s)) [[unlikely]] return false;
    std::byte* const end = eth_wqe::put_eseg(s.w + eth_wqe::ctrl, frame, len, flags);
    q.finish(s, end, hw::wqe_opcode::SEND, (flags & eth_signaled) ? hw::ctrl_cq_update : 0, 0, id);
    return true;
}

// --- completions ---------------------------------------------------------------------

// A CQ of 64-byte CQEs read in order: the entry at the consumer index when it is the
// driver's (owner bit equal to the pass's parity, opcode not INVALID), then from_device()
// before its other bytes are read.
class cqe_reader {
public:
    cqe_reader() = default;
    cqe_reader(std::byte* cqes, unsigned log_count, hw::cq_doorbell_record* dbrec) noexcept
        : cqes_(cqes), dbrec_(dbrec), mask_((1u << log_count) - 1), log_(log_count) {}

    [[gnu::always_inline]] const hw::cqe64* peek() const noexcept {
        const auto* c = reinterpret_cast<const hw::cqe64*>(cqes_ + (std::size_t{ci_ & mask_} << 6));
        const std::uint8_t op_own = c->op_own;
        if ((((op_own ^ (ci_ >> log_)) & hw::cqe_owner_mask) != 0) ||
            (op_own >> hw::cqe_opcode_shift) == static_cast<std::uint8_t>(hw::cqe_opcode::INVALID)) {
            return nullptr;
        }
        hw::from_device();
        return c;
    }
    void pop() noexcept { ++ci_; }
    // The consumer index to the doorbell record: the entries read are the device's again.
    [[gnu::always_inline]] void publish() noexcept {
        hw::to_device();
        dbrec_->update_ci = hw::be32::from(ci_ & 0xffffff);
    }
    std::uint32_t consumer_index() const noexcept { return ci_; }

private:
    std::byte* cqes_ = nullptr;
    hw::cq_doorbell_record* dbrec_ = nullptr;
    std::uint32_t mask_ = 0, log_ = 0, ci_ = 0;
};

// A send completion: the id the frame was sent with, the device clock when it left
// (ticks), and wc_success or the error's wc_status (with the PRM syndrome).
struct eth_send_completion {
    std::uint64_t id;
    std::uint64_t timestamp;
    std::uint32_t status;
    std::uint8_t syndrome;
    std::uint8_t vendor_syndrome;
};

// The CQ of one SQ: each completion retires its WQE and the unsignaled ones before it.
class eth_send_cq {
public:
    eth_send_cq() = default;
    eth_send_cq(const cqe_reader& r, send_queue* sq) noexcept : cq_(r), sq_(sq) {}
    int poll(eth_send_completion* out, int max) noexcept {
        int n = 0;
        while (n < max) {
            const hw::cqe64* c = cq_.peek();
            if (c == nullptr) break;
            cq_.pop();
            eth_send_completion& e = out[n++];
            const auto op = hw::cqe_get_opcode(c->op_own);
            e.id = sq_->retire(c->wqe_counter.value());
            e.timestamp = c->timestamp.value();
            if (op == hw::cqe_opcode::REQ) [[likely]] {
                e.status = wc_success;
                e.syndrome = e.vendor_syndrome = 0;
            } else {
                const auto& err = reinterpret_cast<const hw::err_cqe64&>(*c);
                e.status = op == hw::cqe_opcode::REQ_ERR ? status_of(static_cast<hw::cqe_syndrome>(err.syndrome))
                                                          : wc_general_err;
                e.syndrome = err.syndrome;
                e.vendor_syndrome = err.vendor_err_synd;
            }
        }
        if (n != 0) cq_.publish();
        return n;
    }

private:
    cqe_reader cq_;
    send_queue* sq_ = nullptr;
};

// --- receive -------------------------------------------------------------------------

// A received packet as poll() hands it out. `data` points into the RQ's buffers and
// stays valid until the next poll().
struct eth_packet {
    const std::byte* data;
    std::uint32_t length;
    std::uint32_t flow_tag;   // the steering rule's tag (24 bits; 0 when it set none)
    std::uint32_t rss_hash;   // the TIR's hash of the headers it reads (0 for a direct TIR)
    std::uint16_t vlan_tci;   // the tag the device removed, when `headers` bit 0 says so
    std::uint8_t rss_type;    // what the hash read: hw::cqe_rss_hash_* bits
    std::uint8_t checks;      // hw::cqe_checks: the L2, L3 and L4 checks that passed
    std::uint8_t headers;     // L4 type (6:4), L3 type (3:2), a VLAN tag removed (0)
    std::uint64_t timestamp;  // the device clock when it arrived (ticks)

    bool l3_ok() const noexcept { return (checks & hw::cqe_l3_ok) != 0; }
    bool l4_ok() const noexcept { return (checks & hw::cqe_l4_ok) != 0; }
    bool vlan_stripped() const noexcept { return (headers & 1) != 0; }
};

class eth_recv_queue {
public:
    // The rings and the buffers the RQ's WQEs point to.
    struct layout {
        std::byte* wqes = nullptr;   // 2^log_wqes WQEs of 2^wqe_shift bytes
        unsigned log_wqes = 0;
        unsigned wqe_shift = 4;
        hw::wq_doorbell_record* dbrec = nullptr;
        std::byte* buffers = nullptr;  // 2^log_wqes buffers of 2^log_buffer bytes, in memory of lkey
        unsigned log_buffer = 11;
        std::uint32_t lkey = 0;
        // Striding: each WQE's buffer is 2^log_strides strides of 2^log_stride bytes (their
        // product is 2^log_buffer); 0: a cyclic RQ.
        unsigned log_strides = 0;
        unsigned log_stride = 0;
        cqe_reader cq;
    };
    eth_recv_queue() = default;
    explicit eth_recv_queue(const layout& l) noexcept
        : wqes_(l.wqes), dbrec_(l.dbrec), buffers_(l.buffers), cq_(l.cq), mask_((1u << l.log_wqes) - 1),
          wqe_shift_(l.wqe_shift), log_buffer_(l.log_buffer), log_stride_(l.log_stride), lkey_(l.lkey),
          strides_(l.log_strides != 0 ? 1u << l.log_strides : 0) {
        if (l.dbrec != nullptr) hw::clear_wq_counter_reserved(l.dbrec->rcv_counter);  // (store_wq_counter)
    }

    // Every WQE written with its buffer, and all of them posted: the RQ may be RDY.
    void start() noexcept {
        const std::uint32_t n = mask_ + 1;
        const std::uint32_t bytes = 1u << log_buffer_;
        for (std::uint32_t i = 0; i < n; ++i) {
            std::byte* w = wqes_ + (std::size_t{i} << wqe_shift_);
            std::memset(w, 0, std::size_t{1} << wqe_shift_);
            // A striding WQE starts with its next segment (unused by a cyclic ring), then
            // its one scatter entry; a cyclic one is its scatter entry.
            if (strides_ != 0) w += sizeof(hw::wqe_srq_next_seg);
            detail::put_data(reinterpret_cast<hw::wqe_data_seg*>(w),
                             sge{reinterpret_cast<std::uint64_t>(buffers_ + (std::size_t{i} << log_buffer_)), bytes,
                                 lkey_});
        }
        pi_ = n;
        hw::to_device();
        hw::store_wq_counter(dbrec_->rcv_counter, pi_);
    }

    // Up to `max` packets received since the last call. The WQEs the last call emptied go
    // back to the device first: the packets it handed out are no longer valid.
    [[gnu::always_inline]] int poll(eth_packet* out, int max) noexcept {
        if (done_ != 0) release();
        int n = 0;
        bool took = false;
        while (n < max) {
            const hw::cqe64* c = cq_.peek();
            if (c == nullptr) break;
            cq_.pop();
            took = true;
            if (hw::cqe_get_opcode(c->op_own) != hw::cqe_opcode::RESP_SEND) [[unlikely]] {
                other(*c);
                continue;
            }
            const std::uint32_t bc = c->byte_cnt.value();
            eth_packet& p = out[n];
            if (strides_ != 0) {
                const std::uint32_t first = c->wqe_counter.value();
                const std::uint32_t used = (bc & hw::mpwrq_strides_mask) >> hw::mpwrq_strides_shift;
                if (first + used >= strides_) ++done_;  // the WQE is closed
                if (bc & hw::mpwrq_filler) continue;    // strides skipped, no packet
                p.data = buffers_ + (std::size_t{c->wqe_id.value() & mask_} << log_buffer_) +
                         (std::size_t{first} << log_stride_);
                p.length = bc & hw::mpwrq_byte_cnt_mask;
            } else {
                p.data = buffers_ + (std::size_t{c->wqe_counter.value() & mask_} << log_buffer_);
                p.length = bc;
                ++done_;
            }
            p.flow_tag = c->sop_drop_qpn.value() & 0xffffff;
            p.rss_hash = c->rss_hash_result.value();
            p.vlan_tci = c->vlan_info.value();
            p.rss_type = c->rss_hash_type;
            p.checks = c->hds_ip_ext;
            p.headers = c->l4_hdr_type_etc;
            p.timestamp = c->timestamp.value();
            ++n;
        }
        if (took) cq_.publish();
        return n;
    }

    // Completions other than a packet: a receive error (the WQE is used, its packet lost:
    // a cyclic WQE too small for it) and anything unexpected.
    std::uint64_t errors() const noexcept { return errors_; }
    std::uint32_t posted() const noexcept { return pi_; }
    unsigned capacity() const noexcept { return mask_ + 1; }

private:
    void release() noexcept {
        pi_ += done_;
        done_ = 0;
        // The packets read before the WQEs are the device's again (PRM "Doorbell Record").
        hw::to_device();
        hw::store_wq_counter(dbrec_->rcv_counter, pi_);
    }
    [[gnu::noinline]] void other(const hw::cqe64& c) noexcept {
        ++errors_;
        // A cyclic WQE's error CQE uses the WQE up; a striding RQ reports none here.
        if (strides_ == 0 && hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::RESP_ERR) ++done_;
    }

    std::byte* wqes_ = nullptr;
    hw::wq_doorbell_record* dbrec_ = nullptr;
    std::byte* buffers_ = nullptr;
    cqe_reader cq_;
    std::uint32_t mask_ = 0;
    unsigned wqe_shift_ = 4, log_buffer_ = 11, log_stride_ = 0;
    std::uint32_t lkey_ = 0;
    std::uint32_t strides_ = 0;  // per WQE; 0: cyclic
    std::uint32_t pi_ = 0;       // WQEs posted
    std::uint32_t done_ = 0;     // WQEs emptied, posted again at the next poll
    std::uint64_t errors_ = 0;
};

}  // namespace cxv::queues
