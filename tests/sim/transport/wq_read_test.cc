// Work queue reads through the translations the engine keeps (a card's IOTLB): a WQE
// page unmapped after WQEs were read from it faults at the next read, as any access.
#include <doctest/doctest.h>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

constexpr std::uint32_t kQp = 0x100, kCq = 1;

TEST_CASE("a WQE page unmapped after WQEs were read from it faults at the next WQE read") {
    engine_rig r;
    r.add_cq(kCq, 4);
    r.add_rc_qp(kQp, 0x101, kCq);
    r.post_send(kQp, hw::wqe_opcode::NOP, true);  // read through a kept translation
    REQUIRE(r.t.cqs.at(kCq).producer == 1);
    REQUIRE(r.events.empty());
    // Everything stays mapped but the page holding the queues (the doorbell record, the
    // CQ and the rest live on pages of their own).
    const std::uint64_t wq = r.t.qps.at(kQp).pas[0];
    REQUIRE(r.mmu.unmap(engine_rig::kIova, engine_rig::kMem));
    REQUIRE(r.mmu.map(engine_rig::kIova, r.host(engine_rig::kIova), wq - engine_rig::kIova, true, true) ==
            map_error::none);
    const std::uint64_t after = wq + 4096;
    REQUIRE(r.mmu.map(after, r.host(after), engine_rig::kIova + engine_rig::kMem - after, true, true) ==
            map_error::none);
    const std::size_t faults = r.mmu.fault_count();
    r.post_send(kQp, hw::wqe_opcode::NOP, true);
    CHECK(r.t.cqs.at(kCq).producer == 1);  // not executed
    CHECK(r.mmu.fault_count() > faults);
    REQUIRE_FALSE(r.events.empty());
    CHECK(r.events.front().type == hw::event_type::WQ_CATAS_ERROR);
    CHECK(r.t.qps.at(kQp).state == qp_state::ERR);
}

}  // namespace
}  // namespace cxv::sim::testing
