// Which input and output layouts belong to which command opcode, and printers that use
// it: a command trace or a failed command reads as its PRM fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hw/opcodes.h"

namespace cxv::hw {

// X(opcode name in cmd_opcode, input layout, output layout) for every command whose
// layouts hw/ describes.
#define CXV_CMD_LAYOUTS(X)                                                              \
    X(QUERY_HCA_CAP, query_hca_cap_in, query_hca_cap_out)                               \
    X(INIT_HCA, init_hca_in, init_hca_out)                                              \
    X(TEARDOWN_HCA, teardown_hca_in, teardown_hca_out)                                  \
    X(ENABLE_HCA, enable_hca_in, enable_hca_out)                                        \
    X(DISABLE_HCA, disable_hca_in, disable_hca_out)                                     \
    X(QUERY_PAGES, query_pages_in, query_pages_out)                                     \
    X(MANAGE_PAGES, manage_pages_in, manage_pages_out)                                  \
    X(SET_HCA_CAP, set_hca_cap_in, set_hca_cap_out)                                     \
    X(QUERY_ISSI, query_issi_in, query_issi_out)                                        \
    X(SET_ISSI, set_issi_in, set_issi_out)                                              \
    X(SET_DRIVER_VERSION, set_driver_version_in, set_driver_version_out)                \
    X(QUERY_ADAPTER, query_adapter_in, query_adapter_out)                               \
    X(CREATE_MKEY, create_mkey_in, create_mkey_out)                                     \
    X(QUERY_MKEY, query_mkey_in, query_mkey_out)                                        \
    X(DESTROY_MKEY, destroy_mkey_in, destroy_mkey_out)                                  \
    X(CREATE_EQ, create_eq_in, create_eq_out)                                           \
    X(DESTROY_EQ, destroy_eq_in, destroy_eq_out)                                        \
    X(QUERY_EQ, query_eq_in, query_eq_out)                                              \
    X(CREATE_CQ, create_cq_in, create_cq_out)                                           \
    X(DESTROY_CQ, destroy_cq_in, destroy_cq_out)                                        \
    X(QUERY_CQ, query_cq_in, query_cq_out)                                              \
    X(MODIFY_CQ, modify_cq_in, modify_cq_out)                                           \
    X(CREATE_QP, create_qp_in, create_qp_out)                                           \
    X(DESTROY_QP, destroy_qp_in, destroy_qp_out)                                        \
    X(RST2INIT_QP, rst2init_qp_in, rst2init_qp_out)                                     \
    X(INIT2INIT_QP, init2init_qp_in, init2init_qp_out)                                  \
    X(INIT2RTR_QP, init2rtr_qp_in, init2rtr_qp_out)                                     \
    X(RTR2RTS_QP, rtr2rts_qp_in, rtr2rts_qp_out)                                        \
    X(RTS2RTS_QP, rts2rts_qp_in, rts2rts_qp_out)                                        \
    X(SQERR2RTS_QP, sqerr2rts_qp_in, sqerr2rts_qp_out)                                  \
    X(SQD_RTS_QP, sqd2rts_qp_in, sqd2rts_qp_out)                                        \
    X(QP_2ERR, qp_2err_in, qp_2err_out)                                                 \
    X(QP_2RST, qp_2rst_in, qp_2rst_out)                                                 \
    X(QUERY_QP, query_qp_in, query_qp_out)                                              \
    X(ATTACH_TO_MCG, attach_to_mcg_in, attach_to_mcg_out)                               \
    X(DETACH_FROM_MCG, detach_from_mcg_in, detach_from_mcg_out)                         \
    X(MAD_IFC, mad_ifc_in, mad_ifc_out)                                                 \
    X(CREATE_SRQ, create_srq_in, create_srq_out)                                        \
    X(DESTROY_SRQ, destroy_srq_in, destroy_srq_out)                                     \
    X(QUERY_SRQ, query_srq_in, query_srq_out)                                           \
    X(ARM_RQ, arm_rq_in, arm_rq_out)                                                    \
    X(ALLOC_XRCD, alloc_xrcd_in, alloc_xrcd_out)                                        \
    X(DEALLOC_XRCD, dealloc_xrcd_in, dealloc_xrcd_out)                                  \
    X(CREATE_XRC_SRQ, create_xrc_srq_in, create_xrc_srq_out)                            \
    X(DESTROY_XRC_SRQ, destroy_xrc_srq_in, destroy_xrc_srq_out)                         \
    X(CREATE_RMP, create_rmp_in, create_rmp_out)                                        \
    X(DESTROY_RMP, destroy_rmp_in, destroy_rmp_out)                                     \
    X(MODIFY_RMP, modify_rmp_in, modify_rmp_out)                                        \
    X(QUERY_RMP, query_rmp_in, query_rmp_out)                                           \
    X(ALLOC_TRANSPORT_DOMAIN, alloc_transport_domain_in, alloc_transport_domain_out)    \
    X(DEALLOC_TRANSPORT_DOMAIN, dealloc_transport_domain_in, dealloc_transport_domain_out) \
    X(CREATE_TIS, create_tis_in, create_tis_out)                                        \
    X(DESTROY_TIS, destroy_tis_in, destroy_tis_out)                                     \
    X(QUERY_TIS, query_tis_in, query_tis_out)                                           \
    X(CREATE_SQ, create_sq_in, create_sq_out)                                           \
    X(MODIFY_SQ, modify_sq_in, modify_sq_out)                                           \
    X(DESTROY_SQ, destroy_sq_in, destroy_sq_out)                                        \
    X(QUERY_SQ, query_sq_in, query_sq_out)                                              \
    X(CREATE_RQ, create_rq_in, create_rq_out)                                           \
    X(MODIFY_RQ, modify_rq_in, modify_rq_out)                                           \
    X(DESTROY_RQ, destroy_rq_in, destroy_rq_out)                                        \
    X(QUERY_RQ, query_rq_in, query_rq_out)                                              \
    X(CREATE_RQT, create_rqt_in, create_rqt_out)                                        \
    X(MODIFY_RQT, modify_rqt_in, modify_rqt_out)                                        \
    X(DESTROY_RQT, destroy_rqt_in, destroy_rqt_out)                                     \
    X(CREATE_TIR, create_tir_in, create_tir_out)                                        \
    X(MODIFY_TIR, modify_tir_in, modify_tir_out)                                        \
    X(DESTROY_TIR, destroy_tir_in, destroy_tir_out)                                     \
    X(QUERY_TIR, query_tir_in, query_tir_out)                                           \
    X(CREATE_FLOW_TABLE, create_flow_table_in, create_flow_table_out)                   \
    X(MODIFY_FLOW_TABLE, modify_flow_table_in, modify_flow_table_out)                   \
    X(DESTROY_FLOW_TABLE, destroy_flow_table_in, destroy_flow_table_out)                \
    X(CREATE_FLOW_GROUP, create_flow_group_in, create_flow_group_out)                   \
    X(DESTROY_FLOW_GROUP, destroy_flow_group_in, destroy_flow_group_out)                \
    X(SET_FLOW_TABLE_ENTRY, set_fte_in, set_fte_out)                                    \
    X(DELETE_FLOW_TABLE_ENTRY, delete_fte_in, delete_fte_out)                           \
    X(SET_FLOW_TABLE_ROOT, set_flow_table_root_in, set_flow_table_root_out)             \
    X(ALLOC_FLOW_COUNTER, alloc_flow_counter_in, alloc_flow_counter_out)                \
    X(DEALLOC_FLOW_COUNTER, dealloc_flow_counter_in, dealloc_flow_counter_out)          \
    X(QUERY_FLOW_COUNTER, query_flow_counter_in, query_flow_counter_out)                \
    X(QUERY_NIC_VPORT_CONTEXT, query_nic_vport_context_in, query_nic_vport_context_out) \
    X(MODIFY_NIC_VPORT_CONTEXT, modify_nic_vport_context_in, modify_nic_vport_context_out) \
    X(QUERY_HCA_VPORT_CONTEXT, query_hca_vport_context_in, query_hca_vport_context_out) \
    X(QUERY_HCA_VPORT_GID, query_hca_vport_gid_in, query_hca_vport_gid_out)             \
    X(QUERY_HCA_VPORT_PKEY, query_hca_vport_pkey_in, query_hca_vport_pkey_out)          \
    X(QUERY_VPORT_STATE, query_vport_state_in, query_vport_state_out)                   \
    X(MODIFY_VPORT_STATE, modify_vport_state_in, modify_vport_state_out)                \
    X(SET_ROCE_ADDRESS, set_roce_address_in, set_roce_address_out)                      \
    X(QUERY_ROCE_ADDRESS, query_roce_address_in, query_roce_address_out)                \
    X(ALLOC_PD, alloc_pd_in, alloc_pd_out)                                              \
    X(DEALLOC_PD, dealloc_pd_in, dealloc_pd_out)                                        \
    X(ALLOC_UAR, alloc_uar_in, alloc_uar_out)                                           \
    X(DEALLOC_UAR, dealloc_uar_in, dealloc_uar_out)                                     \
    X(ACCESS_REG, access_register_in, access_register_out)                              \
    X(CREATE_UMEM, create_umem_in, create_umem_out)                                     \
    X(DESTROY_UMEM, destroy_umem_in, destroy_umem_out)                                  \
    X(ALLOC_Q_COUNTER, alloc_q_counter_in, alloc_q_counter_out)                         \
    X(DEALLOC_Q_COUNTER, dealloc_q_counter_in, dealloc_q_counter_out)                   \
    X(QUERY_Q_COUNTER, query_q_counter_in, query_q_counter_out)                         \
    X(QUERY_VPORT_COUNTER, query_vport_counter_in, query_vport_counter_out)

// The input layout's size in bytes for an opcode, or 0 when hw/ does not describe it.
std::size_t command_input_size(cmd_opcode op) noexcept;
std::size_t command_output_size(cmd_opcode op) noexcept;

// A command input (its opcode read from the buffer) or output, printed with its layout's
// field names; an opcode without a layout prints as the generic header.
std::string format_command_input(const void* in, std::size_t len);
std::string format_command_output(cmd_opcode op, const void* out, std::size_t len);
// The bits of a command input that its layout does not name (hw::unnamed_bits): empty
// when every set bit is a named field's, or when hw/ has no layout for the opcode.
std::string command_input_unnamed_bits(const void* in, std::size_t len);

}  // namespace cxv::hw
