// driver::health_monitor against plain memory laid out as the initialization segment: each
// way a function can be dead, the counter's tolerance, and the polling period.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/hca/health.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"
#include "hw/mmio.h"

using namespace std::chrono_literals;
namespace hw = cxv::hw;
namespace ifc = cxv::hw::ifc;
namespace seg = cxv::hw::init_seg_offset;
using cxv::driver::health_monitor;

namespace {

// The initialization segment up to the health counter, as a live function shows it.
struct fake_bar {
    std::vector<std::uint32_t> mem = std::vector<std::uint32_t>(0x2000 / 4);
    hw::mmio_window win{mem.data(), mem.size() * 4};
    fake_bar() {
        win.write32_be(seg::health_fw_version, 0x00100020);
        set_counter(100);
    }
    void set_counter(std::uint32_t v) { win.write32_be(seg::health_counter, v); }
    std::byte* health() { return win.base() + seg::health_buffer; }
};

using clock = std::chrono::steady_clock;

}  // namespace

TEST_CASE("a live function: the counter advances, nothing is reported") {
    fake_bar bar;
    health_monitor h(10ms, 3);
    auto t = clock::now();
    h.start(bar.win, t);
    for (std::uint32_t i = 1; i <= 10; ++i) {
        bar.set_counter(100 + i);
        t += 10ms;
        CHECK_FALSE(h.check(bar.win, t).has_value());
    }
    CHECK(health_monitor::fw_version(bar.win) == 0x00100020);
}

TEST_CASE("a stalled counter is fatal after `misses` checks in a row, not before") {
    fake_bar bar;
    health_monitor h(10ms, 3);
    auto t = clock::now();
    h.start(bar.win, t);
    CHECK_FALSE(h.check(bar.win, t).has_value());  // miss 1
    t += 10ms;
    CHECK_FALSE(h.check(bar.win, t).has_value());  // miss 2
    bar.set_counter(101);                          // alive again: the count restarts
    t += 10ms;
    CHECK_FALSE(h.check(bar.win, t).has_value());
    for (int i = 0; i < 2; ++i) {
        t += 10ms;
        CHECK_FALSE(h.check(bar.win, t).has_value());
    }
    t += 10ms;
    auto why = h.check(bar.win, t);
    REQUIRE(why.has_value());
    CHECK(why->find("stalled at 101") != std::string::npos);
}

TEST_CASE("checks come once per period; calls in between read nothing") {
    fake_bar bar;
    health_monitor h(100ms, 1);
    auto t = clock::now();
    h.start(bar.win, t);
    bar.set_counter(101);
    CHECK_FALSE(h.check(bar.win, t).has_value());
    // The counter stalls, but the next check is not due for 100 ms.
    CHECK_FALSE(h.check(bar.win, t + 50ms).has_value());
    CHECK(h.check(bar.win, t + 100ms).has_value());
}

TEST_CASE("a health syndrome is reported with its extended syndrome") {
    fake_bar bar;
    health_monitor h(10ms, 3);
    h.start(bar.win, clock::now());
    ifc::set<ifc::health_buffer::synd>(bar.health(), 0x8);
    ifc::set<ifc::health_buffer::ext_synd>(bar.health(), 0x1234);
    bar.set_counter(101);
    auto why = h.check(bar.win, clock::now());
    REQUIRE(why.has_value());
    CHECK(*why == "health syndrome 0x8 (ext 0x1234)");
}

TEST_CASE("a function reading all ones, or with its NIC interface disabled or in reset, is dead") {
    SUBCASE("all ones") {
        fake_bar bar;
        health_monitor h(10ms, 3);
        h.start(bar.win, clock::now());
        bar.win.write32_be(seg::health_fw_version, 0xffffffffu);
        auto why = h.check(bar.win, clock::now());
        REQUIRE(why.has_value());
        CHECK(why->find("all ones") != std::string::npos);
    }
    for (auto [state, text] : {std::pair{hw::nic_interface::DISABLED, "NIC interface disabled"},
                               std::pair{hw::nic_interface::SW_RESET, "NIC interface in SW reset"}}) {
        CAPTURE(text);
        fake_bar bar;
        health_monitor h(10ms, 3);
        h.start(bar.win, clock::now());
        bar.win.write32_be(seg::nic_interface, static_cast<std::uint32_t>(state) << hw::nic_interface_shift);
        bar.set_counter(101);
        auto why = h.check(bar.win, clock::now());
        REQUIRE(why.has_value());
        CHECK(*why == text);
    }
    // NO_DRAM_NIC is a mode of a live function, not a failure.
    fake_bar bar;
    health_monitor h(10ms, 3);
    h.start(bar.win, clock::now());
    bar.win.write32_be(seg::nic_interface, static_cast<std::uint32_t>(hw::nic_interface::NO_DRAM_NIC)
                                               << hw::nic_interface_shift);
    bar.set_counter(101);
    CHECK_FALSE(h.check(bar.win, clock::now()).has_value());
}
