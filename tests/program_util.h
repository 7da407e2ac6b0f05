// For the test programs that run as processes of their own (peers under cxv-sim, not
// doctest binaries): a failure is one line on stderr, prefixed with the program's name,
// and exit status 1.
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/result.h"

namespace cxv::test {

// Set by main() to the program's name.
inline const char* program_name = "test program";

[[noreturn]] inline void die(const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", program_name, what.c_str());
    std::exit(1);
}

template <typename T>
T must(result<T> r, const char* what) {
    if (!r) die(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

inline void must(const status& s, const char* what) {
    if (!s) die(std::string(what) + ": " + s.error().message);
}

// Bounds every receive on `fd` to `seconds` (SO_RCVTIMEO): a peer that never answers must
// not hang a test.
inline void bound_receives(int fd, unsigned seconds) {
    const timeval tv{static_cast<time_t>(seconds), 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// A TCP connection to the first of `addresses` that accepts one, its receives bounded
// to `seconds`; -1 when none does.
inline int connect_first(const addrinfo* addresses, unsigned seconds) {
    for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            bound_receives(fd, seconds);
            return fd;
        }
        ::close(fd);
    }
    return -1;
}

}  // namespace cxv::test
