#include "api/neighbours.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "driver/hca/hca.h"
#include "hw/mac.h"

namespace cxv::eth {

namespace {

constexpr std::uint16_t kEthertypeArp = 0x0806;
constexpr std::uint16_t kEthertypeIpv4 = 0x0800;
constexpr std::uint16_t kArpRequest = 1;
// RFC 826's fields after the Ethernet header: hardware type 1 (Ethernet), protocol type
// IPv4, their lengths 6 and 4, the operation, then sha, spa, tha, tpa.
constexpr std::size_t kEthHeader = 14, kArpBody = 28;
constexpr unsigned kTries = 3;
constexpr auto kWait = std::chrono::milliseconds(300);

std::string dotted(const ipv4& a) { return fmt::format("{}.{}.{}.{}", a[0], a[1], a[2], a[3]); }

}  // namespace

neighbours::~neighbours() {
    // The rule before the queue it steers to (its steering may outlive both).
    rule_.reset();
}

std::optional<mac> neighbours::mac_of_link_local(const gid& g) noexcept { return hw::mac_of_link_local_gid(g.data()); }

bool neighbours::ipv4_mapped(const gid& g) noexcept {
    return std::all_of(g.begin(), g.begin() + 10, [](std::uint8_t b) { return b == 0; }) && g[10] == 0xff &&
           g[11] == 0xff;
}

std::optional<mac> neighbours::mac_of_multicast(const gid& g) noexcept {
    if (g[0] == 0xff) return multicast_mac(ipv6(g));  // RFC 2464 7
    // RFC 1112: an IPv4-mapped group (224.0.0.0/4).
    if (ipv4_mapped(g) && (g[12] & 0xf0) == 0xe0) return multicast_mac(ipv4{g[12], g[13], g[14], g[15]});
    return std::nullopt;
}

std::array<std::byte, 60> neighbours::arp_request(const mac& sha, const ipv4& spa, const ipv4& tpa) noexcept {
    std::array<std::uint8_t, 60> f{};
    std::fill_n(f.begin(), 6, 0xff);  // to every host on the segment
    std::copy(sha.begin(), sha.end(), f.begin() + 6);
    f[12] = kEthertypeArp >> 8;
    f[13] = kEthertypeArp & 0xff;
    std::uint8_t* a = f.data() + kEthHeader;
    a[1] = 1;  // hardware type: Ethernet
    a[2] = kEthertypeIpv4 >> 8;
    a[3] = kEthertypeIpv4 & 0xff;
    a[4] = 6;
    a[5] = 4;
    a[7] = kArpRequest;
    std::copy(sha.begin(), sha.end(), a + 8);
    std::copy(spa.begin(), spa.end(), a + 14);
    // tha (a + 18) stays zero: the one unknown.
    std::copy(tpa.begin(), tpa.end(), a + 24);
    std::array<std::byte, 60> out;
    std::memcpy(out.data(), f.data(), f.size());
    return out;
}

bool neighbours::arp_sender(const std::byte* frame, std::size_t len, ipv4& spa, mac& sha) noexcept {
    if (len < kEthHeader + kArpBody) return false;
    const auto* f = reinterpret_cast<const std::uint8_t*>(frame);
    const std::uint8_t* a = f + kEthHeader;
    if ((f[12] << 8 | f[13]) != kEthertypeArp || (a[0] << 8 | a[1]) != 1 || (a[2] << 8 | a[3]) != kEthertypeIpv4 ||
        a[4] != 6 || a[5] != 4) {
        return false;
    }
    std::copy(a + 8, a + 14, sha.begin());
    std::copy(a + 14, a + 18, spa.begin());
    return true;
}

std::size_t neighbours::known() const {
    std::lock_guard lock(mu_);
    return known_.size();
}

status neighbours::ensure_queue() {
    if (broken_) return *broken_;
    if (!q_) {
        queue::attr a;
        a.send_entries = 64;
        a.recv_entries = 64;
        auto q = queue::create(*dev_, a);
        if (!q) {
            broken_ = error{q.error().code, "ARP's raw queue: " + q.error().message};
            return *broken_;
        }
        q_ = std::move(q).value();
    }
    // The function's one root table may have been replaced (steering::create) since the
    // rule was made: it goes where packets are steered now.
    auto s = steering::of(*dev_);
    if (!s) {
        broken_ = error{s.error().code, "ARP's steering: " + s.error().message};
        return *broken_;
    }
    if (*s != steer_ || !rule_) {
        rule_.reset();
        steer_ = std::move(s).value();
        match m;
        m.ethertype = kEthertypeArp;
        auto r = steer_->add(m, q_);
        if (!r) {
            broken_ = error{r.error().code, "ARP's steering rule: " + r.error().message};
            return *broken_;
        }
        rule_ = std::move(r).value();
    }
    return done{};
}

void neighbours::take_answers() {
    if (!q_) return;
    std::array<packet, 16> p;
    for (int n; (n = q_->poll(p)) > 0;) {
        for (int i = 0; i < n; ++i) {
            ipv4 spa;
            mac sha;
            const packet& k = p[static_cast<std::size_t>(i)];
            // Every ARP frame names its sender (RFC 826: the merge step), a request too.
            if (arp_sender(k.data, k.length, spa, sha) && spa != ipv4{}) known_[spa] = sha;
        }
    }
    std::array<send_completion, 16> c;
    while (q_->poll_send(c) > 0) {
    }
}

result<mac> neighbours::resolve(unsigned sgid_index, const gid& dgid) {
    if (auto m = mac_of_link_local(dgid)) return *m;
    if (auto m = mac_of_multicast(dgid)) return *m;
    // One of this function's own addresses: its packets loop back (as Linux gives its
    // own MAC for a local address); nobody on the wire would answer for it.
    const auto& own = dev_->hca().roce_gids();
    if (std::find(own.begin(), own.end(), dgid) != own.end()) return address(*dev_);
    if (!ipv4_mapped(dgid)) {
        return error{ENOTSUP, "cxv: the MAC of an IPv6 RoCE GID that is not link-local EUI-64 (neighbour discovery "
                              "is not done yet)"};
    }
    const ipv4 tpa{dgid[12], dgid[13], dgid[14], dgid[15]};
    std::lock_guard lock(mu_);
    take_answers();
    if (const auto it = known_.find(tpa); it != known_.end()) return it->second;

    if (sgid_index >= own.size()) {
        return error{EINVAL, fmt::format("cxv: no RoCE GID at index {} to ask for {}'s MAC from", sgid_index, dotted(tpa))};
    }
    const gid& sgid = own[sgid_index];
    const ipv4 spa = ipv4_mapped(sgid) ? ipv4{sgid[12], sgid[13], sgid[14], sgid[15]} : dev_->hca().ipv4();
    if (auto s = ensure_queue(); !s) return s.error();
    const auto frame = arp_request(address(*dev_), spa, tpa);
    for (unsigned t = 0; t < kTries; ++t) {
        if (const int rc = q_->send(frame); rc != 0) return error{rc, "cxv: sending an ARP request failed"};
        ++requests_;
        const auto end = std::chrono::steady_clock::now() + kWait;
        do {
            take_answers();
            if (const auto it = known_.find(tpa); it != known_.end()) return it->second;
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        } while (std::chrono::steady_clock::now() < end);
    }
    return error{EHOSTUNREACH, fmt::format("cxv: no ARP answer for {} (asked {} times from {}, {} ms each)",
                                           dotted(tpa), kTries, dotted(spa), kWait.count())};
}

}  // namespace cxv::eth
