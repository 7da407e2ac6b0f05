// The plain values that cxv's API (api/cxv.h) and its driver (driver/) both speak: QP
// types, states and sizes, a connected QP's path and its transition attributes, an
// SRQ's sizes, a port as queried, an asynchronous event, and a memory region's access rights.
// api/ hands them to driver/ as they are, with no conversion. Nothing but the standard
// library: the PRM's encodings of the same things live in hw/.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cxv {

// raw_packet: an Ethernet SQ and RQ under one QP handle (IBV_QPT_RAW_PACKET), made by the
// API from the transport objects (api/cxv_raw_qp.cc); driver::qp takes rc, uc and ud.
enum class qp_type { rc, uc, ud, raw_packet };
// The QP state machine (RST, INIT, RTR, RTS, SQE, SQD, ERR).
enum class qp_state { reset, init, rtr, rts, sqerr, sqd, error };

// Access rights of a memory region, as ibv_access_flags names them. Remote write or
// atomic access needs local write (EINVAL otherwise).
enum mr_access : unsigned {
    access_local_write = 1u << 0,
    access_remote_write = 1u << 1,
    access_remote_read = 1u << 2,
    access_remote_atomic = 1u << 3,
};

// The sizes a QP is created with (as ibv_qp_cap; the QP may grant more).
struct qp_caps {
    unsigned max_send_wr = 64;  // 0: no send queue (a receive-only QP)
    unsigned max_recv_wr = 64;  // ignored with an SRQ
    unsigned max_send_sge = 1;
    unsigned max_recv_sge = 1;
    unsigned max_inline_data = 0;
};

// The address of a QP's peer (INIT2RTR of a connected QP, or a UD address handle):
// InfiniBand by LID, with a GRH when grh is set; RoCE always by GID.
struct qp_path {
    std::uint16_t dlid = 0;
    std::uint8_t sl = 0;
    bool grh = false;
    std::array<std::uint8_t, 16> dgid{};
    std::uint8_t sgid_index = 0;
    std::uint8_t hop_limit = 64;
    std::uint8_t traffic_class = 0;
    std::uint32_t flow_label = 0;
    // RoCE: the peer's MAC (the path's rmac). Unset: cxv::qp::modify finds it
    // (api/neighbours.h); the driver alone takes it from a link-local EUI-64 GID, else 0.
    std::optional<std::array<std::uint8_t, 6>> rmac{};
};

// A QP transition's attributes, as ibv_qp_attr names them; each transition takes its own.
struct qp_modify_attr {
    std::uint8_t port = 1;
    std::uint16_t pkey_index = 0;
    std::uint32_t qkey = 0;      // UD
    unsigned access = 0;         // mr_access bits: remote read/write/atomic (RC, UC)
    std::uint32_t path_mtu = 5;  // 1 = 256 .. 5 = 4096
    std::uint32_t dest_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    unsigned max_dest_rd_atomic = 1;  // responder: RDMA READ/atomic in flight
    unsigned max_rd_atomic = 1;       // requester
    std::uint8_t min_rnr_timer = 12;  // IBTA encoding (12 = 0.64 ms)
    std::uint8_t timeout = 14;        // ACK timeout, 4.096 µs << timeout
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;       // 7 = forever
    qp_path ah;
};

// What an SRQ is created with.
struct srq_attr {
    unsigned max_wr = 256;  // at least this many receive WQEs (a power of two)
    unsigned max_sge = 1;   // scatter entries per WQE
    unsigned limit = 0;     // armed at creation (ARM_RQ) when not 0
};

// A port as a query reports it: the NIC vport context's state and, for InfiniBand, the
// HCA vport context's LID and MTU.
struct port_info {
    bool up = false;        // ACTIVE
    bool ethernet = false;  // RoCE (else InfiniBand)
    std::uint16_t lid = 0;
    std::uint32_t max_mtu = 0;  // qpc.mtu's encoding: 1 = 256 .. 5 = 4096
    std::uint8_t gid[16] = {};  // GID index 0
    // The GID table's populated entries from index 0 on. InfiniBand: GID 0, the
    // link-local prefix fe80::/64 and the port GUID. RoCE: what the driver programmed at
    // open (as QUERY_ROCE_ADDRESS reads them back): 0 the IPv6 link-local address of the
    // port's MAC, 1 the IPv4-mapped address of the function's IPv4 address. A RoCE QP's
    // qp_path::sgid_index names one of them.
    std::vector<std::array<std::uint8_t, 16>> gids;
};

// An asynchronous event of a device (from its event thread).
struct event {
    // port_up: ACTIVE; port_init: InfiniBand Init (link up, not yet configured by the SM).
    enum kind { port_up, port_down, port_init, port_other, fatal, queue_error } what = port_other;
    unsigned port = 0;
    std::uint32_t object = 0;  // CQ, QP or SRQ number for queue errors
    std::string detail;
    // Queue errors: the EQE's event_type (hw::event_type, PRM "Events"), which says
    // whether `object` is a CQ (CQ_ERROR), an SRQ (SRQ_CATAS_ERROR, SRQ_RQ_LIMIT) or a QP.
    std::uint8_t event_type = 0;
    // A fatal event after which the device completes nothing more (the command interface
    // dead: health, internal error, the owning daemon gone), as opposed to a fatal report
    // the device lives through (a page request not served).
    bool device_dead = false;
};

}  // namespace cxv
