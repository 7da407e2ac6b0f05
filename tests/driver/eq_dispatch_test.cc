// driver::dispatch_eqe: each kind of EQE, written in plain memory, reaches its handler
// with the fields decoded.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver/hca/eq.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace hw = cxv::hw;
namespace ifc = cxv::hw::ifc;
using cxv::driver::eq_handlers;
using cxv::driver::hca_event;

namespace {

struct eqe {
    std::vector<std::byte> bytes = std::vector<std::byte>(ifc::eqe::size_bytes);
    explicit eqe(hw::event_type t, std::uint8_t sub = 0) {
        ifc::set<ifc::eqe::event_type>(bytes.data(), static_cast<std::uint32_t>(t));
        ifc::set<ifc::eqe::event_sub_type>(bytes.data(), sub);
    }
    std::byte* data() { return ifc::at<ifc::eqe::event_data>(bytes.data()); }
};

// Handlers that record what they were called with.
struct recorder {
    std::vector<std::uint32_t> completions, commands;
    std::vector<std::int32_t> page_requests;
    std::vector<hca_event> events;
    int port_changes = 0;
    std::vector<std::string> fatals;
    eq_handlers handlers() {
        eq_handlers h;
        h.completion = [this](std::uint32_t cqn) { completions.push_back(cqn); };
        h.command = [this](std::uint32_t v) { commands.push_back(v); };
        h.page_request = [this](std::int32_t n) { page_requests.push_back(n); };
        h.event = [this](hca_event e) { events.push_back(e); };
        h.port_change = [this] { ++port_changes; };
        h.fatal = [this](const std::string& why) { fatals.push_back(why); };
        return h;
    }
};

}  // namespace

TEST_CASE("completion, command and page request events reach their handlers") {
    recorder r;
    const auto h = r.handlers();
    eqe comp(hw::event_type::COMP);
    ifc::set<ifc::comp_event::cq_number>(comp.data(), 0x123456);
    cxv::driver::dispatch_eqe(comp.bytes.data(), h);
    eqe cmd(hw::event_type::CMD);
    ifc::set<ifc::cmd_inter_comp_event::command_completion_vector>(cmd.data(), 0x5);
    cxv::driver::dispatch_eqe(cmd.bytes.data(), h);
    eqe pages(hw::event_type::PAGE_REQUEST);
    ifc::set<ifc::pages_req_event::num_pages>(pages.data(), static_cast<std::uint32_t>(-7));
    cxv::driver::dispatch_eqe(pages.bytes.data(), h);
    CHECK(r.completions == std::vector<std::uint32_t>{0x123456});
    CHECK(r.commands == std::vector<std::uint32_t>{0x5});
    CHECK(r.page_requests == std::vector<std::int32_t>{-7});  // negative: the firmware gives pages back
    CHECK(r.events.empty());
    CHECK(r.fatals.empty());
}

TEST_CASE("port changes become port events, then wake port waiters") {
    recorder r;
    const auto h = r.handlers();
    const std::pair<hw::port_change_subtype, hca_event::kind> cases[] = {
        {hw::port_change_subtype::ACTIVE, hca_event::port_up},
        {hw::port_change_subtype::DOWN, hca_event::port_down},
        {hw::port_change_subtype::INITIALIZED, hca_event::port_init},
        {hw::port_change_subtype::LID, hca_event::port_other},
    };
    for (auto [sub, kind] : cases) {
        eqe e(hw::event_type::PORT_CHANGE, static_cast<std::uint8_t>(sub));
        ifc::set<ifc::port_state_change_event::port_num>(e.data(), 2);
        cxv::driver::dispatch_eqe(e.bytes.data(), h);
        REQUIRE(!r.events.empty());
        CHECK(r.events.back().what == kind);
        CHECK(r.events.back().port == 2);
        CHECK(r.events.back().detail == hw::name(sub));
    }
    CHECK(r.port_changes == 4);
}

TEST_CASE("queue errors name the queue; an internal error is fatal") {
    recorder r;
    const auto h = r.handlers();
    eqe cq(hw::event_type::CQ_ERROR);
    ifc::set<ifc::cq_error::cqn>(cq.data(), 0x42);
    ifc::set<ifc::cq_error::syndrome>(cq.data(), 0x1);
    cxv::driver::dispatch_eqe(cq.bytes.data(), h);
    REQUIRE(r.events.size() == 1);
    CHECK(r.events[0].what == hca_event::queue_error);
    CHECK(r.events[0].object == 0x42);
    CHECK(r.events[0].detail.find("syndrome 0x1") != std::string::npos);

    eqe wq(hw::event_type::WQ_CATAS_ERROR);
    ifc::set<ifc::qp_events::qpn_rqn_sqn>(wq.data(), 0x77);
    cxv::driver::dispatch_eqe(wq.bytes.data(), h);
    REQUIRE(r.events.size() == 2);
    CHECK(r.events[1].what == hca_event::queue_error);
    CHECK(r.events[1].object == 0x77);
    CHECK(r.events[1].detail == hw::name(hw::event_type::WQ_CATAS_ERROR));

    cxv::driver::dispatch_eqe(eqe(hw::event_type::INTERNAL_ERROR).bytes.data(), h);
    CHECK(r.fatals.size() == 1);
    CHECK(r.events.size() == 2);
}

TEST_CASE("handlers left empty are skipped") {
    eqe comp(hw::event_type::COMP);
    cxv::driver::dispatch_eqe(comp.bytes.data(), eq_handlers{});
    eqe port(hw::event_type::PORT_CHANGE, static_cast<std::uint8_t>(hw::port_change_subtype::ACTIVE));
    cxv::driver::dispatch_eqe(port.bytes.data(), eq_handlers{});
    CHECK(true);
}
