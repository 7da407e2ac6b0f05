// The port as a card runs it (sim/firmware/fw_port.cc): the link trains after INIT_HCA, PAOS
// admin up or a cable plugged in; an InfiniBand port then waits in Init until the
// subnet manager (the model) assigns its LID and makes it ACTIVE. Each transition is a
// PORT_CHANGE event on the EQs that subscribe to it, and every query (PAOS,
// QUERY_VPORT_STATE, QUERY_HCA_VPORT_CONTEXT, MAD_IFC PortInfo) agrees at each step.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/wqe.h"

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
constexpr std::uint32_t kRcType = 0;  // qpc.st

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
    if (h.dev().config().port == sim::port_type::IB) {
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

// The states every query reports, whatever the port type: PAOS admin and oper, the vNIC's
// and the uplink's vport state, the HCA vport context's port state (its vport_state the
// same) and physical state.
struct port_states {
    unsigned admin, oper;
    int vnic, uplink;
    unsigned state, phys;
};

void check_states(const port_view& v, const port_states& want) {
    CHECK(v.admin == want.admin);
    CHECK(v.oper == want.oper);
    CHECK(v.vnic == want.vnic);
    CHECK(v.uplink == want.uplink);
    CHECK(v.state == want.state);
    CHECK(v.vport_state == want.state);
    CHECK(v.phys == want.phys);
}

// The port down, the link not up: what every query says (phys: 2 Polling, 3 Disabled).
void check_down(H& h, unsigned admin, unsigned phys) {
    const port_view v = look(h);
    check_states(v, {.admin = admin, .oper = 2, .vnic = 0, .uplink = 0, .state = 1, .phys = phys});
    if (h.dev().config().port == sim::port_type::IB) {
        CHECK(v.mad_state == 1);
        CHECK(v.mad_phys == phys);
    }
}

// InfiniBand Init: the link is up (PAOS oper up, physical LinkUp), the vNIC is not, and
// the SM has not configured the port yet (no LID) on a first bring-up.
void check_init(H& h, bool configured_before) {
    const port_view v = look(h);
    check_states(v, {.admin = 1, .oper = 1, .vnic = 0, .uplink = 1, .state = 2, .phys = 5});
    CHECK(v.mad_state == 2);
    CHECK(v.mad_phys == 5);
    const unsigned lid = configured_before ? h.dev().config().lid : 0;
    CHECK(v.lid == lid);
    CHECK(v.mad_lid == lid);
}

void check_active(H& h) {
    const port_view v = look(h);
    check_states(v, {.admin = 1, .oper = 1, .vnic = 1, .uplink = 1, .state = 4, .phys = 5});
    if (h.dev().config().port == sim::port_type::IB) {
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
    REQUIRE(h.bring_up_link_disabled());
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

namespace {

// An RC QP of qp_env's geometry taken to RTS towards `remote` on this port's LID:
// ACK timeout 4.096 us * 2^10 (~4 ms), retry_count 2, rnr_retry 0.
void rc_to_rts(qp_env& e, std::uint32_t qpn, std::uint32_t remote) {
    using qpc = ifc::qpc;
    using ads = ifc::ads;
    for (auto op : {cmd_opcode::RST2INIT_QP, cmd_opcode::INIT2RTR_QP, cmd_opcode::RTR2RTS_QP}) {
        auto in = H::input<ifc::rst2init_qp_in>(op);
        ifc::set<ifc::rst2init_qp_in::qpn>(in.data(), qpn);
        std::byte* c = ifc::at<ifc::rst2init_qp_in::qpc>(in.data());
        std::byte* path = ifc::at<qpc::primary_address_path>(c);
        if (op == cmd_opcode::RST2INIT_QP) {
            ifc::set<ads::vhca_port_num>(path, 1);
            ifc::set<qpc::rwe>(c, 1);
        } else if (op == cmd_opcode::INIT2RTR_QP) {
            ifc::set<qpc::mtu>(c, 5);
            ifc::set<qpc::log_msg_max>(c, 30);
            ifc::set<qpc::remote_qpn>(c, remote);
            ifc::set<ads::rlid>(path, e.h.dev().config().lid);
            ifc::set<qpc::log_rra_max>(c, 2);
            ifc::set<qpc::min_rnr_nak>(c, 12);
        } else {
            ifc::set<qpc::retry_count>(c, 2);
            ifc::set<qpc::rnr_retry>(c, 0);
            ifc::set<qpc::log_sra_max>(c, 3);
            ifc::set<ads::ack_timeout>(path, 10);
        }
        REQUIRE(e.h.exec(in, 16).status == cmd_status::OK);
    }
}

// A signaled SEND of 4 inline bytes at WQE 0 of `qpn` (its send queue after the 1 KiB of
// receive WQEs in `buf`, the doorbell record in buf's second page), then the doorbell:
// the control segment's first 8 bytes in the QP's first BlueFlame register.
void send_inline(qp_env& e, dma_buffer& buf, std::uint32_t qpn) {
    hw::wqe_ctrl_seg ctrl{};
    hw::set_ctrl_seg(ctrl, 0, hw::wqe_opcode::SEND, 0, qpn, 2, hw::ctrl_cq_update);
    std::byte* wqe = buf.data() + 1024;
    std::memcpy(wqe, &ctrl, sizeof ctrl);
    const hw::be32 len = hw::be32::from(4 | hw::inline_seg_flag);
    std::memcpy(wqe + 16, &len, 4);
    std::memcpy(wqe + 20, "ping", 4);
    const hw::be32 counter = hw::be32::from(1);
    std::memcpy(buf.data() + 4096 + 4, &counter, 4);  // send counter of the record
    std::memcpy(e.h.bar() + std::size_t{e.uar} * hw::uar_page_size + hw::uar_bf_offset, &ctrl, 8);
}

// The error syndrome of the first CQE of a ring whose CQEs start invalid (0xf1), or -1.
int first_error(std::byte* ring) {
    const auto end = clock_type::now() + 3s;
    while (std::to_integer<unsigned>(ring[63]) == 0xf1 && clock_type::now() < end) std::this_thread::sleep_for(1ms);
    hw::from_device();
    const auto& e = *reinterpret_cast<const hw::err_cqe64*>(ring);
    if (hw::cqe_get_opcode(e.op_own) != hw::cqe_opcode::REQ_ERR) return -1;
    return e.syndrome;
}

}  // namespace

TEST_CASE("an RC SEND on a port that is down is retried, then RETRY_EXC_ERR; nothing is delivered") {
    qp_env e(timed({}, 20ms, 10ms));
    REQUIRE(e.h.wait_port_active());
    // A pair looped back on the port; the receiver posts no receive, so a SEND that
    // arrived would be RNR-NAKed (rnr_retry 0: RNR_RETRY_EXC_ERR) instead.
    auto pair = [&](std::byte*& ring) {
        // (Commands take mailboxes from the same allocator: buffers are named before them.)
        dma_buffer& cq = e.h.alloc(8192);
        ring = cq.data();
        for (std::size_t i = 0; i < 64; ++i) ring[i * 64 + 63] = std::byte{0xf1};
        const auto c = e.h.exec(
            create_cq_in({.log_size = 6, .uar = e.uar, .eqn = e.eq.eqn, .buf = cq.iova(), .dbr = cq.iova() + 4096}), 16);
        REQUIRE(c.status == cmd_status::OK);
        const std::uint32_t cqn = cqn_of(c);
        const auto ain = e.qp_input(kRcType, 1, 0, cqn);
        dma_buffer& abuf = e.h.last_buffer();
        const std::uint32_t a = e.create_qp(ain);
        const std::uint32_t b = e.create_qp(kRcType, 0, cqn);
        rc_to_rts(e, a, b);
        rc_to_rts(e, b, a);
        return std::pair<std::uint32_t, dma_buffer*>{a, &abuf};
    };
    std::byte* down_ring = nullptr;
    auto [qa, abuf] = pair(down_ring);
    const auto sent = e.h.dev().tracer().snapshot().packets_sent;
    e.h.dev().set_link(false);
    send_inline(e, *abuf, qa);
    CHECK(first_error(down_ring) == static_cast<int>(hw::cqe_syndrome::TRANSPORT_RETRY_EXC_ERR));
    CHECK(e.h.dev().tracer().snapshot().packets_sent - sent == 3);  // the request and 2 retries
    CHECK(std::to_integer<unsigned>(down_ring[64 + 63]) == 0xf1);  // no other completion

    // The same with the link up: the SEND arrives (and is RNR-NAKed).
    e.h.dev().set_link(true);
    REQUIRE(e.h.wait_port_active());
    std::byte* up_ring = nullptr;
    auto [qa2, abuf2] = pair(up_ring);
    send_inline(e, *abuf2, qa2);
    CHECK(first_error(up_ring) == static_cast<int>(hw::cqe_syndrome::RNR_RETRY_EXC_ERR));
}
