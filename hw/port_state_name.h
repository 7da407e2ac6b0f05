// The names of IBTA PortState (hw::ib_port_state, as hca_vport_context.port_state reports
// it), as the InfiniBand Architecture Specification's PortInfo and ibstat(8) print them.
#pragma once

#include "hw/cmd_values.h"

namespace cxv::hw {

// "Down", "Init", "Armed", "Active"; "?" for NOP and values the IBTA does not define.
constexpr const char* port_state_name(unsigned state) noexcept {
    if (state > static_cast<unsigned>(ib_port_state::ACTIVE)) return "?";
    switch (static_cast<ib_port_state>(state)) {
    case ib_port_state::DOWN: return "Down";
    case ib_port_state::INIT: return "Init";
    case ib_port_state::ARMED: return "Armed";
    case ib_port_state::ACTIVE: return "Active";
    case ib_port_state::NOP: break;
    }
    return "?";
}

}  // namespace cxv::hw
