// The Ethernet objects (PRM "Transport Interface", "Flow Table"): transport domains,
// TISs, SQs and RQs, RQTs and TIRs, and the NIC receive flow tables with their groups,
// entries and counters. As for the RDMA objects (objects.h), each keeps its PRM context
// as bytes of the hw/ layout where it has one, the device-side state beside it, and a
// slot of firmware memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "hw/ifc.h"
#include "sim/objects/objects.h"
#include "sim/objects/pages.h"

namespace cxv::sim {

using hw::ifc::wq_state;

// Large Send Offload: an LSO WQE's message is at most 2^kMaxLsoLog bytes after its
// headers (the per-protocol offload capabilities' max_lso_cap, fw_caps.cc; what a
// ConnectX-5 and later announce).
inline constexpr unsigned kMaxLsoLog = 18;

// ALLOC_TRANSPORT_DOMAIN: TISs and TIRs name it.
struct td_object : referenced {
    std::uint32_t uid = 0;
};

struct tis_object : referenced {  // users: SQs
    std::uint32_t tisn = 0;
    std::uint32_t uid = 0;
    std::uint32_t td = 0;
    std::array<std::byte, hw::ifc::tisc::size_bytes> tisc{};
    pages::slot icm{};
};

// An SQ or an RQ: its context (sqc or rqc, the same size, the wq at the same place), the
// page list of its ring, the objects it holds, and the device's progress in the ring.
// Their numbers come from the QP number space: a CQE's qpn names them.
struct wq_object : referenced {  // users (RQs): RQTs and TIRs that name it
    std::uint32_t n = 0;
    std::uint32_t uid = 0;
    wq_state state = wq_state::RST;
    std::array<std::byte, hw::ifc::sqc::size_bytes> ctx{};
    std::vector<std::uint64_t> pas;
    mutable std::vector<wq_translation> pas_translated;  // the pages' kept translations
    std::uint32_t cqn = 0, pd = 0;
    std::uint32_t tisn = 0;             // SQ: its TIS (0: none, tis_lst_sz 0)
    std::uint32_t uar = 0;              // SQ: the UAR its doorbells ring
    std::uint32_t counter_set_id = 0;   // RQ: its Q counter set
    std::uint32_t consumer = 0;         // WQEs (SQ: WQE-BBs) the device consumed
    std::uint32_t stride = 0;           // striding RQ: strides of WQE `consumer` used
    std::uint32_t posted = 0;           // the doorbell record's counter last read
    // Striding RQ: the scatter list of WQE `consumer`, read when the device began it (a
    // card fetches a multi-packet WQE once, not once per packet); empty: not read yet.
    std::vector<local_sge> mpwqe;
    // ... and its buffer as IOVA ranges, translated through its keys at the first packet
    // and kept while the tables' generation (eth_tables) stays: only a command changes or
    // destroys a key. Each range's host address is kept too (iommu::translate; null when
    // the range is not in one mapping), while the IOMMU's generation is
    // `mpwqe_mmu_generation`. Empty: not translated.
    struct buffer_range {
        std::uint64_t iova = 0, len = 0;
        std::byte* host = nullptr;
    };
    std::vector<buffer_range> mpwqe_iovas;
    std::uint64_t mpwqe_generation = 0, mpwqe_mmu_generation = 0;
    // The striding WQE is done with (or gone): the next packet reads the next one.
    void end_mpwqe() noexcept {
        mpwqe.clear();
        mpwqe_iovas.clear();
    }
    pages::slot icm{};
};
static_assert(hw::ifc::sqc::size_bytes == hw::ifc::rqc::size_bytes);

struct rqt_object : referenced {  // users: TIRs
    std::uint32_t rqtn = 0;
    std::uint32_t uid = 0;
    std::uint32_t max_size = 0;
    std::vector<std::uint32_t> rqns;  // rqt_actual_size entries
    pages::slot icm{};
};

struct tir_object : referenced {  // users: flow table entries that forward to it
    std::uint32_t tirn = 0;
    std::uint32_t uid = 0;
    std::array<std::byte, hw::ifc::tirc::size_bytes> tirc{};
    std::uint32_t td = 0;
    std::uint32_t inline_rqn = 0;  // DIRECT
    std::uint32_t rqtn = 0;        // INDIRECT
    pages::slot icm{};
};

// A flow table entry: its group, match value (only the bits its group's criteria enable),
// action, flow tag, destinations and counters.
struct flow_destination {
    hw::ifc::flow_destination_type type = hw::ifc::flow_destination_type::TIR;
    std::uint32_t id = 0;
};

// The match sets a flow entry may use: the outer headers, then the misc parameters, as
// fte_match_param begins.
inline constexpr std::size_t flow_match_bytes =
    hw::ifc::fte_match_set_lyr_2_4::size_bytes + hw::ifc::fte_match_set_misc::size_bytes;

struct flow_entry {
    std::uint32_t group_id = 0;
    std::array<std::byte, flow_match_bytes> match{};  // outer headers, misc parameters
    std::uint16_t action = 0;
    std::uint32_t flow_tag = 0;
    std::vector<flow_destination> destinations;
    std::vector<std::uint32_t> counters;
};

struct flow_group {
    std::uint32_t start = 0, end = 0;  // flow indexes, inclusive
    std::uint8_t criteria_enable = 0;
    std::array<std::byte, flow_match_bytes> criteria{};  // outer headers, misc parameters
};

// A NIC receive flow table. users: the root (SET_FLOW_TABLE_ROOT), tables whose miss goes
// here, entries that forward here.
struct flow_table : referenced {
    std::uint32_t id = 0;
    std::uint32_t uid = 0;
    std::uint8_t level = 0;
    std::uint8_t log_size = 0;
    std::uint8_t miss_action = 0;   // hw::ifc::flow_table_miss_action
    std::uint32_t miss_table = 0;   // FWD: the table a miss goes to
    std::map<std::uint32_t, flow_group> groups;     // by group id
    std::map<std::uint32_t, flow_entry> entries;    // by flow index
    pages::slot icm{};
};

// A flow counter (ALLOC_FLOW_COUNTER): packets and bytes of the entries that count into
// it. users: entries.
struct flow_counter : referenced {
    std::uint32_t id = 0;
    std::uint64_t packets = 0, octets = 0;
};

// What the function's vport takes in (PRM "NIC Vport Context": the promiscuous modes and
// the allowed address lists MODIFY_NIC_VPORT_CONTEXT sets), for the port's filter.
struct vport_filter {
    bool promisc_uc = false, promisc_mc = false, promisc_all = false;
    std::vector<std::array<std::uint8_t, 6>> uc, mc;  // allowed MACs beside the function's own
    std::vector<std::uint16_t> vlans;                  // kept and reported; not filtered on
};

// The Ethernet part of the object tables (tables.h).
struct eth_tables {
    std::map<std::uint32_t, td_object> transport_domains;
    std::map<std::uint32_t, tis_object> tises;
    std::map<std::uint32_t, wq_object> sqs;
    std::map<std::uint32_t, wq_object> rqs;
    std::map<std::uint32_t, rqt_object> rqts;
    std::map<std::uint32_t, tir_object> tirs;
    std::map<std::uint32_t, flow_table> flow_tables;  // NIC receive
    std::uint32_t root_table = 0;                      // SET_FLOW_TABLE_ROOT (0: none)
    std::map<std::uint32_t, flow_counter> flow_counters;
    std::uint32_t next_group_id = 1;                   // group ids are unique per function
    vport_filter filter;
    // Bumped by every command the firmware executes (and when it releases everything):
    // what the queues' engines keep of the tables (the last frame's steering and the
    // objects it goes to, a striding WQE's translation, the CQ of the last CQE) holds
    // while it stays the same. Whatever else changes the tables (a test's rig, by hand)
    // bumps it too.
    std::uint64_t generation = 0;
};

}  // namespace cxv::sim
