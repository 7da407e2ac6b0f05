// The engine at packet granularity (IBA 9.7 "Reliable Service", 9.8 "Unreliable
// Service"): messages cut at the path MTU with the opcodes and PSNs a card sends, checked
// on the packets the rig captured; cumulative ACKs; go-back-N after a PSN sequence error
// NAK; duplicates answered without being carried out twice; RNR NAK and retry; UC
// dropping a message that lost a packet.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

namespace op = wire::opcode;
namespace syn = wire::aeth_syndrome;
constexpr std::uint32_t kA = 0x100, kB = 0x101;
constexpr std::uint32_t kCqA = 1, kCqB = 2;
constexpr unsigned kMtu256 = 1, kMtu1024 = 3;

struct pair_rig : engine_rig {
    explicit pair_rig(unsigned mtu, transport tp = transport::rc) {
        add_cq(kCqA, 6);
        add_cq(kCqB, 6);
        add_rc_qp(kA, kB, kCqA, tp);
        add_rc_qp(kB, kA, kCqB, tp);
        set_path(kA, mtu, 10);
        set_path(kB, mtu, 10);
    }
    void fill(std::uint64_t iova, std::size_t n, std::uint8_t seed) {
        for (std::size_t i = 0; i < n; ++i) host(iova)[i] = std::byte(seed + i * 7);
    }
    void send(std::uint32_t qpn, std::uint64_t src, std::uint32_t len, hw::wqe_opcode o = hw::wqe_opcode::SEND) {
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, len, kKey, src);
        post_send(qpn, o, true, d);
    }
    // The packets sent to `qpn`'s peer (requests) or to `qpn` (answers), in order.
    std::vector<wire::packet> to(std::uint32_t qpn) const {
        std::vector<wire::packet> out;
        for (const auto& p : sent) {
            if (p.bth.dest_qp == qpn) out.push_back(p);
        }
        return out;
    }
    // Delivers what is on the wire, dropping the packets `drop` says to, in batches of
    // what is on the wire (at most `batch` packets), each followed by end_of_batch().
    template <typename Drop>
    void run_lossy(Drop drop, std::size_t batch = SIZE_MAX) {
        while (!wire.empty()) {
            for (std::size_t k = std::min(batch, wire.size()); k > 0; --k) {
                wire::packet p = std::move(wire.front());
                wire.pop_front();
                if (!drop(p)) engine->receive(p);
            }
            engine->end_of_batch();
        }
    }
    std::uint32_t cqes(std::uint32_t cqn) const { return t.cqs.at(cqn).producer; }
};

hw::cqe_opcode opcode(const hw::cqe64& c) { return hw::cqe_get_opcode(c.op_own); }
std::uint8_t oper(const wire::packet& p) { return op::operation_of(p.bth.opcode); }

TEST_CASE("a 1001-byte SEND at MTU 256 is First, Middle, Middle, Last with PSNs 0-3 and one ACK") {
    pair_rig r(kMtu256);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 1001, 5);
    r.post_recv(kB, dst, 2048);
    r.send(kA, src, 1001);

    const auto req = r.to(kB);
    REQUIRE(req.size() == 4);
    const std::uint8_t want[] = {op::SEND_FIRST, op::SEND_MIDDLE, op::SEND_MIDDLE, op::SEND_LAST};
    for (std::uint32_t k = 0; k < 4; ++k) {
        CHECK(req[k].bth.opcode == (op::RC | want[k]));
        CHECK(req[k].bth.psn == k);
        CHECK(req[k].bth.ack_req == (k == 3));
        CHECK(req[k].payload.size() == (k < 3 ? 256u : 233u));
    }
    CHECK(req[3].bth.pad == 3);
    CHECK(req[0].bth.pad == 0);
    CHECK(req[0].net.link == wire::link_kind::ib);
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 1);  // the responder answers the packet that asked
    CHECK(ans[0].bth.opcode == (op::RC | op::ACKNOWLEDGE));
    CHECK(ans[0].bth.psn == 3);
    CHECK(ans[0].aeth.syndrome == syn::ACK_NO_CREDIT_LIMIT);
    CHECK(ans[0].aeth.msn == 1);
    CHECK(std::memcmp(r.host(dst), r.host(src), 1001) == 0);
    REQUIRE(r.cqes(kCqB) == 1);
    CHECK(r.cqe(kCqB, 0).byte_cnt.value() == 1001);
    CHECK(r.cqes(kCqA) == 1);
    CHECK(r.t.qps.at(kA).x.next_psn == 4);
    CHECK(r.t.qps.at(kB).x.epsn == 4);
}

TEST_CASE("an RDMA WRITE with immediate at MTU 1024: RETH with the whole length on the First, ImmDt on the Last") {
    pair_rig r(kMtu1024);
    const std::uint64_t src = r.alloc(4096), remote = r.alloc(4096), rbuf = r.alloc(4096);
    r.fill(src, 3000, 9);
    r.post_recv(kB, rbuf, 64);
    hw::wqe_raddr_seg ra{};
    hw::set_raddr_seg(ra, remote, engine_rig::kKey);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 3000, engine_rig::kKey, src);
    r.post_send(kA, hw::wqe_opcode::RDMA_WRITE_IMM, true, ra, d);

    const auto req = r.to(kB);
    REQUIRE(req.size() == 3);
    CHECK(oper(req[0]) == op::RDMA_WRITE_FIRST);
    CHECK(req[0].reth.va == remote);
    CHECK(req[0].reth.dma_length == 3000);
    CHECK(oper(req[1]) == op::RDMA_WRITE_MIDDLE);
    CHECK(oper(req[2]) == op::RDMA_WRITE_LAST_WITH_IMMEDIATE);
    CHECK(req[2].payload.size() == 3000 - 2048);
    CHECK(std::memcmp(r.host(remote), r.host(src), 3000) == 0);
    REQUIRE(r.cqes(kCqB) == 1);
    CHECK(opcode(r.cqe(kCqB, 0)) == hw::cqe_opcode::RESP_WR_IMM);
    CHECK(r.cqe(kCqB, 0).byte_cnt.value() == 3000);
    CHECK(r.counted.rx_write_requests == 1);
    CHECK(r.cqes(kCqA) == 1);
}

TEST_CASE("an RDMA READ of 1000 bytes at MTU 256: one request, four responses, the next PSN after them") {
    pair_rig r(kMtu256);
    const std::uint64_t remote = r.alloc(4096), local = r.alloc(4096), src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(remote, 1000, 1);
    r.post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 1000, local);
    r.post_recv(kB, dst, 64);
    r.send(kA, src, 8);

    const auto req = r.to(kB);
    REQUIRE(req.size() == 2);
    CHECK(oper(req[0]) == op::RDMA_READ_REQUEST);
    CHECK(req[0].bth.psn == 0);
    CHECK(req[0].reth.dma_length == 1000);
    CHECK(oper(req[1]) == op::SEND_ONLY);
    CHECK(req[1].bth.psn == 4);  // the READ took 4 PSNs
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 5);
    const std::uint8_t want[] = {op::RDMA_READ_RESPONSE_FIRST, op::RDMA_READ_RESPONSE_MIDDLE,
                                 op::RDMA_READ_RESPONSE_MIDDLE, op::RDMA_READ_RESPONSE_LAST, op::ACKNOWLEDGE};
    for (std::uint32_t k = 0; k < 5; ++k) {
        CHECK(oper(ans[k]) == want[k]);
        CHECK(ans[k].bth.psn == k);
    }
    CHECK(ans[3].payload.size() == 1000 - 768);
    CHECK(std::memcmp(r.host(local), r.host(remote), 1000) == 0);
    REQUIRE(r.cqes(kCqA) == 2);
    CHECK(r.cqe(kCqA, 0).byte_cnt.value() == 1000);
}

TEST_CASE("ACKs are cumulative: with the first two lost, the third completes all three SENDs") {
    pair_rig r(kMtu256);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.auto_run = false;
    for (std::uint32_t i = 0; i < 3; ++i) {
        r.post_recv(kB, dst + 256 * i, 256);
        r.send(kA, src, 16);
    }
    unsigned acks = 0;
    // One request per batch, so that each SEND gets its own ACK (in one batch the
    // responder would coalesce the three into one; see "coalescing" below).
    r.run_lossy([&](const wire::packet& p) { return oper(p) == op::ACKNOWLEDGE && ++acks <= 2; }, 1);
    CHECK(acks == 3);
    CHECK(r.cqes(kCqB) == 3);
    REQUIRE(r.cqes(kCqA) == 3);
    for (std::uint32_t i = 0; i < 3; ++i) CHECK(r.cqe(kCqA, i).wqe_counter.value() == i);
    CHECK(r.t.qps.at(kA).x.outstanding.empty());
    CHECK(r.tr.snapshot().retransmits == 0);
}

TEST_CASE("a lost middle packet: one PSN sequence error NAK, then go-back-N from the middle of the message") {
    pair_rig r(kMtu256);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 1000, 3);
    r.post_recv(kB, dst, 1024);
    r.auto_run = false;
    r.send(kA, src, 1000);
    bool dropped = false;
    r.run_lossy([&](const wire::packet& p) {
        if (p.bth.dest_qp == kB && p.bth.psn == 1 && !dropped) return dropped = true;
        return false;
    });
    // PSN 2 drew the NAK, PSN 3 was dropped in silence; then 1, 2, 3 again.
    CHECK(r.counted.out_of_sequence == 2);
    CHECK(r.counted.packet_seq_err == 1);
    CHECK(r.tr.snapshot().naks_sent == 1);
    const auto req = r.to(kB);
    REQUIRE(req.size() == 7);
    const std::uint32_t psns[] = {0, 1, 2, 3, 1, 2, 3};
    for (std::size_t i = 0; i < 7; ++i) CHECK(req[i].bth.psn == psns[i]);
    CHECK(oper(req[4]) == op::SEND_MIDDLE);  // cut again from the kept message
    CHECK(req[4].payload == req[1].payload);
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 2);
    CHECK(ans[0].aeth.syndrome == syn::NAK_PSN_SEQUENCE_ERROR);
    CHECK(ans[0].bth.psn == 1);
    CHECK(ans[1].aeth.syndrome == syn::ACK_NO_CREDIT_LIMIT);
    CHECK(std::memcmp(r.host(dst), r.host(src), 1000) == 0);
    CHECK(r.cqes(kCqB) == 1);
    CHECK(r.cqes(kCqA) == 1);
    CHECK(r.tr.snapshot().retransmits == 3);
}

TEST_CASE("a duplicate SEND and a duplicate WRITE are acknowledged again, not carried out again") {
    pair_rig r(kMtu256);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096), remote = r.alloc(4096);
    r.fill(src, 300, 2);
    r.post_recv(kB, dst, 512);
    r.post_recv(kB, dst + 512, 512);
    r.send(kA, src, 300);
    r.post_rdma(kA, hw::wqe_opcode::RDMA_WRITE, remote, 300, src);
    REQUIRE(r.cqes(kCqB) == 1);
    std::memset(r.host(remote), 0xee, 300);  // a second write would show
    const auto req = r.to(kB);
    REQUIRE(req.size() == 4);
    const std::size_t acks_before = r.to(kA).size();
    const std::uint64_t coalesced_before = r.tr.snapshot().acks_coalesced;
    for (wire::packet p : req) r.engine->receive(p);  // the four in one batch
    r.run_wire();
    CHECK(r.counted.duplicate_request == 4);
    CHECK(r.cqes(kCqB) == 1);                           // no second receive
    CHECK(r.t.qps.at(kB).rq_consumer == 1);             // no second receive WQE taken
    CHECK(r.host(remote)[0] == std::byte{0xee});        // no second write
    // The two Lasts asked for an ACK each; in one batch they coalesce into one, which
    // acknowledges both (IBA 9.7.5.1.1).
    CHECK(r.to(kA).size() == acks_before + 1);
    CHECK(r.tr.snapshot().acks_coalesced == coalesced_before + 1);
    CHECK(r.to(kA).back().bth.psn == 3);                // up to the expected PSN - 1
    CHECK(r.cqes(kCqA) == 2);
}

TEST_CASE("a duplicate RDMA READ is read again; a duplicate atomic is answered from the saved result") {
    pair_rig r(kMtu256);
    const std::uint64_t remote = r.alloc(4096), local = r.alloc(4096), target = r.alloc(4096);
    r.fill(remote, 600, 4);
    r.post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 600, local);
    r.put<std::uint64_t>(target, 40);
    hw::wqe_raddr_seg ra{};
    hw::set_raddr_seg(ra, target, engine_rig::kKey);
    hw::wqe_atomic_seg as{};
    hw::set_atomic_seg(as, 2, 0);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 8, engine_rig::kKey, local + 1024);
    r.post_send(kA, hw::wqe_opcode::ATOMIC_FA, true, ra, as, d);
    CHECK(r.get<std::uint64_t>(target) == 42);
    REQUIRE(r.cqes(kCqA) == 2);

    r.fill(remote, 600, 77);  // the READ again must read memory again
    const auto req = r.to(kB);
    REQUIRE(req.size() == 2);
    const std::size_t before = r.to(kA).size();
    for (wire::packet p : req) r.engine->receive(p);
    CHECK(r.counted.duplicate_request == 2);
    CHECK(r.get<std::uint64_t>(target) == 42);  // added once only
    CHECK(r.counted.rx_atomic_requests == 1);
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == before + 4);  // 3 READ responses and the Atomic ACK again
    CHECK(oper(ans[before]) == op::RDMA_READ_RESPONSE_FIRST);
    CHECK(ans[before].bth.psn == 0);
    CHECK(std::to_integer<std::uint8_t>(ans[before].payload[0]) == 77);
    CHECK(oper(ans[before + 3]) == op::ATOMIC_ACKNOWLEDGE);
    CHECK(ans[before + 3].atomic_ack == 40);
    r.run_wire();
    CHECK(r.cqes(kCqA) == 2);  // the requester ignores answers to completed requests
}

TEST_CASE("an RNR NAK, then the RNR timer, then the SEND again succeeds") {
    pair_rig r(kMtu256);
    hw::ifc::set<hw::ifc::qpc::min_rnr_nak>(r.t.qps.at(kB).qpc.data(), 1);  // 10 us
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 700, 6);
    r.send(kA, src, 700);
    CHECK(r.counted.out_of_buffer == 1);
    CHECK(r.t.qps.at(kA).x.rnr_wait);
    CHECK(r.cqes(kCqA) == 0);
    const auto nak = r.to(kA);
    REQUIRE(nak.size() == 1);
    CHECK(nak[0].aeth.syndrome == (syn::RNR_NAK | 1));
    CHECK(nak[0].bth.psn == 0);
    CHECK(r.counted.out_of_sequence == 2);  // the Middle and Last after it, dropped in silence
    r.post_recv(kB, dst, 1024);
    CHECK(r.engine->tick(std::chrono::steady_clock::now() + std::chrono::milliseconds(1)));
    r.run_wire();
    CHECK(std::memcmp(r.host(dst), r.host(src), 700) == 0);
    CHECK(r.cqes(kCqB) == 1);
    REQUIRE(r.cqes(kCqA) == 1);
    CHECK(opcode(r.cqe(kCqA, 0)) == hw::cqe_opcode::REQ);
}

TEST_CASE("an ACK timeout sends every unacknowledged packet again, and the retry budget ends in an error") {
    pair_rig r(kMtu256);
    r.set_path(kA, kMtu256, 1, 2);  // two retries
    const std::uint64_t src = r.alloc(4096);
    r.auto_run = false;
    r.send(kA, src, 600);
    CHECK(r.wire.size() == 3);
    r.wire.clear();  // lost
    const auto later = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(1); };
    CHECK(r.engine->tick(later()));
    CHECK(r.wire.size() == 3);
    r.wire.clear();
    CHECK(r.engine->tick(later()));
    r.wire.clear();
    CHECK(r.engine->tick(later()));
    CHECK(r.wire.empty());  // the budget is spent: nothing more is sent
    CHECK(r.counted.local_ack_timeout_err == 2);
    CHECK(r.tr.snapshot().retransmits == 6);
    REQUIRE(r.cqes(kCqA) == 1);
    const hw::cqe64 c = r.cqe(kCqA, 0);
    CHECK(opcode(c) == hw::cqe_opcode::REQ_ERR);
    CHECK(reinterpret_cast<const hw::err_cqe64&>(c).syndrome ==
          static_cast<std::uint8_t>(hw::cqe_syndrome::TRANSPORT_RETRY_EXC_ERR));
    CHECK(r.t.qps.at(kA).state == qp_state::ERR);
}

TEST_CASE("UC: a message that lost its middle packet never completes; the next one is delivered") {
    pair_rig r(kMtu256, transport::uc);
    const std::uint64_t src = r.alloc(4096), src2 = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 700, 1);
    r.fill(src2, 100, 50);
    r.post_recv(kB, dst, 1024);
    r.auto_run = false;
    r.send(kA, src, 700);
    r.send(kA, src2, 100);
    r.run_lossy([](const wire::packet& p) { return p.bth.psn == 1; });
    const auto req = r.to(kB);
    REQUIRE(req.size() == 4);
    CHECK(req[0].bth.opcode == (op::UC | op::SEND_FIRST));
    CHECK(req[3].bth.opcode == (op::UC | op::SEND_ONLY));
    CHECK(!req[2].bth.ack_req);
    CHECK(r.to(kA).empty());  // UC sends no ACKs
    REQUIRE(r.cqes(kCqB) == 1);
    CHECK(r.cqe(kCqB, 0).byte_cnt.value() == 100);
    CHECK(std::memcmp(r.host(dst), r.host(src2), 100) == 0);
    CHECK(r.cqes(kCqA) == 2);  // UC requests complete as they are sent
}


TEST_CASE("a READ response lost in the middle: the requester asks again from it, address and length moved on") {
    pair_rig r(kMtu256);
    const std::uint64_t remote = r.alloc(4096), local = r.alloc(4096);
    r.fill(remote, 1000, 8);
    r.auto_run = false;
    r.post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 1000, local);
    bool dropped = false;
    r.run_lossy([&](const wire::packet& p) {
        if (p.bth.dest_qp == kA && p.bth.psn == 1 && !dropped) return dropped = true;
        return false;
    });
    const auto req = r.to(kB);
    REQUIRE(req.size() == 2);
    CHECK(oper(req[1]) == op::RDMA_READ_REQUEST);
    CHECK(req[1].bth.psn == 1);
    CHECK(req[1].reth.va == remote + 256);
    CHECK(req[1].reth.dma_length == 1000 - 256);
    CHECK(r.counted.duplicate_request == 1);  // the responder saw PSN 1 behind its expected PSN
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 4 + 3);
    CHECK(oper(ans[4]) == op::RDMA_READ_RESPONSE_FIRST);  // the answer to the new request
    CHECK(ans[4].bth.psn == 1);
    CHECK(std::memcmp(r.host(local), r.host(remote), 1000) == 0);
    REQUIRE(r.cqes(kCqA) == 1);
    CHECK(opcode(r.cqe(kCqA, 0)) == hw::cqe_opcode::REQ);
    CHECK(r.cqe(kCqA, 0).byte_cnt.value() == 1000);
}

TEST_CASE("PSNs wrap at 2^24 within a message") {
    pair_rig r(kMtu256);
    r.t.qps.at(kA).x.next_psn = 0xfffffe;
    r.t.qps.at(kB).x.epsn = 0xfffffe;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.fill(src, 1000, 2);
    r.post_recv(kB, dst, 1024);
    r.send(kA, src, 1000);
    const auto req = r.to(kB);
    REQUIRE(req.size() == 4);
    const std::uint32_t psns[] = {0xfffffe, 0xffffff, 0, 1};
    for (std::size_t i = 0; i < 4; ++i) CHECK(req[i].bth.psn == psns[i]);
    CHECK(std::memcmp(r.host(dst), r.host(src), 1000) == 0);
    CHECK(r.cqes(kCqA) == 1);
    CHECK(r.t.qps.at(kB).x.epsn == 2);
}

TEST_CASE("the responder refuses a Middle without a First and a First shorter than the MTU: NAK Invalid Request") {
    for (const bool short_first : {false, true}) {
        CAPTURE(short_first);
        pair_rig r(kMtu256);
        const std::uint64_t dst = r.alloc(4096);
        r.post_recv(kB, dst, 1024);
        wire::packet p;
        p.bth.opcode = op::RC | (short_first ? op::SEND_FIRST : op::SEND_MIDDLE);
        p.bth.dest_qp = kB;
        p.bth.psn = 0;
        p.payload.resize(short_first ? 100 : 256);
        r.engine->receive(p);
        const auto ans = r.to(kA);
        REQUIRE(ans.size() == 1);
        CHECK(ans[0].aeth.syndrome == syn::NAK_INVALID_REQUEST);
        CHECK(ans[0].bth.psn == 0);
        CHECK(r.t.qps.at(kB).state == qp_state::ERR);
        REQUIRE(!r.events.empty());
        CHECK(r.events[0].type == hw::event_type::WQ_INVAL_REQ_ERROR);
    }
}

TEST_CASE("RoCE: RC packets go over IPv4 to the path's GID, from the port's address or SET_ROCE_ADDRESS's") {
    device_config cfg;
    cfg.port = port_type::ETHERNET;
    for (const bool programmed : {false, true}) {
        CAPTURE(programmed);
        engine_rig r(cfg);
        r.add_cq(kCqA, 4);
        r.add_cq(kCqB, 4);
        r.add_rc_qp(kA, kB, kCqA);
        r.add_rc_qp(kB, kA, kCqB);
        std::byte* path = hw::ifc::at<hw::ifc::qpc::primary_address_path>(r.t.qps.at(kA).qpc.data());
        const std::uint8_t dgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 7, 9};
        for (std::size_t i = 0; i < 16; ++i) hw::ifc::set<hw::ifc::ads::rgid_rip>(path, i, dgid[i]);
        hw::ifc::set<hw::ifc::ads::src_addr_index>(path, 3);
        hw::ifc::set<hw::ifc::ads::hop_limit>(path, 5);
        hw::ifc::set<hw::ifc::ads::tclass>(path, 0x68);
        if (programmed) {
            roce_address a;
            a.source_l3_address = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 3, 3};
            r.t.roce_addresses[3] = a;
        }
        r.auto_run = false;
        const std::uint64_t src = r.alloc(4096);
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, 10, engine_rig::kKey, src);
        r.post_send(kA, hw::wqe_opcode::SEND, true, d);
        REQUIRE(r.sent.size() == 1);
        const wire::route& n = r.sent[0].net;
        CHECK(n.link == wire::link_kind::roce_v4);
        CHECK(n.dgid == std::array<std::uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 7, 9});
        CHECK(n.sgid[15] == (programmed ? 3 : cfg.ipv4[3]));
        CHECK(n.sgid[14] == (programmed ? 3 : cfg.ipv4[2]));
        CHECK(n.hop_limit == 5);
        CHECK(n.traffic_class == 0x68);
        CHECK(n.src_mac == cfg.mac);
    }
}

TEST_CASE("RoCE: a force-loopback path (fl) sends to the function's own GID and MAC, whatever its remote GID") {
    device_config cfg;
    cfg.port = port_type::ETHERNET;
    engine_rig r(cfg);
    r.add_cq(kCqA, 4);
    r.add_cq(kCqB, 4);
    r.add_rc_qp(kA, kB, kCqA);
    r.add_rc_qp(kB, kA, kCqB);
    std::byte* path = hw::ifc::at<hw::ifc::qpc::primary_address_path>(r.t.qps.at(kA).qpc.data());
    hw::ifc::set<hw::ifc::ads::fl>(path, 1);  // rgid_rip left zero, as Linux's vfio/mlx5 leaves it
    r.auto_run = false;
    const std::uint64_t src = r.alloc(4096);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 10, engine_rig::kKey, src);
    r.post_send(kA, hw::wqe_opcode::SEND, true, d);
    REQUIRE(r.sent.size() == 1);
    const wire::route& n = r.sent[0].net;
    CHECK(n.link == wire::link_kind::roce_v4);
    CHECK(n.dgid == n.sgid);
    CHECK(n.dgid[15] == cfg.ipv4[3]);
    CHECK(n.dst_mac == cfg.mac);
    CHECK(n.src_mac == cfg.mac);
}

TEST_CASE("UD: one SEND Only with a DETH (the QP's Q_Key when the AV's high bit is set); a wrong Q_Key is dropped") {
    engine_rig r;
    r.add_cq(kCqA, 4);
    r.add_cq(kCqB, 4);
    r.add_rc_qp(kA, 0, kCqA, transport::ud);
    r.add_rc_qp(kB, 0, kCqB, transport::ud);
    hw::ifc::set<hw::ifc::qpc::q_key>(r.t.qps.at(kA).qpc.data(), 0x1234);
    hw::ifc::set<hw::ifc::qpc::q_key>(r.t.qps.at(kB).qpc.data(), 0x1234);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    for (std::size_t i = 0; i < 100; ++i) r.host(src)[i] = std::byte(i);
    r.post_recv(kB, dst, 1024);
    hw::wqe_av av{};
    av.qkey = hw::be32::from(0x80000000u);  // the QP's own
    av.dqp_dct = hw::be32::from(kB);
    av.rlid = hw::be16::from(1);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 100, engine_rig::kKey, src);
    r.auto_run = false;
    r.post_send(kA, hw::wqe_opcode::SEND, true, av, d);
    REQUIRE(r.sent.size() == 1);
    wire::packet p = r.sent[0];
    CHECK(p.bth.opcode == (op::UD | op::SEND_ONLY));
    CHECK(p.deth.q_key == 0x1234);
    CHECK(p.deth.src_qp == kA);
    CHECK(p.bth.dest_qp == kB);
    CHECK(p.net.dlid == 1);
    CHECK(!p.net.grh);
    CHECK(r.t.cqs.at(kCqA).producer == 1);  // UD completes as sent

    wire::packet wrong = p;
    wrong.deth.q_key = 0x9999;
    r.engine->receive(wrong);
    CHECK(r.t.cqs.at(kCqB).producer == 0);
    CHECK(r.t.qps.at(kB).rq_consumer == 0);
    r.run_wire();
    REQUIRE(r.t.cqs.at(kCqB).producer == 1);
    const hw::cqe64 c = r.cqe(kCqB, 0);
    CHECK(opcode(c) == hw::cqe_opcode::RESP_SEND);
    CHECK(c.byte_cnt.value() == 40 + 100);  // the GRH area counts, unwritten without a GRH
    CHECK((c.flags_rqpn.value() & 0xffffff) == kA);
    CHECK((c.flags_rqpn.value() & (1u << 28)) == 0);
    CHECK(std::memcmp(r.host(dst + 40), r.host(src), 100) == 0);
}

TEST_CASE("QP1: the wire's destination QP 1 reaches the GSI QP, whose sends carry source QP 1") {
    constexpr std::uint32_t kGsi = 0x345;  // the number CREATE_QP gave it
    engine_rig r;
    r.add_cq(kCqA, 4);
    r.add_cq(kCqB, 4);
    r.add_rc_qp(kA, 0, kCqA, transport::ud);
    qp_object& gsi = r.add_rc_qp(kGsi, 0, kCqB, transport::ud);
    hw::ifc::set<hw::ifc::qpc::st>(gsi.qpc.data(), hw::ifc::qpc_values::st_qp1);
    hw::ifc::set<hw::ifc::qpc::q_key>(gsi.qpc.data(), 0x80010000u);  // IBA's GSI Q_Key
    hw::ifc::set<hw::ifc::qpc::q_key>(r.t.qps.at(kA).qpc.data(), 0x80010000u);
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096), back = r.alloc(4096);
    for (std::size_t i = 0; i < 256; ++i) r.host(src)[i] = std::byte(i);
    hw::wqe_av av{};
    av.qkey = hw::be32::from(0x80010000u);
    av.dqp_dct = hw::be32::from(1);
    av.rlid = hw::be16::from(1);
    hw::wqe_data_seg d{};
    hw::set_data_seg(d, 256, engine_rig::kKey, src);
    r.auto_run = false;

    // No QP1 yet: a MAD to QP 1 is dropped.
    r.post_recv(kGsi, dst, 1024);
    r.post_send(kA, hw::wqe_opcode::SEND, true, av, d);
    REQUIRE(r.sent.size() == 1);
    CHECK(r.sent[0].bth.dest_qp == 1);
    r.run_wire();
    CHECK(r.t.cqs.at(kCqB).producer == 0);

    // With QP1 bound (CREATE_QP does it for the first QP of st QP1): delivered, with
    // the sender's QPN and the packet's P_Key in the CQE.
    r.t.special_qpn[1] = kGsi;
    r.post_send(kA, hw::wqe_opcode::SEND, true, av, d);
    REQUIRE(r.sent.size() == 2);
    const std::uint16_t pkey = r.sent[1].bth.pkey;
    r.run_wire();
    REQUIRE(r.t.cqs.at(kCqB).producer == 1);
    const hw::cqe64 c = r.cqe(kCqB, 0);
    CHECK(opcode(c) == hw::cqe_opcode::RESP_SEND);
    CHECK((c.flags_rqpn.value() & 0xffffff) == kA);
    CHECK((c.imm_inval_pkey.value() & 0xffff) == pkey);
    CHECK(std::memcmp(r.host(dst + 40), r.host(src), 256) == 0);

    // QP1's answer goes out from source QP 1, not from its own number.
    r.post_recv(kA, back, 1024);
    av.dqp_dct = hw::be32::from(kA);
    r.post_send(kGsi, hw::wqe_opcode::SEND, true, av, d);
    REQUIRE(r.sent.size() == 3);
    CHECK(r.sent[2].deth.src_qp == 1);
    r.run_wire();
    REQUIRE(r.t.cqs.at(kCqA).producer >= 1);
    CHECK((r.cqe(kCqA, r.t.cqs.at(kCqA).producer - 1).flags_rqpn.value() & 0xffffff) == 1);
}

TEST_CASE("a UMR QP executes NOPs; a UMR WQE too short for its segments completes in error, and nothing reaches the wire") {
    engine_rig r;
    r.add_cq(kCqA, 4);
    qp_object& umr = r.add_rc_qp(kA, 0, kCqA);
    hw::ifc::set<hw::ifc::qpc::st>(umr.qpc.data(), hw::ifc::qpc_values::st_reg_umr);
    r.post_send(kA, hw::wqe_opcode::NOP, true);
    REQUIRE(r.t.cqs.at(kCqA).producer == 1);
    CHECK(opcode(r.cqe(kCqA, 0)) == hw::cqe_opcode::REQ);
    hw::wqe_data_seg d{};  // no UMR control and context segments (umr_test has those)
    hw::set_data_seg(d, 0, engine_rig::kKey, r.alloc(4096));
    r.post_send(kA, hw::wqe_opcode::UMR, true, d);
    REQUIRE(r.t.cqs.at(kCqA).producer == 2);
    const hw::cqe64 c = r.cqe(kCqA, 1);
    CHECK(opcode(c) == hw::cqe_opcode::REQ_ERR);
    CHECK(reinterpret_cast<const hw::err_cqe64&>(c).syndrome == static_cast<std::uint8_t>(hw::cqe_syndrome::LOCAL_QP_OP_ERR));
    CHECK(r.t.qps.at(kA).state == qp_state::SQER);  // as any QP but RC after a local error (IBA 10.3.1)
    CHECK(r.sent.empty());
}

}  // namespace
}  // namespace cxv::sim::testing
