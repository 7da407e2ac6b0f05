// The object tables: every QP, CQ, SRQ, memory key, UMEM, PD, UAR and Q counter set the
// driver has created on this function, by number, and the Ethernet objects
// (eth_objects.h). The firmware's command handlers create, change and destroy the
// entries; the transport engine (sim/transport/) reads them and moves the device-side
// state they carry (producer and consumer indices, the QP's transport state). Neither
// side reaches the other through them: they are plain data. EQs are not here: they are
// the device's event queues (sim/eqs.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "sim/objects/eth_objects.h"
#include "sim/objects/objects.h"

namespace cxv::sim {

// One entry of a RoCE port's GID table as the driver programs it (PRM "SET_ROCE_ADDRESS",
// roce_addr_layout): the source address packets from that GID index carry.
struct roce_address {
    std::array<std::uint8_t, 16> source_l3_address{};  // the GID: IPv6, or ::ffff:a.b.c.d
    std::array<std::uint8_t, 6> source_mac{};
    bool vlan_valid = false;
    std::uint16_t vlan_id = 0;
    std::uint8_t roce_l3_type = 0;  // 0 IPv4, 1 IPv6
    std::uint8_t roce_version = 0;  // 0 RoCE v1, 2 RoCE v2
};

struct object_tables {
    std::map<std::uint32_t, uar_object> uars;
    std::map<std::uint32_t, pd_object> pds;
    std::map<std::uint32_t, xrcd_object> xrcds;
    std::map<std::uint32_t, mkey_object> mkeys;  // by mkey_index
    std::map<std::uint32_t, umem_object> umems;
    std::map<std::uint32_t, cq_object> cqs;
    std::map<std::uint32_t, qp_object> qps;
    // The numbers of the port's QP0 and QP1 (0: none), which the wire's destination QPs
    // 0 and 1 reach: the first of each service type created, until it is destroyed.
    std::array<std::uint32_t, 2> special_qpn{};
    std::map<std::uint32_t, srq_object> srqs;
    std::map<std::uint32_t, q_counter_object> q_counters;  // set 0 always present
    std::map<std::uint32_t, roce_address> roce_addresses;  // by GID index; absent = empty
    // Multicast groups (ATTACH_TO_MCG): the QPs attached to each MGID, in attach order.
    std::map<std::array<std::uint8_t, 16>, std::vector<std::uint32_t>> mcgs;
    eth_tables eth;  // transport domains, TISs, SQs, RQs, RQTs, TIRs, flow steering

    // QPs, SQs and RQs share one number space (a CQE's qpn names any of them).
    bool qpn_used(std::uint32_t n) const { return qps.count(n) != 0 || eth.sqs.count(n) != 0 || eth.rqs.count(n) != 0; }

    // The UMEM numbered `id`, or nullptr.
    const umem_object* umem(std::uint32_t id) const {
        const auto it = umems.find(id);
        return it == umems.end() ? nullptr : &it->second;
    }
};

// Byte `off` of a UMEM, translated by its MTT (pages of 4 KiB << log_page_size, the
// UMEM starting page_offset bytes into the first); nullopt past the last page.
inline std::optional<std::uint64_t> umem_iova(const umem_object& u, std::uint64_t off) {
    const unsigned shift = u.log_page_size + 12;
    const std::uint64_t pos = u.page_offset + off;
    const std::uint64_t idx = pos >> shift;
    if (idx >= u.mtt.size()) return std::nullopt;
    const std::uint64_t mask = (std::uint64_t{1} << shift) - 1;
    return (u.mtt[idx] & ~mask) + (pos & mask);
}

}  // namespace cxv::sim
