// NIC receive flow steering (PRM "Flow Table"; hw/ifc_flow.h).
//
// A received packet meets the root table (SET_FLOW_TABLE_ROOT). A table is a range of
// 2^log_size entries cut into groups; a group says which header bits its entries match
// on (its criteria), an entry gives the values of those bits and what a matching packet
// does: go to TIRs or to a table of a higher level, be dropped, be counted, carry a flow
// tag in its CQE. A packet no entry matches takes the table's miss: the default (dropped,
// on a NIC receive table), or another table.
//
// Matching is on the outer headers (fte_match_set_lyr_2_4) and, of the misc parameters,
// the outer IPv6 flow label. The other match sets (inner headers, misc 2 to 5) and misc
// fields are not modelled: a group may enable them only with no criteria in them. Only
// NIC receive tables of the function's own vport are modelled; transmit, FDB and ACL
// tables, packet reformat, header rewrite, VLAN push and pop, bulk counters and
// software-owned (SW steering) tables are refused with BAD_PARAM.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "hw/ifc.h"
#include "sim/firmware/fw_flow.h"
#include "sim/firmware/fw_tables.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

using ifc::flow_action;
using ifc::flow_destination_type;
using ifc::flow_table_miss_action;

constexpr std::uint32_t kNicRx = static_cast<std::uint32_t>(ifc::flow_table_type::NIC_RX);
constexpr std::size_t kOuter = ifc::fte_match_set_lyr_2_4::size_bytes;  // 64: each match set's size
// The match sets of fte_match_param (outer headers, misc, inner headers, misc 2 to 5),
// each kOuter bytes, one enable bit each.
constexpr unsigned kMatchSets = 7;
// SET_FLOW_TABLE_ENTRY's op_mod, and modify_enable_mask's bits (Linux
// MLX5_SET_FTE_MODIFY_ENABLE_MASK_*).
constexpr std::uint16_t kFteCreate = 0, kFteModify = 1;
constexpr unsigned kModifyAction = 0, kModifyFlowTag = 1, kModifyDestinations = 2, kModifyCounters = 3;
// SET_FLOW_TABLE_ROOT's op_mod 1: no root (Linux mlx5_cmd_update_root_ft, disconnect).
constexpr std::uint16_t kRootDisconnect = 1;
constexpr std::uint16_t kActionsModelled = static_cast<std::uint16_t>(flow_action::ALLOW) |
                                           static_cast<std::uint16_t>(flow_action::DROP) |
                                           static_cast<std::uint16_t>(flow_action::FWD_DEST) |
                                           static_cast<std::uint16_t>(flow_action::COUNT);

bool all_zero(const std::byte* p, std::size_t n) {
    return std::all_of(p, p + n, [](std::byte b) { return b == std::byte{0}; });
}

// The misc parameters the model steers on: the outer IPv6 flow label. Criteria in any
// other misc field are refused as unmodelled (as the inner headers' are).
const std::array<std::byte, kOuter>& misc_modelled() {
    static const auto bits = [] {
        std::array<std::byte, kOuter> b{};
        ifc::set<ifc::fte_match_set_misc::outer_ipv6_flow_label>(b.data(), 0xfffff);
        return b;
    }();
    return bits;
}

// The table-addressing fields every command but CREATE_FLOW_TABLE's and the counters'
// share: NIC receive tables of the function's own vport only.
template <typename In>
cmd_reply check_address(const std::byte* in) {
    if (ifc::get<typename In::table_type>(in) != kNicRx || ifc::get<typename In::other_vport>(in) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    return ok();
}

}  // namespace

// --- tables ----------------------------------------------------------------------------

// A flow table context's miss for a table of `level`: the default (`to` 0), or forward to
// a live table of a higher level (PRM "Flow Table Levels": a miss goes on down). False:
// neither, BAD_PARAMETER.
bool flow_commands::miss_of(const std::byte* ctx, unsigned level, std::uint32_t& to) const {
    using ctx_t = ifc::flow_table_context;
    const auto miss = static_cast<flow_table_miss_action>(ifc::get<ctx_t::table_miss_action>(ctx));
    to = 0;
    if (miss == flow_table_miss_action::DEF) return true;
    if (miss != flow_table_miss_action::FWD) return false;
    to = ifc::get<ctx_t::table_miss_id>(ctx);
    const auto t = eth_.flow_tables.find(to);
    return t != eth_.flow_tables.end() && t->second.level > level;
}

cmd_reply flow_commands::create_flow_table(cmd_ctx& c) {
    using in_t = ifc::create_flow_table_in;
    using ctx_t = ifc::flow_table_context;
    const std::byte* in = c.in.data();
    const std::byte* ctx = ifc::at<in_t::flow_table_context>(in);
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    if (eth_.flow_tables.size() >= (std::size_t{1} << hca_caps::flow_log_max_ft_num)) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    if (ifc::get<ctx_t::reformat_en>(ctx) != 0 || ifc::get<ctx_t::decap_en>(ctx) != 0 ||
        ifc::get<ctx_t::sw_owner>(ctx) != 0 || ifc::get<ctx_t::termination_table>(ctx) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const unsigned log_size = ifc::get<ctx_t::log_size>(ctx);
    const unsigned level = ifc::get<ctx_t::level>(ctx);
    if (log_size > hca_caps::flow_log_max_ft_size) return bad_param(cmd_syndrome::LOG_SIZE_TOO_BIG);
    if (level > hca_caps::flow_max_ft_level) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const auto miss = static_cast<flow_table_miss_action>(ifc::get<ctx_t::table_miss_action>(ctx));
    std::uint32_t miss_table = 0;
    if (!miss_of(ctx, level, miss_table)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const std::uint32_t id = free_number(eth_.flow_tables, next_table_);
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm_.write(*slot, ctx, ctx_t::size_bytes)) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    flow_table t;
    t.id = id;
    t.uid = ifc::get<in_t::uid>(in);
    t.level = static_cast<std::uint8_t>(level);
    t.log_size = static_cast<std::uint8_t>(log_size);
    t.miss_action = static_cast<std::uint8_t>(miss);
    t.miss_table = miss_table;
    t.icm = *slot;
    if (miss_table != 0) add_user(eth_.flow_tables, miss_table);
    eth_.flow_tables.emplace(id, std::move(t));
    next_table_ = (id + 1) & kMask24;
    ifc::set<ifc::create_flow_table_out::table_id>(c.out.data(), id);
    return ok();
}

// PRM MODIFY_FLOW_TABLE: a table's miss (modify_field_select bit 0), to the default or
// on to a table of a higher level, as CREATE_FLOW_TABLE checks it. The LAG master's next
// table (bit 15) belongs to a LAG, which the model does not have.
cmd_reply flow_commands::modify_flow_table(cmd_ctx& c) {
    using in_t = ifc::modify_flow_table_in;
    using ctx_t = ifc::flow_table_context;
    const std::byte* in = c.in.data();
    const std::byte* ctx = ifc::at<in_t::flow_table_context>(in);
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    flow_table& t = it->second;
    const auto select = static_cast<std::uint16_t>(ifc::get<in_t::modify_field_select>(in));
    if ((select & ~ifc::modify_flow_table_miss) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if ((select & ifc::modify_flow_table_miss) == 0) return ok();
    const auto miss = static_cast<flow_table_miss_action>(ifc::get<ctx_t::table_miss_action>(ctx));
    std::uint32_t miss_table = 0;
    if (!miss_of(ctx, t.level, miss_table)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // The table's context in its ICM, with the new miss.
    std::array<std::byte, ctx_t::size_bytes> kept;
    if (!icm_.read(t.icm, kept.data(), kept.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    ifc::set<ctx_t::table_miss_action>(kept.data(), static_cast<std::uint32_t>(miss));
    ifc::set<ctx_t::table_miss_id>(kept.data(), miss_table);
    if (!icm_.write(t.icm, kept.data(), kept.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    if (miss_table != 0) add_user(eth_.flow_tables, miss_table);
    if (t.miss_table != 0) drop_user(eth_.flow_tables, t.miss_table);
    t.miss_action = static_cast<std::uint8_t>(miss);
    t.miss_table = miss_table;
    return ok();
}

// A table with groups, or that the root, a miss or an entry leads to, stays.
cmd_reply flow_commands::destroy_flow_table(cmd_ctx& c) {
    using in_t = ifc::destroy_flow_table_in;
    const std::byte* in = c.in.data();
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    // The root may go: the function's receive root is then none (what
    // SET_FLOW_TABLE_ROOT's disconnect leaves). Linux's mlx5_core destroys its last NIC
    // receive table, still the root, so at every unload (fs_core.c's
    // update_root_ft_destroy sends no command when no table is left to be root). A
    // table another table misses to, or an entry forwards to, stays.
    const bool root = eth_.root_table == it->first;
    if (it->second.users != (root ? 1u : 0u) || !it->second.groups.empty()) {
        return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    }
    if (root) eth_.root_table = 0;
    if (it->second.miss_table != 0) drop_user(eth_.flow_tables, it->second.miss_table);
    icm_.free(it->second.icm);
    eth_.flow_tables.erase(it);
    return ok();
}

// --- groups ----------------------------------------------------------------------------

cmd_reply flow_commands::create_flow_group(cmd_ctx& c) {
    using in_t = ifc::create_flow_group_in;
    const std::byte* in = c.in.data();
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    flow_table& t = it->second;
    if (ifc::get<in_t::group_type>(in) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const std::uint32_t start = ifc::get<in_t::start_flow_index>(in);
    const std::uint32_t end = ifc::get<in_t::end_flow_index>(in);
    if (start > end || end >= (std::uint64_t{1} << t.log_size)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    for (const auto& [gid, g] : t.groups) {
        if (start <= g.end && g.start <= end) return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    // Criteria in a set only with its enable bit; another set may be enabled with none
    // (PRM "Flow Group": match_criteria_enable). The outer headers and the misc
    // parameters' outer IPv6 flow label are modelled.
    const std::uint8_t enable = static_cast<std::uint8_t>(ifc::get<in_t::match_criteria_enable>(in));
    const std::byte* criteria = ifc::at<in_t::match_criteria>(in);
    for (unsigned set = 0; set < kMatchSets; ++set) {
        const bool zero = all_zero(criteria + set * kOuter, kOuter);
        if (!zero && (set > 1 || (enable & (1u << set)) == 0)) return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    for (std::size_t i = 0; i < kOuter; ++i) {
        if ((criteria[kOuter + i] & ~misc_modelled()[i]) != std::byte{0}) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
    }
    if ((enable >> kMatchSets) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    flow_group g;
    g.start = start;
    g.end = end;
    g.criteria_enable = enable;
    static_assert(flow_match_bytes == 2 * kOuter);
    std::copy_n(criteria, flow_match_bytes, g.criteria.begin());
    const std::uint32_t id = eth_.next_group_id;
    eth_.next_group_id = std::max<std::uint32_t>(1, (id + 1) & kMask24);
    t.groups.emplace(id, g);
    ifc::set<ifc::create_flow_group_out::group_id>(c.out.data(), id);
    return ok();
}

cmd_reply flow_commands::destroy_flow_group(cmd_ctx& c) {
    using in_t = ifc::destroy_flow_group_in;
    const std::byte* in = c.in.data();
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    flow_table& t = it->second;
    const std::uint32_t gid = ifc::get<in_t::group_id>(in);
    const auto g = t.groups.find(gid);
    if (g == t.groups.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    for (const auto& [index, e] : t.entries) {
        if (e.group_id == gid) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    }
    t.groups.erase(g);
    return ok();
}

// --- entries ---------------------------------------------------------------------------

namespace {

// What an entry holds: its destinations and counters.
void hold(eth_tables& eth, const flow_entry& e, bool on) {
    for (const flow_destination& d : e.destinations) {
        if (d.type == flow_destination_type::TIR) {
            on ? add_user(eth.tirs, d.id) : drop_user(eth.tirs, d.id);
        } else {
            on ? add_user(eth.flow_tables, d.id) : drop_user(eth.flow_tables, d.id);
        }
    }
    for (const std::uint32_t id : e.counters) on ? add_user(eth.flow_counters, id) : drop_user(eth.flow_counters, id);
}

}  // namespace

cmd_reply flow_commands::set_flow_table_entry(cmd_ctx& c) {
    using in_t = ifc::set_fte_in;
    using fc = ifc::flow_context;
    const std::byte* in = c.in.data();
    if (c.op_mod != kFteCreate && c.op_mod != kFteModify) return bad_param(cmd_syndrome::BAD_OP_MOD);
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    flow_table& t = it->second;
    const std::uint32_t index = ifc::get<in_t::flow_index>(in);
    const std::byte* ctx = ifc::at<in_t::flow_context>(in);
    const auto existing = t.entries.find(index);
    if ((c.op_mod == kFteCreate) == (existing != t.entries.end())) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // The ignore_flow_level capability is not announced.
    if (ifc::get<in_t::ignore_flow_level>(in) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);

    flow_entry e;
    if (c.op_mod == kFteCreate) {
        // A new entry: in its group's range, matching only on its group's criteria.
        e.group_id = ifc::get<fc::group_id>(ctx);
        const auto g = t.groups.find(e.group_id);
        if (g == t.groups.end() || index < g->second.start || index > g->second.end) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        const std::byte* value = ifc::at<fc::match_value>(ctx);
        for (std::size_t i = 0; i < flow_match_bytes; ++i) {
            if ((value[i] & ~g->second.criteria[i]) != std::byte{0}) return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if (!all_zero(value + flow_match_bytes, kMatchSets * kOuter - flow_match_bytes)) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        std::copy_n(value, flow_match_bytes, e.match.begin());
    } else {
        e = existing->second;
    }
    const unsigned mask = c.op_mod == kFteCreate ? 0xf : ifc::get<in_t::modify_enable_mask>(in);

    const std::uint16_t action = static_cast<std::uint16_t>(ifc::get<fc::action>(ctx));
    const bool fwd = action & static_cast<std::uint16_t>(flow_action::FWD_DEST);
    const bool count = action & static_cast<std::uint16_t>(flow_action::COUNT);
    if ((action & ~kActionsModelled) != 0 || ifc::get<fc::extended_destination>(ctx) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (fwd && (action & static_cast<std::uint16_t>(flow_action::DROP))) return bad_param(cmd_syndrome::BAD_PARAMETER);
    const std::uint32_t ndest = fwd ? ifc::get<fc::destination_list_size>(ctx) : 0;
    const std::uint32_t ncount = count ? ifc::get<fc::flow_counter_list_size>(ctx) : 0;
    if (fwd && (ndest == 0 || ndest > (1u << hca_caps::flow_log_max_destination))) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (count && ncount == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    // Destinations, then counters, 8 bytes each, after the flow context (PRM "Flow
    // Context": the destination list).
    const std::size_t list_at = in_t::size_bytes;
    if (c.in.size() < list_at + std::size_t{ndest + ncount} * 8) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    }
    std::vector<flow_destination> dests;
    for (std::uint32_t i = 0; i < ndest; ++i) {
        const std::byte* d = in + list_at + 8 * i;
        flow_destination x{static_cast<flow_destination_type>(ifc::get<ifc::dest_format_struct::destination_type>(d)),
                           ifc::get<ifc::dest_format_struct::destination_id>(d)};
        if (ifc::get<ifc::dest_format_struct::packet_reformat>(d) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (x.type == flow_destination_type::TIR) {
            if (eth_.tirs.count(x.id) == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
        } else if (x.type == flow_destination_type::FLOW_TABLE) {
            // Forward only to a table of a higher level.
            const auto to = eth_.flow_tables.find(x.id);
            if (to == eth_.flow_tables.end() || to->second.level <= t.level) return bad_param(cmd_syndrome::BAD_PARAMETER);
        } else {
            return bad_param(cmd_syndrome::BAD_PARAMETER);  // vports: no e-switch modelled
        }
        dests.push_back(x);
    }
    std::vector<std::uint32_t> counters;
    for (std::uint32_t i = 0; i < ncount; ++i) {
        const std::uint32_t id = ifc::get<ifc::flow_counter_list::flow_counter_id>(in + list_at + 8 * (ndest + i));
        if (eth_.flow_counters.count(id) == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
        counters.push_back(id);
    }

    if (existing != t.entries.end()) hold(eth_, existing->second, false);
    if (mask & (1u << kModifyAction)) e.action = action;
    if (mask & (1u << kModifyFlowTag)) e.flow_tag = ifc::get<fc::flow_tag>(ctx);
    if (mask & (1u << kModifyDestinations)) e.destinations = std::move(dests);
    if (mask & (1u << kModifyCounters)) e.counters = std::move(counters);
    hold(eth_, e, true);
    t.entries[index] = std::move(e);
    return ok();
}

cmd_reply flow_commands::delete_flow_table_entry(cmd_ctx& c) {
    using in_t = ifc::delete_fte_in;
    const std::byte* in = c.in.data();
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    const auto it = eth_.flow_tables.find(ifc::get<in_t::table_id>(in));
    if (it == eth_.flow_tables.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const auto e = it->second.entries.find(ifc::get<in_t::flow_index>(in));
    if (e == it->second.entries.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    hold(eth_, e->second, false);
    it->second.entries.erase(e);
    return ok();
}

// --- the root --------------------------------------------------------------------------

cmd_reply flow_commands::set_flow_table_root(cmd_ctx& c) {
    using in_t = ifc::set_flow_table_root_in;
    const std::byte* in = c.in.data();
    if (auto r = check_address<in_t>(in); failed(r)) return r;
    if (ifc::get<in_t::table_of_other_vport>(in) != 0 || ifc::get<in_t::underlay_qpn>(in) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    std::uint32_t root = 0;
    if (c.op_mod == 0) {
        root = ifc::get<in_t::table_id>(in);
        if (eth_.flow_tables.count(root) == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    } else if (c.op_mod != kRootDisconnect) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    if (eth_.root_table != 0) drop_user(eth_.flow_tables, eth_.root_table);
    eth_.root_table = root;
    if (root != 0) add_user(eth_.flow_tables, root);
    return ok();
}

// --- counters --------------------------------------------------------------------------

cmd_reply flow_commands::alloc_flow_counter(cmd_ctx& c) {
    using in_t = ifc::alloc_flow_counter_in;
    // Bulk allocation: flow_counter_bulk_alloc is not announced.
    if (ifc::get<in_t::flow_counter_bulk>(c.in.data()) != 0 ||
        ifc::get<in_t::flow_counter_bulk_log_size>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (eth_.flow_counters.size() >= (std::size_t{1} << hca_caps::flow_log_max_counter)) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    const std::uint32_t id = free_number(eth_.flow_counters, next_counter_);
    eth_.flow_counters[id].id = id;
    next_counter_ = (id + 1) & kMask24;
    ifc::set<ifc::alloc_flow_counter_out::flow_counter_id>(c.out.data(), id);
    return ok();
}

cmd_reply flow_commands::dealloc_flow_counter(cmd_ctx& c) {
    const auto it = eth_.flow_counters.find(ifc::get<ifc::dealloc_flow_counter_in::flow_counter_id>(c.in.data()));
    if (it == eth_.flow_counters.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    eth_.flow_counters.erase(it);
    return ok();
}

// num_of_counters counters from flow_counter_id on (0: that one), each a traffic_counter
// after the output's header; `clear` zeroes them once read.
cmd_reply flow_commands::query_flow_counter(cmd_ctx& c) {
    using in_t = ifc::query_flow_counter_in;
    const std::byte* in = c.in.data();
    const std::uint32_t first = ifc::get<in_t::flow_counter_id>(in);
    const std::uint32_t n = std::max<std::uint32_t>(1, ifc::get<in_t::num_of_counters>(in));
    for (std::uint32_t i = 0; i < n; ++i) {
        if (eth_.flow_counters.count(first + i) == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const std::size_t at = ifc::query_flow_counter_out::size_bytes;
    const std::size_t room = c.out.size() > at ? (c.out.size() - at) / ifc::traffic_counter::size_bytes : 0;
    const bool clear = ifc::get<in_t::clear>(in) != 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        flow_counter& fc = eth_.flow_counters[first + i];
        if (i < room) {
            std::byte* o = c.out.data() + at + i * ifc::traffic_counter::size_bytes;
            ifc::set<ifc::traffic_counter::packets>(o, fc.packets);
            ifc::set<ifc::traffic_counter::octets>(o, fc.octets);
        }
        if (clear) fc.packets = fc.octets = 0;
    }
    return ok();
}

void flow_commands::release_all() {
    for (auto& [id, t] : eth_.flow_tables) icm_.free(t.icm);
    eth_.flow_tables.clear();
    eth_.flow_counters.clear();
    eth_.root_table = 0;
    eth_.next_group_id = 1;
    next_table_ = next_counter_ = 1;
}

}  // namespace cxv::sim
