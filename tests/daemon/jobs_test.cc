// cxvd's job lanes (daemon/jobs.h) on their own: a lane takes jobs from the trust domains
// they are for in turn, one each, in the order posted within a domain, so a domain with
// many connections gets no more turns than one with a single connection.
#include <poll.h>

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "daemon/jobs.h"

namespace d = cxv::daemon;

TEST_CASE("a lane serves trust domains in turn, each in the order it posted") {
    auto lanes = d::job_lanes::create();
    REQUIRE_MESSAGE(lanes, lanes.error().message);
    d::job_lanes& j = *lanes.value();
    // The lane's thread is held by a first job until everything else is queued.
    std::mutex gate;
    gate.lock();
    std::vector<std::string> order;  // written by the lane's one thread, read after drain()
    j.post(d::job_lanes::lane::small, [&] { std::lock_guard hold(gate); }, nullptr, "uid 1");
    // Domain A posts five jobs (five connections), then B and C one each, then A again.
    for (int i = 0; i < 5; ++i) {
        j.post(d::job_lanes::lane::small, [&order, i] { order.push_back("A" + std::to_string(i)); }, nullptr,
               "uid 1000");
    }
    j.post(d::job_lanes::lane::small, [&order] { order.push_back("B0"); }, nullptr, "uid 1001");
    j.post(d::job_lanes::lane::small, [&order] { order.push_back("C0"); }, nullptr, "group 7");
    j.post(d::job_lanes::lane::small, [&order] { order.push_back("A5"); }, nullptr, "uid 1000");
    CHECK(j.in_flight(d::job_lanes::lane::small) == 9);
    gate.unlock();
    j.drain();
    CHECK(j.in_flight() == 0);
    // A's first job had its turn when it came; B and C each come next, before A's other
    // four and the one it posted after them.
    CHECK(order == std::vector<std::string>{"A0", "B0", "C0", "A1", "A2", "A3", "A4", "A5"});
}

TEST_CASE("the large lane runs beside the small one, and done runs on the caller's thread, in finish()") {
    auto lanes = d::job_lanes::create();
    REQUIRE_MESSAGE(lanes, lanes.error().message);
    d::job_lanes& j = *lanes.value();
    std::mutex gate;
    gate.lock();
    int done_small = 0, done_large = 0;
    j.post(d::job_lanes::lane::large, [&] { std::lock_guard hold(gate); }, [&] { ++done_large; }, "uid 1");
    j.post(d::job_lanes::lane::small, [] {}, [&] { ++done_small; }, "uid 2");
    // The small job finishes while the large one is held.
    for (int i = 0; i < 200 && done_small == 0; ++i) {
        pollfd p{j.fd(), POLLIN, 0};
        (void)::poll(&p, 1, 10);
        (void)j.finish();
    }
    CHECK(done_small == 1);
    CHECK(done_large == 0);
    gate.unlock();
    j.drain();
    CHECK(done_large == 1);
}
