#include "api/abi/cm_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace cxv::cm {

int send_msg(int fd, const wire_msg& h) {
    wire_msg n = h;
    n.magic = htonl(h.magic);
    n.lid = htons(h.lid);
    n.qpn = htonl(h.qpn);
    n.psn = htonl(h.psn);
    n.qkey = htonl(h.qkey);
    const auto* p = reinterpret_cast<const char*>(&n);
    std::size_t done = 0;
    while (done < sizeof n) {
        const ssize_t w = ::send(fd, p + done, sizeof n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += static_cast<std::size_t>(w);
    }
    return 0;
}

void to_host(wire_msg& m) {
    m.magic = ntohl(m.magic);
    m.lid = ntohs(m.lid);
    m.qpn = ntohl(m.qpn);
    m.psn = ntohl(m.psn);
    m.qkey = ntohl(m.qkey);
}

bool well_formed(const wire_msg& m) { return m.magic == kMagic && m.private_data_len <= sizeof m.private_data; }

long long trace_clock() noexcept {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

void trace(const char* what, const sockaddr* address, long long at_ns, long long began_ns) {
    static const bool on = [] {
        const char* v = std::getenv("CXV_CM_TRACE");
        return v != nullptr && *v != '\0';
    }();
    if (!on || address == nullptr) return;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (address->sa_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(address);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (address->sa_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(address);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    const long long ns = at_ns != 0 ? at_ns : trace_clock();
    if (began_ns != 0) {
        std::fprintf(stderr, "cxv-cm: %lld %d %s %s:%u began %lld\n", ns, static_cast<int>(::getpid()), what, host,
                     port, began_ns);
    } else {
        std::fprintf(stderr, "cxv-cm: %lld %d %s %s:%u\n", ns, static_cast<int>(::getpid()), what, host, port);
    }
}

}  // namespace cxv::cm
