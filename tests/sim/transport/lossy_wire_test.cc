// Reliability end to end through the engine alone: a loopback wire that loses, duplicates
// and reorders 10 % of the packets (a fixed seed), a few hundred SENDs, WRITEs and READs
// of mixed sizes at MTU 256, and the ACK timeout driven by tick(). Every message must be
// carried out exactly once and in order, and every WQE must complete with success.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "tests/sim/transport/rig.h"

namespace cxv::sim::testing {
namespace {

constexpr std::uint32_t kA = 0x100, kB = 0x101;
constexpr std::uint32_t kCqA = 1, kCqB = 2;
constexpr std::uint32_t kMessages = 300, kWindow = 8, kSlots = 16, kSlot = 2048;

struct message {
    hw::wqe_opcode op;
    std::uint32_t len;
    std::uint8_t seed;
};

void pattern(std::byte* at, std::uint32_t n, std::uint8_t seed) {
    for (std::uint32_t i = 0; i < n; ++i) at[i] = std::byte(static_cast<std::uint8_t>(seed * 31 + i * 13 + (i >> 8)));
}

TEST_CASE("10 % loss, duplication and reordering: every message once, in order, every completion a success") {
    engine_rig r;
    r.add_cq(kCqA, 10);
    r.add_cq(kCqB, 10);
    r.add_rc_qp(kA, kB, kCqA);
    r.add_rc_qp(kB, kA, kCqB);
    r.set_path(kA, 1, 1);  // MTU 256, ACK timeout 8 us
    r.set_path(kB, 1, 1);
    r.auto_run = false;
    const std::uint64_t src = r.alloc(kSlots * kSlot), remote = r.alloc(kSlots * kSlot),
                        local = r.alloc(kSlots * kSlot), recv = r.alloc(kSlots * kSlot);
    std::mt19937 rng(20261124);
    std::vector<message> msgs;
    std::vector<std::uint32_t> sends;  // message numbers of the SENDs, in order
    for (std::uint32_t i = 0; i < kMessages; ++i) {
        const auto kind = rng() % 3;
        const hw::wqe_opcode op = kind == 0   ? hw::wqe_opcode::SEND
                                  : kind == 1 ? hw::wqe_opcode::RDMA_WRITE
                                              : hw::wqe_opcode::RDMA_READ;
        msgs.push_back({op, 1 + static_cast<std::uint32_t>(rng() % kSlot), static_cast<std::uint8_t>(i)});
        if (op == hw::wqe_opcode::SEND) sends.push_back(i);
    }
    std::uint32_t posted = 0, done = 0, recv_posted = 0, recv_done = 0;
    unsigned lost = 0, doubled = 0, moved = 0, ticks = 0;
    const auto slot = [](std::uint64_t base, std::uint32_t i) { return base + std::uint64_t{i % kSlots} * kSlot; };
    for (unsigned round = 0; done < kMessages && round < 2000000; ++round) {
        while (recv_posted - recv_done < kSlots) {
            r.post_recv(kB, slot(recv, recv_posted), kSlot);
            ++recv_posted;
        }
        while (posted < kMessages && posted - done < kWindow) {
            const message& m = msgs[posted];
            if (m.op == hw::wqe_opcode::RDMA_READ) {
                pattern(r.host(slot(remote, posted)), m.len, m.seed);
                r.post_rdma(kA, m.op, slot(remote, posted), m.len, slot(local, posted));
            } else {
                pattern(r.host(slot(src, posted)), m.len, m.seed);
                if (m.op == hw::wqe_opcode::SEND) {
                    hw::wqe_data_seg d{};
                    hw::set_data_seg(d, m.len, engine_rig::kKey, slot(src, posted));
                    r.post_send(kA, m.op, true, d);
                } else {
                    r.post_rdma(kA, m.op, slot(remote, posted), m.len, slot(src, posted));
                }
            }
            ++posted;
        }
        if (r.wire.empty() && r.engine->end_of_batch()) {
            // Each packet is a batch of its own here; the ACKs owed go out when the wire
            // is quiet, so several coalesce (IBA 9.7.5.1.1).
        } else if (r.wire.empty()) {
            r.engine->tick(std::chrono::steady_clock::now() + std::chrono::seconds(1));
            ++ticks;
        } else {
            wire::packet p = std::move(r.wire.front());
            r.wire.pop_front();
            const auto roll = rng() % 100;
            if (roll < 4) {
                ++lost;
            } else if (roll < 7) {
                ++doubled;
                wire::packet again = p;
                r.engine->receive(p);
                r.engine->receive(again);
            } else if (roll < 10 && !r.wire.empty()) {
                ++moved;
                r.wire.insert(r.wire.begin() + static_cast<std::ptrdiff_t>(1 + rng() % r.wire.size()), std::move(p));
            } else {
                r.engine->receive(p);
            }
        }
        // Completions: in order, each a success, each message's effect exactly as sent.
        while (done < r.t.cqs.at(kCqA).producer) {
            const hw::cqe64 c = r.cqe(kCqA, done);
            REQUIRE(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::REQ);
            REQUIRE(c.wqe_counter.value() == static_cast<std::uint16_t>(done));
            const message& m = msgs[done];
            std::vector<std::byte> want(m.len);
            pattern(want.data(), m.len, m.seed);
            if (m.op == hw::wqe_opcode::RDMA_WRITE) {
                REQUIRE(std::memcmp(r.host(slot(remote, done)), want.data(), m.len) == 0);
            } else if (m.op == hw::wqe_opcode::RDMA_READ) {
                REQUIRE(c.byte_cnt.value() == m.len);
                REQUIRE(std::memcmp(r.host(slot(local, done)), want.data(), m.len) == 0);
            }
            ++done;
        }
        while (recv_done < r.t.cqs.at(kCqB).producer) {
            const hw::cqe64 c = r.cqe(kCqB, recv_done);
            REQUIRE(hw::cqe_get_opcode(c.op_own) == hw::cqe_opcode::RESP_SEND);
            REQUIRE(recv_done < sends.size());
            const message& m = msgs[sends[recv_done]];
            REQUIRE(c.byte_cnt.value() == m.len);
            std::vector<std::byte> want(m.len);
            pattern(want.data(), m.len, m.seed);
            REQUIRE(std::memcmp(r.host(slot(recv, recv_done)), want.data(), m.len) == 0);
            ++recv_done;
        }
    }
    CHECK(done == kMessages);
    CHECK(recv_done == sends.size());  // each SEND received once
    CHECK(r.t.cqs.at(kCqB).producer == sends.size());
    CHECK(r.req_errors.empty());
    CHECK(r.resp_errors.empty());
    CHECK(r.t.qps.at(kA).state == qp_state::RTS);
    CHECK(r.t.qps.at(kB).state == qp_state::RTS);
    // The faults happened, and the protocol's answers to them too.
    CHECK(lost > 20);
    CHECK(doubled > 20);
    CHECK(moved > 20);
    const counters c = r.tr.snapshot();
    CHECK(c.retransmits > 0);
    CHECK(c.duplicates > 0);
    CHECK(r.counted.duplicate_request > 0);
    CHECK(r.counted.out_of_sequence > 0);
    MESSAGE("lost ", lost, " doubled ", doubled, " reordered ", moved, " ticks ", ticks, " retransmits ",
            c.retransmits, " naks ", c.naks_sent, " duplicates ", c.duplicates);
}

}  // namespace
}  // namespace cxv::sim::testing
