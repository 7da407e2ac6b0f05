// The transport engine alone (no command interface): QPs, CQs and a memory key put in
// the object tables by hand, host memory behind the IOMMU, and a loopback wire. Each
// test posts WQEs as a driver would (ring, doorbell record, doorbell) and checks memory,
// CQEs and what the engine reported through its hooks.
#include <doctest/doctest.h>

#include <cstring>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

constexpr std::uint32_t kA = 0x100, kB = 0x101;  // two RC QPs connected to each other
constexpr std::uint32_t kCqA = 1, kCqB = 2;

struct pair_rig : engine_rig {
    pair_rig() {
        add_cq(kCqA, 4);
        add_cq(kCqB, 4);
        add_rc_qp(kA, kB, kCqA);
        add_rc_qp(kB, kA, kCqB);
    }
    void fill(std::uint64_t iova, std::size_t n, std::uint8_t seed) {
        for (std::size_t i = 0; i < n; ++i) host(iova)[i] = std::byte(seed + i * 7);
    }
};

hw::cqe_opcode opcode(const hw::cqe64& c) { return hw::cqe_get_opcode(c.op_own); }
std::uint32_t qpn(const hw::cqe64& c) { return c.sop_drop_qpn.value() & 0xffffff; }
std::uint8_t syndrome(const hw::cqe64& c) { return reinterpret_cast<const hw::err_cqe64&>(c).syndrome; }

TEST_CASE("a SEND lands in the receiver's buffer, with a receive CQE and a send CQE") {
    pair_rig r;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 100, 3);
    r.post_recv(kB, dst, 256);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 100, engine_rig::kKey, src);
    r.post_send(kA, hw::wqe_opcode::SEND, true, d);

    CHECK(std::memcmp(r.host(dst), r.host(src), 100) == 0);
    CHECK(r.host(dst)[100] == std::byte{0});  // nothing past the message
    REQUIRE(r.t.cqs.at(kCqB).producer == 1);
    const hw::cqe64 rc = r.cqe(kCqB, 0);
    CHECK(opcode(rc) == hw::cqe_opcode::RESP_SEND);
    CHECK(rc.byte_cnt.value() == 100);
    CHECK(qpn(rc) == kB);
    CHECK(rc.wqe_counter.value() == 0);
    CHECK((rc.op_own & hw::cqe_owner_mask) == 0);  // first pass over the ring
    // The ACK came back: the SEND completes on the requester's CQ.
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    const hw::cqe64 sc = r.cqe(kCqA, 0);
    CHECK(opcode(sc) == hw::cqe_opcode::REQ);
    CHECK(qpn(sc) == kA);
    CHECK(sc.wqe_counter.value() == 0);
    CHECK(r.t.qps.at(kA).x.outstanding.empty());
    CHECK(r.t.qps.at(kB).x.epsn == 1);
    CHECK(r.req_errors.empty());
    CHECK(r.resp_errors.empty());
}

TEST_CASE("a SEND without a posted receive is RNR NAKed and not completed") {
    pair_rig r;
    r.t.qps.at(kA).x.rnr_left = 1;  // one RNR retry left (RTR2RTS sets it from rnr_retry)
    const std::uint64_t src = r.alloc(4096);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 16, engine_rig::kKey, src);
    r.post_send(kA, hw::wqe_opcode::SEND, true, d);
    CHECK(r.counted.out_of_buffer == 1);
    CHECK(r.t.cqs.at(kCqB).producer == 0);
    CHECK(r.t.cqs.at(kCqA).producer == 0);  // waits for the retry
    CHECK(r.t.qps.at(kA).x.rnr_wait);
    CHECK(r.t.qps.at(kA).x.rnr_left == 0);
    CHECK(r.counted.rnr_nak_retry_err == 1);
    CHECK(r.t.qps.at(kA).x.outstanding.size() == 1);
}

TEST_CASE("an RDMA READ returns the remote data into the local scatter list") {
    pair_rig r;
    const std::uint64_t remote = r.alloc(4096), local = r.alloc(4096);
    r.fill(remote, 64, 11);
    r.post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 64, local);

    CHECK(std::memcmp(r.host(local), r.host(remote), 64) == 0);
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    const hw::cqe64 c = r.cqe(kCqA, 0);
    CHECK(opcode(c) == hw::cqe_opcode::REQ);
    CHECK(c.byte_cnt.value() == 64);
    CHECK(r.counted.rx_read_requests == 1);
    CHECK(r.t.cqs.at(kCqB).producer == 0);  // a READ takes no receive WQE
}

TEST_CASE("a fetch-and-add returns the old value and adds at the target") {
    pair_rig r;
    const std::uint64_t target = r.alloc(4096), local = r.alloc(4096);
    r.put<std::uint64_t>(target, 5);
    hw::wqe_raddr_seg ra{};
    hw::set_raddr_seg(ra, target, engine_rig::kKey);
    hw::wqe_atomic_seg as{};
    hw::set_atomic_seg(as, 3, 0);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 8, engine_rig::kKey, local);
    r.post_send(kA, hw::wqe_opcode::ATOMIC_FA, true, ra, as, d);

    CHECK(r.get<std::uint64_t>(target) == 8);
    CHECK(r.get<std::uint64_t>(local) == 5);
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    CHECK(r.cqe(kCqA, 0).byte_cnt.value() == 8);
    CHECK(r.counted.rx_atomic_requests == 1);
}

TEST_CASE("an RDMA WRITE to a QP without remote write access fails both sides") {
    pair_rig r;
    hw::ifc::set<hw::ifc::qpc::rwe>(r.t.qps.at(kB).qpc.data(), 0);
    const std::uint64_t src = r.alloc(4096), remote = r.alloc(4096);
    r.fill(src, 32, 1);
    r.post_rdma(kA, hw::wqe_opcode::RDMA_WRITE, remote, 32, src);

    CHECK(r.host(remote)[0] == std::byte{0});  // nothing written
    // Responder: NAK, an access error event, the QP in error.
    CHECK(r.t.qps.at(kB).state == qp_state::ERR);
    REQUIRE(!r.events.empty());
    CHECK(r.events[0].type == hw::event_type::WQ_ACCESS_ERROR);
    // Requester: the WQE completes in error and the QP goes to error.
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    const hw::cqe64 c = r.cqe(kCqA, 0);
    CHECK(opcode(c) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(c) == static_cast<std::uint8_t>(hw::cqe_syndrome::REMOTE_ACCESS_ERR));
    CHECK(r.t.qps.at(kA).state == qp_state::ERR);
    REQUIRE(r.req_errors.size() == 1);
    CHECK(r.req_errors[0] == hw::cqe_syndrome::REMOTE_ACCESS_ERR);
}

TEST_CASE("a WQE whose index is not its ring position completes with a local QP operation error") {
    pair_rig r;
    qp_object& a = r.t.qps.at(kA);
    hw::wqe_ctrl_seg ctrl{};
    hw::set_ctrl_seg(ctrl, 5, hw::wqe_opcode::NOP, 0, kA, 1, hw::ctrl_cq_update);  // at 0, says 5
    const std::uint64_t sq = a.pas[0] + 16 * 16;
    r.put(sq, ctrl);
    r.put(hw::ifc::get<hw::ifc::qpc::dbr_addr>(a.qpc.data()) + 4, hw::be32::from(1));
    r.engine->sq_doorbell(8, std::size_t{8} * hw::uar_page_size + hw::uar_bf_offset,
                          (std::uint64_t{ctrl.opmod_idx_opcode.value()} << 32) | ctrl.qpn_ds.value());
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    const hw::cqe64 c = r.cqe(kCqA, 0);
    CHECK(opcode(c) == hw::cqe_opcode::REQ_ERR);
    CHECK(syndrome(c) == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_QP_OP_ERR));
    CHECK(r.t.qps.at(kA).state == qp_state::ERR);
    CHECK(r.wire.empty());
}

}  // namespace
}  // namespace cxv::sim::testing
