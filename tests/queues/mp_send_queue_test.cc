// The multi-producer send ring under contention: several threads post to one ring with
// no lock while a "device" thread walks the published WQEs in order (as a card does from
// the doorbell record) and retires them (as the poller does from CQEs). Every WQE must
// be seen exactly once, in the order of the ring, with each thread's WQEs in its own
// posting order, and the final doorbell record and doorbell must cover the last WQE.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "hw/wqe.h"
#include "queues/mp_send_queue.h"

using namespace cxv;
using namespace cxv::queues;

TEST_CASE("multi-producer send ring: 4 threads, no lock, in-order publication, exactly once") {
    constexpr unsigned kThreads = 4, kPerThread = 40000, kLogBbs = 8;
    alignas(64) static std::byte bbs[(1u << kLogBbs) * 64];
    hw::wq_doorbell_record dbrec{};
    alignas(8) std::byte doorbell[8] = {};
    mp_send_queue sq(bbs, kLogBbs, 0x4242, false, 2, &dbrec, doorbell);

    std::atomic<bool> stop{false};
    std::vector<std::uint32_t> next_seq(kThreads, 0);
    std::uint64_t seen = 0, nops = 0, errors = 0;
    std::thread device([&] {
        std::uint64_t c = 0;  // the device's BB counter
        for (;;) {
            const std::uint64_t p = sq.published();
            if (c == p) {
                if (stop.load(std::memory_order_acquire) && sq.published() == c) return;
                std::this_thread::yield();
                continue;
            }
            while (c < p) {
                const std::byte* w = bbs + (c & ((1u << kLogBbs) - 1)) * 64;
                const auto& ctrl = *reinterpret_cast<const hw::wqe_ctrl_seg*>(w);
                if (hw::ctrl_wqe_index(ctrl) != static_cast<std::uint16_t>(c) || hw::ctrl_qpn(ctrl) != 0x4242) ++errors;
                const unsigned nbb = (hw::ctrl_ds(ctrl) + 3) / 4;
                if (hw::ctrl_opcode(ctrl) == hw::wqe_opcode::NOP) {
                    ++nops;
                } else if (hw::ctrl_opcode(ctrl) == hw::wqe_opcode::SEND) {
                    std::uint32_t tag[2];  // inline data: thread, sequence
                    std::memcpy(tag, w + 16 + 4, sizeof tag);
                    if (tag[0] >= kThreads || tag[1] != next_seq[tag[0]]++) ++errors;
                    ++seen;
                    (void)sq.retire(static_cast<std::uint16_t>(c));
                } else {
                    ++errors;
                }
                c += nbb;
            }
        }
    });
    std::vector<std::thread> producers;
    std::atomic<std::uint64_t> full{0};
    for (unsigned t = 0; t < kThreads; ++t) {
        producers.emplace_back([&, t] {
            for (std::uint32_t i = 0; i < kPerThread;) {
                std::uint32_t tag[2] = {t, i};
                const sge s{reinterpret_cast<std::uintptr_t>(tag), sizeof tag, 0};
                if (sq.post({.opcode = hw::wqe_opcode::SEND, .signaled = true, .inline_data = true, .sg = &s,
                             .num_sge = 1, .wr_id = (std::uint64_t{t} << 32) | i})) {
                    ++i;
                } else {
                    full.fetch_add(1, std::memory_order_relaxed);  // the device catches up
                    std::this_thread::yield();
                }
            }
        });
    }
    for (auto& p : producers) p.join();
    stop.store(true, std::memory_order_release);
    device.join();
    CHECK(errors == 0);
    CHECK(seen == std::uint64_t{kThreads} * kPerThread);
    for (unsigned t = 0; t < kThreads; ++t) CHECK(next_seq[t] == kPerThread);
    // A SEND of 8 inline bytes is one BB: each 2-BB slot starts with a 1-BB NOP.
    CHECK(nops == seen);
    const std::uint64_t total = sq.published();
    CHECK(total == std::uint64_t{kThreads} * kPerThread * 2);
    CHECK(dbrec.snd_counter.value() == static_cast<std::uint16_t>(total));
    CHECK(std::memcmp(doorbell, bbs + ((total - 1) & ((1u << kLogBbs) - 1)) * 64, 8) == 0);
    MESSAGE("ring full " << full.load() << " times");
}
