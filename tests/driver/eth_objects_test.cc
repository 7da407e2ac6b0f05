// The driver's Ethernet objects (driver/res/eth.h) and flow steering (driver/res/flow.h)
// against the model under cxv-sim with an Ethernet port: a market-data receive path
// built as an application would (a UDP port steered to a TIR over an RSS table, with a
// counter and a flow tag), its send side, their states, and the refusals a driver must
// report clearly. Every object is destroyed by its own command: the HCA closes with none
// left for TEARDOWN_HCA.
#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/eth.h"
#include "driver/res/flow.h"
#include "driver/res/pd_mr.h"
#include "driver/res/q_counter.h"
#include "driver/res/qp.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver;
using test::check_ok;
using test::check_refused;
using test::status_of;
using test::take;

namespace {

// The receive side of one feed: a transport domain, a PD, a CQ and an RQ in RDY.
struct rx {
    std::unique_ptr<hca> h = test::bring_up();
    std::shared_ptr<transport_domain> td = take(transport_domain::create(*h));
    std::shared_ptr<pd> domain = take(pd::create(*h));
    std::shared_ptr<cq> rcq = take(cq::create(*h, {}));

    std::shared_ptr<rq> make_rq(bool striding = false) {
        rq::attr a;
        a.domain = domain;
        a.recv_cq = rcq;
        a.wqes = 64;
        a.multi_packet = striding;
        auto q = take(rq::create(a));
        check_ok(q->ready());
        return q;
    }
};

}  // namespace

TEST_CASE("send side: a TIS in a transport domain, an SQ created in RST and moved to RDY, then ERR and back to RST") {
    rx r;
    auto t = take(tis::create(r.td));
    CHECK(t->tisn() != 0);
    auto scq = take(cq::create(*r.h, {}));
    sq::attr a;
    a.domain = r.domain;
    a.send_cq = scq;
    a.transport = t;
    a.wqebbs = 100;
    auto s = take(sq::create(a));
    CHECK(s->wqebb_count() == 128);
    CHECK(s->sqn() >= 0x100);
    CHECK(take(s->query()) == wq_state::reset);
    check_ok(s->ready());
    CHECK(take(s->query()) == wq_state::ready);
    check_ok(s->modify(wq_state::error));
    CHECK(take(s->query()) == wq_state::error);
    // ERR to RDY is no transition of the SQ's state machine: the firmware refuses it.
    check_refused(s->modify(wq_state::ready), "MODIFY_SQ", "BAD_RES_STATE");
    check_ok(s->modify(wq_state::reset));
    CHECK(take(s->query()) == wq_state::reset);
    // The TIS is held while the SQ sends through it, the domain while the TIS is in it.
    check_refused(t->destroy(), "DESTROY_TIS", "RESOURCE_BUSY");
    check_refused(r.td->destroy(), "DEALLOC_TRANSPORT_DOMAIN", "RESOURCE_BUSY");
    check_ok(s->destroy());
    check_ok(t->destroy());
}

TEST_CASE("SQ and RQ numbers come from the QP number space") {
    rx r;
    qp::attr qa;
    qa.type = qp_type::ud;
    qa.domain = r.domain;
    qa.send_cq = r.rcq;
    qa.recv_cq = r.rcq;
    auto q = take(qp::create(qa));
    auto q1 = r.make_rq();
    auto q2 = r.make_rq();
    CHECK(q1->rqn() != q->qpn());
    CHECK(q2->rqn() != q->qpn());
    CHECK(q1->rqn() != q2->rqn());
    CHECK(q1->rqn() >= 0x100);
}

TEST_CASE("a UDP feed steered to an RSS table of two RQs, counted and tagged; the objects it holds stay until it goes") {
    rx r;
    auto q1 = r.make_rq();
    auto q2 = r.make_rq(true);  // a striding (multi-packet) RQ
    CHECK(q2->multi_packet());
    CHECK(take(q2->query()) == wq_state::ready);
    const std::vector<std::shared_ptr<rq>> both{q1, q2};
    auto table = take(rqt::create(both, 4));
    rx_hash hash;
    hash.l4_type = rx_hash::l4::udp;
    hash.selected = rx_hash::src_ip | rx_hash::dst_ip | rx_hash::l4_sport | rx_hash::l4_dport;
    for (std::size_t i = 0; i < hash.key.size(); ++i) hash.key[i] = static_cast<std::uint8_t>(0x6d + 3 * i);
    auto spread = take(tir::create(r.td, table, hash));
    auto direct = take(tir::create(r.td, q1, {.block_unicast = true}));
    check_ok(direct->set_loopback({}));

    // Level 0 steers the feed's port; what it misses goes on to level 1, which drops.
    auto last = take(flow_table::create(*r.h, {.level = 1, .log_size = 4}));
    auto root = take(flow_table::create(*r.h, {.level = 0, .log_size = 6, .miss = last}));
    auto group = take(flow_group::create(root, 0, 7, flow_match{}.ip_version(4).ip_protocol(17).udp_dport(0)));
    auto counter = take(flow_counter::create(*r.h));
    flow_rule::action act;
    act.to_tirs = {spread};
    act.count = counter;
    act.flow_tag = 0x00beef;
    auto rule = take(flow_rule::create(group, 3, flow_match{}.ip_version(4).ip_protocol(17).udp_dport(31337), act));
    check_ok(root->make_root());
    const auto counted = take(counter->query());
    CHECK(counted.packets == 0);
    CHECK(counted.octets == 0);

    // What the rule names is held by the firmware while it stands.
    check_refused(spread->destroy(), "DESTROY_TIR", "RESOURCE_BUSY");
    check_refused(counter->destroy(), "DEALLOC_FLOW_COUNTER", "RESOURCE_BUSY");
    check_refused(group->destroy(), "DESTROY_FLOW_GROUP", "RESOURCE_BUSY");
    check_refused(table->destroy(), "DESTROY_RQT", "RESOURCE_BUSY");
    check_refused(q2->destroy(), "DESTROY_RQ", "RESOURCE_BUSY");
    check_refused(last->destroy(), "DESTROY_FLOW_TABLE", "RESOURCE_BUSY");

    // The table's RQs replaced (MODIFY_RQT): the striding RQ is free then.
    const std::vector<std::shared_ptr<rq>> one{q1};
    check_ok(table->modify(one));
    check_ok(q2->destroy());

    // Torn down in order, each by its own command (the root unset with its table).
    check_ok(rule->destroy());
    check_ok(counter->destroy());
    check_ok(group->destroy());
    check_ok(root->destroy());
    check_ok(last->destroy());
    check_ok(spread->destroy());
    check_ok(direct->destroy());
    check_ok(table->destroy());
    check_ok(q1->destroy());
    check_ok(r.td->destroy());
}

TEST_CASE("what the driver refuses before the firmware sees it, and what the firmware refuses, come back clearly") {
    rx r;
    // A rule that neither forwards nor drops, an entry outside its group.
    auto t = take(flow_table::create(*r.h, {}));
    auto g = take(flow_group::create(t, 0, 3, flow_match{}.udp_dport(0)));
    auto none = flow_rule::create(g, 0, flow_match{}.udp_dport(1), {});
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == EINVAL);
    auto q = r.make_rq();
    auto d = take(tir::create(r.td, q));
    auto outside = flow_rule::create(g, 9, flow_match{}.udp_dport(1), {.to_tirs = {d}});
    REQUIRE_FALSE(outside.ok());
    CHECK(outside.error().code == EINVAL);
    // A rule on a field its group does not match on: the firmware's refusal.
    check_refused(status_of(flow_rule::create(g, 1, flow_match{}.udp_dport(1).tcp_dport(2), {.to_tirs = {d}})),
                  "SET_FLOW_TABLE_ENTRY", "BAD_PARAM");
    // Overlapping groups.
    check_refused(status_of(flow_group::create(t, 2, 5, flow_match{}.ethertype(0))), "CREATE_FLOW_GROUP", "BAD_PARAM");
    // A forward to a table of the same level.
    auto same = take(flow_table::create(*r.h, {}));
    check_refused(status_of(flow_rule::create(g, 1, flow_match{}.udp_dport(1), {.to_table = same})),
                  "SET_FLOW_TABLE_ENTRY", "BAD_PARAM");
    // A miss moved to a table of the same level: refused before the firmware; to a
    // higher one, and back to none, taken (MODIFY_FLOW_TABLE).
    CHECK(t->set_miss(same).error().code == EINVAL);
    auto deeper = take(flow_table::create(*r.h, {.level = 1}));
    REQUIRE(t->set_miss(deeper).ok());
    check_refused(deeper->destroy(), "DESTROY_FLOW_TABLE", "RESOURCE_BUSY");  // t misses to it
    REQUIRE(t->set_miss(nullptr).ok());
    CHECK(deeper->destroy().ok());
    // A striding RQ outside the PRM's ranges; an RQ in RDY asked to go RDY from RST.
    rq::attr a;
    a.domain = r.domain;
    a.recv_cq = r.rcq;
    a.multi_packet = true;
    a.strides.log_num_strides = 17;
    auto big = rq::create(a);
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().code == EINVAL);
    // The CQ is held while an RQ completes into it.
    check_refused(r.rcq->destroy(), "DESTROY_CQ", "RESOURCE_BUSY");
}

TEST_CASE("every object goes by its own command: TEARDOWN_HCA finds none left") {
    auto h = test::bring_up();
    {
        auto td = take(transport_domain::create(*h));
        auto domain = take(pd::create(*h));
        auto c = take(cq::create(*h, {}));
        auto t = take(tis::create(td, 3));
        sq::attr sa;
        sa.domain = domain;
        sa.send_cq = c;
        sa.transport = t;
        auto s = take(sq::create(sa));
        check_ok(s->ready());
        rq::attr ra;
        ra.domain = domain;
        ra.recv_cq = c;
        auto q = take(rq::create(ra));
        check_ok(q->ready());
        auto d = take(tir::create(td, q));
        auto ft = take(flow_table::create(*h, {}));
        auto g = take(flow_group::create(ft, 0, 0, flow_match{}));
        auto rule = take(flow_rule::create(g, 0, flow_match{}, {.to_tirs = {d}}));
        check_ok(ft->make_root());
        // Released in reverse order of making as the shared pointers go out of scope.
    }
    check_ok(h->close());
    CHECK(h->objects_at_close() == 0);
}
