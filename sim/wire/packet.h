// One InfiniBand transport packet as the model's ports carry it (IBA 5 "Data Packet
// Format", 9.2-9.5 "Base and Extended Transport Headers"): the network part a port adds
// and removes (Ethernet/IP/UDP for RoCEv2, the LRH and GRH on InfiniBand), the BTH, the
// extended headers its opcode calls for, and the payload. The transport engine fills and
// reads the transport part; the port (sim/wire/frame.h) turns it into bytes on the wire
// and back, with the ICRC (and VCRC).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/wire/payload.h"

namespace cxv::sim::wire {

// BTH OpCode (IBA Table 35 "OpCode Field"): the transport in bits 7:5, the operation in
// bits 4:0. The operation codes are the same for RC and UC (UC has no READ, ACK or
// atomics); UD has SEND Only with and without immediate.
namespace opcode {
inline constexpr std::uint8_t RC = 0x00, UC = 0x20, RD = 0x40, UD = 0x60;
inline constexpr std::uint8_t SEND_FIRST = 0x00, SEND_MIDDLE = 0x01, SEND_LAST = 0x02,
                              SEND_LAST_WITH_IMMEDIATE = 0x03, SEND_ONLY = 0x04,
                              SEND_ONLY_WITH_IMMEDIATE = 0x05, RDMA_WRITE_FIRST = 0x06,
                              RDMA_WRITE_MIDDLE = 0x07, RDMA_WRITE_LAST = 0x08,
                              RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, RDMA_WRITE_ONLY = 0x0a,
                              RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, RDMA_READ_REQUEST = 0x0c,
                              RDMA_READ_RESPONSE_FIRST = 0x0d, RDMA_READ_RESPONSE_MIDDLE = 0x0e,
                              RDMA_READ_RESPONSE_LAST = 0x0f, RDMA_READ_RESPONSE_ONLY = 0x10,
                              ACKNOWLEDGE = 0x11, ATOMIC_ACKNOWLEDGE = 0x12, COMPARE_SWAP = 0x13,
                              FETCH_ADD = 0x14, SEND_LAST_WITH_INVALIDATE = 0x16,
                              SEND_ONLY_WITH_INVALIDATE = 0x17;
constexpr std::uint8_t transport_of(std::uint8_t op) { return op & 0xe0; }
constexpr std::uint8_t operation_of(std::uint8_t op) { return op & 0x1f; }
}  // namespace opcode

// Which headers follow the BTH for an opcode (IBA Table 38 "Header Formats"), and the
// packet's place in its message.
enum header_bits : std::uint16_t {
    has_reth = 1 << 0,
    has_aeth = 1 << 1,
    has_deth = 1 << 2,
    has_immdt = 1 << 3,
    has_ieth = 1 << 4,
    has_atomiceth = 1 << 5,
    has_atomicacketh = 1 << 6,
    has_payload = 1 << 7,  // may carry payload (may be 0 bytes for an Only)
    is_first = 1 << 8,
    is_middle = 1 << 9,
    is_last = 1 << 10,     // Last and Only are both "last"; Only is first and last
    is_request = 1 << 11,  // requester to responder (everything but ACKs and responses)
};
namespace detail {
constexpr std::uint16_t headers_by_switch(std::uint8_t op) {
    using namespace opcode;
    constexpr std::uint16_t req = is_request, pay = has_payload, only = is_first | is_last;
    const std::uint8_t tp = transport_of(op), o = operation_of(op);
    if (tp == UD) {
        if (o == SEND_ONLY) return req | has_deth | pay | only;
        if (o == SEND_ONLY_WITH_IMMEDIATE) return req | has_deth | has_immdt | pay | only;
        return 0;
    }
    if (tp != RC && tp != UC) return 0;
    std::uint16_t h = 0;
    switch (o) {
    case SEND_FIRST: h = req | pay | is_first; break;
    case SEND_MIDDLE: h = req | pay | is_middle; break;
    case SEND_LAST: h = req | pay | is_last; break;
    case SEND_LAST_WITH_IMMEDIATE: h = req | pay | is_last | has_immdt; break;
    case SEND_ONLY: h = req | pay | only; break;
    case SEND_ONLY_WITH_IMMEDIATE: h = req | pay | only | has_immdt; break;
    case RDMA_WRITE_FIRST: h = req | pay | is_first | has_reth; break;
    case RDMA_WRITE_MIDDLE: h = req | pay | is_middle; break;
    case RDMA_WRITE_LAST: h = req | pay | is_last; break;
    case RDMA_WRITE_LAST_WITH_IMMEDIATE: h = req | pay | is_last | has_immdt; break;
    case RDMA_WRITE_ONLY: h = req | pay | only | has_reth; break;
    case RDMA_WRITE_ONLY_WITH_IMMEDIATE: h = req | pay | only | has_reth | has_immdt; break;
    default: break;
    }
    if (h != 0 || tp == UC) return h;
    switch (o) {  // RC only
    case RDMA_READ_REQUEST: return req | only | has_reth;
    case RDMA_READ_RESPONSE_FIRST: return pay | is_first | has_aeth;
    case RDMA_READ_RESPONSE_MIDDLE: return pay | is_middle;
    case RDMA_READ_RESPONSE_LAST: return pay | is_last | has_aeth;
    case RDMA_READ_RESPONSE_ONLY: return pay | only | has_aeth;
    case ACKNOWLEDGE: return only | has_aeth;
    case ATOMIC_ACKNOWLEDGE: return only | has_aeth | has_atomicacketh;
    case COMPARE_SWAP:
    case FETCH_ADD: return req | only | has_atomiceth;
    case SEND_LAST_WITH_INVALIDATE: return req | pay | is_last | has_ieth;
    case SEND_ONLY_WITH_INVALIDATE: return req | pay | only | has_ieth;
    default: return 0;
    }
}
inline constexpr std::array<std::uint16_t, 256> header_table = [] {
    std::array<std::uint16_t, 256> t{};
    for (unsigned op = 0; op < 256; ++op) t[op] = headers_by_switch(static_cast<std::uint8_t>(op));
    return t;
}();
}  // namespace detail
// 0 for an opcode the model does not know (reserved, RD, CNP, vendor). A table lookup: the
// engine asks for every packet.
constexpr std::uint16_t headers_of(std::uint8_t op) { return detail::header_table[op]; }

// Bytes of each header on the wire.
inline constexpr std::size_t bth_bytes = 12, reth_bytes = 16, aeth_bytes = 4, deth_bytes = 8, immdt_bytes = 4,
                             ieth_bytes = 4, atomiceth_bytes = 28, atomicacketh_bytes = 8, icrc_bytes = 4,
                             vcrc_bytes = 2, lrh_bytes = 8, grh_bytes = 40;

// AETH Syndrome (IBA Table 42 "AETH Syndrome Field"): bits 6:5 say ACK, RNR NAK or NAK,
// bits 4:0 the credit count, RNR timer or NAK code (Table 43).
namespace aeth_syndrome {
inline constexpr std::uint8_t ACK = 0x00, RNR_NAK = 0x20, NAK = 0x60;
inline constexpr std::uint8_t NAK_PSN_SEQUENCE_ERROR = 0x60, NAK_INVALID_REQUEST = 0x61,
                              NAK_REMOTE_ACCESS_ERROR = 0x62, NAK_REMOTE_OPERATIONAL_ERROR = 0x63,
                              NAK_INVALID_RD_REQUEST = 0x64;
inline constexpr std::uint8_t ACK_NO_CREDIT_LIMIT = 0x1f;  // ACK: end-to-end credits not used
constexpr std::uint8_t kind(std::uint8_t s) { return s & 0x60; }
constexpr std::uint8_t value(std::uint8_t s) { return s & 0x1f; }
}  // namespace aeth_syndrome

// IBA 9.2 "Base Transport Header".
struct bth {
    std::uint8_t opcode = 0;
    bool se = false;          // solicited event
    bool mig_req = true;      // MigReq: 1 for a QP whose path is not being migrated (as rxe)
    std::uint8_t pad = 0;     // PadCnt: bytes added to round the payload to 4
    std::uint8_t tver = 0;
    std::uint16_t pkey = 0xffff;
    bool fecn = false, becn = false;
    std::uint32_t dest_qp = 0;  // 24 bits
    bool ack_req = false;
    std::uint32_t psn = 0;      // 24 bits
};

struct reth {  // IBA 9.3.3
    std::uint64_t va = 0;
    std::uint32_t r_key = 0;
    std::uint32_t dma_length = 0;
};
struct aeth {  // IBA 9.3.5
    std::uint8_t syndrome = 0;
    std::uint32_t msn = 0;  // 24 bits
};
struct deth {  // IBA 9.3.2
    std::uint32_t q_key = 0;
    std::uint32_t src_qp = 0;  // 24 bits
};
struct atomiceth {  // IBA 9.3.6
    std::uint64_t va = 0;
    std::uint32_t r_key = 0;
    std::uint64_t swap_add = 0;  // Swap (CmpSwap) or Add (FetchAdd) data
    std::uint64_t compare = 0;
};

// The network layer: where the packet goes and comes from. On RoCEv2 the GIDs are the IP
// addresses (IPv4-mapped ::ffff:a.b.c.d for IPv4), the traffic class the IP TOS / IPv6
// traffic class, the hop limit the TTL; the port fills in the MACs. On InfiniBand the LRH
// routes by LID, and a GRH travels when `grh` is set.
enum class link_kind : std::uint8_t { roce_v4, roce_v6, ib };

struct route {
    link_kind link = link_kind::roce_v4;
    std::array<std::uint8_t, 6> src_mac{}, dst_mac{};
    std::array<std::uint8_t, 16> sgid{}, dgid{};
    std::uint8_t traffic_class = 0;
    std::uint32_t flow_label = 0;  // 20 bits
    std::uint8_t hop_limit = 64;
    std::uint16_t udp_src_port = 0xc000;  // RoCEv2: free (a card hashes the flow into it)
    // InfiniBand (IBA 7.7 "Local Route Header").
    std::uint16_t slid = 0, dlid = 0;
    std::uint8_t sl = 0, vl = 0;
    bool grh = false;
    // RoCEv2 over IPv4: the IPv4 Identification field (RFC 791). A sender picks it (Linux
    // from a per-destination counter); it is kept on decode so that a frame re-encodes to
    // the same bytes. DF is always set, so it never identifies fragments.
    std::uint16_t ip_id = 0;
};

// Whether a GID is an IPv4-mapped IPv6 address (::ffff:a.b.c.d), which RoCEv2 carries in an
// IPv4 header.
constexpr bool is_ipv4_mapped(const std::array<std::uint8_t, 16>& g) {
    for (std::size_t i = 0; i < 10; ++i) {
        if (g[i] != 0) return false;
    }
    return g[10] == 0xff && g[11] == 0xff;
}

struct packet {
    route net;
    wire::bth bth;
    wire::reth reth;
    wire::aeth aeth;
    wire::deth deth;
    std::array<std::byte, 4> immdt{};  // ImmDt / IETH, bytes as on the wire
    wire::atomiceth atomic;
    std::uint64_t atomic_ack = 0;      // AtomicAckETH: the original remote data
    payload_buffer payload;            // without the pad (vector-like, 256 bytes inline)
    // Set when decoded: the 40 bytes a UD receive buffer gets in front of the data (IBA
    // 11.4.1.1: the GRH; RoCEv2 over IPv4 puts the IPv4 header in the last 20 of them,
    // over IPv6 the IPv6 header in all 40), and whether a GRH/IP header was present.
    std::array<std::byte, 40> grh_raw{};
    bool grh_present = false;
};

// The IP checksums of a raw Ethernet frame that the sending device computed (checksum
// offload), the frame unchanged since: its receiver in the same process takes them as
// holding rather than summing the same bytes again (link::frame_crcs says which).
struct ip_checksums {
    bool l3 = false;  // the IPv4 header checksum
    bool l4 = false;  // the UDP or TCP checksum
};

}  // namespace cxv::sim::wire
