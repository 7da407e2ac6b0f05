// NIC receive flow steering (PRM "Flow Table"): tables, groups of entries that match on
// the same header fields, rules (an entry: the values, and what a matching packet does),
// counters, and the root table received packets meet first.
//
//   auto t = flow_table::create(h, {});                      // level 0, 2^8 entries
//   auto g = flow_group::create(t, 0, 15, flow_match{}.udp_dport(0));  // criteria
//   auto r = flow_rule::create(g, 0, flow_match{}.ip_version(4).udp_dport(31337),
//                              {.to_tirs = {tir}});
//   t->make_root();
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "driver/res/eth.h"
#include "driver/res/object.h"
#include "driver/res/q_counter.h"

namespace cxv::driver {

// Fields to match (PRM "Flow Table Entry Match Set Layer 2-4" for the outer headers,
// "Flow Table Entry Match Set Misc" for the IPv6 flow label): each setter makes the field
// part of the criteria and gives its value. The criteria are the mask's bits (all of the
// field's by default; a prefix of an address, a power-of-two range of ports), and the
// value is taken within them. A group takes the criteria; a rule takes the values, which
// must lie inside its group's criteria.
class flow_match {
public:
    // fte_match_param's first two sets: fte_match_set_lyr_2_4, fte_match_set_misc.
    static constexpr std::size_t outer_size = 64, size = 128;
    using mac = std::array<std::uint8_t, 6>;
    using ipv4 = std::array<std::uint8_t, 4>;
    using ipv6 = std::array<std::uint8_t, 16>;
    static constexpr mac all_mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static constexpr ipv4 all_ipv4{0xff, 0xff, 0xff, 0xff};
    static constexpr ipv6 all_ipv6{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    flow_match& dmac(const mac& a, const mac& mask = all_mac);
    flow_match& smac(const mac& a, const mac& mask = all_mac);
    flow_match& ethertype(std::uint16_t type, std::uint16_t mask = 0xffff);
    // A C-VLAN tag: its VLAN ID, priority (PCP) and CFI (DEI), each only when set here.
    flow_match& vlan(std::uint16_t vid, std::uint16_t mask = 0xfff);
    flow_match& vlan_prio(std::uint8_t prio, std::uint8_t mask = 7);
    flow_match& vlan_cfi(std::uint8_t cfi);
    // The IPv4 TOS or IPv6 traffic class byte: DSCP (its high 6 bits) and ECN (low 2).
    flow_match& ip_dscp(std::uint8_t dscp, std::uint8_t mask = 0x3f);
    flow_match& ip_ecn(std::uint8_t ecn, std::uint8_t mask = 3);
    flow_match& ip_version(unsigned v);   // 4 or 6
    flow_match& ip_protocol(std::uint8_t proto, std::uint8_t mask = 0xff);
    flow_match& src_ipv4(const ipv4& a, const ipv4& mask = all_ipv4);
    flow_match& dst_ipv4(const ipv4& a, const ipv4& mask = all_ipv4);
    flow_match& src_ipv6(const ipv6& a, const ipv6& mask = all_ipv6);
    flow_match& dst_ipv6(const ipv6& a, const ipv6& mask = all_ipv6);
    flow_match& udp_sport(std::uint16_t port, std::uint16_t mask = 0xffff);
    flow_match& udp_dport(std::uint16_t port, std::uint16_t mask = 0xffff);
    flow_match& tcp_sport(std::uint16_t port, std::uint16_t mask = 0xffff);
    flow_match& tcp_dport(std::uint16_t port, std::uint16_t mask = 0xffff);
    // The outer IPv6 header's flow label (20 bits), a misc parameter.
    flow_match& ipv6_flow_label(std::uint32_t label, std::uint32_t mask = 0xfffff);

    const std::array<std::byte, size>& criteria() const noexcept { return criteria_; }
    const std::array<std::byte, size>& value() const noexcept { return value_; }
    bool empty() const noexcept;

private:
    std::array<std::byte, size> criteria_{}, value_{};
};

class flow_table : public hca_object {
public:
    struct attr {
        unsigned level = 0;      // a table forwards only to tables of a higher level
        unsigned log_size = 8;   // 2^log_size entries
        std::shared_ptr<flow_table> miss{};  // where an unmatched packet goes (none: dropped)
    };
    static result<std::shared_ptr<flow_table>> create(hca& h, const attr& a);
    ~flow_table();
    // DESTROY_FLOW_TABLE (the root is unset first while it is this table: hca::nic_rx_root).
    status destroy();
    // MODIFY_FLOW_TABLE: a packet no entry matches goes on to `miss` (a table of a higher
    // level), or with none is dropped (the NIC receive table's default).
    status set_miss(std::shared_ptr<flow_table> miss);
    // SET_FLOW_TABLE_ROOT: received packets meet this table first.
    status make_root();
    // The root unset: received packets meet no table (and are dropped).
    static status clear_root(hca& h);
    std::uint32_t id() const noexcept { return id_; }
    unsigned level() const noexcept { return level_; }
    unsigned size() const noexcept { return 1u << log_size_; }
    hca& device() const noexcept { return owner(); }

private:
    explicit flow_table(hca& h) : hca_object(h) {}
    std::shared_ptr<flow_table> miss_;
    std::uint32_t id_ = 0;
    unsigned level_ = 0, log_size_ = 0;
    bool root_ = false;
};

class flow_group : public hca_object {
public:
    // Entries `first` to `last` of `table`, matching on `criteria`'s fields.
    static result<std::shared_ptr<flow_group>> create(std::shared_ptr<flow_table> table, unsigned first, unsigned last,
                                                      const flow_match& criteria);
    ~flow_group();
    status destroy();
    std::uint32_t id() const noexcept { return id_; }
    unsigned first() const noexcept { return first_; }
    unsigned last() const noexcept { return last_; }
    const std::shared_ptr<flow_table>& table() const noexcept { return table_; }

private:
    explicit flow_group(std::shared_ptr<flow_table> t) : hca_object(t->device()), table_(std::move(t)) {}
    std::shared_ptr<flow_table> table_;
    std::uint32_t id_ = 0;
    unsigned first_ = 0, last_ = 0;
};

// A flow counter: the packets and bytes of the rules that count into it.
class flow_counter : public hca_object {
public:
    static result<std::shared_ptr<flow_counter>> create(hca& h);
    ~flow_counter();
    status destroy();
    result<traffic> query(bool clear = false);
    std::uint32_t id() const noexcept { return id_; }
    hca& device() const noexcept { return owner(); }

private:
    explicit flow_counter(hca& h) : hca_object(h) {}
    std::uint32_t id_ = 0;
};

class flow_rule : public hca_object {
public:
    // What a matching packet does: go to the TIRs and/or the table (forward), or be
    // dropped; be counted; carry `flow_tag` in its CQE.
    struct action {
        std::vector<std::shared_ptr<tir>> to_tirs{};
        std::shared_ptr<flow_table> to_table{};
        bool drop = false;
        std::shared_ptr<flow_counter> count{};
        std::uint32_t flow_tag = 0;  // 24 bits
    };
    // Entry `index` of the group's table (inside the group's range).
    static result<std::shared_ptr<flow_rule>> create(std::shared_ptr<flow_group> group, unsigned index,
                                                     const flow_match& match, const action& a);
    ~flow_rule();
    // DELETE_FLOW_TABLE_ENTRY.
    status destroy();
    unsigned index() const noexcept { return index_; }

private:
    explicit flow_rule(std::shared_ptr<flow_group> g) : hca_object(g->table()->device()), group_(std::move(g)) {}
    std::shared_ptr<flow_group> group_;
    action action_;
    unsigned index_ = 0;
};

// The vport's receive filter (PRM "NIC Vport Context", MODIFY_NIC_VPORT_CONTEXT): which
// frames, beyond those to the function's own MAC and to broadcast, reach the flow tables.
// The multicast groups joined (their MACs; the list replaces the last one, at most
// 2^log_max_current_mc_list of them), and the promiscuous modes.
status set_multicast_macs(hca& h, std::span<const std::array<std::uint8_t, 6>> groups);
status set_promiscuous(hca& h, bool unicast, bool multicast, bool all);

}  // namespace cxv::driver
