// NIC flow steering (PRM "Flow Table"): flow tables, flow groups with their match
// criteria, flow table entries (match value, action, destinations, counters), the root
// table of the receive side, and flow counters; and the capabilities that describe them
// (QUERY_HCA_CAP's FLOW_TABLE and ETHERNET_OFFLOADS types). Names and offsets follow the
// PRM's tables; tests/hw checks them against Linux's mlx5_ifc.h.
#pragma once

#include <cstdint>

#include "hw/ifc_cmd.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- match parameters ------------------------------------------------------------------

// PRM "Flow Table Entry Match Set Layer 2-4": the headers a rule may match, as they are
// on the wire (MACs split in two, IPv4 addresses in the last 4 bytes of their 16).
#define CXV_IFC_fte_match_set_lyr_2_4(F, S, A, T) \
    F(smac_47_16, 0x000, 32)                      \
    F(smac_15_0, 0x020, 16)                       \
    F(ethertype, 0x030, 16)                       \
    F(dmac_47_16, 0x040, 32)                      \
    F(dmac_15_0, 0x060, 16)                       \
    F(first_prio, 0x070, 3)                       \
    F(first_cfi, 0x073, 1)                        \
    F(first_vid, 0x074, 12)                       \
    F(ip_protocol, 0x080, 8)                      \
    F(ip_dscp, 0x088, 6)                          \
    F(ip_ecn, 0x08e, 2)                           \
    F(cvlan_tag, 0x090, 1)                        \
    F(svlan_tag, 0x091, 1)                        \
    F(frag, 0x092, 1)                             \
    F(ip_version, 0x093, 4)                       \
    F(tcp_flags, 0x097, 9)                        \
    F(tcp_sport, 0x0a0, 16)                       \
    F(tcp_dport, 0x0b0, 16)                       \
    F(ipv4_ihl, 0x0d0, 4)                         \
    F(ttl_hoplimit, 0x0d8, 8)                     \
    F(udp_sport, 0x0e0, 16)                       \
    F(udp_dport, 0x0f0, 16)                       \
    A(src_ipv4_src_ipv6, 0x100, 8, 16)            \
    A(dst_ipv4_dst_ipv6, 0x180, 8, 16)
CXV_IFC_LAYOUT(fte_match_set_lyr_2_4, 0x200)

// PRM "Flow Table Entry Match Set Misc": of its fields, the IPv6 flow labels (Linux's
// mlx5_ib matches an ibv_flow_spec_ipv6's flow_label there).
#define CXV_IFC_fte_match_set_misc(F, S, A, T) \
    F(outer_ipv6_flow_label, 0x0ec, 20)        \
    F(inner_ipv6_flow_label, 0x10c, 20)
CXV_IFC_LAYOUT(fte_match_set_misc, 0x200)

// PRM "Flow Table Entry Match Parameters": the outer headers, then the misc parameters;
// the other sets (inner headers, misc 2 to 5) are not modelled: a group that puts
// criteria in them is refused (fw_flow.cc).
#define CXV_IFC_fte_match_param(F, S, A, T)              \
    S(outer_headers, 0x000, fte_match_set_lyr_2_4)       \
    S(misc_parameters, 0x200, fte_match_set_misc)
CXV_IFC_LAYOUT(fte_match_param, 0x1000)

// create_flow_group_in.match_criteria_enable: a bit per set (Linux MLX5_MATCH_*).
enum class match_criteria : std::uint8_t {
    OUTER_HEADERS = 1u << 0,
    MISC_PARAMETERS = 1u << 1,
    INNER_HEADERS = 1u << 2,
    MISC_PARAMETERS_2 = 1u << 3,
    MISC_PARAMETERS_3 = 1u << 4,
    MISC_PARAMETERS_4 = 1u << 5,
    MISC_PARAMETERS_5 = 1u << 6,
};

// --- flow tables and groups ------------------------------------------------------------

// PRM "Flow Table Context": the table's level (a table forwards only to tables of a
// higher level), its size (2^log_size entries), and what a packet no entry matches
// does (table_miss_action: the default, or forward to table_miss_id).
#define CXV_IFC_flow_table_context(F, S, A, T) \
    F(reformat_en, 0x000, 1)                   \
    F(decap_en, 0x001, 1)                      \
    F(sw_owner, 0x002, 1)                      \
    F(termination_table, 0x003, 1)             \
    F(table_miss_action, 0x004, 4)             \
    F(level, 0x008, 8)                         \
    F(log_size, 0x018, 8)                      \
    F(table_miss_id, 0x028, 24)                \
    F(lag_master_next_table_id, 0x048, 24)
CXV_IFC_LAYOUT(flow_table_context, 0x140)

// flow_table_context.table_miss_action (Linux enum mlx5_flow_table_miss_action), and the
// table types (MLX5_FLOW_TABLE_TYPE_*): NIC receive is the one modelled.
enum class flow_table_miss_action : std::uint8_t { DEF = 0x0, FWD = 0x1, SWITCH_DOMAIN = 0x2 };
enum class flow_table_type : std::uint8_t { NIC_RX = 0x0, NIC_TX = 0x1, FDB = 0x4 };

#define CXV_IFC_create_flow_table_in(F, S, A, T)         \
    F(opcode, 0x000, 16)                                 \
    F(uid, 0x010, 16)                                    \
    F(op_mod, 0x030, 16)                                 \
    F(other_vport, 0x040, 1)                             \
    F(vport_number, 0x050, 16)                           \
    F(table_type, 0x080, 8)                              \
    S(flow_table_context, 0x0c0, flow_table_context)
CXV_IFC_LAYOUT(create_flow_table_in, 0x200)

#define CXV_IFC_create_flow_table_out(F, S, A, T) \
    F(status, 0x000, 8)                           \
    F(syndrome, 0x020, 32)                        \
    F(table_id, 0x048, 24)
CXV_IFC_LAYOUT(create_flow_table_out, 0x80)

// PRM MODIFY_FLOW_TABLE: the context's fields that modify_field_select names are set
// (bit 0: table_miss_action and table_miss_id; bit 15: lag_master_next_table_id).
#define CXV_IFC_modify_flow_table_in(F, S, A, T)         \
    F(opcode, 0x000, 16)                                 \
    F(op_mod, 0x030, 16)                                 \
    F(other_vport, 0x040, 1)                             \
    F(vport_number, 0x050, 16)                           \
    F(modify_field_select, 0x070, 16)                    \
    F(table_type, 0x080, 8)                              \
    F(table_id, 0x0a8, 24)                               \
    S(flow_table_context, 0x0c0, flow_table_context)
CXV_IFC_LAYOUT(modify_flow_table_in, 0x200)

#define CXV_IFC_modify_flow_table_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_flow_table_out, 0x80)

inline constexpr std::uint16_t modify_flow_table_miss = 1u << 0;
inline constexpr std::uint16_t modify_flow_table_lag_next = 1u << 15;

// The commands that name a table by type and id and nothing between (DESTROY_FLOW_TABLE,
// DESTROY_FLOW_GROUP, SET_FLOW_TABLE_ENTRY, DELETE_FLOW_TABLE_ENTRY) begin so.
#define CXV_IFC_FLOW_TABLE_ADDRESS(F) \
    F(opcode, 0x000, 16)              \
    F(op_mod, 0x030, 16)              \
    F(other_vport, 0x040, 1)          \
    F(vport_number, 0x050, 16)        \
    F(table_type, 0x080, 8)           \
    F(table_id, 0x0a8, 24)

#define CXV_IFC_destroy_flow_table_in(F, S, A, T) CXV_IFC_FLOW_TABLE_ADDRESS(F)
CXV_IFC_LAYOUT(destroy_flow_table_in, 0x200)

#define CXV_IFC_destroy_flow_table_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_flow_table_out, 0x80)

// PRM CREATE_FLOW_GROUP: entries start_flow_index..end_flow_index of the table, and
// which fields (the criteria's set bits) their rules match on.
#define CXV_IFC_create_flow_group_in(F, S, A, T) \
    F(opcode, 0x000, 16)                         \
    F(op_mod, 0x030, 16)                         \
    F(other_vport, 0x040, 1)                     \
    F(vport_number, 0x050, 16)                   \
    F(table_type, 0x080, 8)                      \
    F(group_type, 0x08c, 4)                      \
    F(table_id, 0x0a8, 24)                       \
    F(start_flow_index, 0x0e0, 32)               \
    F(end_flow_index, 0x120, 32)                 \
    F(match_criteria_enable, 0x1f8, 8)           \
    S(match_criteria, 0x200, fte_match_param)
CXV_IFC_LAYOUT(create_flow_group_in, 0x2000)

#define CXV_IFC_create_flow_group_out(F, S, A, T) \
    F(status, 0x000, 8)                           \
    F(syndrome, 0x020, 32)                        \
    F(group_id, 0x048, 24)
CXV_IFC_LAYOUT(create_flow_group_out, 0x80)

#define CXV_IFC_destroy_flow_group_in(F, S, A, T) \
    CXV_IFC_FLOW_TABLE_ADDRESS(F)                 \
    F(group_id, 0x0c0, 32)
CXV_IFC_LAYOUT(destroy_flow_group_in, 0x200)

#define CXV_IFC_destroy_flow_group_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(destroy_flow_group_out, 0x80)

// --- flow table entries ----------------------------------------------------------------

// PRM "Flow Context": the rule's group, the tag its packets' CQEs carry, the action
// (bits below), how many destinations and counters follow the context (each 64 bits:
// dest_format_struct, then flow_counter_list), and the match value.
#define CXV_IFC_flow_context(F, S, A, T)     \
    F(group_id, 0x020, 32)                   \
    F(flow_tag, 0x048, 24)                   \
    F(action, 0x070, 16)                     \
    F(extended_destination, 0x080, 1)        \
    F(flow_source, 0x082, 2)                 \
    F(destination_list_size, 0x088, 24)      \
    F(flow_counter_list_size, 0x0a8, 24)     \
    F(packet_reformat_id, 0x0c0, 32)         \
    F(modify_header_id, 0x0e0, 32)           \
    S(match_value, 0x200, fte_match_param)
CXV_IFC_LAYOUT(flow_context, 0x1800)

// flow_context.action (Linux MLX5_FLOW_CONTEXT_ACTION_*): the ones modelled.
enum class flow_action : std::uint16_t { ALLOW = 0x1, DROP = 0x2, FWD_DEST = 0x4, COUNT = 0x8 };

// PRM "Destination Format": a TIR or a flow table (Linux MLX5_IFC_FLOW_DESTINATION_TYPE_*).
#define CXV_IFC_dest_format_struct(F, S, A, T) \
    F(destination_type, 0x000, 8)              \
    F(destination_id, 0x008, 24)               \
    F(packet_reformat, 0x021, 1)
CXV_IFC_LAYOUT(dest_format_struct, 0x40)

enum class flow_destination_type : std::uint8_t { VPORT = 0x0, FLOW_TABLE = 0x1, TIR = 0x2 };

#define CXV_IFC_flow_counter_list(F, S, A, T) F(flow_counter_id, 0x000, 32)
CXV_IFC_LAYOUT(flow_counter_list, 0x40)

// PRM SET_FLOW_TABLE_ENTRY: entry flow_index of the table (op_mod 0 creates it; 1, with
// modify_enable_mask, changes an existing one).
#define CXV_IFC_set_fte_in(F, S, A, T)     \
    CXV_IFC_FLOW_TABLE_ADDRESS(F)          \
    F(ignore_flow_level, 0x0c0, 1)         \
    F(modify_enable_mask, 0x0d8, 8)        \
    F(flow_index, 0x100, 32)               \
    S(flow_context, 0x200, flow_context)
CXV_IFC_LAYOUT(set_fte_in, 0x1a00)

#define CXV_IFC_set_fte_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_fte_out, 0x80)

#define CXV_IFC_delete_fte_in(F, S, A, T) \
    CXV_IFC_FLOW_TABLE_ADDRESS(F)         \
    F(flow_index, 0x100, 32)
CXV_IFC_LAYOUT(delete_fte_in, 0x200)

#define CXV_IFC_delete_fte_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(delete_fte_out, 0x80)

// PRM SET_FLOW_TABLE_ROOT: the table received packets meet first (table_id 0: none).
#define CXV_IFC_set_flow_table_root_in(F, S, A, T) \
    F(opcode, 0x000, 16)                           \
    F(op_mod, 0x030, 16)                           \
    F(other_vport, 0x040, 1)                       \
    F(vport_number, 0x050, 16)                     \
    F(table_type, 0x080, 8)                        \
    F(table_of_other_vport, 0x08f, 1)              \
    F(table_vport_number, 0x090, 16)               \
    F(table_id, 0x0a8, 24)                         \
    F(underlay_qpn, 0x0c8, 24)
CXV_IFC_LAYOUT(set_flow_table_root_in, 0x200)

#define CXV_IFC_set_flow_table_root_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_flow_table_root_out, 0x80)

// --- flow counters ---------------------------------------------------------------------

#define CXV_IFC_alloc_flow_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                          \
    F(op_mod, 0x030, 16)                          \
    F(flow_counter_bulk_log_size, 0x073, 5)       \
    F(flow_counter_bulk, 0x078, 8)
CXV_IFC_LAYOUT(alloc_flow_counter_in, 0x80)

#define CXV_IFC_alloc_flow_counter_out(F, S, A, T) \
    F(status, 0x000, 8)                            \
    F(syndrome, 0x020, 32)                         \
    F(flow_counter_id, 0x040, 32)
CXV_IFC_LAYOUT(alloc_flow_counter_out, 0x80)

#define CXV_IFC_dealloc_flow_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                            \
    F(op_mod, 0x030, 16)                            \
    F(flow_counter_id, 0x040, 32)
CXV_IFC_LAYOUT(dealloc_flow_counter_in, 0x80)

#define CXV_IFC_dealloc_flow_counter_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(dealloc_flow_counter_out, 0x80)

// PRM QUERY_FLOW_COUNTER: num_of_counters counters from flow_counter_id (0: one), each
// a traffic_counter; `clear` zeroes them after reading.
#define CXV_IFC_query_flow_counter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                          \
    F(op_mod, 0x030, 16)                          \
    F(clear, 0x0c0, 1)                            \
    F(num_of_counters, 0x0d0, 16)                 \
    F(flow_counter_id, 0x0e0, 32)
CXV_IFC_LAYOUT(query_flow_counter_in, 0x100)

// (traffic_counter: hw/ifc_counters.h.)
#define CXV_IFC_query_flow_counter_out(F, S, A, T) \
    F(status, 0x000, 8)                            \
    F(syndrome, 0x020, 32)                         \
    T(flow_statistics, 0x080, traffic_counter, 0)
CXV_IFC_LAYOUT(query_flow_counter_out, 0x80)

// --- capabilities ----------------------------------------------------------------------

// PRM "Flow Table Fields Supported": a bit per outer-header field a group may match.
#define CXV_IFC_flow_table_fields_supported(F, S, A, T) \
    F(outer_dmac, 0x000, 1)                             \
    F(outer_smac, 0x001, 1)                             \
    F(outer_ether_type, 0x002, 1)                       \
    F(outer_ip_version, 0x003, 1)                       \
    F(outer_first_prio, 0x004, 1)                       \
    F(outer_first_cfi, 0x005, 1)                        \
    F(outer_first_vid, 0x006, 1)                        \
    F(outer_ipv4_ttl, 0x007, 1)                         \
    F(outer_sip, 0x00c, 1)                              \
    F(outer_dip, 0x00d, 1)                              \
    F(outer_frag, 0x00e, 1)                             \
    F(outer_ip_protocol, 0x00f, 1)                      \
    F(outer_ip_ecn, 0x010, 1)                           \
    F(outer_ip_dscp, 0x011, 1)                          \
    F(outer_udp_sport, 0x012, 1)                        \
    F(outer_udp_dport, 0x013, 1)                        \
    F(outer_tcp_sport, 0x014, 1)                        \
    F(outer_tcp_dport, 0x015, 1)                        \
    F(outer_tcp_flags, 0x016, 1)
CXV_IFC_LAYOUT(flow_table_fields_supported, 0x80)

// PRM "Flow Table Properties": what one table type supports.
#define CXV_IFC_flow_table_prop_layout(F, S, A, T)                    \
    F(ft_support, 0x000, 1)                                           \
    F(flow_counter, 0x002, 1)                                         \
    F(flow_modify_en, 0x003, 1)                                       \
    F(modify_root, 0x004, 1)                                          \
    F(identified_miss_table_mode, 0x005, 1)                           \
    F(flow_table_modify, 0x006, 1)                                    \
    F(ignore_flow_level, 0x015, 1)                                    \
    F(log_max_ft_size, 0x022, 6)                                      \
    F(log_max_modify_header_context, 0x028, 8)                        \
    F(max_modify_header_actions, 0x030, 8)                            \
    F(max_ft_level, 0x038, 8)                                         \
    F(log_max_ft_num, 0x078, 8)                                       \
    F(log_max_flow_counter, 0x090, 8)                                 \
    F(log_max_destination, 0x098, 8)                                  \
    F(log_max_flow, 0x0b8, 8)                                         \
    S(ft_field_support, 0x100, flow_table_fields_supported)           \
    S(ft_field_bitmask_support, 0x180, flow_table_fields_supported)
CXV_IFC_LAYOUT(flow_table_prop_layout, 0x200)

// PRM "Flow Table NIC Capabilities" (QUERY_HCA_CAP type FLOW_TABLE): the receive side's
// properties; transmit tables are not modelled (their ft_support is 0).
#define CXV_IFC_flow_table_nic_cap(F, S, A, T)                                         \
    F(nic_rx_multi_path_tirs, 0x000, 1)                                                \
    S(flow_table_properties_nic_receive, 0x200, flow_table_prop_layout)                \
    S(flow_table_properties_nic_transmit, 0x800, flow_table_prop_layout)
CXV_IFC_LAYOUT(flow_table_nic_cap, 0x8000)

// PRM "Per Protocol Networking Offload Capabilities" (QUERY_HCA_CAP type
// ETHERNET_OFFLOADS): checksums, VLAN stripping and insertion, LSO, inline modes, the
// RQT size for RSS, FCS scatter.
#define CXV_IFC_per_protocol_networking_offload_caps(F, S, A, T) \
    F(csum_cap, 0x000, 1)                                        \
    F(vlan_cap, 0x001, 1)                                        \
    F(lro_cap, 0x002, 1)                                         \
    F(wqe_vlan_insert, 0x007, 1)                                 \
    F(self_lb_en_modifiable, 0x008, 1)                           \
    F(max_lso_cap, 0x00b, 5)                                     \
    F(multi_pkt_send_wqe, 0x010, 2)                              \
    F(wqe_inline_mode, 0x012, 2)                                 \
    F(rss_ind_tbl_cap, 0x014, 4)                                 \
    F(reg_umr_sq, 0x018, 1)                                      \
    F(scatter_fcs, 0x019, 1)                                     \
    F(enhanced_multi_pkt_send_wqe, 0x01a, 1)                     \
    F(cqe_checksum_full, 0x023, 1)
CXV_IFC_LAYOUT(per_protocol_networking_offload_caps, 0x800)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_FLOW(X)                                                   \
    X(fte_match_set_lyr_2_4, fte_match_set_lyr_2_4)                               \
    X(fte_match_set_misc, fte_match_set_misc)                                     \
    X(fte_match_param, fte_match_param)                                           \
    X(flow_table_context, flow_table_context)                                     \
    X(create_flow_table_in, create_flow_table_in)                                 \
    X(create_flow_table_out, create_flow_table_out)                               \
    X(modify_flow_table_in, modify_flow_table_in)                                 \
    X(modify_flow_table_out, modify_flow_table_out)                               \
    X(destroy_flow_table_in, destroy_flow_table_in)                               \
    X(destroy_flow_table_out, destroy_flow_table_out)                             \
    X(create_flow_group_in, create_flow_group_in)                                 \
    X(create_flow_group_out, create_flow_group_out)                               \
    X(destroy_flow_group_in, destroy_flow_group_in)                               \
    X(destroy_flow_group_out, destroy_flow_group_out)                             \
    X(flow_context, flow_context)                                                 \
    X(dest_format_struct, dest_format_struct)                                     \
    X(flow_counter_list, flow_counter_list)                                       \
    X(set_fte_in, set_fte_in)                                                     \
    X(set_fte_out, set_fte_out)                                                   \
    X(delete_fte_in, delete_fte_in)                                               \
    X(delete_fte_out, delete_fte_out)                                             \
    X(set_flow_table_root_in, set_flow_table_root_in)                             \
    X(set_flow_table_root_out, set_flow_table_root_out)                           \
    X(alloc_flow_counter_in, alloc_flow_counter_in)                               \
    X(alloc_flow_counter_out, alloc_flow_counter_out)                             \
    X(dealloc_flow_counter_in, dealloc_flow_counter_in)                           \
    X(dealloc_flow_counter_out, dealloc_flow_counter_out)                         \
    X(query_flow_counter_in, query_flow_counter_in)                               \
    X(query_flow_counter_out, query_flow_counter_out)                             \
    X(flow_table_fields_supported, flow_table_fields_supported)                   \
    X(flow_table_prop_layout, flow_table_prop_layout)                             \
    X(flow_table_nic_cap, flow_table_nic_cap)                                     \
    X(per_protocol_networking_offload_caps, per_protocol_networking_offload_caps)

}  // namespace cxv::hw::ifc
