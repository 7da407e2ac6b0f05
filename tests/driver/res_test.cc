// PDs, MRs, CQs, QPs (RC, UC, UD) and SRQs made by the driver on the model under
// cxv-sim: creation, every QP transition with the firmware's view checked by QUERY_*,
// the firmware's refusals surfacing with opcode, status and syndrome, BlueFlame
// register allocation, and teardown with objects still alive.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "driver/res/srq.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver;

using test::check_ok;
using test::check_refused;
using test::take;

namespace {

struct rig {
    std::unique_ptr<hca> h = test::bring_up();
    std::shared_ptr<pd> domain = take(pd::create(*h));
    std::shared_ptr<cq> scq = take(cq::create(*h, {}));
    std::shared_ptr<cq> rcq = take(cq::create(*h, {}));

    std::shared_ptr<qp> make(qp_type t, std::shared_ptr<srq> s = nullptr) {
        qp::attr a;
        a.type = t;
        a.domain = domain;
        a.send_cq = scq;
        a.recv_cq = rcq;
        a.shared = std::move(s);
        return take(qp::create(a));
    }
};

// RST → INIT → RTR → RTS for a connected QP towards `peer` (on this port's LID).
void connect(qp& q, std::uint32_t peer, hca::port_info port) {
    qp::modify_attr m;
    m.access = access_remote_read | access_remote_write;
    m.dest_qpn = peer;
    m.path_mtu = port.max_mtu;
    m.ah.dlid = port.lid;
    check_ok(q.modify(qp_state::init, m));
    check_ok(q.modify(qp_state::rtr, m));
    check_ok(q.modify(qp_state::rts, m));
}

}  // namespace

TEST_CASE("PD and MR: keys, access rules, any alignment; a PD in use is refused") {
    rig r;
    std::vector<char> mem(3 * 4096 + 300);
    auto m1 = take(mr::create(r.domain, mem.data() + 100, 10000, access_local_write | access_remote_write));
    auto m2 = take(mr::create(r.domain, mem.data() + 100, 10000, 0));
    CHECK(m1->lkey() == m1->rkey());
    CHECK(m1->lkey() != m2->lkey());
    CHECK((m1->lkey() >> 8) != (m2->lkey() >> 8));
    CHECK(m1->length() == 10000);

    // verbs' rule: remote write needs local write.
    auto bad = mr::create(r.domain, mem.data(), 64, access_remote_write);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == EINVAL);
    CHECK_FALSE(mr::create(r.domain, mem.data(), 0, 0).ok());

    // DEALLOC_PD while keys use it: the firmware keeps it.
    auto busy = r.domain->destroy();
    REQUIRE_FALSE(busy.ok());
    CHECK(busy.error().code == EBUSY);
    m1.reset();
    m2.reset();
}

TEST_CASE("CQ: size rounded up, bound to the completion EQ; the firmware refuses a bad EQ") {
    rig r;
    auto c = take(cq::create(*r.h, {100, -1}));
    CHECK(c->entries() == 128);
    auto st = take(c->query());
    CHECK(st.status == 0);
    CHECK(st.eqn == r.h->comp_eqn());
    CHECK(st.producer_counter == 0);
    // Every CQE starts invalid and owned by the device.
    for (unsigned i = 0; i < c->entries(); ++i) CHECK(std::to_integer<unsigned>(c->cqes()[i * 64 + 63]) == 0xf1);

    auto too_big = cq::create(*r.h, {1u << 30, -1});
    REQUIRE_FALSE(too_big.ok());
    CHECK(too_big.error().code == EINVAL);
    auto bad_eq = cq::create(*r.h, {16, 200});
    REQUIRE_FALSE(bad_eq.ok());
    check_refused(bad_eq.error(), "CREATE_CQ", "BAD_PARAM");
}

TEST_CASE("RC QPs: every transition, checked by QUERY_QP, and refusals") {
    rig r;
    const auto port = take(r.h->query_port(1));
    CHECK(port.up);
    CHECK(port.lid != 0);
    CHECK(port.max_mtu >= 4);
    auto a = r.make(qp_type::rc);
    auto b = r.make(qp_type::rc);
    CHECK(a->qpn() != b->qpn());
    CHECK(take(a->query()) == qp_state::reset);

    // No command takes RST to RTR: refused before the firmware sees it.
    qp::modify_attr m;
    auto skip = a->modify(qp_state::rtr, m);
    REQUIRE_FALSE(skip.ok());
    CHECK(skip.error().code == EINVAL);

    connect(*a, b->qpn(), port);
    connect(*b, a->qpn(), port);
    CHECK(take(a->query()) == qp_state::rts);
    CHECK(take(b->query()) == qp_state::rts);
    {
        // RTR2RTS asks for an ACK once in 2^8 packets, as Linux's mlx5_ib does on a card.
        namespace ifc = hw::ifc;
        auto in = command<ifc::query_qp_in>(hw::cmd_opcode::QUERY_QP);
        ifc::set<ifc::query_qp_in::qpn>(in.data(), a->qpn());
        const auto out = take(r.h->exec(in, ifc::query_qp_out::size_bytes));
        CHECK(ifc::get<ifc::qpc::log_ack_req_freq>(ifc::at<ifc::query_qp_out::qpc>(out.data())) == 8);
    }
    check_ok(a->modify(qp_state::rts, m));  // RTS2RTS

    // To error, back to reset, and up again.
    check_ok(a->modify(qp_state::error, m));
    CHECK(take(a->query()) == qp_state::error);
    check_ok(a->modify(qp_state::reset, m));
    CHECK(take(a->query()) == qp_state::reset);
    connect(*a, b->qpn(), port);
    CHECK(take(a->query()) == qp_state::rts);

    // The firmware's own checks: port 0 at RST2INIT, MTU 0 at INIT2RTR.
    auto c = r.make(qp_type::rc);
    qp::modify_attr no_port;
    no_port.port = 0;
    check_refused(c->modify(qp_state::init, no_port), "RST2INIT_QP", "BAD_PARAM");
    CHECK(take(c->query()) == qp_state::reset);
    check_ok(c->modify(qp_state::init, m));
    check_ok(c->modify(qp_state::init, m));  // INIT2INIT
    qp::modify_attr no_mtu = m;
    no_mtu.path_mtu = 0;
    no_mtu.ah.dlid = port.lid;
    check_refused(c->modify(qp_state::rtr, no_mtu), "INIT2RTR_QP", "BAD_PARAM");
    CHECK(take(c->query()) == qp_state::init);
    // A path to LID 0 (a port the SM has not swept yet) is taken, as on a card.
    qp::modify_attr no_lid = m;
    no_lid.dest_qpn = b->qpn();
    check_ok(c->modify(qp_state::rtr, no_lid));
    CHECK(take(c->query()) == qp_state::rtr);

    // A CQ in use is refused.
    check_refused(r.scq->destroy(), "DESTROY_CQ", "BUSY");
}

TEST_CASE("UC and UD QPs reach RTS; UD needs no peer") {
    rig r;
    const auto port = take(r.h->query_port(1));
    auto uc1 = r.make(qp_type::uc);
    auto uc2 = r.make(qp_type::uc);
    connect(*uc1, uc2->qpn(), port);
    CHECK(take(uc1->query()) == qp_state::rts);

    auto ud = r.make(qp_type::ud);
    qp::modify_attr m;
    m.qkey = 0x11111111;
    check_ok(ud->modify(qp_state::init, m));
    check_ok(ud->modify(qp_state::rtr, m));
    check_ok(ud->modify(qp_state::rts, m));
    CHECK(take(ud->query()) == qp_state::rts);
    // A UD send WQE carries a 48-byte address vector: control + AV + 1 SGE = 80
    // bytes, two basic blocks.
    CHECK(ud->max_send_wqebbs() == 2);
    CHECK(ud->capabilities().max_send_wr >= 64);
}

TEST_CASE("queue geometry: rounding, inline data, limits") {
    rig r;
    qp::attr a;
    a.type = qp_type::rc;
    a.domain = r.domain;
    a.send_cq = r.scq;
    a.recv_cq = r.rcq;
    a.cap = {100, 30, 3, 5, 200};
    auto q = take(qp::create(a));
    // 48 bytes of RC segments + 4 + 200 inline bytes = 256 → 4 basic blocks.
    CHECK(q->max_send_wqebbs() == 4);
    CHECK(q->sq_wqebb_count() == 512);
    // 512 BBs less the 3 a WQE padded to the ring's end may cost: 127 WQEs of 4 BBs.
    CHECK(q->capabilities().max_send_wr == 127);
    CHECK(q->capabilities().max_inline_data >= 200);
    CHECK(q->rq_wqe_count() == 32);
    CHECK(q->rq_wqe_shift() == 7);  // 5 SGEs → 128-byte WQEs
    CHECK(q->sq() == q->rq() + 32 * 128);

    a.cap = {64, 64, 1000, 1, 0};
    auto huge = qp::create(a);
    REQUIRE_FALSE(huge.ok());
    CHECK(huge.error().code == EINVAL);
    a.cap = {1u << 20, 1, 1, 1, 0};
    CHECK_FALSE(qp::create(a).ok());
}

TEST_CASE("SRQ (an RMP): attached QPs have no RQ, limits are armed, an SRQ in use is refused") {
    rig r;
    auto s = take(srq::create(r.domain, {100, 2, 10}));
    CHECK(s->wqe_count() == 128);
    CHECK(s->wqe_shift() == 6);  // next segment + 2 SGEs = 48 → 64 bytes
    // The free list links every WQE to the next.
    CHECK(std::to_integer<unsigned>(s->wqes()[3]) == 1);
    auto st = take(s->query());
    CHECK(st.state == 0);
    CHECK(st.lwm == 10);
    check_ok(s->arm(20));
    CHECK(take(s->query()).lwm == 20);
    check_refused(s->arm(1000), "MODIFY_RMP", "BAD_PARAM");

    auto q = r.make(qp_type::rc, s);
    CHECK(q->rq_wqe_count() == 0);
    const auto port = take(r.h->query_port(1));
    connect(*q, q->qpn(), port);  // loopback to itself
    check_refused(s->destroy(), "DESTROY_RMP", "BUSY");
    q.reset();
    check_ok(s->destroy());
    CHECK_FALSE(srq::create(r.domain, {0, 1, 0}).ok());
    CHECK_FALSE(srq::create(r.domain, {16, 1, 16}).ok());
}

TEST_CASE("BlueFlame: a register of its own per QP, reused after the QP goes") {
    rig r;
    std::vector<std::shared_ptr<qp>> qps;
    std::set<std::pair<std::uint32_t, std::size_t>> regs;
    for (int i = 0; i < 10; ++i) {
        qps.push_back(r.make(qp_type::rc));
        const auto& bf = qps.back()->bf();
        CHECK(bf.offset >= hw::uar_bf_offset);
        CHECK(bf.offset + bf.size <= hw::uar_page_size);
        CHECK(bf.uar != r.h->uar());  // not the EQ's page
        regs.insert({bf.uar, bf.offset});
    }
    CHECK(regs.size() == 10);
    const auto freed = qps[3]->bf();
    check_ok(qps[3]->destroy());
    qps[3].reset();
    auto again = r.make(qp_type::rc);
    CHECK(again->bf().uar == freed.uar);
    CHECK(again->bf().offset == freed.offset);
}

TEST_CASE("teardown with objects alive: TEARDOWN_HCA releases them, every page comes back") {
    std::vector<char> mem(8192);
    std::shared_ptr<qp> q;
    std::shared_ptr<mr> m;
    std::shared_ptr<srq> s;
    {
        rig r;
        m = take(mr::create(r.domain, mem.data(), mem.size(), access_local_write));
        s = take(srq::create(r.domain, {16, 1, 0}));
        q = r.make(qp_type::rc, s);
        auto gone = r.make(qp_type::rc);
        check_ok(gone->destroy());  // destroyed explicitly: no longer counted, though alive
        REQUIRE(r.h->pages_given() > 0);
        check_ok(r.h->close());
        CHECK(r.h->objects_at_close() == 6);  // pd, 2 cqs, mr, srq, qp
        CHECK(r.h->pages_given() == 0);
        CHECK(q->orphaned());
    }
    // The HCA is gone; the objects still free their memory without commands.
    check_ok(q->destroy());
    q.reset();
    s.reset();
    m.reset();
    // And the function comes up again cleanly.
    auto h = test::bring_up();
    check_ok(h->close());
}

TEST_CASE("fast teardown: PREPARE_FAST_TEARDOWN and the NIC interface disabled") {
    auto h = test::bring_up();
    auto p = take(pd::create(*h));
    auto c = take(cq::create(*h, {}));
    // The model offers it, as ConnectX-5 and later do.
    REQUIRE(hw::ifc::get<hw::ifc::cmd_hca_cap::fast_teardown>(h->caps().data()));
    check_ok(h->close(hca::teardown_mode::fast));
    CHECK(h->pages_given() == 0);
    // Nothing after TEARDOWN_HCA: no page reclaim, no DISABLE_HCA, no per-object destroy.
    const auto& trace = h->trace_at_close();
    REQUIRE_FALSE(trace.empty());
    CHECK(trace.back().opcode == hw::cmd_opcode::TEARDOWN_HCA);
    for (const auto& rec : trace) {
        CHECK(rec.opcode != hw::cmd_opcode::DESTROY_CQ);
        CHECK(rec.opcode != hw::cmd_opcode::DEALLOC_PD);
    }
    c.reset();
    p.reset();
    h.reset();
    auto again = test::bring_up();
    check_ok(again->close());
}
