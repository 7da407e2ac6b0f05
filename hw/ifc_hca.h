// Bringing the HCA up and down and asking it what it is: the function enable, ISSI and
// firmware page commands, the capability queries, INIT/TEARDOWN_HCA, register access
// (the registers themselves are in ifc_reg.h), MAD_IFC, and the HCA and NIC vport contexts (PRM
// "Initialization and Teardown", "HCA Capabilities", "Access Registers", "Vport
// Context").
#pragma once

#include "hw/ifc_cmd.h"
#include "hw/layout.h"

namespace cxv::hw::ifc {

// --- Function enable, ISSI, firmware pages -------------------------------------------

// PRM ENABLE_HCA / DISABLE_HCA: switch a function (function_id 0 is the PF itself) on
// before anything else, off after TEARDOWN_HCA.
#define CXV_IFC_enable_hca_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(op_mod, 0x030, 16)                  \
    F(embedded_cpu_function, 0x040, 1)    \
    F(function_id, 0x050, 16)
CXV_IFC_LAYOUT(enable_hca_in, 0x80)

#define CXV_IFC_enable_hca_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(enable_hca_out, 0x60)

#define CXV_IFC_disable_hca_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(op_mod, 0x030, 16)                   \
    F(embedded_cpu_function, 0x040, 1)     \
    F(function_id, 0x050, 16)
CXV_IFC_LAYOUT(disable_hca_in, 0x80)

#define CXV_IFC_disable_hca_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(disable_hca_out, 0x60)

// PRM QUERY_ISSI / SET_ISSI: the interface step the driver speaks. The PRM's
// supported_issi is an 80-byte bit mask ending in supported_issi_dw0, whose bit n
// (counting from the dword's LSB) says ISSI n is supported. Only that last dword is
// described (ISSIs 0-31; the 76 bytes before it would hold ISSI 32 and up, which no
// firmware defines and Linux leaves unnamed).
#define CXV_IFC_query_issi_in(F, S, A, T) \
    F(opcode, 0x000, 16)                  \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(query_issi_in, 0x80)

#define CXV_IFC_query_issi_out(F, S, A, T) \
    F(status, 0x000, 8)                    \
    F(syndrome, 0x020, 32)                 \
    F(current_issi, 0x050, 16)             \
    F(supported_issi_dw0, 0x360, 32)
CXV_IFC_LAYOUT(query_issi_out, 0x380)

#define CXV_IFC_set_issi_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(current_issi, 0x050, 16)
CXV_IFC_LAYOUT(set_issi_in, 0x80)

#define CXV_IFC_set_issi_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_issi_out, 0x80)

// PRM QUERY_PAGES: how many 4 KiB pages the device wants now (op_mod 1 boot, 2 init,
// 3 regular). num_pages is signed: negative asks the driver to take pages back.
#define CXV_IFC_query_pages_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(op_mod, 0x030, 16)                   \
    F(embedded_cpu_function, 0x040, 1)     \
    F(function_id, 0x050, 16)
CXV_IFC_LAYOUT(query_pages_in, 0x80)

#define CXV_IFC_query_pages_out(F, S, A, T) \
    F(status, 0x000, 8)                     \
    F(syndrome, 0x020, 32)                  \
    F(embedded_cpu_function, 0x040, 1)      \
    F(function_id, 0x050, 16)               \
    F(num_pages, 0x060, 32)
CXV_IFC_LAYOUT(query_pages_out, 0x80)

// PRM MANAGE_PAGES: op_mod 1 gives pages (pas lists them, input_num_entries long),
// 0 answers a request with "none", 2 takes pages back (the device returns their
// addresses in the output's pas).
#define CXV_IFC_manage_pages_in(F, S, A, T) \
    F(opcode, 0x000, 16)                    \
    F(op_mod, 0x030, 16)                    \
    F(embedded_cpu_function, 0x040, 1)      \
    F(function_id, 0x050, 16)               \
    F(input_num_entries, 0x060, 32)         \
    A(pas, 0x080, 64, 0)
CXV_IFC_LAYOUT(manage_pages_in, 0x80)

#define CXV_IFC_manage_pages_out(F, S, A, T) \
    F(status, 0x000, 8)                      \
    F(syndrome, 0x020, 32)                   \
    F(output_num_entries, 0x040, 32)         \
    A(pas, 0x080, 64, 0)
CXV_IFC_LAYOUT(manage_pages_out, 0x80)

// --- Capabilities --------------------------------------------------------------------

// PRM QUERY_HCA_CAP / SET_HCA_CAP: op_mod is (capability type << 1) | current, where
// type 0 is the general capabilities (cmd_hca_cap), 3 atomics (atomic_caps), 4 RoCE
// (roce_cap) and 0x14 device events (device_event_cap); "max" is
// what the device can do, "current" what is enabled. The 4 KiB capability area is one
// of those structures; at<query_hca_cap_out::capability>(buf) points at it.
#define CXV_IFC_query_hca_cap_in(F, S, A, T) \
    F(opcode, 0x000, 16)                     \
    F(op_mod, 0x030, 16)                     \
    F(other_function, 0x040, 1)              \
    F(function_id, 0x050, 16)
CXV_IFC_LAYOUT(query_hca_cap_in, 0x80)

#define CXV_IFC_query_hca_cap_out(F, S, A, T) \
    F(status, 0x000, 8)                       \
    F(syndrome, 0x020, 32)                    \
    A(capability, 0x080, 8, 4096)
CXV_IFC_LAYOUT(query_hca_cap_out, 0x8080)

#define CXV_IFC_set_hca_cap_in(F, S, A, T) \
    F(opcode, 0x000, 16)                   \
    F(op_mod, 0x030, 16)                   \
    F(other_function, 0x040, 1)            \
    F(function_id, 0x050, 16)              \
    A(capability, 0x080, 8, 4096)
CXV_IFC_LAYOUT(set_hca_cap_in, 0x8080)

#define CXV_IFC_set_hca_cap_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_hca_cap_out, 0x80)

// PRM Table: HCA Capabilities (capability type 0, the general device capabilities).
// A subset: the limits and feature bits of the objects we model (QP, SRQ/XRC, CQ, EQ,
// MKEY, PD, UAR and BlueFlame, UMEM and DevX objects, ports, RoCE and atomics), what
// the driver's bring-up reads and writes back in SET_HCA_CAP, and the device's
// identity. The log_max_* fields are log2 of a count or size. Bits not listed are not
// reserved, just not modelled: a device reports them 0, and a driver echoing the
// current capabilities copies the whole area, so they survive.
#define CXV_IFC_cmd_hca_cap(F, S, A, T)               \
    F(shared_object_to_user_object_allowed, 0x010, 1) \
    F(hca_cap_2, 0x020, 1)                            \
    F(event_on_vhca_state_teardown_request, 0x023, 1) \
    F(event_on_vhca_state_in_use, 0x024, 1)           \
    F(event_on_vhca_state_active, 0x025, 1)           \
    F(event_on_vhca_state_allocated, 0x026, 1)        \
    F(event_on_vhca_state_invalid, 0x027, 1)          \
    F(vhca_id, 0x030, 16)                             \
    F(log_max_srq_sz, 0x080, 8)                       \
    F(log_max_qp_sz, 0x088, 8)                        \
    F(event_cap, 0x090, 1)                            \
    F(log_max_qp, 0x09b, 5)                           \
    F(ece_support, 0x0a3, 1)                          \
    F(log_max_srq, 0x0ab, 5)                          \
    F(max_sgl_for_optimized_performance, 0x0c0, 8)    \
    F(log_max_cq_sz, 0x0c8, 8)                        \
    F(relaxed_ordering_write_umr, 0x0d0, 1)           \
    F(relaxed_ordering_read_umr, 0x0d1, 1)            \
    F(log_max_cq, 0x0db, 5)                           \
    F(log_max_eq_sz, 0x0e0, 8)                        \
    F(relaxed_ordering_write, 0x0e8, 1)               \
    F(relaxed_ordering_read, 0x0e9, 1)                \
    F(log_max_mkey, 0x0ea, 6)                         \
    F(dump_fill_mkey, 0x0f8, 1)                       \
    F(fast_teardown, 0x0fb, 1)                        \
    F(log_max_eq, 0x0fc, 4)                           \
    F(max_indirection, 0x100, 8)                      \
    F(fixed_buffer_size, 0x108, 1)                    \
    F(log_max_mrw_sz, 0x109, 7)                       \
    F(force_teardown, 0x110, 1)                       \
    F(log_max_bsf_list_size, 0x112, 6)                \
    F(umr_extended_translation_offset, 0x118, 1)      \
    F(null_mkey, 0x119, 1)                            \
    F(log_max_klm_list_size, 0x11a, 6)                \
    F(log_max_ra_req_dc, 0x12a, 6)                    \
    F(log_max_ra_res_dc, 0x13a, 6)                    \
    F(release_all_pages, 0x145, 1)                    \
    F(roce_accl, 0x149, 1)                            \
    F(log_max_ra_req_qp, 0x14a, 6)                    \
    F(log_max_ra_res_qp, 0x15a, 6)                    \
    F(end_pad, 0x160, 1)                              \
    F(cc_query_allowed, 0x161, 1)                     \
    F(cc_modify_allowed, 0x162, 1)                    \
    F(start_pad, 0x163, 1)                            \
    F(cache_line_128byte, 0x164, 1)                   \
    F(rts2rts_qp_counters_set_id, 0x169, 1)           \
    F(gid_table_size, 0x170, 16)                      \
    F(out_of_seq_cnt, 0x180, 1)                       \
    F(vport_counters, 0x181, 1)                       \
    F(retransmission_q_counters, 0x182, 1)            \
    F(debug, 0x183, 1)                                \
    F(max_qp_cnt, 0x186, 10)                          \
    F(pkey_table_size, 0x190, 16)                     \
    F(vport_group_manager, 0x1a0, 1)                  \
    F(vhca_group_manager, 0x1a1, 1)                   \
    F(ib_virt, 0x1a2, 1)                              \
    F(eth_virt, 0x1a3, 1)                             \
    F(nic_flow_table, 0x1a6, 1)                       \
    F(eswitch_manager, 0x1a7, 1)                      \
    F(device_memory, 0x1a8, 1)                        \
    F(mcam_reg, 0x1a9, 1)                             \
    F(pcam_reg, 0x1aa, 1)                             \
    F(local_ca_ack_delay, 0x1ab, 5)                   \
    F(port_module_event, 0x1b0, 1)                    \
    F(enhanced_error_q_counters, 0x1b1, 1)            \
    F(ports_check, 0x1b2, 1)                          \
    F(disable_link_up, 0x1b4, 1)                      \
    F(port_type, 0x1b6, 2)                            \
    F(num_ports, 0x1b8, 8)                            \
    F(log_max_msg, 0x1c3, 5)                          \
    F(max_tc, 0x1cc, 4)                               \
    F(general_notification_event, 0x1d2, 1)           \
    F(stat_rate_support, 0x1e0, 16)                   \
    F(pci_sync_for_fw_update_event, 0x1f1, 1)         \
    F(cqe_version, 0x1fc, 4)                          \
    F(compact_address_vector, 0x200, 1)               \
    F(striding_rq, 0x201, 1)                          \
    F(repeated_block_disabled, 0x206, 1)              \
    F(umr_modify_entity_size_disabled, 0x207, 1)      \
    F(umr_modify_atomic_disabled, 0x208, 1)           \
    F(umr_indirect_mkey_disabled, 0x209, 1)           \
    F(umr_fence, 0x20a, 2)                            \
    F(dc_req_scat_data_cqe, 0x20c, 1)                 \
    F(drain_sigerr, 0x20f, 1)                         \
    F(cmdif_checksum, 0x210, 2)                       \
    F(sigerr_cqe, 0x212, 1)                           \
    F(wq_signature, 0x214, 1)                         \
    F(sctr_data_cqe, 0x215, 1)                        \
    F(sho, 0x217, 1)                                  \
    F(tph, 0x218, 1)                                  \
    F(rf, 0x219, 1)                                   \
    F(dct, 0x21a, 1)                                  \
    F(qos, 0x21b, 1)                                  \
    F(eth_net_offloads, 0x21c, 1)                     \
    F(roce, 0x21d, 1)                                 \
    F(atomic, 0x21e, 1)                               \
    F(cq_oi, 0x220, 1)                                \
    F(cq_resize, 0x221, 1)                            \
    F(cq_moderation, 0x222, 1)                        \
    F(cq_eq_remap, 0x226, 1)                          \
    F(pg, 0x227, 1)                                   \
    F(block_lb_mc, 0x228, 1)                          \
    F(scqe_break_moderation, 0x22a, 1)                \
    F(cq_period_start_from_cqe, 0x22b, 1)             \
    F(cd, 0x22c, 1)                                   \
    F(apm, 0x22e, 1)                                  \
    F(umr_ptr_rlky, 0x230, 1)                         \
    F(imaicl, 0x231, 1)                               \
    F(qkv, 0x236, 1)                                  \
    F(pkv, 0x237, 1)                                  \
    F(set_deth_sqpn, 0x238, 1)                        \
    F(xrc, 0x23c, 1)                                  \
    F(ud, 0x23d, 1)                                   \
    F(uc, 0x23e, 1)                                   \
    F(rc, 0x23f, 1)                                   \
    F(uar_4k, 0x240, 1)                               \
    F(fl_rc_qp_when_roce_disabled, 0x248, 1)          \
    F(uar_sz, 0x24a, 6)                               \
    F(umem_uid_0, 0x252, 1)                           \
    F(log_pg_sz, 0x258, 8)                            \
    F(bf, 0x260, 1)                                   \
    F(driver_version, 0x261, 1)                       \
    F(mkey_by_name, 0x266, 1)                         \
    F(log_bf_reg_size, 0x26b, 5)                      \
    F(max_wqe_sz_sq, 0x290, 16)                       \
    F(max_wqe_sz_rq, 0x2b0, 16)                       \
    F(max_wqe_sz_sq_dc, 0x2d0, 16)                    \
    F(max_qp_mcg, 0x2e7, 25)                          \
    F(log_max_mcg, 0x318, 8)                          \
    F(log_max_transport_domain, 0x323, 5)             \
    F(log_max_pd, 0x32b, 5)                           \
    F(q_counter_aggregation, 0x339, 1)                \
    F(log_max_xrcd, 0x33b, 5)                         \
    F(log_max_rq, 0x363, 5)                           \
    F(log_max_sq, 0x36b, 5)                           \
    F(log_max_tir, 0x373, 5)                          \
    F(log_max_tis, 0x37b, 5)                          \
    F(basic_cyclic_rcv_wqe, 0x380, 1)                 \
    F(log_max_rmp, 0x383, 5)                          \
    F(log_max_rqt, 0x38b, 5)                          \
    F(log_max_rqt_size, 0x393, 5)                     \
    F(log_max_tis_per_sq, 0x39b, 5)                   \
    F(ext_stride_num_range, 0x3a0, 1)                 \
    F(roce_rw_supported, 0x3a1, 1)                    \
    F(log_max_current_uc_list_wr_supported, 0x3a2, 1) \
    F(log_max_stride_sz_rq, 0x3a3, 5)                 \
    F(log_min_stride_sz_rq, 0x3ab, 5)                 \
    F(log_max_stride_sz_sq, 0x3b3, 5)                 \
    F(log_min_stride_sz_sq, 0x3bb, 5)                 \
    F(log_max_wq_sz, 0x3db, 5)                        \
    F(nic_vport_change_event, 0x3e0, 1)               \
    F(disable_local_lb_uc, 0x3e1, 1)                  \
    F(disable_local_lb_mc, 0x3e2, 1)                  \
    F(vhca_state, 0x3ea, 1)                           \
    F(log_max_vlan_list, 0x3eb, 5)                    \
    F(log_max_current_mc_list, 0x3f3, 5)              \
    F(log_max_current_uc_list, 0x3fb, 5)              \
    F(general_obj_types, 0x400, 64)                   \
    F(sq_ts_format, 0x440, 2)                         \
    F(rq_ts_format, 0x442, 2)                         \
    F(create_qp_start_hint, 0x448, 24)                \
    F(ats, 0x461, 1)                                  \
    F(log_max_uctx, 0x463, 5)                         \
    F(log_max_umem, 0x46b, 5)                         \
    F(max_num_eqs, 0x470, 16)                         \
    F(log_max_l2_table, 0x483, 5)                     \
    F(log_uar_page_sz, 0x490, 16)                     \
    F(device_frequency_mhz, 0x4c0, 32)                \
    F(device_frequency_khz, 0x4e0, 32)                \
    F(num_of_uars_per_page, 0x520, 32)                \
    F(enhanced_cqe_compression, 0x5b0, 1)             \
    F(mini_cqe_resp_stride_index, 0x5bc, 1)           \
    F(cqe_128_always, 0x5bd, 1)                       \
    F(cqe_compression_128, 0x5be, 1)                  \
    F(cqe_compression, 0x5bf, 1)                      \
    F(cqe_compression_timeout, 0x5c0, 16)             \
    F(cqe_compression_max_num, 0x5d0, 16)             \
    F(tag_matching, 0x5f0, 1)                         \
    F(rndv_offload_rc, 0x5f1, 1)                      \
    F(rndv_offload_dc, 0x5f2, 1)                      \
    F(log_tag_matching_list_sz, 0x5f3, 5)             \
    F(log_max_xrq, 0x5fb, 5)                          \
    F(native_port_num, 0x608, 8)                      \
    F(num_vhca_ports, 0x610, 8)                       \
    F(sw_owner_id, 0x61e, 1)                          \
    F(uctx_cap, 0x6a0, 32)                            \
    F(num_total_dynamic_vf_msix, 0x708, 24)
CXV_IFC_LAYOUT(cmd_hca_cap, 0x800)

// PRM Table: RoCE Capabilities (capability type 4), queried only when cmd_hca_cap.roce
// is set. The driver enables sw_r_roce_src_udp_port when the maximum has it.
#define CXV_IFC_roce_cap(F, S, A, T)         \
    F(roce_apm, 0x000, 1)                    \
    F(sw_r_roce_src_udp_port, 0x004, 1)      \
    F(fl_rc_qp_when_roce_disabled, 0x005, 1) \
    F(fl_rc_qp_when_roce_enabled, 0x006, 1)  \
    F(qp_ts_format, 0x01e, 2)                \
    F(l3_type, 0x08c, 4)                     \
    F(roce_version, 0x098, 8)                \
    F(r_roce_dest_udp_port, 0x0b0, 16)       \
    F(r_roce_max_src_udp_port, 0x0c0, 16)    \
    F(r_roce_min_src_udp_port, 0x0d0, 16)    \
    F(roce_address_table_size, 0x0f0, 16)
CXV_IFC_LAYOUT(roce_cap, 0x800)

// PRM Table: Atomic Capabilities (capability type 3), queried when cmd_hca_cap.atomic is
// set. atomic_size_qp and atomic_operations are bit masks (bit n: 2^n bytes; bit 0
// compare-and-swap, bit 1 fetch-and-add); atomic_req_8B_endianness_mode is settable
// (1: host endianness) when supported_atomic_req_8B_endianness_mode_1 is set.
#define CXV_IFC_atomic_caps(F, S, A, T)                     \
    F(atomic_req_8B_endianness_mode, 0x040, 2)              \
    F(supported_atomic_req_8B_endianness_mode_1, 0x046, 1)  \
    F(atomic_operations, 0x090, 16)                         \
    F(atomic_size_qp, 0x0b0, 16)                            \
    F(atomic_size_dc, 0x0d0, 16)
CXV_IFC_LAYOUT(atomic_caps, 0x800)

// --- HCA init and teardown -------------------------------------------------------------

// PRM INIT_HCA: after the capabilities are set and the init pages given. sw_owner_id
// identifies the software that owns steering (a 128-bit id).
#define CXV_IFC_init_hca_in(F, S, A, T) \
    F(opcode, 0x000, 16)                \
    F(op_mod, 0x030, 16)                \
    F(sw_vhca_id, 0x062, 14)            \
    A(sw_owner_id, 0x080, 32, 4)
CXV_IFC_LAYOUT(init_hca_in, 0x100)

#define CXV_IFC_init_hca_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(init_hca_out, 0x80)

// PRM TEARDOWN_HCA: profile 0 graceful close, 1 force close, 2 prepare fast teardown;
// for the last two, state 1 in the output says the device could not do it.
#define CXV_IFC_teardown_hca_in(F, S, A, T) \
    F(opcode, 0x000, 16)                    \
    F(op_mod, 0x030, 16)                    \
    F(profile, 0x050, 16)
CXV_IFC_LAYOUT(teardown_hca_in, 0x80)

#define CXV_IFC_teardown_hca_out(F, S, A, T) \
    F(status, 0x000, 8)                      \
    F(syndrome, 0x020, 32)                   \
    F(state, 0x07f, 1)
CXV_IFC_LAYOUT(teardown_hca_out, 0x80)

// PRM SET_DRIVER_VERSION: the driver's name and version as a string, NUL-padded to 64
// bytes; sent only when cmd_hca_cap.driver_version is set.
#define CXV_IFC_set_driver_version_in(F, S, A, T) \
    F(opcode, 0x000, 16)                          \
    F(op_mod, 0x030, 16)                          \
    A(driver_version, 0x080, 8, 64)
CXV_IFC_LAYOUT(set_driver_version_in, 0x280)

#define CXV_IFC_set_driver_version_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_driver_version_out, 0x80)

// PRM QUERY_ADAPTER: the adapter's identity: the IEEE vendor id (OUI), the vendor of
// the vendor-specific data (VSD), the VSD itself, and the PSID (the board id: Linux's
// mlx5_query_board_id, reported by devlink as board.id and by mlx5_ib as board_id).
#define CXV_IFC_query_adapter_in(F, S, A, T) \
    F(opcode, 0x000, 16)                     \
    F(op_mod, 0x030, 16)
CXV_IFC_LAYOUT(query_adapter_in, 0x80)

#define CXV_IFC_query_adapter_param_block(F, S, A, T) \
    F(ieee_vendor_id, 0x0c8, 24)                      \
    F(vsd_vendor_id, 0x0f0, 16)                       \
    A(vsd, 0x100, 8, 208)                             \
    A(vsd_contd_psid, 0x780, 8, 16)
CXV_IFC_LAYOUT(query_adapter_param_block, 0x800)

#define CXV_IFC_query_adapter_out(F, S, A, T) \
    F(status, 0x000, 8)                       \
    F(syndrome, 0x020, 32)                    \
    S(query_adapter_struct, 0x080, query_adapter_param_block)
CXV_IFC_LAYOUT(query_adapter_out, 0x880)

// --- Registers -------------------------------------------------------------------------

// PRM ACCESS_REGISTER: op_mod 0 writes, 1 reads the register register_id (with an
// argument for indexed registers); the register itself follows in register_data.
#define CXV_IFC_access_register_in(F, S, A, T) \
    F(opcode, 0x000, 16)                       \
    F(op_mod, 0x030, 16)                       \
    F(register_id, 0x050, 16)                  \
    F(argument, 0x060, 32)                     \
    A(register_data, 0x080, 32, 0)
CXV_IFC_LAYOUT(access_register_in, 0x80)

#define CXV_IFC_access_register_out(F, S, A, T) \
    F(status, 0x000, 8)                         \
    F(syndrome, 0x020, 32)                      \
    A(register_data, 0x080, 32, 0)
CXV_IFC_LAYOUT(access_register_out, 0x80)

// --- MAD_IFC ---------------------------------------------------------------------------

// PRM MAD_IFC: hands a 256-byte InfiniBand MAD to the port's management agent
// (subnet management, performance queries) and returns its response.
#define CXV_IFC_mad_ifc_in(F, S, A, T) \
    F(opcode, 0x000, 16)               \
    F(op_mod, 0x030, 16)               \
    F(remote_lid, 0x040, 16)           \
    F(port, 0x058, 8)                  \
    A(mad, 0x080, 8, 256)
CXV_IFC_LAYOUT(mad_ifc_in, 0x880)

#define CXV_IFC_mad_ifc_out(F, S, A, T)   \
    F(status, 0x000, 8)                   \
    F(syndrome, 0x020, 32)                \
    A(response_mad_packet, 0x080, 8, 256)
CXV_IFC_LAYOUT(mad_ifc_out, 0x880)

// --- HCA vport -------------------------------------------------------------------------

// PRM Table: HCA Vport Context: a vport's InfiniBand port attributes (port and vport
// state, GUIDs, capability masks, LID, SM address). field_select chooses what a
// MODIFY_HCA_VPORT_CONTEXT changes.
#define CXV_IFC_hca_vport_context(F, S, A, T) \
    F(field_select, 0x000, 32)                \
    F(sm_virt_aware, 0x100, 1)                \
    F(has_smi, 0x101, 1)                      \
    F(has_raw, 0x102, 1)                      \
    F(grh_required, 0x103, 1)                 \
    F(port_physical_state, 0x110, 4)          \
    F(vport_state_policy, 0x114, 4)           \
    F(port_state, 0x118, 4)                   \
    F(vport_state, 0x11c, 4)                  \
    F(system_image_guid, 0x140, 64)           \
    F(port_guid, 0x180, 64)                   \
    F(node_guid, 0x1c0, 64)                   \
    F(cap_mask1, 0x200, 32)                   \
    F(cap_mask1_field_select, 0x220, 32)      \
    F(cap_mask2, 0x240, 32)                   \
    F(cap_mask2_field_select, 0x260, 32)      \
    F(lid, 0x300, 16)                         \
    F(init_type_reply, 0x314, 4)              \
    F(lmc, 0x318, 3)                          \
    F(subnet_timeout, 0x31b, 5)               \
    F(sm_lid, 0x320, 16)                      \
    F(sm_sl, 0x330, 4)                        \
    F(qkey_violation_counter, 0x340, 16)      \
    F(pkey_violation_counter, 0x350, 16)
CXV_IFC_LAYOUT(hca_vport_context, 0x1000)

// PRM QUERY_HCA_VPORT_CONTEXT (other_vport 0: the caller's own vport on port_num).
#define CXV_IFC_query_hca_vport_context_in(F, S, A, T) \
    F(opcode, 0x000, 16)                               \
    F(op_mod, 0x030, 16)                               \
    F(other_vport, 0x040, 1)                           \
    F(port_num, 0x04c, 4)                              \
    F(vport_number, 0x050, 16)
CXV_IFC_LAYOUT(query_hca_vport_context_in, 0x80)

#define CXV_IFC_query_hca_vport_context_out(F, S, A, T) \
    F(status, 0x000, 8)                                 \
    F(syndrome, 0x020, 32)                              \
    S(hca_vport_context, 0x080, hca_vport_context)
CXV_IFC_LAYOUT(query_hca_vport_context_out, 0x1080)

// One 128-bit entry of an address table (a GID, here). The PRM names the structure and
// its only field alike, so the C++ type takes a suffix.
#define CXV_IFC_array128_auto_entry(F, S, A, T) \
    A(array128_auto, 0x000, 8, 16)
CXV_IFC_LAYOUT_RENAMED(array128_auto_entry, array128_auto, 0x80)

// PRM QUERY_HCA_VPORT_GID: gid_index 0xffff asks for the whole table (gids_num
// entries), any other index for that one GID.
#define CXV_IFC_query_hca_vport_gid_in(F, S, A, T) \
    F(opcode, 0x000, 16)                           \
    F(op_mod, 0x030, 16)                           \
    F(other_vport, 0x040, 1)                       \
    F(port_num, 0x04c, 4)                          \
    F(vport_number, 0x050, 16)                     \
    F(gid_index, 0x070, 16)
CXV_IFC_LAYOUT(query_hca_vport_gid_in, 0x80)

#define CXV_IFC_query_hca_vport_gid_out(F, S, A, T) \
    F(status, 0x000, 8)                             \
    F(syndrome, 0x020, 32)                          \
    F(gids_num, 0x060, 16)                          \
    T(gid, 0x080, array128_auto_entry, 0)
CXV_IFC_LAYOUT(query_hca_vport_gid_out, 0x80)

// One P_Key table entry; named pkey in the PRM, like its field.
#define CXV_IFC_pkey_entry(F, S, A, T) \
    F(pkey, 0x010, 16)
CXV_IFC_LAYOUT_RENAMED(pkey_entry, pkey, 0x20)

// PRM QUERY_HCA_VPORT_PKEY: pkey_index 0xffff asks for the whole P_Key table.
#define CXV_IFC_query_hca_vport_pkey_in(F, S, A, T) \
    F(opcode, 0x000, 16)                            \
    F(op_mod, 0x030, 16)                            \
    F(other_vport, 0x040, 1)                        \
    F(port_num, 0x04c, 4)                           \
    F(vport_number, 0x050, 16)                      \
    F(pkey_index, 0x070, 16)
CXV_IFC_LAYOUT(query_hca_vport_pkey_in, 0x80)

#define CXV_IFC_query_hca_vport_pkey_out(F, S, A, T) \
    F(status, 0x000, 8)                              \
    F(syndrome, 0x020, 32)                           \
    T(pkey, 0x080, pkey_entry, 0)
CXV_IFC_LAYOUT(query_hca_vport_pkey_out, 0x80)

// --- RoCE addresses ---------------------------------------------------------------------

// PRM Table: RoCE Address Layout: one entry of an Ethernet port's GID table, the source
// addresses packets sent from that GID index carry: source_l3_address is the GID (an
// IPv6 address, or ::ffff:a.b.c.d for IPv4), roce_l3_type and roce_version
// (hw::roce_l3_type, hw::roce_version) say how the packet is built.
#define CXV_IFC_roce_addr_layout(F, S, A, T) \
    A(source_l3_address, 0x000, 8, 16)       \
    F(vlan_valid, 0x083, 1)                  \
    F(vlan_id, 0x084, 12)                    \
    F(source_mac_47_32, 0x090, 16)           \
    F(source_mac_31_0, 0x0a0, 32)            \
    F(roce_l3_type, 0x0d4, 4)                \
    F(roce_version, 0x0d8, 8)
CXV_IFC_LAYOUT(roce_addr_layout, 0x100)

// PRM SET_ROCE_ADDRESS: writes entry roce_address_index of port vhca_port_num's GID
// table (roce_cap.roce_address_table_size entries); an all-zero address empties it.
#define CXV_IFC_set_roce_address_in(F, S, A, T) \
    F(opcode, 0x000, 16)                        \
    F(op_mod, 0x030, 16)                        \
    F(roce_address_index, 0x040, 16)            \
    F(vhca_port_num, 0x05c, 4)                  \
    S(roce_address, 0x080, roce_addr_layout)
CXV_IFC_LAYOUT(set_roce_address_in, 0x180)

#define CXV_IFC_set_roce_address_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(set_roce_address_out, 0x80)

// PRM QUERY_ROCE_ADDRESS: reads entry roce_address_index back (all zero when empty).
#define CXV_IFC_query_roce_address_in(F, S, A, T) \
    F(opcode, 0x000, 16)                          \
    F(op_mod, 0x030, 16)                          \
    F(roce_address_index, 0x040, 16)              \
    F(vhca_port_num, 0x05c, 4)
CXV_IFC_LAYOUT(query_roce_address_in, 0x80)

#define CXV_IFC_query_roce_address_out(F, S, A, T) \
    F(status, 0x000, 8)                            \
    F(syndrome, 0x020, 32)                         \
    S(roce_address, 0x080, roce_addr_layout)
CXV_IFC_LAYOUT(query_roce_address_out, 0x180)

// --- NIC vport -------------------------------------------------------------------------

// PRM QUERY_VPORT_STATE: the vport's logical link (state: 0 down, 1 up) and what its
// manager set (admin_state: 0 down, 1 up, 2 follow the uplink). op_mod: 0 the vNIC's
// vport, 1 an eswitch vport, 2 the uplink.
#define CXV_IFC_query_vport_state_in(F, S, A, T) \
    F(opcode, 0x000, 16)                         \
    F(op_mod, 0x030, 16)                         \
    F(other_vport, 0x040, 1)                     \
    F(vport_number, 0x050, 16)
CXV_IFC_LAYOUT(query_vport_state_in, 0x80)

#define CXV_IFC_query_vport_state_out(F, S, A, T) \
    F(status, 0x000, 8)                           \
    F(syndrome, 0x020, 32)                        \
    F(admin_state, 0x078, 4)                      \
    F(state, 0x07c, 4)
CXV_IFC_LAYOUT(query_vport_state_out, 0x80)

// PRM MODIFY_VPORT_STATE: a vport group manager sets another vport's admin_state (0 down,
// 1 up, 2 follow the uplink); op_mod as QUERY_VPORT_STATE's.
#define CXV_IFC_modify_vport_state_in(F, S, A, T) \
    F(opcode, 0x000, 16)                          \
    F(op_mod, 0x030, 16)                          \
    F(other_vport, 0x040, 1)                      \
    F(vport_number, 0x050, 16)                    \
    F(admin_state, 0x078, 4)
CXV_IFC_LAYOUT(modify_vport_state_in, 0x80)

#define CXV_IFC_modify_vport_state_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_vport_state_out, 0x80)


// A MAC address in the low 48 bits of a 64-bit slot.
#define CXV_IFC_mac_address_layout(F, S, A, T) \
    F(mac_addr_47_32, 0x010, 16)               \
    F(mac_addr_31_0, 0x020, 32)
CXV_IFC_LAYOUT(mac_address_layout, 0x40)

// An entry of a NIC vport context's VLAN list (allowed_list_type 2).
#define CXV_IFC_vlan_layout(F, S, A, T) F(vlan, 0x014, 12)
CXV_IFC_LAYOUT(vlan_layout, 0x40)

// PRM Table: NIC Vport Context: a vport's Ethernet attributes: RoCE enable, local
// loopback, MTU, GUIDs, promiscuous modes, the permanent MAC and the current
// allowed-address list (allowed_list_size entries of allowed_list_type: 0 unicast MACs,
// 1 multicast MACs, 2 VLANs), each a 64-bit slot after the context.
#define CXV_IFC_nic_vport_context(F, S, A, T)       \
    F(min_wqe_inline_mode, 0x005, 3)                \
    F(disable_mc_local_lb, 0x01d, 1)                \
    F(disable_uc_local_lb, 0x01e, 1)                \
    F(roce_en, 0x01f, 1)                            \
    F(arm_change_event, 0x020, 1)                   \
    F(event_on_mtu, 0x03b, 1)                       \
    F(event_on_promisc_change, 0x03c, 1)            \
    F(event_on_vlan_change, 0x03d, 1)               \
    F(event_on_mc_address_change, 0x03e, 1)         \
    F(event_on_uc_address_change, 0x03f, 1)         \
    F(vhca_id_type, 0x040, 1)                       \
    F(affiliation_criteria, 0x04c, 4)               \
    F(affiliated_vhca_id, 0x050, 16)                \
    F(mtu, 0x130, 16)                               \
    F(system_image_guid, 0x140, 64)                 \
    F(port_guid, 0x180, 64)                         \
    F(node_guid, 0x1c0, 64)                         \
    F(qkey_violation_counter, 0x340, 16)            \
    F(promisc_uc, 0x780, 1)                         \
    F(promisc_mc, 0x781, 1)                         \
    F(promisc_all, 0x782, 1)                        \
    F(allowed_list_type, 0x785, 3)                  \
    F(allowed_list_size, 0x794, 12)                 \
    S(permanent_address, 0x7a0, mac_address_layout) \
    A(current_uc_mac_address, 0x800, 64, 0)
CXV_IFC_LAYOUT(nic_vport_context, 0x800)

// PRM QUERY_NIC_VPORT_CONTEXT: allowed_list_type chooses which list comes back.
#define CXV_IFC_query_nic_vport_context_in(F, S, A, T) \
    F(opcode, 0x000, 16)                               \
    F(op_mod, 0x030, 16)                               \
    F(other_vport, 0x040, 1)                           \
    F(vport_number, 0x050, 16)                         \
    F(allowed_list_type, 0x065, 3)
CXV_IFC_LAYOUT(query_nic_vport_context_in, 0x80)

#define CXV_IFC_query_nic_vport_context_out(F, S, A, T) \
    F(status, 0x000, 8)                                 \
    F(syndrome, 0x020, 32)                              \
    S(nic_vport_context, 0x080, nic_vport_context)
CXV_IFC_LAYOUT(query_nic_vport_context_out, 0x880)

// PRM MODIFY_NIC_VPORT_CONTEXT: which nic_vport_context fields the command changes.
#define CXV_IFC_modify_nic_vport_field_select(F, S, A, T) \
    F(affiliation, 0x012, 1)                              \
    F(disable_uc_local_lb, 0x014, 1)                      \
    F(disable_mc_local_lb, 0x015, 1)                      \
    F(node_guid, 0x016, 1)                                \
    F(port_guid, 0x017, 1)                                \
    F(min_inline, 0x018, 1)                               \
    F(mtu, 0x019, 1)                                      \
    F(change_event, 0x01a, 1)                             \
    F(promisc, 0x01b, 1)                                  \
    F(permanent_address, 0x01c, 1)                        \
    F(addresses_list, 0x01d, 1)                           \
    F(roce_en, 0x01e, 1)
CXV_IFC_LAYOUT(modify_nic_vport_field_select, 0x20)

#define CXV_IFC_modify_nic_vport_context_in(F, S, A, T)   \
    F(opcode, 0x000, 16)                                  \
    F(op_mod, 0x030, 16)                                  \
    F(other_vport, 0x040, 1)                              \
    F(vport_number, 0x050, 16)                            \
    S(field_select, 0x060, modify_nic_vport_field_select) \
    S(nic_vport_context, 0x800, nic_vport_context)
CXV_IFC_LAYOUT(modify_nic_vport_context_in, 0x1000)

#define CXV_IFC_modify_nic_vport_context_out CXV_IFC_STATUS_OUT
CXV_IFC_LAYOUT(modify_nic_vport_context_out, 0x80)

// Every layout in this file, as (C++ name, PRM name) pairs for tests and printers.
#define CXV_IFC_LAYOUTS_HCA(X)                                      \
    X(enable_hca_in, enable_hca_in)                                 \
    X(enable_hca_out, enable_hca_out)                               \
    X(disable_hca_in, disable_hca_in)                               \
    X(disable_hca_out, disable_hca_out)                             \
    X(query_issi_in, query_issi_in)                                 \
    X(query_issi_out, query_issi_out)                               \
    X(set_issi_in, set_issi_in)                                     \
    X(set_issi_out, set_issi_out)                                   \
    X(query_pages_in, query_pages_in)                               \
    X(query_pages_out, query_pages_out)                             \
    X(manage_pages_in, manage_pages_in)                             \
    X(manage_pages_out, manage_pages_out)                           \
    X(query_hca_cap_in, query_hca_cap_in)                           \
    X(query_hca_cap_out, query_hca_cap_out)                         \
    X(set_hca_cap_in, set_hca_cap_in)                               \
    X(set_hca_cap_out, set_hca_cap_out)                             \
    X(cmd_hca_cap, cmd_hca_cap)                                     \
    X(roce_cap, roce_cap)                                           \
    X(atomic_caps, atomic_caps)                                     \
    X(init_hca_in, init_hca_in)                                     \
    X(init_hca_out, init_hca_out)                                   \
    X(teardown_hca_in, teardown_hca_in)                             \
    X(teardown_hca_out, teardown_hca_out)                           \
    X(set_driver_version_in, set_driver_version_in)                 \
    X(set_driver_version_out, set_driver_version_out)               \
    X(query_adapter_in, query_adapter_in)                           \
    X(query_adapter_param_block, query_adapter_param_block)         \
    X(query_adapter_out, query_adapter_out)                         \
    X(access_register_in, access_register_in)                       \
    X(access_register_out, access_register_out)                     \
    X(mad_ifc_in, mad_ifc_in)                                       \
    X(mad_ifc_out, mad_ifc_out)                                     \
    X(hca_vport_context, hca_vport_context)                         \
    X(query_hca_vport_context_in, query_hca_vport_context_in)       \
    X(query_hca_vport_context_out, query_hca_vport_context_out)     \
    X(array128_auto_entry, array128_auto)                           \
    X(query_hca_vport_gid_in, query_hca_vport_gid_in)               \
    X(query_hca_vport_gid_out, query_hca_vport_gid_out)             \
    X(pkey_entry, pkey)                                             \
    X(query_hca_vport_pkey_in, query_hca_vport_pkey_in)             \
    X(query_hca_vport_pkey_out, query_hca_vport_pkey_out)           \
    X(roce_addr_layout, roce_addr_layout)                           \
    X(set_roce_address_in, set_roce_address_in)                     \
    X(set_roce_address_out, set_roce_address_out)                   \
    X(query_roce_address_in, query_roce_address_in)                 \
    X(query_roce_address_out, query_roce_address_out)               \
    X(query_vport_state_in, query_vport_state_in)                   \
    X(query_vport_state_out, query_vport_state_out)                 \
    X(modify_vport_state_in, modify_vport_state_in)                 \
    X(modify_vport_state_out, modify_vport_state_out)               \
    X(mac_address_layout, mac_address_layout)                       \
    X(vlan_layout, vlan_layout)                                     \
    X(nic_vport_context, nic_vport_context)                         \
    X(query_nic_vport_context_in, query_nic_vport_context_in)       \
    X(query_nic_vport_context_out, query_nic_vport_context_out)     \
    X(modify_nic_vport_field_select, modify_nic_vport_field_select) \
    X(modify_nic_vport_context_in, modify_nic_vport_context_in)     \
    X(modify_nic_vport_context_out, modify_nic_vport_context_out)

}  // namespace cxv::hw::ifc
