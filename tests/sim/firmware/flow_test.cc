// NIC receive flow steering (sim/firmware/fw_flow.cc): flow tables, groups, entries, the
// root and flow counters, as Linux 6.1's fs_cmd.c sends them for mlx5e's tables (en_fs.c,
// lib/fs_ttc.c), their refusals, and the FLOW_TABLE capabilities an Ethernet port
// announces. Every input is written and every output read at the offsets of Linux's
// mlx5_ifc.h, never through hw/'s layouts, so that a layout mistake the model shares with
// hw/ shows here.
#include <vector>

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

// QUERY_HCA_CAP op_mod: type << 1 | HCA_CAP_OPMOD_GET_CUR (Linux's enum mlx5_cap_type).
constexpr std::uint16_t kCapGeneral = 0 << 1 | 1, kCapEthernetOffloads = 1 << 1 | 1, kCapFlowTable = 7 << 1 | 1;
// include/linux/mlx5/device.h: match_criteria_enable bits.
constexpr unsigned kOuter = 1 << 0, kMisc = 1 << 1;
constexpr unsigned kAllow = MLX5_FLOW_CONTEXT_ACTION_ALLOW, kDrop = MLX5_FLOW_CONTEXT_ACTION_DROP,
                   kFwd = MLX5_FLOW_CONTEXT_ACTION_FWD_DEST, kCount = MLX5_FLOW_CONTEXT_ACTION_COUNT;
constexpr unsigned kToVport = MLX5_IFC_FLOW_DESTINATION_TYPE_VPORT,
                   kToTable = MLX5_IFC_FLOW_DESTINATION_TYPE_FLOW_TABLE, kToTir = MLX5_IFC_FLOW_DESTINATION_TYPE_TIR;



// --- what an entry forwards to: an RQ behind a TIR ------------------------------------------

cmd_result create_rq(H& h, std::uint32_t cqn, std::uint32_t pd, const dma_buffer& buf) {
    // A cyclic RQ of 64 WQEs of 16 bytes in one page, the doorbell record at its end.
    auto in = linux_command(CXV_LINUX_BYTES(create_rq_in) + 8, cmd_opcode::CREATE_RQ);
    CXV_LINUX_SET(create_rq_in, in, ctx.cqn, cqn);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.wq_type, MLX5_WQ_TYPE_CYCLIC);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.pd, pd);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.dbr_addr, buf.iova() + 4096 - 64);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wq_stride, 4);
    CXV_LINUX_SET(create_rq_in, in, ctx.wq.log_wq_sz, 6);
    linux_put(in, CXV_LINUX_BYTES(create_rq_in) * 8, 64, buf.iova());
    return h.exec(in, CXV_LINUX_BYTES(create_rq_out));
}

// mlx5e_tir_builder_build_inline.
cmd_result create_tir(H& h, std::uint32_t td, std::uint32_t rqn) {
    auto in = linux_command(CXV_LINUX_BYTES(create_tir_in), cmd_opcode::CREATE_TIR);
    CXV_LINUX_SET(create_tir_in, in, ctx.transport_domain, td);
    CXV_LINUX_SET(create_tir_in, in, ctx.disp_type, MLX5_TIRC_DISP_TYPE_DIRECT);
    CXV_LINUX_SET(create_tir_in, in, ctx.rx_hash_fn, MLX5_RX_HASH_FN_NONE);
    CXV_LINUX_SET(create_tir_in, in, ctx.inline_rqn, rqn);
    return h.exec(in, CXV_LINUX_BYTES(create_tir_out));
}
cmd_result destroy_tir(H& h, std::uint32_t tirn) {
    auto in = linux_command(CXV_LINUX_BYTES(destroy_tir_in), cmd_opcode::DESTROY_TIR);
    CXV_LINUX_SET(destroy_tir_in, in, tirn, tirn);
    return h.exec(in, CXV_LINUX_BYTES(destroy_tir_out));
}

TEST_CASE("QUERY_HCA_CAP on an InfiniBand port: no Ethernet offloads, no NIC flow tables") {
    H h;
    REQUIRE(h.bring_up());
    const auto g = require_ok(query_cap(h, kCapGeneral));
    CHECK(CXV_LINUX_GET(query_hca_cap_out, g.out, capability.cmd_hca_cap.nic_flow_table) == 0);
    CHECK(CXV_LINUX_GET(query_hca_cap_out, g.out, capability.cmd_hca_cap.eth_net_offloads) == 0);
    check_status(query_cap(h, kCapEthernetOffloads), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_status(query_cap(h, kCapFlowTable), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
}

// --- flow tables, groups, entries (fs_cmd.c) ------------------------------------------------------

// mlx5_cmd_create_flow_table for a NIC RX table (FS_FT_NIC_RX 0), normal op_mod.
struct ft_spec {
    unsigned level = 0;
    unsigned log_size = 4;
    unsigned miss_action = MLX5_FLOW_TABLE_MISS_ACTION_DEF;
    std::uint32_t miss_id = 0;
    unsigned table_type = 0;
    unsigned other_vport = 0;
    unsigned reformat_en = 0, decap_en = 0, sw_owner = 0, termination_table = 0;
};
cmd_result create_ft(H& h, const ft_spec& s) {
    auto in = linux_command(CXV_LINUX_BYTES(create_flow_table_in), cmd_opcode::CREATE_FLOW_TABLE);
    CXV_LINUX_SET(create_flow_table_in, in, table_type, s.table_type);
    CXV_LINUX_SET(create_flow_table_in, in, other_vport, s.other_vport);
    CXV_LINUX_SET(create_flow_table_in, in, vport_number, s.other_vport);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.level, s.level);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.log_size, s.log_size);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.table_miss_action, s.miss_action);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.table_miss_id, s.miss_id);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.reformat_en, s.reformat_en);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.decap_en, s.decap_en);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.sw_owner, s.sw_owner);
    CXV_LINUX_SET(create_flow_table_in, in, flow_table_context.termination_table, s.termination_table);
    return h.exec(in, CXV_LINUX_BYTES(create_flow_table_out));
}
std::uint32_t table_of(const cmd_result& r) { return CXV_LINUX_GET(create_flow_table_out, r.out, table_id); }
// mlx5_cmd_modify_flow_table: a table's miss (fs_core's connect_prev_fts, when a table
// of a later priority comes between two).
cmd_result modify_ft_miss(H& h, std::uint32_t id, unsigned action, std::uint32_t miss_id, unsigned select = 1,
                          unsigned table_type = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(modify_flow_table_in), cmd_opcode::MODIFY_FLOW_TABLE);
    CXV_LINUX_SET(modify_flow_table_in, in, table_type, table_type);
    CXV_LINUX_SET(modify_flow_table_in, in, table_id, id);
    CXV_LINUX_SET(modify_flow_table_in, in, modify_field_select, select);
    CXV_LINUX_SET(modify_flow_table_in, in, flow_table_context.table_miss_action, action);
    CXV_LINUX_SET(modify_flow_table_in, in, flow_table_context.table_miss_id, miss_id);
    return h.exec(in, CXV_LINUX_BYTES(modify_flow_table_out));
}
cmd_result destroy_ft(H& h, std::uint32_t id) {
    auto in = linux_command(CXV_LINUX_BYTES(destroy_flow_table_in), cmd_opcode::DESTROY_FLOW_TABLE);
    CXV_LINUX_SET(destroy_flow_table_in, in, table_id, id);
    return h.exec(in, CXV_LINUX_BYTES(destroy_flow_table_out));
}

// A field of fte_match_param (criteria or value) at Linux's offset, with its value (the
// low `width` bits of `value`; criteria: all ones).
struct match_field {
    std::size_t off, width;
    std::uint64_t value;
};
#define MATCH(fld, v) \
    match_field { CXV_LINUX_OFF(fte_match_param, fld), CXV_LINUX_WIDTH(fte_match_param, fld), (v) }
#define ONES(fld) MATCH(fld, ~std::uint64_t{0})

struct fg_spec {
    std::uint32_t table = 0;
    std::uint32_t start = 0, end = 0;
    unsigned enable = kOuter;
    std::vector<match_field> criteria{};
    unsigned group_type = 0;
};
cmd_result create_fg(H& h, const fg_spec& s) {
    auto in = linux_command(CXV_LINUX_BYTES(create_flow_group_in), cmd_opcode::CREATE_FLOW_GROUP);
    CXV_LINUX_SET(create_flow_group_in, in, table_id, s.table);
    CXV_LINUX_SET(create_flow_group_in, in, group_type, s.group_type);
    CXV_LINUX_SET(create_flow_group_in, in, start_flow_index, s.start);
    CXV_LINUX_SET(create_flow_group_in, in, end_flow_index, s.end);
    CXV_LINUX_SET(create_flow_group_in, in, match_criteria_enable, s.enable);
    for (const auto& f : s.criteria)
        linux_put(in, CXV_LINUX_OFF(create_flow_group_in, match_criteria) + f.off, f.width, f.value);
    return h.exec(in, CXV_LINUX_BYTES(create_flow_group_out));
}
std::uint32_t group_of(const cmd_result& r) { return CXV_LINUX_GET(create_flow_group_out, r.out, group_id); }
cmd_result destroy_fg(H& h, std::uint32_t table, std::uint32_t group) {
    auto in = linux_command(CXV_LINUX_BYTES(destroy_flow_group_in), cmd_opcode::DESTROY_FLOW_GROUP);
    CXV_LINUX_SET(destroy_flow_group_in, in, table_id, table);
    CXV_LINUX_SET(destroy_flow_group_in, in, group_id, group);
    return h.exec(in, CXV_LINUX_BYTES(destroy_flow_group_out));
}

struct dest {
    unsigned type;
    std::uint32_t id;
};
// mlx5_cmd_set_fte: the flow context, then the destinations (dest_format_struct) and the
// counters (flow_counter_list), 8 bytes each.
struct fte_spec {
    std::uint32_t table = 0, index = 0, group = 0;
    unsigned action = 0;
    std::vector<match_field> match{};
    std::vector<dest> dests{};
    std::vector<std::uint32_t> counters{};
    int dest_list_size = -1, counter_list_size = -1;  // -1: the lists' lengths
    int entries = -1;                                 // 8-byte entries sent; -1: all
    std::uint16_t op_mod = 0;
    unsigned modify_enable_mask = 0;
    std::uint32_t flow_tag = 0;
};
cmd_result set_fte(H& h, const fte_spec& s) {
    const std::size_t all = s.dests.size() + s.counters.size();
    const std::size_t n = s.entries >= 0 ? static_cast<std::size_t>(s.entries) : all;
    auto in = linux_command(CXV_LINUX_BYTES(set_fte_in) + 8 * n, cmd_opcode::SET_FLOW_TABLE_ENTRY, s.op_mod);
    CXV_LINUX_SET(set_fte_in, in, modify_enable_mask, s.modify_enable_mask);
    CXV_LINUX_SET(set_fte_in, in, table_id, s.table);
    CXV_LINUX_SET(set_fte_in, in, flow_index, s.index);
    CXV_LINUX_SET(set_fte_in, in, flow_context.group_id, s.group);
    CXV_LINUX_SET(set_fte_in, in, flow_context.flow_tag, s.flow_tag);
    CXV_LINUX_SET(set_fte_in, in, flow_context.action, s.action);
    CXV_LINUX_SET(set_fte_in, in, flow_context.destination_list_size,
                  s.dest_list_size >= 0 ? static_cast<std::size_t>(s.dest_list_size) : s.dests.size());
    CXV_LINUX_SET(set_fte_in, in, flow_context.flow_counter_list_size,
                  s.counter_list_size >= 0 ? static_cast<std::size_t>(s.counter_list_size) : s.counters.size());
    for (const auto& f : s.match)
        linux_put(in, CXV_LINUX_OFF(set_fte_in, flow_context.match_value) + f.off, f.width, f.value);
    std::size_t bit = CXV_LINUX_BYTES(set_fte_in) * 8;
    for (std::size_t i = 0; i < all && i < n; ++i, bit += 64) {
        if (i < s.dests.size()) {
            linux_put(in, bit + CXV_LINUX_OFF(dest_format_struct, destination_type),
                      CXV_LINUX_WIDTH(dest_format_struct, destination_type), s.dests[i].type);
            linux_put(in, bit + CXV_LINUX_OFF(dest_format_struct, destination_id),
                      CXV_LINUX_WIDTH(dest_format_struct, destination_id), s.dests[i].id);
        } else {
            linux_put(in, bit + CXV_LINUX_OFF(flow_counter_list, flow_counter_id),
                      CXV_LINUX_WIDTH(flow_counter_list, flow_counter_id), s.counters[i - s.dests.size()]);
        }
    }
    return h.exec(in, CXV_LINUX_BYTES(set_fte_out));
}
cmd_result delete_fte(H& h, std::uint32_t table, std::uint32_t index) {
    auto in = linux_command(CXV_LINUX_BYTES(delete_fte_in), cmd_opcode::DELETE_FLOW_TABLE_ENTRY);
    CXV_LINUX_SET(delete_fte_in, in, table_id, table);
    CXV_LINUX_SET(delete_fte_in, in, flow_index, index);
    return h.exec(in, CXV_LINUX_BYTES(delete_fte_out));
}

// mlx5_cmd_update_root_ft on an Ethernet port: op_mod 1 disconnects (table_id 0).
cmd_result set_root(H& h, std::uint32_t table, std::uint16_t op_mod = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(set_flow_table_root_in), cmd_opcode::SET_FLOW_TABLE_ROOT, op_mod);
    CXV_LINUX_SET(set_flow_table_root_in, in, table_id, table);
    return h.exec(in, CXV_LINUX_BYTES(set_flow_table_root_out));
}

// --- flow counters (mlx5_cmd_fc_*) ----------------------------------------------------------------

cmd_result alloc_fc(H& h, unsigned bulk = 0) {
    auto in = linux_command(CXV_LINUX_BYTES(alloc_flow_counter_in), cmd_opcode::ALLOC_FLOW_COUNTER);
    CXV_LINUX_SET(alloc_flow_counter_in, in, flow_counter_bulk, bulk);
    return h.exec(in, CXV_LINUX_BYTES(alloc_flow_counter_out));
}
std::uint32_t fc_of(const cmd_result& r) { return CXV_LINUX_GET(alloc_flow_counter_out, r.out, flow_counter_id); }
cmd_result dealloc_fc(H& h, std::uint32_t id) {
    auto in = linux_command(CXV_LINUX_BYTES(dealloc_flow_counter_in), cmd_opcode::DEALLOC_FLOW_COUNTER);
    CXV_LINUX_SET(dealloc_flow_counter_in, in, flow_counter_id, id);
    return h.exec(in, CXV_LINUX_BYTES(dealloc_flow_counter_out));
}
// The output has room for one traffic_counter, as mlx5_cmd_fc_query means it to.
cmd_result query_fc(H& h, std::uint32_t id) {
    auto in = linux_command(CXV_LINUX_BYTES(query_flow_counter_in), cmd_opcode::QUERY_FLOW_COUNTER);
    CXV_LINUX_SET(query_flow_counter_in, in, flow_counter_id, id);
    return h.exec(in, CXV_LINUX_BYTES(query_flow_counter_out) + CXV_LINUX_BYTES(traffic_counter));
}

// --- the fixture ---------------------------------------------------------------------------------

// An Ethernet function brought up with a transport domain, an RQ and two TIRs on it, and a
// flow counter: what mlx5e's entries forward to and count into.
struct flow_env {
    H h{ethernet()};
    std::uint32_t td = 0, rqn = 0, tir = 0, tir2 = 0, counter = 0;

    flow_env() {
        REQUIRE(h.bring_up());
        const auto pd = alloc_pd(h);
        const auto cq = create_small_cq(h);
        const auto t =
            require_ok(h.exec(linux_command(CXV_LINUX_BYTES(alloc_transport_domain_in), cmd_opcode::ALLOC_TRANSPORT_DOMAIN),
                      CXV_LINUX_BYTES(alloc_transport_domain_out)));
        td = static_cast<std::uint32_t>(CXV_LINUX_GET(alloc_transport_domain_out, t.out, transport_domain));
        rqn =
            static_cast<std::uint32_t>(CXV_LINUX_GET(create_rq_out, require_ok(create_rq(h, cq, pd, h.alloc(4096))).out, rqn));
        tir = new_tir();
        tir2 = new_tir();
        counter = new_counter();
    }
    std::uint32_t new_tir() { return CXV_LINUX_GET(create_tir_out, require_ok(create_tir(h, td, rqn)).out, tirn); }
    std::uint32_t new_counter() { return fc_of(require_ok(alloc_fc(h))); }
    std::uint32_t new_table(const ft_spec& s = {}) { return table_of(require_ok(create_ft(h, s))); }
    std::uint32_t new_group(const fg_spec& s) { return group_of(require_ok(create_fg(h, s))); }
};

// A table shaped as lib/fs_ttc.c's traffic-type table: a group on ethertype and IP
// protocol (indexes 0-3), one on ethertype alone (4-5), and a catch-all (6).
struct ttc_env : flow_env {
    std::uint32_t table = 0, l4 = 0, l3 = 0, any = 0;
    ttc_env() {
        table = new_table();
        l4 = new_group({.table = table,
                        .start = 0,
                        .end = 3,
                        .criteria = {ONES(outer_headers.ethertype), ONES(outer_headers.ip_protocol)}});
        l3 = new_group({.table = table, .start = 4, .end = 5, .criteria = {ONES(outer_headers.ethertype)}});
        any = new_group({.table = table, .start = 6, .end = 6, .enable = 0});
    }
    // IPv4/TCP to `to` (and counted into `counters`) at `index` of the L4 group.
    fte_spec tcp4(std::uint32_t index, std::vector<dest> to, std::vector<std::uint32_t> counters = {}) const {
        return {.table = table,
                .index = index,
                .group = l4,
                .action = kFwd | (counters.empty() ? 0u : kCount),
                .match = {MATCH(outer_headers.ethertype, 0x0800), MATCH(outer_headers.ip_protocol, 6)},
                .dests = std::move(to),
                .counters = std::move(counters)};
    }
};

}  // namespace

// --- capabilities ------------------------------------------------------------------------

TEST_CASE("QUERY_HCA_CAP FLOW_TABLE on an Ethernet port: NIC receive tables with counters; no NIC transmit tables") {
    H h(ethernet());
    REQUIRE(h.bring_up());
    const auto r = require_ok(query_cap(h, kCapFlowTable));
#define RX(fld) \
    CXV_LINUX_GET(query_hca_cap_out, r.out, capability.flow_table_nic_cap.flow_table_properties_nic_receive.fld)
    CHECK(RX(ft_support) == 1);
    CHECK(RX(flow_counter) == 1);
    CHECK(RX(flow_modify_en) == 1);
    CHECK(RX(modify_root) == 1);
    CHECK(RX(identified_miss_table_mode) == 1);
    CHECK(RX(log_max_ft_size) == 16);
    CHECK(RX(max_ft_level) == 63);
    CHECK(RX(log_max_ft_num) == 10);
    CHECK(RX(log_max_flow_counter) == 16);
    CHECK(RX(log_max_destination) == 6);
    CHECK(RX(log_max_flow) == 16);
    CHECK(RX(ft_field_support.outer_dmac) == 1);
    CHECK(RX(ft_field_support.outer_smac) == 1);
    CHECK(RX(ft_field_support.outer_ether_type) == 1);
    CHECK(RX(ft_field_support.outer_ip_version) == 1);
    CHECK(RX(ft_field_support.outer_first_vid) == 1);
    CHECK(RX(ft_field_support.outer_sip) == 1);
    CHECK(RX(ft_field_support.outer_dip) == 1);
    CHECK(RX(ft_field_support.outer_ip_protocol) == 1);
    CHECK(RX(ft_field_support.outer_udp_sport) == 1);
    CHECK(RX(ft_field_support.outer_udp_dport) == 1);
    CHECK(RX(ft_field_support.outer_tcp_sport) == 1);
    CHECK(RX(ft_field_support.outer_tcp_dport) == 1);
#undef RX
    CHECK(CXV_LINUX_GET(query_hca_cap_out, r.out,
                        capability.flow_table_nic_cap.flow_table_properties_nic_transmit.ft_support) == 0);
}

// --- flow tables -----------------------------------------------------------------------------

TEST_CASE_FIXTURE(
    flow_env,
    "CREATE_FLOW_TABLE: NIC RX tables as fs_core chains them; type, vport, size, level, miss and flags are checked") {
    // fs_core: a table of a later priority first, then one that misses to it.
    const auto next = new_table({.level = 2, .log_size = 16});
    const auto first = new_table({.level = 1, .miss_action = MLX5_FLOW_TABLE_MISS_ACTION_FWD, .miss_id = next});
    CHECK(next != first);
    CHECK(new_table({.level = 63}) != 0);

    bad_parameter(create_ft(h, {.table_type = 1}));  // NIC TX
    bad_parameter(create_ft(h, {.table_type = 4}));  // FDB
    bad_parameter(create_ft(h, {.other_vport = 1}));
    check_status(create_ft(h, {.log_size = 17}), cmd_status::BAD_PARAM, cmd_syndrome::LOG_SIZE_TOO_BIG);
    bad_parameter(create_ft(h, {.level = 64}));
    // A miss forwards to a live table of a higher level only.
    const auto fwd = [](unsigned level, std::uint32_t to) {
        return ft_spec{.level = level, .miss_action = MLX5_FLOW_TABLE_MISS_ACTION_FWD, .miss_id = to};
    };
    bad_parameter(create_ft(h, fwd(0, next + 0x100)));
    bad_parameter(create_ft(h, fwd(2, next)));
    bad_parameter(create_ft(h, fwd(3, next)));
    CHECK(create_ft(h, {.miss_action = MLX5_FLOW_TABLE_MISS_ACTION_SWITCH_DOMAIN}).status == cmd_status::BAD_PARAM);
    CHECK(create_ft(h, {.reformat_en = 1}).status == cmd_status::BAD_PARAM);
    CHECK(create_ft(h, {.decap_en = 1}).status == cmd_status::BAD_PARAM);
    CHECK(create_ft(h, {.sw_owner = 1}).status == cmd_status::BAD_PARAM);
    CHECK(create_ft(h, {.termination_table = 1}).status == cmd_status::BAD_PARAM);
}

TEST_CASE_FIXTURE(flow_env,
                  "MODIFY_FLOW_TABLE: a table's miss moved on to a table of a higher level, or back to the default; "
                  "the targets are held as CREATE's are") {
    constexpr unsigned kFwdMiss = MLX5_FLOW_TABLE_MISS_ACTION_FWD, kDefMiss = MLX5_FLOW_TABLE_MISS_ACTION_DEF;
    const auto last = new_table({.level = 3});
    const auto first = new_table({.level = 1, .miss_action = kFwdMiss, .miss_id = last});
    // A table of a priority between them: first's miss goes to it, and it misses to last.
    const auto middle = new_table({.level = 2, .miss_action = kFwdMiss, .miss_id = last});
    REQUIRE(modify_ft_miss(h, first, kFwdMiss, middle).status == cmd_status::OK);
    in_use(destroy_ft(h, middle));  // first misses to it now
    in_use(destroy_ft(h, last));    // middle does
    // Checked as CREATE_FLOW_TABLE checks a miss: a live table of a higher level.
    bad_parameter(modify_ft_miss(h, middle, kFwdMiss, first));       // a lower level
    bad_parameter(modify_ft_miss(h, middle, kFwdMiss, middle));      // itself
    bad_parameter(modify_ft_miss(h, first, kFwdMiss, last + 0x100));  // none
    bad_parameter(modify_ft_miss(h, first, MLX5_FLOW_TABLE_MISS_ACTION_SWITCH_DOMAIN, 0));
    bad_parameter(modify_ft_miss(h, first, kFwdMiss, middle, 1, 1));  // a NIC TX table
    bad_parameter(modify_ft_miss(h, first, kFwdMiss, middle, 1u << 15));  // a LAG's next table: no LAG
    check_status(modify_ft_miss(h, 0xabcdef, kDefMiss, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    // Nothing selected: nothing changes (first still misses to middle).
    REQUIRE(modify_ft_miss(h, first, kDefMiss, 0, 0).status == cmd_status::OK);
    in_use(destroy_ft(h, middle));
    // Back to the default: middle is free once first no longer misses to it.
    REQUIRE(modify_ft_miss(h, first, kDefMiss, 0).status == cmd_status::OK);
    REQUIRE(destroy_ft(h, middle).status == cmd_status::OK);
    CHECK(destroy_ft(h, last).status == cmd_status::OK);
    CHECK(destroy_ft(h, first).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(
    flow_env, "DESTROY_FLOW_TABLE: unknown is refused; busy with groups, as a miss target, as an entry's destination") {
    check_status(destroy_ft(h, 0xabcdef), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    const auto next = new_table({.level = 2});
    const auto first = new_table({.level = 1, .miss_action = MLX5_FLOW_TABLE_MISS_ACTION_FWD, .miss_id = next});
    in_use(destroy_ft(h, next));
    REQUIRE(destroy_ft(h, first).status == cmd_status::OK);
    check_status(destroy_ft(h, first), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);

    // An entry of a level-0 table forwards to `next` (a table of a higher level).
    const auto table = new_table();
    const auto group = new_group({.table = table, .start = 0, .end = 0, .enable = 0});
    in_use(destroy_ft(h, table));
    REQUIRE(set_fte(h, {.table = table, .group = group, .action = kFwd, .dests = {{kToTable, next}}}).status ==
            cmd_status::OK);
    in_use(destroy_ft(h, next));
    REQUIRE(delete_fte(h, table, 0).status == cmd_status::OK);
    CHECK(destroy_ft(h, next).status == cmd_status::OK);
    REQUIRE(destroy_fg(h, table, group).status == cmd_status::OK);
    CHECK(destroy_ft(h, table).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(flow_env,
                  "SET_FLOW_TABLE_ROOT: a live NIC RX table becomes the root; op_mod 1 disconnects it; the root itself "
                  "may be destroyed, leaving none (Linux's mlx5_core does at every unload)") {
    const auto a = new_table({.level = 1}), b = new_table();
    bad_parameter(set_root(h, 0x7777));
    REQUIRE(set_root(h, a).status == cmd_status::OK);
    // fs_core moves the root to a table of a lower level: the old root is free.
    REQUIRE(set_root(h, b).status == cmd_status::OK);
    CHECK(destroy_ft(h, a).status == cmd_status::OK);
    REQUIRE(set_root(h, 0, 1).status == cmd_status::OK);
    bad_parameter(set_root(h, a));  // gone
    // fs_core's update_root_ft_destroy: the last table, still the root, destroyed as it is
    // (no SET_FLOW_TABLE_ROOT first). The function then has no root.
    REQUIRE(set_root(h, b).status == cmd_status::OK);
    CHECK(destroy_ft(h, b).status == cmd_status::OK);
    bad_parameter(set_root(h, b));
    // A root that another table misses to stays, as any miss target does.
    const auto target = new_table({.level = 2});
    const auto before = new_table({.level = 1, .miss_action = MLX5_FLOW_TABLE_MISS_ACTION_FWD, .miss_id = target});
    REQUIRE(set_root(h, target).status == cmd_status::OK);
    in_use(destroy_ft(h, target));
    REQUIRE(destroy_ft(h, before).status == cmd_status::OK);
    CHECK(destroy_ft(h, target).status == cmd_status::OK);
}

// --- flow groups ----------------------------------------------------------------------------------

TEST_CASE_FIXTURE(
    flow_env, "CREATE_FLOW_GROUP: mlx5e's L2 and catch-all groups; table, range, type and match criteria are checked") {
    const auto table = new_table();  // 16 entries
    // en_fs.c's L2 table: full DMAC, then a catch-all with no criteria.
    const auto dmac = new_group({.table = table,
                                 .start = 0,
                                 .end = 7,
                                 .criteria = {ONES(outer_headers.dmac_47_16), ONES(outer_headers.dmac_15_0)}});
    const auto any = new_group({.table = table, .start = 8, .end = 8, .enable = 0});
    CHECK(dmac != any);
    // Another set enabled with no criteria in it is accepted; so is the misc parameters'
    // outer IPv6 flow label (mlx5_ib's ibv_flow_spec_ipv6.flow_label).
    CHECK(create_fg(h, {.table = table,
                        .start = 9,
                        .end = 9,
                        .enable = kOuter | kMisc,
                        .criteria = {ONES(outer_headers.ethertype)}})
              .status == cmd_status::OK);
    const auto label = new_group({.table = table,
                                  .start = 10,
                                  .end = 10,
                                  .enable = kOuter | kMisc,
                                  .criteria = {ONES(outer_headers.ip_version), ONES(misc_parameters.outer_ipv6_flow_label)}});
    CHECK(label != any);
    REQUIRE(destroy_fg(h, table, label).status == cmd_status::OK);
    // A flow label without the misc set's enable bit; misc fields the model does not steer on.
    bad_parameter(create_fg(
        h, {.table = table, .start = 10, .end = 10, .criteria = {ONES(misc_parameters.outer_ipv6_flow_label)}}));
    bad_parameter(create_fg(h, {.table = table,
                                .start = 10,
                                .end = 10,
                                .enable = kOuter | kMisc,
                                .criteria = {ONES(misc_parameters.inner_ipv6_flow_label)}}));

    check_status(create_fg(h, {.table = table + 0x100, .start = 10, .end = 10}), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::UNKNOWN_RESOURCE);
    bad_parameter(create_fg(h, {.table = table, .start = 11, .end = 10}));
    bad_parameter(create_fg(h, {.table = table, .start = 10, .end = 16}));
    bad_parameter(create_fg(h, {.table = table, .start = 7, .end = 10}));  // overlaps the DMAC group
    bad_parameter(create_fg(h, {.table = table, .start = 8, .end = 8}));   // the catch-all's index
    CHECK(create_fg(h, {.table = table, .start = 10, .end = 10, .group_type = 1}).status == cmd_status::BAD_PARAM);
    bad_parameter(create_fg(h, {.table = table,
                                .start = 10,
                                .end = 10,
                                .enable = kOuter | kMisc,
                                .criteria = {ONES(misc_parameters.outer_second_vid)}}));
    bad_parameter(create_fg(
        h, {.table = table, .start = 10, .end = 10, .enable = 0, .criteria = {ONES(outer_headers.ethertype)}}));
    // The refused groups took no index: 10-15 are free.
    CHECK(create_fg(h, {.table = table,
                        .start = 10,
                        .end = 15,
                        .criteria = {ONES(outer_headers.ethertype), ONES(outer_headers.ip_protocol),
                                     ONES(outer_headers.tcp_dport)}})
              .status == cmd_status::OK);
}

// --- entries -------------------------------------------------------------------------------------

TEST_CASE_FIXTURE(
    ttc_env,
    "SET_FLOW_TABLE_ENTRY: TTC entries forward to TIRs and count; what they name is held until they are deleted") {
    // IPv4/TCP to the TIR, counted; IPv6 to the TIR; anything else dropped and counted.
    REQUIRE(set_fte(h, tcp4(0, {{kToTir, tir}}, {counter})).status == cmd_status::OK);
    REQUIRE(set_fte(h, {.table = table,
                        .index = 4,
                        .group = l3,
                        .action = kFwd,
                        .match = {MATCH(outer_headers.ethertype, 0x86dd)},
                        .dests = {{kToTir, tir}}})
                .status == cmd_status::OK);
    const auto drops = new_counter();
    REQUIRE(
        set_fte(h, {.table = table, .index = 6, .group = any, .action = kDrop | kCount, .counters = {drops}}).status ==
        cmd_status::OK);
    // An ALLOW entry with a flow tag (mlx5e's ARFS and ethtool rules tag their flows).
    REQUIRE(set_fte(h, {.table = table,
                        .index = 5,
                        .group = l3,
                        .action = kAllow,
                        .match = {MATCH(outer_headers.ethertype, 0x0806)},
                        .flow_tag = 0x1234})
                .status == cmd_status::OK);

    const auto q = query_fc(h, counter);
    REQUIRE(q.status == cmd_status::OK);
    CHECK(CXV_LINUX_GET(traffic_counter, std::span(q.out).subspan(CXV_LINUX_BYTES(query_flow_counter_out)), packets) ==
          0);
    CHECK(CXV_LINUX_GET(traffic_counter, std::span(q.out).subspan(CXV_LINUX_BYTES(query_flow_counter_out)), octets) ==
          0);

    in_use(destroy_tir(h, tir));
    in_use(dealloc_fc(h, counter));
    in_use(dealloc_fc(h, drops));
    in_use(destroy_fg(h, table, l4));

    REQUIRE(delete_fte(h, table, 0).status == cmd_status::OK);
    CHECK(dealloc_fc(h, counter).status == cmd_status::OK);
    in_use(destroy_tir(h, tir));  // entry 4
    CHECK(destroy_fg(h, table, l4).status == cmd_status::OK);
    REQUIRE(delete_fte(h, table, 4).status == cmd_status::OK);
    CHECK(destroy_tir(h, tir).status == cmd_status::OK);
    REQUIRE(delete_fte(h, table, 6).status == cmd_status::OK);
    CHECK(dealloc_fc(h, drops).status == cmd_status::OK);
    check_status(delete_fte(h, table, 6), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(delete_fte(h, table, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    REQUIRE(delete_fte(h, table, 5).status == cmd_status::OK);
    REQUIRE(destroy_fg(h, table, l3).status == cmd_status::OK);
    REQUIRE(destroy_fg(h, table, any).status == cmd_status::OK);
    CHECK(destroy_ft(h, table).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(ttc_env, "SET_FLOW_TABLE_ENTRY: the index, group and match value are checked") {
    REQUIRE(set_fte(h, tcp4(0, {{kToTir, tir}})).status == cmd_status::OK);
    bad_parameter(set_fte(h, tcp4(0, {{kToTir, tir2}})));  // taken
    bad_parameter(set_fte(h, tcp4(4, {{kToTir, tir}})));   // L3 group's
    bad_parameter(set_fte(h, tcp4(7, {{kToTir, tir}})));   // no group's
    auto unknown_group = tcp4(1, {{kToTir, tir}});
    unknown_group.group = l4 + l3 + any + 0x100;
    bad_parameter(set_fte(h, unknown_group));
    // Values outside the group's criteria: a DMAC in the L4 group, an ethertype in the catch-all.
    auto dmac = tcp4(1, {{kToTir, tir}});
    dmac.match.push_back(MATCH(outer_headers.dmac_47_16, 0x0002c900));
    bad_parameter(set_fte(h, dmac));
    bad_parameter(set_fte(h, {.table = table,
                              .index = 6,
                              .group = any,
                              .action = kFwd,
                              .match = {MATCH(outer_headers.ethertype, 0x0800)},
                              .dests = {{kToTir, tir}}}));
    // A flow label (a misc parameter) in a group whose criteria have none; then in a
    // group on the label's high 16 bits: a value there is taken, one in its low 4 is not.
    auto label = tcp4(1, {{kToTir, tir}});
    label.match.push_back(MATCH(misc_parameters.outer_ipv6_flow_label, 0x12345));
    bad_parameter(set_fte(h, label));
    const auto by_label = new_group({.table = table,
                                     .start = 7,
                                     .end = 8,
                                     .enable = kOuter | kMisc,
                                     .criteria = {ONES(outer_headers.ip_version),
                                                  MATCH(misc_parameters.outer_ipv6_flow_label, 0xffff0)}});
    bad_parameter(set_fte(h, {.table = table,
                              .index = 7,
                              .group = by_label,
                              .action = kFwd,
                              .match = {MATCH(outer_headers.ip_version, 6),
                                        MATCH(misc_parameters.outer_ipv6_flow_label, 0x12345)},
                              .dests = {{kToTir, tir2}}}));
    REQUIRE(set_fte(h, {.table = table,
                        .index = 7,
                        .group = by_label,
                        .action = kFwd,
                        .match = {MATCH(outer_headers.ip_version, 6),
                                  MATCH(misc_parameters.outer_ipv6_flow_label, 0x12340)},
                        .dests = {{kToTir, tir2}}})
                .status == cmd_status::OK);
    in_use(destroy_tir(h, tir2));
    REQUIRE(delete_fte(h, table, 7).status == cmd_status::OK);
    // Only the first entry is left: the TIR it names is held, the other is not.
    CHECK(destroy_tir(h, tir2).status == cmd_status::OK);
    in_use(destroy_tir(h, tir));
}

TEST_CASE_FIXTURE(ttc_env, "SET_FLOW_TABLE_ENTRY: actions, destinations, counters and the input length are checked") {
    const auto higher = new_table({.level = 1});
    const auto same = new_table({.level = 0});
    auto entry = [&](unsigned action, std::vector<dest> to, std::vector<std::uint32_t> counters = {}) {
        auto s = tcp4(1, std::move(to), std::move(counters));
        s.action = action;
        return s;
    };
    CHECK(set_fte(h, entry(kFwd | MLX5_FLOW_CONTEXT_ACTION_PACKET_REFORMAT, {{kToTir, tir}})).status ==
          cmd_status::BAD_PARAM);
    CHECK(set_fte(h, entry(kFwd | MLX5_FLOW_CONTEXT_ACTION_MOD_HDR, {{kToTir, tir}})).status == cmd_status::BAD_PARAM);
    CHECK(set_fte(h, entry(kDrop | kFwd, {{kToTir, tir}})).status == cmd_status::BAD_PARAM);
    bad_parameter(set_fte(h, entry(kFwd, {})));
    bad_parameter(set_fte(h, entry(kFwd, {{kToTir, tir + tir2 + 0x100}})));
    bad_parameter(set_fte(h, entry(kFwd, {{kToVport, 0}})));
    bad_parameter(set_fte(h, entry(kFwd, {{kToTable, same}})));
    bad_parameter(set_fte(h, entry(kFwd, {{kToTable, table}})));
    bad_parameter(set_fte(h, entry(kFwd, {{kToTable, higher + same + 0x100}})));
    bad_parameter(set_fte(h, entry(kFwd | kCount, {{kToTir, tir}})));
    bad_parameter(set_fte(h, entry(kFwd | kCount, {{kToTir, tir}}, {counter + 0x1000})));
    // The lists' sizes say more than the input holds.
    auto short_dests = entry(kFwd, {{kToTir, tir}, {kToTir, tir2}});
    short_dests.entries = 1;
    check_status(set_fte(h, short_dests), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    auto short_counters = entry(kFwd | kCount, {{kToTir, tir}}, {counter});
    short_counters.entries = 1;
    check_status(set_fte(h, short_counters), cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    auto bad_mod = entry(kFwd, {{kToTir, tir}});
    bad_mod.op_mod = 2;
    check_status(set_fte(h, bad_mod), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    // None of them was made (the index is free, nothing is held); then two destinations,
    // a TIR and a table of a higher level, with a counter.
    CHECK(destroy_tir(h, tir2).status == cmd_status::OK);
    CHECK(dealloc_fc(h, counter).status == cmd_status::OK);
    const auto c = new_counter();
    REQUIRE(set_fte(h, entry(kFwd | kCount, {{kToTir, tir}, {kToTable, higher}}, {c})).status == cmd_status::OK);
    in_use(destroy_ft(h, higher));
    in_use(dealloc_fc(h, c));
    REQUIRE(delete_fte(h, table, 1).status == cmd_status::OK);
    CHECK(destroy_ft(h, higher).status == cmd_status::OK);
    CHECK(dealloc_fc(h, c).status == cmd_status::OK);
    CHECK(destroy_tir(h, tir).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(ttc_env,
                  "SET_FLOW_TABLE_ENTRY op_mod 1: an existing entry is changed in place; an empty index is refused") {
    REQUIRE(set_fte(h, tcp4(2, {{kToTir, tir}})).status == cmd_status::OK);
    // mlx5_cmd_update_fte: a new destination list (modify_enable_mask DESTINATION_LIST).
    auto moved = tcp4(2, {{kToTir, tir2}}, {counter});
    moved.op_mod = 1;
    moved.modify_enable_mask = (1 << MLX5_SET_FTE_MODIFY_ENABLE_MASK_DESTINATION_LIST) |
                               (1 << MLX5_SET_FTE_MODIFY_ENABLE_MASK_FLOW_COUNTERS) |
                               (1 << MLX5_SET_FTE_MODIFY_ENABLE_MASK_ACTION);
    REQUIRE(set_fte(h, moved).status == cmd_status::OK);
    CHECK(destroy_tir(h, tir).status == cmd_status::OK);
    in_use(destroy_tir(h, tir2));
    in_use(dealloc_fc(h, counter));

    auto nowhere = tcp4(3, {{kToTir, tir2}});
    nowhere.op_mod = 1;
    nowhere.modify_enable_mask = moved.modify_enable_mask;
    CHECK(set_fte(h, nowhere).status == cmd_status::BAD_PARAM);
    REQUIRE(delete_fte(h, table, 2).status == cmd_status::OK);
    CHECK(destroy_tir(h, tir2).status == cmd_status::OK);
    CHECK(dealloc_fc(h, counter).status == cmd_status::OK);
}

// --- flow counters -------------------------------------------------------------------------------

TEST_CASE_FIXTURE(flow_env,
                  "ALLOC_FLOW_COUNTER: single counters only; QUERY reads zeros; unknown counters are refused") {
    const auto other = new_counter();
    CHECK(counter != 0);
    CHECK(other != 0);
    CHECK(other != counter);
    bad_parameter(alloc_fc(h, MLX5_FC_BULK_128));
    const auto q = query_fc(h, other);
    REQUIRE(q.status == cmd_status::OK);
    const auto stats = std::span(q.out).subspan(CXV_LINUX_BYTES(query_flow_counter_out));
    CHECK(CXV_LINUX_GET(traffic_counter, stats, packets) == 0);
    CHECK(CXV_LINUX_GET(traffic_counter, stats, octets) == 0);

    const auto unknown = counter + other + 0x1000;
    bad_parameter(query_fc(h, unknown));
    check_status(dealloc_fc(h, unknown), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    REQUIRE(dealloc_fc(h, other).status == cmd_status::OK);
    check_status(dealloc_fc(h, other), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    bad_parameter(query_fc(h, other));
}
