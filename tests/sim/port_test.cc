// The port as a card runs it (sim/fw_port.cc): the link trains after INIT_HCA, PAOS
// admin up or a cable plugged in; an InfiniBand port then waits in Init until the
// subnet manager (the model) assigns its LID and makes it ACTIVE. Each transition is a
// PORT_CHANGE event on the EQs that subscribe to it, and every query (PAOS,
// QUERY_VPORT_STATE, QUERY_HCA_VPORT_CONTEXT, MAD_IFC PortInfo) agrees at each step.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>

#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kPortBit = 1ull << static_cast<unsigned>(hw::event_type::PORT_CHANGE);
constexpr std::uint64_t kCqErrorBit = 1ull << static_cast<unsigned>(hw::event_type::CQ_ERROR);
// PORT_CHANGE subtypes (Linux MLX5_PORT_CHANGE_SUBTYPE_*).
constexpr unsigned kDown = 1, kActive = 4, kInitialized = 5;

// Everything the driver can read about the port, at one moment.
struct port_view {
    unsigned admin = 0, oper = 0;          // PAOS: 1 up, 2 down
    int vnic = -1, uplink = -1;            // QUERY_VPORT_STATE op_mod 0 and 2: 1 up
    unsigned state = 0, phys = 0;          // hca_vport_context port_state, port_physical_state
    unsigned vport_state = 0, lid = 0, sm_lid = 0;
    unsigned mad_state = 0, mad_phys = 0, mad_lid = 0;  // PortInfo (InfiniBand only)
};

cmd_result paos(H& h, bool write, unsigned admin = 0) {
    auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, write ? 0 : 1, ifc::paos_reg::size_bytes);
    ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5006);
    std::byte* r = ifc::at<ifc::access_register_in::register_data>(in.data());
    ifc::set<ifc::paos_reg::local_port>(r, 1);
    if (write) {
        ifc::set<ifc::paos_reg::admin_status>(r, admin);
        ifc::set<ifc::paos_reg::ase>(r, 1);
    }
    return h.exec(in, ifc::access_register_out::size_bytes + ifc::paos_reg::size_bytes);
}

int vport_state(H& h, std::uint16_t op_mod) {
    auto r = h.exec(H::input<ifc::query_vport_state_in>(cmd_opcode::QUERY_VPORT_STATE, op_mod),
                    ifc::query_vport_state_out::size_bytes);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(ifc::get<ifc::query_vport_state_out::admin_state>(r.out.data()) == 2);  // follows the uplink
    return static_cast<int>(ifc::get<ifc::query_vport_state_out::state>(r.out.data()));
}

port_view look(H& h) {
    port_view v;
    auto p = paos(h, false);
    REQUIRE(p.status == cmd_status::OK);
    const std::byte* reg = ifc::at<ifc::access_register_out::register_data>(p.out.data());
    v.admin = ifc::get<ifc::paos_reg::admin_status>(reg);
    v.oper = ifc::get<ifc::paos_reg::oper_status>(reg);
    v.vnic = vport_state(h, 0);
    v.uplink = vport_state(h, 2);
    auto c = h.exec(H::input<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT),
                    ifc::query_hca_vport_context_out::size_bytes);
    REQUIRE(c.status == cmd_status::OK);
    using hv = ifc::hca_vport_context;
    const std::byte* ctx = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(c.out.data());
    v.state = ifc::get<hv::port_state>(ctx);
    v.phys = ifc::get<hv::port_physical_state>(ctx);
    v.vport_state = ifc::get<hv::vport_state>(ctx);
    v.lid = ifc::get<hv::lid>(ctx);
    v.sm_lid = ifc::get<hv::sm_lid>(ctx);
    if (h.dev().config().port == sim::port_type::infiniband) {
        auto in = H::input<ifc::mad_ifc_in>(cmd_opcode::MAD_IFC);
        ifc::set<ifc::mad_ifc_in::port>(in.data(), 1);
        std::byte* mad = ifc::at<ifc::mad_ifc_in::mad>(in.data());
        mad[0] = mad[1] = mad[2] = mad[3] = std::byte{1};  // base version, SMP class, version, Get
        mad[17] = std::byte{0x15};                          // PortInfo
        auto m = h.exec(in, ifc::mad_ifc_out::size_bytes);
        REQUIRE(m.status == cmd_status::OK);
        const std::byte* d = ifc::at<ifc::mad_ifc_out::response_mad_packet>(m.out.data()) + 64;
        v.mad_lid = std::to_integer<unsigned>(d[16]) << 8 | std::to_integer<unsigned>(d[17]);
        v.mad_state = std::to_integer<unsigned>(d[32]) & 0xf;
        v.mad_phys = std::to_integer<unsigned>(d[33]) >> 4;
    }
    return v;
}

// The port down, the link not up: what every query says (phys: 2 Polling, 3 Disabled).
void check_down(H& h, unsigned admin, unsigned phys) {
    const port_view v = look(h);
    CHECK(v.admin == admin);
    CHECK(v.oper == 2);
    CHECK(v.vnic == 0);
    CHECK(v.uplink == 0);
    CHECK(v.state == 1);
    CHECK(v.vport_state == 1);
    CHECK(v.phys == phys);
    if (h.dev().config().port == sim::port_type::infiniband) {
        CHECK(v.mad_state == 1);
        CHECK(v.mad_phys == phys);
    }
}

// InfiniBand Init: the link is up (PAOS oper up, physical LinkUp), the vNIC is not, and
// the SM has not configured the port yet (no LID) on a first bring-up.
void check_init(H& h, bool configured_before) {
    const port_view v = look(h);
    CHECK(v.admin == 1);
    CHECK(v.oper == 1);
    CHECK(v.vnic == 0);
    CHECK(v.uplink == 1);
    CHECK(v.state == 2);
    CHECK(v.vport_state == 2);
    CHECK(v.phys == 5);
    CHECK(v.mad_state == 2);
    CHECK(v.mad_phys == 5);
    const unsigned lid = configured_before ? h.dev().config().lid : 0;
    CHECK(v.lid == lid);
    CHECK(v.mad_lid == lid);
}

void check_active(H& h) {
    const port_view v = look(h);
    CHECK(v.admin == 1);
    CHECK(v.oper == 1);
    CHECK(v.vnic == 1);
    CHECK(v.uplink == 1);
    CHECK(v.state == 4);
    CHECK(v.vport_state == 4);
    CHECK(v.phys == 5);
    if (h.dev().config().port == sim::port_type::infiniband) {
        CHECK(v.lid == h.dev().config().lid);
        CHECK(v.sm_lid == 1);
        CHECK(v.mad_state == 4);
        CHECK(v.mad_lid == h.dev().config().lid);
    } else {
        CHECK(v.lid == 0);
    }
}

sim::device_config timed(sim::device_config cfg, std::chrono::milliseconds link, std::chrono::milliseconds sm) {
    cfg.link_up_time = link;
    cfg.sm_sweep_time = sm;
    return cfg;
}

// Boot .. INIT_HCA, the PRM way; returns when INIT_HCA was sent.
clock_type::time_point bring_up(H& h) {
    boot_and_enable(h);
    REQUIRE(h.set_issi(1).status == cmd_status::OK);
    REQUIRE(h.give_pages(1).status == cmd_status::OK);
    REQUIRE(h.give_pages(2).status == cmd_status::OK);
    const auto t = clock_type::now();
    REQUIRE(h.init_hca().status == cmd_status::OK);
    return t;
}

// The next PORT_CHANGE EQE within `wait`: its subtype (0 if none), and when it was seen.
struct seen_event {
    unsigned sub = 0;
    clock_type::time_point at;
};
seen_event next_port_event(H& h, H::eq& e, std::chrono::milliseconds wait = 3s) {
    auto ev = h.wait_eqe(e, wait);
    seen_event s{0, clock_type::now()};
    if (!ev) return s;
    CHECK(ifc::get<ifc::eqe::event_type>(ev->data()) == static_cast<unsigned>(hw::event_type::PORT_CHANGE));
    CHECK(ifc::get<ifc::port_state_change_event::port_num>(ifc::at<ifc::eqe::event_data>(ev->data())) == 1);
    s.sub = ifc::get<ifc::eqe::event_sub_type>(ev->data());
    return s;
}

}  // namespace

TEST_CASE("InfiniBand: Down until trained, Init until the SM's sweep, then Active; events only where subscribed") {
    H h(timed({}, 200ms, 600ms));
    const auto t0 = bring_up(h);
    const auto uar = h.alloc_uar();
    H::eq port_eq, other_eq;
    REQUIRE(h.create_eq(port_eq, uar, 4, kPortBit, 0).status == cmd_status::OK);
    REQUIRE(h.create_eq(other_eq, uar, 4, kCqErrorBit, 1).status == cmd_status::OK);
    h.arm_eq(port_eq);
    check_down(h, 1, 2);  // training: Polling

    const auto init = next_port_event(h, port_eq);
    REQUIRE(init.sub == kInitialized);
    CHECK(init.at - t0 >= 200ms);
    CHECK(h.read_eventfd(port_eq.fd) == 1);  // armed: the vector fired
    check_init(h, false);
    h.arm_eq(port_eq);

    const auto active = next_port_event(h, port_eq);
    REQUIRE(active.sub == kActive);
    CHECK(active.at - init.at >= 500ms);  // the sweep (600 ms) less how late the Init was seen
    check_active(h);
    CHECK_FALSE(h.next_eqe(other_eq));  // not subscribed to PORT_CHANGE: nothing

    // PAOS down: down at once, physically Disabled; one DOWN event.
    REQUIRE(paos(h, true, 2).status == cmd_status::OK);
    CHECK(next_port_event(h, port_eq).sub == kDown);
    check_down(h, 2, 3);
    // PAOS up: training again; nothing before the link-up time, then Init (the SM's LID
    // stays assigned) and Active.
    const auto t1 = clock_type::now();
    REQUIRE(paos(h, true, 1).status == cmd_status::OK);
    check_down(h, 1, 2);
    const auto again = next_port_event(h, port_eq);
    REQUIRE(again.sub == kInitialized);
    CHECK(again.at - t1 >= 200ms);
    check_init(h, true);
    CHECK(next_port_event(h, port_eq).sub == kActive);
    check_active(h);
    CHECK_FALSE(h.next_eqe(other_eq));
    CHECK_FALSE(h.next_eqe(port_eq));  // one event per transition
}

TEST_CASE("Ethernet: Down until trained, then Active with one event; the NIC vport's MTU is PMTU's") {
    H h(timed(ethernet(), 150ms, 0ms));
    const auto t0 = bring_up(h);
    const auto uar = h.alloc_uar();
    H::eq e;
    REQUIRE(h.create_eq(e, uar, 4, kPortBit, 0).status == cmd_status::OK);
    check_down(h, 1, 2);
    const auto up = next_port_event(h, e);
    REQUIRE(up.sub == kActive);
    CHECK(up.at - t0 >= 150ms);
    check_active(h);
    CHECK_FALSE(h.next_eqe(e));  // no Init on Ethernet

    // PMTU's admin MTU is what the NIC vport reports while the driver has set none.
    auto pmtu = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, ifc::pmtu_reg::size_bytes);
    ifc::set<ifc::access_register_in::register_id>(pmtu.data(), 0x5003);
    std::byte* reg = ifc::at<ifc::access_register_in::register_data>(pmtu.data());
    ifc::set<ifc::pmtu_reg::local_port>(reg, 1);
    ifc::set<ifc::pmtu_reg::admin_mtu>(reg, 4200);
    REQUIRE(h.exec(pmtu, ifc::access_register_out::size_bytes + ifc::pmtu_reg::size_bytes).status == cmd_status::OK);
    auto nic = h.exec(H::input<ifc::query_nic_vport_context_in>(cmd_opcode::QUERY_NIC_VPORT_CONTEXT),
                      ifc::query_nic_vport_context_out::size_bytes);
    REQUIRE(nic.status == cmd_status::OK);
    const std::byte* ctx = ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(nic.out.data());
    CHECK(ifc::get<ifc::nic_vport_context::mtu>(ctx) == 4200);

    // The cable: out is down at once, in trains again.
    h.dev().set_link(false);
    CHECK(next_port_event(h, e).sub == kDown);
    check_down(h, 1, 2);
    const auto t1 = clock_type::now();
    h.dev().set_link(true);
    const auto back = next_port_event(h, e);
    REQUIRE(back.sub == kActive);
    CHECK(back.at - t1 >= 150ms);
    check_active(h);
}

TEST_CASE("disable_link_up: the link stays down after INIT_HCA until PAOS brings it up") {
    H h(timed({}, 50ms, 20ms));
    boot_and_enable(h);
    REQUIRE(h.set_issi(1).status == cmd_status::OK);
    REQUIRE(h.give_pages(1).status == cmd_status::OK);
    auto cur = h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), ifc::query_hca_cap_out::size_bytes);
    REQUIRE(cur.status == cmd_status::OK);
    auto in = H::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0);
    std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(in.data());
    std::memcpy(cap, ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data()), ifc::cmd_hca_cap::size_bytes);
    ifc::set<ifc::cmd_hca_cap::disable_link_up>(cap, 1);
    REQUIRE(h.exec(in, 16).status == cmd_status::OK);
    REQUIRE(h.give_pages(2).status == cmd_status::OK);
    REQUIRE(h.init_hca().status == cmd_status::OK);
    H::eq e;
    REQUIRE(h.create_eq(e, h.alloc_uar(), 4, kPortBit, 0).status == cmd_status::OK);
    check_down(h, 2, 3);
    // Well past the link-up time: still down, no event (a bounded look, not a sleep).
    CHECK(next_port_event(h, e, 300ms).sub == 0);
    check_down(h, 2, 3);
    REQUIRE(paos(h, true, 1).status == cmd_status::OK);
    CHECK(next_port_event(h, e).sub == kInitialized);
    CHECK(next_port_event(h, e).sub == kActive);
    check_active(h);
}

TEST_CASE("TEARDOWN_HCA puts the port down; the next INIT_HCA trains it again") {
    H h(timed({}, 30ms, 10ms));
    bring_up(h);
    REQUIRE(h.wait_port_active());
    REQUIRE(h.simple(cmd_opcode::TEARDOWN_HCA).status == cmd_status::OK);
    REQUIRE(h.init_hca().status == cmd_status::OK);
    check_down(h, 1, 2);  // training again, the SM's LID forgotten
    REQUIRE(h.wait_port_active());
    check_active(h);
}

TEST_CASE("QUERY_VPORT_STATE: only the function's own vNIC vport and the uplink") {
    H h(timed({}, 0ms, 0ms));
    bring_up(h);
    REQUIRE(h.wait_port_active());
    auto in = H::input<ifc::query_vport_state_in>(cmd_opcode::QUERY_VPORT_STATE, 1);  // an eswitch vport
    check_status(h.exec(in, ifc::query_vport_state_out::size_bytes), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    in = H::input<ifc::query_vport_state_in>(cmd_opcode::QUERY_VPORT_STATE, 0);
    ifc::set<ifc::query_vport_state_in::other_vport>(in.data(), 1);
    ifc::set<ifc::query_vport_state_in::vport_number>(in.data(), 1);
    check_status(h.exec(in, ifc::query_vport_state_out::size_bytes), cmd_status::BAD_PARAM,
                 cmd_syndrome::UNKNOWN_RESOURCE);
}
