// The guest half of eth_guest_test: ordinary UDP sockets in a QEMU guest (Linux's own
// network stack, no RDMA) against a raw Ethernet queue of cxv on the model's fabric
// (eth_guest_peer on the host). Statically linked, it runs in the guest's initramfs.
//
//   udp_guest IFACE CXV_IPV4 CXV_IPV6 COUNT BAD
//   udp_guest feed IFACE GROUP PORT COUNT RATE
//
// The second form is a market-data feed for examples/market_data: COUNT datagrams to the
// IPv4 group GROUP:PORT at RATE per second, each an 8-byte big-endian sequence number
// from 1 and 56 bytes of "quotes".
//
// In order, each step bounded in time:
//  1. echo, IPv4 then IPv6: COUNT datagrams to CXV:5002, each answered by cxv (the frame
//     turned around, its checksums filled by the device). A socket delivers only
//     datagrams whose checksums Linux verified, so each echo that arrives is one Linux
//     accepted. The first datagram is retried while ARP or neighbour discovery and cxv's
//     start take their time.
//  2. multicast to cxv: COUNT datagrams to 239.1.2.3:5003 and to ff02::1:3 port 5003, then
//     one to CXV:5009 (a port cxv has no rule for): cxv counts them (its report at step 4).
//  3. multicast from cxv and a wrong checksum: "send" to CXV:5002 makes cxv send COUNT
//     datagrams to 239.1.2.4:5004 and ff02::1:4 port 5004 (groups joined here), BAD to
//     this guest's port 5001 with a wrong UDP checksum, then "end" to port 5001. Every
//     group datagram must arrive, none of the bad ones, and Linux's UdpInCsumErrors must
//     grow by BAD (/proc/net/snmp).
//  4. "report" to CXV:5002: cxv answers with the distinct datagrams it received (a retried
//     one counts once): COUNT + 2 IPv4 unicast ones (with "send" and "report"), COUNT IPv6
//     ones, COUNT per multicast group, and none for port 5009 on the queue of the rules.
// Prints "udp_guest: ok" and exits 0 when every check held; 1 with the reason otherwise.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

[[noreturn]] void die(const std::string& what) {
    std::printf("udp_guest: FAILED: %s\n", what.c_str());
    std::fflush(stdout);
    std::exit(1);
}

struct addr {
    sockaddr_storage ss{};
    socklen_t len = 0;
};

addr v4(const char* ip, int port) {
    addr a;
    auto* s = reinterpret_cast<sockaddr_in*>(&a.ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, ip, &s->sin_addr) != 1) die(std::string("not an IPv4 address: ") + ip);
    a.len = sizeof(sockaddr_in);
    return a;
}

addr v6(const char* ip, int port, unsigned scope) {
    addr a;
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(static_cast<std::uint16_t>(port));
    s->sin6_scope_id = scope;
    if (inet_pton(AF_INET6, ip, &s->sin6_addr) != 1) die(std::string("not an IPv6 address: ") + ip);
    a.len = sizeof(sockaddr_in6);
    return a;
}

// A UDP socket of `family` bound to `port` (0: any), receives bounded to `ms`.
int udp_socket(int family, int port, int ms) {
    const int fd = ::socket(family, SOCK_DGRAM, 0);
    if (fd < 0) die("socket");
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    addr a = family == AF_INET ? v4("0.0.0.0", port) : v6("::", port, 0);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a.ss), a.len) != 0) die("bind to port " + std::to_string(port));
    return fd;
}

void send_to(int fd, const addr& to, const std::string& msg) {
    if (::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<const sockaddr*>(&to.ss), to.len) !=
        static_cast<ssize_t>(msg.size())) {
        die("sendto: " + std::string(std::strerror(errno)));
    }
}

// One datagram, or "" when none came in the socket's bound.
std::string receive(int fd) {
    char buf[2048];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Linux's count of UDP datagrams dropped for a bad checksum (/proc/net/snmp "Udp:").
long udp_csum_errors() {
    FILE* f = std::fopen("/proc/net/snmp", "r");
    if (f == nullptr) die("/proc/net/snmp");
    char names[1024], values[1024];
    long out = -1;
    while (std::fgets(names, sizeof names, f) != nullptr && std::fgets(values, sizeof values, f) != nullptr) {
        if (std::strncmp(names, "Udp:", 4) != 0) continue;
        // The two lines name and give the same fields in order.
        char* sn = nullptr;
        char* sv = nullptr;
        char* n = strtok_r(names, " \n", &sn);
        char* v = strtok_r(values, " \n", &sv);
        while (n != nullptr && v != nullptr) {
            if (std::strcmp(n, "InCsumErrors") == 0) out = std::strtol(v, nullptr, 10);
            n = strtok_r(nullptr, " \n", &sn);
            v = strtok_r(nullptr, " \n", &sv);
        }
    }
    std::fclose(f);
    if (out < 0) die("no Udp InCsumErrors in /proc/net/snmp");
    return out;
}

void join4(int fd, const char* group, unsigned ifindex) {
    ip_mreqn m{};
    inet_pton(AF_INET, group, &m.imr_multiaddr);
    m.imr_ifindex = static_cast<int>(ifindex);  // (the guest has no route to choose one by)
    if (::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) die(std::string("join ") + group);
}
void join6(int fd, const char* group, unsigned ifindex) {
    ipv6_mreq m{};
    inet_pton(AF_INET6, group, &m.ipv6mr_multiaddr);
    m.ipv6mr_interface = ifindex;
    if (::setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m) != 0) die(std::string("join ") + group);
}

// COUNT echoes of `to` through `fd`, each retried while none comes back.
void echo(int fd, const addr& to, const char* tag, int count) {
    for (int i = 0; i < count; ++i) {
        const std::string msg = std::string(tag) + " " + std::to_string(i) + " " + std::string(40 + i, 'x');
        int tries = i == 0 ? 30 : 5;  // the first: up to 60 s while cxv starts and ARP/ND resolve
        std::string got;
        while (tries-- > 0) {
            send_to(fd, to, msg);
            got = receive(fd);
            while (!got.empty() && got != msg) got = receive(fd);  // a late echo of an earlier try
            if (got == msg) break;
        }
        if (got != msg) die(std::string(tag) + ": no echo of datagram " + std::to_string(i));
    }
    std::printf("udp_guest: %s: %d datagrams echoed by cxv, each accepted by Linux's checksum checks\n", tag, count);
}

}  // namespace

// The feed: paced by the clock, sleeping between datagrams.
int feed(const char* iface, const char* group, int port, long count, double rate) {
    const unsigned ifindex = if_nametoindex(iface);
    if (ifindex == 0) die(std::string("no interface ") + iface);
    const int fd = udp_socket(AF_INET, 0, 500);
    const unsigned char ttl = 1;
    ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
    ip_mreqn mif{};
    mif.imr_ifindex = static_cast<int>(ifindex);
    ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof mif);
    const addr to = v4(group, port);
    timespec start{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long seq = 1; seq <= count; ++seq) {
        std::string msg(64, 'q');
        for (int b = 0; b < 8; ++b) msg[static_cast<std::size_t>(b)] = static_cast<char>(seq >> (56 - 8 * b));
        send_to(fd, to, msg);
        // The next one's time: start + seq / rate.
        const double due = static_cast<double>(seq) / rate;
        for (;;) {
            timespec now{};
            clock_gettime(CLOCK_MONOTONIC, &now);
            const double left = due - (static_cast<double>(now.tv_sec - start.tv_sec) +
                                       static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9);
            if (left <= 0) break;
            usleep(static_cast<useconds_t>(left * 1e6));
        }
    }
    std::printf("udp_guest: fed %ld datagrams to %s:%d at %.0f per second\n", count, group, port, rate);
    return 0;
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc == 7 && std::string(argv[1]) == "feed") {
        return feed(argv[2], argv[3], std::atoi(argv[4]), std::atol(argv[5]), std::atof(argv[6]));
    }
    if (argc != 6) die("usage: udp_guest IFACE CXV_IPV4 CXV_IPV6 COUNT BAD | udp_guest feed IFACE GROUP PORT COUNT RATE");
    const unsigned ifindex = if_nametoindex(argv[1]);
    if (ifindex == 0) die(std::string("no interface ") + argv[1]);
    const char* cxv4 = argv[2];
    const char* cxv6 = argv[3];
    const int count = std::atoi(argv[4]);
    const int bad = std::atoi(argv[5]);

    // 1. Echo, both IP versions.
    // Each echo waited for up to 2 s (a loaded machine runs the guest and the model slowly).
    const int s4 = udp_socket(AF_INET, 0, 2000);
    const int s6 = udp_socket(AF_INET6, 0, 2000);
    echo(s4, v4(cxv4, 5002), "ipv4", count);
    echo(s6, v6(cxv6, 5002, ifindex), "ipv6", count);

    // 2. Multicast to cxv, and a port it has no rule for.
    const unsigned char ttl = 1;
    ::setsockopt(s4, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
    ::setsockopt(s6, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof ifindex);
    ip_mreqn mif{};
    mif.imr_ifindex = static_cast<int>(ifindex);
    ::setsockopt(s4, IPPROTO_IP, IP_MULTICAST_IF, &mif, sizeof mif);
    for (int i = 0; i < count; ++i) {
        send_to(s4, v4("239.1.2.3", 5003), "group4 " + std::to_string(i));
        send_to(s6, v6("ff02::1:3", 5003, ifindex), "group6 " + std::to_string(i));
    }
    send_to(s4, v4(cxv4, 5009), "no rule for this port");
    std::printf("udp_guest: sent %d datagrams to each of 239.1.2.3 and ff02::1:3, and one to port 5009\n", count);

    // 3. Multicast from cxv, and datagrams with a wrong checksum.
    const int g4 = udp_socket(AF_INET, 5004, 3000);
    const int g6 = udp_socket(AF_INET6, 5004, 3000);
    join4(g4, "239.1.2.4", ifindex);
    join6(g6, "ff02::1:4", ifindex);
    const int in = udp_socket(AF_INET, 5001, 5000);
    const long csum_before = udp_csum_errors();
    send_to(s4, v4(cxv4, 5002), "send");
    int got4 = 0, got6 = 0;
    while (got4 < count) {
        const std::string m = receive(g4);
        if (m.empty()) break;
        if (m.rfind("from-cxv4 ", 0) == 0) ++got4;
    }
    while (got6 < count) {
        const std::string m = receive(g6);
        if (m.empty()) break;
        if (m.rfind("from-cxv6 ", 0) == 0) ++got6;
    }
    int bad_seen = 0;
    bool end = false;
    for (std::string m = receive(in); !m.empty(); m = receive(in)) {
        if (m == "end") {
            end = true;
            break;
        }
        ++bad_seen;
    }
    const long csum_after = udp_csum_errors();
    std::printf("udp_guest: from cxv: %d/%d on 239.1.2.4, %d/%d on ff02::1:4; %d of %d wrong-checksum datagrams "
                "delivered; UdpInCsumErrors %ld -> %ld; end marker %s\n",
                got4, count, got6, count, bad_seen, bad, csum_before, csum_after, end ? "received" : "missing");
    if (got4 != count || got6 != count) die("multicast datagrams from cxv missing");
    if (!end) die("cxv's end marker (a correct datagram after the bad ones) never came");
    if (bad_seen != 0) die("Linux delivered datagrams whose checksum was wrong");
    if (csum_after - csum_before != bad) die("UdpInCsumErrors did not count each wrong checksum");

    // 4. cxv's report.
    send_to(s4, v4(cxv4, 5002), "report");
    std::string report;
    for (int i = 0; i < 10 && report.rfind("report ", 0) != 0; ++i) report = receive(s4);
    std::printf("udp_guest: cxv says: %s\n", report.c_str());
    const std::string want = "report unicast4 " + std::to_string(count + 2) + " unicast6 " + std::to_string(count) +
                             " group4 " + std::to_string(count) + " group6 " + std::to_string(count) + " other 0";
    if (report != want) die("cxv's report is not \"" + want + "\"");
    std::printf("udp_guest: ok\n");
    return 0;
}
