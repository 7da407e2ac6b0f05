#include "daemon/jobs.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cxv::daemon {

result<std::unique_ptr<job_lanes>> job_lanes::create() {
    std::unique_ptr<job_lanes> j(new job_lanes());
    j->wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!j->wake_) return error{errno, fmt::format("eventfd: {}", std::strerror(errno))};
    j->small_.thread = std::thread([jp = j.get()] { jp->run(jp->small_, lane::small); });
    j->large_.thread = std::thread([jp = j.get()] { jp->run(jp->large_, lane::large); });
    return j;
}

job_lanes::~job_lanes() {
    for (queue* q : {&small_, &large_}) {
        {
            std::lock_guard lock(q->mu);
            q->stop = true;
        }
        q->cv.notify_all();
    }
    for (queue* q : {&small_, &large_}) {
        if (q->thread.joinable()) q->thread.join();
    }
}

void job_lanes::post(lane l, std::function<void()> work, std::function<void()> done, const std::string& share) {
    queue& q = l == lane::small ? small_ : large_;
    ++in_flight_;
    ++lane_in_flight_[static_cast<int>(l)];
    {
        std::lock_guard lock(q.mu);
        auto& mine = q.jobs[share];
        if (mine.empty()) q.turns.push_back(share);
        mine.push_back(job{std::move(work), std::move(done), l});
    }
    q.cv.notify_one();
}

void job_lanes::run(queue& q, lane l) {
    for (;;) {
        job j;
        {
            std::unique_lock lock(q.mu);
            q.cv.wait(lock, [&] { return q.stop || !q.turns.empty(); });
            if (q.turns.empty()) return;  // stopping, nothing left
            // The next share's first job; the share goes to the back of the turns while
            // it has more.
            const std::string share = std::move(q.turns.front());
            q.turns.pop_front();
            auto it = q.jobs.find(share);
            j = std::move(it->second.front());
            it->second.pop_front();
            if (it->second.empty()) {
                q.jobs.erase(it);
            } else {
                q.turns.push_back(share);
            }
        }
        j.work();
        j.work = nullptr;  // what it captured goes here, on this thread
        {
            std::lock_guard lock(done_mu_);
            done_.emplace_back(l, std::move(j.done));
        }
        const std::uint64_t one = 1;
        (void)!::write(wake_.get(), &one, sizeof one);
    }
}

std::size_t job_lanes::finish() {
    std::uint64_t n = 0;
    (void)!::read(wake_.get(), &n, sizeof n);
    std::vector<std::pair<lane, std::function<void()>>> ready;
    {
        std::lock_guard lock(done_mu_);
        ready.swap(done_);
    }
    for (auto& [l, d] : ready) {
        --in_flight_;
        --lane_in_flight_[static_cast<int>(l)];
        if (d) d();
    }
    return ready.size();
}

void job_lanes::drain(std::chrono::milliseconds limit) {
    while (in_flight_ > 0) {
        pollfd p{wake_.get(), POLLIN, 0};
        (void)::poll(&p, 1, static_cast<int>(limit.count()));
        (void)finish();
    }
}

}  // namespace cxv::daemon
