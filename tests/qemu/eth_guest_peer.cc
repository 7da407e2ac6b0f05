// The cxv half of eth_guest_test: a raw Ethernet queue (api/cxv_eth.h) on the model's
// port, against ordinary UDP sockets in a QEMU guest on the same fabric (udp_guest.cc
// says the exchange). Steering rules take UDP port 5002 (IPv4 and IPv6) and the groups
// 239.1.2.3 and ff02::1:3 port 5003 to the queue; a second queue has a rule for port 5009
// only. Every packet the guest's Linux sent must carry the device's L3 and L4 "checksum
// ok" flags. Frames sent back have their checksums filled by the device, but for the ones
// meant to be wrong.
//
//   eth_guest_peer BDF COUNT BAD TIMEOUT_SECONDS
//
// Exits 0 once it has answered the guest's "report" and every check held; 1 with the
// reason otherwise (no report within TIMEOUT_SECONDS included).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "tests/program_util.h"

namespace {

namespace eth = cxv::eth;
using cxv::test::die;
using cxv::test::must;

using bytes = std::vector<std::uint8_t>;

std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
void put16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

// The ones' complement sum of the UDP datagram at `udp` (`len` bytes) with its pseudo
// header, as a receiver checks it (RFC 768, 8200): the checksum a sender would write.
std::uint16_t udp_checksum(const std::uint8_t* src, const std::uint8_t* dst, unsigned addr_len,
                           const std::uint8_t* udp, unsigned len) {
    std::uint32_t sum = 0;
    auto add = [&](const std::uint8_t* p, unsigned n) {
        for (unsigned i = 0; i + 1 < n; i += 2) sum += get16(p + i);
        if (n & 1) sum += static_cast<std::uint32_t>(p[n - 1] << 8);
    };
    add(src, addr_len);
    add(dst, addr_len);
    sum += 17 + len;
    add(udp, len);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const auto c = static_cast<std::uint16_t>(~sum);
    return c == 0 ? 0xffff : c;
}

// A UDP frame from this function: IPv4 (addresses of 4 bytes) or IPv6 (16), checksums 0.
bytes udp_frame(const eth::mac& dmac, const eth::mac& smac, const std::uint8_t* sip, const std::uint8_t* dip,
                bool v6, std::uint16_t sport, std::uint16_t dport, const std::string& payload) {
    bytes f(dmac.begin(), dmac.end());
    f.insert(f.end(), smac.begin(), smac.end());
    const std::size_t ulen = 8 + payload.size();
    if (v6) {
        f.insert(f.end(), {0x86, 0xdd, 0x60, 0, 0, 0, static_cast<std::uint8_t>(ulen >> 8),
                           static_cast<std::uint8_t>(ulen), 17, 1});
        f.insert(f.end(), sip, sip + 16);
        f.insert(f.end(), dip, dip + 16);
    } else {
        const std::size_t total = 20 + ulen;
        f.insert(f.end(), {0x08, 0x00, 0x45, 0, static_cast<std::uint8_t>(total >> 8), static_cast<std::uint8_t>(total),
                           0, 0, 0x40, 0, 1, 17, 0, 0});
        f.insert(f.end(), sip, sip + 4);
        f.insert(f.end(), dip, dip + 4);
    }
    f.insert(f.end(), {static_cast<std::uint8_t>(sport >> 8), static_cast<std::uint8_t>(sport),
                       static_cast<std::uint8_t>(dport >> 8), static_cast<std::uint8_t>(dport),
                       static_cast<std::uint8_t>(ulen >> 8), static_cast<std::uint8_t>(ulen), 0, 0});
    f.insert(f.end(), payload.begin(), payload.end());
    return f;
}

void send(eth::queue& q, const bytes& f, unsigned flags) {
    std::array<eth::send_completion, 16> c;
    const auto span = std::as_bytes(std::span(f));
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int rc;
    while ((rc = q.send(span, flags)) == ENOMEM && std::chrono::steady_clock::now() < end) q.poll_send(c);
    if (rc != 0) die("send: errno " + std::to_string(rc));
    q.poll_send(c);
}

}  // namespace

int main(int argc, char** argv) {
    cxv::test::program_name = "eth_guest_peer";
    if (argc != 5) die("usage: eth_guest_peer BDF COUNT BAD TIMEOUT_SECONDS");
    const int count = std::atoi(argv[2]);
    const int bad = std::atoi(argv[3]);
    const int timeout = std::atoi(argv[4]);
    auto dev = must(cxv::device::open(argv[1]), "open");
    const eth::mac mac = eth::address(*dev);
    const auto ip4 = dev->ipv4();
    if (!ip4) die("the port has no IPv4 address (not RoCE?)");
    const auto ip6 = must(dev->gid(0), "GID 0 (the link-local IPv6 address)");
    auto q = must(eth::queue::create(*dev, {}), "the queue");
    auto other_q = must(eth::queue::create(*dev, {.recv_entries = 16}), "the other port's queue");
    auto steer = must(eth::steering::create(*dev), "steering");
    const eth::ipv4 g4{239, 1, 2, 3};
    const eth::ipv6 g6{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 3};
    must(steer->join(g4), "joining 239.1.2.3");
    must(steer->join(g6), "joining ff02::1:3");
    std::vector<std::unique_ptr<eth::rule>> rules;
    rules.push_back(must(steer->add({.ip_version = 4, .ip_protocol = 17, .udp_dport = 5002}, q), "rule"));
    rules.push_back(must(steer->add({.ip_version = 6, .ip_protocol = 17, .udp_dport = 5002}, q), "rule"));
    rules.push_back(must(steer->add({.ip_version = 4, .ip_protocol = 17, .dst_ipv4 = g4, .udp_dport = 5003}, q), "rule"));
    rules.push_back(must(steer->add({.ip_version = 6, .ip_protocol = 17, .dst_ipv6 = g6, .udp_dport = 5003}, q), "rule"));
    auto other_rule = must(steer->add({.ip_version = 4, .udp_dport = 5009}, other_q, {.count = true}), "rule 5009");
    std::printf("eth_guest_peer: %02x:%02x:%02x:%02x:%02x:%02x %u.%u.%u.%u, rules for UDP 5002, 5003 and 5009 on RQs "
                "%#x and %#x\n",
                mac[0], mac[1], mac[2], mac[3], mac[4], mac[5], (*ip4)[0], (*ip4)[1], (*ip4)[2], (*ip4)[3], q->rqn(),
                other_q->rqn());
    std::fflush(stdout);

    std::set<std::string> unicast4, unicast6, group4, group6;
    unsigned other = 0, unchecked = 0, others_queue = 0;
    bool reported = false;
    std::array<eth::packet, 32> p;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    while (!reported && std::chrono::steady_clock::now() < end) {
        others_queue += static_cast<unsigned>(other_q->poll(std::span(p)));
        const int n = q->poll(p);
        if (n == 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            continue;
        }
        for (int i = 0; i < n; ++i) {
            const eth::packet& pk = p[static_cast<std::size_t>(i)];
            const auto* f = reinterpret_cast<const std::uint8_t*>(pk.data);
            const std::uint16_t type = get16(f + 12);
            const bool v6 = type == 0x86dd;
            if (type != 0x0800 && !v6) continue;
            const unsigned ihl = v6 ? 40 : (f[14] & 0xf) * 4u;
            const std::uint8_t* udp = f + 14 + ihl;
            const std::uint16_t dport = get16(udp + 2);
            const std::string payload(reinterpret_cast<const char*>(udp + 8), get16(udp + 4) - 8u);
            if (!pk.l3_ok() && !v6) ++unchecked;
            if (!pk.l4_ok()) ++unchecked;
            if (dport == 5003) {
                (v6 ? group6 : group4).insert(payload);
                continue;
            }
            if (dport != 5002) {
                ++other;
                continue;
            }
            (v6 ? unicast6 : unicast4).insert(payload);
            const eth::mac peer_mac{f[6], f[7], f[8], f[9], f[10], f[11]};
            const std::uint8_t* peer_ip = f + (v6 ? 22 : 26);
            const std::uint8_t* own_ip = f + (v6 ? 38 : 30);
            const std::uint16_t sport = get16(udp);
            if (payload == "send") {
                // Multicast to the groups the guest joined, then datagrams with a wrong UDP
                // checksum to its port 5001, then a correct "end".
                const eth::ipv4 to4{239, 1, 2, 4};
                const eth::ipv6 to6{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4};
                for (int k = 0; k < count; ++k) {
                    send(*q, udp_frame(eth::multicast_mac(to4), mac, ip4->data(), to4.data(), false, 5004, 5004,
                                       "from-cxv4 " + std::to_string(k)),
                         eth::l3_csum | eth::l4_csum);
                    send(*q, udp_frame(eth::multicast_mac(to6), mac, ip6.data(), to6.data(), true, 5004, 5004,
                                       "from-cxv6 " + std::to_string(k)),
                         eth::l4_csum);
                }
                for (int k = 0; k < bad; ++k) {
                    bytes b = udp_frame(peer_mac, mac, own_ip, peer_ip, false, 5001, 5001,
                                        "wrong checksum " + std::to_string(k));
                    std::uint8_t* u = b.data() + 34;
                    const std::uint16_t right = udp_checksum(own_ip, peer_ip, 4, u, static_cast<unsigned>(b.size() - 34));
                    put16(u + 6, static_cast<std::uint16_t>(right == 0xfffe ? 0x1234 : right + 1));
                    send(*q, b, eth::l3_csum);  // the IPv4 header's checksum right, the UDP one left wrong
                }
                send(*q, udp_frame(peer_mac, mac, own_ip, peer_ip, false, 5001, 5001, "end"), eth::l3_csum | eth::l4_csum);
                std::printf("eth_guest_peer: sent %d datagrams to each group, %d with a wrong checksum, and the end\n",
                            count, bad);
                continue;
            }
            std::string answer = payload;
            if (payload == "report") {
                answer = "report unicast4 " + std::to_string(unicast4.size()) + " unicast6 " +
                         std::to_string(unicast6.size()) + " group4 " + std::to_string(group4.size()) + " group6 " +
                         std::to_string(group6.size()) + " other " + std::to_string(other);
                reported = true;
            }
            // The echo: the frame turned around, its checksums to the device.
            send(*q, udp_frame(peer_mac, mac, own_ip, peer_ip, v6, 5002, sport, answer),
                 v6 ? eth::l4_csum : eth::l3_csum | eth::l4_csum);
        }
    }
    others_queue += static_cast<unsigned>(other_q->poll(std::span(p)));
    const auto counted = other_rule->counters();
    std::printf("eth_guest_peer: distinct datagrams: unicast IPv4 %zu, IPv6 %zu, group 239.1.2.3 %zu, ff02::1:3 %zu; "
                "other ports on this queue %u; port 5009's queue %u (its rule counted %llu); without the device's "
                "checksum-ok flags %u\n",
                unicast4.size(), unicast6.size(), group4.size(), group6.size(), other, others_queue,
                counted ? static_cast<unsigned long long>(counted->packets) : 0ull, unchecked);
    if (!reported) die("no report asked for within the time limit");
    if (unchecked != 0) die("packets from Linux without the device's checksum-ok flags");
    if (other != 0) die("packets of other ports reached the queue of the 5002/5003 rules");
    if (others_queue != 1) die("port 5009's datagram did not reach its own queue exactly once");
    std::printf("eth_guest_peer: ok\n");
    return 0;
}
