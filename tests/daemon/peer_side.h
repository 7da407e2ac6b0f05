// The peer programs' end of their control socket (peer.cc, event_peer.cc, loop_peer.cc):
// one line per message to and from the test (tests/daemon/peer_proc.h is the test's end).
// Each program is its own process, so the socket and the unread input are globals here.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/result.h"

namespace cxv::test::peer_side {

inline int ctl = -1;           // the control socket; -1: lines go to stderr
inline std::string pending;    // read and not yet taken
inline const char* name = "peer";  // in fail()'s line on stderr

inline void say(const std::string& line) {
    const std::string l = line + "\n";
    if (::write(ctl < 0 ? 2 : ctl, l.data(), l.size()) != static_cast<ssize_t>(l.size())) std::_Exit(3);
}

// The next line from the test; empty after `wait_ms` (-1: no bound).
inline std::string hear(int wait_ms = -1) {
    for (;;) {
        if (const auto nl = pending.find('\n'); nl != std::string::npos) {
            std::string l = pending.substr(0, nl);
            pending.erase(0, nl + 1);
            return l;
        }
        pollfd p{ctl, POLLIN, 0};
        if (::poll(&p, 1, wait_ms) <= 0) return {};
        char buf[256];
        const ssize_t n = ::read(ctl, buf, sizeof buf);
        if (n <= 0) std::_Exit(4);  // the test is gone
        pending.append(buf, static_cast<std::size_t>(n));
    }
}

[[noreturn]] inline void fail(const std::string& why) {
    say("FAIL " + why);
    std::fprintf(stderr, "%s %d: %s\n", name, ::getpid(), why.c_str());
    std::exit(1);
}

template <typename T>
T take(cxv::result<T> r, const char* what) {
    if (!r) fail(std::string(what) + ": " + r.error().message);
    return std::move(r).value();
}

}  // namespace cxv::test::peer_side
