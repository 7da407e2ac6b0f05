// The subnet administrator the model plays at the SM's LID: what Linux's ib_sa and IPoIB
// ask of it (MCMemberRecord joins and leaves, PathRecord, ClassPortInfo), through the
// port that hosts it. The records are read and written at the offsets of Linux's
// drivers/infiniband/core/sa_query.c tables (mcmember_rec_table, path_rec_table,
// ib_classport_info_rec_table: offset_words * 4 + offset_bits / 8) and the component
// mask bits of include/rdma/ib_sa.h, not at sim/link/subnet_admin.cc's.
#include "sim/link/subnet_admin.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sim/link/port.h"
#include "tests/sim/link/port_pair.h"

namespace cxv::sim::link {
namespace {

using clock_type = std::chrono::steady_clock;
using gid = std::array<std::uint8_t, 16>;

// Linux's offsets: MAD header (ib_mad.h struct ib_mad_hdr), SA header (struct ib_sa_mad).
constexpr std::size_t kMethod = 3, kStatus = 4, kTid = 8, kAttrId = 16, kCompMask = 48, kData = 56;
// mcmember_rec_table.
constexpr std::size_t kMcMgid = 0, kMcPortGid = 16, kMcQkey = 32, kMcMlid = 36, kMcMtu = 38, kMcTclass = 39,
                      kMcPkey = 40, kMcRate = 42, kMcSlFlowHop = 44, kMcScopeJoin = 48;
// path_rec_table.
constexpr std::size_t kPrDgid = 8, kPrSgid = 24, kPrDlid = 40, kPrSlid = 42, kPrReversible = 49, kPrPkey = 50,
                      kPrMtu = 54, kPrRate = 55, kPrLife = 56;
// ib_sa.h component masks.
constexpr std::uint64_t kMcMgidC = 1 << 0, kMcPortGidC = 1 << 1, kMcQkeyC = 1 << 2, kMcMtuSelC = 1 << 4,
                        kMcMtuC = 1 << 5, kMcTclassC = 1 << 6, kMcPkeyC = 1 << 7, kMcSlC = 1 << 12,
                        kMcFlowC = 1 << 13, kMcJoinC = 1 << 16;
constexpr std::uint64_t kPrDgidC = 1 << 2, kPrSgidC = 1 << 3, kPrNumbPathC = 1 << 12, kPrPkeyC = 1 << 13,
                        kPrMtuSelC = 1 << 16, kPrMtuC = 1 << 17;

void put(std::byte* p, std::uint64_t v, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) p[i] = std::byte(v >> (8 * (bytes - 1 - i)));
}
std::uint64_t get(const std::byte* p, unsigned bytes) {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v = v << 8 | std::to_integer<std::uint8_t>(p[i]);
    return v;
}

gid port_gid(std::uint64_t guid) {
    gid g{0xfe, 0x80};
    for (int i = 0; i < 8; ++i) g[8 + i] = static_cast<std::uint8_t>(guid >> (8 * (7 - i)));
    return g;
}
constexpr gid kBroadcast{0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
constexpr gid kAllNodes{0xff, 0x12, 0x60, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// An SA request as ib_sa sends it: UD SEND from QP1 with the GSI Q_Key to the SM's LID.
struct request {
    std::array<std::byte, 256> mad{};
    request(std::uint8_t method, std::uint16_t attr, std::uint64_t mask, std::uint64_t tid) {
        mad[0] = std::byte{1};     // BaseVersion
        mad[1] = std::byte{0x03};  // SubnAdm
        mad[2] = std::byte{2};     // ClassVersion
        mad[kMethod] = std::byte{method};
        put(&mad[kTid], tid, 8);
        put(&mad[kAttrId], attr, 2);
        put(&mad[kCompMask], mask, 8);
    }
    std::byte* rec() { return &mad[kData]; }
    wire::packet packet(std::uint16_t slid) const {
        wire::packet p;
        p.net.link = wire::link_kind::ib;
        p.net.slid = slid;
        p.net.dlid = subnet_manager_lid;
        p.bth.opcode = wire::opcode::UD | wire::opcode::SEND_ONLY;
        p.bth.dest_qp = 1;
        p.deth.q_key = sa_mad::gsi_qkey;
        p.deth.src_qp = 1;
        p.payload.assign(mad.begin(), mad.end());
        return p;
    }
};

request join(const gid& mgid, const gid& port, std::uint64_t extra_mask = 0) {
    request r(0x02, 0x0038, kMcMgidC | kMcPortGidC | kMcPkeyC | kMcJoinC | extra_mask, 0x1234);
    std::memcpy(r.rec() + kMcMgid, mgid.data(), 16);
    std::memcpy(r.rec() + kMcPortGid, port.data(), 16);
    put(r.rec() + kMcPkey, 0xffff, 2);
    r.rec()[kMcScopeJoin] = std::byte{0x21};  // link-local, FullMember
    return r;
}
// A join that creates a group, as IPoIB joins a group other than the broadcast one: the
// broadcast group's Q_Key, MTU (exactly 2048), TClass, SL and flow label.
request create(const gid& mgid, const gid& port, std::uint32_t qkey = 0x0b1b) {
    request r = join(mgid, port, kMcQkeyC | kMcMtuSelC | kMcMtuC | kMcTclassC | kMcSlC | kMcFlowC);
    put(r.rec() + kMcQkey, qkey, 4);
    r.rec()[kMcMtu] = std::byte{2 << 6 | 4};
    return r;
}
request path(const gid& dgid, const gid& sgid) {
    request r(0x01, 0x0035, kPrDgidC | kPrSgidC | kPrNumbPathC | kPrPkeyC, 0x99);
    std::memcpy(r.rec() + kPrDgid, dgid.data(), 16);
    std::memcpy(r.rec() + kPrSgid, sgid.data(), 16);
    put(r.rec() + kPrPkey, 0xffff, 2);
    r.rec()[kPrReversible - 0] = std::byte{1};  // NumbPath 1
    return r;
}

struct answered {
    bool any = false;
    wire::packet p;
    const std::byte* mad() const { return p.payload.data(); }
    const std::byte* rec() const { return p.payload.data() + kData; }
    unsigned status() const { return static_cast<unsigned>(get(mad() + kStatus, 2)); }
};

answered ask(subnet_admin& sa, const request& r, std::uint16_t slid) {
    answered a;
    a.any = sa.answer(r.packet(slid), a.p);
    return a;
}

device_config sm_port() {
    device_config c;
    c.port = port_type::IB;
    c.lid = subnet_manager_lid;
    return c;
}

TEST_CASE("the IPoIB broadcast group is there from the start, with OpenSM's parameters; a join answers it") {
    subnet_admin sa(sm_port());
    const gid a = port_gid(0x1111);
    const auto r = ask(sa, join(kBroadcast, a), 7);
    REQUIRE(r.any);
    CHECK(r.status() == 0);
    CHECK(std::to_integer<unsigned>(r.mad()[kMethod]) == 0x81);  // GetResp
    CHECK(get(r.mad() + kTid, 8) == 0x1234);
    CHECK(get(r.mad() + kAttrId, 2) == 0x0038);
    CHECK(std::memcmp(r.rec() + kMcMgid, kBroadcast.data(), 16) == 0);
    CHECK(std::memcmp(r.rec() + kMcPortGid, a.data(), 16) == 0);
    CHECK(get(r.rec() + kMcQkey, 4) == 0x0b1b);
    CHECK(get(r.rec() + kMcMlid, 2) == 0xc000);
    CHECK(get(r.rec() + kMcMtu, 1) == (2 << 6 | 4));   // exactly 2048
    CHECK(get(r.rec() + kMcRate, 1) == (2 << 6 | 3));  // exactly 10 Gb/s
    CHECK(get(r.rec() + kMcPkey, 2) == 0xffff);
    CHECK(get(r.rec() + kMcScopeJoin, 1) == 0x21);
    // The answer goes back to the asking port's QP1 from the SM's LID, as a GSI packet.
    CHECK(r.p.net.dlid == 7);
    CHECK(r.p.net.slid == subnet_manager_lid);
    CHECK(r.p.bth.dest_qp == 1);
    CHECK(r.p.deth.src_qp == 1);
    CHECK(r.p.deth.q_key == sa_mad::gsi_qkey);
    CHECK(r.p.payload.size() == 256);
}

TEST_CASE("a join with the creation components makes a group; later joins must match it") {
    subnet_admin sa(sm_port());
    const gid a = port_gid(0x1111), b = port_gid(0x2222);
    // Without a Q_Key a group cannot be made (IBA o15-0.2.4): insufficient components.
    CHECK(ask(sa, join(kAllNodes, a), 2).status() == 0x0600);
    const auto made = ask(sa, create(kAllNodes, a), 2);
    REQUIRE(made.status() == 0);
    const auto mlid = get(made.rec() + kMcMlid, 2);
    CHECK(mlid >= 0xc001);
    CHECK(mlid <= 0xfffe);
    CHECK(get(made.rec() + kMcMtu, 1) == (2 << 6 | 4));
    // Another port joins with only the MGID: the same group, the same MLID.
    const auto second = ask(sa, join(kAllNodes, b), 3);
    CHECK(second.status() == 0);
    CHECK(get(second.rec() + kMcMlid, 2) == mlid);
    CHECK(get(second.rec() + kMcQkey, 4) == 0x0b1b);
    // A join whose Q_Key is not the group's is refused: invalid request.
    CHECK(ask(sa, create(kAllNodes, b, 0x1234), 3).status() == 0x0200);
    // Another group gets another MLID.
    gid other = kAllNodes;
    other[15] = 2;
    const auto third = ask(sa, create(other, a), 2);
    CHECK(third.status() == 0);
    CHECK(get(third.rec() + kMcMlid, 2) != mlid);
    // JoinState 0 asks for nothing: refused; a unicast GID is no group.
    request none = join(kBroadcast, a);
    none.rec()[kMcScopeJoin] = std::byte{0x20};
    CHECK(ask(sa, none, 2).status() == 0x0200);
    request no_join_state = join(kBroadcast, a);
    put(&no_join_state.mad[kCompMask], kMcMgidC | kMcPortGidC, 8);
    CHECK(ask(sa, no_join_state, 2).status() == 0x0600);
    gid unicast = a;
    CHECK(ask(sa, join(unicast, a), 2).status() == 0x0200);
}

TEST_CASE("leaving: DeleteResp; a group goes with its last member, the broadcast group stays") {
    subnet_admin sa(sm_port());
    const gid a = port_gid(0x1111), b = port_gid(0x2222);
    REQUIRE(ask(sa, create(kAllNodes, a), 2).status() == 0);
    REQUIRE(ask(sa, join(kAllNodes, b), 3).status() == 0);
    REQUIRE(ask(sa, join(kBroadcast, a), 2).status() == 0);
    const auto leave = [&](const gid& mgid, const gid& port, std::uint16_t slid) {
        request r = join(mgid, port);
        r.mad[kMethod] = std::byte{0x15};
        return ask(sa, r, slid);
    };
    const auto first = leave(kAllNodes, a, 2);
    CHECK(first.status() == 0);
    CHECK(std::to_integer<unsigned>(first.mad()[kMethod]) == 0x95);
    CHECK(leave(kAllNodes, a, 2).status() == 0x0200);  // not a member any more
    request get_group(0x01, 0x0038, kMcMgidC, 5);
    std::memcpy(get_group.rec() + kMcMgid, kAllNodes.data(), 16);
    CHECK(ask(sa, get_group, 2).status() == 0);
    CHECK(leave(kAllNodes, b, 3).status() == 0);
    CHECK(ask(sa, get_group, 2).status() == 0x0300);  // gone: no records
    CHECK(leave(kBroadcast, a, 2).status() == 0);
    std::memcpy(get_group.rec() + kMcMgid, kBroadcast.data(), 16);
    const auto still = ask(sa, get_group, 2);
    CHECK(still.status() == 0);
    CHECK(get(still.rec() + kMcMlid, 2) == 0xc000);
}

TEST_CASE("PathRecord: between two ports the SA knows, with the subnet's MTU and rate") {
    device_config cfg = sm_port();
    subnet_admin sa(cfg);
    const gid own = port_gid(cfg.node_guid + 1), b = port_gid(0x2222), stranger = port_gid(0x3333);
    // b is not known until it has asked something.
    CHECK(ask(sa, path(b, own), 1).status() == 0x0300);
    REQUIRE(ask(sa, join(kBroadcast, b), 9).status() == 0);
    const auto r = ask(sa, path(b, own), 1);
    REQUIRE(r.status() == 0);
    CHECK(std::memcmp(r.rec() + kPrDgid, b.data(), 16) == 0);
    CHECK(std::memcmp(r.rec() + kPrSgid, own.data(), 16) == 0);
    CHECK(get(r.rec() + kPrDlid, 2) == 9);
    CHECK(get(r.rec() + kPrSlid, 2) == subnet_manager_lid);
    CHECK(get(r.rec() + kPrPkey, 2) == 0xffff);
    CHECK(get(r.rec() + kPrMtu, 1) == (2 << 6 | 5));    // 4096
    CHECK(get(r.rec() + kPrRate, 1) == (2 << 6 | 16));  // 100 Gb/s: 4x EDR
    CHECK(get(r.rec() + kPrLife, 1) == (2 << 6 | 18));
    CHECK((get(r.rec() + kPrReversible, 1) & 0x80) != 0);
    // The reverse path, asked by b.
    const auto back = ask(sa, path(own, b), 9);
    CHECK(back.status() == 0);
    CHECK(get(back.rec() + kPrDlid, 2) == subnet_manager_lid);
    CHECK(get(back.rec() + kPrSlid, 2) == 9);
    // MTU less than 4096: 2048.
    request smaller = path(b, own);
    put(smaller.mad.data() + kCompMask, get(smaller.mad.data() + kCompMask, 8) | kPrMtuSelC | kPrMtuC, 8);
    smaller.rec()[kPrMtu] = std::byte{1 << 6 | 5};
    const auto s = ask(sa, smaller, 1);
    CHECK(s.status() == 0);
    CHECK(get(s.rec() + kPrMtu, 1) == (2 << 6 | 4));
    // Nobody has the stranger's GID; no port is in partition 0x8001.
    CHECK(ask(sa, path(stranger, own), 1).status() == 0x0300);
    request other_partition = path(b, own);
    put(other_partition.rec() + kPrPkey, 0x8001, 2);
    CHECK(ask(sa, other_partition, 1).status() == 0x0300);
}

TEST_CASE("ClassPortInfo says send-only full members are served; what the SA does not serve gets a MAD status") {
    subnet_admin sa(sm_port());
    const auto cpi = ask(sa, request(0x01, 0x0001, 0, 1), 2);
    CHECK(cpi.status() == 0);
    CHECK(get(cpi.rec() + 0, 1) == 1);  // BaseVersion
    CHECK(get(cpi.rec() + 1, 1) == 2);  // ClassVersion
    // cap_mask2_resp_time: CapabilityMask2 above the 5-bit RespTimeValue; ib_sa.h's
    // IB_SA_CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT is bit 12 of it.
    CHECK(((get(cpi.rec() + 4, 4) >> 5) & (1u << 12)) != 0);
    CHECK(ask(sa, request(0x01, 0x0011, 0, 2), 2).status() == 0x000c);  // NodeRecord
    const auto table = ask(sa, request(0x12, 0x0038, 0, 3), 2);  // GetTable: needs RMPP
    CHECK(table.status() == 0x000c);
    CHECK(std::to_integer<unsigned>(table.mad()[kMethod]) == 0x92);  // GetTableResp
    CHECK(ask(sa, request(0x07, 0x0038, 0, 4), 2).status() == 0x0008);  // TrapRepress: no such method here
    request old(0x01, 0x0001, 0, 5);
    old.mad[2] = std::byte{1};
    CHECK(ask(sa, old, 2).status() == 0x0004);  // ClassVersion 1
    // Not for the SA: a response, another class (CM), another Q_Key.
    request resp(0x81, 0x0038, 0, 6);
    CHECK_FALSE(ask(sa, resp, 2).any);
    request cm(0x03, 0x0010, 0, 7);
    cm.mad[1] = std::byte{0x07};
    CHECK_FALSE(ask(sa, cm, 2).any);
    wire::packet wrong_qkey = request(0x01, 0x0001, 0, 8).packet(2);
    wrong_qkey.deth.q_key = 0x1234;
    wire::packet out;
    CHECK_FALSE(sa.answer(wrong_qkey, out));
    CHECK(sa.counters().requests == 5);
    CHECK(sa.counters().errors == 4);
}

TEST_CASE("on the wire: the port with the SM's LID answers SA MADs and hands every other MAD to its QP1") {
    test::pair x("subnet-admin-test", port_type::IB);
    REQUIRE(x.ca.lid == subnet_manager_lid);
    const gid gb = port_gid(x.cb.node_guid + 1), ga = port_gid(x.ca.node_guid + 1);
    // b joins the broadcast group: the answer comes to b's QP1; a's QP1 sees nothing.
    CHECK(x.b->transmit(join(kBroadcast, gb).packet(2), clock_type::now()) == port::sent::wire);
    x.settle();
    REQUIRE(x.got_b.size() == 1);
    CHECK(x.got_a.empty());
    CHECK(x.got_b[0].net.slid == subnet_manager_lid);
    CHECK(get(x.got_b[0].payload.data() + kData + kMcMlid, 2) == 0xc000);
    // a asks for the path to b (to its own LID): answered to itself.
    CHECK(x.a->transmit(path(gb, ga).packet(subnet_manager_lid), clock_type::now()) == port::sent::wire);
    x.settle();
    REQUIRE(x.got_a.size() == 1);
    CHECK(get(x.got_a[0].payload.data() + kData + kPrDlid, 2) == 2);
    CHECK(x.a->counters().sa_answered == 2);
    CHECK(x.b->counters().sa_answered == 0);
    // A CM MAD to a's QP1 is a's host's.
    request cm(0x03, 0x0010, 0, 7);
    cm.mad[1] = std::byte{0x07};
    CHECK(x.b->transmit(cm.packet(2), clock_type::now()) == port::sent::wire);
    x.settle();
    REQUIRE(x.got_a.size() == 2);
    CHECK(std::to_integer<unsigned>(x.got_a[1].payload[1]) == 0x07);
    CHECK(x.got_b.size() == 1);
}


TEST_CASE("on a directory fabric: the SA's port answers its own host's requests (to its own LID)") {
    char tmpl[] = "/tmp/cxv-sa-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string dir = tmpl;
    {
        device_config c = sm_port();
        c.fabric_dir = dir;
        object_tables t;
        auto a = std::move(port::create(c, t)).value();
        std::vector<wire::packet> got;
        const gid ga = port_gid(c.node_guid + 1);
        for (int round = 0; round < 3; ++round) {
            CHECK(a->transmit(join(kBroadcast, ga).packet(subnet_manager_lid), clock_type::now()) == port::sent::wire);
            const auto end = clock_type::now() + std::chrono::seconds(1);
            while (got.size() < static_cast<std::size_t>(round + 1) && clock_type::now() < end) {
                a->poll(clock_type::now(), [&](wire::packet& p, std::size_t) { got.push_back(p); });
            }
            REQUIRE(got.size() == static_cast<std::size_t>(round + 1));
            CHECK(get(got.back().payload.data() + kData + kMcMlid, 2) == 0xc000);
        }
        CHECK(a->counters().sa_answered == 3);
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cxv::sim::link
