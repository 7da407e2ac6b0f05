// The function's vport and port management: HCA vport context, GID and P_Key tables,
// NIC vport context, MAD_IFC SMPs, on InfiniBand and Ethernet ports.
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

template <typename In>
std::vector<std::byte> vport_input(cmd_opcode op, unsigned other_vport, unsigned port_num) {
    auto in = H::input<In>(op);
    ifc::set<typename In::other_vport>(in.data(), other_vport);
    ifc::set<typename In::port_num>(in.data(), port_num);
    return in;
}

test::cmd_result hca_vport_context(H& h, unsigned other_vport = 0, unsigned port_num = 1) {
    return h.exec(vport_input<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT,
                                                                 other_vport, port_num),
                  ifc::query_hca_vport_context_out::size_bytes);
}

test::cmd_result query_gid(H& h, unsigned index, std::size_t entries = 1, unsigned other_vport = 0,
                           unsigned port_num = 1) {
    auto in = vport_input<ifc::query_hca_vport_gid_in>(cmd_opcode::QUERY_HCA_VPORT_GID, other_vport, port_num);
    ifc::set<ifc::query_hca_vport_gid_in::gid_index>(in.data(), index);
    return h.exec(in, ifc::query_hca_vport_gid_out::size_bytes + entries * 16);
}

test::cmd_result query_pkey(H& h, unsigned index, std::size_t entries = 1, unsigned other_vport = 0,
                            unsigned port_num = 1) {
    auto in = vport_input<ifc::query_hca_vport_pkey_in>(cmd_opcode::QUERY_HCA_VPORT_PKEY, other_vport, port_num);
    ifc::set<ifc::query_hca_vport_pkey_in::pkey_index>(in.data(), index);
    return h.exec(in, ifc::query_hca_vport_pkey_out::size_bytes + entries * ifc::pkey_entry::size_bytes);
}

std::array<std::uint8_t, 16> gid_at(const test::cmd_result& r, std::size_t i) {
    std::array<std::uint8_t, 16> g{};
    const std::byte* p = ifc::at<ifc::query_hca_vport_gid_out::gid>(r.out.data(), i);
    for (std::size_t k = 0; k < 16; ++k) g[k] = std::to_integer<std::uint8_t>(p[k]);
    return g;
}

std::uint32_t pkey_at(const test::cmd_result& r, std::size_t i) {
    return ifc::get<ifc::pkey_entry::pkey>(ifc::at<ifc::query_hca_vport_pkey_out::pkey>(r.out.data(), i));
}

test::cmd_result nic_vport_context(H& h, unsigned other_vport = 0, unsigned list_type = 0) {
    auto in = H::input<ifc::query_nic_vport_context_in>(cmd_opcode::QUERY_NIC_VPORT_CONTEXT);
    ifc::set<ifc::query_nic_vport_context_in::other_vport>(in.data(), other_vport);
    ifc::set<ifc::query_nic_vport_context_in::allowed_list_type>(in.data(), list_type);
    return h.exec(in, ifc::query_nic_vport_context_out::size_bytes);
}

const std::byte* nic_ctx(const test::cmd_result& r) {
    return ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(r.out.data());
}

// MODIFY_NIC_VPORT_CONTEXT with 512 bytes of input, as rdma-core's VFIO driver sends it.
// `select` sets field_select bits, `ctx` the context fields.
template <typename Select, typename Ctx>
test::cmd_result modify_nic(H& h, Select select, Ctx ctx, unsigned other_vport = 0) {
    auto in = H::input<ifc::modify_nic_vport_context_in>(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT);
    ifc::set<ifc::modify_nic_vport_context_in::other_vport>(in.data(), other_vport);
    select(ifc::at<ifc::modify_nic_vport_context_in::field_select>(in.data()));
    ctx(ifc::at<ifc::modify_nic_vport_context_in::nic_vport_context>(in.data()));
    return h.exec(in, 16);
}

using fs = ifc::modify_nic_vport_field_select;
using nv = ifc::nic_vport_context;

}  // namespace

TEST_CASE("QUERY_HCA_VPORT_CONTEXT: an InfiniBand port as the SM configured it") {
    H h;
    REQUIRE(h.bring_up());
    REQUIRE(h.wait_port_active());
    const auto& cfg = h.dev().config();
    for (unsigned port_num : {0u, 1u}) {  // a single-port device also takes 0
        auto r = hca_vport_context(h, 0, port_num);
        REQUIRE(r.status == cmd_status::OK);
        const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r.out.data());
        using c = ifc::hca_vport_context;
        CHECK(ifc::get<c::port_state>(v) == 4);
        CHECK(ifc::get<c::vport_state>(v) == 4);
        CHECK(ifc::get<c::port_physical_state>(v) == 5);
        CHECK(ifc::get<c::has_smi>(v) == 1);
        CHECK(ifc::get<c::grh_required>(v) == 0);
        CHECK(ifc::get<c::lid>(v) == cfg.lid);
        CHECK(ifc::get<c::sm_lid>(v) == 1);
        CHECK(ifc::get<c::lmc>(v) == 0);
        CHECK(ifc::get<c::node_guid>(v) == cfg.node_guid);
        CHECK(ifc::get<c::system_image_guid>(v) == cfg.node_guid);
        CHECK(ifc::get<c::port_guid>(v) == cfg.node_guid + 1);
        const auto caps = ifc::get<c::cap_mask1>(v);
        CHECK((caps & (1u << 1)) == 0);       // IsSM
        CHECK((caps & (1u << 14)) != 0);      // IsExtendedSpeedsSupported
        CHECK(ifc::get<c::qkey_violation_counter>(v) == 0);
        CHECK(ifc::get<c::pkey_violation_counter>(v) == 0);
    }
    // Cable out: Down and Polling; administratively down: Disabled.
    h.dev().set_link(false);
    auto down = hca_vport_context(h);
    const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(down.out.data());
    CHECK(ifc::get<ifc::hca_vport_context::port_state>(v) == 1);
    CHECK(ifc::get<ifc::hca_vport_context::port_physical_state>(v) == 2);
    auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, 16);
    ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5006);  // PAOS
    std::byte* paos = ifc::at<ifc::access_register_in::register_data>(in.data());
    ifc::set<ifc::paos_reg::local_port>(paos, 1);
    ifc::set<ifc::paos_reg::admin_status>(paos, 2);
    ifc::set<ifc::paos_reg::ase>(paos, 1);
    REQUIRE(h.exec(in, 32).status == cmd_status::OK);
    auto disabled = hca_vport_context(h);
    v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(disabled.out.data());
    CHECK(ifc::get<ifc::hca_vport_context::port_physical_state>(v) == 3);
}

TEST_CASE("HCA vport queries name only the function's own vport on port 1") {
    H h;
    REQUIRE(h.bring_up());
    check_status(hca_vport_context(h, 1, 1), cmd_status::BAD_PARAM, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(hca_vport_context(h, 0, 2), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    check_status(query_gid(h, 0, 1, 1, 1), cmd_status::BAD_PARAM, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_gid(h, 0, 1, 0, 3), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    check_status(query_pkey(h, 0, 1, 1, 1), cmd_status::BAD_PARAM, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_pkey(h, 0, 1, 0, 15), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
}

TEST_CASE("QUERY_HCA_VPORT_CONTEXT on an Ethernet port: no SMI, no LID, GRH required") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    REQUIRE(h.wait_port_active());
    auto r = hca_vport_context(h);
    REQUIRE(r.status == cmd_status::OK);
    const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r.out.data());
    CHECK(ifc::get<ifc::hca_vport_context::has_smi>(v) == 0);
    CHECK(ifc::get<ifc::hca_vport_context::grh_required>(v) == 1);
    CHECK(ifc::get<ifc::hca_vport_context::lid>(v) == 0);
    CHECK(ifc::get<ifc::hca_vport_context::port_state>(v) == 4);
}

TEST_CASE("QUERY_HCA_VPORT_GID: GID 0 is fe80::/64 + port GUID; 32 entries; one or all") {
    H h;
    REQUIRE(h.bring_up());
    const std::uint64_t guid = h.dev().config().node_guid + 1;
    std::array<std::uint8_t, 16> want{0xfe, 0x80};
    for (int k = 0; k < 8; ++k) want[8 + k] = static_cast<std::uint8_t>(guid >> (56 - 8 * k));
    auto one = query_gid(h, 0);
    REQUIRE(one.status == cmd_status::OK);
    CHECK(ifc::get<ifc::query_hca_vport_gid_out::gids_num>(one.out.data()) == 1);
    CHECK(gid_at(one, 0) == want);
    auto other = query_gid(h, 31);
    REQUIRE(other.status == cmd_status::OK);
    CHECK(gid_at(other, 0) == std::array<std::uint8_t, 16>{});
    auto all = query_gid(h, 0xffff, 32);
    REQUIRE(all.status == cmd_status::OK);
    CHECK(ifc::get<ifc::query_hca_vport_gid_out::gids_num>(all.out.data()) == 32);
    CHECK(gid_at(all, 0) == want);
    CHECK(gid_at(all, 1) == std::array<std::uint8_t, 16>{});
    check_status(query_gid(h, 32), cmd_status::BAD_INDEX, cmd_syndrome::EXCEEDS_LIMIT);
    // A shorter output gets the entries that fit.
    auto short_out = query_gid(h, 0xffff, 0);
    REQUIRE(short_out.status == cmd_status::OK);
    CHECK(short_out.out.size() == ifc::query_hca_vport_gid_out::size_bytes);
}

TEST_CASE("QUERY_HCA_VPORT_GID on an Ethernet port: empty until the driver programs RoCE addresses") {
    // The table itself: roce_address_test.cc.
    H h(ethernet());
    REQUIRE(h.bring_up());
    auto r = query_gid(h, 0);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(gid_at(r, 0) == std::array<std::uint8_t, 16>{});
}

TEST_CASE("QUERY_HCA_VPORT_PKEY: the default P_Key at index 0 of 128") {
    H h;
    REQUIRE(h.bring_up());
    auto first = query_pkey(h, 0);
    REQUIRE(first.status == cmd_status::OK);
    CHECK(pkey_at(first, 0) == 0xffff);
    auto other = query_pkey(h, 127);
    REQUIRE(other.status == cmd_status::OK);
    CHECK(pkey_at(other, 0) == 0);
    auto all = query_pkey(h, 0xffff, 128);
    REQUIRE(all.status == cmd_status::OK);
    CHECK(pkey_at(all, 0) == 0xffff);
    CHECK(pkey_at(all, 1) == 0);
    CHECK(pkey_at(all, 127) == 0);
    check_status(query_pkey(h, 128), cmd_status::BAD_INDEX, cmd_syndrome::EXCEEDS_LIMIT);
}

TEST_CASE("QUERY_NIC_VPORT_CONTEXT: permanent MAC on Ethernet, none on InfiniBand") {
    H eth(ethernet());
    REQUIRE(eth.bring_up());
    const auto& mac = eth.dev().config().mac;
    auto r = nic_vport_context(eth);
    REQUIRE(r.status == cmd_status::OK);
    const std::byte* addr = ifc::at<nv::permanent_address>(nic_ctx(r));
    CHECK(ifc::get<ifc::mac_address_layout::mac_addr_47_32>(addr) == (std::uint32_t{mac[0]} << 8 | mac[1]));
    CHECK(ifc::get<ifc::mac_address_layout::mac_addr_31_0>(addr) ==
          (std::uint32_t{mac[2]} << 24 | std::uint32_t{mac[3]} << 16 | std::uint32_t{mac[4]} << 8 | mac[5]));
    CHECK(ifc::get<nv::roce_en>(nic_ctx(r)) == 0);
    CHECK(ifc::get<nv::mtu>(nic_ctx(r)) == 9216);  // never set: the port's, as PMTU says
    CHECK(ifc::get<nv::node_guid>(nic_ctx(r)) == eth.dev().config().node_guid);
    auto vlans = nic_vport_context(eth, 0, 2);
    REQUIRE(vlans.status == cmd_status::OK);
    CHECK(ifc::get<nv::allowed_list_type>(nic_ctx(vlans)) == 2);
    CHECK(ifc::get<nv::allowed_list_size>(nic_ctx(vlans)) == 0);
    check_status(nic_vport_context(eth, 0, 3), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(nic_vport_context(eth, 1), cmd_status::BAD_PARAM, cmd_syndrome::UNKNOWN_RESOURCE);

    H ib;
    REQUIRE(ib.bring_up());
    auto i = nic_vport_context(ib);
    REQUIRE(i.status == cmd_status::OK);
    const std::byte* none = ifc::at<nv::permanent_address>(nic_ctx(i));
    CHECK(ifc::get<ifc::mac_address_layout::mac_addr_47_32>(none) == 0);
    CHECK(ifc::get<ifc::mac_address_layout::mac_addr_31_0>(none) == 0);
    CHECK(ifc::get<nv::system_image_guid>(nic_ctx(i)) == ib.dev().config().node_guid);
}

TEST_CASE("MODIFY_NIC_VPORT_CONTEXT on Ethernet: RoCE, MTU and promiscuous modes") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    // What rdma-core's VFIO driver sends after INIT_HCA.
    auto roce = modify_nic(h, [](std::byte* s) { ifc::set<fs::roce_en>(s, 1); },
                           [](std::byte* c) { ifc::set<nv::roce_en>(c, 1); });
    REQUIRE(roce.status == cmd_status::OK);
    REQUIRE(modify_nic(h, [](std::byte* s) { ifc::set<fs::mtu>(s, 1); },
                       [](std::byte* c) { ifc::set<nv::mtu>(c, 4122); })
                .status == cmd_status::OK);
    REQUIRE(modify_nic(h, [](std::byte* s) { ifc::set<fs::promisc>(s, 1); },
                       [](std::byte* c) { ifc::set<nv::promisc_mc>(c, 1); })
                .status == cmd_status::OK);
    auto q = nic_vport_context(h);
    CHECK(ifc::get<nv::roce_en>(nic_ctx(q)) == 1);
    CHECK(ifc::get<nv::mtu>(nic_ctx(q)) == 4122);
    CHECK(ifc::get<nv::promisc_mc>(nic_ctx(q)) == 1);
    CHECK(ifc::get<nv::promisc_uc>(nic_ctx(q)) == 0);

    // A refused command changes nothing, not even the fields it selected correctly.
    check_status(modify_nic(
                     h,
                     [](std::byte* s) {
                         ifc::set<fs::roce_en>(s, 1);
                         ifc::set<fs::mtu>(s, 1);
                     },
                     [](std::byte* c) { ifc::set<nv::mtu>(c, 9217); }),
                 cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    check_status(modify_nic(
                     h,
                     [](std::byte* s) {
                         ifc::set<fs::roce_en>(s, 1);
                         ifc::set<fs::node_guid>(s, 1);
                     },
                     [](std::byte* c) { ifc::set<nv::node_guid>(c, 42); }),
                 cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    for (auto bit : {0, 17}) {  // unknown field_select bits (dword bits 31 and 14)
        check_status(modify_nic(
                         h, [bit](std::byte* s) { s[bit / 8] |= std::byte(0x80 >> bit % 8); }, [](std::byte*) {}),
                     cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    }
    check_status(modify_nic(
                     h, [](std::byte* s) { ifc::set<fs::permanent_address>(s, 1); }, [](std::byte*) {}),
                 cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(modify_nic(
                     h, [](std::byte* s) { ifc::set<fs::mtu>(s, 1); }, [](std::byte*) {}, 1),
                 cmd_status::BAD_PARAM, cmd_syndrome::UNKNOWN_RESOURCE);
    q = nic_vport_context(h);
    CHECK(ifc::get<nv::roce_en>(nic_ctx(q)) == 1);
    CHECK(ifc::get<nv::mtu>(nic_ctx(q)) == 4122);
    CHECK(ifc::get<nv::node_guid>(nic_ctx(q)) == h.dev().config().node_guid);

    // Teardown returns the vport to its defaults.
    REQUIRE(h.exec(H::input<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA), 16).status == cmd_status::OK);
    REQUIRE(h.init_hca().status == cmd_status::OK);
    q = nic_vport_context(h);
    CHECK(ifc::get<nv::roce_en>(nic_ctx(q)) == 0);
    CHECK(ifc::get<nv::mtu>(nic_ctx(q)) == 9216);  // unset again: the port's, as PMTU says
}

TEST_CASE("MODIFY_NIC_VPORT_CONTEXT on InfiniBand: no Ethernet attribute can change") {
    H h;
    REQUIRE(h.bring_up());
    check_status(
        modify_nic(
            h, [](std::byte* s) { ifc::set<fs::roce_en>(s, 1); }, [](std::byte* c) { ifc::set<nv::roce_en>(c, 1); }),
        cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(
        modify_nic(
            h, [](std::byte* s) { ifc::set<fs::mtu>(s, 1); }, [](std::byte* c) { ifc::set<nv::mtu>(c, 2048); }),
        cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    CHECK(modify_nic(h, [](std::byte*) {}, [](std::byte*) {}).status == cmd_status::OK);
    CHECK(ifc::get<nv::roce_en>(nic_ctx(nic_vport_context(h))) == 0);
}

// --- MAD_IFC -----------------------------------------------------------------------

namespace {

constexpr std::size_t kData = 64;  // SMP data field

struct mad_spec {
    std::uint8_t base_version = 1;
    std::uint8_t mgmt_class = 0x01;  // LID-routed SMP
    std::uint8_t class_version = 1;
    std::uint8_t method = 0x01;      // Get
    std::uint16_t attr_id = 0x0015;  // PortInfo
    std::uint32_t attr_mod = 1;
    std::uint16_t op_mod = 0x3;      // ignore M_Key and B_Key, as Linux sends it
    std::uint32_t port = 1;
};

test::cmd_result mad_ifc(H& h, const mad_spec& m) {
    auto in = H::input<ifc::mad_ifc_in>(cmd_opcode::MAD_IFC, m.op_mod);
    ifc::set<ifc::mad_ifc_in::port>(in.data(), m.port);
    auto set8 = [&](std::size_t off, std::uint8_t v) { ifc::set<ifc::mad_ifc_in::mad>(in.data(), off, v); };
    set8(0, m.base_version);
    set8(1, m.mgmt_class);
    set8(2, m.class_version);
    set8(3, m.method);
    set8(8, 0xab);  // transaction ID, echoed
    set8(16, static_cast<std::uint8_t>(m.attr_id >> 8));
    set8(17, static_cast<std::uint8_t>(m.attr_id));
    for (int k = 0; k < 4; ++k) set8(20 + k, static_cast<std::uint8_t>(m.attr_mod >> (24 - 8 * k)));
    return h.exec(in, ifc::mad_ifc_out::size_bytes);
}

std::uint64_t be(const test::cmd_result& r, std::size_t off, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k) v = v << 8 | ifc::get<ifc::mad_ifc_out::response_mad_packet>(r.out.data(), off + k);
    return v;
}
std::uint8_t b(const test::cmd_result& r, std::size_t off) { return static_cast<std::uint8_t>(be(r, off, 1)); }
std::uint16_t mad_status(const test::cmd_result& r) { return static_cast<std::uint16_t>(be(r, 4, 2)); }

}  // namespace

TEST_CASE("MAD_IFC Get(PortInfo): an active 4x EDR port with MTU 4096") {
    H h;
    REQUIRE(h.bring_up());
    REQUIRE(h.wait_port_active());
    const auto& cfg = h.dev().config();
    for (std::uint8_t cls : {0x01, 0x81}) {  // LID-routed and directed-route SMPs
        auto r = mad_ifc(h, {.mgmt_class = cls});
        REQUIRE(r.status == cmd_status::OK);
        CHECK(b(r, 3) == 0x81);  // GetResp
        CHECK(mad_status(r) == 0);
        CHECK(b(r, 8) == 0xab);
        CHECK(be(r, kData + 0, 8) == 0);                     // M_Key
        CHECK(be(r, kData + 8, 8) == 0xfe80000000000000ull);  // GidPrefix
        CHECK(be(r, kData + 16, 2) == cfg.lid);
        CHECK(be(r, kData + 18, 2) == 1);  // MasterSMLID
        const auto caps = be(r, kData + 20, 4);
        CHECK((caps & (1u << 1)) == 0);   // IsSM
        CHECK((caps & (1u << 14)) != 0);  // IsExtendedSpeedsSupported
        CHECK(b(r, kData + 31) == 2);          // LinkWidthActive 4x
        CHECK((b(r, kData + 32) & 0xf) == 4);  // PortState Active
        CHECK((b(r, kData + 33) >> 4) == 5);     // PortPhysicalState LinkUp
        CHECK((b(r, kData + 34) & 0x7) == 0);  // LMC
        CHECK((b(r, kData + 36) >> 4) == 5);     // NeighborMTU 4096
        CHECK((b(r, kData + 41) & 0xf) == 5);  // MTUCap 4096
        CHECK(b(r, kData + 50) == 32);         // GUIDCap
        CHECK((b(r, kData + 62) >> 4) == 2);     // LinkSpeedExtActive EDR
    }
    h.dev().set_link(false);
    auto down = mad_ifc(h, {.attr_mod = 0});
    REQUIRE(down.status == cmd_status::OK);
    CHECK((b(down, kData + 32) & 0xf) == 1);  // Down
    CHECK((b(down, kData + 33) >> 4) == 2);     // Polling
}

TEST_CASE("MAD_IFC Get(NodeInfo): a one-port channel adapter") {
    H h;
    REQUIRE(h.bring_up());
    const auto& cfg = h.dev().config();
    auto r = mad_ifc(h, {.attr_id = 0x0011, .attr_mod = 0});
    REQUIRE(r.status == cmd_status::OK);
    CHECK(mad_status(r) == 0);
    CHECK(b(r, kData + 0) == 1);  // BaseVersion
    CHECK(b(r, kData + 2) == 1);  // NodeType CA
    CHECK(b(r, kData + 3) == 1);  // NumPorts
    CHECK(be(r, kData + 4, 8) == cfg.node_guid);
    CHECK(be(r, kData + 12, 8) == cfg.node_guid);
    CHECK(be(r, kData + 20, 8) == cfg.node_guid + 1);
    CHECK(be(r, kData + 28, 2) == 128);  // PartitionCap
    CHECK(be(r, kData + 30, 2) == cfg.device_id);
    CHECK(b(r, kData + 36) == 1);  // LocalPortNum
    CHECK(be(r, kData + 37, 3) == 0x0002c9);
}

// Linux's mlx5_ib on an IB port without ib_virt reads these three through MAD_IFC and
// takes the data without looking at the MAD status (drivers/infiniband/hw/mlx5/mad.c):
// zeros here were its P_Key table (IPoIB: "P_Key 0x8000 is Invalid") and its GIDs' GUIDs.
TEST_CASE("MAD_IFC Get(NodeDescription), Get(GUIDInfo), Get(P_KeyTable): what mlx5_ib reads of its port") {
    H h;
    REQUIRE(h.bring_up());
    const auto& cfg = h.dev().config();
    auto desc = mad_ifc(h, {.attr_id = 0x0010, .attr_mod = 0});
    REQUIRE(desc.status == cmd_status::OK);
    CHECK(mad_status(desc) == 0);
    std::string text;
    for (std::size_t k = 0; k < 64 && b(desc, kData + k) != 0; ++k) text += static_cast<char>(b(desc, kData + k));
    CHECK(text == "MT" + std::to_string(cfg.device_id) + " cxv ConnectX model");

    auto guids = mad_ifc(h, {.attr_id = 0x0014, .attr_mod = 0});
    REQUIRE(guids.status == cmd_status::OK);
    CHECK(mad_status(guids) == 0);
    CHECK(be(guids, kData, 8) == cfg.node_guid + 1);  // GUID 0: the port GUID
    CHECK(be(guids, kData + 8, 8) == 0);
    CHECK(mad_status(mad_ifc(h, {.attr_id = 0x0014, .attr_mod = 3})) == 0);  // 32 GUIDs: blocks 0-3
    CHECK(mad_status(mad_ifc(h, {.attr_id = 0x0014, .attr_mod = 4})) == 0x001c);

    auto pkeys = mad_ifc(h, {.attr_id = 0x0016, .attr_mod = 0});
    REQUIRE(pkeys.status == cmd_status::OK);
    CHECK(mad_status(pkeys) == 0);
    CHECK(be(pkeys, kData, 2) == 0xffff);  // the default full-member P_Key at index 0
    CHECK(be(pkeys, kData + 2, 2) == 0);
    CHECK(mad_status(mad_ifc(h, {.attr_id = 0x0016, .attr_mod = 3})) == 0);  // 128 P_Keys: blocks 0-3
    CHECK(mad_status(mad_ifc(h, {.attr_id = 0x0016, .attr_mod = 4})) == 0x001c);
}

// PCAP (0x5001) as Linux's mlx5_set_port_caps writes it (ib_cm's ib_modify_port on an IB
// port): register_data at Linux's offsets; what it sets is what PortInfo and the HCA
// vport context report.
TEST_CASE("PCAP: the port capability mask a driver writes is PortInfo:CapabilityMask and cap_mask1") {
    H h;
    REQUIRE(h.bring_up());
    REQUIRE(h.wait_port_active());
    const auto pcap = [&](std::uint16_t op_mod, std::uint32_t mask) {
        std::vector<std::byte> reg(CXV_LINUX_BYTES(pcap_reg));
        CXV_LINUX_SET(pcap_reg, reg, local_port, 1);
        CXV_LINUX_SET(pcap_reg, reg, port_capability_mask[0], mask);
        auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, op_mod, reg.size());
        ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5001);
        std::memcpy(in.data() + 16, reg.data(), reg.size());  // register_data: PRM offset 0x10
        auto r = h.exec(in, 16 + reg.size());
        REQUIRE(r.status == cmd_status::OK);
        return CXV_LINUX_GET(pcap_reg, std::span<const std::byte>(r.out).subspan(16), port_capability_mask[0]);
    };
    const auto cap_mask1 = [&] {
        auto r = hca_vport_context(h);
        REQUIRE(r.status == cmd_status::OK);
        return ifc::get<ifc::hca_vport_context::cap_mask1>(
            ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r.out.data()));
    };
    const auto before = be(mad_ifc(h, {}), kData + 20, 4);
    CHECK(pcap(1, 0) == before);  // a read: the mask the port reports
    CHECK(cap_mask1() == before);
    const std::uint32_t mine = static_cast<std::uint32_t>(before) ^ (1u << 9);
    CHECK(pcap(0, mine) == mine);  // a write, read back
    CHECK(be(mad_ifc(h, {}), kData + 20, 4) == mine);
    CHECK(cap_mask1() == mine);
}

TEST_CASE("MAD_IFC answers what the agent does not serve with a MAD status") {
    H h;
    REQUIRE(h.bring_up());
    auto expect = [&](const mad_spec& m, std::uint8_t method, std::uint16_t status) {
        auto r = mad_ifc(h, m);
        REQUIRE(r.status == cmd_status::OK);
        CHECK(b(r, 3) == method);
        CHECK(mad_status(r) == status);
    };
    expect({.attr_id = 0x0020}, 0x81, 0x000c);          // SMInfo: unsupported attribute
    expect({.method = 0x02}, 0x81, 0x000c);             // Set(PortInfo)
    expect({.method = 0x12}, 0x92, 0x0008);             // GetTable: unsupported method
    expect({.base_version = 2}, 0x81, 0x0004);          // bad version
    expect({.class_version = 2}, 0x81, 0x0004);
    expect({.attr_mod = 2}, 0x81, 0x001c);              // no port 2
    expect({.mgmt_class = 0x04, .attr_id = 0x12}, 0x81, 0x000c);  // PerfMgt is not served
}

TEST_CASE("MAD_IFC refuses bad op_mod and ports, and SMPs on an Ethernet port") {
    H h;
    REQUIRE(h.bring_up());
    check_status(mad_ifc(h, {.op_mod = 4}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_status(mad_ifc(h, {.port = 0}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    check_status(mad_ifc(h, {.port = 2}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    CHECK(mad_ifc(h, {.op_mod = 0}).status == cmd_status::OK);

    H eth(ethernet());
    REQUIRE(eth.bring_up());
    check_status(mad_ifc(eth, {}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(mad_ifc(eth, {.mgmt_class = 0x81}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    auto pma = mad_ifc(eth, {.mgmt_class = 0x04, .attr_id = 0x12});
    REQUIRE(pma.status == cmd_status::OK);
    CHECK(mad_status(pma) == 0x000c);
}

TEST_CASE("disable_link_up set before INIT_HCA keeps the port down until PAOS brings it up") {
    H h;
    REQUIRE(h.bring_up_link_disabled());
    auto state = [&] {
        auto r = hca_vport_context(h);
        REQUIRE(r.status == cmd_status::OK);
        return ifc::get<ifc::hca_vport_context::port_state>(
            ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r.out.data()));
    };
    CHECK(state() == 1);  // Down
    auto up = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, 16);
    ifc::set<ifc::access_register_in::register_id>(up.data(), 0x5006);  // PAOS
    std::byte* paos = ifc::at<ifc::access_register_in::register_data>(up.data());
    ifc::set<ifc::paos_reg::local_port>(paos, 1);
    ifc::set<ifc::paos_reg::admin_status>(paos, 1);  // up
    ifc::set<ifc::paos_reg::ase>(paos, 1);
    REQUIRE(h.exec(up, 32).status == cmd_status::OK);
    CHECK(state() == 1);  // the link trains first
    REQUIRE(h.wait_port_active());
    CHECK(state() == 4);  // Active
}

TEST_CASE("MODIFY_NIC_VPORT_CONTEXT address lists: multicast and unicast MACs and VLANs, as mlx5e's rx mode sends them") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    // The caps announce 2^7 entries per list on Ethernet.
    const auto caps = test::query_cap(h, 1);
    REQUIRE(caps.status == cmd_status::OK);
    CHECK(CXV_LINUX_GET(query_hca_cap_out, caps.out, capability.cmd_hca_cap.log_max_current_mc_list) == 7);
    CHECK(CXV_LINUX_GET(query_hca_cap_out, caps.out, capability.cmd_hca_cap.log_max_current_uc_list) == 7);
    // Linux's mlx5_modify_nic_vport_mac_list: the list after the context, 8 bytes each.
    auto list = [&](unsigned type, const std::vector<std::uint64_t>& entries, std::size_t room) {
        auto in = test::linux_command(CXV_LINUX_BYTES(modify_nic_vport_context_in) + 8 * room,
                                      cmd_opcode::MODIFY_NIC_VPORT_CONTEXT);
        CXV_LINUX_SET(modify_nic_vport_context_in, in, field_select.addresses_list, 1);
        CXV_LINUX_SET(modify_nic_vport_context_in, in, nic_vport_context.allowed_list_type, type);
        CXV_LINUX_SET(modify_nic_vport_context_in, in, nic_vport_context.allowed_list_size, entries.size());
        const std::size_t at = CXV_LINUX_BYTES(modify_nic_vport_context_in);
        for (std::size_t i = 0; i < entries.size() && i < room; ++i) test::linux_put(in, (at + 8 * i) * 8, 64, entries[i]);
        return h.exec(in, CXV_LINUX_BYTES(modify_nic_vport_context_out));
    };
    auto query = [&](unsigned type) {
        auto in = test::linux_command(CXV_LINUX_BYTES(query_nic_vport_context_in), cmd_opcode::QUERY_NIC_VPORT_CONTEXT);
        CXV_LINUX_SET(query_nic_vport_context_in, in, allowed_list_type, type);
        return h.exec(in, CXV_LINUX_BYTES(query_nic_vport_context_out) + 8 * 4);
    };
    const std::uint64_t mc1 = 0x01005e000001ull, mc2 = 0x333300000001ull, uc = 0x02aabbccddeeull;
    REQUIRE(list(1, {mc1, mc2}, 2).status == cmd_status::OK);
    REQUIRE(list(0, {uc}, 1).status == cmd_status::OK);
    REQUIRE(list(2, {std::uint64_t{0x64} << 32}, 1).status == cmd_status::OK);  // VLAN 100: vlan_layout's first dword
    const auto mc = query(1);
    REQUIRE(mc.status == cmd_status::OK);
    CHECK(CXV_LINUX_GET(query_nic_vport_context_out, mc.out, nic_vport_context.allowed_list_type) == 1);
    CHECK(CXV_LINUX_GET(query_nic_vport_context_out, mc.out, nic_vport_context.allowed_list_size) == 2);
    const std::size_t at = CXV_LINUX_BYTES(query_nic_vport_context_out) * 8;
    CHECK(test::linux_bits(mc.out, at, 64) == mc1);
    CHECK(test::linux_bits(mc.out, at + 64, 64) == mc2);
    const auto u = query(0);
    CHECK(CXV_LINUX_GET(query_nic_vport_context_out, u.out, nic_vport_context.allowed_list_size) == 1);
    CHECK(test::linux_bits(u.out, at, 64) == uc);
    const auto v = query(2);
    CHECK(CXV_LINUX_GET(query_nic_vport_context_out, v.out, nic_vport_context.allowed_list_size) == 1);
    CHECK(test::linux_bits(v.out, at, 64) == (std::uint64_t{0x64} << 32));
    // A new list replaces the old one; refusals change nothing.
    REQUIRE(list(1, {mc2}, 1).status == cmd_status::OK);
    check_status(list(1, std::vector<std::uint64_t>(129, mc1), 129), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    check_status(list(1, {mc1, mc2}, 1), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    check_status(list(3, {}, 0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    const auto after = query(1);
    CHECK(CXV_LINUX_GET(query_nic_vport_context_out, after.out, nic_vport_context.allowed_list_size) == 1);
    CHECK(test::linux_bits(after.out, at, 64) == mc2);
}
