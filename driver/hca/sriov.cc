// The PF's commands on its VFs' behalf (sriov.h). PRM "ENABLE_HCA", "DISABLE_HCA",
// "QUERY_VPORT_STATE", "MODIFY_VPORT_STATE", "QUERY/MODIFY_NIC_VPORT_CONTEXT".
#include "driver/hca/sriov.h"

#include "hw/ifc.h"
#include "hw/mac.h"
#include "hw/opcodes.h"

namespace cxv::driver::sriov {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

// MODIFY_NIC_VPORT_CONTEXT of vport `vf` with the one field `Select` chose.
template <typename Select, typename Fill>
status modify_nic_vport(hca& pf, std::uint16_t vf, Fill fill) {
    using in_t = ifc::modify_nic_vport_context_in;
    auto in = command<in_t>(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT);
    ifc::set<in_t::other_vport>(in.data(), 1);
    ifc::set<in_t::vport_number>(in.data(), vf);
    ifc::set<Select>(ifc::at<in_t::field_select>(in.data()), 1);
    fill(ifc::at<in_t::nic_vport_context>(in.data()));
    auto r = pf.exec(in, ifc::modify_nic_vport_context_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

}  // namespace

bool vport_group_manager(const hca& pf) noexcept {
    return !pf.caps().empty() && ifc::get<ifc::cmd_hca_cap::vport_group_manager>(pf.caps().data()) != 0;
}

status enable_vf_hca(hca& pf, std::uint16_t vf) {
    auto in = command<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA);
    ifc::set<ifc::enable_hca_in::function_id>(in.data(), vf);
    auto r = pf.exec(in, ifc::enable_hca_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

status disable_vf_hca(hca& pf, std::uint16_t vf) {
    auto in = command<ifc::disable_hca_in>(cmd_opcode::DISABLE_HCA);
    ifc::set<ifc::disable_hca_in::function_id>(in.data(), vf);
    auto r = pf.exec(in, ifc::disable_hca_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

result<vf_vport> query_vf_vport(hca& pf, std::uint16_t vf) {
    vf_vport out;
    {
        using in_t = ifc::query_nic_vport_context_in;
        auto in = command<in_t>(cmd_opcode::QUERY_NIC_VPORT_CONTEXT);
        ifc::set<in_t::other_vport>(in.data(), 1);
        ifc::set<in_t::vport_number>(in.data(), vf);
        auto r = pf.exec(in, ifc::query_nic_vport_context_out::size_bytes);
        if (!r) return r.error();
        const std::byte* v = ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(r->data());
        out.mac = hw::get_mac(ifc::at<ifc::nic_vport_context::permanent_address>(v));
        out.node_guid = ifc::get<ifc::nic_vport_context::node_guid>(v);
    }
    using in_t = ifc::query_vport_state_in;
    using out_t = ifc::query_vport_state_out;
    auto in = command<in_t>(cmd_opcode::QUERY_VPORT_STATE,
                            static_cast<std::uint16_t>(hw::vport_state_op_mod::ESW_VPORT));
    ifc::set<in_t::other_vport>(in.data(), 1);
    ifc::set<in_t::vport_number>(in.data(), vf);
    auto r = pf.exec(in, out_t::size_bytes);
    if (!r) return r.error();
    out.admin = static_cast<hw::vport_admin_state>(ifc::get<out_t::admin_state>(r->data()));
    out.state = static_cast<hw::vport_state>(ifc::get<out_t::state>(r->data()));
    return out;
}

status set_vf_mac(hca& pf, std::uint16_t vf, const std::array<std::uint8_t, 6>& mac) {
    return modify_nic_vport<ifc::modify_nic_vport_field_select::permanent_address>(pf, vf, [&](std::byte* v) {
        hw::set_mac(ifc::at<ifc::nic_vport_context::permanent_address>(v), mac);
    });
}

status set_vf_node_guid(hca& pf, std::uint16_t vf, std::uint64_t guid) {
    return modify_nic_vport<ifc::modify_nic_vport_field_select::node_guid>(
        pf, vf, [&](std::byte* v) { ifc::set<ifc::nic_vport_context::node_guid>(v, guid); });
}

status set_vf_admin_state(hca& pf, std::uint16_t vf, hw::vport_admin_state state) {
    using in_t = ifc::modify_vport_state_in;
    auto in = command<in_t>(cmd_opcode::MODIFY_VPORT_STATE,
                            static_cast<std::uint16_t>(hw::vport_state_op_mod::ESW_VPORT));
    ifc::set<in_t::other_vport>(in.data(), 1);
    ifc::set<in_t::vport_number>(in.data(), vf);
    ifc::set<in_t::admin_state>(in.data(), static_cast<std::uint32_t>(state));
    auto r = pf.exec(in, ifc::modify_vport_state_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

std::array<std::uint8_t, 6> vf_mac_of(const std::array<std::uint8_t, 6>& pf_mac, std::uint16_t vf) noexcept {
    std::array<std::uint8_t, 6> m = pf_mac;
    m[0] = static_cast<std::uint8_t>((m[0] | 0x02) & ~0x01);  // locally administered, unicast
    const auto low = static_cast<std::uint16_t>((m[4] << 8 | m[5]) + vf);
    m[4] = static_cast<std::uint8_t>(low >> 8);
    m[5] = static_cast<std::uint8_t>(low);
    return m;
}

}  // namespace cxv::driver::sriov
