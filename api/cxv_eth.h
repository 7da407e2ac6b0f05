// cxv's raw Ethernet API (docs/ethernet.md): queues that send whole frames and receive
// packets with the device's hardware timestamp, steering rules that pick which packets
// reach which queue, RSS over several queues, and multicast groups.
//
//   auto dev = cxv::device::open(bdf).value();
//   auto q = cxv::eth::queue::create(*dev, {}).value();
//   auto steer = cxv::eth::steering::create(*dev).value();
//   steer->join(cxv::eth::ipv4{239, 1, 1, 1});              // the group's MAC let in
//   auto rule = steer->add({.ip_version = 4, .dst_ipv4 = cxv::eth::ipv4{239, 1, 1, 1},
//                           .udp_dport = 31337}, q, {.flow_tag = 7}).value();
//   cxv::eth::packet pkts[32];
//   int n = q->poll(pkts);                                   // data, length, timestamp ...
//   q->send(frame, cxv::eth::l3_csum | cxv::eth::l4_csum);
//
// A queue is an SQ and an RQ with their CQs (PRM "Transport Interface"), a TIS and a
// direct TIR; the packets a rule steers to it arrive in its RQ. Objects are
// shared_ptr-owned and keep what they use alive; destroying a rule stops its packets
// first. Control calls return result or status; the fast path (send, poll, poll_send)
// returns counts or errno values and never allocates, locks, makes a system call or logs.
// Threads: one sender and one receiver per queue (they may be two threads).
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "api/cxv.h"
#include "base/result.h"
#include "queues/eth_queue.h"

namespace cxv {

namespace driver {
class flow_counter;
class flow_group;
class flow_rule;
class flow_table;
class rq;
class rqt;
class sq;
class tir;
class tis;
class transport_domain;
}  // namespace driver

namespace eth {

using mac = std::array<std::uint8_t, 6>;
using ipv4 = std::array<std::uint8_t, 4>;
using ipv6 = std::array<std::uint8_t, 16>;

// A received packet (queues/eth_queue.h): data and length, the rule's flow tag, the RSS
// hash, the checks that passed, the VLAN tag removed, and the device clock's ticks when
// it arrived (queue::to_ns).
using packet = queues::eth_packet;
using send_completion = queues::eth_send_completion;

// send() flags.
inline constexpr unsigned signaled = queues::eth_signaled;  // a send_completion when it left
inline constexpr unsigned l3_csum = queues::eth_l3_csum;    // the device fills the IPv4 header checksum
inline constexpr unsigned l4_csum = queues::eth_l4_csum;    // ... and the UDP or TCP checksum
inline constexpr std::uint32_t max_inline = queues::eth_max_inline;

// The function's own MAC (its vport's), which frames to it carry.
mac address(device& d);
// The multicast MAC of an IPv4 or IPv6 group (RFC 1112: 01:00:5e and the low 23 bits;
// RFC 2464: 33:33 and the low 32 bits).
mac multicast_mac(const ipv4& group) noexcept;
mac multicast_mac(const ipv6& group) noexcept;

class queue {
public:
    struct attr {
        unsigned send_entries = 256;  // the SQ's basic blocks (a frame takes 1 to 5)
        // Cyclic: buffers of buffer_size bytes (a power of two), one packet each.
        // Striding: WQEs of 2^log_strides strides of 2^log_stride bytes, packets back to
        // back (PRM "Striding RQ": log_strides 9 to 16, log_stride 6 to 13).
        unsigned recv_entries = 512;
        unsigned buffer_size = 2048;
        bool striding = false;
        unsigned log_strides = 9;
        unsigned log_stride = 6;
        bool strip_vlan = false;  // the device removes a VLAN tag into packet::vlan_tci
        // 8-byte doorbells, or BlueFlame copies; unset: as cxv::qp chooses.
        std::optional<doorbell_mode> doorbell{};
    };
    static result<std::shared_ptr<queue>> create(device& d, const attr& a);
    ~queue();
    queue(const queue&) = delete;
    queue& operator=(const queue&) = delete;

    // A whole frame (14 to max_inline bytes; the device pads it to the minimum and adds
    // the FCS), copied into the WQE: its memory is free again on return. 0, or ENOMEM
    // when the send ring is full (poll_send() frees it), EINVAL for a bad length.
    int send(std::span<const std::byte> frame, unsigned flags = 0, std::uint64_t id = 0) noexcept {
        const auto len = static_cast<std::uint32_t>(frame.size());
        if (len < 14 || len > max_inline) [[unlikely]] return EINVAL;
        return post(flags, id, [&](unsigned f, std::uint64_t i) {
            return queues::put_eth_inline(sq_, frame.data(), len, f, i);
        });
    }
    // A frame in memory registered on this queue's PD (domain()) with `lkey`: its first 18
    // bytes go in the WQE, the device reads the rest. The memory stays as it is until its
    // completion (or, unsignaled, until a later send's).
    int send(const std::byte* frame, std::uint32_t len, std::uint32_t lkey, unsigned flags = 0,
             std::uint64_t id = 0) noexcept {
        if (len < 14) [[unlikely]] return EINVAL;
        return post(flags, id, [&](unsigned f, std::uint64_t i) {
            return queues::put_eth_frame(sq_, frame, len, lkey, f, i);
        });
    }
    // Completions of sends: those asked for with `signaled`, in order, with the device
    // clock when each left. The ring's room comes back here: keep calling it. (The id
    // ~0 is the queue's own: a send with it as its id reports no completion.)
    int poll_send(std::span<send_completion> out) noexcept;
    // Packets received since the last call (each valid until the next call).
    int poll(std::span<packet> out) noexcept { return rq_.poll(out.data(), static_cast<int>(out.size())); }
    // Receive completions that carried no packet (a cyclic buffer too small for one).
    std::uint64_t receive_errors() const noexcept { return rq_.errors(); }

    // Nanoseconds since the epoch (CLOCK_REALTIME) at a packet's or completion's ticks,
    // by the device clock (device::clock()); 0 when the device has none.
    std::int64_t to_ns(std::uint64_t ticks) const noexcept;

    const std::shared_ptr<pd>& domain() const noexcept { return pd_; }
    std::uint32_t sqn() const noexcept;
    std::uint32_t rqn() const noexcept;
    doorbell_mode doorbell() const noexcept { return sq_.mode(); }
    const std::shared_ptr<driver::tir>& tir() const noexcept { return tir_; }
    const std::shared_ptr<driver::rq>& rq_object() const noexcept { return rq_obj_; }

private:
    queue() = default;
    // Every so many unsignaled frames (a quarter of the ring's room) one asks for a
    // completion anyway, so that unsignaled sends give their room back; it carries the id
    // kOwnId, and poll_send() keeps such completions to itself.
    static constexpr std::uint64_t kOwnId = ~std::uint64_t{0};
    template <class Put>
    [[gnu::always_inline]] int post(unsigned flags, std::uint64_t id, Put put) noexcept {
        const bool own = (flags & signaled) == 0 && unsignaled_ + 1 >= signal_every_;
        if (!put(own ? flags | signaled : flags, own ? kOwnId : id)) [[unlikely]] return ENOMEM;
        unsignaled_ = (flags & signaled) != 0 || own ? 0 : unsignaled_ + 1;
        sq_.ring();
        return 0;
    }

    device* dev_ = nullptr;
    std::shared_ptr<pd> pd_;
    std::shared_ptr<driver::transport_domain> td_;
    std::shared_ptr<driver::tis> tis_;
    std::shared_ptr<driver::cq> scq_, rcq_;
    std::shared_ptr<driver::sq> sq_obj_;
    std::shared_ptr<driver::rq> rq_obj_;
    std::shared_ptr<driver::tir> tir_;
    std::unique_ptr<buffer> bufs_;
    std::shared_ptr<mr> bufs_mr_;
    std::vector<std::uint64_t> sq_ids_;
    std::vector<std::uint32_t> sq_ends_;
    queues::send_queue sq_;
    queues::eth_send_cq scq_ring_;
    queues::eth_recv_queue rq_;
    unsigned unsignaled_ = 0, signal_every_ = 64;
    driver::device_clock* clock_ = nullptr;
};

// RSS: packets spread over queues by a Toeplitz hash of the headers (PRM "RX Hash Field
// Select"): an RQ table of the queues' RQs and an indirect TIR that rules steer to.
class rss {
public:
    enum class l4 : std::uint8_t { none, udp, tcp };
    struct attr {
        unsigned ip_version = 4;  // the hash reads IPv4 or IPv6 addresses
        l4 ports = l4::udp;       // and the UDP or TCP ports (none: addresses only)
        std::optional<std::array<std::uint8_t, 40>> key{};  // unset: a random key
    };
    static result<std::shared_ptr<rss>> create(device& d, std::span<const std::shared_ptr<queue>> queues,
                                               const attr& a);
    ~rss();
    const std::shared_ptr<driver::tir>& tir() const noexcept { return tir_; }
    const std::array<std::uint8_t, 40>& key() const noexcept { return key_; }

private:
    rss() = default;
    std::vector<std::shared_ptr<queue>> queues_;
    std::shared_ptr<driver::transport_domain> td_;
    std::shared_ptr<driver::rqt> table_;
    std::shared_ptr<driver::tir> tir_;
    std::array<std::uint8_t, 40> key_{};
};

// What a rule matches (PRM "Flow Table Entry Match Set Layer 2-4", the outer headers):
// each field set is compared on the bits of its mask (all of them unless `mask` says
// otherwise); unset fields match anything. A value with bits outside its mask is refused
// (EINVAL), as Linux's mlx5 refuses such a rule.
//
//   {.dst_ipv4 = eth::ipv4{233, 54, 12, 0}, .mask = {.dst_ipv4 = {255, 255, 255, 0}}}
//
// matches the 256 groups 233.54.12.0/24. Rules whose fields or masks differ go in groups
// of their own (a group has one set of criteria).
struct match {
    std::optional<mac> dmac{}, smac{};
    std::optional<std::uint16_t> ethertype{};
    std::optional<std::uint16_t> vlan{};         // a C-VLAN tag with this VLAN ID
    std::optional<std::uint8_t> vlan_prio{};     // a C-VLAN tag with this priority (PCP, 0-7)
    std::optional<std::uint8_t> vlan_cfi{};      // a C-VLAN tag with this CFI (DEI, 0-1)
    std::optional<std::uint8_t> ip_version{};    // 4 or 6
    std::optional<std::uint8_t> ip_protocol{};
    std::optional<std::uint8_t> dscp{}, ecn{};   // the IPv4 TOS's or IPv6 traffic class's
    std::optional<ipv4> src_ipv4{}, dst_ipv4{};
    std::optional<ipv6> src_ipv6{}, dst_ipv6{};
    std::optional<std::uint16_t> udp_sport{}, udp_dport{}, tcp_sport{}, tcp_dport{};
    std::optional<std::uint32_t> ipv6_flow_label{};  // the IPv6 header's (20 bits)
    // The bits matched of each field above.
    struct masks {
        mac dmac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, smac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        std::uint16_t ethertype = 0xffff;
        std::uint16_t vlan = 0xfff;
        std::uint8_t vlan_prio = 7;
        std::uint8_t ip_protocol = 0xff;
        std::uint8_t dscp = 0x3f, ecn = 3;
        ipv4 src_ipv4{0xff, 0xff, 0xff, 0xff}, dst_ipv4{0xff, 0xff, 0xff, 0xff};
        ipv6 src_ipv6{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        ipv6 dst_ipv6{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        std::uint16_t sport = 0xffff, dport = 0xffff;  // UDP's or TCP's
        std::uint32_t ipv6_flow_label = 0xfffff;
    } mask{};
};

class steering;

// A steering rule: while it exists, matching packets go where it says. Destroying it
// deletes its entry.
class rule {
public:
    struct options {
        std::uint32_t flow_tag = 0;  // carried by each packet it steers (24 bits)
        bool count = false;          // a flow counter: counters()
        // 0 to 15 (steering::kPriorities - 1): a packet meets every rule of a lower number
        // before any of a higher one, and the rules of one priority in the order they were
        // added.
        unsigned priority = 0;
    };
    ~rule();
    rule(const rule&) = delete;
    rule& operator=(const rule&) = delete;
    // The packets and bytes it matched (options::count; ENOENT without a counter).
    result<traffic> counters(bool clear = false);

private:
    friend class steering;
    rule() = default;
    std::shared_ptr<steering> owner_;
    std::shared_ptr<driver::flow_rule> rule_;
    std::shared_ptr<driver::flow_counter> counter_;
    std::shared_ptr<queue> queue_;
    std::shared_ptr<rss> rss_;
    std::shared_ptr<driver::tir> tir_;
    unsigned priority_ = 0, group_ = 0, index_ = 0;
};

// A function's receive steering: its root flow table (the first table received packets
// meet), the rules in it, and the vport's multicast groups and promiscuous modes. One per
// device: create() makes the table root, and the device's steering from then on (of()).
// Rules of the same fields share a flow group; a packet goes where the first matching
// rule (by priority, then in the order they were added) says, and is dropped when none
// matches. The rules of priority 0 are in the root table; each other priority in use has
// a table of its own, at that level, which the table of the priority before it misses to
// (PRM "Flow Table Levels"; MODIFY_FLOW_TABLE when one comes between two).
class steering : public std::enable_shared_from_this<steering> {
public:
    struct attr {
        unsigned log_size = 10;   // entries in each priority's table
        unsigned group_size = 64;  // entries per group of rules with the same fields
    };
    static constexpr unsigned kPriorities = 16;
    static result<std::shared_ptr<steering>> create(device& d, const attr& a);
    static result<std::shared_ptr<steering>> create(device& d) { return create(d, attr{}); }
    // The device's steering: the last one create() made while it lives, else a new one
    // (attr{}). What cxv's own rules go to (the verbs' ibv_create_flow, ARP's answers:
    // api/neighbours.h), so that they share the root table with the application's.
    static result<std::shared_ptr<steering>> of(device& d);
    ~steering();

    // A rule to a queue, to an RSS group, or dropping what it matches.
    result<std::unique_ptr<rule>> add(const match& m, std::shared_ptr<queue> to, const rule::options& o = {});
    result<std::unique_ptr<rule>> add(const match& m, std::shared_ptr<rss> to, const rule::options& o = {});
    // A rule to a TIR made elsewhere (a raw packet QP's, cxv::qp::raw_tir(): the verbs'
    // ibv_create_flow), held while the rule is.
    result<std::unique_ptr<rule>> add(const match& m, std::shared_ptr<driver::tir> to, const rule::options& o = {});
    result<std::unique_ptr<rule>> drop(const match& m, const rule::options& o = {});

    // Multicast groups: frames to the group's MAC pass the vport's filter while joined
    // (MODIFY_NIC_VPORT_CONTEXT's multicast list). A rule still has to steer them. Joins
    // are counted, as a netdev's are: a group stays in the list until each join has had
    // its leave (the verbs' ibv_attach_mcast joins too, on an Ethernet port).
    status join(const ipv4& group) { return join(multicast_mac(group)); }
    status join(const ipv6& group) { return join(multicast_mac(group)); }
    status join(const mac& group);
    status leave(const ipv4& group) { return leave(multicast_mac(group)); }
    status leave(const ipv6& group) { return leave(multicast_mac(group)); }
    status leave(const mac& group);
    // The vport's promiscuous modes: every unicast frame, every multicast frame.
    status promiscuous(bool unicast, bool multicast);

private:
    friend class rule;
    steering() = default;
    struct target {
        std::shared_ptr<queue> q;
        std::shared_ptr<rss> r;
        bool drop = false;
        std::shared_ptr<driver::tir> tir;
    };
    result<std::unique_ptr<rule>> make(const match& m, target t, const rule::options& o);
    void release(unsigned priority, unsigned group, unsigned index) noexcept;
    struct group {
        std::array<std::byte, 128> criteria{};  // driver::flow_match's: outer headers, misc parameters
        std::shared_ptr<driver::flow_group> g;
        std::vector<bool> used;
        unsigned first = 0;
    };
    struct table {
        std::shared_ptr<driver::flow_table> t;
        std::vector<group> groups;
    };
    // The table of a priority, made (and chained in) at its first rule; under mu_.
    result<table*> table_of(unsigned priority);
    device* dev_ = nullptr;
    std::mutex mu_;
    std::map<unsigned, table> tables_;  // by priority; 0: the root
    std::vector<std::pair<mac, unsigned>> joined_;  // the groups and their joins
    status set_groups(const std::vector<std::pair<mac, unsigned>>& next);
    attr attr_{};
};

}  // namespace eth
}  // namespace cxv
