#include "bench/perf/oob.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/errno_text.h"

namespace cxv::perf {

namespace {

using clock_type = std::chrono::steady_clock;


// Milliseconds left until `end`, at least 0, for poll(2).
int left_ms(clock_type::time_point end) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_type::now()).count();
    return ms < 0 ? 0 : static_cast<int>(ms);
}

void no_delay(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

result<channel> channel::connect(const std::string& host, unsigned port, std::chrono::milliseconds retry_for) {
    const std::string where = host + ":" + std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int r = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); r != 0) {
        return error{EHOSTUNREACH, "cannot connect to " + where + ": " + ::gai_strerror(r)};
    }
    const auto end = clock_type::now() + retry_for;
    int last = ECONNREFUSED;
    for (;;) {
        for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
            unique_fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
            if (!fd) continue;
            int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                // A connect bounded in time (a host that does not answer).
                pollfd p{fd.get(), POLLOUT, 0};
                if (::poll(&p, 1, 5000) == 1) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err == 0 ? 0 : -1;
                    errno = err;
                } else {
                    errno = ETIMEDOUT;
                }
            }
            if (rc == 0) {
                ::freeaddrinfo(found);
                // Blocking from here on: recv() and send() bound their waits with poll().
                ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
                no_delay(fd.get());
                return channel(fd.release());
            }
            last = errno;
        }
        if (last != ECONNREFUSED || clock_type::now() >= end) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::freeaddrinfo(found);
    return sys_error(last, "cannot connect to " + where);
}

std::pair<channel, channel> channel::pair() {
    int fds[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return {};
    return {channel(fds[0]), channel(fds[1])};
}

status channel::send(const void* p, std::size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::send(fd_.get(), b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd q{fd_.get(), POLLOUT, 0};
            if (::poll(&q, 1, 10000) != 1) return error{ETIMEDOUT, "the peer does not take messages"};
            continue;
        }
        if (w <= 0) return sys_error(w < 0 ? errno : EPIPE, "lost the connection to the peer");
        b += w;
        n -= static_cast<std::size_t>(w);
    }
    return ok_status();
}

status channel::recv(void* p, std::size_t n, std::chrono::milliseconds timeout) {
    auto* b = static_cast<char*>(p);
    const auto end = clock_type::now() + timeout;
    while (n > 0) {
        pollfd q{fd_.get(), POLLIN, 0};
        const int r = ::poll(&q, 1, left_ms(end));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return error{ETIMEDOUT, "the peer did not answer within " + std::to_string(timeout.count() / 1000) + " s"};
        const ssize_t got = ::recv(fd_.get(), b, n, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got < 0) return sys_error(errno, "lost the connection to the peer");
        if (got == 0) return error{ECONNRESET, "the peer closed the connection"};
        b += got;
        n -= static_cast<std::size_t>(got);
    }
    return ok_status();
}

bool channel::readable() {
    pollfd q{fd_.get(), POLLIN, 0};
    return ::poll(&q, 1, 0) == 1;
}

result<listener> listener::create(unsigned port) {
    listener l;
    l.port_ = port;
    l.fd_.reset(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    bool v6 = static_cast<bool>(l.fd_);
    if (!v6) l.fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!l.fd_) return sys_error(errno, "socket");
    const int one = 1, zero = 0;
    ::setsockopt(l.fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = 0;
    if (v6) {
        ::setsockopt(l.fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        rc = ::bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        rc = ::bind(l.fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(l.fd_.get(), 1) != 0) {
        return sys_error(errno, "cannot listen on port " + std::to_string(port));
    }
    return l;
}

result<channel> listener::accept(std::chrono::milliseconds timeout) {
    pollfd q{fd_.get(), POLLIN, 0};
    const int r = ::poll(&q, 1, static_cast<int>(timeout.count()));
    if (r != 1) {
        return error{ETIMEDOUT, "no client connected to port " + std::to_string(port_) + " within " +
                                    std::to_string(timeout.count() / 1000) + " s"};
    }
    const int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return sys_error(errno, "accept");
    no_delay(fd);
    return channel(fd);
}

}  // namespace cxv::perf
