// Work queue element segments (PRM "Work Queue Elements": send WQE segments, receive
// WQE scatter entries, SRQ next segment) and their builders.
//
// Plain structures of big-endian types with offset asserts. A send WQE is built from
// 16-byte "octowords" (ds counts them) inside 64-byte basic blocks (WQEBBs); a receive
// WQE is a list of data segments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/endian.h"
#include "hw/opcodes.h"

namespace cxv::hw {

inline constexpr std::size_t send_wqe_bb = 64;         // bytes in a send WQE basic block
inline constexpr unsigned send_wqe_shift = 6;
inline constexpr std::size_t wqe_octoword = 16;        // the unit of ctrl.ds
inline constexpr std::uint32_t inline_seg_flag = 0x80000000u;  // byte_count of inline data
inline constexpr std::uint32_t invalid_lkey = 0x100;   // ends a short scatter list (PRM)
inline constexpr std::uint32_t extended_ud_av = 0x80000000u;   // dqp_dct: 48-byte AV

// Control segment fm_ce_se byte: fence mode (bits 7:5), completion event (bits 3:2),
// solicited event (bit 1).
enum class fence_mode : std::uint8_t {
    none = 0,
    initiator_small = 1,
    fence = 2,
    strong_ordering = 3,
    small_and_fence = 4,
};
inline constexpr std::uint8_t ctrl_fence_shift = 5;
inline constexpr std::uint8_t ctrl_cq_update = 2 << 2;  // request a CQE for this WQE
inline constexpr std::uint8_t ctrl_solicited = 1 << 1;

constexpr std::uint8_t fm_ce_se(fence_mode fm, bool cq_update, bool solicited) noexcept {
    return static_cast<std::uint8_t>((static_cast<unsigned>(fm) << ctrl_fence_shift) |
                                     (cq_update ? ctrl_cq_update : 0) |
                                     (solicited ? ctrl_solicited : 0));
}

// The first 16 bytes of every send WQE.
struct wqe_ctrl_seg {
    be32 opmod_idx_opcode;  // opmod (31:24), wqe_index (23:8), opcode (7:0)
    be32 qpn_ds;            // qpn (31:8), ds (5:0): WQE size in octowords
    std::uint8_t signature;
    std::uint8_t dci_stream_channel_id[2];
    std::uint8_t fm_ce_se;
    be32 imm;               // immediate data / invalidation key, already big-endian
};
static_assert(sizeof(wqe_ctrl_seg) == 16);
static_assert(offsetof(wqe_ctrl_seg, qpn_ds) == 4);
static_assert(offsetof(wqe_ctrl_seg, signature) == 8);
static_assert(offsetof(wqe_ctrl_seg, fm_ce_se) == 11);
static_assert(offsetof(wqe_ctrl_seg, imm) == 12);

// RDMA READ/WRITE and atomics: the remote buffer.
struct wqe_raddr_seg {
    be64 raddr;
    be32 rkey;
    be32 reserved;
};
static_assert(sizeof(wqe_raddr_seg) == 16);
static_assert(offsetof(wqe_raddr_seg, rkey) == 8);

// Atomic compare-and-swap / fetch-and-add operands.
struct wqe_atomic_seg {
    be64 swap_add;
    be64 compare;
};
static_assert(sizeof(wqe_atomic_seg) == 16);

// A scatter/gather entry (send gather list, receive scatter list).
struct wqe_data_seg {
    be32 byte_count;
    be32 lkey;
    be64 addr;
};
static_assert(sizeof(wqe_data_seg) == 16);
static_assert(offsetof(wqe_data_seg, lkey) == 4 && offsetof(wqe_data_seg, addr) == 8);

// Ethernet segment of a raw send WQE (PRM "Ethernet Segment"), after the control
// segment: checksum offloads (cs_flags), the LSO segment size, and the first
// inline_hdr_sz bytes of the frame inline, 2 in inline_hdr_start and the rest from
// inline_hdr on, in as many 16-byte octowords as they need.
struct wqe_eth_seg {
    be32 rsvd0;
    std::uint8_t cs_flags;
    std::uint8_t rsvd1;
    be16 mss;
    be32 rsvd2;
    be16 inline_hdr_sz;
    std::uint8_t inline_hdr_start[2];
    std::uint8_t inline_hdr[16];
};
static_assert(sizeof(wqe_eth_seg) == 32);
static_assert(offsetof(wqe_eth_seg, cs_flags) == 4 && offsetof(wqe_eth_seg, mss) == 6);
static_assert(offsetof(wqe_eth_seg, inline_hdr_sz) == 12 && offsetof(wqe_eth_seg, inline_hdr_start) == 14);
inline constexpr std::uint8_t eth_wqe_l3_csum = 1u << 6, eth_wqe_l4_csum = 1u << 7;  // cs_flags

// Inline data header: byte_count | inline_seg_flag, followed by the data itself,
// padded to a 16-byte boundary.
struct wqe_inline_seg {
    be32 byte_count;
};
static_assert(sizeof(wqe_inline_seg) == 4);

// UD address vector (the datagram segment of a UD send WQE), 48 bytes.
struct wqe_av {
    be32 qkey;              // Q_Key for UD (the first half of dc_key for DC)
    be32 dc_key_low;
    be32 dqp_dct;           // extended_ud_av | destination QPN
    std::uint8_t stat_rate_sl;
    std::uint8_t fl_mlid;   // force loopback (7), source LID path bits (6:0)
    be16 rlid;
    std::uint8_t reserved0[4];
    std::uint8_t rmac[6];
    std::uint8_t tclass;
    std::uint8_t hop_limit;
    be32 grh_gid_fl;        // grh (30), sgid_index (27:20), flow_label (19:0)
    std::uint8_t rgid[16];
};
static_assert(sizeof(wqe_av) == 48);
static_assert(offsetof(wqe_av, dqp_dct) == 8 && offsetof(wqe_av, rlid) == 14);
static_assert(offsetof(wqe_av, rmac) == 20 && offsetof(wqe_av, tclass) == 26);
static_assert(offsetof(wqe_av, grh_gid_fl) == 28 && offsetof(wqe_av, rgid) == 32);

struct wqe_datagram_seg {
    wqe_av av;
};
static_assert(sizeof(wqe_datagram_seg) == 48);

// The first 16 bytes of every SRQ WQE: links the free list of WQEs.
struct wqe_srq_next_seg {
    std::uint8_t rsvd0[2];
    be16 next_wqe_index;
    std::uint8_t signature;
    std::uint8_t rsvd1[11];
};
static_assert(sizeof(wqe_srq_next_seg) == 16);
static_assert(offsetof(wqe_srq_next_seg, next_wqe_index) == 2);

// UMR control segment (PRM "UMR Control Segment"), after the control segment of a UMR
// WQE (opcode UMR; the control segment's imm holds the memory key it modifies, big-endian).
// The memory key context segment follows (the mkc layout, 64 bytes), then the translation
// entries: inline (umr_inline) or through one data segment. xlt_octowords 16-byte units
// of entries (two MTTs each) go to the key's table from entry 2 * xlt_offset on
// (umr_translation_offset_en; else from entry 0). mkey_mask names the context fields the
// UMR writes (umr_mask_*).
struct wqe_umr_ctrl_seg {
    std::uint8_t flags;
    std::uint8_t rsvd0[3];
    be16 xlt_octowords;
    be16 xlt_offset;        // bits 15:0 of the offset, in octowords
    be64 mkey_mask;
    be32 xlt_offset_47_16;  // bits 47:16 of the offset
    std::uint8_t rsvd1[28];
};
static_assert(sizeof(wqe_umr_ctrl_seg) == 48);
static_assert(offsetof(wqe_umr_ctrl_seg, xlt_octowords) == 4 && offsetof(wqe_umr_ctrl_seg, mkey_mask) == 8);
static_assert(offsetof(wqe_umr_ctrl_seg, xlt_offset_47_16) == 16);
inline constexpr std::size_t umr_mkey_seg_size = 64;  // the mkc layout
// flags: the entries inline after the context segment; the offset fields valid; and a
// check of the key's state first (bits 6:5): 1 the key must be free (enabling it; Linux
// names this value MLX5_UMR_CHECK_NOT_FREE, rdma-core ..._CHECK_FREE), 2 it must not be.
inline constexpr std::uint8_t umr_inline = 1u << 7;
inline constexpr std::uint8_t umr_translation_offset_en = 1u << 4;
inline constexpr unsigned umr_check_shift = 5;
inline constexpr std::uint8_t umr_check_mask = 3u << umr_check_shift;
inline constexpr std::uint8_t umr_check_key_free = 1u << umr_check_shift;
inline constexpr std::uint8_t umr_check_key_not_free = 2u << umr_check_shift;
// mkey_mask bits: which fields of the context segment the UMR writes.
inline constexpr std::uint64_t umr_mask_len = 1ull << 0;         // len, length64
inline constexpr std::uint64_t umr_mask_page_size = 1ull << 1;   // log_page_size
inline constexpr std::uint64_t umr_mask_start_addr = 1ull << 6;
inline constexpr std::uint64_t umr_mask_pd = 1ull << 7;
inline constexpr std::uint64_t umr_mask_en_rinval = 1ull << 8;
inline constexpr std::uint64_t umr_mask_en_sigerr = 1ull << 9;
inline constexpr std::uint64_t umr_mask_bsf_en = 1ull << 12;
inline constexpr std::uint64_t umr_mask_key = 1ull << 13;        // mkey_7_0
inline constexpr std::uint64_t umr_mask_qpn = 1ull << 14;
inline constexpr std::uint64_t umr_mask_lr = 1ull << 17;
inline constexpr std::uint64_t umr_mask_lw = 1ull << 18;
inline constexpr std::uint64_t umr_mask_rr = 1ull << 19;
inline constexpr std::uint64_t umr_mask_rw = 1ull << 20;
inline constexpr std::uint64_t umr_mask_a = 1ull << 21;
inline constexpr std::uint64_t umr_mask_small_fence = 1ull << 23;
inline constexpr std::uint64_t umr_mask_relaxed_ordering_write = 1ull << 25;
inline constexpr std::uint64_t umr_mask_free = 1ull << 29;
inline constexpr std::uint64_t umr_mask_relaxed_ordering_read = 1ull << 47;

// --- builders -------------------------------------------------------------------------

inline void set_ctrl_seg(wqe_ctrl_seg& s, std::uint16_t wqe_index, wqe_opcode opcode,
                         std::uint8_t opmod, std::uint32_t qpn, std::uint8_t ds,
                         std::uint8_t fm_ce_se_bits, be32 imm = {},
                         std::uint8_t signature = 0) noexcept {
    s.opmod_idx_opcode = be32::from((std::uint32_t{opmod} << 24) |
                                    (std::uint32_t{wqe_index} << 8) |
                                    static_cast<std::uint8_t>(opcode));
    s.qpn_ds = be32::from((qpn << 8) | ds);
    s.signature = signature;
    s.dci_stream_channel_id[0] = 0;
    s.dci_stream_channel_id[1] = 0;
    s.fm_ce_se = fm_ce_se_bits;
    s.imm = imm;
}

inline void set_raddr_seg(wqe_raddr_seg& s, std::uint64_t raddr, std::uint32_t rkey) noexcept {
    s.raddr = be64::from(raddr);
    s.rkey = be32::from(rkey);
    s.reserved = {};
}

inline void set_atomic_seg(wqe_atomic_seg& s, std::uint64_t swap_add, std::uint64_t compare) noexcept {
    s.swap_add = be64::from(swap_add);
    s.compare = be64::from(compare);
}

inline void set_data_seg(wqe_data_seg& s, std::uint32_t length, std::uint32_t lkey,
                         std::uint64_t addr) noexcept {
    s.byte_count = be32::from(length);
    s.lkey = be32::from(lkey);
    s.addr = be64::from(addr);
}

inline void set_inline_seg(wqe_inline_seg& s, std::uint32_t length) noexcept {
    s.byte_count = be32::from(length | inline_seg_flag);
}

// UD address vector. grh_gid_fl and the GID matter only with a GRH (RoCE or routed IB).
inline void set_datagram_seg(wqe_datagram_seg& s, std::uint32_t qkey, std::uint32_t dqpn,
                             bool extended, std::uint8_t stat_rate_sl, std::uint8_t fl_mlid,
                             std::uint16_t rlid, const std::uint8_t (&rmac)[6],
                             std::uint8_t tclass, std::uint8_t hop_limit,
                             std::uint32_t grh_gid_fl, const std::uint8_t (&rgid)[16]) noexcept {
    s.av.qkey = be32::from(qkey);
    s.av.dc_key_low = {};
    s.av.dqp_dct = be32::from(dqpn | (extended ? extended_ud_av : 0));
    s.av.stat_rate_sl = stat_rate_sl;
    s.av.fl_mlid = fl_mlid;
    s.av.rlid = be16::from(rlid);
    std::memset(s.av.reserved0, 0, sizeof(s.av.reserved0));
    std::memcpy(s.av.rmac, rmac, sizeof(s.av.rmac));
    s.av.tclass = tclass;
    s.av.hop_limit = hop_limit;
    s.av.grh_gid_fl = be32::from(grh_gid_fl);
    std::memcpy(s.av.rgid, rgid, sizeof(s.av.rgid));
}

inline void set_srq_next_seg(wqe_srq_next_seg& s, std::uint16_t next_wqe_index) noexcept {
    std::memset(&s, 0, sizeof(s));
    s.next_wqe_index = be16::from(next_wqe_index);
}

// --- readers (the device side, and printers) ---------------------------------------------

constexpr wqe_opcode ctrl_opcode(const wqe_ctrl_seg& s) noexcept {
    return static_cast<wqe_opcode>(s.opmod_idx_opcode.value() & 0xff);
}
constexpr std::uint16_t ctrl_wqe_index(const wqe_ctrl_seg& s) noexcept {
    return static_cast<std::uint16_t>(s.opmod_idx_opcode.value() >> 8);
}
constexpr std::uint8_t ctrl_opmod(const wqe_ctrl_seg& s) noexcept {
    return static_cast<std::uint8_t>(s.opmod_idx_opcode.value() >> 24);
}
constexpr std::uint32_t ctrl_qpn(const wqe_ctrl_seg& s) noexcept { return s.qpn_ds.value() >> 8; }
constexpr std::uint8_t ctrl_ds(const wqe_ctrl_seg& s) noexcept {
    return static_cast<std::uint8_t>(s.qpn_ds.value() & 0x3f);
}
constexpr fence_mode ctrl_fence(const wqe_ctrl_seg& s) noexcept {
    return static_cast<fence_mode>(s.fm_ce_se >> ctrl_fence_shift);
}
constexpr bool ctrl_cq_update_set(const wqe_ctrl_seg& s) noexcept {
    return (s.fm_ce_se & ctrl_cq_update) != 0;
}
constexpr bool ctrl_solicited_set(const wqe_ctrl_seg& s) noexcept {
    return (s.fm_ce_se & ctrl_solicited) != 0;
}

}  // namespace cxv::hw
