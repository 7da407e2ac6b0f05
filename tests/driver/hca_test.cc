// Bring-up, commands, health and teardown of driver::hca, run against the model under
// cxv-sim. Faults are armed through the function's cxv_sim_control file; the driver
// code is the one that drives a card.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace std::chrono_literals;
namespace ifc = cxv::hw::ifc;

namespace {

using test::control;
using test::kBdf;
using test::open_device;

std::vector<std::byte> query_caps_input() {
    std::vector<std::byte> in(ifc::query_hca_cap_in::size_bytes);
    ifc::set<ifc::query_hca_cap_in::opcode>(in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_CAP));
    ifc::set<ifc::query_hca_cap_in::op_mod>(in.data(), 1);
    return in;
}

}  // namespace

TEST_CASE("bring-up in PRM order, then a clean teardown that reclaims every page") {
    auto h = driver::hca::create(open_device());
    REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
    driver::hca& hca = *h.value();
    CHECK(hca.pages_given() > 0);
    CHECK(hca.uar() != 0);
    CHECK(hca.async_eqn() != 0);
    CHECK(ifc::get<ifc::cmd_hca_cap::umem_uid_0>(hca.caps().data()) == 1);
    std::vector<hw::cmd_opcode> order;
    for (const auto& r : hca.cmd().trace()) order.push_back(r.opcode);
    using O = hw::cmd_opcode;
    const std::vector<O> expected = {O::ENABLE_HCA,    O::QUERY_ISSI,   O::SET_ISSI,      O::QUERY_PAGES,
                                     O::MANAGE_PAGES,  O::ACCESS_REG,   O::QUERY_HCA_CAP, O::QUERY_HCA_CAP,
                                     O::SET_HCA_CAP,   O::QUERY_HCA_CAP, O::QUERY_PAGES,  O::MANAGE_PAGES,
                                     O::INIT_HCA};
    REQUIRE(order.size() >= expected.size());
    CHECK(std::equal(expected.begin(), expected.end(), order.begin()));
    // Then the EQs, then the wait for port 1 (PAOS and the vport's state) until ACTIVE.
    CHECK(std::find(order.begin() + static_cast<std::ptrdiff_t>(expected.size()), order.end(), O::CREATE_EQ) !=
          order.end());
    CHECK(order.back() == O::QUERY_HCA_VPORT_CONTEXT);
    // An InfiniBand port: no RoCE address is programmed.
    CHECK(std::count(order.begin(), order.end(), O::SET_ROCE_ADDRESS) == 0);
    CHECK(hca.roce_gids().empty());
    auto port = hca.query_port_state(1);
    REQUIRE(port.ok());
    CHECK(port->active());
    // With the EQ up, commands complete through CMD events.
    auto caps = hca.exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes);
    CHECK(caps.ok());
    REQUIRE(hca.close().ok());
    CHECK(hca.pages_given() == 0);
    h.value().reset();  // releases the VFIO device too
    // Everything is back: the function opens and comes up again at once.
    auto again = driver::hca::create(open_device());
    CHECK(again.ok());
}

TEST_CASE("create() waits for the port: Init then Active reported; a port left down is ETIMEDOUT") {
    std::mutex mu;
    std::vector<driver::hca_event::kind> seen;
    driver::hca::options o;
    o.on_event = [&](const driver::hca_event& e) {
        std::lock_guard lock(mu);
        seen.push_back(e.what);
    };
    {
        auto h = driver::hca::create(open_device(), o);
        REQUIRE_MESSAGE(h.ok(), (h.ok() ? "" : h.error().message));
        std::lock_guard lock(mu);
        // The link trained after INIT_HCA, with the EQ already there to hear it.
        CHECK(seen == std::vector{driver::hca_event::port_init, driver::hca_event::port_up});
    }
    // Not waiting: create() returns while the link still trains.
    driver::hca::options nowait;
    nowait.port_timeout = 0ms;
    {
        auto h = driver::hca::create(open_device(), nowait);
        REQUIRE(h.ok());
        auto ps = h.value()->query_port_state(1);
        REQUIRE(ps.ok());
        CHECK_FALSE(ps->active());
        CHECK(h.value()->wait_port_active(1, 5s).ok());
    }
    // The cable out: the wait ends in ETIMEDOUT naming the port and its state.
    auto dev = open_device();
    control("link down");
    driver::hca::options shortwait;
    shortwait.port_timeout = 400ms;
    auto h = driver::hca::create(std::move(dev), shortwait);
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().code == ETIMEDOUT);
    CHECK_MESSAGE(h.error().message.find("port 1 not ACTIVE after 400 ms: Down") != std::string::npos,
                  h.error().message);
}

TEST_CASE("a failing command names opcode, op_mod, status and syndrome") {
    auto h = driver::hca::create(open_device());
    REQUIRE(h.ok());
    std::vector<std::byte> in(16);
    ifc::set<ifc::cmd_in::opcode>(in.data(), 0x0fff);
    auto r = h.value()->exec(in, 16);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().message.find("BAD_OP") != std::string::npos);
    CHECK(r.error().message.find("op_mod 0x0") != std::string::npos);
}

TEST_CASE("several commands in flight from several threads") {
    auto h = driver::hca::create(open_device());
    REQUIRE(h.ok());
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20; ++i) {
                if (h.value()->exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes).ok()) ++ok;
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(ok == 120);
}

TEST_CASE("an injected firmware failure during bring-up is reported and undone") {
    auto dev = open_device();
    control("fail QUERY_HCA_CAP BAD_PARAM 0x1234");
    auto h = driver::hca::create(std::move(dev));
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().code == EINVAL);
    CHECK(h.error().message.find("QUERY_HCA_CAP") != std::string::npos);
    CHECK(h.error().message.find("BAD_PARAM") != std::string::npos);
    CHECK(h.error().message.find("0x1234") != std::string::npos);
    // The failed bring-up undid itself: the next one succeeds.
    CHECK(driver::hca::create(open_device()).ok());
}

TEST_CASE("a command that never completes times out with its name, and bring-up fails cleanly") {
    auto dev = open_device();
    control("drop QUERY_ISSI");
    driver::hca::options o;
    o.cmd.timeout = 300ms;
    const auto start = std::chrono::steady_clock::now();
    auto h = driver::hca::create(std::move(dev), o);
    REQUIRE_FALSE(h.ok());
    CHECK(h.error().code == ETIMEDOUT);
    CHECK(h.error().message.find("QUERY_ISSI") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("health: a stalled counter and a health syndrome make the device dead, not the process") {
    for (const char* fault : {"stall_health 1", "health_syndrome 0x8 0x1"}) {
        CAPTURE(fault);
        std::mutex mu;
        std::vector<driver::hca_event> seen;
        driver::hca::options o;
        o.health_period = 50ms;
        o.on_event = [&](const driver::hca_event& e) {
            std::lock_guard lock(mu);
            seen.push_back(e);
        };
        auto h = driver::hca::create(open_device(), o);
        REQUIRE(h.ok());
        control(fault);
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (!h.value()->dead() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
        REQUIRE(h.value()->dead());
        auto r = h.value()->exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes);
        CHECK(r.error().code == ENODEV);
        // The fatal event is reported on the event thread, after dead() turns true.
        const auto fatal_seen = [&] {
            std::lock_guard lock(mu);
            return std::any_of(seen.begin(), seen.end(),
                               [](const driver::hca_event& e) { return e.what == driver::hca_event::fatal; });
        };
        while (!fatal_seen() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
        CHECK(fatal_seen());
        CHECK_FALSE(h.value()->close().ok());  // teardown is skipped on a dead device
        h.value().reset();  // closing the function ends its model, faults and all
    }
}

TEST_CASE("port events reach the application") {
    std::mutex mu;
    std::vector<driver::hca_event> seen;
    driver::hca::options o;
    o.on_event = [&](const driver::hca_event& e) {
        std::lock_guard lock(mu);
        seen.push_back(e);
    };
    auto h = driver::hca::create(open_device(), o);
    REQUIRE(h.ok());
    control("link down");
    control("link up");
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    for (;;) {
        {
            std::lock_guard lock(mu);
            // The cable out, then in: DOWN, then (once the link has trained) ACTIVE after it.
            const auto down = std::find_if(seen.begin(), seen.end(), [](auto& e) { return e.what == driver::hca_event::port_down; });
            const bool up = std::any_of(down, seen.end(), [](auto& e) { return e.what == driver::hca_event::port_up; });
            if (down != seen.end() && up) break;
        }
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(10ms);
    }
    std::lock_guard lock(mu);
    CHECK(seen.front().port == 1);
}

TEST_CASE("page-request storm and TAKE: served in the background, every page back at teardown") {
    std::atomic<int> fatal{0};
    driver::hca::options o;
    o.on_event = [&](const driver::hca_event& e) {
        if (e.what == driver::hca_event::fatal) ++fatal;
    };
    auto h = driver::hca::create(open_device(), o);
    REQUIRE(h.ok());
    auto& hca = *h.value();
    const std::size_t boot = hca.pages_given();
    // 40 requests of 64 pages at once: 2560 pages, more than one 2 MiB block holds.
    control("pages 64 40");
    auto wait_for = [&](auto pred) {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!pred()) {
            REQUIRE(std::chrono::steady_clock::now() < deadline);
            std::this_thread::sleep_for(5ms);
        }
    };
    wait_for([&] { return hca.pages_given() == boot + 2560; });
    // The firmware offers 1000 back: the driver takes them (MANAGE_PAGES TAKE).
    control("pages -1000");
    wait_for([&] { return hca.pages_given() == boot + 1560; });
    // Commands still run while pages move.
    CHECK(hca.exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes).ok());
    CHECK(fatal.load() == 0);
    REQUIRE(hca.close().ok());
    CHECK(hca.pages_given() == 0);
}

TEST_CASE("a lost command-completion event costs a poll, not a timeout") {
    driver::hca::options o;
    o.cmd.timeout = 20s;
    auto h = driver::hca::create(open_device(), o);
    REQUIRE(h.ok());
    auto& hca = *h.value();
    // Waiting for the event alone, each would fail ETIMEDOUT after the 20 s.
    for (int i = 0; i < 3; ++i) {
        control("no_event QUERY_HCA_CAP");
        auto r = hca.exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes);
        CHECK_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
    }
    // The EQ is still in step: the next commands complete by their events.
    for (int i = 0; i < 20; ++i) CHECK(hca.exec(query_caps_input(), ifc::query_hca_cap_out::size_bytes).ok());
    CHECK(hca.close().ok());
}
