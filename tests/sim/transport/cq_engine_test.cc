// The CQ engine through the transport engine: CQEs from signaled NOPs (which complete
// without the wire) into a CQ put in the tables by hand, the doorbell record the driver
// would update, and the arm doorbell.
#include <cstring>
#include <span>
#include <vector>

#include <doctest/doctest.h>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

constexpr std::uint32_t kQp = 0x100, kCq = 1, kEq = 7;

struct cq_rig : engine_rig {
    explicit cq_rig(unsigned log_size) {
        add_cq(kCq, log_size, kEq);
        add_rc_qp(kQp, 0x101, kCq);
    }
    void nop() { post_send(kQp, hw::wqe_opcode::NOP, true); }
    void consumed(std::uint32_t ci) {
        const cq_object& cq = t.cqs.at(kCq);
        put(hw::ifc::get<hw::ifc::cqc::dbr_addr>(cq.cqc.data()), hw::be32::from(ci));
    }
    void arm(std::uint32_t sn, std::uint32_t cmd, std::uint32_t ci) {
        const std::uint32_t word = (sn << 28) | cmd | (ci & 0xffffff);
        engine->cq_doorbell((std::uint64_t{word} << 32) | kCq);
    }
};

TEST_CASE("a CQE pushed to a full CQ overruns it: a CQ_ERROR event and no more CQEs") {
    cq_rig r(1);  // two CQEs
    r.nop();
    r.nop();
    CHECK(r.t.cqs.at(kCq).producer == 2);
    CHECK(r.events.empty());
    r.nop();  // the driver consumed nothing: no room
    const cq_object& cq = r.t.cqs.at(kCq);
    CHECK(cq.producer == 2);
    CHECK(cq.overrun);
    CHECK(hw::ifc::get<hw::ifc::cqc::status>(cq.cqc.data()) == cq_ring::kStatusOverflow);
    REQUIRE(r.events.size() == 1);
    CHECK(r.events[0].type == hw::event_type::CQ_ERROR);
    CHECK(hw::ifc::get<hw::ifc::cq_error::cqn>(r.events[0].data.data()) == kCq);
    CHECK(hw::ifc::get<hw::ifc::cq_error::syndrome>(r.events[0].data.data()) == 1);
    // Overrun is final: even with room again nothing more is written or reported.
    r.consumed(2);
    r.nop();
    CHECK(r.t.cqs.at(kCq).producer == 2);
    CHECK(r.events.size() == 1);
}

TEST_CASE("with the doorbell record showing room the ring wraps and the owner bit flips") {
    cq_rig r(1);
    r.nop();
    r.nop();
    r.consumed(2);
    r.nop();
    const cq_object& cq = r.t.cqs.at(kCq);
    CHECK(cq.producer == 3);
    CHECK_FALSE(cq.overrun);
    CHECK(r.events.empty());
    const hw::cqe64 c = r.cqe(kCq, 0);  // index 2 is slot 0 again
    CHECK((c.op_own & hw::cqe_owner_mask) == 1);
    CHECK(c.wqe_counter.value() == 2);
    CHECK(r.cqe(kCq, 1).op_own % 2 == 0);  // slot 1 still from the first pass
}

TEST_CASE("with oi set a full CQ takes CQEs regardless") {
    cq_rig r(1);
    hw::ifc::set<hw::ifc::cqc::oi>(r.t.cqs.at(kCq).cqc.data(), 1);
    for (int i = 0; i < 3; ++i) r.nop();
    CHECK(r.t.cqs.at(kCq).producer == 3);
    CHECK_FALSE(r.t.cqs.at(kCq).overrun);
    CHECK(r.events.empty());
}

TEST_CASE("an armed CQ raises one completion event on its EQ, then stays quiet until re-armed") {
    cq_rig r(4);
    r.arm(0, hw::cq_db_req_not, 0);
    CHECK(r.completions.empty());  // nothing to report yet
    r.nop();
    REQUIRE(r.completions.size() == 1);
    CHECK(r.completions[0] == std::pair<std::uint32_t, std::uint32_t>{kEq, kCq});
    r.nop();
    CHECK(r.completions.size() == 1);  // disarmed by the event
    // A stale arm (the sn of the request that fired) is ignored; the next sn arms, and
    // CQEs already past the consumer index fire at once.
    r.arm(0, hw::cq_db_req_not, 1);
    CHECK(r.completions.size() == 1);
    r.arm(1, hw::cq_db_req_not, 1);
    CHECK(r.completions.size() == 2);
}

TEST_CASE("a solicited-only arm ignores ordinary CQEs") {
    cq_rig r(4);
    r.arm(0, hw::cq_db_req_not_sol, 0);
    r.nop();
    r.nop();
    CHECK(r.completions.empty());
    CHECK(r.t.cqs.at(kCq).armed);
}

// The CQ ring as a driver leaves it, every byte 0xff (opcode 0xf, owner 1), so that a
// CQE not yet written is told from one written; and the state of the CQE each
// completion event announces, at the moment the event is raised.
struct batch_rig : cq_rig {
    explicit batch_rig(unsigned log_size) : cq_rig(log_size) {
        auto_run = false;  // NOPs need no wire; running it would end each packet batch
        std::memset(host(t.cqs.at(kCq).pas[0]), 0xff, std::size_t{64} << log_size);
    }
    bool written(std::uint32_t i) { return (cqe(kCq, i).op_own >> 4) != 0xf; }
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) override {
        announced_written.push_back(written(t.cqs.at(kCq).producer - 1));
        cq_rig::completion_event(eqn, data);
    }
    std::vector<bool> announced_written;
};

TEST_CASE("in a device round's batch, CQEs are written together when it ends; outside one at once") {
    batch_rig r(4);
    r.nop();
    CHECK(r.written(0));
    r.engine->begin_cq_batch();
    r.nop();
    r.nop();
    CHECK(r.t.cqs.at(kCq).producer == 3);
    CHECK_FALSE(r.written(1));
    CHECK_FALSE(r.written(2));
    r.engine->end_cq_batch();
    CHECK(r.written(1));
    CHECK(r.written(2));
    CHECK(r.cqe(kCq, 1).wqe_counter.value() == 1);
    CHECK(r.cqe(kCq, 2).wqe_counter.value() == 2);
    CHECK((r.cqe(kCq, 2).op_own & hw::cqe_owner_mask) == 0);
    r.nop();  // the batch is over: at once again
    CHECK(r.written(3));
}

TEST_CASE("in a batch, the end of a packet batch writes its CQEs, and an event follows the CQE it announces") {
    batch_rig r(4);
    r.engine->begin_cq_batch();
    r.nop();
    CHECK_FALSE(r.written(0));
    r.engine->end_of_batch();  // before the batch's ACKs go out
    CHECK(r.written(0));
    r.consumed(1);
    r.arm(0, hw::cq_db_req_not, 1);
    r.nop();
    REQUIRE(r.announced_written.size() == 1);
    CHECK(r.announced_written[0]);
    CHECK(r.written(1));
    // An arm that fires at once for a CQE still gathered writes it first.
    r.nop();
    CHECK_FALSE(r.written(2));
    r.arm(1, hw::cq_db_req_not, 2);
    REQUIRE(r.announced_written.size() == 2);
    CHECK(r.announced_written[1]);
    r.engine->end_cq_batch();
}

TEST_CASE("the ring's kept translation never outlives the IOMMU mapping: an UNMAP or a read-only map takes effect at once") {
    batch_rig r(3);
    std::byte* const ring = r.host(r.t.cqs.at(kCq).pas[0]);
    r.nop();  // the first CQE translates the ring and keeps it
    CHECK(r.written(0));
    REQUIRE(r.t.cqs.at(kCq).ring_host == ring);
    const std::size_t faults = r.mmu.fault_count();
    // The same memory mapped again read-only: the next CQE must not land through the
    // kept host address.
    r.remap(false);
    r.nop();
    CHECK(r.t.cqs.at(kCq).producer == 2);  // the ring moves on, as after a card's lost DMA write
    CHECK_FALSE(r.written(1));
    CHECK(r.mmu.fault_count() > faults);
    CHECK(r.t.cqs.at(kCq).ring_host == nullptr);  // nothing kept for a ring it cannot write
    // Writable again: the CQEs land again.
    r.remap(true);
    r.nop();
    CHECK(r.written(2));
    CHECK(r.cqe(kCq, 2).wqe_counter.value() == 2);
    CHECK(r.t.cqs.at(kCq).ring_host == ring);
}

TEST_CASE("a ring whose pages are not consecutive is not kept as one: its last CQE lands in its own page") {
    cq_rig r(6);  // 64 CQEs: 4 KiB
    cq_object& cq = r.t.cqs.at(kCq);
    // The ring from 64 bytes into its first page (page_offset 1 of 64), so that its last
    // CQE is in a second page, which lies elsewhere.
    const std::uint64_t second = r.alloc(4096);
    REQUIRE(second != cq.pas[0] + 4096);
    hw::ifc::set<hw::ifc::cqc::page_offset>(cq.cqc.data(), 1);
    cq.pas = {cq.pas[0], second};
    ++r.t.eth.generation;  // as the command that made it so
    for (std::uint32_t i = 0; i < 64; ++i) r.nop();
    CHECK(cq.producer == 64);
    CHECK(r.get<hw::cqe64>(cq.pas[0] + 64 + 62 * 64).wqe_counter.value() == 62);
    const hw::cqe64 last = r.get<hw::cqe64>(second);
    CHECK(last.wqe_counter.value() == 63);
    CHECK(hw::cqe_get_opcode(last.op_own) == hw::cqe_opcode::REQ);
}

TEST_CASE("a fault injected on the ring is taken by the kept translation's write too") {
    batch_rig r(3);
    r.nop();
    REQUIRE(r.t.cqs.at(kCq).ring_host != nullptr);
    const std::uint64_t slot1 = r.t.cqs.at(kCq).pas[0] + 64;
    r.mmu.inject_fault(slot1, 64);
    r.nop();
    CHECK_FALSE(r.written(1));
    r.nop();
    CHECK(r.written(2));
}

}  // namespace
}  // namespace cxv::sim::testing
