// The GIDs cxv::device programs on a RoCE port at open, as the C++ API (port(), gid(),
// ipv4()) and the C API (cxv_query_gid, cxv_query_port) report them. Two Ethernet
// functions under cxv-sim: MACs 02:c5:00:00:00:01 and :02.
#include <doctest/doctest.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "api/cxv.h"
#include "api/cxv_verbs.h"

namespace {

constexpr const char* kBdf0 = "0000:c5:00.0";
constexpr const char* kBdf1 = "0000:c5:00.1";
using gid = std::array<std::uint8_t, 16>;

template <typename T>
T take(cxv::result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}

}  // namespace

TEST_CASE("device: GID 0 is the MAC's link-local IPv6 address, GID 1 the IPv4-mapped default") {
    auto dev = take(cxv::device::open(kBdf0));
    const gid want0{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01};
    const gid want1{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 1};
    const auto port = take(dev->port(1));
    CHECK(port.ethernet);
    REQUIRE(port.gids.size() == 2);
    CHECK(port.gids[0] == want0);
    CHECK(port.gids[1] == want1);
    CHECK(std::memcmp(port.gid, want0.data(), 16) == 0);
    CHECK(take(dev->gid(0)) == want0);
    CHECK(take(dev->gid(1)) == want1);
    auto none = dev->gid(2);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == EINVAL);
    REQUIRE(dev->ipv4().has_value());
    CHECK(*dev->ipv4() == std::array<std::uint8_t, 4>{169, 254, 1, 1});
}

TEST_CASE("device::options::ipv4 sets GID 1") {
    cxv::device::options o;
    o.ipv4 = std::array<std::uint8_t, 4>{169, 254, 200, 3};
    auto dev = take(cxv::device::open(kBdf1, o));
    CHECK(take(dev->gid(1)) == gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 200, 3});
    CHECK(*dev->ipv4() == *o.ipv4);
    // GID 0 still follows this function's MAC (02:c5:00:00:00:02).
    CHECK(take(dev->gid(0)) == gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x02});
}

TEST_CASE("cxv_query_gid: the same table through the C API; EINVAL past it") {
    ibv_context* ctx = cxv_open_device(kBdf1);
    REQUIRE_MESSAGE(ctx != nullptr, cxv_last_error());
    ibv_gid g{};
    REQUIRE(cxv_query_gid(ctx, 1, 1, &g) == 0);
    // The second function's MAC ends in 02: 169.254.1.2 by default.
    const std::uint8_t want1[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 2};
    CHECK(std::memcmp(g.raw, want1, 16) == 0);
    REQUIRE(cxv_query_gid(ctx, 1, 0, &g) == 0);
    CHECK(g.raw[0] == 0xfe);
    CHECK(g.raw[15] == 0x02);
    CHECK(cxv_query_gid(ctx, 1, 2, &g) == EINVAL);
    CHECK(cxv_query_gid(ctx, 1, -1, &g) == EINVAL);
    ibv_port_attr pa{};
    REQUIRE(cxv_query_port(ctx, 1, &pa) == 0);
    CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
    CHECK(cxv_close_device(ctx) == 0);
}

// A card sends to the MAC the address vector carries and resolves none itself
// (docs/linux-oracle.md, finding 19): where a RoCE GID names its MAC (link-local EUI-64),
// the address handle carries it; without a device to ask with ARP (make_address_handle's
// other form: neighbours_test) an IPv4-mapped GID leaves it 0, and
// an InfiniBand address handle has none.
TEST_CASE("a RoCE address handle carries the MAC a link-local EUI-64 GID names") {
    cxv::qp::path p;
    p.dgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0xc5, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x11};
    const std::uint8_t want[6] = {0x02, 0xc5, 0x00, 0x00, 0x00, 0x11}, none[6] = {};
    CHECK(std::memcmp(cxv::make_address_handle(p, true).av.rmac, want, 6) == 0);
    CHECK(std::memcmp(cxv::make_address_handle(p, false).av.rmac, none, 6) == 0);
    p.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 2};
    CHECK(std::memcmp(cxv::make_address_handle(p, true).av.rmac, none, 6) == 0);
}
