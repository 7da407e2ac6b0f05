// The GID table driver::hca programs on a RoCE port at bring-up, run against the model
// under cxv-sim with an Ethernet port: the commands it sends, the entries the device
// then holds (QUERY_ROCE_ADDRESS, QUERY_HCA_VPORT_GID) and the port information.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "tests/driver/test_util.h"

using namespace cxv;
namespace ifc = cxv::hw::ifc;
using gid = std::array<std::uint8_t, 16>;

namespace {

// cxv-sim's first function: MAC 02:c5:00:00:00:01.
constexpr std::array<std::uint8_t, 6> kSimMac{0x02, 0xc5, 0x00, 0x00, 0x00, 0x01};

// The device's entry `index`, read with QUERY_ROCE_ADDRESS.
std::vector<std::byte> roce_address(driver::hca& h, unsigned index) {
    std::vector<std::byte> in(ifc::query_roce_address_in::size_bytes);
    ifc::set<ifc::query_roce_address_in::opcode>(in.data(),
                                                 static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_ROCE_ADDRESS));
    ifc::set<ifc::query_roce_address_in::roce_address_index>(in.data(), index);
    ifc::set<ifc::query_roce_address_in::vhca_port_num>(in.data(), 1);
    auto r = h.exec(in, ifc::query_roce_address_out::size_bytes);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    const std::byte* a = ifc::at<ifc::query_roce_address_out::roce_address>(r->data());
    return {a, a + ifc::roce_addr_layout::size_bytes};
}

gid l3(const std::vector<std::byte>& a) {
    gid g{};
    for (std::size_t i = 0; i < 16; ++i) g[i] = ifc::get<ifc::roce_addr_layout::source_l3_address>(a.data(), i);
    return g;
}

gid vport_gid(driver::hca& h, unsigned index) {
    std::vector<std::byte> in(ifc::query_hca_vport_gid_in::size_bytes);
    ifc::set<ifc::query_hca_vport_gid_in::opcode>(in.data(),
                                                  static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_GID));
    ifc::set<ifc::query_hca_vport_gid_in::port_num>(in.data(), 1);
    ifc::set<ifc::query_hca_vport_gid_in::gid_index>(in.data(), index);
    auto r = h.exec(in, ifc::query_hca_vport_gid_out::size_bytes + 16);
    REQUIRE(r.ok());
    gid g{};
    std::memcpy(g.data(), r->data() + ifc::query_hca_vport_gid_out::size_bytes, 16);
    return g;
}

}  // namespace

TEST_CASE("RoCE bring-up programs GID 0 (fe80:: + EUI-64 of the MAC) and GID 1 (the link-local IPv4)") {
    auto h = test::bring_up();
    CHECK(h->ethernet());
    CHECK(h->mac() == kSimMac);
    // 169.254.(1 + mac[4] % 254).mac[5]
    const std::array<std::uint8_t, 4> ip{169, 254, 1, 1};
    CHECK(h->ipv4() == ip);
    const gid want0{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01};
    const gid want1{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 1};
    REQUIRE(h->roce_gids().size() == 2);
    CHECK(h->roce_gids()[0] == want0);
    CHECK(h->roce_gids()[1] == want1);

    // Two SET_ROCE_ADDRESS after INIT_HCA.
    std::size_t sets = 0;
    bool after_init = false, set_before_init = false;
    for (const auto& r : h->cmd().trace()) {
        if (r.opcode == hw::cmd_opcode::INIT_HCA) after_init = true;
        if (r.opcode == hw::cmd_opcode::SET_ROCE_ADDRESS) {
            ++sets;
            if (!after_init) set_before_init = true;
        }
    }
    CHECK(sets == 2);
    CHECK_FALSE(set_before_init);

    // What the device holds: version 2, the type of each address, the MAC as source.
    const auto e0 = roce_address(*h, 0), e1 = roce_address(*h, 1);
    using ra = ifc::roce_addr_layout;
    CHECK(l3(e0) == want0);
    CHECK(ifc::get<ra::roce_version>(e0.data()) == static_cast<std::uint32_t>(hw::roce_version::V2));
    CHECK(ifc::get<ra::roce_l3_type>(e0.data()) == static_cast<std::uint32_t>(hw::roce_l3_type::IPV6));
    CHECK(ifc::get<ra::source_mac_47_32>(e0.data()) == 0x02c5);
    CHECK(ifc::get<ra::source_mac_31_0>(e0.data()) == 0x00000001);
    CHECK(l3(e1) == want1);
    CHECK(ifc::get<ra::roce_version>(e1.data()) == static_cast<std::uint32_t>(hw::roce_version::V2));
    CHECK(ifc::get<ra::roce_l3_type>(e1.data()) == static_cast<std::uint32_t>(hw::roce_l3_type::IPV4));
    CHECK(ifc::get<ra::source_mac_31_0>(e1.data()) == 0x00000001);
    CHECK(l3(roce_address(*h, 2)) == gid{});  // nothing else
    // The vport's GID table agrees.
    CHECK(vport_gid(*h, 0) == want0);
    CHECK(vport_gid(*h, 1) == want1);

    // The port information lists both.
    auto p = h->query_port(1);
    REQUIRE(p.ok());
    CHECK(p->ethernet);
    REQUIRE(p->gids.size() == 2);
    CHECK(p->gids[0] == want0);
    CHECK(p->gids[1] == want1);
    CHECK(std::equal(want0.begin(), want0.end(), p->gid));
}

TEST_CASE("options::ipv4 chooses GID 1's address") {
    driver::hca::options o;
    o.ipv4 = std::array<std::uint8_t, 4>{169, 254, 77, 5};
    auto h = test::bring_up(o);
    CHECK(h->ipv4() == *o.ipv4);
    const gid want1{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 77, 5};
    REQUIRE(h->roce_gids().size() == 2);
    CHECK(h->roce_gids()[1] == want1);
    CHECK(l3(roce_address(*h, 1)) == want1);
    auto p = h->query_port(1);
    REQUIRE(p.ok());
    REQUIRE(p->gids.size() == 2);
    CHECK(p->gids[1] == want1);
}

TEST_CASE("the address helpers: RFC 3927's range, modified EUI-64") {
    using H = driver::hca;
    CHECK(H::link_local_ipv4({0, 0, 0, 0, 0, 0}) == std::array<std::uint8_t, 4>{169, 254, 1, 0});
    CHECK(H::link_local_ipv4({0, 0, 0, 0, 253, 9}) == std::array<std::uint8_t, 4>{169, 254, 254, 9});
    // 254 wraps to the first usable /24, never 169.254.0.x or 169.254.255.x.
    CHECK(H::link_local_ipv4({0, 0, 0, 0, 254, 9}) == std::array<std::uint8_t, 4>{169, 254, 1, 9});
    CHECK(H::link_local_ipv4({0, 0, 0, 0, 255, 9}) == std::array<std::uint8_t, 4>{169, 254, 2, 9});
    // The universal/local bit flips: a universal MAC 00:... gets 02.
    CHECK(H::link_local_gid({0x00, 0x11, 0x22, 0x33, 0x44, 0x55}) ==
          gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55});
}

// A card sends a RoCE packet to the MAC the QP's path carries and resolves none itself
// (docs/linux-oracle.md, finding 19). Where the peer's GID names its MAC (a link-local
// EUI-64 GID, every port's GID 0), INIT2RTR carries it; for an IPv4-mapped GID cxv has no
// MAC to give yet, and rmac stays 0 (the finding, open).
TEST_CASE("RoCE INIT2RTR carries the MAC a link-local EUI-64 GID names") {
    using namespace cxv::driver;
    auto h = test::bring_up();
    auto domain = test::take(pd::create(*h));
    auto scq = test::take(cq::create(*h, {}));
    auto rcq = test::take(cq::create(*h, {}));
    auto rmac_after_rtr = [&](const gid& dgid) {
        qp::attr a;
        a.type = qp_type::rc;
        a.domain = domain;
        a.send_cq = scq;
        a.recv_cq = rcq;
        auto q = test::take(qp::create(a));
        qp::modify_attr m;
        m.dest_qpn = 0x123;
        m.path_mtu = 3;
        m.ah.sgid_index = 0;
        m.ah.dgid = dgid;
        test::check_ok(q->modify(qp_state::init, m));
        test::check_ok(q->modify(qp_state::rtr, m));
        std::vector<std::byte> in(ifc::query_qp_in::size_bytes);
        ifc::set<ifc::query_qp_in::opcode>(in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_QP));
        ifc::set<ifc::query_qp_in::qpn>(in.data(), q->qpn());
        const auto out = test::take(h->exec(in, ifc::query_qp_out::size_bytes));
        const std::byte* path = ifc::at<ifc::qpc::primary_address_path>(ifc::at<ifc::query_qp_out::qpc>(out.data()));
        return std::uint64_t{ifc::get<ifc::ads::rmac_47_32>(path)} << 32 | ifc::get<ifc::ads::rmac_31_0>(path);
    };
    // The peer 02:c5:00:00:00:11 by its GID 0 (the universal/local bit flipped back).
    CHECK(rmac_after_rtr({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x11}) ==
          0x02c500000011);
    CHECK(rmac_after_rtr(driver::hca::link_local_gid({0x00, 0x11, 0x22, 0x33, 0x44, 0x55})) == 0x001122334455);
    // Not EUI-64 (no ff:fe), not link-local, IPv4-mapped: no MAC from the GID.
    CHECK(rmac_after_rtr({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0x12, 0x34, 0x00, 0x00, 0x11}) == 0);
    CHECK(rmac_after_rtr({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x11}) == 0);
    CHECK(rmac_after_rtr({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 2}) == 0);
}
