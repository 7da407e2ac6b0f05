// The PF's records of its VFs' vports (PRM "Vport Commands" with other_vport 1), held
// where every process of a run sees them (the presentation layer's binding file), since
// a PF's and its VFs' models may run in different processes, as a card's functions serve
// different drivers. The PF's firmware reads and writes VF n's record (vport n, from 1);
// a VF's firmware reads its own. A VF's model takes its MAC and node GUID from its record
// when it is made (at its group's open): its wire address is fixed for its life, so a
// MAC set while the VF is open shows at its next open, as a VF driver that ignores the
// NIC_VPORT_CHANGE event sees it.
#pragma once

#include <array>
#include <cstdint>

#include "hw/cmd_values.h"

namespace cxv::sim {

struct vport_record {
    std::array<std::uint8_t, 6> mac{};  // the VF's permanent address
    std::uint64_t node_guid = 0;  // its port GUID is node_guid + 1, as every function's in the model
    hw::vport_admin_state admin = hw::vport_admin_state::AUTO;
};

class vport_links {
public:
    virtual ~vport_links() = default;
    // PF: VF n's record (vport n, 1 to TotalVFs).
    virtual vport_record vf(unsigned n) const = 0;
    virtual void set_vf(unsigned n, const vport_record& r) = 0;
    // VF: its own record.
    virtual vport_record own() const = 0;
};

}  // namespace cxv::sim
