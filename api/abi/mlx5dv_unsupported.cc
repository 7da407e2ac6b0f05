// cxv's libmlx5.so.1, the calls a cxv function does not offer: each fails as rdma-core's
// libmlx5 fails for a device or kernel without the feature, in the form its man page
// gives (NULL with errno EOPNOTSUPP; the errno value EOPNOTSUPP returned, errno set too;
// -1 or -EOPNOTSUPP where the call returns a count or a descriptor), so a program that asks takes its
// plain-verbs path or says what is missing. None touches its arguments: no object they
// could name was ever handed out. What is answered is in mlx5dv.cc.
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "api/abi/abi.h"

using cxv::abi::fail_errno;
using cxv::abi::fail_null;

// --- Queues and objects of mlx5's own kinds: DC and other mlx5dv QPs, mlx5dv CQs and
// WQs (CQE compression, striding RQs), device memory, the LAG port and UDP source port
// of a QP, scheduling elements, reserved QPNs, VARs, packet pacing. mlx5dv_qp_ex of an
// ibv_qp_ex: rdma-core computes it from its own QP layout, which cxv's QPs do not have,
// so NULL rather than a pointer into something else. -------------------------------------
CXV_ABI_EXPORT ibv_dm* mlx5dv_alloc_dm(ibv_context*, ibv_alloc_dm_attr*, mlx5dv_alloc_dm_attr*) {
    return fail_null<ibv_dm>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_var* mlx5dv_alloc_var(ibv_context*, std::uint32_t) { return fail_null<mlx5dv_var>(EOPNOTSUPP); }
CXV_ABI_EXPORT ibv_wq* mlx5dv_create_wq(ibv_context*, ibv_wq_init_attr*, mlx5dv_wq_init_attr*) {
    return fail_null<ibv_wq>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dci_stream_id_reset(ibv_qp*, std::uint16_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT void* mlx5dv_dm_map_op_addr(ibv_dm*, std::uint8_t) { return fail_null<void>(EOPNOTSUPP); }
CXV_ABI_EXPORT void mlx5dv_free_var(mlx5dv_var*) {}
CXV_ABI_EXPORT int mlx5dv_map_ah_to_qp(ibv_ah*, std::uint32_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_modify_qp_lag_port(ibv_qp*, std::uint8_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_modify_qp_sched_elem(ibv_qp*, const mlx5dv_sched_leaf*, const mlx5dv_sched_leaf*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_modify_qp_udp_sport(ibv_qp*, std::uint16_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_pp* mlx5dv_pp_alloc(ibv_context*, size_t, const void*, std::uint32_t) {
    return fail_null<mlx5dv_pp>(EOPNOTSUPP);
}
CXV_ABI_EXPORT void mlx5dv_pp_free(mlx5dv_pp*) {}
CXV_ABI_EXPORT int mlx5dv_qp_cancel_posted_send_wrs(mlx5dv_qp_ex*, std::uint64_t) {
    errno = EOPNOTSUPP;
    return -EOPNOTSUPP;
}
CXV_ABI_EXPORT mlx5dv_qp_ex* mlx5dv_qp_ex_from_ibv_qp_ex(ibv_qp_ex*) { return fail_null<mlx5dv_qp_ex>(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_query_qp_lag_port(ibv_qp*, std::uint8_t*, std::uint8_t*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_reserved_qpn_alloc(ibv_context*, std::uint32_t*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_reserved_qpn_dealloc(ibv_context*, std::uint32_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_sched_leaf* mlx5dv_sched_leaf_create(ibv_context*, const mlx5dv_sched_attr*) {
    return fail_null<mlx5dv_sched_leaf>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_sched_leaf_destroy(mlx5dv_sched_leaf*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_sched_leaf_modify(mlx5dv_sched_leaf*, const mlx5dv_sched_attr*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_sched_node* mlx5dv_sched_node_create(ibv_context*, const mlx5dv_sched_attr*) {
    return fail_null<mlx5dv_sched_node>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_sched_node_destroy(mlx5dv_sched_node*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_sched_node_modify(mlx5dv_sched_node*, const mlx5dv_sched_attr*) {
    return fail_errno(EOPNOTSUPP);
}

// --- Memory keys with signature or crypto attributes, crypto login and DEKs (perftest's
// AES-XTS mode asks for these; it stops at the first refusal). ----------------------------
CXV_ABI_EXPORT int _mlx5dv_mkey_check(mlx5dv_mkey*, mlx5dv_mkey_err*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_mkey* mlx5dv_create_mkey(mlx5dv_mkey_init_attr*) { return fail_null<mlx5dv_mkey>(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_crypto_login(ibv_context*, mlx5dv_crypto_login_attr*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_crypto_login_obj* mlx5dv_crypto_login_create(ibv_context*, mlx5dv_crypto_login_attr_ex*) {
    return fail_null<mlx5dv_crypto_login_obj>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_crypto_login_destroy(mlx5dv_crypto_login_obj*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_crypto_login_query(mlx5dv_crypto_login_obj*, mlx5dv_crypto_login_query_attr*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_crypto_login_query_state(ibv_context*, mlx5dv_crypto_login_state*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_crypto_logout(ibv_context*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dek* mlx5dv_dek_create(ibv_context*, mlx5dv_dek_init_attr*) {
    return fail_null<mlx5dv_dek>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dek_destroy(mlx5dv_dek*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dek_query(mlx5dv_dek*, mlx5dv_dek_attr*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_destroy_mkey(mlx5dv_mkey*) { return fail_errno(EOPNOTSUPP); }

// --- DevX: firmware commands and objects of the program's own. cxv's firmware commands
// go through its driver (or cxvd), which takes no raw mailboxes from a program. The
// frees of objects that cannot exist do nothing. ------------------------------------------
CXV_ABI_EXPORT mlx5dv_devx_msi_vector* mlx5dv_devx_alloc_msi_vector(ibv_context*) {
    return fail_null<mlx5dv_devx_msi_vector>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(ibv_context*, std::uint32_t) {
    return fail_null<mlx5dv_devx_uar>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_cq_modify(ibv_cq*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_cq_query(ibv_cq*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_devx_cmd_comp* mlx5dv_devx_create_cmd_comp(ibv_context*) {
    return fail_null<mlx5dv_devx_cmd_comp>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_devx_eq* mlx5dv_devx_create_eq(ibv_context*, const void*, size_t, void*, size_t) {
    return fail_null<mlx5dv_devx_eq>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_devx_event_channel* mlx5dv_devx_create_event_channel(ibv_context*,
                                                                           mlx5dv_devx_create_event_channel_flags) {
    return fail_null<mlx5dv_devx_event_channel>(EOPNOTSUPP);
}
CXV_ABI_EXPORT void mlx5dv_devx_destroy_cmd_comp(mlx5dv_devx_cmd_comp*) {}
CXV_ABI_EXPORT int mlx5dv_devx_destroy_eq(mlx5dv_devx_eq*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT void mlx5dv_devx_destroy_event_channel(mlx5dv_devx_event_channel*) {}
CXV_ABI_EXPORT int mlx5dv_devx_free_msi_vector(mlx5dv_devx_msi_vector*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT void mlx5dv_devx_free_uar(mlx5dv_devx_uar*) {}
CXV_ABI_EXPORT int mlx5dv_devx_general_cmd(ibv_context*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_get_async_cmd_comp(mlx5dv_devx_cmd_comp*, mlx5dv_devx_async_cmd_hdr*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT ssize_t mlx5dv_devx_get_event(mlx5dv_devx_event_channel*, mlx5dv_devx_async_event_hdr*, size_t) {
    errno = EOPNOTSUPP;
    return -1;
}
CXV_ABI_EXPORT int mlx5dv_devx_ind_tbl_modify(ibv_rwq_ind_table*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_ind_tbl_query(ibv_rwq_ind_table*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_devx_obj* mlx5dv_devx_obj_create(ibv_context*, const void*, size_t, void*, size_t) {
    return fail_null<mlx5dv_devx_obj>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_obj_destroy(mlx5dv_devx_obj*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_obj_modify(mlx5dv_devx_obj*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_obj_query(mlx5dv_devx_obj*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_obj_query_async(mlx5dv_devx_obj*, const void*, size_t, size_t, std::uint64_t,
                                               mlx5dv_devx_cmd_comp*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_qp_modify(ibv_qp*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_qp_query(ibv_qp*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_query_eqn(ibv_context*, std::uint32_t, std::uint32_t*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_srq_modify(ibv_srq*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_srq_query(ibv_srq*, const void*, size_t, void*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_subscribe_devx_event(mlx5dv_devx_event_channel*, mlx5dv_devx_obj*, std::uint16_t,
                                                    std::uint16_t*, std::uint64_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_subscribe_devx_event_fd(mlx5dv_devx_event_channel*, int, mlx5dv_devx_obj*,
                                                       std::uint16_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_umem_dereg(mlx5dv_devx_umem*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg(ibv_context*, void*, size_t, std::uint32_t) {
    return fail_null<mlx5dv_devx_umem>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(ibv_context*, mlx5dv_devx_umem_in*) {
    return fail_null<mlx5dv_devx_umem>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_devx_wq_modify(ibv_wq*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_devx_wq_query(ibv_wq*, const void*, size_t, void*, size_t) { return fail_errno(EOPNOTSUPP); }

// --- Steering: flows, flow actions and matchers, steering anchors, and direct rules,
// whose tables, matchers, rules and actions all need a domain mlx5dv_dr_domain_create
// does not make. The dumps return an errno value, as mlx5dv_dump(3) says. -----------------
CXV_ABI_EXPORT ibv_flow* mlx5dv_create_flow(mlx5dv_flow_matcher*, mlx5dv_flow_match_parameters*, size_t,
                                            mlx5dv_flow_action_attr*) {
    return fail_null<ibv_flow>(EOPNOTSUPP);
}
CXV_ABI_EXPORT ibv_flow_action* mlx5dv_create_flow_action_esp(ibv_context*, ibv_flow_action_esp_attr*,
                                                              mlx5dv_flow_action_esp*) {
    return fail_null<ibv_flow_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT ibv_flow_action* mlx5dv_create_flow_action_modify_header(ibv_context*, size_t, std::uint64_t*,
                                                                        mlx5dv_flow_table_type) {
    return fail_null<ibv_flow_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT ibv_flow_action* mlx5dv_create_flow_action_packet_reformat(ibv_context*, size_t, void*,
                                                                          mlx5dv_flow_action_packet_reformat_type,
                                                                          mlx5dv_flow_table_type) {
    return fail_null<ibv_flow_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_flow_matcher* mlx5dv_create_flow_matcher(ibv_context*, mlx5dv_flow_matcher_attr*) {
    return fail_null<mlx5dv_flow_matcher>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_steering_anchor* mlx5dv_create_steering_anchor(ibv_context*, mlx5dv_steering_anchor_attr*) {
    return fail_null<mlx5dv_steering_anchor>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_destroy_flow_matcher(mlx5dv_flow_matcher*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_destroy_steering_anchor(mlx5dv_steering_anchor*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_aso(mlx5dv_dr_domain*, mlx5dv_devx_obj*, std::uint32_t,
                                                             std::uint32_t, std::uint8_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_default_miss() {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_array(mlx5dv_dr_domain*, size_t,
                                                                    mlx5dv_dr_action_dest_attr**) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_devx_tir(mlx5dv_devx_obj*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_ib_port(mlx5dv_dr_domain*, std::uint32_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_ibv_qp(ibv_qp*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_root_table(mlx5dv_dr_table*, std::uint16_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_table(mlx5dv_dr_table*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_dest_vport(mlx5dv_dr_domain*, std::uint32_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_drop() { return fail_null<mlx5dv_dr_action>(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_counter(mlx5dv_devx_obj*, std::uint32_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_meter(mlx5dv_dr_flow_meter_attr*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_flow_sampler(mlx5dv_dr_flow_sampler_attr*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_modify_header(mlx5dv_dr_domain*, std::uint32_t, size_t,
                                                                       __be64*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_packet_reformat(mlx5dv_dr_domain*, std::uint32_t,
                                                                         mlx5dv_flow_action_packet_reformat_type,
                                                                         size_t, void*) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_pop_vlan() { return fail_null<mlx5dv_dr_action>(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_push_vlan(mlx5dv_dr_domain*, __be32) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_action* mlx5dv_dr_action_create_tag(std::uint32_t) {
    return fail_null<mlx5dv_dr_action>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_action_destroy(mlx5dv_dr_action*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dr_action_modify_aso(mlx5dv_dr_action*, std::uint32_t, std::uint32_t, std::uint8_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_action_modify_flow_meter(mlx5dv_dr_action*, mlx5dv_dr_flow_meter_attr*, __be64) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_aso_other_domain_link(mlx5dv_devx_obj*, mlx5dv_dr_domain*, mlx5dv_dr_domain*,
                                                   std::uint32_t, std::uint8_t) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_aso_other_domain_unlink(mlx5dv_devx_obj*, mlx5dv_dr_domain*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT void mlx5dv_dr_domain_allow_duplicate_rules(mlx5dv_dr_domain*, bool) {}
CXV_ABI_EXPORT mlx5dv_dr_domain* mlx5dv_dr_domain_create(ibv_context*, mlx5dv_dr_domain_type) {
    return fail_null<mlx5dv_dr_domain>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_domain_destroy(mlx5dv_dr_domain*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT void mlx5dv_dr_domain_set_reclaim_device_memory(mlx5dv_dr_domain*, bool) {}
CXV_ABI_EXPORT int mlx5dv_dr_domain_sync(mlx5dv_dr_domain*, std::uint32_t) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dr_matcher* mlx5dv_dr_matcher_create(mlx5dv_dr_table*, std::uint16_t, std::uint8_t,
                                                           mlx5dv_flow_match_parameters*) {
    return fail_null<mlx5dv_dr_matcher>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_matcher_destroy(mlx5dv_dr_matcher*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dr_matcher_set_layout(mlx5dv_dr_matcher*, mlx5dv_dr_matcher_layout*) {
    return fail_errno(EOPNOTSUPP);
}
CXV_ABI_EXPORT mlx5dv_dr_rule* mlx5dv_dr_rule_create(mlx5dv_dr_matcher*, mlx5dv_flow_match_parameters*, size_t,
                                                     mlx5dv_dr_action**) {
    return fail_null<mlx5dv_dr_rule>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_rule_destroy(mlx5dv_dr_rule*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT mlx5dv_dr_table* mlx5dv_dr_table_create(mlx5dv_dr_domain*, std::uint32_t) {
    return fail_null<mlx5dv_dr_table>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_dr_table_destroy(mlx5dv_dr_table*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dump_dr_domain(FILE*, mlx5dv_dr_domain*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dump_dr_matcher(FILE*, mlx5dv_dr_matcher*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dump_dr_rule(FILE*, mlx5dv_dr_rule*) { return fail_errno(EOPNOTSUPP); }
CXV_ABI_EXPORT int mlx5dv_dump_dr_table(FILE*, mlx5dv_dr_table*) { return fail_errno(EOPNOTSUPP); }

// --- rdma-core's own VFIO driver: cxv is the VFIO driver here, and its functions are
// libibverbs.so.1's devices. ----------------------------------------------------------------
CXV_ABI_EXPORT ibv_device** mlx5dv_get_vfio_device_list(mlx5dv_vfio_context_attr*) {
    return fail_null<ibv_device*>(EOPNOTSUPP);
}
CXV_ABI_EXPORT int mlx5dv_vfio_get_events_fd(ibv_context*) {
    errno = EOPNOTSUPP;
    return -1;
}
CXV_ABI_EXPORT int mlx5dv_vfio_process_events(ibv_context*) { return fail_errno(EOPNOTSUPP); }
