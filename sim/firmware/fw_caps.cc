// The capabilities the model reports and the ones a driver sets (PRM QUERY_HCA_CAP,
// SET_HCA_CAP, "HCA Capabilities"): a ConnectX-6 class device, with limits sized for a
// model whose object contexts live in real host pages. docs/device-model.md lists every value and why.
#include <cstring>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_caps.h"
#include "sim/objects/eth_objects.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

using cap = ifc::cmd_hca_cap;
using hw::hca_cap_type;

namespace {

// SET_HCA_CAP's op_mod names the capability type only (bit 0, current/max, is a query's).
constexpr std::uint16_t set_cap_op_mod(hca_cap_type t) { return hw::hca_cap_op_mod(t, hw::hca_cap_mode::GET_MAX); }

}  // namespace

void hca_caps::reset() {
    fill_general_caps(current_.data(), false);
    atomic_req_mode_ = 0;
}

cmd_reply hca_caps::query_hca_cap(cmd_ctx& c) {
    if (ifc::get<ifc::query_hca_cap_in::other_function>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    std::byte* out = ifc::at<ifc::query_hca_cap_out::capability>(c.out.data());
    const bool current = c.op_mod & 1;
    switch (static_cast<hca_cap_type>(c.op_mod >> 1)) {
        case hca_cap_type::GENERAL:
            if (current) {
                std::memcpy(out, current_.data(), current_.size());
            } else {
                fill_general_caps(out, true);
            }
            return ok();
        case hca_cap_type::ATOMIC:
            // cmd_hca_cap.atomic is set, so drivers query these (Linux mlx5_query_hca_caps
            // fails its bring-up without them).
            fill_atomic_caps(out, !current);
            return ok();
        case hca_cap_type::ROCE:
            if (cfg_.port != port_type::ETHERNET) return bad_param(cmd_syndrome::BAD_OP_MOD);
            fill_roce_caps(out);
            return ok();
        case hca_cap_type::ETHERNET_OFFLOADS:
            if (cfg_.port != port_type::ETHERNET) return bad_param(cmd_syndrome::BAD_OP_MOD);
            fill_ethernet_offload_caps(out);
            return ok();
        case hca_cap_type::FLOW_TABLE:
            if (cfg_.port != port_type::ETHERNET) return bad_param(cmd_syndrome::BAD_OP_MOD);
            fill_flow_table_caps(out);
            return ok();
        case hca_cap_type::DEV_EVENT:
            // cmd_hca_cap.event_cap is set: the events a DevX user may subscribe to
            // (user_affiliated_events, user_unaffiliated_events). None: the model has no
            // event subscription for users, so the bitmaps are zero.
            return ok();
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
}

cmd_reply hca_caps::set_hca_cap(cmd_ctx& c) {
    const std::byte* in = ifc::at<ifc::set_hca_cap_in::capability>(c.in.data());
    if (c.op_mod == set_cap_op_mod(hca_cap_type::ROCE)) {
        // Only sw_r_roce_src_udp_port is settable, and only on a RoCE port.
        if (cfg_.port != port_type::ETHERNET) return bad_param(cmd_syndrome::BAD_OP_MOD);
        return ok();
    }
    if (c.op_mod == set_cap_op_mod(hca_cap_type::ATOMIC)) {
        // Only the requester's 8-byte endianness mode is settable: 0 (big endian) or,
        // as supported_atomic_req_8B_endianness_mode_1 offers, 1 (host endianness).
        const auto mode = ifc::get<ifc::atomic_caps::atomic_req_8B_endianness_mode>(in);
        if (mode > 1) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
        atomic_req_mode_ = static_cast<std::uint8_t>(mode);
        return ok();
    }
    if (c.op_mod != set_cap_op_mod(hca_cap_type::GENERAL)) return bad_param(cmd_syndrome::BAD_OP_MOD);

    std::array<std::byte, cap::size_bytes> max{};
    fill_general_caps(max.data(), true);
    std::array<std::byte, cap::size_bytes> next = current_;
    // A settable field takes the driver's value if the device's maximum allows it; all
    // other fields keep the device's value, whatever the input says.
    bool refused = false;
    auto settable = [&]<typename F>(F) {
        const auto want = ifc::get<F>(in);
        if (want > ifc::get<F>(max.data())) refused = true;
        ifc::set<F>(next.data(), want);
    };
    settable(cap::cmdif_checksum{});
    settable(cap::cache_line_128byte{});
    settable(cap::disable_link_up{});
    settable(cap::log_max_qp{});
    settable(cap::pkey_table_size{});
    settable(cap::num_vhca_ports{});
    if (ifc::get<cap::log_uar_page_sz>(in) != 0) refused = true;  // 4 KiB UARs only
    if (refused) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    current_ = next;
    return ok();
}

void hca_caps::fill_general_caps(std::byte* p, bool max) const {
    std::memset(p, 0, cap::size_bytes);
    const bool eth = cfg_.port == port_type::ETHERNET;
    // Object limits (log2).
    ifc::set<cap::log_max_qp>(p, 16);
    ifc::set<cap::log_max_qp_sz>(p, 15);
    ifc::set<cap::log_max_srq>(p, 16);
    ifc::set<cap::log_max_srq_sz>(p, 15);
    ifc::set<cap::log_max_cq>(p, 16);
    ifc::set<cap::log_max_cq_sz>(p, 22);
    ifc::set<cap::log_max_eq>(p, 6);
    ifc::set<cap::log_max_eq_sz>(p, 22);
    ifc::set<cap::max_num_eqs>(p, 64);
    ifc::set<cap::log_max_mkey>(p, 20);
    ifc::set<cap::log_max_mrw_sz>(p, 64);
    ifc::set<cap::log_max_klm_list_size>(p, 16);
    ifc::set<cap::max_indirection>(p, 4);
    ifc::set<cap::log_max_pd>(p, 18);
    ifc::set<cap::log_max_xrcd>(p, 16);
    // Multicast groups (ATTACH_TO_MCG; a ConnectX-5's figures: 2^21 groups, 240 QPs each).
    ifc::set<cap::log_max_mcg>(p, log_max_mcg);
    ifc::set<cap::max_qp_mcg>(p, max_qp_mcg);
    // The Ethernet transport objects (fw_eth.cc): transport domains, TISs, SQs, RQs (cyclic
    // and striding), RQTs, TIRs. One TIS per SQ; SQ WQE-BBs of 64 bytes.
    ifc::set<cap::log_max_transport_domain>(p, 16);
    ifc::set<cap::log_max_rq>(p, 16);
    ifc::set<cap::log_max_sq>(p, 16);
    ifc::set<cap::log_max_tir>(p, 16);
    ifc::set<cap::log_max_tis>(p, 16);
    ifc::set<cap::log_max_rqt>(p, 16);
    ifc::set<cap::log_max_rqt_size>(p, log_max_rqt_size);
    ifc::set<cap::log_max_tis_per_sq>(p, 0);
    ifc::set<cap::log_max_wq_sz>(p, 16);
    ifc::set<cap::striding_rq>(p, 1);
    ifc::set<cap::log_min_stride_sz_rq>(p, 4);
    ifc::set<cap::log_max_stride_sz_rq>(p, 9);
    ifc::set<cap::log_min_stride_sz_sq>(p, 6);
    ifc::set<cap::log_max_stride_sz_sq>(p, 6);
    // NIC receive flow tables (fw_flow.cc) and the Ethernet offloads: an Ethernet port's.
    ifc::set<cap::nic_flow_table>(p, eth ? 1 : 0);
    ifc::set<cap::eth_net_offloads>(p, eth ? 1 : 0);
    // The vport's allowed address lists (MODIFY_NIC_VPORT_CONTEXT): 128 entries each.
    ifc::set<cap::log_max_current_uc_list>(p, eth ? 7 : 0);
    ifc::set<cap::log_max_current_mc_list>(p, eth ? 7 : 0);
    ifc::set<cap::log_max_vlan_list>(p, eth ? 7 : 0);
    ifc::set<cap::log_max_ra_req_qp>(p, 4);
    ifc::set<cap::log_max_ra_res_qp>(p, 4);
    ifc::set<cap::log_max_msg>(p, 30);
    ifc::set<cap::max_qp_cnt>(p, 64);
    // Work queue entry sizes (bytes) and stride limits.
    ifc::set<cap::max_wqe_sz_sq>(p, 1024);
    ifc::set<cap::max_wqe_sz_rq>(p, 512);
    ifc::set<cap::max_sgl_for_optimized_performance>(p, 8);
    // Transports and features.
    ifc::set<cap::rc>(p, 1);
    ifc::set<cap::uc>(p, 1);
    ifc::set<cap::ud>(p, 1);
    ifc::set<cap::xrc>(p, 1);
    ifc::set<cap::atomic>(p, 1);
    ifc::set<cap::roce>(p, eth ? 1 : 0);
    ifc::set<cap::wq_signature>(p, 1);
    ifc::set<cap::cq_oi>(p, 1);
    ifc::set<cap::cq_resize>(p, 1);
    ifc::set<cap::cq_moderation>(p, 1);
    ifc::set<cap::cq_eq_remap>(p, 1);
    ifc::set<cap::cqe_version>(p, 1);
    ifc::set<cap::qkv>(p, 1);
    ifc::set<cap::pkv>(p, 1);
    ifc::set<cap::local_ca_ack_delay>(p, 16);
    // Counters (fw_counters.cc): max_qp_cnt Q counter sets besides the default set 0,
    // the retransmission and error counters, QPs moved between sets in RTS, aggregate
    // queries, and the vport's traffic counters.
    ifc::set<cap::out_of_seq_cnt>(p, 1);
    ifc::set<cap::retransmission_q_counters>(p, 1);
    ifc::set<cap::enhanced_error_q_counters>(p, 1);
    ifc::set<cap::rts2rts_qp_counters_set_id>(p, 1);
    ifc::set<cap::q_counter_aggregation>(p, 1);
    ifc::set<cap::vport_counters>(p, 1);
    // Ports.
    ifc::set<cap::port_type>(p, eth ? 1 : 0);
    ifc::set<cap::num_ports>(p, 1);
    ifc::set<cap::num_vhca_ports>(p, 1);
    // An SR-IOV PF is its VFs' vport group manager (fw_vport.cc: other_vport). The
    // e-switch itself (eswitch_manager: FDB flow tables, representors) is not modelled.
    ifc::set<cap::vport_group_manager>(p, cfg_.sriov_totalvfs != 0 && !cfg_.virtual_function ? 1 : 0);
    ifc::set<cap::pkey_table_size>(p, 0);  // 128 entries
    ifc::set<cap::gid_table_size>(p, gid_table_size_code);  // 32 entries
    ifc::set<cap::ports_check>(p, 1);
    // Doorbells: 4 KiB UARs over the 32 MiB BAR, BlueFlame registers of 512 bytes.
    ifc::set<cap::uar_4k>(p, 1);
    ifc::set<cap::uar_sz>(p, 13);
    ifc::set<cap::num_of_uars_per_page>(p, 1);
    ifc::set<cap::bf>(p, 1);
    ifc::set<cap::log_bf_reg_size>(p, 9);
    ifc::set<cap::log_pg_sz>(p, 12);
    // Command interface and bring-up.
    ifc::set<cap::driver_version>(p, 1);
    ifc::set<cap::umem_uid_0>(p, 1);
    ifc::set<cap::fast_teardown>(p, 1);
    ifc::set<cap::force_teardown>(p, 1);
    ifc::set<cap::event_cap>(p, 1);
    ifc::set<cap::device_frequency_khz>(p, cfg_.clock_khz);
    if (max) {
        // Settable features the device offers but does not enable by default.
        ifc::set<cap::cmdif_checksum>(p, 3);
        ifc::set<cap::cache_line_128byte>(p, 1);
        ifc::set<cap::disable_link_up>(p, 1);
    }
}

// Atomic Capabilities: 8-byte compare-and-swap and fetch-and-add on RC QPs (no DC, no
// extended atomics), as the transport engine executes them. Linux's mlx5_ib reports
// IB_ATOMIC_HCA only with both operations, 8-byte size and a non-zero current
// endianness mode, which it sets itself (handle_hca_cap_atomic) when mode 1 is offered.
void hca_caps::fill_atomic_caps(std::byte* p, bool max) const {
    using atomic = ifc::atomic_caps;
    std::memset(p, 0, atomic::size_bytes);
    ifc::set<atomic::atomic_req_8B_endianness_mode>(p, max ? 1 : atomic_req_mode_);
    ifc::set<atomic::supported_atomic_req_8B_endianness_mode_1>(p, 1);
    ifc::set<atomic::atomic_operations>(p, 0x3);  // bit 0 CAS, bit 1 FA
    ifc::set<atomic::atomic_size_qp>(p, 1u << 3);  // 8 bytes
}

void hca_caps::fill_roce_caps(std::byte* p) const {
    using roce = ifc::roce_cap;
    std::memset(p, 0, roce::size_bytes);
    ifc::set<roce::sw_r_roce_src_udp_port>(p, 1);
    ifc::set<roce::fl_rc_qp_when_roce_enabled>(p, 1);
    ifc::set<roce::l3_type>(p, 0x7);         // GRH, IPv4, IPv6
    // A bit per version (Linux MLX5_ROCE_VERSION_*_CAP = 1 << version): RoCE v2 only,
    // the one the transport engine builds.
    ifc::set<roce::roce_version>(p, 1u << static_cast<unsigned>(hw::roce_version::V2));
    ifc::set<roce::r_roce_dest_udp_port>(p, 4791);
    ifc::set<roce::r_roce_max_src_udp_port>(p, 0xffff);
    ifc::set<roce::r_roce_min_src_udp_port>(p, 0xc000);
    // One RoCE address per GID table entry (SET_ROCE_ADDRESS, fw_roce.cc).
    ifc::set<roce::roce_address_table_size>(p, gid_table_entries);
}

// Per Protocol Networking Offload Capabilities: IP and L4 checksums (transmit, and the
// receive CQE's flags), VLAN stripping, FCS scatter, loopback control per TIR, RSS over
// RQTs of 2^log_max_rqt_size entries, LSO of TCP and UDP over IPv4 and IPv6 (messages of
// 2^kMaxLsoLog bytes; Linux's mlx5e requires it); no LRO, tunnels or multi-packet send
// WQEs.
// Headers need not be inlined in a send WQE (wqe_inline_mode 2, Linux
// MLX5_CAP_INLINE_MODE_NOT_REQUIRED): the device reads them from memory.
void hca_caps::fill_ethernet_offload_caps(std::byte* p) const {
    using eth = ifc::per_protocol_networking_offload_caps;
    std::memset(p, 0, eth::size_bytes);
    ifc::set<eth::csum_cap>(p, 1);
    ifc::set<eth::vlan_cap>(p, 1);
    ifc::set<eth::self_lb_en_modifiable>(p, 1);
    ifc::set<eth::wqe_inline_mode>(p, 2);
    ifc::set<eth::rss_ind_tbl_cap>(p, log_max_rqt_size);
    ifc::set<eth::scatter_fcs>(p, 1);
    ifc::set<eth::max_lso_cap>(p, kMaxLsoLog);
}

// Flow Table NIC Capabilities: receive tables only (transmit ft_support 0), matching on
// the outer headers' fields below, forwarding to TIRs and tables, counting, flow tags, a
// miss that goes to another table.
void hca_caps::fill_flow_table_caps(std::byte* p) const {
    using nic = ifc::flow_table_nic_cap;
    using prop = ifc::flow_table_prop_layout;
    using fields = ifc::flow_table_fields_supported;
    std::memset(p, 0, nic::size_bytes);
    std::byte* rx = ifc::at<nic::flow_table_properties_nic_receive>(p);
    ifc::set<prop::ft_support>(rx, 1);
    ifc::set<prop::flow_counter>(rx, 1);
    ifc::set<prop::flow_modify_en>(rx, 1);
    ifc::set<prop::modify_root>(rx, 1);
    ifc::set<prop::identified_miss_table_mode>(rx, 1);
    ifc::set<prop::log_max_ft_size>(rx, flow_log_max_ft_size);
    ifc::set<prop::max_ft_level>(rx, flow_max_ft_level);
    ifc::set<prop::log_max_ft_num>(rx, flow_log_max_ft_num);
    ifc::set<prop::log_max_flow_counter>(rx, flow_log_max_counter);
    ifc::set<prop::log_max_destination>(rx, flow_log_max_destination);
    ifc::set<prop::log_max_flow>(rx, flow_log_max_ft_size);
    for (std::byte* f : {ifc::at<prop::ft_field_support>(rx), ifc::at<prop::ft_field_bitmask_support>(rx)}) {
        ifc::set<fields::outer_dmac>(f, 1);
        ifc::set<fields::outer_smac>(f, 1);
        ifc::set<fields::outer_ether_type>(f, 1);
        ifc::set<fields::outer_ip_version>(f, 1);
        ifc::set<fields::outer_first_prio>(f, 1);
        ifc::set<fields::outer_first_cfi>(f, 1);
        ifc::set<fields::outer_first_vid>(f, 1);
        ifc::set<fields::outer_ipv4_ttl>(f, 1);
        ifc::set<fields::outer_sip>(f, 1);
        ifc::set<fields::outer_dip>(f, 1);
        ifc::set<fields::outer_frag>(f, 1);
        ifc::set<fields::outer_ip_protocol>(f, 1);
        ifc::set<fields::outer_ip_ecn>(f, 1);
        ifc::set<fields::outer_ip_dscp>(f, 1);
        ifc::set<fields::outer_udp_sport>(f, 1);
        ifc::set<fields::outer_udp_dport>(f, 1);
        ifc::set<fields::outer_tcp_sport>(f, 1);
        ifc::set<fields::outer_tcp_dport>(f, 1);
        ifc::set<fields::outer_tcp_flags>(f, 1);
    }
}

}  // namespace cxv::sim
