// The model threads (sim/model_thread.h): every function of a process on the shared one by
// default, a function of its own with own_thread; functions come and go while it runs.
// A function acts only while a thread runs its rounds, which its health counter shows.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sim/device.h"

using namespace cxv;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<sim::device> make(unsigned k, bool own) {
    sim::device_config cfg;
    cfg.boot_time = 0ms;
    cfg.health_period = 1ms;
    cfg.own_thread = own;
    cfg.fabric = "model-thread-test";
    cfg.lid = static_cast<std::uint16_t>(1 + k);
    cfg.mac[5] = static_cast<std::uint8_t>(1 + k);
    auto d = sim::device::create(cfg);
    return d ? std::move(d).value() : nullptr;
}

// Whether the function's health counter moves within a second (its rounds run).
bool acting(sim::device& d) {
    const auto c0 = d.health_counter();
    const auto end = std::chrono::steady_clock::now() + 1s;
    while (std::chrono::steady_clock::now() < end) {
        if (d.health_counter() != c0) return true;
        std::this_thread::sleep_for(1ms);
    }
    return false;
}

}  // namespace

TEST_CASE("functions on the shared thread and on their own all act; dropping some leaves the rest acting") {
    std::vector<std::unique_ptr<sim::device>> shared;
    for (unsigned k = 0; k < 3; ++k) {
        shared.push_back(make(k, false));
        REQUIRE(shared.back());
    }
    auto own = make(3, true);
    REQUIRE(own);
    for (auto& d : shared) CHECK(acting(*d));
    CHECK(acting(*own));

    shared.erase(shared.begin() + 1);  // from the middle, while the thread runs
    CHECK(acting(*shared[0]));
    CHECK(acting(*shared[1]));
    own.reset();
    CHECK(acting(*shared[0]));

    // The shared thread stops with its last function and starts again with the next.
    shared.clear();
    auto again = make(4, false);
    REQUIRE(again);
    CHECK(acting(*again));
}

TEST_CASE("functions created and destroyed from several threads at once") {
    std::atomic<unsigned> made{0}, acted{0}, checked{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < 4; ++t) {
        ts.emplace_back([t, &made, &acted, &checked] {
            for (unsigned i = 0; i < 20; ++i) {
                auto d = make(8 + t, (i % 3) == 0);
                if (!d) continue;
                ++made;
                if (i % 5 == 0) {
                    ++checked;
                    if (acting(*d)) ++acted;
                }
            }
        });
    }
    for (auto& t : ts) t.join();
    CHECK(made == 80);
    CHECK(acted == checked.load());
}
