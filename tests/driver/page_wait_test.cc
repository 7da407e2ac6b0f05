// Memory keys made faster than the firmware's pages come. The model starts with few
// firmware pages and asks for one page at a time (init_pages=8, page_request_batch=1:
// BUILD), so creates soon find its memory short; it then holds each such command until
// the driver answers its page request, as a card does. The driver answers on the last
// command slot, which it keeps for MANAGE_PAGES: with more threads than the other slots,
// every one of them can be held at once and the answer still finds a slot. Every create
// succeeds, none with NO_RESOURCES, and the pages the firmware asked for were given; once
// the keys are gone, they go back.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "driver/hca/hca.h"
#include "driver/res/pd_mr.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver;

TEST_CASE("creates that outrun the firmware's pages wait for them, on every command slot, and all succeed") {
    auto h = test::bring_up();
    auto domain = pd::create(*h);
    REQUIRE(domain.ok());
    const std::size_t given_at_start = h->pages_given();

    constexpr unsigned kThreads = 40;  // more than the 31 slots other than MANAGE_PAGES's
    constexpr unsigned kKeys = 24;     // each: 960 keys, 60 pages of firmware memory or more
    // Page-aligned memory, a page per key.
    struct release {
        void operator()(char* p) const { std::free(p); }
    };
    std::vector<std::unique_ptr<char, release>> memory;
    for (unsigned t = 0; t < kThreads; ++t) {
        memory.emplace_back(static_cast<char*>(std::aligned_alloc(4096, kKeys * 4096)));
        REQUIRE(memory.back() != nullptr);
    }
    std::vector<std::vector<std::shared_ptr<mr>>> keys(kThreads);
    std::vector<std::string> failures(kThreads);
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            for (unsigned k = 0; k < kKeys; ++k) {
                auto m = mr::create(domain.value(), memory[t].get() + k * 4096, 4096, access_local_write);
                if (!m.ok()) {
                    failures[t] = m.error().message;
                    return;
                }
                keys[t].push_back(std::move(m).value());
            }
        });
    }
    go.store(true);
    for (auto& th : pool) th.join();
    for (unsigned t = 0; t < kThreads; ++t) CHECK_MESSAGE(failures[t].empty(), "thread ", t, ": ", failures[t]);
    std::size_t made = 0;
    for (const auto& k : keys) made += k.size();
    CHECK(made == kThreads * kKeys);
    // The memory they take came by page requests answered while they waited.
    const std::size_t given = h->pages_given();
    INFO("pages given at bring-up and PD: ", given_at_start, ", after the keys: ", given);
    CHECK(given >= given_at_start + kThreads * kKeys / 16);
    // Once the keys are gone the firmware offers back what it no longer uses (negative
    // page requests) down to a batch or two spare, and the driver takes it.
    keys.clear();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (h->pages_given() > given_at_start + 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(h->pages_given() <= given_at_start + 2);
}
