// daemon/log_budget.h on its own: lines admitted per one-second window, the rest counted
// and reported once, when the next window opens or when asked after the window is over.
#include "daemon/log_budget.h"

#include <doctest/doctest.h>

using cxv::daemon::log_budget;
using namespace std::chrono_literals;

TEST_CASE("log_budget: 10 lines a second, the rest counted and reported once, in order") {
    log_budget b;
    const auto t0 = log_budget::clock::time_point{} + 100s;
    std::uint64_t missed = 99;
    for (int i = 0; i < 10; ++i) {
        CHECK(b.admit(t0 + i * 1ms, missed));
        CHECK(missed == 0);
    }
    CHECK(!b.due());
    for (int i = 0; i < 25; ++i) CHECK(!b.admit(t0 + 500ms, missed));
    REQUIRE(b.due());
    CHECK(*b.due() == t0 + 1s);
    CHECK(b.expired(t0 + 999ms) == 0);  // the window is still open
    // The next line after the window: admitted, with the count of the window before it.
    CHECK(b.admit(t0 + 1s, missed));
    CHECK(missed == 25);
    CHECK(!b.due());
    CHECK(b.take() == 0);
}

TEST_CASE("log_budget: a source that goes quiet has its count reported when the window ends, or when it goes") {
    log_budget b(2);
    const auto t0 = log_budget::clock::time_point{} + 5s;
    std::uint64_t missed = 0;
    CHECK(b.admit(t0, missed));
    CHECK(b.admit(t0, missed));
    CHECK(!b.admit(t0 + 10ms, missed));
    CHECK(!b.admit(t0 + 20ms, missed));
    CHECK(b.expired(t0 + 1s) == 2);
    CHECK(b.expired(t0 + 2s) == 0);  // once
    CHECK(!b.due());
    // A new window: the budget is whole again.
    CHECK(b.admit(t0 + 3s, missed));
    CHECK(missed == 0);
    CHECK(b.admit(t0 + 3s, missed));
    CHECK(!b.admit(t0 + 3s, missed));
    CHECK(b.take() == 1);
    CHECK(!b.due());
}
