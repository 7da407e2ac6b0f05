#include "bench/fastpath_threads.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace cxv::bench {

scaling_figures run_producers(const producer_ops& ops, unsigned threads, unsigned posts) {
    using clock = std::chrono::steady_clock;
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false}, failed{false};
    std::atomic_flag retiring = ATOMIC_FLAG_INIT;
    const auto deadline = clock::now() + std::chrono::minutes(1);
    auto producer = [&] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        for (unsigned i = 0; i < posts && !failed.load(std::memory_order_relaxed); ++i) {
            auto stuck_since = clock::time_point{};
            while (!ops.post(ops.ring)) {
                // Full: one thread frees what is published; the others wait for room.
                if (!retiring.test_and_set(std::memory_order_acquire)) {
                    ops.retire(ops.ring);
                    retiring.clear(std::memory_order_release);
                }
                const auto now = clock::now();
                if (stuck_since == clock::time_point{}) stuck_since = now;
                if (now - stuck_since > std::chrono::seconds(10) || now > deadline) {
                    failed.store(true);
                    return;
                }
            }
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(producer);
    while (ready.load() != threads) std::this_thread::yield();
    const auto t0 = clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : pool) t.join();
    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
    if (failed.load()) return {};
    return {ns / posts, double(threads) * posts / (ns / 1000)};
}

}  // namespace cxv::bench
