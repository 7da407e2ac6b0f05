// Coalesced acknowledge messages and implied NAKs (IBA 9.7.5.1.1 "Coalesced acknowledge
// messages", 9.7.5.1.3): the responder answers the requests of one batch from the wire
// with one ACK for the latest PSN and MSN, never letting a later answer overtake the ACK
// it owes; the requester takes an answer beyond a READ whose responses are missing as a
// NAK and asks again at once, without waiting for the ACK timeout.
#include <doctest/doctest.h>

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
constexpr unsigned kMtu256 = 1;

struct pair_rig : engine_rig {
    pair_rig() {
        add_cq(kCqA, 6);
        add_cq(kCqB, 6);
        add_rc_qp(kA, kB, kCqA);
        add_rc_qp(kB, kA, kCqB);
        set_path(kA, kMtu256, 10);  // ACK timeout 4.096 us * 2^10: ~4 ms
        set_path(kB, kMtu256, 10);
        auto_run = false;           // the tests choose the batches
    }
    void fill(std::uint64_t iova, std::size_t n, std::uint8_t seed) {
        for (std::size_t i = 0; i < n; ++i) host(iova)[i] = std::byte(seed + i * 7);
    }
    void send(std::uint64_t src, std::uint32_t len) {
        hw::wqe_data_seg d{};
        hw::set_data_seg(d, len, kKey, src);
        post_send(kA, hw::wqe_opcode::SEND, true, d);
    }
    std::vector<wire::packet> to(std::uint32_t qpn) const {
        std::vector<wire::packet> out;
        for (const auto& p : sent) {
            if (p.bth.dest_qp == qpn) out.push_back(p);
        }
        return out;
    }
    // Delivers what is on the wire in batches (each followed by end_of_batch()), dropping
    // what `drop` says to.
    template <typename Drop>
    void run_lossy(Drop drop) {
        while (!wire.empty()) {
            for (std::size_t k = wire.size(); k > 0; --k) {
                wire::packet p = std::move(wire.front());
                wire.pop_front();
                if (!drop(p)) engine->receive(p);
            }
            engine->end_of_batch();
        }
    }
    std::uint32_t cqes(std::uint32_t cqn) const { return t.cqs.at(cqn).producer; }
};

std::uint8_t oper(const wire::packet& p) { return op::operation_of(p.bth.opcode); }

TEST_CASE("a burst of SENDs in one batch gets one ACK with the last PSN and the MSN of all") {
    constexpr std::uint32_t kN = 8;
    pair_rig r;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    for (std::uint32_t i = 0; i < kN; ++i) {
        r.fill(src + 64 * i, 16, static_cast<std::uint8_t>(i));
        r.post_recv(kB, dst + 64 * i, 64);
        r.send(src + 64 * i, 16);
    }
    REQUIRE(r.wire.size() == kN);  // the requests, all on the wire before any answer
    r.run_wire();                  // one batch of requests, then one of answers
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 1);
    CHECK(oper(ans[0]) == op::ACKNOWLEDGE);
    CHECK(ans[0].aeth.syndrome == syn::ACK_NO_CREDIT_LIMIT);
    CHECK(ans[0].bth.psn == kN - 1);
    CHECK(ans[0].aeth.msn == kN);
    CHECK(r.tr.snapshot().acks_coalesced == kN - 1);
    CHECK(r.cqes(kCqB) == kN);
    REQUIRE(r.cqes(kCqA) == kN);  // the one ACK completes every SEND, in order
    for (std::uint32_t i = 0; i < kN; ++i) {
        CHECK(r.cqe(kCqA, i).wqe_counter.value() == i);
        CHECK(std::memcmp(r.host(dst + 64 * i), r.host(src + 64 * i), 16) == 0);
    }
    CHECK(r.t.qps.at(kA).x.outstanding.empty());
    CHECK(r.tr.snapshot().retransmits == 0);
}

TEST_CASE("each batch of one SEND gets its own ACK: an ACK is never held past its batch") {
    pair_rig r;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    for (std::uint32_t i = 0; i < 3; ++i) {
        r.post_recv(kB, dst + 64 * i, 64);
        r.send(src, 16);
        r.run_wire();
        const auto ans = r.to(kA);
        REQUIRE(ans.size() == i + 1);
        CHECK(ans.back().bth.psn == i);
        CHECK(ans.back().aeth.msn == i + 1);
        CHECK(r.cqes(kCqA) == i + 1);
    }
    CHECK(r.tr.snapshot().acks_coalesced == 0);
}

TEST_CASE("the ACK owed goes before a READ response with a later PSN; the one after, at the batch's end") {
    pair_rig r;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096), remote = r.alloc(4096), local = r.alloc(4096);
    r.fill(remote, 600, 9);
    for (std::uint32_t i = 0; i < 3; ++i) r.post_recv(kB, dst + 64 * i, 64);
    r.send(src, 16);                                                     // PSN 0
    r.send(src, 16);                                                     // PSN 1
    r.post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 600, local);      // PSNs 2-4
    r.send(src, 16);                                                     // PSN 5
    REQUIRE(r.wire.size() == 4);
    r.run_wire();
    const auto ans = r.to(kA);
    REQUIRE(ans.size() == 5);
    CHECK(oper(ans[0]) == op::ACKNOWLEDGE);  // the two SENDs', coalesced, first
    CHECK(ans[0].bth.psn == 1);
    CHECK(ans[0].aeth.msn == 2);
    CHECK(oper(ans[1]) == op::RDMA_READ_RESPONSE_FIRST);
    CHECK(oper(ans[2]) == op::RDMA_READ_RESPONSE_MIDDLE);
    CHECK(oper(ans[3]) == op::RDMA_READ_RESPONSE_LAST);
    for (std::uint32_t k = 1; k < 4; ++k) CHECK(ans[k].bth.psn == k + 1);
    CHECK(oper(ans[4]) == op::ACKNOWLEDGE);  // the last SEND's, at the end of the batch
    CHECK(ans[4].bth.psn == 5);
    CHECK(ans[4].aeth.msn == 4);
    CHECK(r.tr.snapshot().acks_coalesced == 1);
    REQUIRE(r.cqes(kCqA) == 4);
    CHECK(r.cqe(kCqA, 2).byte_cnt.value() == 600);
    CHECK(std::memcmp(r.host(local), r.host(remote), 600) == 0);
    CHECK(r.tr.snapshot().retransmits == 0);
    CHECK(r.counted.implied_nak_seq_err == 0);
}

TEST_CASE("a NAK goes after the ACK owed for the requests before it") {
    pair_rig r;
    const std::uint64_t src = r.alloc(4096), dst = r.alloc(4096);
    r.post_recv(kB, dst, 64);  // one receive WQE for two SENDs: the second draws an RNR NAK
    r.send(src, 16);
    r.send(src, 16);
    r.run_lossy([](const wire::packet&) { return false; });
    const auto ans = r.to(kA);
    REQUIRE(ans.size() >= 2);
    CHECK(oper(ans[0]) == op::ACKNOWLEDGE);
    CHECK(ans[0].aeth.syndrome == syn::ACK_NO_CREDIT_LIMIT);
    CHECK(ans[0].bth.psn == 0);
    CHECK(syn::kind(ans[1].aeth.syndrome) == syn::RNR_NAK);
    CHECK(ans[1].bth.psn == 1);
    CHECK(r.cqes(kCqA) == 1);  // the first SEND completed; the second waits for the RNR timer
}

// A 600-byte READ at MTU 256 (PSNs 0-2, three responses), then a SEND (PSN 3).
struct read_then_send : pair_rig {
    std::uint64_t remote = alloc(4096), local = alloc(4096), src = alloc(4096), dst = alloc(4096);
    read_then_send() {
        fill(remote, 600, 21);
        post_recv(kB, dst, 64);
        post_rdma(kA, hw::wqe_opcode::RDMA_READ, remote, 600, local);
        send(src, 16);
    }
    // Requests for the READ's data after the first one (asked again).
    std::vector<wire::packet> read_requests_again() const {
        std::vector<wire::packet> out;
        for (const auto& p : to(kB)) {
            if (oper(p) == op::RDMA_READ_REQUEST && p.bth.psn != 0) out.push_back(p);
        }
        return out;
    }
};

TEST_CASE("implied NAK: the ACK of a later SEND with the READ's last response lost asks again at once") {
    read_then_send r;
    bool dropped = false;
    r.run_lossy([&](const wire::packet& p) {
        if (oper(p) == op::RDMA_READ_RESPONSE_LAST && !dropped) return dropped = true;
        return false;
    });
    REQUIRE(dropped);
    CHECK(r.counted.implied_nak_seq_err == 1);
    const auto again = r.read_requests_again();
    REQUIRE(again.size() == 1);
    CHECK(again[0].bth.psn == 2);  // from the first missing response
    CHECK(again[0].reth.va == r.remote + 512);
    CHECK(again[0].reth.dma_length == 600 - 512);
    // No time passed: no timer fired, and nothing is left to do.
    CHECK(r.counted.local_ack_timeout_err == 0);
    r.engine->tick(std::chrono::steady_clock::now());
    CHECK(r.wire.empty());
    REQUIRE(r.cqes(kCqA) == 2);
    CHECK(r.cqe(kCqA, 0).byte_cnt.value() == 600);
    CHECK(std::memcmp(r.host(r.local), r.host(r.remote), 600) == 0);
    CHECK(r.t.qps.at(kA).x.outstanding.empty());
    CHECK(r.counted.local_ack_timeout_err == 0);
}

TEST_CASE("without an answer beyond the READ, its lost last response waits for the ACK timeout") {
    read_then_send r;
    bool dropped = false;
    r.run_lossy([&](const wire::packet& p) {
        // The last response and the SEND's ACK: nothing says the response was lost.
        if (oper(p) == op::RDMA_READ_RESPONSE_LAST && !dropped) return dropped = true;
        return oper(p) == op::ACKNOWLEDGE && p.bth.psn == 3;
    });
    CHECK(r.counted.implied_nak_seq_err == 0);
    CHECK(r.read_requests_again().empty());
    CHECK(r.cqes(kCqA) == 0);
    r.engine->tick(std::chrono::steady_clock::now() + std::chrono::seconds(1));
    CHECK(r.counted.local_ack_timeout_err == 1);
    r.run_lossy([](const wire::packet&) { return false; });
    CHECK(r.cqes(kCqA) == 2);
    CHECK(std::memcmp(r.host(r.local), r.host(r.remote), 600) == 0);
}

}  // namespace
}  // namespace cxv::sim::testing
