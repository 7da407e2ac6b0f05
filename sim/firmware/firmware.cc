// Command dispatch: the checks every command goes through before its handler, in the
// order a card applies them (PRM "Command Return Status"): length of the header, opcode,
// HCA state, then the command's own input length; handlers check op_mod and fields.
#include "sim/firmware/firmware.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "hw/cmd_layouts.h"
#include "hw/endian.h"
#include "hw/ifc.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using hw::cmd_opcode;
using hw::cmd_status;

template <typename Unit>
void firmware::route(cmd_opcode op, Unit& unit, cmd_reply (Unit::*h)(cmd_ctx&)) {
    handlers_.emplace(op, [&unit, h](cmd_ctx& c) { return (unit.*h)(c); });
}

firmware::firmware(const device_config& cfg, const bar0& bar, iommu& mmu, const msix_table& msix, trace& tr,
                   object_tables& tables, event_queues& eqs, device_port& port, transport_engine& engine)
    : cfg_(cfg),
      port_(port),
      tables_(tables),
      caps_(cfg),
      icm_(cfg, mmu, tr, eqs, state_),
      regs_(cfg, port),
      eqs_(cfg, bar, msix, caps_, icm_, tables, eqs),
      mkeys_(caps_, icm_, tables),
      cqs_(caps_, icm_, tables, eqs, mmu, tr),
      srqs_(caps_, icm_, tables),
      counters_(cfg, caps_, tables, port),
      qps_(cfg, caps_, regs_, icm_, tables, engine, counters_),
      vports_(cfg, caps_, regs_, port, tables),
      eth_(caps_, icm_, tables),
      flows_(caps_, icm_, tables) {
    // The dispatch table: each opcode and the unit that executes it.
    route(cmd_opcode::ENABLE_HCA, *this, &firmware::enable_hca);
    route(cmd_opcode::DISABLE_HCA, *this, &firmware::disable_hca);
    route(cmd_opcode::QUERY_ISSI, *this, &firmware::query_issi);
    route(cmd_opcode::SET_ISSI, *this, &firmware::set_issi);
    route(cmd_opcode::INIT_HCA, *this, &firmware::init_hca);
    route(cmd_opcode::TEARDOWN_HCA, *this, &firmware::teardown_hca);
    route(cmd_opcode::SET_DRIVER_VERSION, *this, &firmware::set_driver_version);
    route(cmd_opcode::QUERY_ADAPTER, *this, &firmware::query_adapter);
    route(cmd_opcode::QUERY_PAGES, icm_, &firmware_pages::query_pages);
    route(cmd_opcode::MANAGE_PAGES, icm_, &firmware_pages::manage_pages);
    route(cmd_opcode::QUERY_HCA_CAP, caps_, &hca_caps::query_hca_cap);
    route(cmd_opcode::SET_HCA_CAP, caps_, &hca_caps::set_hca_cap);
    route(cmd_opcode::ACCESS_REG, regs_, &access_registers::access_reg);
    route(cmd_opcode::ALLOC_UAR, eqs_, &eq_commands::alloc_uar);
    route(cmd_opcode::DEALLOC_UAR, eqs_, &eq_commands::dealloc_uar);
    route(cmd_opcode::CREATE_EQ, eqs_, &eq_commands::create_eq);
    route(cmd_opcode::DESTROY_EQ, eqs_, &eq_commands::destroy_eq);
    route(cmd_opcode::QUERY_EQ, eqs_, &eq_commands::query_eq);
    route(cmd_opcode::ALLOC_PD, mkeys_, &mkey_commands::alloc_pd);
    route(cmd_opcode::DEALLOC_PD, mkeys_, &mkey_commands::dealloc_pd);
    route(cmd_opcode::CREATE_MKEY, mkeys_, &mkey_commands::create_mkey);
    route(cmd_opcode::DESTROY_MKEY, mkeys_, &mkey_commands::destroy_mkey);
    route(cmd_opcode::QUERY_MKEY, mkeys_, &mkey_commands::query_mkey);
    route(cmd_opcode::CREATE_UMEM, mkeys_, &mkey_commands::create_umem);
    route(cmd_opcode::DESTROY_UMEM, mkeys_, &mkey_commands::destroy_umem);
    route(cmd_opcode::CREATE_CQ, cqs_, &cq_commands::create_cq);
    route(cmd_opcode::DESTROY_CQ, cqs_, &cq_commands::destroy_cq);
    route(cmd_opcode::QUERY_CQ, cqs_, &cq_commands::query_cq);
    route(cmd_opcode::MODIFY_CQ, cqs_, &cq_commands::modify_cq);
    route(cmd_opcode::CREATE_SRQ, srqs_, &srq_commands::create_srq);
    route(cmd_opcode::DESTROY_SRQ, srqs_, &srq_commands::destroy_srq);
    route(cmd_opcode::QUERY_SRQ, srqs_, &srq_commands::query_srq);
    route(cmd_opcode::ARM_RQ, srqs_, &srq_commands::arm_rq);
    route(cmd_opcode::ALLOC_XRCD, srqs_, &srq_commands::alloc_xrcd);
    route(cmd_opcode::DEALLOC_XRCD, srqs_, &srq_commands::dealloc_xrcd);
    route(cmd_opcode::CREATE_XRC_SRQ, srqs_, &srq_commands::create_xrc_srq);
    route(cmd_opcode::DESTROY_XRC_SRQ, srqs_, &srq_commands::destroy_xrc_srq);
    route(cmd_opcode::CREATE_RMP, srqs_, &srq_commands::create_rmp);
    route(cmd_opcode::DESTROY_RMP, srqs_, &srq_commands::destroy_rmp);
    route(cmd_opcode::MODIFY_RMP, srqs_, &srq_commands::modify_rmp);
    route(cmd_opcode::QUERY_RMP, srqs_, &srq_commands::query_rmp);
    route(cmd_opcode::CREATE_QP, qps_, &qp_commands::create_qp);
    route(cmd_opcode::DESTROY_QP, qps_, &qp_commands::destroy_qp);
    route(cmd_opcode::QUERY_QP, qps_, &qp_commands::query_qp);
    route(cmd_opcode::ATTACH_TO_MCG, qps_, &qp_commands::multicast_group);
    route(cmd_opcode::DETACH_FROM_MCG, qps_, &qp_commands::multicast_group);
    for (const auto op : {cmd_opcode::RST2INIT_QP, cmd_opcode::INIT2INIT_QP, cmd_opcode::INIT2RTR_QP,
                          cmd_opcode::RTR2RTS_QP, cmd_opcode::RTS2RTS_QP, cmd_opcode::SQERR2RTS_QP,
                          cmd_opcode::SQD_RTS_QP, cmd_opcode::QP_2ERR, cmd_opcode::QP_2RST}) {
        route(op, qps_, &qp_commands::modify_qp);
    }
    route(cmd_opcode::ALLOC_Q_COUNTER, counters_, &counter_commands::alloc_q_counter);
    route(cmd_opcode::DEALLOC_Q_COUNTER, counters_, &counter_commands::dealloc_q_counter);
    route(cmd_opcode::QUERY_Q_COUNTER, counters_, &counter_commands::query_q_counter);
    route(cmd_opcode::QUERY_VPORT_COUNTER, counters_, &counter_commands::query_vport_counter);
    route(cmd_opcode::QUERY_VPORT_STATE, vports_, &vport_commands::query_vport_state);
    route(cmd_opcode::MODIFY_VPORT_STATE, vports_, &vport_commands::modify_vport_state);
    route(cmd_opcode::QUERY_HCA_VPORT_CONTEXT, vports_, &vport_commands::query_hca_vport_context);
    route(cmd_opcode::QUERY_HCA_VPORT_GID, vports_, &vport_commands::query_hca_vport_gid);
    route(cmd_opcode::QUERY_HCA_VPORT_PKEY, vports_, &vport_commands::query_hca_vport_pkey);
    route(cmd_opcode::QUERY_NIC_VPORT_CONTEXT, vports_, &vport_commands::query_nic_vport_context);
    route(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT, vports_, &vport_commands::modify_nic_vport_context);
    route(cmd_opcode::MAD_IFC, vports_, &vport_commands::mad_ifc);
    route(cmd_opcode::SET_ROCE_ADDRESS, vports_, &vport_commands::set_roce_address);
    route(cmd_opcode::QUERY_ROCE_ADDRESS, vports_, &vport_commands::query_roce_address);
    route(cmd_opcode::ALLOC_TRANSPORT_DOMAIN, eth_, &eth_commands::alloc_transport_domain);
    route(cmd_opcode::DEALLOC_TRANSPORT_DOMAIN, eth_, &eth_commands::dealloc_transport_domain);
    route(cmd_opcode::CREATE_TIS, eth_, &eth_commands::create_tis);
    route(cmd_opcode::DESTROY_TIS, eth_, &eth_commands::destroy_tis);
    route(cmd_opcode::QUERY_TIS, eth_, &eth_commands::query_tis);
    route(cmd_opcode::CREATE_SQ, eth_, &eth_commands::create_sq);
    route(cmd_opcode::MODIFY_SQ, eth_, &eth_commands::modify_sq);
    route(cmd_opcode::DESTROY_SQ, eth_, &eth_commands::destroy_sq);
    route(cmd_opcode::QUERY_SQ, eth_, &eth_commands::query_sq);
    route(cmd_opcode::CREATE_RQ, eth_, &eth_commands::create_rq);
    route(cmd_opcode::MODIFY_RQ, eth_, &eth_commands::modify_rq);
    route(cmd_opcode::DESTROY_RQ, eth_, &eth_commands::destroy_rq);
    route(cmd_opcode::QUERY_RQ, eth_, &eth_commands::query_rq);
    route(cmd_opcode::CREATE_RQT, eth_, &eth_commands::create_rqt);
    route(cmd_opcode::MODIFY_RQT, eth_, &eth_commands::modify_rqt);
    route(cmd_opcode::DESTROY_RQT, eth_, &eth_commands::destroy_rqt);
    route(cmd_opcode::CREATE_TIR, eth_, &eth_commands::create_tir);
    route(cmd_opcode::MODIFY_TIR, eth_, &eth_commands::modify_tir);
    route(cmd_opcode::DESTROY_TIR, eth_, &eth_commands::destroy_tir);
    route(cmd_opcode::QUERY_TIR, eth_, &eth_commands::query_tir);
    route(cmd_opcode::CREATE_FLOW_TABLE, flows_, &flow_commands::create_flow_table);
    route(cmd_opcode::MODIFY_FLOW_TABLE, flows_, &flow_commands::modify_flow_table);
    route(cmd_opcode::DESTROY_FLOW_TABLE, flows_, &flow_commands::destroy_flow_table);
    route(cmd_opcode::CREATE_FLOW_GROUP, flows_, &flow_commands::create_flow_group);
    route(cmd_opcode::DESTROY_FLOW_GROUP, flows_, &flow_commands::destroy_flow_group);
    route(cmd_opcode::SET_FLOW_TABLE_ENTRY, flows_, &flow_commands::set_flow_table_entry);
    route(cmd_opcode::DELETE_FLOW_TABLE_ENTRY, flows_, &flow_commands::delete_flow_table_entry);
    route(cmd_opcode::SET_FLOW_TABLE_ROOT, flows_, &flow_commands::set_flow_table_root);
    route(cmd_opcode::ALLOC_FLOW_COUNTER, flows_, &flow_commands::alloc_flow_counter);
    route(cmd_opcode::DEALLOC_FLOW_COUNTER, flows_, &flow_commands::dealloc_flow_counter);
    route(cmd_opcode::QUERY_FLOW_COUNTER, flows_, &flow_commands::query_flow_counter);
    reset();
}

// Which commands each HCA state accepts (PRM "HCA Initialization" flow): before
// ENABLE_HCA nothing but ENABLE_HCA; before INIT_HCA the bring-up commands; after
// TEARDOWN_HCA only page reclaim, INIT_HCA again, and DISABLE_HCA.
cmd_reply firmware::check_state(cmd_opcode op) const noexcept {
    const auto bad = [](cmd_syndrome why) { return fail(cmd_status::BAD_SYS_STATE, why); };
    switch (state_) {
        case hca_state::disabled:
            if (op == cmd_opcode::ENABLE_HCA) return ok();
            return bad(cmd_syndrome::HCA_NOT_ENABLED);
        case hca_state::enabled:
            switch (op) {
                case cmd_opcode::ENABLE_HCA:
                case cmd_opcode::DISABLE_HCA:
                case cmd_opcode::QUERY_ISSI:
                case cmd_opcode::SET_ISSI:
                case cmd_opcode::QUERY_PAGES:
                case cmd_opcode::MANAGE_PAGES:
                case cmd_opcode::QUERY_HCA_CAP:
                case cmd_opcode::SET_HCA_CAP:
                case cmd_opcode::ACCESS_REG:
                case cmd_opcode::INIT_HCA:
                    return ok();
                default:
                    return bad(cmd_syndrome::HCA_NOT_INITIALIZED);
            }
        case hca_state::initialized:
            switch (op) {
                case cmd_opcode::ENABLE_HCA:
                case cmd_opcode::SET_ISSI:
                case cmd_opcode::SET_HCA_CAP:
                    return bad(cmd_syndrome::HCA_ALREADY_INITIALIZED);
                default:
                    return ok();
            }
        case hca_state::torn_down:
            switch (op) {
                case cmd_opcode::QUERY_PAGES:
                case cmd_opcode::MANAGE_PAGES:
                case cmd_opcode::DISABLE_HCA:
                case cmd_opcode::INIT_HCA:
                case cmd_opcode::QUERY_ISSI:
                case cmd_opcode::QUERY_HCA_CAP:
                    return ok();
                default:
                    return bad(cmd_syndrome::BAD_SYS_STATE);
            }
    }
    return bad(cmd_syndrome::BAD_SYS_STATE);
}

cmd_reply firmware::execute(cmd_ctx& c) {
    ++tables_.eth.generation;  // any command may change what steering decided
    if (c.in.size() < ifc::cmd_in::size_bytes) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::INPUT_TOO_SHORT);
    }
    if (c.olen < ifc::cmd_out::size_bytes - 4) {
        // Not even room for status and syndrome.
        return fail(cmd_status::BAD_OUTPUT_LEN, cmd_syndrome::OUTPUT_TOO_SHORT);
    }
    const auto h = handlers_.find(c.opcode);
    if (h == handlers_.end()) return fail(cmd_status::BAD_OP, cmd_syndrome::UNKNOWN_OPCODE);
    // ENABLE_HCA and DISABLE_HCA of another function (a PF's VF) are the PF's commands
    // once it is enabled, whatever its own HCA's state beyond that.
    const bool other_function = (c.opcode == cmd_opcode::ENABLE_HCA || c.opcode == cmd_opcode::DISABLE_HCA) &&
                                c.in.size() >= ifc::enable_hca_in::size_bytes &&
                                ifc::get<ifc::enable_hca_in::function_id>(c.in.data()) != 0;
    if (other_function && state_ == hca_state::disabled) {
        return fail(cmd_status::BAD_SYS_STATE, cmd_syndrome::HCA_NOT_ENABLED);
    }
    if (!other_function) {
        if (const auto st = check_state(c.opcode); st.status != cmd_status::OK) return st;
    }
    // Inputs shorter than today's layout are what older drivers send (fields added to a
    // command's layout since are zero for them): rdma-core's INIT_HCA is 16 bytes where
    // Linux 6.1's layout has 32. The device reads the missing tail as zeros. Only an
    // input shorter than the 16 bytes every command carries inline is refused.
    const std::size_t need = hw::command_input_size(c.opcode);
    if (c.in.size() < std::min<std::size_t>(need, 16)) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::INPUT_TOO_SHORT);
    }
    if (c.in.size() < need) {
        std::vector<std::byte> padded(need);
        std::copy(c.in.begin(), c.in.end(), padded.begin());
        cmd_ctx p = c;
        p.in = padded;
        return h->second(p);
    }
    return h->second(c);
}

void firmware::reset() {
    release_all_objects();
    icm_.clear();
    state_ = hca_state::disabled;
    current_issi_ = 0;
    fast_teardown_prepared_ = false;
    port_.reset();
    counters_.reset();
    regs_.reset();
    caps_.reset();
    driver_version_.fill(0);
}

void firmware::release_all_objects() {
    ++tables_.eth.generation;
    flows_.release_all();
    eth_.release_all();
    qps_.release_all();
    srqs_.release_all();
    cqs_.release_all();
    mkeys_.release_all();
    eqs_.release_all();
    vports_.release_all();
    counters_.release_all();
}

}  // namespace cxv::sim
