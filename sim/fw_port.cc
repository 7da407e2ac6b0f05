// The port: administrative and operational state (PRM PAOS), link training and the
// PORT_CHANGE events of each transition (PRM "Port State Change Event").
#include "sim/firmware.h"

namespace cxv::sim {

void firmware::port_set_admin(bool up) {
    port_admin_up_ = up;
    set_port_up(up);
}

unsigned firmware::port_admin_status() const noexcept { return port_admin_up_ ? 1 : 2; }

unsigned firmware::port_oper_status() const noexcept { return port_up_ ? 1 : 2; }

}  // namespace cxv::sim
