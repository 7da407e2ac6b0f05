// A QP leaving its CQ while another thread polls the CQ (what cxv::qp's destructor does):
// queues::qp_table::detach on one thread, completion_queue::poll on another, on plain
// memory. The poller keeps taking completions of every QP; those of a QP it has seen
// detached (a destroyed QP's) are taken and not reported, as rdma-core's CQs hold none of
// a destroyed QP (ibv_poll_cq never names it after ibv_destroy_qp). The destroyer
// detaches the QPs one by one and drops its own reference to their rings, which the table
// frees once the poller has let go. Run under TSan (tools/test) and ASan: a poller still
// using rings that were freed is a report there.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "api/verbs_post.h"
#include "hw/cqe.h"
#include "hw/endian.h"
#include "hw/opcodes.h"
#include "queues/completion_queue.h"

using namespace cxv;

namespace {

constexpr unsigned kQps = 8;
constexpr unsigned kLogBbs = 4;  // 16 BBs per send ring
constexpr unsigned kLogCqes = 6;

// A QP's send ring and what its retire() touches, on the heap as cxv::qp keeps them.
struct rings {
    alignas(64) std::array<std::byte, (1u << kLogBbs) * 64> bbs{};
    std::array<std::uint64_t, 1u << kLogBbs> wr_ids{};
    std::array<std::uint32_t, 1u << kLogBbs> ends{};
    hw::wq_doorbell_record dbrec{};
    alignas(64) std::array<std::byte, 512> bf{};
    queues::send_queue sq;
    explicit rings(std::uint32_t qpn)
        : sq(bbs.data(), kLogBbs, qpn, false, wr_ids.data(), ends.data(), &dbrec, bf.data(), 256,
             queues::doorbell_mode::doorbell, 1) {
        for (unsigned i = 0; i < wr_ids.size(); ++i) wr_ids[i] = wr_id_of(qpn, i);
    }
    static std::uint64_t wr_id_of(std::uint32_t qpn, unsigned slot) { return (std::uint64_t{qpn} << 8) | slot | 0x10000000000; }
};

std::uint32_t qpn_of(unsigned i) { return 0x100 + i; }

// A CQ on plain memory and the QPs it serves. The poller writes the CQEs itself (as the
// device would) just before it polls them.
struct cq_rig {
    alignas(64) std::array<hw::cqe64, 1u << kLogCqes> cqes{};
    hw::cq_doorbell_record dbrec{};
    queues::completion_queue cq;
    queues::qp_table table;
    std::uint32_t pi = 0;  // CQEs written
    std::array<std::shared_ptr<rings>, kQps> qps;
    std::array<std::weak_ptr<rings>, kQps> watch;

    cq_rig() : cq(reinterpret_cast<std::byte*>(cqes.data()), kLogCqes, &dbrec) {
        for (auto& c : cqes) c.op_own = static_cast<std::uint8_t>(static_cast<unsigned>(hw::cqe_opcode::INVALID) << 4) | 1;
        table.init(kQps);
        for (unsigned i = 0; i < kQps; ++i) {
            qps[i] = std::make_shared<rings>(qpn_of(i));
            watch[i] = qps[i];
            REQUIRE(table.attach(cq, {qpn_of(i), &qps[i]->sq, nullptr, nullptr, nullptr}));
        }
    }
    // A good send completion of QP `i` for the WQE at BB `counter`.
    void complete(unsigned i, unsigned counter) {
        auto& c = cqes[pi & ((1u << kLogCqes) - 1)];
        c.sop_drop_qpn = hw::be32::from((std::uint32_t{static_cast<std::uint8_t>(hw::wqe_opcode::SEND)} << 24) | qpn_of(i));
        c.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(counter));
        c.byte_cnt = hw::be32::from(64);
        const unsigned owner = (pi >> kLogCqes) & 1;
        c.op_own = static_cast<std::uint8_t>((static_cast<unsigned>(hw::cqe_opcode::REQ) << 4) | owner);
        ++pi;
    }
    // Whether a completion of QP `i` for `counter` is what it must be: its WQE's wr_id
    // (a completion of a QP the poller has seen detached does not come at all).
    static bool plausible(const ibv_wc& wc, unsigned i, unsigned counter) {
        const std::uint64_t want = rings::wr_id_of(qpn_of(i), counter & ((1u << kLogBbs) - 1));
        return wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.qp_num == qpn_of(i) && wc.wr_id == want;
    }
};

}  // namespace

TEST_CASE("detach: the poller lets go at its next poll, then the rings are freed") {
    cq_rig r;
    ibv_wc wc[4];
    r.complete(3, 5);
    REQUIRE(api::poll_cq(r.cq, 4, wc) == 1);
    CHECK(wc[0].wr_id == rings::wr_id_of(qpn_of(3), 5));  // the poller now caches QP 3's rings

    r.table.detach(r.cq, qpn_of(3), std::move(r.qps[3]));
    CHECK(r.table.held() == 1);
    CHECK_FALSE(r.watch[3].expired());  // the poller has not polled since: still held
    r.table.detach(r.cq, 0xdead, nullptr);  // (a reclaim pass)
    CHECK_FALSE(r.watch[3].expired());

    r.complete(3, 6);
    r.complete(2, 7);
    REQUIRE(api::poll_cq(r.cq, 4, wc) == 1);  // a detached QP's completion: taken, not reported
    CHECK(wc[0].wr_id == rings::wr_id_of(qpn_of(2), 7));
    CHECK(r.cq.consumer_index() == r.pi);  // both taken
    r.table.detach(r.cq, 0xdead, nullptr);
    CHECK(r.table.held() == 0);
    CHECK(r.watch[3].expired());
}

TEST_CASE("detach from one thread while another polls the CQ") {
    cq_rig r;
    std::atomic<bool> destroyed{false};
    std::atomic<unsigned> bad{0};
    std::atomic<std::uint64_t> polled{0};

    std::thread poller([&] {
        ibv_wc wc[4];
        unsigned round = 0;
        // Until every QP is gone, and a few batches more.
        for (unsigned after = 0; after < 64; ++round) {
            if (destroyed.load(std::memory_order_acquire)) ++after;
            unsigned who[4], counter[4];
            for (unsigned k = 0; k < 4; ++k) {
                who[k] = (round * 3 + k) % kQps;
                counter[k] = round + k;
                r.complete(who[k], counter[k]);
            }
            // Every entry taken; those reported in order, each the one of its QP.
            const int n = api::poll_cq(r.cq, 4, wc);
            if (n < 0 || n > 4 || r.cq.consumer_index() != r.pi) {
                bad.fetch_add(1);
                return;
            }
            unsigned k = 0;
            for (int j = 0; j < n; ++j, ++k) {
                while (k < 4 && wc[j].qp_num != qpn_of(who[k])) ++k;
                if (k == 4 || !cq_rig::plausible(wc[j], who[k], counter[k])) bad.fetch_add(1);
            }
            polled.fetch_add(4, std::memory_order_relaxed);
        }
    });
    std::thread destroyer([&] {
        for (unsigned i = 0; i < kQps; ++i) {
            const std::uint64_t seen = polled.load(std::memory_order_relaxed);
            while (polled.load(std::memory_order_relaxed) < seen + 64) std::this_thread::yield();
            r.table.detach(r.cq, qpn_of(i), std::move(r.qps[i]));
        }
        destroyed.store(true, std::memory_order_release);
    });
    destroyer.join();
    poller.join();

    CHECK(bad.load() == 0);
    // The poller has polled since the last detach: a reclaim pass frees every ring.
    r.table.detach(r.cq, 0xdead, nullptr);
    CHECK(r.table.held() == 0);
    for (const auto& w : r.watch) CHECK(w.expired());
}
