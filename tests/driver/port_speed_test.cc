// driver::hca::decode_ptys: a PTYS register's bytes to the port's link mode, rate and
// lanes, and to the verbs' speed and width as Linux's mlx5_ib reports them (its
// mlx5_query_port_ib/_roce: ib_proto_oper as is on InfiniBand; on RoCE, its table of
// Ethernet modes, 4X QDR for a mode it lacks). The registers are built field by field
// with hw/ifc.h, as a card would return them.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "hw/port_speeds.h"

using namespace cxv;
namespace ifc = cxv::hw::ifc;
using R = ifc::ptys_reg;

namespace {

constexpr std::uint16_t kSdr = 1u << 0, kQdr = 1u << 2, kEdr = 1u << 5, kHdr = 1u << 6, kNdr = 1u << 7;
constexpr std::uint16_t k1x = 1u << 0, k2x = 1u << 1, k4x = 1u << 2, k8x = 1u << 3;

std::vector<std::byte> ib(std::uint16_t proto_oper, std::uint16_t width_oper) {
    std::vector<std::byte> r(R::size_bytes);
    ifc::set<R::proto_mask>(r.data(), hw::ptys_proto_ib);
    ifc::set<R::ib_proto_capability>(r.data(), 0xff);
    ifc::set<R::ib_link_width_capability>(r.data(), 0x1f);
    ifc::set<R::ib_proto_oper>(r.data(), proto_oper);
    ifc::set<R::ib_link_width_oper>(r.data(), width_oper);
    return r;
}

std::vector<std::byte> eth(std::uint32_t oper, bool extended) {
    std::vector<std::byte> r(R::size_bytes);
    ifc::set<R::proto_mask>(r.data(), hw::ptys_proto_en);
    if (extended) {
        ifc::set<R::ext_eth_proto_capability>(r.data(), 0x1ffff);
        ifc::set<R::ext_eth_proto_oper>(r.data(), oper);
        ifc::set<R::eth_proto_capability>(r.data(), 1u << 20);  // ignored once extended
        ifc::set<R::eth_proto_oper>(r.data(), oper != 0 ? 1u << 20 : 0);
    } else {
        ifc::set<R::eth_proto_capability>(r.data(), 0xfffff);
        ifc::set<R::eth_proto_oper>(r.data(), oper);
    }
    return r;
}

}  // namespace

TEST_CASE("InfiniBand: ib_proto_oper and the lowest width bit") {
    auto s = driver::hca::decode_ptys(ib(kEdr, k4x), false);
    CHECK(s.mode == "4X EDR");
    CHECK(s.mbps == 100000);
    CHECK(s.lanes == 4);
    CHECK(s.ib_speed == kEdr);
    CHECK(s.ib_width == k4x);
    s = driver::hca::decode_ptys(ib(kHdr, k2x), false);
    CHECK(s.mode == "2X HDR");
    CHECK(s.mbps == 100000);
    s = driver::hca::decode_ptys(ib(kNdr, k8x), false);
    CHECK(s.mode == "8X NDR");
    CHECK(s.mbps == 800000);
    s = driver::hca::decode_ptys(ib(kSdr, k1x), false);
    CHECK(s.mode == "1X SDR");
    CHECK(s.mbps == 2500);
    // No width bit: 4X, as mlx5_ib assumes; the speed still as it is.
    s = driver::hca::decode_ptys(ib(kQdr, 0), false);
    CHECK(s.mode == "4X QDR");
    CHECK(s.ib_width == k4x);
    CHECK(s.ib_speed == kQdr);
    // Down: nothing.
    s = driver::hca::decode_ptys(ib(0, 0), false);
    CHECK(s.mode.empty());
    CHECK(s.mbps == 0);
    CHECK(s.ib_speed == 0);
    // A register too short to hold the fields: nothing either.
    CHECK(driver::hca::decode_ptys(std::vector<std::byte>(8), false).mode.empty());
}

TEST_CASE("Ethernet, legacy modes: the mode, and mlx5_ib's InfiniBand equivalent") {
    auto s = driver::hca::decode_ptys(eth(1u << 20, false), true);  // 100GBASE-CR4
    CHECK(s.mode == "100GBASE-CR4");
    CHECK(s.mbps == 100000);
    CHECK(s.lanes == 4);
    CHECK(s.ib_speed == kEdr);
    CHECK(s.ib_width == k4x);
    s = driver::hca::decode_ptys(eth(1u << 27, false), true);  // 25GBASE-CR
    CHECK(s.mode == "25GBASE-CR");
    CHECK(s.mbps == 25000);
    CHECK(s.ib_speed == kEdr);
    CHECK(s.ib_width == k1x);
    // 10GBASE-CX4: four lanes on the wire, 1X QDR for mlx5_ib.
    s = driver::hca::decode_ptys(eth(1u << 2, false), true);
    CHECK(s.lanes == 4);
    CHECK(s.ib_width == k1x);
    CHECK(s.ib_speed == kQdr);
    // A mode mlx5_ib's table lacks (20GBASE-KR2): 4X QDR.
    s = driver::hca::decode_ptys(eth(1u << 5, false), true);
    CHECK(s.mode == "20GBASE-KR2");
    CHECK(s.ib_speed == kQdr);
    CHECK(s.ib_width == k4x);
    // Two bits at once: the lowest is shown; mlx5_ib translates exactly one, so 4X QDR.
    s = driver::hca::decode_ptys(eth((1u << 20) | (1u << 27), false), true);
    CHECK(s.mode == "100GBASE-CR4");
    CHECK(s.ib_speed == kQdr);
    // A bit no mode has: named by its value, no rate.
    s = driver::hca::decode_ptys(eth(1u << 17, false), true);
    CHECK(s.mode == "eth_proto_oper 0x20000");
    CHECK(s.mbps == 0);
    CHECK(s.ib_speed == kQdr);
    // Down.
    s = driver::hca::decode_ptys(eth(0, false), true);
    CHECK(s.mode.empty());
    CHECK(s.ib_speed == 0);
}

TEST_CASE("Ethernet, extended modes: used when the extended capability is non-zero") {
    auto s = driver::hca::decode_ptys(eth(1u << 9, true), true);
    CHECK(s.mode == "CAUI-4/100GBASE-CR4/KR4");
    CHECK(s.mbps == 100000);
    CHECK(s.ib_speed == kEdr);
    CHECK(s.ib_width == k4x);
    s = driver::hca::decode_ptys(eth(1u << 15, true), true);  // 400GAUI-8
    CHECK(s.mbps == 400000);
    CHECK(s.lanes == 8);
    CHECK(s.ib_speed == kHdr);
    CHECK(s.ib_width == k8x);
    s = driver::hca::decode_ptys(eth(1u << 13, true), true);  // 200GAUI-2
    CHECK(s.ib_speed == kNdr);
    CHECK(s.ib_width == k2x);
    s = driver::hca::decode_ptys(eth(1u << 2, true), true);  // no extended mode 2
    CHECK(s.mode == "ext_eth_proto_oper 0x4");
}
