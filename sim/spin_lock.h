// A lock for the model's fault plans, command records and in-process frame queues: held
// for a few instructions, by the model thread in its rounds and by a test or tool now and
// then, so it spins instead of calling into the C library (a std::mutex costs ~50
// instructions uncontended; this ~6). Its exchange is a locked instruction, which waits
// for the thread's earlier stores: keep it off the per-packet path (docs/performance.md).
// Meets BasicLockable, for std::lock_guard.
#pragma once

#include <atomic>
#include <thread>

namespace cxv::sim {

class spin_lock {
public:
    void lock() noexcept {
        while (held_.exchange(true, std::memory_order_acquire)) {
            while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
        }
    }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> held_{false};
};

}  // namespace cxv::sim
