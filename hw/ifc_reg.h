// Access registers (PRM "Access Registers"): the register layouts ACCESS_REG carries in
// register_data, for the port, module and management registers the model implements.
// Register ids and op_mods are in hw/registers.h.
#pragma once

#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- Port registers ------------------------------------------------------------------

// PRM PAOS (Ports Administrative and Operational Status Register, 0x5006): a port's
// wanted (admin) and actual (oper) state, 1 up and 2 down; ase and ee enable the
// writes of admin_status and e (event generation).
#define CXV_IFC_paos_reg(F, S, A, T) \
    F(swid, 0x000, 8)                \
    F(local_port, 0x008, 8)          \
    F(admin_status, 0x014, 4)        \
    F(oper_status, 0x01c, 4)         \
    F(ase, 0x020, 1)                 \
    F(ee, 0x021, 1)                  \
    F(e, 0x03e, 2)
CXV_IFC_LAYOUT(paos_reg, 0x80)

// PRM PTYS (Port Type and Speed Register, 0x5004): per protocol (proto_mask: bit 0
// InfiniBand, bit 2 Ethernet) the speeds a port can do, is allowed to do and does.
#define CXV_IFC_ptys_reg(F, S, A, T)       \
    F(an_disable_admin, 0x001, 1)          \
    F(an_disable_cap, 0x002, 1)            \
    F(local_port, 0x008, 8)                \
    F(proto_mask, 0x01d, 3)                \
    F(an_status, 0x020, 4)                 \
    F(data_rate_oper, 0x030, 16)           \
    F(ext_eth_proto_capability, 0x040, 32) \
    F(eth_proto_capability, 0x060, 32)     \
    F(ib_link_width_capability, 0x080, 16) \
    F(ib_proto_capability, 0x090, 16)      \
    F(ext_eth_proto_admin, 0x0a0, 32)      \
    F(eth_proto_admin, 0x0c0, 32)          \
    F(ib_link_width_admin, 0x0e0, 16)      \
    F(ib_proto_admin, 0x0f0, 16)           \
    F(ext_eth_proto_oper, 0x100, 32)       \
    F(eth_proto_oper, 0x120, 32)           \
    F(ib_link_width_oper, 0x140, 16)       \
    F(ib_proto_oper, 0x150, 16)            \
    F(connector_type, 0x17c, 4)            \
    F(eth_proto_lp_advertise, 0x180, 32)
CXV_IFC_LAYOUT(ptys_reg, 0x200)

// PRM PMTU (Port MTU Register, 0x5003): MTUs in bytes.
#define CXV_IFC_pmtu_reg(F, S, A, T) \
    F(local_port, 0x008, 8)          \
    F(max_mtu, 0x020, 16)            \
    F(admin_mtu, 0x040, 16)          \
    F(oper_mtu, 0x060, 16)
CXV_IFC_LAYOUT(pmtu_reg, 0x80)

// PRM HOST_ENDIANNESS register (0x7004): written once at bring-up; he = 1 for a
// big-endian host.
#define CXV_IFC_register_host_endianness(F, S, A, T) \
    F(he, 0x000, 1)
CXV_IFC_LAYOUT(register_host_endianness, 0x80)

// PRM PMLP (Ports Module to Local Port Register, 0x5002): which module and lanes a port
// uses; width is the number of lanes, laneN_module_mapping is a lane_2_module_mapping
// (module, tx_lane, rx_lane).
#define CXV_IFC_pmlp_reg(F, S, A, T)   \
    F(rxtx, 0x000, 1)                  \
    F(local_port, 0x008, 8)            \
    F(width, 0x018, 8)                 \
    F(lane0_module_mapping, 0x020, 32) \
    F(lane1_module_mapping, 0x040, 32) \
    F(lane2_module_mapping, 0x060, 32) \
    F(lane3_module_mapping, 0x080, 32)
CXV_IFC_LAYOUT(pmlp_reg, 0x200)

#define CXV_IFC_lane_2_module_mapping(F, S, A, T) \
    F(rx_lane, 0x04, 4)                           \
    F(tx_lane, 0x0c, 4)                           \
    F(module, 0x18, 8)
CXV_IFC_LAYOUT(lane_2_module_mapping, 0x20)

// PRM PMAOS (Ports Module Administrative and Operational Status Register, 0x5012): the
// module's wanted (admin: 1 enabled, 2 disabled, 3 enabled once) and actual state (oper:
// 1 plugged and enabled, 2 unplugged, 3 plugged with error, 4 plugged and disabled).
#define CXV_IFC_pmaos_reg(F, S, A, T) \
    F(module, 0x008, 8)               \
    F(admin_status, 0x014, 4)         \
    F(oper_status, 0x01c, 4)          \
    F(ase, 0x020, 1)                  \
    F(ee, 0x021, 1)                   \
    F(e, 0x03e, 2)
CXV_IFC_LAYOUT(pmaos_reg, 0x80)

// PRM PCMR (Ports Control Mechanisms Register, 0x5041): what the port can do (the _cap
// bits) and does: fcs_chk drops received frames whose FCS is wrong; the entropy bits
// (RoCE source port) and rx_ts_over_crc.
#define CXV_IFC_pcmr_reg(F, S, A, T)     \
    F(local_port, 0x008, 8)              \
    F(entropy_force_cap, 0x020, 1)       \
    F(entropy_calc_cap, 0x021, 1)        \
    F(entropy_gre_calc_cap, 0x022, 1)    \
    F(rx_ts_over_crc_cap, 0x032, 1)      \
    F(fcs_cap, 0x03e, 1)                 \
    F(entropy_force, 0x040, 1)           \
    F(entropy_calc, 0x041, 1)            \
    F(entropy_gre_calc, 0x042, 1)        \
    F(rx_ts_over_crc, 0x052, 1)          \
    F(fcs_chk, 0x05e, 1)
CXV_IFC_LAYOUT(pcmr_reg, 0x60)

// PRM PCAP (Port Capabilities Register, 0x5001): an InfiniBand port's
// PortInfo:CapabilityMask (IBA 14.2.5.6) in port_capability_mask[0], as the driver sets
// it (Linux's mlx5_set_port_caps, when ib_cm or a user changes the port's capabilities).
#define CXV_IFC_pcap_reg(F, S, A, T) \
    F(local_port, 0x008, 8)          \
    A(port_capability_mask, 0x020, 32, 4)
CXV_IFC_LAYOUT(pcap_reg, 0xa0)

// PRM NODE_DESC (0x6001): the node description, 64 bytes of text (IBTA NodeDescription).
// Linux's mlx5_ib reads it where no subnet management agent answers (a RoCE port) and
// writes what a user sets. Linux names the layout set_node_in.
#define CXV_IFC_set_node_in(F, S, A, T) \
    A(node_description, 0x000, 8, 64)
CXV_IFC_LAYOUT(set_node_in, 0x200)

// PRM PPCNT (Ports Performance Counters Register, 0x5008): one counter group (grp) of a
// port, per priority for the per-priority groups (prio_tc); clr clears the group after
// it is read. counter_set holds the group's layout, below.
#define CXV_IFC_ppcnt_reg(F, S, A, T) \
    F(swid, 0x000, 8)                 \
    F(local_port, 0x008, 8)           \
    F(pnat, 0x010, 2)                 \
    F(grp, 0x01a, 6)                  \
    F(clr, 0x020, 1)                  \
    F(prio_tc, 0x03d, 3)              \
    A(counter_set, 0x040, 32, 62)
CXV_IFC_LAYOUT(ppcnt_reg, 0x800)

// PPCNT counter groups: every counter is 64 bits, as a _high and a _low dword.
// IEEE 802.3 (grp 0x0).
#define CXV_IFC_eth_802_3_cntrs_grp_data_layout(F, S, A, T) \
    F(a_frames_transmitted_ok_high, 0x000, 32)              \
    F(a_frames_transmitted_ok_low, 0x020, 32)               \
    F(a_frames_received_ok_high, 0x040, 32)                 \
    F(a_frames_received_ok_low, 0x060, 32)                  \
    F(a_frame_check_sequence_errors_high, 0x080, 32)        \
    F(a_frame_check_sequence_errors_low, 0x0a0, 32)         \
    F(a_alignment_errors_high, 0x0c0, 32)                   \
    F(a_alignment_errors_low, 0x0e0, 32)                    \
    F(a_octets_transmitted_ok_high, 0x100, 32)              \
    F(a_octets_transmitted_ok_low, 0x120, 32)               \
    F(a_octets_received_ok_high, 0x140, 32)                 \
    F(a_octets_received_ok_low, 0x160, 32)                  \
    F(a_multicast_frames_xmitted_ok_high, 0x180, 32)        \
    F(a_multicast_frames_xmitted_ok_low, 0x1a0, 32)         \
    F(a_broadcast_frames_xmitted_ok_high, 0x1c0, 32)        \
    F(a_broadcast_frames_xmitted_ok_low, 0x1e0, 32)         \
    F(a_multicast_frames_received_ok_high, 0x200, 32)       \
    F(a_multicast_frames_received_ok_low, 0x220, 32)        \
    F(a_broadcast_frames_received_ok_high, 0x240, 32)       \
    F(a_broadcast_frames_received_ok_low, 0x260, 32)        \
    F(a_in_range_length_errors_high, 0x280, 32)             \
    F(a_in_range_length_errors_low, 0x2a0, 32)              \
    F(a_out_of_range_length_field_high, 0x2c0, 32)          \
    F(a_out_of_range_length_field_low, 0x2e0, 32)           \
    F(a_frame_too_long_errors_high, 0x300, 32)              \
    F(a_frame_too_long_errors_low, 0x320, 32)               \
    F(a_symbol_error_during_carrier_high, 0x340, 32)        \
    F(a_symbol_error_during_carrier_low, 0x360, 32)         \
    F(a_mac_control_frames_transmitted_high, 0x380, 32)     \
    F(a_mac_control_frames_transmitted_low, 0x3a0, 32)      \
    F(a_mac_control_frames_received_high, 0x3c0, 32)        \
    F(a_mac_control_frames_received_low, 0x3e0, 32)         \
    F(a_unsupported_opcodes_received_high, 0x400, 32)       \
    F(a_unsupported_opcodes_received_low, 0x420, 32)        \
    F(a_pause_mac_ctrl_frames_received_high, 0x440, 32)     \
    F(a_pause_mac_ctrl_frames_received_low, 0x460, 32)      \
    F(a_pause_mac_ctrl_frames_transmitted_high, 0x480, 32)  \
    F(a_pause_mac_ctrl_frames_transmitted_low, 0x4a0, 32)
CXV_IFC_LAYOUT(eth_802_3_cntrs_grp_data_layout, 0x7c0)

// RFC 2863 (grp 0x1).
#define CXV_IFC_eth_2863_cntrs_grp_data_layout(F, S, A, T) \
    F(if_in_octets_high, 0x000, 32)                        \
    F(if_in_octets_low, 0x020, 32)                         \
    F(if_in_ucast_pkts_high, 0x040, 32)                    \
    F(if_in_ucast_pkts_low, 0x060, 32)                     \
    F(if_in_discards_high, 0x080, 32)                      \
    F(if_in_discards_low, 0x0a0, 32)                       \
    F(if_in_errors_high, 0x0c0, 32)                        \
    F(if_in_errors_low, 0x0e0, 32)                         \
    F(if_in_unknown_protos_high, 0x100, 32)                \
    F(if_in_unknown_protos_low, 0x120, 32)                 \
    F(if_out_octets_high, 0x140, 32)                       \
    F(if_out_octets_low, 0x160, 32)                        \
    F(if_out_ucast_pkts_high, 0x180, 32)                   \
    F(if_out_ucast_pkts_low, 0x1a0, 32)                    \
    F(if_out_discards_high, 0x1c0, 32)                     \
    F(if_out_discards_low, 0x1e0, 32)                      \
    F(if_out_errors_high, 0x200, 32)                       \
    F(if_out_errors_low, 0x220, 32)                        \
    F(if_in_multicast_pkts_high, 0x240, 32)                \
    F(if_in_multicast_pkts_low, 0x260, 32)                 \
    F(if_in_broadcast_pkts_high, 0x280, 32)                \
    F(if_in_broadcast_pkts_low, 0x2a0, 32)                 \
    F(if_out_multicast_pkts_high, 0x2c0, 32)               \
    F(if_out_multicast_pkts_low, 0x2e0, 32)                \
    F(if_out_broadcast_pkts_high, 0x300, 32)               \
    F(if_out_broadcast_pkts_low, 0x320, 32)
CXV_IFC_LAYOUT(eth_2863_cntrs_grp_data_layout, 0x7c0)

// RFC 2819 (grp 0x2): the Ethernet statistics of RMON, sizes in octets.
#define CXV_IFC_eth_2819_cntrs_grp_data_layout(F, S, A, T) \
    F(ether_stats_drop_events_high, 0x000, 32)             \
    F(ether_stats_drop_events_low, 0x020, 32)              \
    F(ether_stats_octets_high, 0x040, 32)                  \
    F(ether_stats_octets_low, 0x060, 32)                   \
    F(ether_stats_pkts_high, 0x080, 32)                    \
    F(ether_stats_pkts_low, 0x0a0, 32)                     \
    F(ether_stats_broadcast_pkts_high, 0x0c0, 32)          \
    F(ether_stats_broadcast_pkts_low, 0x0e0, 32)           \
    F(ether_stats_multicast_pkts_high, 0x100, 32)          \
    F(ether_stats_multicast_pkts_low, 0x120, 32)           \
    F(ether_stats_crc_align_errors_high, 0x140, 32)        \
    F(ether_stats_crc_align_errors_low, 0x160, 32)         \
    F(ether_stats_undersize_pkts_high, 0x180, 32)          \
    F(ether_stats_undersize_pkts_low, 0x1a0, 32)           \
    F(ether_stats_oversize_pkts_high, 0x1c0, 32)           \
    F(ether_stats_oversize_pkts_low, 0x1e0, 32)            \
    F(ether_stats_fragments_high, 0x200, 32)               \
    F(ether_stats_fragments_low, 0x220, 32)                \
    F(ether_stats_jabbers_high, 0x240, 32)                 \
    F(ether_stats_jabbers_low, 0x260, 32)                  \
    F(ether_stats_collisions_high, 0x280, 32)              \
    F(ether_stats_collisions_low, 0x2a0, 32)               \
    F(ether_stats_pkts64octets_high, 0x2c0, 32)            \
    F(ether_stats_pkts64octets_low, 0x2e0, 32)             \
    F(ether_stats_pkts65to127octets_high, 0x300, 32)       \
    F(ether_stats_pkts65to127octets_low, 0x320, 32)        \
    F(ether_stats_pkts128to255octets_high, 0x340, 32)      \
    F(ether_stats_pkts128to255octets_low, 0x360, 32)       \
    F(ether_stats_pkts256to511octets_high, 0x380, 32)      \
    F(ether_stats_pkts256to511octets_low, 0x3a0, 32)       \
    F(ether_stats_pkts512to1023octets_high, 0x3c0, 32)     \
    F(ether_stats_pkts512to1023octets_low, 0x3e0, 32)      \
    F(ether_stats_pkts1024to1518octets_high, 0x400, 32)    \
    F(ether_stats_pkts1024to1518octets_low, 0x420, 32)     \
    F(ether_stats_pkts1519to2047octets_high, 0x440, 32)    \
    F(ether_stats_pkts1519to2047octets_low, 0x460, 32)     \
    F(ether_stats_pkts2048to4095octets_high, 0x480, 32)    \
    F(ether_stats_pkts2048to4095octets_low, 0x4a0, 32)     \
    F(ether_stats_pkts4096to8191octets_high, 0x4c0, 32)    \
    F(ether_stats_pkts4096to8191octets_low, 0x4e0, 32)     \
    F(ether_stats_pkts8192to10239octets_high, 0x500, 32)   \
    F(ether_stats_pkts8192to10239octets_low, 0x520, 32)
CXV_IFC_LAYOUT(eth_2819_cntrs_grp_data_layout, 0x7c0)

// InfiniBand port counters (grp 0x20): IBA's PortCounters, as Linux's PMA reads them.
#define CXV_IFC_ib_port_cntrs_grp_data_layout(F, S, A, T) \
    F(symbol_error_counter, 0x000, 16)                    \
    F(link_error_recovery_counter, 0x010, 8)              \
    F(link_downed_counter, 0x018, 8)                      \
    F(port_rcv_errors, 0x020, 16)                         \
    F(port_rcv_remote_physical_errors, 0x030, 16)         \
    F(port_rcv_switch_relay_errors, 0x040, 16)            \
    F(port_xmit_discards, 0x050, 16)                      \
    F(port_xmit_constraint_errors, 0x060, 8)              \
    F(port_rcv_constraint_errors, 0x068, 8)               \
    F(link_overrun_errors, 0x078, 8)                      \
    F(vl_15_dropped, 0x090, 16)                           \
    F(port_xmit_wait, 0x120, 32)
CXV_IFC_LAYOUT(ib_port_cntrs_grp_data_layout, 0x140)

// Per priority (grp 0x10, prio_tc = the priority).
#define CXV_IFC_eth_per_prio_grp_data_layout(F, S, A, T)   \
    F(rx_octets_high, 0x000, 32)                           \
    F(rx_octets_low, 0x020, 32)                            \
    F(rx_frames_high, 0x100, 32)                           \
    F(rx_frames_low, 0x120, 32)                            \
    F(tx_octets_high, 0x140, 32)                           \
    F(tx_octets_low, 0x160, 32)                            \
    F(tx_frames_high, 0x240, 32)                           \
    F(tx_frames_low, 0x260, 32)                            \
    F(rx_pause_high, 0x280, 32)                            \
    F(rx_pause_low, 0x2a0, 32)                             \
    F(rx_pause_duration_high, 0x2c0, 32)                   \
    F(rx_pause_duration_low, 0x2e0, 32)                    \
    F(tx_pause_high, 0x300, 32)                            \
    F(tx_pause_low, 0x320, 32)                             \
    F(tx_pause_duration_high, 0x340, 32)                   \
    F(tx_pause_duration_low, 0x360, 32)                    \
    F(rx_pause_transition_high, 0x380, 32)                 \
    F(rx_pause_transition_low, 0x3a0, 32)                  \
    F(rx_discards_high, 0x3c0, 32)                         \
    F(rx_discards_low, 0x3e0, 32)                          \
    F(device_stall_minor_watermark_cnt_high, 0x400, 32)    \
    F(device_stall_minor_watermark_cnt_low, 0x420, 32)     \
    F(device_stall_critical_watermark_cnt_high, 0x440, 32) \
    F(device_stall_critical_watermark_cnt_low, 0x460, 32)
CXV_IFC_LAYOUT(eth_per_prio_grp_data_layout, 0x7c0)

// Physical layer (grp 0x12).
#define CXV_IFC_phys_layer_cntrs(F, S, A, T)             \
    F(time_since_last_clear_high, 0x000, 32)             \
    F(time_since_last_clear_low, 0x020, 32)              \
    F(symbol_errors_high, 0x040, 32)                     \
    F(symbol_errors_low, 0x060, 32)                      \
    F(sync_headers_errors_high, 0x080, 32)               \
    F(sync_headers_errors_low, 0x0a0, 32)                \
    F(edpl_bip_errors_lane0_high, 0x0c0, 32)             \
    F(edpl_bip_errors_lane0_low, 0x0e0, 32)              \
    F(edpl_bip_errors_lane1_high, 0x100, 32)             \
    F(edpl_bip_errors_lane1_low, 0x120, 32)              \
    F(edpl_bip_errors_lane2_high, 0x140, 32)             \
    F(edpl_bip_errors_lane2_low, 0x160, 32)              \
    F(edpl_bip_errors_lane3_high, 0x180, 32)             \
    F(edpl_bip_errors_lane3_low, 0x1a0, 32)              \
    F(fc_fec_corrected_blocks_lane0_high, 0x1c0, 32)     \
    F(fc_fec_corrected_blocks_lane0_low, 0x1e0, 32)      \
    F(fc_fec_corrected_blocks_lane1_high, 0x200, 32)     \
    F(fc_fec_corrected_blocks_lane1_low, 0x220, 32)      \
    F(fc_fec_corrected_blocks_lane2_high, 0x240, 32)     \
    F(fc_fec_corrected_blocks_lane2_low, 0x260, 32)      \
    F(fc_fec_corrected_blocks_lane3_high, 0x280, 32)     \
    F(fc_fec_corrected_blocks_lane3_low, 0x2a0, 32)      \
    F(fc_fec_uncorrectable_blocks_lane0_high, 0x2c0, 32) \
    F(fc_fec_uncorrectable_blocks_lane0_low, 0x2e0, 32)  \
    F(fc_fec_uncorrectable_blocks_lane1_high, 0x300, 32) \
    F(fc_fec_uncorrectable_blocks_lane1_low, 0x320, 32)  \
    F(fc_fec_uncorrectable_blocks_lane2_high, 0x340, 32) \
    F(fc_fec_uncorrectable_blocks_lane2_low, 0x360, 32)  \
    F(fc_fec_uncorrectable_blocks_lane3_high, 0x380, 32) \
    F(fc_fec_uncorrectable_blocks_lane3_low, 0x3a0, 32)  \
    F(rs_fec_corrected_blocks_high, 0x3c0, 32)           \
    F(rs_fec_corrected_blocks_low, 0x3e0, 32)            \
    F(rs_fec_uncorrectable_blocks_high, 0x400, 32)       \
    F(rs_fec_uncorrectable_blocks_low, 0x420, 32)        \
    F(rs_fec_no_errors_blocks_high, 0x440, 32)           \
    F(rs_fec_no_errors_blocks_low, 0x460, 32)            \
    F(rs_fec_single_error_blocks_high, 0x480, 32)        \
    F(rs_fec_single_error_blocks_low, 0x4a0, 32)         \
    F(rs_fec_corrected_symbols_total_high, 0x4c0, 32)    \
    F(rs_fec_corrected_symbols_total_low, 0x4e0, 32)     \
    F(rs_fec_corrected_symbols_lane0_high, 0x500, 32)    \
    F(rs_fec_corrected_symbols_lane0_low, 0x520, 32)     \
    F(rs_fec_corrected_symbols_lane1_high, 0x540, 32)    \
    F(rs_fec_corrected_symbols_lane1_low, 0x560, 32)     \
    F(rs_fec_corrected_symbols_lane2_high, 0x580, 32)    \
    F(rs_fec_corrected_symbols_lane2_low, 0x5a0, 32)     \
    F(rs_fec_corrected_symbols_lane3_high, 0x5c0, 32)    \
    F(rs_fec_corrected_symbols_lane3_low, 0x5e0, 32)     \
    F(link_down_events, 0x600, 32)                       \
    F(successful_recovery_events, 0x620, 32)
CXV_IFC_LAYOUT(phys_layer_cntrs, 0x7c0)

// PRM PCAM (Ports Capabilities Mask Register, 0x507f): which port registers (0x5000 +
// bit) and port features the device implements, for access_reg_group and
// feature_group 0.
#define CXV_IFC_pcam_regs_5000_to_507f(F, S, A, T)   \
    F(port_access_reg_cap_mask_127_to_96, 0x000, 32) \
    F(port_access_reg_cap_mask_95_to_64, 0x020, 32)  \
    F(port_access_reg_cap_mask_63_to_36, 0x040, 28)  \
    F(pplm, 0x05c, 1)                                \
    F(port_access_reg_cap_mask_34_to_32, 0x05d, 3)   \
    F(port_access_reg_cap_mask_31_to_13, 0x060, 19)  \
    F(pbmc, 0x073, 1)                                \
    F(pptb, 0x074, 1)                                \
    F(port_access_reg_cap_mask_10_to_09, 0x075, 2)   \
    F(ppcnt, 0x077, 1)                               \
    F(port_access_reg_cap_mask_07_to_00, 0x078, 8)
CXV_IFC_LAYOUT(pcam_regs_5000_to_507f, 0x80)

#define CXV_IFC_pcam_enhanced_features(F, S, A, T) \
    F(fec_50G_per_lane_in_pplm, 0x068, 1)          \
    F(rx_icrc_encapsulated_counter, 0x06d, 1)      \
    F(ptys_extended_ethernet, 0x072, 1)            \
    F(pfcc_mask, 0x076, 1)                         \
    F(per_lane_error_counters, 0x07a, 1)           \
    F(rx_buffer_fullness_counters, 0x07b, 1)       \
    F(ptys_connector_type, 0x07c, 1)               \
    F(ppcnt_discard_group, 0x07e, 1)               \
    F(ppcnt_statistical_group, 0x07f, 1)
CXV_IFC_LAYOUT(pcam_enhanced_features, 0x80)

#define CXV_IFC_pcam_reg(F, S, A, T)                                    \
    F(feature_group, 0x008, 8)                                          \
    F(access_reg_group, 0x018, 8)                                       \
    S(port_access_reg_cap_mask, 0x040, pcam_regs_5000_to_507f)          \
    S(feature_cap_mask, 0x140, pcam_enhanced_features)
CXV_IFC_LAYOUT(pcam_reg, 0x280)

// --- Management registers ------------------------------------------------------------

// PRM MCAM (Management Capabilities Mask Register,
// 0x907f): which management registers (0x9000 + 128 * access_reg_group + bit) and
// management features the device implements.
#define CXV_IFC_mcam_access_reg(F, S, A, T) \
    F(mcda, 0x01c, 1)                       \
    F(mcc, 0x01d, 1)                        \
    F(mcqi, 0x01e, 1)                       \
    F(mcqs, 0x01f, 1)                       \
    F(regs_95_to_87, 0x020, 9)              \
    F(mpegc, 0x029, 1)                      \
    F(mtutc, 0x02a, 1)                      \
    F(regs_84_to_68, 0x02b, 17)             \
    F(tracer_registers, 0x03c, 4)           \
    F(regs_63_to_46, 0x040, 18)             \
    F(mrtc, 0x052, 1)                       \
    F(regs_44_to_32, 0x053, 13)             \
    F(regs_31_to_0, 0x060, 32)
CXV_IFC_LAYOUT(mcam_access_reg, 0x80)

#define CXV_IFC_mcam_enhanced_features(F, S, A, T) \
    F(mcia_32dwords, 0x05d, 1)                     \
    F(out_pulse_duration_ns, 0x05e, 1)             \
    F(npps_period, 0x05f, 1)                       \
    F(reset_state, 0x06a, 1)                       \
    F(ptpcyc2realtime_modify, 0x06b, 1)            \
    F(pci_status_and_power, 0x06e, 1)              \
    F(mark_tx_action_cnp, 0x074, 1)                \
    F(mark_tx_action_cqe, 0x075, 1)                \
    F(dynamic_tx_overflow, 0x076, 1)               \
    F(pcie_outbound_stalled, 0x07b, 1)             \
    F(tx_overflow_buffer_pkt, 0x07c, 1)            \
    F(mtpps_enh_out_per_adj, 0x07d, 1)             \
    F(mtpps_fs, 0x07e, 1)                          \
    F(pcie_performance_group, 0x07f, 1)
CXV_IFC_LAYOUT(mcam_enhanced_features, 0x80)

#define CXV_IFC_mcam_reg(F, S, A, T)                                    \
    F(feature_group, 0x008, 8)                                          \
    F(access_reg_group, 0x018, 8)                                       \
    S(mng_access_reg_cap_mask, 0x040, mcam_access_reg)                  \
    S(mng_feature_cap_mask, 0x140, mcam_enhanced_features)
CXV_IFC_LAYOUT(mcam_reg, 0x240)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_REG(X)                                                \
    X(paos_reg, paos_reg)                                                     \
    X(ptys_reg, ptys_reg)                                                     \
    X(pmtu_reg, pmtu_reg)                                                     \
    X(register_host_endianness, register_host_endianness)                     \
    X(pmlp_reg, pmlp_reg)                                                     \
    X(lane_2_module_mapping, lane_2_module_mapping)                           \
    X(pmaos_reg, pmaos_reg)                                                   \
    X(pcmr_reg, pcmr_reg)                                                     \
    X(pcap_reg, pcap_reg)                                                     \
    X(set_node_in, set_node_in)                                               \
    X(ppcnt_reg, ppcnt_reg)                                                   \
    X(eth_802_3_cntrs_grp_data_layout, eth_802_3_cntrs_grp_data_layout)       \
    X(eth_2863_cntrs_grp_data_layout, eth_2863_cntrs_grp_data_layout)         \
    X(eth_2819_cntrs_grp_data_layout, eth_2819_cntrs_grp_data_layout)         \
    X(ib_port_cntrs_grp_data_layout, ib_port_cntrs_grp_data_layout)           \
    X(eth_per_prio_grp_data_layout, eth_per_prio_grp_data_layout)             \
    X(phys_layer_cntrs, phys_layer_cntrs)                                     \
    X(pcam_regs_5000_to_507f, pcam_regs_5000_to_507f)                         \
    X(pcam_enhanced_features, pcam_enhanced_features)                         \
    X(pcam_reg, pcam_reg)                                                     \
    X(mcam_access_reg, mcam_access_reg)                                       \
    X(mcam_enhanced_features, mcam_enhanced_features)                         \
    X(mcam_reg, mcam_reg)

}  // namespace cxv::hw::ifc
