// The function's vport and its port's addresses: QUERY_VPORT_STATE, the HCA vport
// queries, QUERY/MODIFY_NIC_VPORT_CONTEXT and MAD_IFC (fw_vport.cc); SET_ROCE_ADDRESS
// and QUERY_ROCE_ADDRESS, the RoCE GID table (fw_roce.cc). Every answer follows the
// port's state at that moment (sim/device_port.h).
#pragma once

#include <array>
#include <cstdint>

#include "hw/ifc.h"
#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_reg.h"
#include "sim/objects/tables.h"
#include "sim/vport_links.h"

namespace cxv::sim {

class vport_commands {
public:
    vport_commands(const device_config& cfg, const hca_caps& caps, const access_registers& regs,
                   const device_port& port, object_tables& tables)
        : cfg_(cfg), caps_(caps), regs_(regs), port_(port), roce_addresses_(tables.roce_addresses),
          filter_(tables.eth.filter) {}

    cmd_reply query_vport_state(cmd_ctx& c);
    cmd_reply modify_vport_state(cmd_ctx& c);
    cmd_reply query_hca_vport_context(cmd_ctx& c);
    cmd_reply query_hca_vport_gid(cmd_ctx& c);
    cmd_reply query_hca_vport_pkey(cmd_ctx& c);
    cmd_reply query_nic_vport_context(cmd_ctx& c);
    cmd_reply modify_nic_vport_context(cmd_ctx& c);
    cmd_reply mad_ifc(cmd_ctx& c);
    cmd_reply set_roce_address(cmd_ctx& c);
    cmd_reply query_roce_address(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: the vport context back to its defaults, and the
    // GID table the driver's to program again.
    void release_all();

private:
    // The vport a command names (PRM "Vport Commands"): 0 the function's own (other_vport
    // 0, or vport 0 named by its vport group manager), n VF n's (other_vport 1, for a
    // vport group manager, n from 1 to TotalVFs). Anything else is not the function's:
    // BAD_PARAM, UNKNOWN_RESOURCE.
    template <typename In>
    cmd_reply target(const cmd_ctx& c, unsigned& vport) const;
    bool group_manager() const noexcept;
    // What the vport's manager set (admin_state), for the function's own vport: a VF's
    // from its PF's record, AUTO otherwise.
    hw::vport_admin_state own_admin() const;

    const device_config& cfg_;
    const hca_caps& caps_;
    const access_registers& regs_;  // the port's MTU (PMTU)
    const device_port& port_;
    // The RoCE GID table by index (fw_roce.cc); empty on InfiniBand and after teardown.
    std::map<std::uint32_t, roce_address>& roce_addresses_;
    // The NIC vport context fields MODIFY_NIC_VPORT_CONTEXT sets (roce_en, mtu, promisc_*);
    // all zero at power-on and after release_all().
    std::array<std::byte, hw::ifc::nic_vport_context::size_bytes> nic_vport_{};
    // The promiscuous modes and address lists, where the port's filter reads them.
    vport_filter& filter_;
};

}  // namespace cxv::sim
