// The work cxvd's serving thread hands off so that it never waits on a function
// (docs/daemon.md, "No client stalls another").
//
// The serving thread owns every socket and every client's books; it parses and checks a
// request, then posts what touches the device -- a firmware command, a DMA mapping, an
// unmapping, a slice of a departed client's teardown -- as a job: `work` runs on a lane's
// thread, `done` runs back on the serving thread (finish()), which applies the outcome
// to the books and replies. Ownership is by phase: while a job runs, the serving thread
// writes nothing the job reads (a client with a job in flight is not read from, and
// its books change only in `done`); `work` writes only into state the job owns.
//
// Two lanes, one thread each: `small` for what is short by construction (COMMAND of at
// most 32 KiB, UARs, small mappings, a port's state) and `large` for what may take long
// (COMMAND_FD's inputs of up to 4 MiB, large mappings, teardown slices), so that a
// client's 4 MiB command or a departed client's 50,000 unmappings never sit in front of
// another client's HELLO. Each client has at most one job at a time. A lane takes its
// jobs from the trust domains they are for in turn, one each, first in first out within
// a domain: a domain with many connections (or many departed clients' teardowns) gets one
// turn in each round like any other, not a turn per connection. (A short job may also
// run on the serving thread itself, while the large lane is empty: server::post.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.h"
#include "protocol/codec.h"

namespace cxv::daemon {

class job_lanes {
public:
    enum class lane { small, large };

    static result<std::unique_ptr<job_lanes>> create();
    // Runs what is queued, then joins the threads (the `done` of those jobs is not run:
    // drain() first for that).
    ~job_lanes();
    job_lanes(const job_lanes&) = delete;
    job_lanes& operator=(const job_lanes&) = delete;

    // The serving thread's. `share`: the trust domain the job is for (empty: the
    // daemon's own), which the lane's turns go by.
    void post(lane l, std::function<void()> work, std::function<void()> done, const std::string& share = {});
    // Readable when a job has finished its work (poll it with POLLIN).
    int fd() const noexcept { return wake_.get(); }
    // Runs `done` of every job whose work is over, in the order they finished; how many.
    std::size_t finish();
    // Posted jobs whose `done` has not run yet, in all and on one lane.
    std::size_t in_flight() const noexcept { return in_flight_; }
    std::size_t in_flight(lane l) const noexcept { return lane_in_flight_[static_cast<int>(l)]; }
    // Waits (at most `limit` each time) and finishes jobs until none is in flight.
    void drain(std::chrono::milliseconds limit = std::chrono::milliseconds(100));

private:
    struct job {
        std::function<void()> work, done;
        lane on = lane::small;
    };
    struct queue {
        std::mutex mu;
        std::condition_variable cv;
        std::map<std::string, std::deque<job>> jobs;  // by share, each in the order posted
        std::deque<std::string> turns;                // the shares with jobs, next first
        bool stop = false;
        std::thread thread;
    };
    job_lanes() = default;
    void run(queue& q, lane l);

    queue small_, large_;
    std::mutex done_mu_;
    std::vector<std::pair<lane, std::function<void()>>> done_;
    unique_fd wake_;
    std::size_t in_flight_ = 0;  // the serving thread's counts
    std::size_t lane_in_flight_[2] = {0, 0};
};

}  // namespace cxv::daemon
