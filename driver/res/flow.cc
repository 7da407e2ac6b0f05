#include "driver/res/flow.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"
#include "hw/mac.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;
using m = ifc::fte_match_set_lyr_2_4;

namespace {

constexpr std::uint32_t kNicRx = static_cast<std::uint32_t>(ifc::flow_table_type::NIC_RX);
constexpr std::uint16_t kRootDisconnect = 1;  // SET_FLOW_TABLE_ROOT op_mod

bool all_zero(const std::byte* p, std::size_t n) {
    return std::all_of(p, p + n, [](std::byte b) { return b == std::byte{0}; });
}

// The field's criteria (the mask's bits) and its value within them.
template <typename Field>
void put(std::array<std::byte, flow_match::size>& criteria, std::array<std::byte, flow_match::size>& value,
         std::uint32_t v, std::uint32_t mask = static_cast<std::uint32_t>(Field::max_value)) {
    mask &= static_cast<std::uint32_t>(Field::max_value);
    ifc::set<Field>(criteria.data(), mask);
    ifc::set<Field>(value.data(), v & mask);
}

std::uint32_t mac_hi(const flow_match::mac& a) {
    return std::uint32_t{a[0]} << 24 | std::uint32_t{a[1]} << 16 | std::uint32_t{a[2]} << 8 | a[3];
}
std::uint32_t mac_lo(const flow_match::mac& a) { return std::uint32_t{a[4]} << 8 | a[5]; }

// A MAC as the match set holds it: bits 47:16 in one field, 15:0 in the next.
template <typename Hi, typename Lo>
void put_mac(std::array<std::byte, flow_match::size>& c, std::array<std::byte, flow_match::size>& v,
             const flow_match::mac& a, const flow_match::mac& mask) {
    put<Hi>(c, v, mac_hi(a), mac_hi(mask));
    put<Lo>(c, v, mac_lo(a), mac_lo(mask));
}

// An address in the 16 bytes of src_ipv4_src_ipv6 / dst_ipv4_dst_ipv6: IPv4 in the last 4.
template <typename Field, std::size_t N>
void put_ip(std::array<std::byte, flow_match::size>& c, std::array<std::byte, flow_match::size>& v,
            const std::array<std::uint8_t, N>& a, const std::array<std::uint8_t, N>& mask) {
    static_assert(N == 4 || N == 16);
    for (std::size_t i = 0; i < N; ++i) {
        ifc::set<Field>(c.data(), 16 - N + i, mask[i]);
        ifc::set<Field>(v.data(), 16 - N + i, a[i] & mask[i]);
    }
}

}  // namespace

flow_match& flow_match::dmac(const mac& a, const mac& mask) {
    put_mac<m::dmac_47_16, m::dmac_15_0>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::smac(const mac& a, const mac& mask) {
    put_mac<m::smac_47_16, m::smac_15_0>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::ethertype(std::uint16_t type, std::uint16_t mask) {
    put<m::ethertype>(criteria_, value_, type, mask);
    return *this;
}
flow_match& flow_match::vlan(std::uint16_t vid, std::uint16_t mask) {
    put<m::cvlan_tag>(criteria_, value_, 1);
    put<m::first_vid>(criteria_, value_, vid, mask);
    return *this;
}
flow_match& flow_match::vlan_prio(std::uint8_t prio, std::uint8_t mask) {
    put<m::cvlan_tag>(criteria_, value_, 1);
    put<m::first_prio>(criteria_, value_, prio, mask);
    return *this;
}
flow_match& flow_match::vlan_cfi(std::uint8_t cfi) {
    put<m::cvlan_tag>(criteria_, value_, 1);
    put<m::first_cfi>(criteria_, value_, cfi);
    return *this;
}
flow_match& flow_match::ip_dscp(std::uint8_t dscp, std::uint8_t mask) {
    put<m::ip_dscp>(criteria_, value_, dscp, mask);
    return *this;
}
flow_match& flow_match::ip_ecn(std::uint8_t ecn, std::uint8_t mask) {
    put<m::ip_ecn>(criteria_, value_, ecn, mask);
    return *this;
}
flow_match& flow_match::ip_version(unsigned v) {
    put<m::ip_version>(criteria_, value_, v);
    return *this;
}
flow_match& flow_match::ip_protocol(std::uint8_t proto, std::uint8_t mask) {
    put<m::ip_protocol>(criteria_, value_, proto, mask);
    return *this;
}
flow_match& flow_match::src_ipv4(const ipv4& a, const ipv4& mask) {
    put_ip<m::src_ipv4_src_ipv6>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::dst_ipv4(const ipv4& a, const ipv4& mask) {
    put_ip<m::dst_ipv4_dst_ipv6>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::src_ipv6(const ipv6& a, const ipv6& mask) {
    put_ip<m::src_ipv4_src_ipv6>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::dst_ipv6(const ipv6& a, const ipv6& mask) {
    put_ip<m::dst_ipv4_dst_ipv6>(criteria_, value_, a, mask);
    return *this;
}
flow_match& flow_match::udp_sport(std::uint16_t port, std::uint16_t mask) {
    put<m::udp_sport>(criteria_, value_, port, mask);
    return *this;
}
flow_match& flow_match::udp_dport(std::uint16_t port, std::uint16_t mask) {
    put<m::udp_dport>(criteria_, value_, port, mask);
    return *this;
}
flow_match& flow_match::tcp_sport(std::uint16_t port, std::uint16_t mask) {
    put<m::tcp_sport>(criteria_, value_, port, mask);
    return *this;
}
flow_match& flow_match::tcp_dport(std::uint16_t port, std::uint16_t mask) {
    put<m::tcp_dport>(criteria_, value_, port, mask);
    return *this;
}
flow_match& flow_match::ipv6_flow_label(std::uint32_t label, std::uint32_t mask) {
    using misc = ifc::fte_match_set_misc;
    mask &= static_cast<std::uint32_t>(misc::outer_ipv6_flow_label::max_value);
    ifc::set<misc::outer_ipv6_flow_label>(criteria_.data() + outer_size, mask);
    ifc::set<misc::outer_ipv6_flow_label>(value_.data() + outer_size, label & mask);
    return *this;
}
bool flow_match::empty() const noexcept { return all_zero(criteria_.data(), criteria_.size()); }

// --- tables ----------------------------------------------------------------------------

result<std::shared_ptr<flow_table>> flow_table::create(hca& h, const attr& a) {
    if (a.miss && &a.miss->device() != &h) return error{EINVAL, "flow_table::create: a miss table of another HCA"};
    if (a.miss && a.miss->level() <= a.level) {
        return error{EINVAL, fmt::format("flow_table::create: a miss to level {} from level {} (it must be higher)",
                                         a.miss->level(), a.level)};
    }
    std::shared_ptr<flow_table> t(new flow_table(h));
    auto in = command<ifc::create_flow_table_in>(cmd_opcode::CREATE_FLOW_TABLE);
    ifc::set<ifc::create_flow_table_in::table_type>(in.data(), kNicRx);
    std::byte* ctx = ifc::at<ifc::create_flow_table_in::flow_table_context>(in.data());
    ifc::set<ifc::flow_table_context::level>(ctx, a.level);
    ifc::set<ifc::flow_table_context::log_size>(ctx, a.log_size);
    if (a.miss) {
        ifc::set<ifc::flow_table_context::table_miss_action>(
            ctx, static_cast<std::uint32_t>(ifc::flow_table_miss_action::FWD));
        ifc::set<ifc::flow_table_context::table_miss_id>(ctx, a.miss->id());
    }
    auto r = h.exec(in, ifc::create_flow_table_out::size_bytes);
    if (!r) return r.error();
    t->id_ = ifc::get<ifc::create_flow_table_out::table_id>(r->data());
    t->level_ = a.level;
    t->log_size_ = a.log_size;
    t->miss_ = a.miss;
    t->created();
    return t;
}

status flow_table::set_miss(std::shared_ptr<flow_table> miss) {
    if (miss && &miss->device() != &owner()) return error{EINVAL, "flow_table::set_miss: a table of another HCA"};
    if (miss && miss->level() <= level_) {
        return error{EINVAL, fmt::format("flow_table::set_miss: a miss to level {} from level {} (it must be higher)",
                                         miss->level(), level_)};
    }
    auto in = command<ifc::modify_flow_table_in>(cmd_opcode::MODIFY_FLOW_TABLE);
    ifc::set<ifc::modify_flow_table_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::modify_flow_table_in::table_id>(in.data(), id_);
    ifc::set<ifc::modify_flow_table_in::modify_field_select>(in.data(), ifc::modify_flow_table_miss);
    std::byte* ctx = ifc::at<ifc::modify_flow_table_in::flow_table_context>(in.data());
    const auto action = miss ? ifc::flow_table_miss_action::FWD : ifc::flow_table_miss_action::DEF;
    ifc::set<ifc::flow_table_context::table_miss_action>(ctx, static_cast<std::uint32_t>(action));
    if (miss) ifc::set<ifc::flow_table_context::table_miss_id>(ctx, miss->id());
    auto r = owner().exec(in, ifc::modify_flow_table_out::size_bytes);
    if (!r) return r.error();
    miss_ = std::move(miss);
    return ok_status();
}

status flow_table::make_root() {
    auto in = command<ifc::set_flow_table_root_in>(cmd_opcode::SET_FLOW_TABLE_ROOT);
    ifc::set<ifc::set_flow_table_root_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::set_flow_table_root_in::table_id>(in.data(), id_);
    auto r = owner().exec(in, ifc::set_flow_table_root_out::size_bytes);
    if (!r) return r.error();
    root_ = true;
    owner().nic_rx_root.store(id_);
    return ok_status();
}

status flow_table::clear_root(hca& h) {
    auto in = command<ifc::set_flow_table_root_in>(cmd_opcode::SET_FLOW_TABLE_ROOT, kRootDisconnect);
    ifc::set<ifc::set_flow_table_root_in::table_type>(in.data(), kNicRx);
    auto r = h.exec(in, ifc::set_flow_table_root_out::size_bytes);
    if (!r) return r.error();
    h.nic_rx_root.store(0);
    return ok_status();
}

status flow_table::destroy() {
    if (destroyed_) return ok_status();
    // The root unset only while it is this table: another made root since (a second
    // steering's, cxv::eth::steering::create) stays the root.
    if (root_) {
        status s = ok_status();
        with_live_owner([&](hca& h) {
            if (h.nic_rx_root.load() == id_) s = clear_root(h);
        });
        if (!s) return s;
        root_ = false;
    }
    auto in = command<ifc::destroy_flow_table_in>(cmd_opcode::DESTROY_FLOW_TABLE);
    ifc::set<ifc::destroy_flow_table_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::destroy_flow_table_in::table_id>(in.data(), id_);
    return destroy_with(std::move(in));
}

flow_table::~flow_table() { (void)destroy(); }

// --- groups ----------------------------------------------------------------------------

result<std::shared_ptr<flow_group>> flow_group::create(std::shared_ptr<flow_table> table, unsigned first, unsigned last,
                                                       const flow_match& criteria) {
    if (!table) return error{EINVAL, "flow_group::create: no table"};
    if (first > last || last >= table->size()) {
        return error{EINVAL, fmt::format("flow_group::create: entries {} to {} of a table of {}", first, last,
                                         table->size())};
    }
    hca& h = table->device();
    std::shared_ptr<flow_group> g(new flow_group(std::move(table)));
    auto in = command<ifc::create_flow_group_in>(cmd_opcode::CREATE_FLOW_GROUP);
    ifc::set<ifc::create_flow_group_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::create_flow_group_in::table_id>(in.data(), g->table_->id());
    ifc::set<ifc::create_flow_group_in::start_flow_index>(in.data(), first);
    ifc::set<ifc::create_flow_group_in::end_flow_index>(in.data(), last);
    // Each set with criteria is enabled (PRM "Flow Group": match_criteria_enable).
    const auto& c = criteria.criteria();
    std::uint32_t enable = 0;
    if (!all_zero(c.data(), flow_match::outer_size)) {
        enable |= static_cast<std::uint32_t>(ifc::match_criteria::OUTER_HEADERS);
    }
    if (!all_zero(c.data() + flow_match::outer_size, flow_match::size - flow_match::outer_size)) {
        enable |= static_cast<std::uint32_t>(ifc::match_criteria::MISC_PARAMETERS);
    }
    ifc::set<ifc::create_flow_group_in::match_criteria_enable>(in.data(), enable);
    static_assert(ifc::fte_match_param::misc_parameters::bit_offset == 8 * flow_match::outer_size);
    std::memcpy(ifc::at<ifc::create_flow_group_in::match_criteria>(in.data()), c.data(), flow_match::size);
    auto r = h.exec(in, ifc::create_flow_group_out::size_bytes);
    if (!r) return r.error();
    g->id_ = ifc::get<ifc::create_flow_group_out::group_id>(r->data());
    g->first_ = first;
    g->last_ = last;
    g->created();
    return g;
}

status flow_group::destroy() {
    auto in = command<ifc::destroy_flow_group_in>(cmd_opcode::DESTROY_FLOW_GROUP);
    ifc::set<ifc::destroy_flow_group_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::destroy_flow_group_in::table_id>(in.data(), table_->id());
    ifc::set<ifc::destroy_flow_group_in::group_id>(in.data(), id_);
    return destroy_with(std::move(in));
}

flow_group::~flow_group() { (void)destroy(); }

// --- counters --------------------------------------------------------------------------

result<std::shared_ptr<flow_counter>> flow_counter::create(hca& h) {
    std::shared_ptr<flow_counter> c(new flow_counter(h));
    auto r = h.exec(command<ifc::alloc_flow_counter_in>(cmd_opcode::ALLOC_FLOW_COUNTER),
                    ifc::alloc_flow_counter_out::size_bytes);
    if (!r) return r.error();
    c->id_ = ifc::get<ifc::alloc_flow_counter_out::flow_counter_id>(r->data());
    c->created();
    return c;
}

result<traffic> flow_counter::query(bool clear) {
    auto in = command<ifc::query_flow_counter_in>(cmd_opcode::QUERY_FLOW_COUNTER);
    ifc::set<ifc::query_flow_counter_in::flow_counter_id>(in.data(), id_);
    ifc::set<ifc::query_flow_counter_in::clear>(in.data(), clear ? 1 : 0);
    auto r = owner().exec(in, ifc::query_flow_counter_out::size_bytes + ifc::traffic_counter::size_bytes);
    if (!r) return r.error();
    const std::byte* tc = r->data() + ifc::query_flow_counter_out::size_bytes;
    return traffic{ifc::get<ifc::traffic_counter::packets>(tc), ifc::get<ifc::traffic_counter::octets>(tc)};
}

status flow_counter::destroy() {
    auto in = command<ifc::dealloc_flow_counter_in>(cmd_opcode::DEALLOC_FLOW_COUNTER);
    ifc::set<ifc::dealloc_flow_counter_in::flow_counter_id>(in.data(), id_);
    return destroy_with(std::move(in));
}

flow_counter::~flow_counter() { (void)destroy(); }

// --- rules -----------------------------------------------------------------------------

result<std::shared_ptr<flow_rule>> flow_rule::create(std::shared_ptr<flow_group> group, unsigned index,
                                                     const flow_match& match, const action& a) {
    if (!group) return error{EINVAL, "flow_rule::create: no group"};
    if (index < group->first() || index > group->last()) {
        return error{EINVAL, fmt::format("flow_rule::create: entry {} outside its group's {} to {}", index,
                                         group->first(), group->last())};
    }
    const bool fwd = !a.to_tirs.empty() || a.to_table != nullptr;
    if (fwd == a.drop) return error{EINVAL, "flow_rule::create: a rule either forwards or drops"};
    for (const auto& t : a.to_tirs) {
        if (!t) return error{EINVAL, "flow_rule::create: a null TIR"};
    }
    hca& h = group->table()->device();
    const std::uint32_t table_id = group->table()->id();
    const std::uint32_t group_id = group->id();
    std::shared_ptr<flow_rule> rule(new flow_rule(std::move(group)));
    const std::size_t ndest = a.to_tirs.size() + (a.to_table ? 1 : 0);
    const std::size_t ncount = a.count ? 1 : 0;
    auto in = command<ifc::set_fte_in>(cmd_opcode::SET_FLOW_TABLE_ENTRY, 0, (ndest + ncount) * 8);
    ifc::set<ifc::set_fte_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::set_fte_in::table_id>(in.data(), table_id);
    ifc::set<ifc::set_fte_in::flow_index>(in.data(), index);
    std::byte* fc = ifc::at<ifc::set_fte_in::flow_context>(in.data());
    ifc::set<ifc::flow_context::group_id>(fc, group_id);
    ifc::set<ifc::flow_context::flow_tag>(fc, a.flow_tag);
    std::uint32_t act = a.drop ? static_cast<std::uint32_t>(ifc::flow_action::DROP)
                               : static_cast<std::uint32_t>(ifc::flow_action::FWD_DEST);
    if (a.count) act |= static_cast<std::uint32_t>(ifc::flow_action::COUNT);
    ifc::set<ifc::flow_context::action>(fc, act);
    ifc::set<ifc::flow_context::destination_list_size>(fc, static_cast<std::uint32_t>(ndest));
    ifc::set<ifc::flow_context::flow_counter_list_size>(fc, static_cast<std::uint32_t>(ncount));
    std::memcpy(ifc::at<ifc::flow_context::match_value>(fc), match.value().data(), flow_match::size);
    std::byte* list = in.data() + ifc::set_fte_in::size_bytes;
    for (const auto& t : a.to_tirs) {
        ifc::set<ifc::dest_format_struct::destination_type>(list, static_cast<std::uint32_t>(ifc::flow_destination_type::TIR));
        ifc::set<ifc::dest_format_struct::destination_id>(list, t->tirn());
        list += ifc::dest_format_struct::size_bytes;
    }
    if (a.to_table) {
        ifc::set<ifc::dest_format_struct::destination_type>(
            list, static_cast<std::uint32_t>(ifc::flow_destination_type::FLOW_TABLE));
        ifc::set<ifc::dest_format_struct::destination_id>(list, a.to_table->id());
        list += ifc::dest_format_struct::size_bytes;
    }
    if (a.count) ifc::set<ifc::flow_counter_list::flow_counter_id>(list, a.count->id());
    auto r = h.exec(in, ifc::set_fte_out::size_bytes);
    if (!r) return r.error();
    rule->action_ = a;
    rule->index_ = index;
    rule->created();
    return rule;
}

status flow_rule::destroy() {
    auto in = command<ifc::delete_fte_in>(cmd_opcode::DELETE_FLOW_TABLE_ENTRY);
    ifc::set<ifc::delete_fte_in::table_type>(in.data(), kNicRx);
    ifc::set<ifc::delete_fte_in::table_id>(in.data(), group_->table()->id());
    ifc::set<ifc::delete_fte_in::flow_index>(in.data(), index_);
    return destroy_with(std::move(in));
}

flow_rule::~flow_rule() { (void)destroy(); }

// --- the vport's filter ------------------------------------------------------------------

status set_multicast_macs(hca& h, std::span<const std::array<std::uint8_t, 6>> groups) {
    using in_t = ifc::modify_nic_vport_context_in;
    constexpr std::uint32_t kMulticastList = 1;  // allowed_list_type (Linux MLX5_NVPRT_LIST_TYPE_MC)
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_current_mc_list>(h.caps().data());
    if (groups.size() > (std::size_t{1} << log_max)) {
        return error{EINVAL, fmt::format("set_multicast_macs: {} groups (the device keeps {})", groups.size(),
                                         std::size_t{1} << log_max)};
    }
    for (const auto& g : groups) {
        if ((g[0] & 1) == 0) return error{EINVAL, "set_multicast_macs: a unicast MAC"};
    }
    auto in = command<in_t>(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT, 0, groups.size() * 8);
    ifc::set<ifc::modify_nic_vport_field_select::addresses_list>(ifc::at<in_t::field_select>(in.data()), 1);
    std::byte* v = ifc::at<in_t::nic_vport_context>(in.data());
    ifc::set<ifc::nic_vport_context::allowed_list_type>(v, kMulticastList);
    ifc::set<ifc::nic_vport_context::allowed_list_size>(v, static_cast<std::uint32_t>(groups.size()));
    for (std::size_t i = 0; i < groups.size(); ++i) hw::set_mac(in.data() + in_t::size_bytes + 8 * i, groups[i]);
    auto r = h.exec(in, ifc::modify_nic_vport_context_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

status set_promiscuous(hca& h, bool unicast, bool multicast, bool all) {
    using in_t = ifc::modify_nic_vport_context_in;
    auto in = command<in_t>(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT);
    ifc::set<ifc::modify_nic_vport_field_select::promisc>(ifc::at<in_t::field_select>(in.data()), 1);
    std::byte* v = ifc::at<in_t::nic_vport_context>(in.data());
    ifc::set<ifc::nic_vport_context::promisc_uc>(v, unicast ? 1 : 0);
    ifc::set<ifc::nic_vport_context::promisc_mc>(v, multicast ? 1 : 0);
    ifc::set<ifc::nic_vport_context::promisc_all>(v, all ? 1 : 0);
    auto r = h.exec(in, ifc::modify_nic_vport_context_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

}  // namespace cxv::driver
