// Completion queue entries (PRM "Completion Queue Entry Format", 64-byte CQE).
//
// The device writes CQEs; software owns a CQE when its owner bit equals the parity of
// the consumer's pass over the ring (ci >> log_cq_size). The owner bit and opcode share
// the CQE's last byte, so a reader checks it first and reads the rest only after a
// from-device barrier.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hw/endian.h"
#include "hw/opcodes.h"

namespace cxv::hw {

// A requester or responder CQE (64 bytes, the only CQE size cxv uses).
struct cqe64 {
    std::uint8_t rsvd0[2];
    be16 wqe_id;                   // striding RQ: the WQE a packet went to
    std::uint8_t rsvd4[8];
    be32 rss_hash_result;          // Ethernet RQ: the TIR's hash of the packet
    std::uint8_t rss_hash_type;    // which headers it read (cqe_rss_hash_*)
    std::uint8_t ml_path;          // source LID path bits (6:0)
    std::uint8_t rsvd20[2];
    be16 check_sum;                // Ethernet RQ: ones' complement sum of the payload after L2
    be16 slid;
    be32 flags_rqpn;               // grh presence (29:28), source QPN (23:0) for UD
    std::uint8_t hds_ip_ext;
    std::uint8_t l4_hdr_type_etc;
    be16 vlan_info;
    be32 srqn_uidx;                // SRQ number (23:0) of a receive through an SRQ
    be32 imm_inval_pkey;           // immediate data as sent (big-endian), or pkey index
    std::uint8_t app;
    std::uint8_t app_op;
    be16 app_info;
    be32 byte_cnt;                 // bytes received, or transferred by RDMA READ/atomic
    be64 timestamp;
    be32 sop_drop_qpn;             // QPN (23:0)
    be16 wqe_counter;              // index of the WQE this CQE completes
    std::uint8_t signature;
    std::uint8_t op_own;           // opcode (7:4), cqe format (3:2), se (1), owner (0)
};
static_assert(sizeof(cqe64) == 64);
static_assert(offsetof(cqe64, wqe_id) == 2 && offsetof(cqe64, ml_path) == 17);
static_assert(offsetof(cqe64, slid) == 22 && offsetof(cqe64, flags_rqpn) == 24);
static_assert(offsetof(cqe64, vlan_info) == 30 && offsetof(cqe64, srqn_uidx) == 32);
static_assert(offsetof(cqe64, imm_inval_pkey) == 36 && offsetof(cqe64, byte_cnt) == 44);
static_assert(offsetof(cqe64, timestamp) == 48);
static_assert(offsetof(cqe64, sop_drop_qpn) == 56 && offsetof(cqe64, wqe_counter) == 60);
static_assert(offsetof(cqe64, signature) == 62 && offsetof(cqe64, op_own) == 63);
// Linux's struct mlx5_cqe64 (include/linux/mlx5/device.h) names the Ethernet fields.
static_assert(offsetof(cqe64, rss_hash_result) == 12 && offsetof(cqe64, rss_hash_type) == 16);
static_assert(offsetof(cqe64, check_sum) == 20);

// An Ethernet receive CQE's description of the packet (PRM "Completion Queue Entry
// Format"): hds_ip_ext's checks that passed, l4_hdr_type_etc's header types (L4 in 6:4,
// L3 in 3:2, a VLAN tag present in 0), rss_hash_type's hashed headers (IP version in 3:2,
// L4 in 7:6). Names as rdma-core's mlx5dv.h (MLX5_CQE_L*_OK, MLX5_CQE_L3_HDR_TYPE_*) and
// Linux's device.h (CQE_L4_HDR_TYPE_*, CQE_RSS_HTYPE_*) give them.
enum cqe_checks : std::uint8_t { cqe_l2_ok = 1u << 0, cqe_l3_ok = 1u << 1, cqe_l4_ok = 1u << 2 };
enum class cqe_l3_hdr_type : std::uint8_t { NONE = 0x0, IPV6 = 0x1, IPV4 = 0x2 };
enum class cqe_l4_hdr_type : std::uint8_t { NONE = 0x0, TCP_NO_ACK = 0x1, UDP = 0x2, TCP_ACK_NO_DATA = 0x3,
                                            TCP_ACK_AND_DATA = 0x4 };
constexpr std::uint8_t cqe_l4_l3_hdr_type(cqe_l4_hdr_type l4, cqe_l3_hdr_type l3, bool vlan) noexcept {
    return static_cast<std::uint8_t>(static_cast<unsigned>(l4) << 4 | static_cast<unsigned>(l3) << 2 | (vlan ? 1u : 0u));
}
enum cqe_rss_hash : std::uint8_t {
    cqe_rss_hash_ipv4 = 1u << 2,
    cqe_rss_hash_ipv6 = 2u << 2,
    cqe_rss_hash_tcp = 1u << 6,
    cqe_rss_hash_udp = 2u << 6,
};
// A striding RQ's CQE byte_cnt (PRM "Multi-Packet WQE"; Linux MLX5_MPWRQ_*): a filler
// (strides skipped, no packet) in bit 31, the strides the packet took in 30:16, its bytes
// in 15:0; wqe_counter is the first stride's index in the WQE, wqe_id the WQE.
inline constexpr std::uint32_t mpwrq_filler = 1u << 31, mpwrq_strides_shift = 16, mpwrq_strides_mask = 0x7fff0000,
                               mpwrq_byte_cnt_mask = 0xffff;

// The same 64 bytes when the opcode is REQ_ERR or RESP_ERR.
struct err_cqe64 {
    std::uint8_t rsvd0[32];
    be32 srqn;
    std::uint8_t rsvd1[18];
    std::uint8_t vendor_err_synd;
    std::uint8_t syndrome;         // cqe_syndrome
    be32 s_wqe_opcode_qpn;         // opcode of the failed send WQE (31:24), QPN (23:0)
    be16 wqe_counter;
    std::uint8_t signature;
    std::uint8_t op_own;
};
static_assert(sizeof(err_cqe64) == 64);
static_assert(offsetof(err_cqe64, srqn) == 32 && offsetof(err_cqe64, vendor_err_synd) == 54);
static_assert(offsetof(err_cqe64, syndrome) == 55 && offsetof(err_cqe64, s_wqe_opcode_qpn) == 56);

inline constexpr std::uint8_t cqe_owner_mask = 0x1;
inline constexpr unsigned cqe_opcode_shift = 4;

constexpr cqe_opcode cqe_get_opcode(std::uint8_t op_own) noexcept {
    return static_cast<cqe_opcode>(op_own >> cqe_opcode_shift);
}
constexpr std::uint8_t cqe_get_owner(std::uint8_t op_own) noexcept { return op_own & cqe_owner_mask; }
constexpr bool cqe_get_se(std::uint8_t op_own) noexcept { return (op_own >> 1) & 1; }
constexpr std::uint8_t cqe_get_format(std::uint8_t op_own) noexcept { return (op_own >> 2) & 3; }
constexpr std::uint8_t make_op_own(cqe_opcode op, bool se, std::uint8_t owner) noexcept {
    return static_cast<std::uint8_t>((static_cast<unsigned>(op) << cqe_opcode_shift) |
                                     (se ? 2u : 0u) | (owner & cqe_owner_mask));
}

constexpr std::uint32_t cqe_qpn(const cqe64& c) noexcept { return c.sop_drop_qpn.value() & 0xffffff; }
constexpr std::uint32_t cqe_srqn(const cqe64& c) noexcept { return c.srqn_uidx.value() & 0xffffff; }
constexpr std::uint32_t cqe_src_qpn(const cqe64& c) noexcept { return c.flags_rqpn.value() & 0xffffff; }
// GRH presence of a received UD packet (flags_rqpn bits 29:28; 0 = no GRH).
constexpr std::uint8_t cqe_grh(const cqe64& c) noexcept { return (c.flags_rqpn.value() >> 28) & 3; }
constexpr std::uint8_t err_cqe_wqe_opcode(const err_cqe64& c) noexcept {
    return static_cast<std::uint8_t>(c.s_wqe_opcode_qpn.value() >> 24);
}
constexpr std::uint32_t err_cqe_qpn(const err_cqe64& c) noexcept {
    return c.s_wqe_opcode_qpn.value() & 0xffffff;
}

}  // namespace cxv::hw
