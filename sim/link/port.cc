#include "sim/link/port.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "sim/wire/frame.h"
#include "sim/wire/neighbour.h"
#include "sim/wire/pcap.h"

namespace cxv::sim::link {

namespace {

using clock_type = std::chrono::steady_clock;
using gid = std::array<std::uint8_t, 16>;
using mac = std::array<std::uint8_t, 6>;

constexpr mac kNoMac{};
// Neighbour resolution: asks again every 200 ms, gives up after 5 tries (as Linux's
// ARP, mcast_solicit 3 + some); holds at most this many packets per address.
constexpr auto kSolicitEvery = std::chrono::milliseconds(200);
constexpr unsigned kSolicitTries = 5;
constexpr std::size_t kHeldPerAddress = 256;
constexpr auto kCableCheckEvery = std::chrono::milliseconds(20);

// The pcap writers of this process, one per file, shared by the ports that name it.
std::shared_ptr<wire::pcap_writer> shared_pcap(const std::string& path, bool ethernet) {
    static std::mutex mu;
    static std::map<std::string, std::weak_ptr<wire::pcap_writer>>* open = new std::map<std::string, std::weak_ptr<wire::pcap_writer>>();
    std::lock_guard lock(mu);
    if (auto w = (*open)[path].lock()) return w;
    auto w = wire::pcap_writer::open(path, ethernet ? wire::pcap_link::ethernet : wire::pcap_link::infiniband_erf);
    if (!w) return nullptr;
    std::shared_ptr<wire::pcap_writer> s = std::move(w).value();
    (*open)[path] = s;
    return s;
}

bool is_zero(const mac& m) { return m == kNoMac; }

}  // namespace

result<std::unique_ptr<port>> port::create(const device_config& cfg, const object_tables& tables) {
    station s;
    s.ethernet = cfg.port == port_type::ETHERNET;
    s.mac = cfg.mac;
    s.lid = cfg.lid;
    std::unique_ptr<segment_port> seg;
    if (cfg.fabric_dir.empty()) {
        seg = attach_in_process(cfg.fabric, s);
    } else {
        auto d = attach_directory(cfg.fabric_dir, s);
        if (!d) return d.error();
        seg = std::move(d).value();
    }
    std::unique_ptr<port> p(new port(cfg, tables, std::move(seg)));
    if (!cfg.pcap.empty()) {
        p->pcap_ = shared_pcap(cfg.pcap, s.ethernet);
        if (!p->pcap_) return error{EIO, "device model: cannot write the pcap file " + cfg.pcap};
    }
    if (!cfg.fabric_dir.empty()) p->down_file_ = cfg.fabric_dir + "/down-" + station_name(s);
    if (!s.ethernet && cfg.lid == subnet_manager_lid) p->sa_ = std::make_unique<subnet_admin>(cfg);
    return p;
}

port::port(const device_config& cfg, const object_tables& tables, std::unique_ptr<segment_port> seg)
    : cfg_(cfg), tables_(tables), seg_(std::move(seg)), in_process_(seg_->in_process()), faults_(cfg.faults) {
    std::uint64_t id = cfg.lid;
    for (const auto b : cfg.mac) id = (id << 8) | b;
    rng_.seed(cfg.faults.seed ^ (id * 0x9e3779b97f4a7c15ull));
    out_.resize(wire::max_frame_bytes);
}

port::~port() = default;

void port::set_faults(const device_config::link_faults& f) { faults_ = f; }

bool port::cable_in(clock_type::time_point now) {
    if (down_file_.empty() || now < next_cable_check_) return cable_;
    next_cable_check_ = now + kCableCheckEvery;
    struct stat st;
    cable_ = ::stat(down_file_.c_str(), &st) != 0;
    return cable_;
}

// --- out -------------------------------------------------------------------------------

port::sent port::transmit(wire::packet&& p, clock_type::time_point now) {
    if (!cable_) return sent::discarded;
    if (p.net.link == wire::link_kind::ib) return send_packet(p, now);
    p.net.src_mac = cfg_.mac;
    if (is_zero(p.net.dst_mac)) {
        if (wire::mac_of_link_local_gid(p.net.dgid, p.net.dst_mac)) {
            // resolved from the GID itself
        } else if (own_address(p.net.dgid)) {
            p.net.dst_mac = cfg_.mac;  // one of this port's own addresses: looped back
        } else if (const auto it = neighbours_.find(p.net.dgid); it != neighbours_.end()) {
            p.net.dst_mac = it->second;
        } else {
            waiting& w = unresolved_[p.net.dgid];
            if (w.packets.size() >= kHeldPerAddress) {
                w.packets.pop_front();
                ++counters_.unresolved;
            }
            const bool first = w.packets.empty() && w.tries == 0;
            w.packets.push_back(std::move(p));
            if (first) {
                solicit(w.packets.back().net.dgid, now);
                w.tries = 1;
                w.next_try = now + kSolicitEvery;
            }
            return sent::held;
        }
    }
    return send_packet(p, now);
}

port::sent port::send_packet(wire::packet& p, clock_type::time_point now) {
    // CRCs nobody will read are left out: the frame stays in the process, and neither a
    // capture nor a fault (which may corrupt it, so its receiver must check) sees it.
    const bool later = in_process_ && !pcap_ && !faults_.any();
    const std::size_t n = wire::encode(p, out_, later ? wire::crc_fill::later : wire::crc_fill::compute);
    if (n == 0) {
        ++counters_.malformed;
        return sent::discarded;
    }
    emit(std::span<const std::byte>(out_.data(), n), now, later ? frame_crcs::absent : frame_crcs::known_good);
    return sent::wire;
}

// The link faults, then the wire.
bool port::transmit_frame(std::vector<std::byte>& frame, clock_type::time_point now, wire::ip_checksums computed) {
    if (!cable_ || cfg_.port != port_type::ETHERNET || frame.size() < wire::ethernet_header_bytes) return false;
    if (frame.size() < wire::ethernet_min_frame_bytes) frame.resize(wire::ethernet_min_frame_bytes, std::byte{0});
    // No ICRC to check: a receiver takes it as it is, and the checksums the device
    // computed as holding (a fault that may change a byte makes it `unverified`).
    emit(frame, now, known_good_with(computed.l3, computed.l4), &frame);
    return true;
}

void port::emit(std::span<const std::byte> frame, clock_type::time_point now, frame_crcs crcs,
                std::vector<std::byte>* owned) {
    if (!faults_.any()) {
        put_on_segment(frame, crcs, owned);  // as encode wrote it
        return;
    }
    if (coin_(rng_) < faults_.drop) {
        ++counters_.fault_dropped;
        return;
    }
    std::vector<std::byte> f(frame.begin(), frame.end());
    if (coin_(rng_) < faults_.corrupt) {
        // One bit after the link header (Ethernet's 14 bytes; the LRH's 8): the IP header,
        // transport headers or payload, which the ICRC (or VCRC) covers.
        const std::size_t head = cfg_.port == port_type::ETHERNET ? 14 : 8;
        if (f.size() > head) {
            std::uniform_int_distribution<std::size_t> at(head, f.size() - 1);
            f[at(rng_)] ^= std::byte{static_cast<std::uint8_t>(1u << (rng_() % 8))};
            ++counters_.fault_corrupted;
        }
    }
    const int copies = coin_(rng_) < faults_.duplicate ? 2 : 1;
    if (copies == 2) ++counters_.fault_duplicated;
    for (int c = 0; c < copies; ++c) {
        if (faults_.delay.count() > 0) {
            ++counters_.fault_delayed;
            delayed_.push_back({now + faults_.delay, f});
            continue;
        }
        if (!has_reordered_ && coin_(rng_) < faults_.reorder) {
            // Held back: it goes after the next frame.
            ++counters_.fault_reordered;
            reordered_ = f;
            has_reordered_ = true;
            continue;
        }
        put_on_segment(f, frame_crcs::unverified);  // maybe corrupted
        if (has_reordered_) {
            has_reordered_ = false;
            put_on_segment(reordered_, frame_crcs::unverified);
        }
    }
}

bool port::put_on_segment(std::span<const std::byte> frame, frame_crcs crcs, std::vector<std::byte>* owned) {
    if (!cable_) return false;  // a pulled cable carries nothing
    if (pcap_) pcap_->write(frame);
    ++counters_.frames_sent;
    if (!(owned != nullptr ? seg_->send_owned(*owned, crcs) : seg_->send(frame, crcs))) {
        ++counters_.no_route;
        return false;
    }
    return true;
}

gid port::source_ipv4() const {
    for (const auto& [index, a] : tables_.roce_addresses) {
        if (wire::is_ipv4_mapped(a.source_l3_address)) return a.source_l3_address;
    }
    gid g{};
    g[10] = g[11] = 0xff;
    std::copy(cfg_.ipv4.begin(), cfg_.ipv4.end(), g.begin() + 12);
    return g;
}

bool port::own_address(const gid& ip) const {
    if (tables_.roce_addresses.empty()) return ip == source_ipv4();
    return std::any_of(tables_.roce_addresses.begin(), tables_.roce_addresses.end(),
                       [&](const auto& e) { return e.second.source_l3_address == ip; });
}

// ARP for an IPv4 address, neighbour solicitation for an IPv6 one.
void port::solicit(const gid& target, clock_type::time_point now) {
    (void)now;
    std::size_t n = 0;
    if (wire::is_ipv4_mapped(target)) {
        wire::arp_message m;
        m.oper = wire::arp_request;
        m.sha = cfg_.mac;
        const gid me = source_ipv4();
        std::copy(me.begin() + 12, me.end(), m.spa.begin());
        std::copy(target.begin() + 12, target.end(), m.tpa.begin());
        n = wire::build_arp(m, wire::broadcast_mac, out_);
        ++counters_.arp_sent;
    } else {
        gid src = wire::link_local_gid(cfg_.mac);
        for (const auto& [index, a] : tables_.roce_addresses) {
            if (!wire::is_ipv4_mapped(a.source_l3_address)) {
                src = a.source_l3_address;
                break;
            }
        }
        n = wire::build_neighbour_solicitation(cfg_.mac, src, target, out_);
        ++counters_.nd_sent;
    }
    if (n != 0) put_on_segment(std::span<const std::byte>(out_.data(), n), frame_crcs::unverified);
}

void port::learn(const gid& ip, const mac& m, clock_type::time_point now) {
    if (is_zero(m)) return;
    neighbours_[ip] = m;
    const auto it = unresolved_.find(ip);
    if (it == unresolved_.end()) return;
    std::deque<wire::packet> ready = std::move(it->second.packets);
    unresolved_.erase(it);
    for (auto& p : ready) {
        p.net.dst_mac = m;
        send_packet(p, now);
    }
}

void port::retry_neighbours(clock_type::time_point now) {
    for (auto it = unresolved_.begin(); it != unresolved_.end();) {
        waiting& w = it->second;
        if (now < w.next_try) {
            ++it;
            continue;
        }
        if (w.tries >= kSolicitTries) {
            counters_.unresolved += w.packets.size();
            it = unresolved_.erase(it);
            continue;
        }
        ++w.tries;
        w.next_try = now + kSolicitEvery;
        solicit(it->first, now);
        ++it;
    }
}

// --- in --------------------------------------------------------------------------------

bool port::poll(clock_type::time_point now, const std::function<void(wire::packet&, std::size_t)>& deliver,
                const frame_sink& deliver_frame) {
    bool any = false;
    cable_in(now);
    while (!delayed_.empty() && delayed_.front().due <= now) {
        put_on_segment(delayed_.front().frame, frame_crcs::unverified);
        delayed_.pop_front();
        any = true;
    }
    if (!unresolved_.empty()) retry_neighbours(now);
    any |= seg_->flush();
    frame_crcs crcs{};
    for (unsigned n = 0; n < 256 && seg_->receive(in_, crcs, now); ++n) {
        any = true;
        if (!cable_) continue;  // a pulled cable receives nothing
        ++counters_.frames_received;
        if (pcap_) {
            if (crcs == frame_crcs::absent) wire::seal(in_, cfg_.port == port_type::ETHERNET);
            pcap_->write(in_);
        }
        handle_frame(in_, crcs, now, deliver, deliver_frame);
    }
    return any;
}

// ARP and neighbour discovery: learn the sender, answer for our own addresses. True
// when the frame was one of them.
bool port::handle_neighbour(std::span<const std::byte> f, clock_type::time_point now) {
    wire::arp_message arp;
    if (wire::parse_arp(f, arp)) {
        const gid sender = wire::ipv4_mapped_gid(arp.spa);
        learn(sender, arp.sha, now);
        if (arp.oper == wire::arp_request && own_address(wire::ipv4_mapped_gid(arp.tpa))) {
            const std::size_t n = wire::build_arp(wire::arp_reply_to(arp, cfg_.mac), arp.sha, out_);
            ++counters_.arp_answered;
            if (n != 0) put_on_segment(std::span<const std::byte>(out_.data(), n), frame_crcs::unverified);
        }
        return true;
    }
    wire::nd_message nd;
    if (wire::parse_nd(f, nd)) {
        if (nd.type == wire::icmpv6_neighbor_advertisement) {
            if (nd.has_lladdr) learn(nd.target, nd.lladdr, now);
            return true;
        }
        gid unspecified{};
        if (nd.has_lladdr && nd.src != unspecified) learn(nd.src, nd.lladdr, now);
        if (own_address(nd.target)) {
            const std::size_t n = wire::build_neighbour_advertisement(cfg_.mac, nd.target, nd.eth_src, nd.src, true, out_);
            ++counters_.nd_answered;
            if (n != 0) put_on_segment(std::span<const std::byte>(out_.data(), n), frame_crcs::unverified);
        }
        return true;
    }
    return false;
}

namespace {

// Whether an Ethernet frame is a RoCEv2 packet: IPv4 or IPv6 (behind one VLAN tag at
// most), UDP, destination port 4791. Anything else is the NIC's.
bool is_roce(std::span<const std::byte> f) {
    auto u16 = [&](std::size_t at) {
        return static_cast<unsigned>(std::to_integer<unsigned>(f[at]) << 8 | std::to_integer<unsigned>(f[at + 1]));
    };
    if (f.size() < wire::ethernet_header_bytes) return false;
    std::size_t at = 12;
    if (u16(at) == 0x8100 && f.size() >= at + 4) at += 4;
    const unsigned type = u16(at);
    at += 2;
    std::size_t l4 = 0;
    if (type == wire::ethertype_ipv4 && f.size() >= at + wire::ipv4_header_bytes) {
        if (std::to_integer<unsigned>(f[at + 9]) != wire::ip_protocol_udp) return false;
        l4 = at + (std::to_integer<unsigned>(f[at]) & 0xf) * 4u;
    } else if (type == wire::ethertype_ipv6 && f.size() >= at + wire::ipv6_header_bytes) {
        if (std::to_integer<unsigned>(f[at + 6]) != wire::ip_protocol_udp) return false;
        l4 = at + wire::ipv6_header_bytes;
    } else {
        return false;
    }
    return f.size() >= l4 + wire::udp_header_bytes && u16(l4 + 2) == wire::roce_v2_udp_port;
}

}  // namespace

// The vport's filter (PRM "NIC Vport Context"): the function's own MAC and broadcast;
// multicast groups of its list, all of them with promisc_mc; the unicast MACs of its list,
// all of them with promisc_uc; everything with promisc_all.
bool port::vport_takes(std::span<const std::byte> f) const {
    std::array<std::uint8_t, 6> dmac;
    for (std::size_t i = 0; i < 6; ++i) dmac[i] = std::to_integer<std::uint8_t>(f[i]);
    const vport_filter& v = tables_.eth.filter;
    if (dmac == cfg_.mac || v.promisc_all) return true;
    if (dmac == std::array<std::uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) return true;
    const bool multicast = (dmac[0] & 1) != 0;
    const auto& list = multicast ? v.mc : v.uc;
    return (multicast ? v.promisc_mc : v.promisc_uc) || std::find(list.begin(), list.end(), dmac) != list.end();
}

void port::handle_frame(std::span<const std::byte> f, frame_crcs crcs, clock_type::time_point now,
                        const std::function<void(wire::packet&, std::size_t)>& deliver,
                        const frame_sink& deliver_frame) {
    const auto check = crcs == frame_crcs::unverified ? wire::crc_check::verify : wire::crc_check::trusted;
    if (cfg_.port == port_type::ETHERNET) {
        // The port answers ARP and neighbour discovery for the RoCE addresses itself (a
        // card leaves that to the host's stack); the frames go on to the flow tables too,
        // where a netdev's or an application's rule may want them.
        const bool neighbour = handle_neighbour(f, now);
        if (neighbour || !is_roce(f)) {
            if (!deliver_frame || !vport_takes(f)) {
                ++counters_.not_for_us;
                return;
            }
            ++counters_.raw_frames;
            deliver_frame(f, wire::ip_checksums{l3_known_good(crcs), l4_known_good(crcs)});
            return;
        }
    }
    wire::packet p;  // a RoCE or InfiniBand packet, decoded (not built for a raw frame)
    if (cfg_.port == port_type::ETHERNET) {
        const auto s = wire::decode_roce(f, p, check);
        if (s == wire::decode_status::not_roce) {
            ++counters_.not_for_us;
            return;
        }
        if (s == wire::decode_status::bad_icrc || s == wire::decode_status::bad_checksum) {
            ++counters_.bad_crc;
            return;
        }
        if (s != wire::decode_status::ok) {
            ++counters_.malformed;
            return;
        }
        // Another station's frame (a flooding switch), or a group the vport's filter does
        // not take (multicast RoCE needs the group's MAC in the vport's list, as a
        // netdev's join puts it there, or promiscuous multicast).
        const bool group = (p.net.dst_mac[0] & 1) != 0;
        if (group ? !vport_takes(f) : p.net.dst_mac != cfg_.mac) {
            ++counters_.not_for_us;
            return;
        }
    } else {
        const auto s = wire::decode_ib(f, p, check);
        if (s == wire::decode_status::bad_icrc || s == wire::decode_status::bad_vcrc) {
            ++counters_.bad_crc;
            return;
        }
        if (s != wire::decode_status::ok) {
            ++counters_.malformed;
            return;
        }
        // The port's LID, or a multicast LID (IBA 7.11: 0xC000 to 0xFFFE), which the
        // fabric floods (it has no subnet manager to program the switches' forwarding).
        const bool group = p.net.dlid >= 0xc000 && p.net.dlid != 0xffff;
        if (p.net.dlid != cfg_.lid && !group) {
            ++counters_.not_for_us;
            return;
        }
        if (sa_ && !group) {
            wire::packet reply;
            if (sa_->answer(p, reply)) {
                ++counters_.sa_answered;
                send_packet(reply, now);
                return;
            }
        }
    }
    deliver(p, f.size());
}

}  // namespace cxv::sim::link
