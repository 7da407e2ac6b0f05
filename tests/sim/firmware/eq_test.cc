// Event queues: creation checks, the owner-bit protocol, arming, MSI-X, command
// completion events, port events, overrun.
#include <chrono>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kCmdBit = 1ull << 0x0a;
constexpr std::uint64_t kPageReqBit = 1ull << 0x0b;
constexpr std::uint64_t kPortBit = 1ull << 0x09;

std::uint64_t wait_fd(H& h, int fd, std::chrono::milliseconds t = 1000ms) {
    const auto end = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < end) {
        if (auto v = h.read_eventfd(fd)) return v;
        std::this_thread::sleep_for(1ms);
    }
    return 0;
}

}  // namespace

TEST_CASE("CREATE_EQ checks its UAR, size, vector and page list") {
    H h;
    REQUIRE(h.bring_up());
    const auto uar = h.alloc_uar();
    REQUIRE(uar >= h.dev().config().first_uar);
    H::eq e;
    CHECK(h.create_eq(e, uar + 100, 4, kCmdBit, 0).synd() == cmd_syndrome::BAD_UAR);
    CHECK(h.create_eq(e, uar, 23, kCmdBit, 0).synd() == cmd_syndrome::LOG_SIZE_TOO_BIG);
    CHECK(h.create_eq(e, uar, 4, kCmdBit, 999).synd() == cmd_syndrome::BAD_PARAMETER);
    auto r = h.create_eq(e, uar, 4, kCmdBit, 0);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(e.eqn != 0);
    // A 16 KiB EQ needs 4 pages; a list of 1 is too short.
    auto in = H::input<ifc::create_eq_in>(cmd_opcode::CREATE_EQ, 0, 8);
    std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
    ifc::set<ifc::eqc::log_eq_size>(eqc, 8);
    ifc::set<ifc::eqc::uar_page>(eqc, uar);
    auto s = h.exec(in, 16);
    CHECK(s.status == cmd_status::BAD_INPUT_LEN);
    CHECK(s.synd() == cmd_syndrome::PAS_TOO_SHORT);
    // The UAR is in use by the EQ.
    CHECK(dealloc_uar(h, uar).status == cmd_status::RESOURCE_BUSY);
}

TEST_CASE("command completions: a CMD EQE per command, an interrupt only when armed") {
    eq_env env(4, kCmdBit);
    auto& [h, uar, e] = env;
    // Not armed yet: commands produce EQEs but no interrupt.
    REQUIRE(h.exec(H::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112, {.slot = 3}).status ==
            cmd_status::OK);
    auto eqe = h.wait_eqe(e);
    REQUIRE(eqe);
    CHECK(ifc::get<ifc::eqe::event_type>(eqe->data()) == 0x0a);
    CHECK(ifc::get<ifc::cmd_inter_comp_event::command_completion_vector>(
              ifc::at<ifc::eqe::event_data>(eqe->data())) == (1u << 3));
    CHECK(h.read_eventfd(e.fd) == 0);
    // Armed: the next completion raises vector 0 once, then the EQ is disarmed.
    h.arm_eq(e);
    REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    CHECK(wait_fd(h, e.fd) == 1);
    REQUIRE(h.wait_eqe(e));
    REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    REQUIRE(h.wait_eqe(e));
    std::this_thread::sleep_for(20ms);
    CHECK(h.read_eventfd(e.fd) == 0);
}

TEST_CASE("owner bits flip on each pass around the EQ") {
    eq_env env(2, kCmdBit);  // 4 entries
    auto& [h, uar, e] = env;
    for (int i = 0; i < 10; ++i) {
        REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
        REQUIRE(h.wait_eqe(e));
        h.arm_eq(e);  // report the consumer index so the EQ never overruns
        (void)wait_fd(h, e.fd, 0ms);
    }
    CHECK(e.ci == 10);
}

TEST_CASE("an EQ the driver does not consume overruns and stops") {
    eq_env env(2, kCmdBit);
    auto& [h, uar, e] = env;
    for (int i = 0; i < 6; ++i) REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    CHECK(h.dev().tracer().snapshot().eq_overruns >= 1);
    auto q = H::input<ifc::query_eq_in>(cmd_opcode::QUERY_EQ);
    ifc::set<ifc::query_eq_in::eq_number>(q.data(), e.eqn);
    auto r = h.exec(q, ifc::query_eq_out::size_bytes + 8);
    REQUIRE(r.status == cmd_status::OK);
    const std::byte* eqc = ifc::at<ifc::query_eq_out::eq_context_entry>(r.out.data());
    CHECK(ifc::get<ifc::eqc::status>(eqc) == 0xa);
    CHECK(ifc::get<ifc::eqc::log_eq_size>(eqc) == 2);
    CHECK(ifc::get<ifc::query_eq_out::pas>(r.out.data(), 0) == e.buf->iova());
}

TEST_CASE("QUERY_EQ reports the arming state and the counters where Linux reads them") {
    eq_env env(4, kPortBit);
    auto& [h, uar, e] = env;
    auto eqc = [&] {
        auto q = H::input<ifc::query_eq_in>(cmd_opcode::QUERY_EQ);
        ifc::set<ifc::query_eq_in::eq_number>(q.data(), e.eqn);
        auto r = h.exec(q, ifc::query_eq_out::size_bytes + 8);
        REQUIRE(r.status == cmd_status::OK);
        const std::byte* c = ifc::at<ifc::query_eq_out::eq_context_entry>(r.out.data());
        return std::vector<std::byte>(c, c + ifc::eqc::size_bytes);
    };
    constexpr std::uint32_t kArmed = 0x9, kFired = 0xa;  // Linux MLX5_EQC_ST_*
    // The link trains after INIT_HCA: take its events (Init, Active) first.
    REQUIRE(h.wait_port_active());
    std::uint32_t events = 0;
    while (h.next_eqe(e)) ++events;
    CHECK(events == 2);
    auto st = [&] { return CXV_LINUX_GET(eqc, eqc().data(), st); };
    CHECK(st() == kFired);  // not armed: no interrupt
    h.arm_eq(e);
    std::uint32_t now = 0;
    for (int i = 0; i < 5000 && (now = st()) != kArmed; ++i) std::this_thread::sleep_for(1ms);
    CHECK(now == kArmed);
    h.dev().set_link(false);  // a PORT_CHANGE event fires the armed EQ
    REQUIRE(h.wait_eqe(e));
    const auto c = eqc();
    CHECK(CXV_LINUX_GET(eqc, c.data(), st) == kFired);
    CHECK(CXV_LINUX_GET(eqc, c.data(), producer_counter) == events + 1);
    CHECK(CXV_LINUX_GET(eqc, c.data(), log_eq_size) == 4);
    CHECK(CXV_LINUX_GET(eqc, c.data(), status) == 0);
}

TEST_CASE("PAOS down and up raise PORT_CHANGE events") {
    eq_env env(4, kPortBit | kPageReqBit, 1);
    auto& [h, uar, e] = env;
    // The link comes up after INIT_HCA: Init, then Active (InfiniBand).
    REQUIRE(h.wait_port_active());
    for (unsigned sub : {5u, 4u}) {
        auto ev = h.wait_eqe(e);
        REQUIRE(ev);
        CHECK(ifc::get<ifc::eqe::event_sub_type>(ev->data()) == sub);
    }
    h.arm_eq(e);
    auto paos = [&](unsigned admin) {
        auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, 16);
        ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5006);
        std::byte* r = ifc::at<ifc::access_register_in::register_data>(in.data());
        ifc::set<ifc::paos_reg::local_port>(r, 1);
        ifc::set<ifc::paos_reg::admin_status>(r, admin);
        ifc::set<ifc::paos_reg::ase>(r, 1);
        return h.exec(in, 32);
    };
    REQUIRE(paos(2).status == cmd_status::OK);
    CHECK(wait_fd(h, e.fd) == 1);
    auto down = h.wait_eqe(e);
    REQUIRE(down);
    CHECK(ifc::get<ifc::eqe::event_type>(down->data()) == 0x09);
    CHECK(ifc::get<ifc::eqe::event_sub_type>(down->data()) == 1);
    CHECK(ifc::get<ifc::port_state_change_event::port_num>(ifc::at<ifc::eqe::event_data>(down->data())) == 1);
    h.arm_eq(e);
    REQUIRE(paos(1).status == cmd_status::OK);  // up again: the link trains, then Init and Active
    for (unsigned sub : {5u, 4u}) {
        auto up = h.wait_eqe(e);
        REQUIRE(up);
        CHECK(ifc::get<ifc::eqe::event_sub_type>(up->data()) == sub);
    }
}

TEST_CASE("DESTROY_EQ: the EQ is gone, and its own completion writes no EQE") {
    eq_env env(4, kCmdBit);
    auto& [h, uar, e] = env;
    const auto eqes = h.dev().tracer().snapshot().eqes;
    REQUIRE(destroy_eq(h, e.eqn).status == cmd_status::OK);
    CHECK(h.dev().tracer().snapshot().eqes == eqes);
    CHECK(destroy_eq(h, e.eqn).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(h.dev().eq_count() == 0);
}

TEST_CASE("UAR and PD: numbers are unique, foreign or unknown ones are refused") {
    H h;
    REQUIRE(h.bring_up());
    const auto a = h.alloc_uar(), b = h.alloc_uar();
    CHECK(a != b);
    auto pd1 = h.simple(cmd_opcode::ALLOC_PD), pd2 = h.simple(cmd_opcode::ALLOC_PD);
    const auto p1 = ifc::get<ifc::alloc_pd_out::pd>(pd1.out.data());
    const auto p2 = ifc::get<ifc::alloc_pd_out::pd>(pd2.out.data());
    CHECK(p1 != p2);
    CHECK(p1 != 0);
    CHECK(dealloc_pd(h, p1, 5).synd() == cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(dealloc_pd(h, p1).status == cmd_status::OK);
    CHECK(dealloc_pd(h, p1).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("fault injection: a completion without its CMD EQE; PAGE_REQUEST events on demand") {
    eq_env env(4, kCmdBit | kPageReqBit);
    auto& [h, uar, e] = env;
    h.dev().faults().suppress_event(cmd_opcode::QUERY_ISSI);
    REQUIRE(h.exec(H::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112, {.slot = 1}).status ==
            cmd_status::OK);
    CHECK_FALSE(h.wait_eqe(e, 100ms));  // the command completed, the event is lost
    // Only that one: the next command has its event again.
    REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    REQUIRE(h.wait_eqe(e));

    h.dev().request_pages(-7);
    auto eqe = h.wait_eqe(e);
    REQUIRE(eqe);
    CHECK(ifc::get<ifc::eqe::event_type>(eqe->data()) == 0x0b);
    CHECK(static_cast<std::int32_t>(ifc::get<ifc::pages_req_event::num_pages>(
              ifc::at<ifc::eqe::event_data>(eqe->data()))) == -7);
}

TEST_CASE("take_doorbells: two EQs armed back to back through one UAR register are both armed") {
    // A transport that delivers each posted write as a message (sim/uml) has the model
    // take a register's value before the next write lands on it, rather than waiting for
    // the model thread: the register is empty when the call returns, and what it held
    // took effect.
    H h;
    REQUIRE(h.bring_up());
    const auto uar = h.alloc_uar();
    H::eq a, b;
    REQUIRE(h.create_eq(a, uar, 4, kCmdBit, 0).status == cmd_status::OK);
    REQUIRE(h.create_eq(b, uar, 4, kCmdBit, 1).status == cmd_status::OK);
    // The commands above completed into both EQs: consume, so that arming raises nothing.
    while (h.wait_eqe(a, 50ms)) {
    }
    while (h.wait_eqe(b, 50ms)) {
    }
    const std::size_t arm = std::size_t{uar} * 4096 + 0x40;
    h.arm_eq(a);
    h.dev().take_doorbells();
    CHECK(h.bar_load32(arm) == 0);
    h.arm_eq(b);
    h.dev().take_doorbells();
    CHECK(h.bar_load32(arm) == 0);
    REQUIRE(h.simple(cmd_opcode::ALLOC_PD).status == cmd_status::OK);
    CHECK(wait_fd(h, a.fd) == 1);
    CHECK(wait_fd(h, b.fd) == 1);
    CHECK(h.wait_eqe(a));
    CHECK(h.wait_eqe(b));
}
