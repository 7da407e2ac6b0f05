// The function's own vport on port 1 (PRM "Vport Commands": QUERY_VPORT_STATE,
// QUERY_HCA_VPORT_CONTEXT, QUERY_HCA_VPORT_GID, QUERY_HCA_VPORT_PKEY,
// QUERY/MODIFY_NIC_VPORT_CONTEXT) and the port's InfiniBand management agent behind
// MAD_IFC (IBTA Vol. 1 chapters 13-14).
//
// Every answer follows the port's state at that moment (sim/device_port.h). Once the
// subnet manager has configured the port: LID from the configuration, SM at LID 1;
// before, LID and SM LID 0. Always: LMC 0, GID prefix fe80::/64, M_Key 0 (no protection), P_Key
// table holding only the default full-member key. An Ethernet port's GIDs are the RoCE
// addresses the driver programmed (fw_roce.cc).
//
// An SR-IOV PF is its VFs' vport group manager: with other_vport 1 it reads and sets
// VF n's vport (n from 1 to TotalVFs, enabled or not yet: Linux sets them before
// pci_enable_sriov): its MAC and node GUID (NIC vport context) and its admin state
// (MODIFY_VPORT_STATE), kept where the VF's model reads them (sim/vport_links.h), and
// reads its HCA vport context. Any other function may name no vport but its own.
#include <algorithm>
#include <cstring>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "hw/mac.h"
#include "sim/firmware/fw_vport.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

// QUERY_VPORT_STATE's state (hw/cmd_values.h) and admin_state.
constexpr auto kVportUp = static_cast<std::uint32_t>(hw::vport_state::UP);
constexpr auto kVportDown = static_cast<std::uint32_t>(hw::vport_state::DOWN);
// PRM hca_vport_context vport_state_policy: the vport follows the physical port.
constexpr std::uint32_t kPolicyFollow = 2;
constexpr std::uint16_t kSmLid = subnet_manager_lid;
constexpr std::uint8_t kSubnetTimeout = 18;  // what OpenSM configures by default
// nic_vport_context.allowed_list_type (Linux enum mlx5_list_type).
constexpr std::uint32_t kListUc = 0, kListMc = 1, kListVlan = 2;
constexpr std::uint64_t kGidPrefix = 0xfe80000000000000ull;
constexpr std::uint32_t kVendorId = 0x0002c9;  // Mellanox OUI
constexpr std::uint16_t kDefaultPkey = 0xffff;
constexpr std::uint32_t kMaxEthMtu = 9216;  // the port's maximum, as PMTU reports it
constexpr std::uint32_t kAllEntries = 0xffff;  // gid_index / pkey_index: the whole table

// MAD header (IBTA 13.4.2) offsets, and the SMP data field (14.2.1).
constexpr std::size_t kMadBaseVersion = 0, kMadClass = 1, kMadClassVersion = 2, kMadMethod = 3,
                      kMadStatus = 4, kMadAttrId = 16, kMadAttrMod = 20, kSmpData = 64;
constexpr std::uint8_t kClassSmpLid = 0x01, kClassSmpDirected = 0x81;
constexpr std::uint8_t kMethodGet = 0x01, kMethodSet = 0x02, kMethodGetResp = 0x81, kMethodResp = 0x80;
constexpr std::uint16_t kAttrNodeDescription = 0x0010, kAttrNodeInfo = 0x0011, kAttrGuidInfo = 0x0014,
                        kAttrPortInfo = 0x0015, kAttrPkeyTable = 0x0016;
// GUIDInfo holds 8 GUIDs a block (IBA 14.2.5.5), P_KeyTable 32 P_Keys (14.2.5.7).
constexpr std::uint32_t kGuidsPerBlock = 8, kPkeysPerBlock = 32;
// MAD status (IBTA 13.4.7): the "invalid field" code in bits 4:2.
enum : std::uint16_t {
    mad_bad_version = 1 << 2,
    mad_unsupported_method = 2 << 2,
    mad_unsupported_method_attr = 3 << 2,
    mad_invalid_attr_value = 7 << 2,
};
// MAD_IFC op_mod: bit 0 ignore M_Key, bit 1 ignore B_Key. With M_Key 0 and no B_Key
// the checks they skip always pass.
constexpr std::uint16_t kMadIfcOpModBits = 0x3;


// port_num: Linux fills it only on dual-port devices, so a single-port device takes 0
// as well as 1.
cmd_reply check_port(std::uint32_t port_num) {
    if (port_num > 1) return bad_param(cmd_syndrome::BAD_PORT);
    return ok();
}

constexpr auto kAdminDown = hw::vport_admin_state::DOWN;

void put16(std::byte* p, std::uint16_t v) {
    p[0] = std::byte(v >> 8);
    p[1] = std::byte(v);
}
void put32(std::byte* p, std::uint32_t v) {
    put16(p, static_cast<std::uint16_t>(v >> 16));
    put16(p + 2, static_cast<std::uint16_t>(v));
}
void put64(std::byte* p, std::uint64_t v) {
    put32(p, static_cast<std::uint32_t>(v >> 32));
    put32(p + 4, static_cast<std::uint32_t>(v));
}
std::uint32_t load_be(const std::byte* p, std::size_t n) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = v << 8 | std::to_integer<std::uint32_t>(p[i]);
    return v;
}

// Table sizes from the current capabilities (PRM encodings; Linux
// mlx5_get_gid_table_len and mlx5_to_sw_pkey_sz).
std::uint32_t gid_table_len(const std::byte* caps) {
    const auto v = ifc::get<ifc::cmd_hca_cap::gid_table_size>(caps);
    return v <= 4 ? 8u << v : 0;
}
std::uint32_t pkey_table_len(const std::byte* caps) {
    const auto v = ifc::get<ifc::cmd_hca_cap::pkey_table_size>(caps);
    return v <= 5 ? 128u << v : 0;
}

}  // namespace

template <typename In>
cmd_reply vport_commands::target(const cmd_ctx& c, unsigned& vport) const {
    vport = 0;
    if (ifc::get<typename In::other_vport>(c.in.data()) == 0) return ok();
    if (!group_manager()) return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    const std::uint32_t n = ifc::get<typename In::vport_number>(c.in.data());
    if (n > cfg_.sriov_totalvfs || (n != 0 && !cfg_.vports)) return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    vport = n;
    return ok();
}

bool vport_commands::group_manager() const noexcept {
    return ifc::get<ifc::cmd_hca_cap::vport_group_manager>(caps_.current()) != 0;
}

hw::vport_admin_state vport_commands::own_admin() const {
    return cfg_.virtual_function && cfg_.vports ? cfg_.vports->own().admin : hw::vport_admin_state::AUTO;
}

// --- vport state -------------------------------------------------------------------
//
// The vNIC's vport is up while the port is ACTIVE and its manager has not set it down;
// the uplink while its physical link is up. A VF's vport seen from its PF: down when set
// down, else up while the PF's link is (AUTO follows the uplink; UP is up whatever the
// VF's own driver did). Only a vport group manager may ask about an eswitch vport or
// another function's.

cmd_reply vport_commands::query_vport_state(cmd_ctx& c) {
    using in_t = ifc::query_vport_state_in;
    using out_t = ifc::query_vport_state_out;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    const auto op = static_cast<hw::vport_state_op_mod>(c.op_mod);
    const bool esw = op == hw::vport_state_op_mod::ESW_VPORT;
    if (op != hw::vport_state_op_mod::VNIC_VPORT && op != hw::vport_state_op_mod::UPLINK && !esw) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    if ((esw && !group_manager()) || (vport != 0 && op == hw::vport_state_op_mod::UPLINK)) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    hw::vport_admin_state admin = own_admin();
    bool up = false;
    if (vport != 0) {
        admin = cfg_.vports->vf(vport).admin;
        up = admin == hw::vport_admin_state::UP || (admin != kAdminDown && port_.up());
    } else if (op == hw::vport_state_op_mod::UPLINK) {
        up = port_.up();
    } else {
        up = admin != kAdminDown && port_.active();
    }
    ifc::set<out_t::state>(c.out.data(), up ? kVportUp : kVportDown);
    ifc::set<out_t::admin_state>(c.out.data(), static_cast<std::uint32_t>(admin));
    return ok();
}

// MODIFY_VPORT_STATE: a vport group manager sets a VF's admin state (op_mod the vNIC's
// or the eswitch's view of it). The manager's own vport is the uplink's, which the model
// does not let it change (that is the e-switch manager's, not modelled).
cmd_reply vport_commands::modify_vport_state(cmd_ctx& c) {
    using in_t = ifc::modify_vport_state_in;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    const auto op = static_cast<hw::vport_state_op_mod>(c.op_mod);
    if (op != hw::vport_state_op_mod::VNIC_VPORT && op != hw::vport_state_op_mod::ESW_VPORT) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    if (vport == 0) return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    const std::uint32_t admin = ifc::get<in_t::admin_state>(c.in.data());
    if (admin > static_cast<std::uint32_t>(hw::vport_admin_state::AUTO)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    vport_record r = cfg_.vports->vf(vport);
    r.admin = static_cast<hw::vport_admin_state>(admin);
    cfg_.vports->set_vf(vport, r);
    return ok();
}

// --- HCA vport ---------------------------------------------------------------------

cmd_reply vport_commands::query_hca_vport_context(cmd_ctx& c) {
    using in_t = ifc::query_hca_vport_context_in;
    using v_t = ifc::hca_vport_context;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    if (auto r = check_port(ifc::get<in_t::port_num>(c.in.data())); r.status != cmd_status::OK) return r;
    const bool ib = cfg_.port == port_type::IB;
    // A VF's vport seen from its PF: its GUIDs as the PF set them, its state the port's
    // unless set down; the SM's assignments (LID, SM LID) are the VF's own business and
    // not reported here.
    const vport_record vf = vport != 0 ? cfg_.vports->vf(vport) : vport_record{};
    const hw::vport_admin_state admin = vport != 0 ? vf.admin : own_admin();
    const std::uint64_t node_guid = vport != 0 ? vf.node_guid : cfg_.node_guid;
    const std::uint32_t state = port_.logical_state();
    constexpr std::uint32_t kIbPortDown = 1;
    std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(c.out.data());
    ifc::set<v_t::has_smi>(v, ib && vport == 0 ? 1 : 0);  // a RoCE port, or a VF, has no subnet management
    ifc::set<v_t::grh_required>(v, ib ? 0 : 1);  // RoCE packets always carry a GRH
    ifc::set<v_t::port_physical_state>(v, port_.physical_state());
    ifc::set<v_t::vport_state_policy>(v, kPolicyFollow);
    ifc::set<v_t::port_state>(v, state);
    ifc::set<v_t::vport_state>(v, admin == kAdminDown ? kIbPortDown : state);
    ifc::set<v_t::system_image_guid>(v, cfg_.node_guid);
    ifc::set<v_t::port_guid>(v, node_guid + 1);
    ifc::set<v_t::node_guid>(v, node_guid);
    // Nothing here is modifiable (MODIFY_HCA_VPORT_CONTEXT is not modelled): the
    // *_field_select masks stay 0.
    ifc::set<v_t::cap_mask1>(v, ib ? regs_.port_capability_mask() : 0);
    if (ib && vport == 0 && port_.configured()) {  // what the SM set; 0 until it has swept the port
        ifc::set<v_t::lid>(v, cfg_.lid);
        ifc::set<v_t::subnet_timeout>(v, kSubnetTimeout);
        ifc::set<v_t::sm_lid>(v, kSmLid);
    }
    // lmc, sm_sl, init_type_reply and the Q_Key/P_Key violation counters are 0.
    return ok();
}

cmd_reply vport_commands::query_hca_vport_gid(cmd_ctx& c) {
    using in_t = ifc::query_hca_vport_gid_in;
    using out_t = ifc::query_hca_vport_gid_out;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    if (auto r = check_port(ifc::get<in_t::port_num>(c.in.data())); r.status != cmd_status::OK) return r;
    const std::uint32_t len = gid_table_len(caps_.current());
    const std::uint32_t index = ifc::get<in_t::gid_index>(c.in.data());
    const bool all = index == kAllEntries;
    if (!all && index >= len) return fail(cmd_status::BAD_INDEX, cmd_syndrome::EXCEEDS_LIMIT);
    const std::uint32_t first = all ? 0 : index, count = all ? len : 1;
    ifc::set<out_t::gids_num>(c.out.data(), count);
    // InfiniBand: only GID 0 is populated, the link-local prefix and the port GUID.
    // Ethernet: the RoCE address table as SET_ROCE_ADDRESS programmed it (empty entries
    // read as zeros). Linux's mlx5_ib does not ask a RoCE port (its GIDs come from
    // ib_core's cache, which it writes with SET_ROCE_ADDRESS), so a card's answer there
    // is not something a driver relies on; the model's at least never contradicts the
    // table the port sends from.
    // A VF's table seen from its PF: InfiniBand's GID 0 from the GUID the PF set; a RoCE
    // VF's addresses are its own driver's, in its own function, and read as empty.
    std::array<std::byte, 16> gid0{};
    put64(gid0.data(), kGidPrefix);
    put64(gid0.data() + 8, (vport != 0 ? cfg_.vports->vf(vport).node_guid : cfg_.node_guid) + 1);
    const bool ib = cfg_.port == port_type::IB;
    // Entries that do not fit the output the driver gave are left out.
    const std::size_t room = (c.out.size() - out_t::size_bytes) / 16;
    for (std::uint32_t i = 0; i < count && i < room; ++i) {
        std::byte* dst = ifc::at<out_t::gid>(c.out.data(), i);  // the output is zeroed
        if (ib) {
            if (first + i == 0) std::memcpy(dst, gid0.data(), gid0.size());
        } else if (const auto it = roce_addresses_.find(first + i); vport == 0 && it != roce_addresses_.end()) {
            std::memcpy(dst, it->second.source_l3_address.data(), 16);
        }
    }
    return ok();
}

cmd_reply vport_commands::query_hca_vport_pkey(cmd_ctx& c) {
    using in_t = ifc::query_hca_vport_pkey_in;
    using out_t = ifc::query_hca_vport_pkey_out;
    unsigned vport = 0;  // a VF's table is the same: the default key only
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    if (auto r = check_port(ifc::get<in_t::port_num>(c.in.data())); r.status != cmd_status::OK) return r;
    const std::uint32_t len = pkey_table_len(caps_.current());
    const std::uint32_t index = ifc::get<in_t::pkey_index>(c.in.data());
    const bool all = index == kAllEntries;
    if (!all && index >= len) return fail(cmd_status::BAD_INDEX, cmd_syndrome::EXCEEDS_LIMIT);
    const std::uint32_t first = all ? 0 : index;  // all: len entries, else one
    constexpr std::size_t entry = ifc::pkey_entry::size_bytes;
    const std::size_t room = (c.out.size() - out_t::size_bytes) / entry;
    // Index 0 holds the default P_Key (full member); the rest of the table is empty.
    if (first == 0 && room > 0) ifc::set<ifc::pkey_entry::pkey>(ifc::at<out_t::pkey>(c.out.data(), 0), kDefaultPkey);
    return ok();
}

// --- NIC vport ---------------------------------------------------------------------
//
// On an InfiniBand port the NIC vport context still exists (Linux reads its
// system_image_guid on every port type), with no MAC address; its Ethernet attributes
// (RoCE, MTU, promiscuous modes) cannot be changed there.

cmd_reply vport_commands::query_nic_vport_context(cmd_ctx& c) {
    using in_t = ifc::query_nic_vport_context_in;
    using v_t = ifc::nic_vport_context;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    // allowed_list_type: 0 unicast MACs, 1 multicast MACs, 2 VLANs.
    const std::uint32_t list_type = ifc::get<in_t::allowed_list_type>(c.in.data());
    if (list_type > kListVlan) return bad_param(cmd_syndrome::BAD_PARAMETER);
    std::byte* v = ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(c.out.data());
    // A VF's lists, set by its own driver, are in the VF's function: empty here.
    ifc::set<v_t::allowed_list_type>(v, list_type);
    ifc::set<v_t::allowed_list_size>(v, 0);
    ifc::set<v_t::system_image_guid>(v, cfg_.node_guid);
    if (vport != 0) {
        // A VF's vport as its PF set it; what the VF's own driver set there (RoCE, MTU,
        // promiscuous modes) is in the VF's function and reads as 0.
        const vport_record r = cfg_.vports->vf(vport);
        ifc::set<v_t::node_guid>(v, r.node_guid);
        ifc::set<v_t::port_guid>(v, r.node_guid + 1);
        if (cfg_.port == port_type::ETHERNET) {
            hw::set_mac(ifc::at<v_t::permanent_address>(v), r.mac);
        }
        return ok();
    }
    std::copy(nic_vport_.begin(), nic_vport_.end(), v);
    ifc::set<v_t::allowed_list_type>(v, list_type);
    // The list asked for, as much of it as the output holds.
    const std::size_t list_at = ifc::query_nic_vport_context_out::size_bytes;
    const std::size_t room = c.out.size() > list_at ? (c.out.size() - list_at) / 8 : 0;
    const std::size_t n = list_type == kListVlan ? filter_.vlans.size()
                          : list_type == kListMc ? filter_.mc.size()
                                                 : filter_.uc.size();
    ifc::set<v_t::allowed_list_size>(v, static_cast<std::uint32_t>(n));
    for (std::size_t i = 0; i < n && i < room; ++i) {
        std::byte* e = c.out.data() + list_at + 8 * i;
        if (list_type == kListVlan) {
            ifc::set<ifc::vlan_layout::vlan>(e, filter_.vlans[i]);
        } else {
            hw::set_mac(e, list_type == kListMc ? filter_.mc[i] : filter_.uc[i]);
        }
    }
    ifc::set<v_t::system_image_guid>(v, cfg_.node_guid);
    ifc::set<v_t::port_guid>(v, cfg_.node_guid + 1);
    ifc::set<v_t::node_guid>(v, cfg_.node_guid);
    if (cfg_.port == port_type::ETHERNET) {
        // Never set: the port's MTU, as PMTU reports it.
        if (ifc::get<v_t::mtu>(v) == 0) ifc::set<v_t::mtu>(v, regs_.admin_mtu() ? regs_.admin_mtu() : kMaxEthMtu);
        hw::set_mac(ifc::at<v_t::permanent_address>(v), cfg_.mac);
    }
    return ok();
}

cmd_reply vport_commands::modify_nic_vport_context(cmd_ctx& c) {
    using in_t = ifc::modify_nic_vport_context_in;
    using fs_t = ifc::modify_nic_vport_field_select;
    using v_t = ifc::nic_vport_context;
    unsigned vport = 0;
    if (auto r = target<in_t>(c, vport); r.status != cmd_status::OK) return r;
    const std::byte* fs = ifc::at<in_t::field_select>(c.in.data());
    const std::byte* v = ifc::at<in_t::nic_vport_context>(c.in.data());
    if (vport != 0) {
        // What a vport group manager sets of a VF's vport, as Linux's e-switch does: the
        // node GUID, and on Ethernet the permanent address (the VF's MAC). Nothing else.
        std::array<std::byte, fs_t::size_bytes> allowed{};
        ifc::set<fs_t::node_guid>(allowed.data(), 1);
        if (cfg_.port == port_type::ETHERNET) ifc::set<fs_t::permanent_address>(allowed.data(), 1);
        if (load_be(fs, fs_t::size_bytes) & ~load_be(allowed.data(), allowed.size())) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        vport_record r = cfg_.vports->vf(vport);
        if (ifc::get<fs_t::node_guid>(fs)) r.node_guid = ifc::get<v_t::node_guid>(v);
        if (ifc::get<fs_t::permanent_address>(fs)) {
            r.mac = hw::get_mac(ifc::at<v_t::permanent_address>(v));
        }
        cfg_.vports->set_vf(vport, r);
        return ok();
    }
    // What this function may change on its own vport. Everything else (GUIDs, the
    // permanent address, address lists, min_inline, events, affiliation) is the vport
    // group manager's, or needs a capability the device does not report
    // (disable_local_lb_uc/mc); unknown bits are refused too.
    std::array<std::byte, fs_t::size_bytes> allowed{};
    if (ifc::get<ifc::cmd_hca_cap::roce>(caps_.current())) ifc::set<fs_t::roce_en>(allowed.data(), 1);
    if (cfg_.port == port_type::ETHERNET) {
        ifc::set<fs_t::mtu>(allowed.data(), 1);
        ifc::set<fs_t::promisc>(allowed.data(), 1);
        ifc::set<fs_t::addresses_list>(allowed.data(), 1);
    }
    const std::uint32_t select = load_be(fs, fs_t::size_bytes);
    if (select & ~load_be(allowed.data(), allowed.size())) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const bool set_mtu = ifc::get<fs_t::mtu>(fs) != 0;
    if (set_mtu && ifc::get<v_t::mtu>(v) > kMaxEthMtu) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    // An address list (PRM "NIC Vport Context": allowed_list_type 0 unicast MACs, 1
    // multicast MACs, 2 VLANs; allowed_list_size entries of 64 bits after the context),
    // replacing the one of its type; at most 2^log_max_current_*_list entries.
    const bool set_list = ifc::get<fs_t::addresses_list>(fs) != 0;
    const std::uint32_t list_type = ifc::get<v_t::allowed_list_type>(v);
    const std::uint32_t list_size = ifc::get<v_t::allowed_list_size>(v);
    const std::size_t list_at = ifc::modify_nic_vport_context_in::size_bytes;
    if (set_list) {
        const std::byte* caps = caps_.current();
        const unsigned log_max = list_type == kListUc   ? ifc::get<ifc::cmd_hca_cap::log_max_current_uc_list>(caps)
                                 : list_type == kListMc ? ifc::get<ifc::cmd_hca_cap::log_max_current_mc_list>(caps)
                                 : list_type == kListVlan ? ifc::get<ifc::cmd_hca_cap::log_max_vlan_list>(caps)
                                                          : 0;
        if (list_type > kListVlan) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (list_size > (1u << log_max)) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
        if (c.in.size() < list_at + std::size_t{list_size} * 8) {
            return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
        }
    }

    std::byte* cur = nic_vport_.data();
    if (ifc::get<fs_t::roce_en>(fs)) ifc::set<v_t::roce_en>(cur, ifc::get<v_t::roce_en>(v));
    if (set_mtu) ifc::set<v_t::mtu>(cur, ifc::get<v_t::mtu>(v));  // 0: follow the port's MTU
    if (ifc::get<fs_t::promisc>(fs)) {
        ifc::set<v_t::promisc_uc>(cur, ifc::get<v_t::promisc_uc>(v));
        ifc::set<v_t::promisc_mc>(cur, ifc::get<v_t::promisc_mc>(v));
        ifc::set<v_t::promisc_all>(cur, ifc::get<v_t::promisc_all>(v));
        filter_.promisc_uc = ifc::get<v_t::promisc_uc>(v) != 0;
        filter_.promisc_mc = ifc::get<v_t::promisc_mc>(v) != 0;
        filter_.promisc_all = ifc::get<v_t::promisc_all>(v) != 0;
    }
    if (set_list) {
        const std::byte* list = c.in.data() + list_at;
        if (list_type == kListVlan) {
            filter_.vlans.clear();
            for (std::uint32_t i = 0; i < list_size; ++i) {
                filter_.vlans.push_back(static_cast<std::uint16_t>(ifc::get<ifc::vlan_layout::vlan>(list + 8 * i)));
            }
        } else {
            auto& macs = list_type == kListMc ? filter_.mc : filter_.uc;
            macs.clear();
            for (std::uint32_t i = 0; i < list_size; ++i) macs.push_back(hw::get_mac(list + 8 * i));
        }
    }
    return ok();
}

// Teardown, DISABLE_HCA and reset: the vport context and the RoCE address table go back
// to their defaults with the objects.
void vport_commands::release_all() {
    nic_vport_ = {};
    filter_ = {};
    roce_addresses_.clear();
}

// --- MAD_IFC -----------------------------------------------------------------------
//
// The response is the request with method, status and data replaced. A MAD the agent
// does not serve is answered with a MAD status, as the IBTA says, not a command error.
// The direction bit of a directed-route response is left to the driver (Linux's
// mlx5_ib_process_mad sets it after the command).

cmd_reply vport_commands::mad_ifc(cmd_ctx& c) {
    if (c.op_mod & ~kMadIfcOpModBits) return bad_param(cmd_syndrome::BAD_OP_MOD);
    if (ifc::get<ifc::mad_ifc_in::port>(c.in.data()) != 1) return bad_param(cmd_syndrome::BAD_PORT);
    const std::byte* req = ifc::at<ifc::mad_ifc_in::mad>(c.in.data());
    const auto byte = [&](std::size_t off) { return std::to_integer<std::uint8_t>(req[off]); };
    const std::uint8_t mgmt_class = byte(kMadClass), method = byte(kMadMethod);
    const bool smp = mgmt_class == kClassSmpLid || mgmt_class == kClassSmpDirected;
    // A RoCE port has no subnet management agent (hca_vport_context.has_smi 0).
    if (smp && cfg_.port == port_type::ETHERNET) return bad_param(cmd_syndrome::BAD_PARAMETER);

    std::byte* resp = ifc::at<ifc::mad_ifc_out::response_mad_packet>(c.out.data());
    std::memcpy(resp, req, ifc::mad_ifc_in::mad::count);
    const bool get = method == kMethodGet;
    // Get and Set are answered with GetResp; other requests with their response method.
    resp[kMadMethod] = std::byte{get || method == kMethodSet ? kMethodGetResp
                                                             : static_cast<std::uint8_t>(method | kMethodResp)};
    std::uint16_t status = 0;
    const std::uint16_t attr = static_cast<std::uint16_t>(load_be(req + kMadAttrId, 2));
    const std::uint32_t attr_mod = load_be(req + kMadAttrMod, 4);
    std::byte* d = resp + kSmpData;
    // Linux's mlx5_ib reads the node description, the GIDs' GUIDs and the P_Key table
    // through these (drivers/infiniband/hw/mlx5/mad.c, on an IB port without ib_virt)
    // and takes the data without looking at the MAD status.
    if (byte(kMadBaseVersion) != 1 || (smp && byte(kMadClassVersion) != 1)) {
        status = mad_bad_version;
    } else if (!get && method != kMethodSet) {
        status = mad_unsupported_method;
    } else if (!smp || !get) {
        status = mad_unsupported_method_attr;  // no other class; no Set
    } else if (attr == kAttrNodeInfo) {
        std::memset(d, 0, 64);  // IBTA 14.2.5.3
        d[0] = std::byte{1};    // BaseVersion
        d[1] = std::byte{1};    // ClassVersion
        d[2] = std::byte{1};    // NodeType: channel adapter
        d[3] = std::byte{1};    // NumPorts
        put64(d + 4, cfg_.node_guid);       // SystemImageGUID
        put64(d + 12, cfg_.node_guid);      // NodeGUID
        put64(d + 20, cfg_.node_guid + 1);  // PortGUID (of the receiving port)
        put16(d + 28, static_cast<std::uint16_t>(pkey_table_len(caps_.current())));  // PartitionCap
        put16(d + 30, cfg_.device_id);      // DeviceID; Revision (32..35) 0
        put32(d + 36, 1u << 24 | kVendorId);  // LocalPortNum 1, VendorID
    } else if (attr == kAttrNodeDescription) {
        regs_.node_description(d);  // IBA 14.2.5.2: 64 bytes of UTF-8
    } else if (attr == kAttrGuidInfo) {
        // AttributeModifier: the block. GUID 0 is the port GUID (the SM assigns no others).
        if (attr_mod >= (gid_table_len(caps_.current()) + kGuidsPerBlock - 1) / kGuidsPerBlock) {
            status = mad_invalid_attr_value;
        } else {
            std::memset(d, 0, 64);
            if (attr_mod == 0) put64(d, cfg_.node_guid + 1);
        }
    } else if (attr == kAttrPkeyTable) {
        // AttributeModifier bits 15:0: the block (a channel adapter's port ignores the
        // port number above them). Entry 0 is the default full-member P_Key.
        const std::uint32_t block = attr_mod & 0xffff;
        if (block >= (pkey_table_len(caps_.current()) + kPkeysPerBlock - 1) / kPkeysPerBlock) {
            status = mad_invalid_attr_value;
        } else {
            std::memset(d, 0, 64);
            if (block == 0) put16(d, kDefaultPkey);
        }
    } else if (attr == kAttrPortInfo) {
        // AttributeModifier: the port number, 0 meaning the port the SMP came in on.
        if (attr_mod > 1) {
            status = mad_invalid_attr_value;
        } else {
            // IBTA 14.2.5.6. Widths: 1 = 1x, 2 = 4x. Speeds: 1 SDR, 2 DDR, 4 QDR; extended:
            // 1 FDR, 2 EDR. MTU 5 = 4096. VLCap 4 = VL0-7. Active values are 0 while the
            // physical link is down; LID and MasterSMLID 0 until the SM has configured the port.
            const bool up = port_.up();
            std::memset(d, 0, 64);
            put64(d + 8, kGidPrefix);  // M_Key (0..7) is 0
            put16(d + 16, port_.configured() ? cfg_.lid : 0);
            put16(d + 18, port_.configured() ? kSmLid : 0);
            put32(d + 20, regs_.port_capability_mask());
            d[28] = std::byte{1};                      // LocalPortNum
            d[29] = std::byte{0x3};                    // LinkWidthEnabled: 1x, 4x
            d[30] = std::byte{0x3};                    // LinkWidthSupported
            d[31] = std::byte(up ? 0x2 : 0);           // LinkWidthActive: 4x
            d[32] = std::byte(0x7 << 4 | port_.logical_state());  // LinkSpeedSupported, PortState
            d[33] = std::byte(port_.physical_state() << 4 | 2);  // PortPhysicalState, LinkDownDefaultState Polling
            d[34] = std::byte{0};                          // M_KeyProtectBits 0, LMC 0
            d[35] = std::byte((up ? 0x4 : 0) << 4 | 0x7);  // LinkSpeedActive (QDR below EDR), Enabled
            d[36] = std::byte{5 << 4};                     // NeighborMTU 4096, MasterSMSL 0
            d[37] = std::byte{4 << 4};                     // VLCap, InitType 0
            d[39] = std::byte{8};                          // VLArbitrationHighCap
            d[40] = std::byte{8};                          // VLArbitrationLowCap
            d[41] = std::byte{5};                          // InitTypeReply 0, MTUCap 4096
            d[43] = std::byte{4 << 4};                     // OperationalVLs; no enforcement
            d[50] = std::byte(gid_table_len(caps_.current()));  // GUIDCap
            d[51] = std::byte(port_.configured() ? kSubnetTimeout : 0);
            d[62] = std::byte((up ? 0x2 : 0) << 4 | 0x3);  // LinkSpeedExtActive EDR, Supported
            d[63] = std::byte{0x3};                        // LinkSpeedExtEnabled: FDR, EDR
        }
    } else {
        status = mad_unsupported_method_attr;
    }
    put16(resp + kMadStatus, status);
    return ok();
}

}  // namespace cxv::sim
