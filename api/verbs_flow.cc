// ibv_create_flow(3) and ibv_destroy_flow(3) for raw packet QPs: each flow is a rule of
// the function's receive steering (cxv::eth::steering: the root flow table for priority
// 0, a table of its own for each other priority) whose packets go to the QP's TIR, as
// Linux's mlx5_ib makes one in its bypass tables.
#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <fmt/format.h>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "api/cxv_verbs.h"
#include "api/verbs_handles.h"

namespace {

using namespace cxv::api::handles;

static_assert(offsetof(ibv_flow_spec_ipv4, val) == offsetof(ibv_flow_spec_ipv4_ext, val) &&
              offsetof(ibv_flow_ipv4_filter, src_ip) == offsetof(ibv_flow_ipv4_ext_filter, src_ip) &&
              offsetof(ibv_flow_ipv4_filter, dst_ip) == offsetof(ibv_flow_ipv4_ext_filter, dst_ip));

struct c_flow : ibv_flow {
    std::unique_ptr<cxv::eth::rule> rule;
    c_qp* qp = nullptr;
};

// Whether `mask` has a bit set: the field is matched on those bits.
bool any(const void* mask, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(mask);
    return std::any_of(b, b + n, [](unsigned char c) { return c != 0; });
}

// Whether the value has bits the mask leaves out (Linux's mlx5 refuses such a rule:
// mlx5_core's check of a match value against its criteria).
bool stray(const void* value, const void* mask, std::size_t n) {
    const auto* v = static_cast<const unsigned char*>(value);
    const auto* k = static_cast<const unsigned char*>(mask);
    for (std::size_t i = 0; i < n; ++i) {
        if ((v[i] & ~k[i]) != 0) return true;
    }
    return false;
}

template <std::size_t N>
std::array<std::uint8_t, N> bytes_of(const void* p) {
    std::array<std::uint8_t, N> a;
    std::memcpy(a.data(), p, N);
    return a;
}

// The specs of `attr` as a rule's match and options; an errno value and its message for
// what cxv does not take.
struct parsed {
    cxv::eth::match m;
    cxv::eth::rule::options o;
    bool drop = false;
};
int parse(const ibv_flow_attr& attr, parsed& out, std::string& why) {
    const auto* p = reinterpret_cast<const unsigned char*>(&attr + 1);
    const unsigned char* const end = reinterpret_cast<const unsigned char*>(&attr) + attr.size;
    // A field with a mask: its value and mask taken, unless the value has bits outside it.
    bool bad = false;
    auto field = [&](const char* what, const void* v, const void* k, std::size_t n) {
        if (!any(k, n)) return false;
        if (stray(v, k, n) && !bad) {
            bad = true;
            why = fmt::format("ibv_create_flow: the value of {} has bits outside its mask", what);
        }
        return true;
    };
    // A TOS or traffic class byte: its DSCP and ECN, each where the mask has bits.
    auto tos = [&](std::uint8_t v, std::uint8_t k) {
        if ((k >> 2) != 0) {
            out.m.dscp = static_cast<std::uint8_t>(v >> 2);
            out.m.mask.dscp = static_cast<std::uint8_t>(k >> 2);
        }
        if ((k & 3) != 0) {
            out.m.ecn = static_cast<std::uint8_t>(v & 3);
            out.m.mask.ecn = static_cast<std::uint8_t>(k & 3);
        }
    };
    for (unsigned i = 0; i < attr.num_of_specs; ++i) {
        ibv_flow_spec s;
        std::memset(&s, 0, sizeof(s));
        if (end - p < static_cast<std::ptrdiff_t>(sizeof(s.hdr))) {
            why = "ibv_create_flow: the specs run past the attribute's size";
            return EINVAL;
        }
        std::memcpy(&s.hdr, p, sizeof(s.hdr));
        if (s.hdr.size < sizeof(s.hdr) || s.hdr.size > end - p) {
            why = fmt::format("ibv_create_flow: spec {} has size {}", i, s.hdr.size);
            return EINVAL;
        }
        std::memcpy(&s, p, std::min<std::size_t>(s.hdr.size, sizeof(s)));
        p += s.hdr.size;
        switch (s.hdr.type) {
        case IBV_FLOW_SPEC_ETH: {
            const auto& v = s.eth.val;
            const auto& k = s.eth.mask;
            if (field("the destination MAC", v.dst_mac, k.dst_mac, 6)) {
                out.m.dmac = bytes_of<6>(v.dst_mac);
                out.m.mask.dmac = bytes_of<6>(k.dst_mac);
            }
            if (field("the source MAC", v.src_mac, k.src_mac, 6)) {
                out.m.smac = bytes_of<6>(v.src_mac);
                out.m.mask.smac = bytes_of<6>(k.src_mac);
            }
            if (field("the ethertype", &v.ether_type, &k.ether_type, 2)) {
                out.m.ethertype = ntohs(v.ether_type);
                out.m.mask.ethertype = ntohs(k.ether_type);
            }
            // The tag's VLAN ID (bits 11:0), CFI (12) and priority (15:13), each matched
            // where its mask has bits (as mlx5_ib sets first_vid, first_cfi, first_prio).
            if (field("the VLAN tag", &v.vlan_tag, &k.vlan_tag, 2)) {
                const std::uint16_t tv = ntohs(v.vlan_tag), tk = ntohs(k.vlan_tag);
                if ((tk & 0x0fff) != 0) {
                    out.m.vlan = static_cast<std::uint16_t>(tv & 0x0fff);
                    out.m.mask.vlan = static_cast<std::uint16_t>(tk & 0x0fff);
                }
                if ((tk & 0x1000) != 0) out.m.vlan_cfi = static_cast<std::uint8_t>(tv >> 12 & 1);
                if ((tk & 0xe000) != 0) {
                    out.m.vlan_prio = static_cast<std::uint8_t>(tv >> 13);
                    out.m.mask.vlan_prio = static_cast<std::uint8_t>(tk >> 13);
                }
            }
            break;
        }
        case IBV_FLOW_SPEC_IPV4:
        case IBV_FLOW_SPEC_IPV4_EXT: {
            // (the two layouts share the addresses' offsets; the mask follows the value,
            // so it is at a different place in each)
            const bool ext = s.hdr.type == IBV_FLOW_SPEC_IPV4_EXT;
            const ibv_flow_ipv4_ext_filter& v = s.ipv4_ext.val;
            ibv_flow_ipv4_ext_filter k{};
            if (ext) {
                k = s.ipv4_ext.mask;
            } else {
                k.src_ip = s.ipv4.mask.src_ip;
                k.dst_ip = s.ipv4.mask.dst_ip;
            }
            out.m.ip_version = 4;
            if (field("the IPv4 source", &v.src_ip, &k.src_ip, 4)) {
                out.m.src_ipv4 = bytes_of<4>(&v.src_ip);
                out.m.mask.src_ipv4 = bytes_of<4>(&k.src_ip);
            }
            if (field("the IPv4 destination", &v.dst_ip, &k.dst_ip, 4)) {
                out.m.dst_ipv4 = bytes_of<4>(&v.dst_ip);
                out.m.mask.dst_ipv4 = bytes_of<4>(&k.dst_ip);
            }
            if (k.ttl != 0 || k.flags != 0) {
                why = "ibv_create_flow: IPv4 TTL and flags are not matched (nor are they by Linux's mlx5_ib)";
                return EOPNOTSUPP;
            }
            if (field("the IPv4 TOS", &v.tos, &k.tos, 1)) tos(v.tos, k.tos);
            if (field("the IP protocol", &v.proto, &k.proto, 1)) {
                out.m.ip_protocol = v.proto;
                out.m.mask.ip_protocol = k.proto;
            }
            break;
        }
        case IBV_FLOW_SPEC_IPV6: {
            const auto& v = s.ipv6.val;
            const auto& k = s.ipv6.mask;
            out.m.ip_version = 6;
            if (field("the IPv6 source", v.src_ip, k.src_ip, 16)) {
                out.m.src_ipv6 = bytes_of<16>(v.src_ip);
                out.m.mask.src_ipv6 = bytes_of<16>(k.src_ip);
            }
            if (field("the IPv6 destination", v.dst_ip, k.dst_ip, 16)) {
                out.m.dst_ipv6 = bytes_of<16>(v.dst_ip);
                out.m.mask.dst_ipv6 = bytes_of<16>(k.dst_ip);
            }
            if (k.hop_limit != 0) {
                why = "ibv_create_flow: the IPv6 hop limit is not matched (nor is it by Linux's mlx5_ib)";
                return EOPNOTSUPP;
            }
            // The flow label, in host order, as mlx5_ib puts it in the misc parameters
            // (outer_ipv6_flow_label); a value or mask past its 20 bits is EINVAL, as
            // ib_uverbs refuses it.
            const std::uint32_t label = ntohl(v.flow_label), label_mask = ntohl(k.flow_label);
            if (label >= (1u << 20) || label_mask >= (1u << 20)) {
                why = "ibv_create_flow: the IPv6 flow label has 20 bits (its value or mask has more)";
                return EINVAL;
            }
            if (field("the IPv6 flow label", &label, &label_mask, 4)) {
                out.m.ipv6_flow_label = label;
                out.m.mask.ipv6_flow_label = label_mask;
            }
            if (field("the IPv6 traffic class", &v.traffic_class, &k.traffic_class, 1)) {
                tos(v.traffic_class, k.traffic_class);
            }
            if (field("the IPv6 next header", &v.next_hdr, &k.next_hdr, 1)) {
                out.m.ip_protocol = v.next_hdr;
                out.m.mask.ip_protocol = k.next_hdr;
            }
            break;
        }
        case IBV_FLOW_SPEC_TCP:
        case IBV_FLOW_SPEC_UDP: {
            const bool udp = s.hdr.type == IBV_FLOW_SPEC_UDP;
            const auto& v = s.tcp_udp.val;
            const auto& k = s.tcp_udp.mask;
            // (a port match needs the IP protocol: as mlx5_ib, the spec sets it)
            out.m.ip_protocol = udp ? 17 : 6;
            out.m.mask.ip_protocol = 0xff;
            if (field("the source port", &v.src_port, &k.src_port, 2)) {
                (udp ? out.m.udp_sport : out.m.tcp_sport) = ntohs(v.src_port);
                out.m.mask.sport = ntohs(k.src_port);
            }
            if (field("the destination port", &v.dst_port, &k.dst_port, 2)) {
                (udp ? out.m.udp_dport : out.m.tcp_dport) = ntohs(v.dst_port);
                out.m.mask.dport = ntohs(k.dst_port);
            }
            break;
        }
        case IBV_FLOW_SPEC_ACTION_TAG:
            if (s.flow_tag.tag_id > 0xffffff) {
                why = fmt::format("ibv_create_flow: flow tag {:#x} (24 bits)", s.flow_tag.tag_id);
                return EINVAL;
            }
            out.o.flow_tag = s.flow_tag.tag_id;
            break;
        case IBV_FLOW_SPEC_ACTION_DROP: out.drop = true; break;
        default:
            why = fmt::format("ibv_create_flow: spec type {:#x} is not taken (eth, ipv4, ipv4_ext, ipv6, tcp, udp, "
                              "action tag and drop are)",
                              static_cast<unsigned>(s.hdr.type));
            return EOPNOTSUPP;
        }
    }
    return bad ? EINVAL : 0;
}

}  // namespace

extern "C" {

ibv_flow* cxv_create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
    if (qp == nullptr || attr == nullptr) {
        fail(EINVAL, "ibv_create_flow: no QP or attributes");
        return nullptr;
    }
    c_qp* q = qp_of(qp);
    if (qp->qp_type != IBV_QPT_RAW_PACKET) {
        fail(EOPNOTSUPP, "ibv_create_flow: flows steer to raw packet QPs");
        return nullptr;
    }
    if (attr->comp_mask != 0 || attr->type != IBV_FLOW_ATTR_NORMAL || attr->flags != 0) {
        fail(EOPNOTSUPP, "ibv_create_flow: only IBV_FLOW_ATTR_NORMAL flows without flags (no sniffer, default or "
                         "DONT_TRAP rules)");
        return nullptr;
    }
    if (attr->port != 1) {
        fail(EINVAL, fmt::format("ibv_create_flow: port {} (the function has port 1)", attr->port));
        return nullptr;
    }
    // As Linux's mlx5_ib: 16 priorities (MLX5_IB_FLOW_LAST_PRIO), ENOMEM past them.
    if (attr->priority >= cxv::eth::steering::kPriorities) {
        fail(ENOMEM, fmt::format("ibv_create_flow: priority {} (0 to {})", attr->priority,
                                 cxv::eth::steering::kPriorities - 1));
        return nullptr;
    }
    parsed p;
    std::string why;
    if (const int e = parse(*attr, p, why); e != 0) {
        fail(e, why);
        return nullptr;
    }
    p.o.priority = attr->priority;
    auto tir = q->qp->raw_tir();
    if (!tir && !p.drop) {
        fail(EINVAL, "ibv_create_flow: the QP has no receive queue");
        return nullptr;
    }
    // The function's steering, shared with cxv's own rules; kept while a flow uses it.
    auto s = cxv::eth::steering::of(*dev_of(qp->context)->dev);
    if (!s) {
        fail(s.error().code, s.error().message);
        return nullptr;
    }
    auto r = p.drop ? (*s)->drop(p.m, p.o) : (*s)->add(p.m, std::move(tir), p.o);
    if (!r) {
        fail(r.error().code, r.error().message);
        return nullptr;
    }
    auto* f = new (std::nothrow) c_flow();
    if (f == nullptr) {
        fail(ENOMEM, "out of memory");
        return nullptr;
    }
    f->context = qp->context;
    f->rule = std::move(r).value();
    f->qp = q;
    ++q->flows;
    return f;
}

int cxv_destroy_flow(ibv_flow* flow) {
    if (flow == nullptr) return fail(EINVAL, "ibv_destroy_flow: no flow");
    auto* f = static_cast<c_flow*>(flow);
    --f->qp->flows;
    delete f;  // the rule's entry deleted (DELETE_FLOW_TABLE_ENTRY)
    return 0;
}

}  // extern "C"
