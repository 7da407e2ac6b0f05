// The RoCE address table of an Ethernet port (PRM "SET_ROCE_ADDRESS",
// "QUERY_ROCE_ADDRESS", table "RoCE Address Layout"): the port's GID table as the driver
// programs it. A card's table is empty until then: on Linux, mlx5_ib writes one entry
// per GID that ib_core derives from the netdev's addresses, and clears an entry by
// writing it with no address. The transport engine reads the table (object_tables::
// roce_addresses) for the source addresses of the packets it sends.
//
// The checks, in the order the handlers make them:
//   - an InfiniBand port has no RoCE address table: BAD_PARAM / BAD_PARAMETER, as the
//     model refuses every command its port type does not serve (MAD_IFC SMPs on
//     Ethernet, MODIFY_NIC_VPORT_CONTEXT's Ethernet fields on InfiniBand);
//   - vhca_port_num names port 1 (or 0: Linux fills it only when num_vhca_ports is
//     set), else BAD_PARAM / BAD_PORT. The command has no other_vport: a function
//     programs only its own table;
//   - roce_address_index below roce_cap.roce_address_table_size, else BAD_PARAM /
//     EXCEEDS_LIMIT;
//   - SET: roce_version one the port offers (roce_cap.roce_version: RoCE v2) and
//     roce_l3_type IPv4 or IPv6, else BAD_PARAM / BAD_PARAMETER; an IPv4 entry's address
//     must be IPv4-mapped (::ffff:a.b.c.d), as the IPv4 header carries only its last
//     four bytes.
#include <algorithm>
#include <cstring>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_vport.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

using ra = ifc::roce_addr_layout;

// Port and index checks shared by SET and QUERY.
cmd_reply check_entry(bool ethernet, std::uint32_t port, std::uint32_t index, std::uint32_t entries) {
    if (!ethernet) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (port > 1) return bad_param(cmd_syndrome::BAD_PORT);
    if (index >= entries) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    return ok();
}

bool ipv4_mapped(const std::array<std::uint8_t, 16>& a) {
    static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::equal(std::begin(prefix), std::end(prefix), a.begin());
}

}  // namespace

cmd_reply vport_commands::set_roce_address(cmd_ctx& c) {
    using in_t = ifc::set_roce_address_in;
    const std::uint32_t index = ifc::get<in_t::roce_address_index>(c.in.data());
    if (auto r = check_entry(cfg_.port == port_type::ETHERNET, ifc::get<in_t::vhca_port_num>(c.in.data()), index,
                             hca_caps::gid_table_entries);
        failed(r)) {
        return r;
    }
    const std::byte* a = ifc::at<in_t::roce_address>(c.in.data());
    roce_address e;
    for (std::size_t i = 0; i < e.source_l3_address.size(); ++i) {
        e.source_l3_address[i] = static_cast<std::uint8_t>(ifc::get<ra::source_l3_address>(a, i));
    }
    // No address: the entry is deleted (Linux's mlx5_core_roce_gid_set with no GID sends
    // zeros and leaves version and type as they were).
    if (std::all_of(e.source_l3_address.begin(), e.source_l3_address.end(), [](std::uint8_t b) { return b == 0; })) {
        roce_addresses_.erase(index);
        return ok();
    }
    const auto version = ifc::get<ra::roce_version>(a);
    const auto l3 = ifc::get<ra::roce_l3_type>(a);
    if (version != static_cast<std::uint32_t>(hw::roce_version::V2)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (l3 != static_cast<std::uint32_t>(hw::roce_l3_type::IPV4) &&
        l3 != static_cast<std::uint32_t>(hw::roce_l3_type::IPV6)) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (l3 == static_cast<std::uint32_t>(hw::roce_l3_type::IPV4) && !ipv4_mapped(e.source_l3_address)) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const std::uint32_t mac_hi = ifc::get<ra::source_mac_47_32>(a), mac_lo = ifc::get<ra::source_mac_31_0>(a);
    e.source_mac = {static_cast<std::uint8_t>(mac_hi >> 8), static_cast<std::uint8_t>(mac_hi),
                    static_cast<std::uint8_t>(mac_lo >> 24), static_cast<std::uint8_t>(mac_lo >> 16),
                    static_cast<std::uint8_t>(mac_lo >> 8), static_cast<std::uint8_t>(mac_lo)};
    e.vlan_valid = ifc::get<ra::vlan_valid>(a) != 0;
    e.vlan_id = static_cast<std::uint16_t>(e.vlan_valid ? ifc::get<ra::vlan_id>(a) : 0);
    e.roce_l3_type = static_cast<std::uint8_t>(l3);
    e.roce_version = static_cast<std::uint8_t>(version);
    roce_addresses_[index] = e;
    return ok();
}

cmd_reply vport_commands::query_roce_address(cmd_ctx& c) {
    using in_t = ifc::query_roce_address_in;
    const std::uint32_t index = ifc::get<in_t::roce_address_index>(c.in.data());
    if (auto r = check_entry(cfg_.port == port_type::ETHERNET, ifc::get<in_t::vhca_port_num>(c.in.data()), index,
                             hca_caps::gid_table_entries);
        failed(r)) {
        return r;
    }
    const auto it = roce_addresses_.find(index);
    if (it == roce_addresses_.end()) return ok();  // an empty entry reads as zeros
    const roce_address& e = it->second;
    std::byte* a = ifc::at<ifc::query_roce_address_out::roce_address>(c.out.data());
    for (std::size_t i = 0; i < e.source_l3_address.size(); ++i) {
        ifc::set<ra::source_l3_address>(a, i, e.source_l3_address[i]);
    }
    const auto& m = e.source_mac;
    ifc::set<ra::source_mac_47_32>(a, std::uint32_t{m[0]} << 8 | m[1]);
    ifc::set<ra::source_mac_31_0>(
        a, std::uint32_t{m[2]} << 24 | std::uint32_t{m[3]} << 16 | std::uint32_t{m[4]} << 8 | m[5]);
    ifc::set<ra::vlan_valid>(a, e.vlan_valid ? 1 : 0);
    ifc::set<ra::vlan_id>(a, e.vlan_id);
    ifc::set<ra::roce_l3_type>(a, e.roce_l3_type);
    ifc::set<ra::roce_version>(a, e.roce_version);
    return ok();
}

}  // namespace cxv::sim
