// Command dispatch: the checks every command goes through before its handler, in the
// order a card applies them (PRM "Command Return Status"): length of the header, opcode,
// HCA state, then the command's own input length; handlers check op_mod and fields.
#include "sim/firmware/firmware.h"

#include <algorithm>
#include <vector>

#include "hw/cmd_layouts.h"
#include "hw/endian.h"
#include "hw/ifc.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using hw::cmd_opcode;
using hw::cmd_status;

firmware::firmware(const device_config& cfg, bar0& bar, iommu& mmu, msix_table& msix, trace& tr,
                   fault_plan& faults, object_tables& tables, event_queues& eqs, device_port& port,
                   transport_engine& engine)
    : cfg_(cfg),
      bar_(bar),
      mmu_(mmu),
      msix_(msix),
      trace_(tr),
      faults_(faults), tables_(tables), events_(eqs), port_(port), engine_(engine) {
    reset();
}

firmware::handler firmware::lookup(cmd_opcode op) const noexcept {
    switch (op) {
        case cmd_opcode::ENABLE_HCA: return &firmware::enable_hca;
        case cmd_opcode::DISABLE_HCA: return &firmware::disable_hca;
        case cmd_opcode::QUERY_ISSI: return &firmware::query_issi;
        case cmd_opcode::SET_ISSI: return &firmware::set_issi;
        case cmd_opcode::QUERY_PAGES: return &firmware::query_pages;
        case cmd_opcode::MANAGE_PAGES: return &firmware::manage_pages;
        case cmd_opcode::QUERY_HCA_CAP: return &firmware::query_hca_cap;
        case cmd_opcode::SET_HCA_CAP: return &firmware::set_hca_cap;
        case cmd_opcode::INIT_HCA: return &firmware::init_hca;
        case cmd_opcode::TEARDOWN_HCA: return &firmware::teardown_hca;
        case cmd_opcode::SET_DRIVER_VERSION: return &firmware::set_driver_version;
        case cmd_opcode::QUERY_ADAPTER: return &firmware::query_adapter;
        case cmd_opcode::ALLOC_XRCD: return &firmware::alloc_xrcd;
        case cmd_opcode::DEALLOC_XRCD: return &firmware::dealloc_xrcd;
        case cmd_opcode::CREATE_XRC_SRQ: return &firmware::create_xrc_srq;
        case cmd_opcode::DESTROY_XRC_SRQ: return &firmware::destroy_xrc_srq;
        case cmd_opcode::CREATE_RMP: return &firmware::create_rmp;
        case cmd_opcode::DESTROY_RMP: return &firmware::destroy_rmp;
        case cmd_opcode::ACCESS_REG: return &firmware::access_reg;
        case cmd_opcode::ALLOC_UAR: return &firmware::alloc_uar;
        case cmd_opcode::DEALLOC_UAR: return &firmware::dealloc_uar;
        case cmd_opcode::ALLOC_PD: return &firmware::alloc_pd;
        case cmd_opcode::DEALLOC_PD: return &firmware::dealloc_pd;
        case cmd_opcode::CREATE_EQ: return &firmware::create_eq;
        case cmd_opcode::DESTROY_EQ: return &firmware::destroy_eq;
        case cmd_opcode::QUERY_EQ: return &firmware::query_eq;
        case cmd_opcode::CREATE_MKEY: return &firmware::create_mkey;
        case cmd_opcode::DESTROY_MKEY: return &firmware::destroy_mkey;
        case cmd_opcode::QUERY_MKEY: return &firmware::query_mkey;
        case cmd_opcode::CREATE_UMEM: return &firmware::create_umem;
        case cmd_opcode::DESTROY_UMEM: return &firmware::destroy_umem;
        case cmd_opcode::CREATE_CQ: return &firmware::create_cq;
        case cmd_opcode::DESTROY_CQ: return &firmware::destroy_cq;
        case cmd_opcode::QUERY_CQ: return &firmware::query_cq;
        case cmd_opcode::MODIFY_CQ: return &firmware::modify_cq;
        case cmd_opcode::CREATE_QP: return &firmware::create_qp;
        case cmd_opcode::DESTROY_QP: return &firmware::destroy_qp;
        case cmd_opcode::QUERY_QP: return &firmware::query_qp;
        case cmd_opcode::RST2INIT_QP:
        case cmd_opcode::INIT2INIT_QP:
        case cmd_opcode::INIT2RTR_QP:
        case cmd_opcode::RTR2RTS_QP:
        case cmd_opcode::RTS2RTS_QP:
        case cmd_opcode::SQERR2RTS_QP:
        case cmd_opcode::SQD_RTS_QP:
        case cmd_opcode::QP_2ERR:
        case cmd_opcode::QP_2RST:
            return &firmware::modify_qp;
        case cmd_opcode::CREATE_SRQ: return &firmware::create_srq;
        case cmd_opcode::DESTROY_SRQ: return &firmware::destroy_srq;
        case cmd_opcode::QUERY_SRQ: return &firmware::query_srq;
        case cmd_opcode::ARM_RQ: return &firmware::arm_rq;
        case cmd_opcode::QUERY_VPORT_STATE: return &firmware::query_vport_state;
        case cmd_opcode::QUERY_HCA_VPORT_CONTEXT: return &firmware::query_hca_vport_context;
        case cmd_opcode::QUERY_HCA_VPORT_GID: return &firmware::query_hca_vport_gid;
        case cmd_opcode::QUERY_HCA_VPORT_PKEY: return &firmware::query_hca_vport_pkey;
        case cmd_opcode::QUERY_NIC_VPORT_CONTEXT: return &firmware::query_nic_vport_context;
        case cmd_opcode::MODIFY_NIC_VPORT_CONTEXT: return &firmware::modify_nic_vport_context;
        case cmd_opcode::MAD_IFC: return &firmware::mad_ifc;
        case cmd_opcode::SET_ROCE_ADDRESS: return &firmware::set_roce_address;
        case cmd_opcode::QUERY_ROCE_ADDRESS: return &firmware::query_roce_address;
        case cmd_opcode::ALLOC_Q_COUNTER: return &firmware::alloc_q_counter;
        case cmd_opcode::DEALLOC_Q_COUNTER: return &firmware::dealloc_q_counter;
        case cmd_opcode::QUERY_Q_COUNTER: return &firmware::query_q_counter;
        case cmd_opcode::QUERY_VPORT_COUNTER: return &firmware::query_vport_counter;
        default: return nullptr;
    }
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
    if (c.in.size() < ifc::cmd_in::size_bytes) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::INPUT_TOO_SHORT);
    }
    if (c.olen < ifc::cmd_out::size_bytes - 4) {
        // Not even room for status and syndrome.
        return fail(cmd_status::BAD_OUTPUT_LEN, cmd_syndrome::OUTPUT_TOO_SHORT);
    }
    const handler h = lookup(c.opcode);
    if (h == nullptr) return fail(cmd_status::BAD_OP, cmd_syndrome::UNKNOWN_OPCODE);
    if (const auto st = check_state(c.opcode); st.status != cmd_status::OK) return st;
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
        return (this->*h)(p);
    }
    return (this->*h)(c);
}

void firmware::reset() {
    release_all_objects();
    pages_.clear();
    state_ = hca_state::disabled;
    current_issi_ = 0;
    boot_pages_given_ = init_pages_given_ = false;
    pages_requested_ = 0;
    host_endianness_set_ = false;
    host_big_endian_ = false;
    fast_teardown_prepared_ = false;
    port_.reset();
    admin_mtu_ = 0;
    vport_cleared_ = {};
    regs_ = {};
    fill_general_caps(current_caps_.data(), false);
    atomic_req_mode_ = 0;
    driver_version_.fill(0);
}

void firmware::release_all_objects() {
    // Teardown, DISABLE_HCA and reset: every object goes, and so does its ICM slot.
    for (auto& [n, o] : qps_) pages_.free_slot(o.icm);
    for (auto& [n, o] : srqs_) pages_.free_slot(o.icm);
    for (auto& [n, o] : cqs_) pages_.free_slot(o.icm);
    for (auto& [n, o] : mkeys_) {
        pages_.free_slot(o.icm);
        icm_free_list(o.list_icm);
    }
    for (auto& [n, o] : umems_) {
        pages_.free_slot(o.icm);
        icm_free_list(o.list_icm);
    }
    for (auto& [n, o] : eqs_) pages_.free_slot(o.icm);
    qps_.clear();
    engine_.reset();
    srqs_.clear();
    cqs_.clear();
    mkeys_.clear();
    umems_.clear();
    events_.clear();
    pds_.clear();
    xrcds_.clear();
    uars_.clear();
    next_xrcd_ = 1;
    next_pd_ = next_mkey_ = next_umem_ = next_cqn_ = next_srqn_ = 1;
    next_qpn_ = 0x100;
    next_uar_ = cfg_.first_uar;
    nic_vport_ = {};  // the vport context goes back to its defaults with the objects
    roce_addresses_.clear();  // the GID table is the driver's to program again
    reset_q_counters();
}

std::optional<pages::slot> firmware::icm_alloc() {
    auto s = pages_.alloc_slot();
    // Keep a reserve: below a quarter of a page's worth of free slots, ask for more.
    if (pages_.free_slots() < pages::slots_per_page / 4 && state_ == hca_state::initialized) {
        events_.request_pages(static_cast<std::int32_t>(cfg_.page_request_batch));
    }
    return s;
}

bool firmware::icm_write(pages::slot s, const void* data, std::size_t len) {
    if (mmu_.write(s.iova, data, len)) return true;
    trace_.count(&counters::iommu_faults);
    return false;
}

bool firmware::icm_read(pages::slot s, void* data, std::size_t len) {
    if (mmu_.read(s.iova, data, len)) return true;
    trace_.count(&counters::iommu_faults);
    return false;
}

void firmware::icm_free(pages::slot s) { pages_.free_slot(s); }

bool firmware::icm_store_list(const std::vector<std::uint64_t>& entries,
                              std::vector<pages::slot>& out) {
    constexpr std::size_t per_slot = pages::slot_size / 8;
    std::array<std::uint64_t, per_slot> chunk;
    for (std::size_t i = 0; i < entries.size(); i += per_slot) {
        const auto slot = icm_alloc();
        const std::size_t n = std::min(per_slot, entries.size() - i);
        for (std::size_t k = 0; k < n; ++k) chunk[k] = hw::to_be(entries[i + k]);
        if (!slot || !icm_write(*slot, chunk.data(), n * 8)) {
            if (slot) icm_free(*slot);
            icm_free_list(out);
            return false;
        }
        out.push_back(*slot);
    }
    return true;
}

void firmware::icm_free_list(std::vector<pages::slot>& slots) {
    for (const auto s : slots) pages_.free_slot(s);
    slots.clear();
}

}  // namespace cxv::sim
