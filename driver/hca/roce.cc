// The GID table of a RoCE port (PRM "SET_ROCE_ADDRESS", "QUERY_ROCE_ADDRESS", table
// "RoCE Address Layout"). On an Ethernet port the device's table starts empty: Linux's
// mlx5_ib fills it from the addresses of the port's netdev (ib_core's GID cache writes
// one entry per address and RoCE version). cxv has no netdev, so it programs the two
// addresses a function has without one: the IPv6 link-local address of its MAC, and
// its IPv4 address (the user's, or a link-local one derived from the MAC).
#include <cstring>
#include <iterator>

#include "driver/hca/hca.h"
#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "hw/mac.h"
#include "hw/opcodes.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

using ra = ifc::roce_addr_layout;
constexpr unsigned kPort = 1;

}  // namespace

std::array<std::uint8_t, 4> hca::link_local_ipv4(const std::array<std::uint8_t, 6>& mac) noexcept {
    // RFC 3927: hosts pick from 169.254.1.0 - 169.254.254.255 (the first and last /24
    // are reserved); the MAC's last two bytes make the choice stable per function.
    return {169, 254, static_cast<std::uint8_t>(1 + mac[4] % 254), mac[5]};
}

hca::gid hca::link_local_gid(const std::array<std::uint8_t, 6>& mac) noexcept {
    // fe80::/64, then the modified EUI-64 interface identifier (RFC 4291 appendix A):
    // the MAC split by ff:fe, with the universal/local bit inverted.
    return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe,
            mac[3], mac[4], mac[5]};
}

hca::gid hca::ipv4_mapped_gid(const std::array<std::uint8_t, 4>& ip) noexcept {
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ip[0], ip[1], ip[2], ip[3]};
}

status hca::program_roce_gids() {
    // The MAC: the NIC vport context's permanent address.
    auto q = cmd_->exec(command<ifc::query_nic_vport_context_in>(cmd_opcode::QUERY_NIC_VPORT_CONTEXT),
                        ifc::query_nic_vport_context_out::size_bytes);
    if (!q) return q.error();
    const std::byte* mac = ifc::at<ifc::nic_vport_context::permanent_address>(
        ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(q->data()));
    mac_ = hw::get_mac(mac);
    // The same 48 bits go into each RoCE address's source MAC, which has the same split.
    const std::uint32_t hi = ifc::get<ifc::mac_address_layout::mac_addr_47_32>(mac);
    const std::uint32_t lo = ifc::get<ifc::mac_address_layout::mac_addr_31_0>(mac);
    ipv4_ = opts_.ipv4 ? *opts_.ipv4 : link_local_ipv4(mac_);

    struct entry {
        gid address;
        hw::roce_l3_type l3;
    };
    const entry entries[] = {
        {link_local_gid(mac_), hw::roce_l3_type::IPV6},
        {ipv4_mapped_gid(ipv4_), hw::roce_l3_type::IPV4},
    };
    // The table must hold them (roce_cap.roce_address_table_size; the device reports
    // at least 8 GIDs, cmd_hca_cap.gid_table_size).
    std::vector<gid> programmed;
    for (std::size_t i = 0; i < std::size(entries); ++i) {
        auto in = command<ifc::set_roce_address_in>(cmd_opcode::SET_ROCE_ADDRESS);
        ifc::set<ifc::set_roce_address_in::roce_address_index>(in.data(), static_cast<std::uint32_t>(i));
        // vhca_port_num as Linux fills it: only on devices that count vHCA ports.
        if (ifc::get<ifc::cmd_hca_cap::num_vhca_ports>(caps_cur_.data()) > 0) {
            ifc::set<ifc::set_roce_address_in::vhca_port_num>(in.data(), kPort);
        }
        std::byte* a = ifc::at<ifc::set_roce_address_in::roce_address>(in.data());
        for (std::size_t k = 0; k < 16; ++k) ifc::set<ra::source_l3_address>(a, k, entries[i].address[k]);
        ifc::set<ra::source_mac_47_32>(a, hi);
        ifc::set<ra::source_mac_31_0>(a, lo);
        ifc::set<ra::roce_l3_type>(a, static_cast<std::uint32_t>(entries[i].l3));
        ifc::set<ra::roce_version>(a, static_cast<std::uint32_t>(hw::roce_version::V2));
        if (auto r = cmd_->exec(in, ifc::set_roce_address_out::size_bytes); !r) return r.error();
        programmed.push_back(entries[i].address);
    }
    roce_gids_ = std::move(programmed);
    return ok_status();
}

result<std::vector<hca::gid>> hca::read_roce_gids(unsigned port) {
    std::vector<gid> out;
    for (std::size_t i = 0; i < roce_gids_.size(); ++i) {
        auto in = command<ifc::query_roce_address_in>(cmd_opcode::QUERY_ROCE_ADDRESS);
        ifc::set<ifc::query_roce_address_in::roce_address_index>(in.data(), static_cast<std::uint32_t>(i));
        if (ifc::get<ifc::cmd_hca_cap::num_vhca_ports>(caps_cur_.data()) > 0) {
            ifc::set<ifc::query_roce_address_in::vhca_port_num>(in.data(), port);
        }
        auto r = cmd_->exec(in, ifc::query_roce_address_out::size_bytes);
        if (!r) return r.error();
        const std::byte* a = ifc::at<ifc::query_roce_address_out::roce_address>(r->data());
        gid g{};
        for (std::size_t k = 0; k < 16; ++k) g[k] = ifc::get<ra::source_l3_address>(a, k);
        out.push_back(g);
    }
    return out;
}

}  // namespace cxv::driver
