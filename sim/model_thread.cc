#include "sim/model_thread.h"

#include <poll.h>
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

void model_thread::run() {
    // Sleeps end when asked (the default 50 us slack would make every short sleep ~60 us).
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    unsigned idle = 0;
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
        } else if (++idle < 64) {
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
            for (device* d : devices_) {
                if (const int fd = d->wake_fd(); fd >= 0) fds.push_back({fd, POLLIN, 0});
            }
            const timespec t{0, static_cast<long>(us.count()) * 1000};
            ::ppoll(fds.data(), fds.size(), &t, nullptr);
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
