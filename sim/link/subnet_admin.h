// The subnet administrator (IBA 15 "Subnet Administration") of the subnet manager the
// model plays on an InfiniBand segment. The SM assigns LIDs and brings ports to ACTIVE
// (sim/device_port.h) and every port reports it at LID 1 (PortInfo:MasterSMLID), as
// OpenSM on the first host of a fabric; the SA answers there, on QP1, what Linux's ib_sa
// asks of it:
//
//   ClassPortInfo   Get: UD multicast, send-only full members (IBA 15.2.5.1; Linux's
//                   ib_sa reads CapabilityMask2 for IPoIB's send-only joins)
//   MCMemberRecord  Set (join), Delete (leave), Get (IBA 15.2.5.17, 15.4.2): groups made
//                   by a join with the creation components (Q_Key, P_Key, SL, FlowLabel,
//                   TClass; IBA o15-0.2.4), their MLIDs from 0xC000; the IPoIB broadcast
//                   group of the default partition exists from the start, with OpenSM's
//                   defaults (Q_Key 0x0B1B, MTU 2048, 10 Gb/s)
//   PathRecord      Get (IBA 15.2.5.16): a path between two ports the SA knows
//
// The SA knows a port once it has asked anything (the LRH's SLID with the GID its request
// names: MCMemberRecord:PortGID, PathRecord:SGID), and its own port from the start: an SM
// that swept the subnet would know every port. Not served (a MAD status, IBA 13.4.7):
// GetTable and the records that need RMPP, InformInfo (no traps are sent), every other
// attribute. The SA's answers say nothing about the receiving card: it is the fabric's,
// hosted by the port with LID `subnet_manager_lid` (sim/device_config.h; port.h), which hands it those MADs instead of
// its QP1 (as a host running OpenSM would).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

#include "sim/device_config.h"
#include "sim/wire/packet.h"

namespace cxv::sim::link {

// SA MAD layout (IBA 13.4.2 "Management Datagram Format", 15.2.1 "SA MAD Format").
namespace sa_mad {
inline constexpr std::size_t bytes = 256;
inline constexpr std::size_t base_version = 0, mgmt_class = 1, class_version = 2, method = 3, status = 4,
                             transaction_id = 8, attribute_id = 16, attribute_modifier = 20, rmpp = 24,
                             sm_key = 36, attribute_offset = 44, component_mask = 48, data = 56;
inline constexpr std::uint8_t class_subn_adm = 0x03, sa_class_version = 2;
inline constexpr std::uint8_t get = 0x01, set = 0x02, get_resp = 0x81, get_table = 0x12, remove = 0x15;
inline constexpr std::uint16_t attr_class_port_info = 0x0001, attr_path_record = 0x0035,
                               attr_mc_member_record = 0x0038;
// MAD status (IBA 13.4.7, Table 135) and the SA's class-specific codes (15.2.1.1, Table 182).
inline constexpr std::uint16_t status_bad_version = 0x0004, status_unsupported_method = 0x0008,
                               status_unsupported_method_attr = 0x000c, err_no_resources = 0x0100,
                               err_req_invalid = 0x0200, err_no_records = 0x0300,
                               err_req_insufficient_components = 0x0600;
// The Q_Key every GSI packet carries (IBA 13.5.1.1: QP1's well-known Q_Key).
inline constexpr std::uint32_t gsi_qkey = 0x80010000;
}  // namespace sa_mad

class subnet_admin {
public:
    using gid = std::array<std::uint8_t, 16>;
    // The SA of the port `cfg` describes (its LID and port GUID are the SA's own).
    explicit subnet_admin(const device_config& cfg);

    // Whether `in` is a request for the SA: a UD SEND to QP1 with the GSI Q_Key whose MAD
    // is of the SubnAdm class and a request method. If so, `out` is its answer, to be
    // sent from this port, and true; otherwise false and `out` untouched.
    bool answer(const wire::packet& in, wire::packet& out);

    struct counters_type {
        std::uint64_t requests = 0, errors = 0;  // errors: answered with a non-zero status
    };
    const counters_type& counters() const noexcept { return counters_; }

private:
    struct group {
        std::uint32_t qkey = 0;
        std::uint16_t mlid = 0, pkey = 0xffff;
        std::uint8_t mtu = 0, tclass = 0, rate = 0, life = 0, sl = 0, hop_limit = 0, scope = 0;
        std::uint32_t flow_label = 0;
        bool permanent = false;               // the broadcast group: stays without members
        std::map<gid, std::uint8_t> members;  // PortGID -> JoinState bits
    };
    // Each returns the MAD status; the record written into `rec` (the response's data).
    std::uint16_t mc_member(std::uint8_t method, std::uint64_t mask, std::byte* rec, std::uint16_t slid);
    std::uint16_t path_record(std::uint64_t mask, std::byte* rec, std::uint16_t slid);
    static void class_port_info(std::byte* rec);
    static void write_group(const gid& mgid, const group& g, std::byte* rec);

    std::map<gid, std::uint16_t> lids_;  // the ports the SA knows: GID -> LID
    std::map<gid, group> groups_;        // by MGID
    std::uint16_t next_mlid_;
    std::uint32_t next_mgid_ = 1;  // for joins that leave the MGID to the SA
    std::uint32_t psn_ = 0;
    counters_type counters_;
};

}  // namespace cxv::sim::link
