// A client process of the daemon tests (event_peer.cc) and this end of its control
// socket: one line per message, every wait bounded, the process killed by PID and reaped
// when this goes.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace cxv::test {


struct peer_proc {
    int ctl = -1;
    std::unique_ptr<child> proc;
    std::string pending;

    // `program CONTROL_FD ARGS...`, its log DIR/NAME.log.
    peer_proc(const scratch& dir, const std::string& name, const std::string& program,
              const std::vector<std::string>& args = {}) {
        // A peer that died must fail the test with its log, not end it with SIGPIPE.
        ::signal(SIGPIPE, SIG_IGN);
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        ::fcntl(sv[0], F_SETFD, FD_CLOEXEC);  // ours; sv[1] is inherited by the peer alone
        ctl = sv[0];
        std::vector<std::string> argv{program, std::to_string(sv[1])};
        argv.insert(argv.end(), args.begin(), args.end());
        proc = std::make_unique<child>(argv, dir.dir + "/" + name + ".log");
        ::close(sv[1]);
    }
    // A peer program that takes its index after the control fd (peer.cc, event_peer.cc).
    peer_proc(const scratch& dir, unsigned index, const std::string& program = env_path("CXVD_EVENT_PEER"))
        : peer_proc(dir, "peer" + std::to_string(index), program, {std::to_string(index)}) {}
    ~peer_proc() {
        proc.reset();  // killed by PID and reaped if still running
        ::close(ctl);
    }
    peer_proc(const peer_proc&) = delete;
    peer_proc& operator=(const peer_proc&) = delete;

    void say(const std::string& line) {
        const std::string l = line + "\n";
        REQUIRE_MESSAGE(::write(ctl, l.data(), l.size()) == static_cast<ssize_t>(l.size()),
                        "the peer is gone; its log: ", slurp(proc->log));
    }
    // The next line, within `limit` (the test fails otherwise, with the peer's log).
    std::string hear(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            if (const auto nl = pending.find('\n'); nl != std::string::npos) {
                std::string l = pending.substr(0, nl);
                pending.erase(0, nl + 1);
                return l;
            }
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            REQUIRE_MESSAGE(left.count() > 0, "no word from the peer in time; its log: ", slurp(proc->log));
            pollfd p{ctl, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char buf[256];
            const ssize_t n = ::read(ctl, buf, sizeof buf);
            REQUIRE_MESSAGE(n > 0, "the peer closed its control socket; its log: ", slurp(proc->log));
            pending.append(buf, static_cast<std::size_t>(n));
        }
    }
    // The next line, which must start with `prefix`.
    std::string expect(const std::string& prefix, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
        std::string l = hear(limit);
        REQUIRE_MESSAGE(l.rfind(prefix, 0) == 0, "expected ", prefix, ", the peer said: ", l, "; its log: ",
                        slurp(proc->log));
        return l;
    }
};

// Two peers' READY lines exchanged as PEER, until both say CONNECTED.
inline void connect_pair(peer_proc& a, peer_proc& b) {
    const std::string ra = a.expect("READY "), rb = b.expect("READY ");
    a.say("PEER " + rb.substr(6));
    b.say("PEER " + ra.substr(6));
    a.expect("CONNECTED");
    b.expect("CONNECTED");
}

}  // namespace cxv::test
