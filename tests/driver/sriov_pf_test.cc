// The PF's part for its VFs (driver/hca/sriov.h) with cxv's driver as the PF's driver
// over vfio-pci, on the model (`cxv-sim run --set sriov_totalvfs=2 --set
// vfio_pci_enable_sriov=Y`, Ethernet): the PF is its VFs' vport group manager; what it
// sets of a VF's vport (MAC, admin state) is what the VF's own driver then finds; the VF
// opens only with the PF's VF token; another function's vport is refused to a VF.
// Expected values come from the PRM and Linux's mlx5_core (sriov.c, eswitch.c, vport.c),
// not from the model.
#include <cerrno>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "driver/hca/sriov.h"
#include "driver/pci/pci.h"
#include "hw/cmd_values.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace std::chrono_literals;
namespace sriov = cxv::driver::sriov;

namespace {

constexpr const char* kToken = "6f1c7a52-9a43-4b1e-8d0e-2f5b3c4d5e6f";
constexpr std::array<std::uint8_t, 6> kSetMac{0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

std::unique_ptr<driver::hca> open_vf(const std::string& bdf, const std::string& token) {
    auto d = driver::vfio::device::open(bdf, token);
    REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
    driver::hca::options o;
    o.port_timeout = 0ms;  // a VF whose vport is down never comes up: look, do not wait
    auto h = driver::hca::create(std::move(d).value(), o);
    REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
    return std::move(h).value();
}

bool active(driver::hca& h) {
    auto ps = h.query_port_state(1);
    REQUIRE(ps.ok());
    return ps->logical == static_cast<unsigned>(hw::ib_port_state::ACTIVE);
}

}  // namespace

TEST_CASE("cxv as an SR-IOV PF's driver: VF HCAs, vports, VF token, and what each VF then sees") {
    const std::string pf_bdf = test::kBdf;
    auto pf_dev = test::open_device();
    REQUIRE(pf_dev->set_vf_token(kToken).ok());
    CHECK(pf_dev->set_vf_token("not-a-uuid").error().code == EINVAL);
    auto pf = driver::hca::create(std::move(pf_dev), {});
    REQUIRE_MESSAGE(pf.ok(), (pf.ok() ? "" : pf.error().message));
    driver::hca& p = **pf;
    REQUIRE(sriov::vport_group_manager(p));

    // Linux's order: each VF's HCA and vport first, then sriov_numvfs.
    for (std::uint16_t n : {1, 2}) REQUIRE(sriov::enable_vf_hca(p, n).ok());
    auto before = sriov::query_vf_vport(p, 2);
    REQUIRE(before.ok());
    CHECK(before->mac != std::array<std::uint8_t, 6>{});  // the model's firmware-assigned address
    CHECK(before->mac != p.mac());
    CHECK(before->admin == hw::vport_admin_state::AUTO);
    CHECK(before->state == hw::vport_state::UP);  // AUTO follows the uplink, which is up
    REQUIRE(sriov::set_vf_mac(p, 2, kSetMac).ok());
    REQUIRE(sriov::set_vf_admin_state(p, 1, hw::vport_admin_state::DOWN).ok());
    auto two = sriov::query_vf_vport(p, 2);
    auto one = sriov::query_vf_vport(p, 1);
    REQUIRE((two.ok() && one.ok()));
    CHECK(two->mac == kSetMac);
    CHECK(one->admin == hw::vport_admin_state::DOWN);
    CHECK(one->state == hw::vport_state::DOWN);
    // The node GUID, as Linux's e-switch sets it (MODIFY_NIC_VPORT_CONTEXT node_guid):
    // read back, and VF 2's left as it was.
    constexpr std::uint64_t kGuid = 0x0002c90300f0f001ull;
    REQUIRE(sriov::set_vf_node_guid(p, 1, kGuid).ok());
    CHECK(sriov::query_vf_vport(p, 1).value().node_guid == kGuid);
    CHECK(sriov::query_vf_vport(p, 2).value().node_guid == before->node_guid);
    CHECK(sriov::query_vf_vport(p, 2).value().node_guid != kGuid);
    // Out of range: VF 3 of two, and an admin state the PRM does not define.
    CHECK(sriov::query_vf_vport(p, 3).error().code == EINVAL);
    CHECK(sriov::set_vf_admin_state(p, 1, static_cast<hw::vport_admin_state>(3)).error().code == EINVAL);

    REQUIRE(driver::pci::total_vfs(pf_bdf).value() == 2);
    REQUIRE(driver::pci::set_num_vfs(pf_bdf, 2).ok());
    CHECK(driver::pci::set_num_vfs(pf_bdf, 1).error().code == EBUSY);
    CHECK(driver::pci::num_vfs(pf_bdf).value() == 2);
    const std::string vf1 = driver::pci::vf_address(pf_bdf, 0).value();
    const std::string vf2 = driver::pci::vf_address(pf_bdf, 1).value();
    CHECK(vf1 == "0000:c5:00.1");
    CHECK(vf2 == "0000:c5:00.2");
    CHECK(driver::pci::vf_address(pf_bdf, 2).error().code == ENODEV);

    // vfio_pci_validate_vf_token: a vfio-pci PF's VF opens only with its user's token.
    auto no_token = driver::vfio::device::open(vf2);
    REQUIRE_FALSE(no_token.ok());
    CHECK(no_token.error().code == EACCES);
    CHECK(no_token.error().message.find("VF token") != std::string::npos);
    CHECK(driver::vfio::device::open(vf2, "00000000-0000-0000-0000-000000000000").error().code == EACCES);

    {
        // VF 2's driver finds the MAC its PF set, and its link (AUTO) up.
        auto v2 = open_vf(vf2, kToken);
        CHECK(v2->mac() == kSetMac);
        CHECK(!sriov::vport_group_manager(*v2));
        // A VF names no vport but its own.
        CHECK(sriov::query_vf_vport(*v2, 1).error().code == EINVAL);
        CHECK(sriov::set_vf_admin_state(*v2, 1, hw::vport_admin_state::UP).error().code == EINVAL);
        bool up = false;
        for (int i = 0; i < 200 && !(up = active(*v2)); ++i) std::this_thread::sleep_for(10ms);
        CHECK(up);
    }
    {
        // VF 1's vport is down, as its PF set it, until the PF lets it follow the uplink.
        auto v1 = open_vf(vf1, kToken);
        std::this_thread::sleep_for(400ms);  // past the VF's own link training
        CHECK_FALSE(active(*v1));
        REQUIRE(sriov::set_vf_admin_state(p, 1, hw::vport_admin_state::AUTO).ok());
        CHECK(active(*v1));
    }
    // Going away as Linux's PF driver does: the VFs go, then their HCAs.
    REQUIRE(driver::pci::set_num_vfs(pf_bdf, 0).ok());
    for (std::uint16_t n : {2, 1}) CHECK(sriov::disable_vf_hca(p, n).ok());
}
