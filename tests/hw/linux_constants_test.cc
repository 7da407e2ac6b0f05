// hw/'s enum and constant tables against Linux 6.1's include/linux/mlx5/{cq,device,
// doorbell,driver,port,qp}.h: the values that mlx5_ifc.h (ifc_conformance_test) does not hold and
// that rdma-core's mlx5dv.h (mlx5dv_conformance_test) checks only in part.
//
// Those headers do not compile outside the kernel, so tests/hw:linux_mlx5_constants_cxx
// copies just their relevant enum blocks and #defines into linux/mlx5_constants.h, with
// CXV_LINUX_MLX5_CONSTANTS listing every name it copied. The test turns that list into a
// name -> value map and looks up, for every entry of our tables, Linux's name for it:
// the table's Linux prefix followed by our name, unless kLinuxNames says otherwise. An
// entry Linux has no name for must be in kOursOnly with the reason; anything else fails.
// Scalar constants are compared one by one in kScalars.
//
// Not compared here because Linux keeps them out of include/linux/mlx5 (they were
// checked by hand against Linux 6.1's drivers/net/ethernet/mellanox/mlx5/core instead):
// cmd_delivery_status (MLX5_CMD_DELIVERY_STAT_* in cmd.c); the EQ doorbell offsets
// (MLX5_EQ_DOORBEL_OFFSET in eq.c, and eq_update_ci in lib/eq.h writes the no-arm
// doorbell two 32-bit words past it); the CQ doorbell record indices (set_ci_db and
// arm_db are pointer arithmetic, not constants); the PCI device IDs (mlx5_core_pci_table
// in main.c).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/hw/linux_constants.h"

// mlx5_ifc.h for the enumerated command field values (see the last test case).
#include "tests/hw/linux_mlx5_ifc.h"

#include <infiniband/verbs.h>

#include <doctest/doctest.h>
#include <fmt/core.h>

#include "hw/cmd_values.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"
#include "hw/opcodes.h"
#include "hw/port_speeds.h"
#include "hw/registers.h"
#include "hw/wqe.h"

namespace hw = cxv::hw;

namespace {

using cxv::test::linux_constants;

// --- tables ---------------------------------------------------------------------------

struct our_entry {
    std::string_view name;
    std::uint64_t value;
};

struct our_table {
    std::string_view name;          // the hw:: enum
    std::string_view linux_prefix;  // Linux's prefix for the same values
    std::vector<our_entry> entries;
};

std::vector<our_table> our_tables() {
    std::vector<our_table> tables;
// E is the enum of the table being listed; the value read is the enumerator's own.
#define CXV_OUR_ENTRY(name, value) {#name, static_cast<std::uint64_t>(E::name)},
#define CXV_TABLE(type, list, prefix)                                  \
    {                                                                  \
        using E = hw::type;                                            \
        tables.push_back({#type, prefix, {list(CXV_OUR_ENTRY)}});      \
    }
    CXV_TABLE(cmd_status, CXV_CMD_STATUSES, "MLX5_CMD_STAT_")
    CXV_TABLE(event_type, CXV_EVENT_TYPES, "MLX5_EVENT_TYPE_")
    CXV_TABLE(port_change_subtype, CXV_PORT_CHANGE_SUBTYPES, "MLX5_PORT_CHANGE_SUBTYPE_")
    CXV_TABLE(wqe_opcode, CXV_WQE_OPCODES, "MLX5_OPCODE_")
    CXV_TABLE(cqe_opcode, CXV_CQE_OPCODES, "MLX5_CQE_")
    CXV_TABLE(cqe_syndrome, CXV_CQE_SYNDROMES, "MLX5_CQE_SYNDROME_")
    CXV_TABLE(reg_id, CXV_REG_IDS, "MLX5_REG_")
    CXV_TABLE(ppcnt_group, CXV_PPCNT_GROUPS, "MLX5_")
    CXV_TABLE(port_status, CXV_PORT_STATUSES, "MLX5_PORT_")
#undef CXV_TABLE
#undef CXV_OUR_ENTRY
    return tables;
}

// Where Linux spells one of our entries differently: X(table, our name, Linux's name).
// Linux abbreviates the command statuses and ends most of them in _ERR; its
// MLX5_CQE_SIG_ERR is our SIGNATURE_ERR (SIG_ERR is a <signal.h> macro).
#define CXV_LINUX_NAMES(X)                                                   \
    X(cqe_opcode, SIGNATURE_ERR, MLX5_CQE_SIG_ERR)                           \
    X(cmd_status, INTERNAL_ERR, MLX5_CMD_STAT_INT_ERR)                       \
    X(cmd_status, BAD_OP, MLX5_CMD_STAT_BAD_OP_ERR)                          \
    X(cmd_status, BAD_PARAM, MLX5_CMD_STAT_BAD_PARAM_ERR)                    \
    X(cmd_status, BAD_SYS_STATE, MLX5_CMD_STAT_BAD_SYS_STATE_ERR)            \
    X(cmd_status, BAD_RESOURCE, MLX5_CMD_STAT_BAD_RES_ERR)                   \
    X(cmd_status, RESOURCE_BUSY, MLX5_CMD_STAT_RES_BUSY)                     \
    X(cmd_status, EXCEED_LIM, MLX5_CMD_STAT_LIM_ERR)                         \
    X(cmd_status, BAD_RES_STATE, MLX5_CMD_STAT_BAD_RES_STATE_ERR)            \
    X(cmd_status, BAD_INDEX, MLX5_CMD_STAT_IX_ERR)                           \
    X(cmd_status, NO_RESOURCES, MLX5_CMD_STAT_NO_RES_ERR)                    \
    X(cmd_status, BAD_QP_STATE, MLX5_CMD_STAT_BAD_QP_STATE_ERR)              \
    X(cmd_status, BAD_PKT, MLX5_CMD_STAT_BAD_PKT_ERR)                        \
    X(cmd_status, BAD_SIZE_OUTS_CQES, MLX5_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR)  \
    X(cmd_status, BAD_INPUT_LEN, MLX5_CMD_STAT_BAD_INP_LEN_ERR)              \
    X(cmd_status, BAD_OUTPUT_LEN, MLX5_CMD_STAT_BAD_OUTP_LEN_ERR)

using table_entry = std::pair<std::string_view, std::string_view>;

const std::map<table_entry, std::string_view> kLinuxNames = {
#define CXV_RENAME(table, ours, theirs) {{#table, #ours}, #theirs},
    CXV_LINUX_NAMES(CXV_RENAME)
#undef CXV_RENAME
};

// Entries of ours that Linux 6.1's headers do not name, each with the reason.
const std::map<table_entry, std::string_view> kOursOnly = {
    {{"wqe_opcode", "LOCAL_INVAL"},
     "Linux posts local invalidation as a UMR WQE and has no name for 0x1b; "
     "mlx5dv_conformance_test checks it against rdma-core"},
    {{"cqe_opcode", "NO_PACKET"},
     "Linux's cq.h stops at RESIZE_CQ; mlx5dv_conformance_test checks it against "
     "rdma-core"},
};

// --- scalars --------------------------------------------------------------------------

struct scalar {
    std::string_view ours;  // what is compared, as hw/ spells it
    std::uint64_t value;
    std::string_view linux_name;
};

constexpr std::uint64_t fence(hw::fence_mode m) { return hw::fm_ce_se(m, false, false); }

const scalar kScalars[] = {
    // opcodes.h
    {"cmd_queue_entry_type_pcie", hw::cmd_queue_entry_type_pcie, "MLX5_PCI_CMD_XPORT"},
    // wqe.h
    {"send_wqe_bb", hw::send_wqe_bb, "MLX5_SEND_WQE_BB"},
    {"1 << send_wqe_shift", std::uint64_t{1} << hw::send_wqe_shift, "MLX5_SEND_WQE_BB"},
    {"wqe_octoword", hw::wqe_octoword, "MLX5_SEND_WQE_DS"},
    {"inline_seg_flag", hw::inline_seg_flag, "MLX5_INLINE_SEG"},
    {"invalid_lkey", hw::invalid_lkey, "MLX5_INVALID_LKEY"},
    {"extended_ud_av", hw::extended_ud_av, "MLX5_EXTENDED_UD_AV"},
    {"ctrl_cq_update", hw::ctrl_cq_update, "MLX5_WQE_CTRL_CQ_UPDATE"},
    {"ctrl_solicited", hw::ctrl_solicited, "MLX5_WQE_CTRL_SOLICITED"},
    // The UMR control segment: Linux names the state checks by what fails them.
    {"umr_inline", hw::umr_inline, "MLX5_UMR_INLINE"},
    {"umr_translation_offset_en", hw::umr_translation_offset_en, "MLX5_UMR_TRANSLATION_OFFSET_EN"},
    {"umr_check_key_free", hw::umr_check_key_free, "MLX5_UMR_CHECK_NOT_FREE"},
    {"umr_check_key_not_free", hw::umr_check_key_not_free, "MLX5_UMR_CHECK_FREE"},
    {"umr_mask_len", hw::umr_mask_len, "MLX5_MKEY_MASK_LEN"},
    {"umr_mask_page_size", hw::umr_mask_page_size, "MLX5_MKEY_MASK_PAGE_SIZE"},
    {"umr_mask_start_addr", hw::umr_mask_start_addr, "MLX5_MKEY_MASK_START_ADDR"},
    {"umr_mask_pd", hw::umr_mask_pd, "MLX5_MKEY_MASK_PD"},
    {"umr_mask_en_rinval", hw::umr_mask_en_rinval, "MLX5_MKEY_MASK_EN_RINVAL"},
    {"umr_mask_en_sigerr", hw::umr_mask_en_sigerr, "MLX5_MKEY_MASK_EN_SIGERR"},
    {"umr_mask_bsf_en", hw::umr_mask_bsf_en, "MLX5_MKEY_MASK_BSF_EN"},
    {"umr_mask_key", hw::umr_mask_key, "MLX5_MKEY_MASK_KEY"},
    {"umr_mask_qpn", hw::umr_mask_qpn, "MLX5_MKEY_MASK_QPN"},
    {"umr_mask_lr", hw::umr_mask_lr, "MLX5_MKEY_MASK_LR"},
    {"umr_mask_lw", hw::umr_mask_lw, "MLX5_MKEY_MASK_LW"},
    {"umr_mask_rr", hw::umr_mask_rr, "MLX5_MKEY_MASK_RR"},
    {"umr_mask_rw", hw::umr_mask_rw, "MLX5_MKEY_MASK_RW"},
    {"umr_mask_a", hw::umr_mask_a, "MLX5_MKEY_MASK_A"},
    {"umr_mask_small_fence", hw::umr_mask_small_fence, "MLX5_MKEY_MASK_SMALL_FENCE"},
    {"umr_mask_relaxed_ordering_write", hw::umr_mask_relaxed_ordering_write,
     "MLX5_MKEY_MASK_RELAXED_ORDERING_WRITE"},
    {"umr_mask_free", hw::umr_mask_free, "MLX5_MKEY_MASK_FREE"},
    {"umr_mask_relaxed_ordering_read", hw::umr_mask_relaxed_ordering_read, "MLX5_MKEY_MASK_RELAXED_ORDERING_READ"},
    // Linux's fence modes are already shifted into the fm_ce_se byte.
    {"fm_ce_se(fence_mode::none)", fence(hw::fence_mode::none), "MLX5_FENCE_MODE_NONE"},
    {"fm_ce_se(fence_mode::initiator_small)", fence(hw::fence_mode::initiator_small),
     "MLX5_FENCE_MODE_INITIATOR_SMALL"},
    {"fm_ce_se(fence_mode::fence)", fence(hw::fence_mode::fence), "MLX5_FENCE_MODE_FENCE"},
    {"fm_ce_se(fence_mode::strong_ordering)", fence(hw::fence_mode::strong_ordering),
     "MLX5_FENCE_MODE_STRONG_ORDERING"},
    {"fm_ce_se(fence_mode::small_and_fence)", fence(hw::fence_mode::small_and_fence),
     "MLX5_FENCE_MODE_SMALL_AND_FENCE"},
    // cqe.h
    {"cqe_owner_mask", hw::cqe_owner_mask, "MLX5_CQE_OWNER_MASK"},
    // doorbell.h
    {"uar_page_size", hw::uar_page_size, "MLX5_ADAPTER_PAGE_SIZE"},
    {"uar_page_shift", hw::uar_page_shift, "MLX5_ADAPTER_PAGE_SHIFT"},
    {"uar_cq_doorbell", hw::uar_cq_doorbell, "MLX5_CQ_DOORBELL"},
    {"uar_bf_offset", hw::uar_bf_offset, "MLX5_BF_OFFSET"},
    {"rcv_dbr", hw::rcv_dbr, "MLX5_RCV_DBR"},
    {"snd_dbr", hw::snd_dbr, "MLX5_SND_DBR"},
    // Linux indexes the record in 32-bit words.
    {"offsetof(wq_doorbell_record, rcv_counter) / 4",
     offsetof(hw::wq_doorbell_record, rcv_counter) / 4, "MLX5_RCV_DBR"},
    {"offsetof(wq_doorbell_record, snd_counter) / 4",
     offsetof(hw::wq_doorbell_record, snd_counter) / 4, "MLX5_SND_DBR"},
    {"cq_db_req_not", hw::cq_db_req_not, "MLX5_CQ_DB_REQ_NOT"},
    {"cq_db_req_not_sol", hw::cq_db_req_not_sol, "MLX5_CQ_DB_REQ_NOT_SOL"},
    // port_speeds.h
    {"ptys_proto_ib", hw::ptys_proto_ib, "MLX5_PTYS_IB"},
    {"ptys_proto_en", hw::ptys_proto_en, "MLX5_PTYS_EN"},
};

}  // namespace

TEST_CASE("hw/ enum tables match Linux's") {
    const auto& lx = linux_constants();
    std::set<std::string_view> compared_linux;  // Linux names some entry of ours used
    std::set<table_entry> used_renames, used_ours_only;
    std::size_t tables = 0, compared = 0;

    for (const auto& t : our_tables()) {
        ++tables;
        for (const auto& e : t.entries) {
            const table_entry key{t.name, e.name};
            std::string linux_name = std::string(t.linux_prefix) + std::string(e.name);
            if (auto r = kLinuxNames.find(key); r != kLinuxNames.end()) {
                linux_name = std::string(r->second);
                used_renames.insert(key);
            }
            const auto it = lx.find(linux_name);
            const bool ours_only = kOursOnly.count(key) == 1;
            if (ours_only) used_ours_only.insert(key);
            if (it == lx.end()) {
                CHECK_MESSAGE(ours_only,
                              fmt::format("{}::{}: Linux has no {} (a typo in hw/, a name to "
                                          "map in kLinuxNames, or one for kOursOnly)",
                                          t.name, e.name, linux_name));
                continue;
            }
            CHECK_MESSAGE(!ours_only, fmt::format("{}::{} is in kOursOnly but Linux has {}",
                                                  t.name, e.name, linux_name));
            ++compared;
            compared_linux.insert(it->first);
            CHECK_MESSAGE(e.value == it->second,
                          fmt::format("{}::{} = 0x{:x}, Linux {} = 0x{:x}", t.name, e.name,
                                      e.value, linux_name, it->second));
        }
    }
    for (const auto& s : kScalars) compared_linux.insert(s.linux_name);

    // Stale exceptions are errors too: each must still describe an entry of ours.
    for (const auto& [key, theirs] : kLinuxNames) {
        CHECK_MESSAGE(used_renames.count(key) == 1,
                      fmt::format("kLinuxNames: {}::{} is not an entry of ours", key.first,
                                  key.second));
    }
    for (const auto& [key, why] : kOursOnly) {
        CHECK_MESSAGE(used_ours_only.count(key) == 1,
                      fmt::format("kOursOnly: {}::{} is not an entry of ours", key.first,
                                  key.second));
    }

    fmt::print("linux constants: {} names copied from Linux 6.1 include/linux/mlx5\n",
               lx.size());
    fmt::print("linux constants: {} tables, {} entries compared with Linux 6.1\n", tables,
               compared);
    fmt::print("linux constants: {} entries Linux does not name:\n", kOursOnly.size());
    for (const auto& [key, why] : kOursOnly) {
        fmt::print("  {}::{}: {}\n", key.first, key.second, why);
    }
    // For information: values Linux names under a table's prefix that hw/ lacks.
    for (const auto& t : our_tables()) {
        std::string missing;
        for (const auto& [name, value] : lx) {
            if (name.starts_with(t.linux_prefix) && compared_linux.count(name) == 0) {
                missing += fmt::format(" {}=0x{:x}", name.substr(t.linux_prefix.size()), value);
            }
        }
        if (!missing.empty()) {
            fmt::print("linux constants: Linux only, {} ({}*):{}\n", t.name, t.linux_prefix,
                       missing);
        }
    }
    CHECK(tables > 0);
    CHECK(compared > 0);
}

TEST_CASE("hw/ scalar constants match Linux's") {
    const auto& lx = linux_constants();
    std::size_t compared = 0;
    for (const auto& s : kScalars) {
        const auto it = lx.find(s.linux_name);
        if (it == lx.end()) {
            FAIL_CHECK(fmt::format("{}: the generated header has no {} (add an anchor in "
                                   "tests/hw/BUILD)",
                                   s.ours, s.linux_name));
            continue;
        }
        ++compared;
        CHECK_MESSAGE(s.value == it->second,
                      fmt::format("{} = 0x{:x}, Linux {} = 0x{:x}", s.ours, s.value,
                                  s.linux_name, it->second));
    }
    fmt::print("linux constants: {} scalar constants compared with Linux 6.1\n", compared);
    CHECK(compared == std::size(kScalars));
}

// The values of command fields (hw/cmd_values.h) and of the initialization segment
// (hw/init_seg.h) against the enumerators Linux 6.1 gives them in mlx5_ifc.h and device.h,
// and the IBTA port states against rdma-core's enum ibv_port_state. Compared by C++ name,
// so a rename on either side fails the build rather than the test.
//
// Checked by hand instead, because Linux keeps them where this test cannot reach: the
// QUERY_HCA_CAP max/current bit (device.h's enum mlx5_cap_mode, HCA_CAP_OPMOD_GET_MAX 0
// and HCA_CAP_OPMOD_GET_CUR 1, whose names lack the MLX5_ prefix the copying program
// looks for) and the nic_interface states (MLX5_NIC_IFC_FULL 0, _DISABLED 1,
// _NO_DRAM_NIC 2, _SW_RESET 7 in drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.h).
TEST_CASE("hw/ command field values match Linux's mlx5_ifc.h and device.h") {
    struct same {
        std::string_view ours;
        std::uint64_t value;
        std::string_view theirs;
        std::uint64_t linux_value;
    };
#define CXV_SAME(ours, theirs) \
    same { #ours, static_cast<std::uint64_t>(ours), #theirs, static_cast<std::uint64_t>(theirs) }
    const same values[] = {
        CXV_SAME(hw::query_pages_op_mod::BOOT_PAGES, MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES),
        CXV_SAME(hw::query_pages_op_mod::INIT_PAGES, MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES),
        CXV_SAME(hw::query_pages_op_mod::REGULAR_PAGES, MLX5_QUERY_PAGES_IN_OP_MOD_REGULAR_PAGES),
        CXV_SAME(hw::manage_pages_op_mod::ALLOCATION_FAIL, MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_FAIL),
        CXV_SAME(hw::manage_pages_op_mod::ALLOCATION_SUCCESS, MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS),
        CXV_SAME(hw::manage_pages_op_mod::HCA_RETURN_PAGES, MLX5_MANAGE_PAGES_IN_OP_MOD_HCA_RETURN_PAGES),
        CXV_SAME(hw::hca_cap_type::GENERAL, MLX5_CAP_GENERAL),
        CXV_SAME(hw::hca_cap_type::ETHERNET_OFFLOADS, MLX5_CAP_ETHERNET_OFFLOADS),
        CXV_SAME(hw::hca_cap_type::ATOMIC, MLX5_CAP_ATOMIC),
        CXV_SAME(hw::hca_cap_type::FLOW_TABLE, MLX5_CAP_FLOW_TABLE),
        CXV_SAME(hw::hca_cap_type::ROCE, MLX5_CAP_ROCE),
        CXV_SAME(hw::hca_cap_type::DEV_EVENT, MLX5_CAP_DEV_EVENT),
        CXV_SAME(hw::teardown_hca_profile::GRACEFUL_CLOSE, MLX5_TEARDOWN_HCA_IN_PROFILE_GRACEFUL_CLOSE),
        CXV_SAME(hw::teardown_hca_profile::FORCE_CLOSE, MLX5_TEARDOWN_HCA_IN_PROFILE_FORCE_CLOSE),
        CXV_SAME(hw::teardown_hca_profile::PREPARE_FAST_TEARDOWN,
                 MLX5_TEARDOWN_HCA_IN_PROFILE_PREPARE_FAST_TEARDOWN),
        CXV_SAME(hw::teardown_hca_state::SUCCESS, MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_SUCCESS),
        CXV_SAME(hw::teardown_hca_state::FAIL, MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_FAIL),
        CXV_SAME(hw::vport_state_op_mod::VNIC_VPORT, MLX5_VPORT_STATE_OP_MOD_VNIC_VPORT),
        CXV_SAME(hw::vport_state_op_mod::ESW_VPORT, MLX5_VPORT_STATE_OP_MOD_ESW_VPORT),
        CXV_SAME(hw::vport_state_op_mod::UPLINK, MLX5_VPORT_STATE_OP_MOD_UPLINK),
        CXV_SAME(hw::vport_state::DOWN, MLX5_QUERY_VPORT_STATE_OUT_STATE_DOWN),
        CXV_SAME(hw::vport_state::UP, MLX5_QUERY_VPORT_STATE_OUT_STATE_UP),
        CXV_SAME(hw::vport_admin_state::DOWN, MLX5_VPORT_ADMIN_STATE_DOWN),
        CXV_SAME(hw::vport_admin_state::UP, MLX5_VPORT_ADMIN_STATE_UP),
        CXV_SAME(hw::vport_admin_state::AUTO, MLX5_VPORT_ADMIN_STATE_AUTO),
        CXV_SAME(hw::port_type::IB, MLX5_CMD_HCA_CAP_PORT_TYPE_IB),
        CXV_SAME(hw::port_type::ETHERNET, MLX5_CMD_HCA_CAP_PORT_TYPE_ETHERNET),
        CXV_SAME(hw::nic_interface_shift, MLX5_NIC_IFC_OFFSET),
        CXV_SAME(hw::roce_version::V1, MLX5_ROCE_VERSION_1),
        CXV_SAME(hw::roce_version::V2, MLX5_ROCE_VERSION_2),
        CXV_SAME(hw::roce_l3_type::IPV4, MLX5_ROCE_L3_TYPE_IPV4),
        CXV_SAME(hw::roce_l3_type::IPV6, MLX5_ROCE_L3_TYPE_IPV6),
        CXV_SAME(hw::ifc::wq_state::RST, MLX5_SQC_STATE_RST),
        CXV_SAME(hw::ifc::wq_state::RDY, MLX5_SQC_STATE_RDY),
        CXV_SAME(hw::ifc::wq_state::ERR, MLX5_SQC_STATE_ERR),
        CXV_SAME(hw::ifc::wq_state::RST, MLX5_RQC_STATE_RST),
        CXV_SAME(hw::ifc::wq_state::RDY, MLX5_RQC_STATE_RDY),
        CXV_SAME(hw::ifc::wq_state::ERR, MLX5_RQC_STATE_ERR),
        CXV_SAME(hw::ifc::rqc_values::mem_rq_type_inline, MLX5_RQC_MEM_RQ_TYPE_MEMORY_RQ_INLINE),
        CXV_SAME(hw::ifc::rqc_values::mem_rq_type_rmp, MLX5_RQC_MEM_RQ_TYPE_MEMORY_RQ_RMP),
        CXV_SAME(hw::ifc::wq_values::type_linked_list, MLX5_WQ_TYPE_LINKED_LIST),
        CXV_SAME(hw::ifc::wq_values::type_cyclic, MLX5_WQ_TYPE_CYCLIC),
        CXV_SAME(hw::ifc::wq_values::type_linked_list_striding, MLX5_WQ_TYPE_LINKED_LIST_STRIDING_RQ),
        CXV_SAME(hw::ifc::wq_values::type_cyclic_striding, MLX5_WQ_TYPE_CYCLIC_STRIDING_RQ),
        CXV_SAME(hw::ifc::tir_disp_type::DIRECT, MLX5_TIRC_DISP_TYPE_DIRECT),
        CXV_SAME(hw::ifc::tir_disp_type::INDIRECT, MLX5_TIRC_DISP_TYPE_INDIRECT),
        CXV_SAME(hw::ifc::rx_hash_fn::NONE, MLX5_RX_HASH_FN_NONE),
        CXV_SAME(hw::ifc::rx_hash_fn::INVERTED_XOR8, MLX5_RX_HASH_FN_INVERTED_XOR8),
        CXV_SAME(hw::ifc::rx_hash_fn::TOEPLITZ, MLX5_RX_HASH_FN_TOEPLITZ),
        CXV_SAME(hw::ifc::rx_hash_field::SRC_IP, MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_SRC_IP),
        CXV_SAME(hw::ifc::rx_hash_field::DST_IP, MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_DST_IP),
        CXV_SAME(hw::ifc::rx_hash_field::L4_SPORT, MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_L4_SPORT),
        CXV_SAME(hw::ifc::rx_hash_field::L4_DPORT, MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_L4_DPORT),
        CXV_SAME(hw::ifc::rx_hash_field::IPSEC_SPI, MLX5_RX_HASH_FIELD_SELECT_SELECTED_FIELDS_IPSEC_SPI),
        CXV_SAME(hw::ifc::flow_table_miss_action::DEF, MLX5_FLOW_TABLE_MISS_ACTION_DEF),
        CXV_SAME(hw::ifc::flow_table_miss_action::FWD, MLX5_FLOW_TABLE_MISS_ACTION_FWD),
        CXV_SAME(hw::ifc::flow_table_miss_action::SWITCH_DOMAIN, MLX5_FLOW_TABLE_MISS_ACTION_SWITCH_DOMAIN),
        CXV_SAME(hw::ifc::flow_table_type::NIC_RX, MLX5_FLOW_TABLE_TYPE_NIC_RX),
        CXV_SAME(hw::ifc::flow_table_type::NIC_TX, MLX5_FLOW_TABLE_TYPE_NIC_TX),
        CXV_SAME(hw::ifc::flow_table_type::FDB, MLX5_FLOW_TABLE_TYPE_FDB),
        CXV_SAME(hw::ifc::flow_action::ALLOW, MLX5_FLOW_CONTEXT_ACTION_ALLOW),
        CXV_SAME(hw::ifc::flow_action::DROP, MLX5_FLOW_CONTEXT_ACTION_DROP),
        CXV_SAME(hw::ifc::flow_action::FWD_DEST, MLX5_FLOW_CONTEXT_ACTION_FWD_DEST),
        CXV_SAME(hw::ifc::flow_action::COUNT, MLX5_FLOW_CONTEXT_ACTION_COUNT),
        CXV_SAME(hw::ifc::flow_destination_type::VPORT, MLX5_IFC_FLOW_DESTINATION_TYPE_VPORT),
        CXV_SAME(hw::ifc::flow_destination_type::FLOW_TABLE, MLX5_IFC_FLOW_DESTINATION_TYPE_FLOW_TABLE),
        CXV_SAME(hw::ifc::flow_destination_type::TIR, MLX5_IFC_FLOW_DESTINATION_TYPE_TIR),
        CXV_SAME(hw::ifc::match_criteria::OUTER_HEADERS, MLX5_MATCH_OUTER_HEADERS),
        CXV_SAME(hw::ifc::match_criteria::MISC_PARAMETERS, MLX5_MATCH_MISC_PARAMETERS),
        CXV_SAME(hw::ifc::match_criteria::INNER_HEADERS, MLX5_MATCH_INNER_HEADERS),
        CXV_SAME(hw::ifc::match_criteria::MISC_PARAMETERS_2, MLX5_MATCH_MISC_PARAMETERS_2),
        CXV_SAME(hw::ifc::match_criteria::MISC_PARAMETERS_3, MLX5_MATCH_MISC_PARAMETERS_3),
        CXV_SAME(hw::ifc::match_criteria::MISC_PARAMETERS_4, MLX5_MATCH_MISC_PARAMETERS_4),
        CXV_SAME(hw::ifc::match_criteria::MISC_PARAMETERS_5, MLX5_MATCH_MISC_PARAMETERS_5),
        CXV_SAME(hw::ib_port_state::NOP, IBV_PORT_NOP),
        CXV_SAME(hw::ib_port_state::DOWN, IBV_PORT_DOWN),
        CXV_SAME(hw::ib_port_state::INIT, IBV_PORT_INIT),
        CXV_SAME(hw::ib_port_state::ARMED, IBV_PORT_ARMED),
        CXV_SAME(hw::ib_port_state::ACTIVE, IBV_PORT_ACTIVE),
    };
#undef CXV_SAME
    for (const auto& v : values) {
        CHECK_MESSAGE(v.value == v.linux_value,
                      fmt::format("{} = 0x{:x}, {} = 0x{:x}", v.ours, v.value, v.theirs, v.linux_value));
    }
    // The initialization segment's dwords at Linux's struct mlx5_init_seg offsets are
    // asserted in hw/init_seg.h; its health buffer is also where Linux puts it.
    CHECK(hw::init_seg_offset::health_buffer == 0x200);
    fmt::print("linux constants: {} command field values compared with Linux 6.1 / rdma-core\n",
               std::size(values));
}

// PTYS: our link mode tables (hw/port_speeds.h) against Linux's enum mlx5e_link_mode and
// mlx5e_ext_link_mode (bit numbers, by name, both ways: a mode Linux has that we lack
// fails too), and the IB widths against MLX5_PTYS_WIDTH_*.
TEST_CASE("PTYS link modes and widths match Linux's port.h") {
    const auto& lx = linux_constants();
    struct table {
        const char* what;
        std::span<const hw::eth_link_mode> modes;
        std::set<std::string> linux_names;  // Linux's enumerators of that enum
    };
    std::vector<table> tables = {{"eth_link_modes", hw::eth_link_modes, {}},
                                 {"ext_eth_link_modes", hw::ext_eth_link_modes, {}}};
    // Which Linux enum a name belongs to: the legacy enum's first and last are
    // MLX5E_1000BASE_CX_SGMII and MLX5E_50GBASE_KR2, the extended one's MLX5E_SGMII_100M
    // and MLX5E_400GAUI_4_400GBASE_CR4_KR4; the file keeps each enum's names together.
    const auto names = [&] {
        std::vector<std::string> v;
#define CXV_LINUX_NAME(n) v.emplace_back(#n);
        CXV_LINUX_MLX5_CONSTANTS(CXV_LINUX_NAME)
#undef CXV_LINUX_NAME
        return v;
    }();
    const auto span_of = [&](const std::string& first, const std::string& last) {
        std::set<std::string> out;
        const auto b = std::find(names.begin(), names.end(), first);
        const auto e = std::find(names.begin(), names.end(), last);
        REQUIRE(b != names.end());
        REQUIRE(e != names.end());
        for (auto it = b; it <= e; ++it) out.insert(*it);
        return out;
    };
    tables[0].linux_names = span_of("MLX5E_1000BASE_CX_SGMII", "MLX5E_50GBASE_KR2");
    tables[1].linux_names = span_of("MLX5E_SGMII_100M", "MLX5E_400GAUI_4_400GBASE_CR4_KR4");
    for (const auto& t : tables) {
        std::set<std::string> ours;
        for (const auto& m : t.modes) {
            const std::string name = "MLX5E_" + std::string(m.name);
            ours.insert(name);
            const auto it = lx.find(name);
            if (it == lx.end()) {
                FAIL_CHECK(fmt::format("{}: Linux has no {}", t.what, name));
                continue;
            }
            CHECK_MESSAGE(m.bit == it->second, fmt::format("{}: {} is bit {}, Linux's {}", t.what, name, m.bit, it->second));
            CHECK_MESSAGE(hw::ib_link_speed_named(m.ib_speed) != nullptr, m.name);
            CHECK_MESSAGE(hw::ib_link_width_named(m.ib_width) != nullptr, m.name);
            CHECK(m.mbps > 0);
            CHECK(m.lanes > 0);
        }
        for (const auto& n : t.linux_names) CHECK_MESSAGE(ours.count(n) == 1, t.what, " lacks Linux's ", n);
    }
    for (const auto& w : hw::ib_link_widths) {
        const auto it = lx.find("MLX5_PTYS_WIDTH_" + std::string(w.name));
        REQUIRE_MESSAGE(it != lx.end(), w.name);
        CHECK(w.bit == it->second);
        CHECK(w.lanes == std::stoul(std::string(w.name)));
    }
    // The lookups the driver uses.
    CHECK(hw::eth_link_mode_of(1u << 20, false)->name == "100GBASE_CR4");
    CHECK(hw::eth_link_mode_of(1u << 9, true)->name == "CAUI_4_100GBASE_CR4_KR4");
    CHECK(hw::eth_link_mode_of(1u << 17, false) == nullptr);  // no legacy mode 17
    CHECK(hw::ib_link_speed_of(1u << 5)->name == "EDR");
    CHECK(hw::ib_link_width_of(1u << 2)->lanes == 4);
    CHECK(hw::ib_link_width_of(0) == nullptr);
}
