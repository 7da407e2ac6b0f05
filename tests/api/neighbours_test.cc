// RoCE peers' MACs (api/neighbours.h; docs/linux-oracle.md, finding 19) on three Ethernet
// functions of cxv-sim cabled to one fabric: a ConnectX sends to the MAC in a QP's path
// and a UD address vector, so cxv asks for an IPv4-mapped GID's MAC with ARP on a raw
// queue of its own. The checks read what the device holds (QUERY_QP's rmac) and the
// address vector as mlx5dv.h lays it out, against the peers' own MACs.
#include <doctest/doctest.h>
#include <infiniband/mlx5dv.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "api/neighbours.h"
#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace eth = cxv::eth;
using namespace std::chrono_literals;

namespace {

template <typename T>
T take(cxv::result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}
void check_ok(const cxv::status& s) { REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message)); }

std::uint64_t as_u64(const eth::mac& m) {
    std::uint64_t v = 0;
    for (std::uint8_t b : m) v = v << 8 | b;
    return v;
}

struct rc_pair {
    std::shared_ptr<cxv::pd> pd;
    std::shared_ptr<cxv::cq> cq;
    explicit rc_pair(cxv::device& d) : pd(take(d.alloc_pd())), cq(take(cxv::cq::create(d, 16))) {}
    std::shared_ptr<cxv::qp> make(cxv::device& d) {
        cxv::qp::attr a;
        a.type = cxv::qp_type::rc;
        a.domain = pd;
        a.send_cq = cq;
        a.recv_cq = cq;
        return take(cxv::qp::create(d, a));
    }
};

// INIT, then RTR toward `dgid` from GID 1 (the function's IPv4-mapped GID).
cxv::status to_rtr(cxv::qp& q, const std::array<std::uint8_t, 16>& dgid) {
    cxv::qp::modify_attr m;
    m.dest_qpn = 0x123;
    m.path_mtu = 3;
    m.ah.sgid_index = 1;
    m.ah.dgid = dgid;
    if (auto s = q.modify(cxv::qp_state::init, m); !s) return s;
    return q.modify(cxv::qp_state::rtr, m);
}

// The rmac of the QP's primary path, as QUERY_QP reads it from the device.
std::uint64_t rmac_of(cxv::device& d, std::uint32_t qpn) {
    namespace ifc = cxv::hw::ifc;
    std::vector<std::byte> in(ifc::query_qp_in::size_bytes);
    ifc::set<ifc::query_qp_in::opcode>(in.data(), static_cast<std::uint32_t>(cxv::hw::cmd_opcode::QUERY_QP));
    ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn);
    const auto out = take(d.hca().exec(in, ifc::query_qp_out::size_bytes));
    const std::byte* path = ifc::at<ifc::qpc::primary_address_path>(ifc::at<ifc::query_qp_out::qpc>(out.data()));
    return std::uint64_t{ifc::get<ifc::ads::rmac_47_32>(path)} << 32 | ifc::get<ifc::ads::rmac_31_0>(path);
}

}  // namespace

TEST_CASE("ARP frames as RFC 826 lays them out; group MACs of multicast GIDs") {
    const eth::mac sha{0x02, 0xc5, 0x00, 0x00, 0x00, 0x11};
    const auto f = eth::neighbours::arp_request(sha, {169, 254, 0, 1}, {169, 254, 0, 2});
    const std::uint8_t want[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xc5, 0x00, 0x00, 0x00, 0x11,
                                   0x08, 0x06,  // ethertype ARP
                                   0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01,  // Ethernet, IPv4, request
                                   0x02, 0xc5, 0x00, 0x00, 0x00, 0x11, 169, 254, 0, 1,  // sender
                                   0, 0, 0, 0, 0, 0, 169, 254, 0, 2};  // target
    CHECK(std::memcmp(f.data(), want, sizeof want) == 0);
    for (std::size_t i = sizeof want; i < f.size(); ++i) CHECK(f[i] == std::byte{0});  // padding
    eth::ipv4 spa{};
    eth::mac got{};
    REQUIRE(eth::neighbours::arp_sender(f.data(), f.size(), spa, got));
    CHECK(got == sha);
    CHECK(spa == eth::ipv4{169, 254, 0, 1});
    auto not_arp = f;
    not_arp[13] = std::byte{0x00};  // IPv4's ethertype
    CHECK_FALSE(eth::neighbours::arp_sender(not_arp.data(), not_arp.size(), spa, got));
    CHECK_FALSE(eth::neighbours::arp_sender(f.data(), 41, spa, got));

    CHECK(eth::neighbours::mac_of_multicast({0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}) ==
          eth::mac{0x33, 0x33, 0, 0, 0, 1});
    CHECK(eth::neighbours::mac_of_multicast({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 129, 2, 3}) ==
          eth::mac{0x01, 0x00, 0x5e, 0x01, 2, 3});
    CHECK_FALSE(eth::neighbours::mac_of_multicast({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 2, 3}));
}

TEST_CASE("a RoCE QP's path and a UD address vector carry the peer's MAC, asked with ARP") {
    auto d0 = take(cxv::device::open("0000:c5:00.0"));
    auto d1 = take(cxv::device::open("0000:c5:00.1"));
    auto d2 = take(cxv::device::open("0000:c5:00.2"));
    const auto gid1 = take(d1->gid(1));
    const auto gid2 = take(d2->gid(1));
    REQUIRE(eth::neighbours::ipv4_mapped(gid1));
    const eth::mac m1 = eth::address(*d1), m2 = eth::address(*d2);
    rc_pair rc(*d0);

    // The first path to d1's address asks once; the answer is d1's MAC.
    auto q = rc.make(*d0);
    check_ok(to_rtr(*q, gid1));
    CHECK(rmac_of(*d0, q->qpn()) == as_u64(m1));
    auto& n = d0->neighbours();
    CHECK(n.requests_sent() == 1);
    CHECK(n.known() >= 1);
    // Known from then on: no second request.
    auto q2 = rc.make(*d0);
    check_ok(to_rtr(*q2, gid1));
    CHECK(rmac_of(*d0, q2->qpn()) == as_u64(m1));
    CHECK(n.requests_sent() == 1);

    // A UD address vector, read as mlx5dv.h's struct.
    cxv::qp::path p;
    p.sgid_index = 1;
    p.dgid = gid1;
    const auto ah = take(cxv::make_address_handle(*d0, p));
    const auto& av = reinterpret_cast<const mlx5_wqe_av&>(ah.av);
    CHECK(std::memcmp(av.rmac, m1.data(), 6) == 0);

    // The application's own steering takes the function's root table: the ARP rule goes
    // with it (the old table, destroyed, leaves the new root in place: driver/res/flow.cc),
    // and d2's address is still found.
    auto mine = take(eth::steering::create(*d0));
    CHECK(take(eth::steering::of(*d0)) == mine);
    auto q3 = rc.make(*d0);
    check_ok(to_rtr(*q3, gid2));
    CHECK(rmac_of(*d0, q3->qpn()) == as_u64(m2));
    CHECK(n.requests_sent() == 2);

    // An address nobody has: three requests go unanswered, INIT2RTR is not sent, and the
    // QP stays in INIT (ibv_modify_qp(3): the attributes are not applied).
    auto q4 = rc.make(*d0);
    const auto start = std::chrono::steady_clock::now();
    const auto s = to_rtr(*q4, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 250, 250});
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == EHOSTUNREACH);
    CHECK(s.error().message.find("169.254.250.250") != std::string::npos);
    CHECK(took >= 800ms);
    CHECK(took < 5s);
    CHECK(n.requests_sent() == 5);
    CHECK(take(q4->query()) == cxv::qp_state::init);
    // An address handle to it fails the same way.
    p.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 250, 250};
    const auto bad = cxv::make_address_handle(*d0, p);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == EHOSTUNREACH);

    // A GID that names its MAC needs no ARP (link-local EUI-64), nor one of the function's
    // own (its packets loop back: its own MAC).
    auto q5 = rc.make(*d0);
    check_ok(to_rtr(*q5, take(d1->gid(0))));
    CHECK(rmac_of(*d0, q5->qpn()) == as_u64(m1));
    auto q6 = rc.make(*d0);
    check_ok(to_rtr(*q6, take(d0->gid(1))));
    CHECK(rmac_of(*d0, q6->qpn()) == as_u64(eth::address(*d0)));
    CHECK(n.requests_sent() == 8);
}
