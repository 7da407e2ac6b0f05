// The RoCE address (GID) table: SET_ROCE_ADDRESS and QUERY_ROCE_ADDRESS on an Ethernet
// port, their refusals, what QUERY_HCA_VPORT_GID and the RoCE capabilities say of the
// table, and the table emptied by teardown and reset.
#include <array>
#include <cstdint>

#include <doctest/doctest.h>

#include "hw/cmd_values.h"
#include "sim/objects/tables.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

using ra = ifc::roce_addr_layout;
using gid = std::array<std::uint8_t, 16>;

constexpr auto kV2 = static_cast<std::uint32_t>(hw::roce_version::V2);
constexpr auto kV1 = static_cast<std::uint32_t>(hw::roce_version::V1);
constexpr auto kIpv4 = static_cast<std::uint32_t>(hw::roce_l3_type::IPV4);
constexpr auto kIpv6 = static_cast<std::uint32_t>(hw::roce_l3_type::IPV6);

// fe80::c5ff:fe00:1 (the link-local address of MAC 02:c5:00:00:00:01) and ::ffff:169.254.7.9.
constexpr gid kLinkLocal{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01};
constexpr gid kMapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 7, 9};
constexpr std::array<std::uint8_t, 6> kMac{0x02, 0xc5, 0x00, 0x00, 0x00, 0x01};

struct entry {
    gid address{};
    std::uint32_t version = kV2;
    std::uint32_t l3 = kIpv6;
    bool vlan = false;
    std::uint32_t vlan_id = 0;
};

cmd_result set_address(H& h, unsigned index, const entry& e, unsigned port = 1) {
    auto in = H::input<ifc::set_roce_address_in>(cmd_opcode::SET_ROCE_ADDRESS);
    ifc::set<ifc::set_roce_address_in::roce_address_index>(in.data(), index);
    ifc::set<ifc::set_roce_address_in::vhca_port_num>(in.data(), port);
    std::byte* a = ifc::at<ifc::set_roce_address_in::roce_address>(in.data());
    for (std::size_t i = 0; i < 16; ++i) ifc::set<ra::source_l3_address>(a, i, e.address[i]);
    ifc::set<ra::source_mac_47_32>(a, std::uint32_t{kMac[0]} << 8 | kMac[1]);
    ifc::set<ra::source_mac_31_0>(a, std::uint32_t{kMac[2]} << 24 | std::uint32_t{kMac[3]} << 16 |
                                         std::uint32_t{kMac[4]} << 8 | kMac[5]);
    ifc::set<ra::vlan_valid>(a, e.vlan ? 1 : 0);
    ifc::set<ra::vlan_id>(a, e.vlan_id);
    ifc::set<ra::roce_version>(a, e.version);
    ifc::set<ra::roce_l3_type>(a, e.l3);
    return h.exec(in, ifc::set_roce_address_out::size_bytes);
}

cmd_result query_address(H& h, unsigned index, unsigned port = 1) {
    auto in = H::input<ifc::query_roce_address_in>(cmd_opcode::QUERY_ROCE_ADDRESS);
    ifc::set<ifc::query_roce_address_in::roce_address_index>(in.data(), index);
    ifc::set<ifc::query_roce_address_in::vhca_port_num>(in.data(), port);
    return h.exec(in, ifc::query_roce_address_out::size_bytes);
}

const std::byte* address_of(const cmd_result& r) { return ifc::at<ifc::query_roce_address_out::roce_address>(r.out.data()); }

gid l3_of(const std::byte* a) {
    gid g{};
    for (std::size_t i = 0; i < 16; ++i) g[i] = ifc::get<ra::source_l3_address>(a, i);
    return g;
}

gid vport_gid(H& h, unsigned index) {
    auto in = H::input<ifc::query_hca_vport_gid_in>(cmd_opcode::QUERY_HCA_VPORT_GID);
    ifc::set<ifc::query_hca_vport_gid_in::port_num>(in.data(), 1);
    ifc::set<ifc::query_hca_vport_gid_in::gid_index>(in.data(), index);
    auto r = h.exec(in, ifc::query_hca_vport_gid_out::size_bytes + 16);
    REQUIRE(r.status == cmd_status::OK);
    gid g{};
    const std::byte* p = ifc::at<ifc::query_hca_vport_gid_out::gid>(r.out.data(), 0);
    for (std::size_t k = 0; k < 16; ++k) g[k] = std::to_integer<std::uint8_t>(p[k]);
    return g;
}

const std::byte* caps(const cmd_result& r) { return ifc::at<ifc::query_hca_cap_out::capability>(r.out.data()); }

}  // namespace

TEST_CASE("SET_ROCE_ADDRESS then QUERY_ROCE_ADDRESS: the entry reads back as written; empty entries read zero") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    auto empty = query_address(h, 0);
    REQUIRE(empty.status == cmd_status::OK);
    CHECK(l3_of(address_of(empty)) == gid{});
    CHECK(ifc::get<ra::source_mac_31_0>(address_of(empty)) == 0);

    REQUIRE(set_address(h, 0, {kLinkLocal, kV2, kIpv6}).status == cmd_status::OK);
    REQUIRE(set_address(h, 1, {kMapped, kV2, kIpv4, true, 0x123}).status == cmd_status::OK);

    auto r0 = query_address(h, 0);
    REQUIRE(r0.status == cmd_status::OK);
    const std::byte* a0 = address_of(r0);
    CHECK(l3_of(a0) == kLinkLocal);
    CHECK(ifc::get<ra::roce_version>(a0) == kV2);
    CHECK(ifc::get<ra::roce_l3_type>(a0) == kIpv6);
    CHECK(ifc::get<ra::source_mac_47_32>(a0) == 0x02c5);
    CHECK(ifc::get<ra::source_mac_31_0>(a0) == 0x00000001);
    CHECK(ifc::get<ra::vlan_valid>(a0) == 0);

    auto r1 = query_address(h, 1);
    REQUIRE(r1.status == cmd_status::OK);
    const std::byte* a1 = address_of(r1);
    CHECK(l3_of(a1) == kMapped);
    CHECK(ifc::get<ra::roce_l3_type>(a1) == kIpv4);
    CHECK(ifc::get<ra::vlan_valid>(a1) == 1);
    CHECK(ifc::get<ra::vlan_id>(a1) == 0x123);

    // The last entry of the table is writable too; other entries stay empty.
    const unsigned last = sim::firmware::gid_table_entries - 1;
    REQUIRE(set_address(h, last, {kLinkLocal}).status == cmd_status::OK);
    CHECK(l3_of(address_of(query_address(h, last))) == kLinkLocal);
    CHECK(l3_of(address_of(query_address(h, 2))) == gid{});

    // Port 0 means the only port, as Linux sends it without num_vhca_ports.
    REQUIRE(query_address(h, 0, 0).status == cmd_status::OK);
}

TEST_CASE("SET_ROCE_ADDRESS with no address empties the entry") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    REQUIRE(set_address(h, 3, {kLinkLocal}).status == cmd_status::OK);
    REQUIRE(l3_of(address_of(query_address(h, 3))) == kLinkLocal);
    // Linux's delete: zero address and MAC, version and type still set.
    REQUIRE(set_address(h, 3, {gid{}, kV2, kIpv6}).status == cmd_status::OK);
    auto r = query_address(h, 3);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(l3_of(address_of(r)) == gid{});
    CHECK(ifc::get<ra::source_mac_47_32>(address_of(r)) == 0);
    CHECK(ifc::get<ra::roce_l3_type>(address_of(r)) == 0);
    CHECK(vport_gid(h, 3) == gid{});
}

TEST_CASE("SET/QUERY_ROCE_ADDRESS refusals: index, port, version, type, and an InfiniBand port") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    const unsigned size = sim::firmware::gid_table_entries;
    check_status(set_address(h, size, {kLinkLocal}), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    check_status(query_address(h, size), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    check_status(set_address(h, 0xffff, {kLinkLocal}), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    check_status(set_address(h, 0, {kLinkLocal}, 2), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    check_status(query_address(h, 0, 2), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    // RoCE v1 is not offered (roce_cap.roce_version has v2 only); no l3 type 2.
    check_status(set_address(h, 0, {kLinkLocal, kV1, kIpv6}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(set_address(h, 0, {kLinkLocal, kV2, 2}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // An IPv4 entry whose address is not IPv4-mapped.
    check_status(set_address(h, 0, {kLinkLocal, kV2, kIpv4}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // Nothing refused was stored.
    CHECK(l3_of(address_of(query_address(h, 0))) == gid{});

    H ib;
    REQUIRE(ib.bring_up());
    check_status(set_address(ib, 0, {kLinkLocal}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(query_address(ib, 0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
}

TEST_CASE("SET_ROCE_ADDRESS before INIT_HCA is refused like every object command") {
    H h(ethernet());
    boot_and_enable(h);
    check_status(set_address(h, 0, {kLinkLocal}), cmd_status::BAD_SYS_STATE, cmd_syndrome::HCA_NOT_INITIALIZED);
}

TEST_CASE("the RoCE capabilities: v2, and one address per GID table entry") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    auto gen = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    auto roce = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 9), 4112);
    REQUIRE(gen.status == cmd_status::OK);
    REQUIRE(roce.status == cmd_status::OK);
    // cmd_hca_cap.gid_table_size n means 8 << n entries (Linux mlx5_get_gid_table_len).
    const std::uint32_t gids = 8u << ifc::get<ifc::cmd_hca_cap::gid_table_size>(caps(gen));
    CHECK(ifc::get<ifc::roce_cap::roce_address_table_size>(caps(roce)) == gids);
    CHECK(gids == sim::firmware::gid_table_entries);
    // A bit per RoCE version (Linux MLX5_ROCE_VERSION_2_CAP = 1 << MLX5_ROCE_VERSION_2).
    CHECK(ifc::get<ifc::roce_cap::roce_version>(caps(roce)) == (1u << kV2));
}

TEST_CASE("QUERY_HCA_VPORT_GID on an Ethernet port answers from the RoCE address table") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    CHECK(vport_gid(h, 0) == gid{});  // nothing programmed: nothing to report
    REQUIRE(set_address(h, 0, {kLinkLocal}).status == cmd_status::OK);
    REQUIRE(set_address(h, 1, {kMapped, kV2, kIpv4}).status == cmd_status::OK);
    CHECK(vport_gid(h, 0) == kLinkLocal);
    CHECK(vport_gid(h, 1) == kMapped);
    CHECK(vport_gid(h, 2) == gid{});
    // The whole table at once.
    auto in = H::input<ifc::query_hca_vport_gid_in>(cmd_opcode::QUERY_HCA_VPORT_GID);
    ifc::set<ifc::query_hca_vport_gid_in::gid_index>(in.data(), 0xffff);
    auto all = h.exec(in, ifc::query_hca_vport_gid_out::size_bytes + 16 * sim::firmware::gid_table_entries);
    REQUIRE(all.status == cmd_status::OK);
    const std::byte* g1 = ifc::at<ifc::query_hca_vport_gid_out::gid>(all.out.data(), 1);
    CHECK(std::to_integer<std::uint8_t>(g1[10]) == 0xff);
    CHECK(std::to_integer<std::uint8_t>(g1[15]) == 9);
}

TEST_CASE("teardown and reset empty the RoCE address table") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    REQUIRE(set_address(h, 0, {kLinkLocal}).status == cmd_status::OK);
    REQUIRE(h.exec(H::input<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA), 16).status == cmd_status::OK);
    REQUIRE(h.exec(H::input<ifc::disable_hca_in>(cmd_opcode::DISABLE_HCA), 16).status == cmd_status::OK);
    REQUIRE(h.bring_up());
    CHECK(l3_of(address_of(query_address(h, 0))) == gid{});

    REQUIRE(set_address(h, 1, {kMapped, kV2, kIpv4}).status == cmd_status::OK);
    h.dev().reset();
    REQUIRE(h.bring_up());
    CHECK(l3_of(address_of(query_address(h, 1))) == gid{});
}
