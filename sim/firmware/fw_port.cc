// The port: administrative and operational state (PRM PAOS), link training, the subnet
// manager's configuration of an InfiniBand port, and the PORT_CHANGE event of each
// transition (PRM "Port State Change Event"; subtypes as Linux's
// MLX5_PORT_CHANGE_SUBTYPE_*).
//
// A card's link is not up when INIT_HCA returns: it trains first. Ethernet goes
// DOWN -> ACTIVE when trained. InfiniBand goes DOWN -> INITIALIZED (physical LinkUp,
// logical Init) when trained, then ACTIVE once the subnet manager has swept the port and
// assigned its LID; the model plays the SM. Only traffic of an ACTIVE port reaches the
// wire (IBA 7.2: a port in Init passes subnet management packets only).
#include <array>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/firmware.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using clock_type = std::chrono::steady_clock;

namespace {

// IBTA PortInfo:PortPhysicalState (PortState is hw::ib_port_state).
enum : unsigned { phys_polling = 2, phys_disabled = 3, phys_link_up = 5 };

}  // namespace

void firmware::port_enter(port_phase next, clock_type::time_point now) {
    const port_phase prev = port_phase_;
    if (next == prev) return;
    port_phase_ = next;
    port_up_ = next == port_phase::init || next == port_phase::active;
    if (next == port_phase::training) port_step_at_ = now + cfg_.link_up_time;
    if (next == port_phase::init) port_step_at_ = now + cfg_.sm_sweep_time;
    if (next == port_phase::active && cfg_.port == port_type::infiniband) port_configured_ = true;

    // One event per change of the state a driver sees: training is still down.
    std::optional<hw::port_change_subtype> sub;
    switch (next) {
    case port_phase::down:
    case port_phase::training:
        if (prev == port_phase::init || prev == port_phase::active) {
            sub = hw::port_change_subtype::DOWN;
            ++port_stats_.link_down_events;  // PPCNT physical layer group
        }
        break;
    case port_phase::init: sub = hw::port_change_subtype::INITIALIZED; break;
    case port_phase::active: sub = hw::port_change_subtype::ACTIVE; break;
    }
    if (!sub) return;
    std::array<std::byte, ifc::port_state_change_event::size_bytes> d{};
    ifc::set<ifc::port_state_change_event::port_num>(d.data(), 1);
    post_event(hw::event_type::PORT_CHANGE, static_cast<std::uint8_t>(*sub), d);
}

// The link trains when the function is initialized, PAOS says up and a cable is in.
void firmware::port_set_admin(bool up) {
    port_admin_up_ = up;
    const auto now = clock_type::now();
    if (!up) {
        port_enter(port_phase::down, now);
    } else if (port_phase_ == port_phase::down && port_cable_ && state_ == hca_state::initialized) {
        port_enter(port_phase::training, now);
    }
}

void firmware::port_set_cable(bool in) {
    port_cable_ = in;
    const auto now = clock_type::now();
    if (!in) {
        port_enter(port_phase::down, now);
    } else if (port_phase_ == port_phase::down && port_admin_up_ && state_ == hca_state::initialized) {
        port_enter(port_phase::training, now);
    }
}

void firmware::port_on_init_hca(bool link_up_disabled) {
    // disable_link_up: rdma-core's disable_link_up_by_init_hca, which its VFIO provider
    // sets for MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN ("link should stay down").
    if (link_up_disabled) {
        port_admin_up_ = false;
        return;
    }
    port_admin_up_ = true;
    if (port_cable_) port_enter(port_phase::training, clock_type::now());
}

void firmware::port_stop() {
    port_phase_ = port_phase::down;
    port_up_ = false;
    port_configured_ = false;
}

bool firmware::port_tick(clock_type::time_point now) {
    if (now < port_step_at_) return false;
    switch (port_phase_) {
    case port_phase::training:
        port_enter(cfg_.port == port_type::infiniband ? port_phase::init : port_phase::active, now);
        return true;
    case port_phase::init:
        port_enter(port_phase::active, now);  // the SM's sweep: LID assigned, port ACTIVE
        return true;
    default:
        return false;
    }
}

unsigned firmware::port_admin_status() const noexcept { return port_admin_up_ ? 1 : 2; }

unsigned firmware::port_oper_status() const noexcept { return port_up_ ? 1 : 2; }

unsigned firmware::port_logical_state() const noexcept {
    switch (port_phase_) {
    case port_phase::init: return static_cast<unsigned>(hw::ib_port_state::INIT);
    case port_phase::active: return static_cast<unsigned>(hw::ib_port_state::ACTIVE);
    default: return static_cast<unsigned>(hw::ib_port_state::DOWN);
    }
}

unsigned firmware::port_physical_state() const noexcept {
    if (port_up_) return phys_link_up;
    return port_admin_up_ ? phys_polling : phys_disabled;
}

}  // namespace cxv::sim
