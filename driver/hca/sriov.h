// The PF's part for its SR-IOV VFs, as Linux's mlx5_core does it on a PF (sriov.c,
// eswitch.c): enable each VF's HCA before the VFs appear on the bus (ENABLE_HCA with
// the VF's function_id), set each VF's vport as its vport group manager does (MAC,
// node GUID, admin state: MODIFY_NIC_VPORT_CONTEXT and MODIFY_VPORT_STATE with
// other_vport), and disable the VFs' HCAs once they are gone. PRM "ENABLE_HCA", "Vport
// Commands". VF n (from 1) is function_id n and vport n; the PF is vport 0.
#pragma once

#include <array>
#include <cstdint>

#include "base/result.h"
#include "driver/hca/hca.h"
#include "hw/cmd_values.h"

namespace cxv::driver::sriov {

// Whether `pf` may act on other vports (cmd_hca_cap.vport_group_manager).
bool vport_group_manager(const hca& pf) noexcept;

status enable_vf_hca(hca& pf, std::uint16_t vf);
status disable_vf_hca(hca& pf, std::uint16_t vf);

// What the PF sees of a VF's vport.
struct vf_vport {
    std::array<std::uint8_t, 6> mac{};  // the NIC vport context's permanent address; zero: none set
    std::uint64_t node_guid = 0;
    hw::vport_admin_state admin = hw::vport_admin_state::AUTO;
    hw::vport_state state = hw::vport_state::DOWN;
};
result<vf_vport> query_vf_vport(hca& pf, std::uint16_t vf);
status set_vf_mac(hca& pf, std::uint16_t vf, const std::array<std::uint8_t, 6>& mac);
status set_vf_node_guid(hca& pf, std::uint16_t vf, std::uint64_t guid);
status set_vf_admin_state(hca& pf, std::uint16_t vf, hw::vport_admin_state state);

// A locally administered unicast MAC for VF n of the PF whose MAC is `pf_mac`: the PF's
// with the local bit set and VF n in the last two bytes' sum, as an operator's
// `ip link set PF vf N mac` scheme commonly does. Distinct for distinct n below 65536.
std::array<std::uint8_t, 6> vf_mac_of(const std::array<std::uint8_t, 6>& pf_mac, std::uint16_t vf) noexcept;

}  // namespace cxv::driver::sriov
