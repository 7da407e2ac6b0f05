#include "sim/model_thread.h"

#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>

#include "sim/device.h"

namespace cxv::sim {

model_thread& model_thread::shared() {
    static auto* t = new model_thread();  // never destroyed: functions may outlive statics
    return *t;
}

model_thread::~model_thread() {
    std::unique_lock lock(mu_);
    devices_.clear();
    lock.unlock();
    if (thread_.joinable()) thread_.join();
}

void model_thread::serve(device* d) {
    callers_.fetch_add(1);
    std::unique_lock lock(mu_);
    callers_.fetch_sub(1);
    devices_.push_back(d);
    if (running_) return;
    // A thread that stopped serving (its last function dropped) has left its loop but may
    // still be on its way out: it is joined here, after the new one started.
    std::thread old = std::move(thread_);
    running_ = true;
    thread_ = std::thread([this] { run(); });
    lock.unlock();
    if (old.joinable()) old.join();
}

void model_thread::drop(device* d) {
    callers_.fetch_add(1);
    std::lock_guard lock(mu_);
    callers_.fetch_sub(1);
    devices_.erase(std::remove(devices_.begin(), devices_.end(), d), devices_.end());
}

namespace {

// Idle sweeps before the thread first yields. A thread that may run on one CPU only
// shares it with the application's threads (a process pinned with `taskset -c N`, as two
// processes on two cores should be): every idle sweep there holds the core the
// application needs to take its completion and post the next request (64 of them cost
// ~4.7 us of each one-way trip between two pinned processes), so it yields at once.
// Elsewhere it spins a little first: a yield is a system call, and a doorbell that comes
// during one is seen late (one way in loopback ~20 % slower without the spin).
unsigned sweeps_before_yield() {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) == 1) return 1;
    return 64;
}

}  // namespace

void model_thread::run() {
    // Sleeps end when asked (the default 50 us slack would make every short sleep ~60 us).
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    unsigned idle = 0;
    unsigned spin = sweeps_before_yield();
    std::vector<pollfd> fds;
    std::unique_lock lock(mu_);
    while (!devices_.empty()) {
        const auto now = std::chrono::steady_clock::now();
        bool worked = false, busy = false;
        for (device* d : devices_) {
            worked |= d->round(now);
            busy |= d->busy();
        }
        if (worked) {
            idle = 0;
        } else if (++idle < spin) {
            // spin
        } else if (idle < 256 || busy) {
            lock.unlock();
            std::this_thread::yield();
            lock.lock();
        } else {
            // Doorbells, being memory writes, are seen at the next sweep; a frame from
            // another process ends the sleep at once. The wait holds mu_, so that a
            // function dropped meanwhile is never touched again (drop waits at most 1 ms).
            const unsigned shift = std::min<unsigned>((idle - 256) / 64, 10);
            const auto us = std::chrono::microseconds(std::min<unsigned>(1000, 1u << shift));
            fds.clear();
            bool may_sleep = true;
            for (device* d : devices_) {
                may_sleep = d->arm_wake() && may_sleep;  // every port told, even after one said no
                if (const int fd = d->wake_fd(); fd >= 0) fds.push_back({fd, POLLIN, 0});
            }
            const timespec t{0, static_cast<long>(us.count()) * 1000};
            if (may_sleep) ::ppoll(fds.data(), fds.size(), &t, nullptr);
            spin = sweeps_before_yield();  // the affinity may have changed (taskset -p)
        }
        // A thread that never lets go of mu_ would keep serve() and drop() waiting.
        if (callers_.load(std::memory_order_relaxed) != 0) {
            lock.unlock();
            while (callers_.load(std::memory_order_relaxed) != 0) std::this_thread::yield();
            lock.lock();
        }
    }
    running_ = false;
}

}  // namespace cxv::sim
