// Clients of cxvd as other users, for the tenancy tests: forked children that take
// another uid (root only) and speak the protocol, one request at a time (as_uid) or
// holding a connection and its mappings until the parent lets them go (tenant).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/daemon/rig.h"

namespace cxv::test {

using namespace std::chrono_literals;

inline bool root() { return ::getuid() == 0; }

// The socket opened to other users, as an administrator would with a group; the daemon's
// allow-list decides from there.
inline void open_to_all(const daemon_rig& rig) {
    REQUIRE(::chmod(rig.dir.dir.c_str(), 0755) == 0);
    REQUIRE(::chmod(rig.sock.c_str(), 0666) == 0);
}

// Takes `uid` with `groups` as its supplementary groups (and `uid` as its gid).
inline bool become(uid_t uid, const std::vector<gid_t>& groups) {
    return ::setgroups(groups.size(), groups.data()) == 0 && ::setgid(uid) == 0 && ::setuid(uid) == 0;
}

// MAP_MEMORY of one 4 KiB page of a sealed memfd of `pages` pages, from its start.
inline cxv::result<d::client::answer> map_page(d::client& c, int memfd) {
    const int fds[] = {memfd};
    return c.call(d::msg_type::map_memory, d::body(d::map_memory_req{0, true, 0, 4096}), fds);
}

inline int sealed_memfd(std::size_t bytes) {
    const int fd = ::memfd_create("tenant", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
        return -1;
    }
    return fd;
}

// What a request made as another uid came back with: its errno, text and payload (the
// HELLO's when that was refused: `at_hello`), or `stage` naming what failed before.
struct outcome {
    int stage = -1;  // 0: answered; 1 setuid, 2 connect, 3 HELLO, 4 the request (transport), 5 the body threw
    bool at_hello = false;
    int err = -1;
    std::string text;
    std::vector<std::byte> payload;
};

// Runs `body(client)` in a forked child that took `uid` (and `groups`), connected and
// said HELLO; the answer comes back over a pipe, read here while the child writes it (a
// STATUS may not fit the pipe's buffer).
template <typename Body>
outcome as_uid(const std::string& sock, uid_t uid, const std::vector<gid_t>& groups, Body body) {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(p[0]);
        std::vector<std::byte> out;
        auto put32 = [&](std::uint32_t v) {
            const auto* b = reinterpret_cast<const std::byte*>(&v);
            out.insert(out.end(), b, b + 4);
        };
        auto reply = [&](int stage, bool at_hello, const d::client::answer* a) {
            put32(static_cast<std::uint32_t>(stage));
            put32(at_hello ? 1 : 0);
            put32(static_cast<std::uint32_t>(a ? a->err : -1));
            const std::string text = a ? a->text : std::string();
            put32(static_cast<std::uint32_t>(text.size()));
            out.insert(out.end(), reinterpret_cast<const std::byte*>(text.data()),
                       reinterpret_cast<const std::byte*>(text.data()) + text.size());
            if (a) out.insert(out.end(), a->payload.begin(), a->payload.end());
            for (std::size_t off = 0; off < out.size();) {
                const ssize_t n = ::write(p[1], out.data() + off, out.size() - off);
                if (n <= 0) break;
                off += static_cast<std::size_t>(n);
            }
            ::_exit(0);
        };
        try {
            if (!become(uid, groups)) reply(1, false, nullptr);
            auto c = d::client::connect(sock);
            if (!c) reply(2, false, nullptr);
            auto h = c->call(d::msg_type::hello, d::body(d::hello_req{}));
            if (!h) reply(3, false, nullptr);
            if (h->err != 0) reply(0, true, &*h);
            cxv::result<d::client::answer> a = body(*c);
            if (!a) reply(4, false, nullptr);
            reply(0, false, &*a);
        } catch (...) {
            reply(5, false, nullptr);
        }
        ::_exit(0);
    }
    ::close(p[1]);
    std::vector<std::byte> in;
    const auto end = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        pollfd f{p[0], POLLIN, 0};
        if (std::chrono::steady_clock::now() > end) break;
        if (::poll(&f, 1, 100) <= 0) continue;
        std::byte buf[4096];
        const ssize_t n = ::read(p[0], buf, sizeof buf);
        if (n <= 0) break;
        in.insert(in.end(), buf, buf + n);
    }
    ::close(p[0]);
    ::kill(pid, SIGKILL);  // (gone already, unless it hung)
    ::waitpid(pid, nullptr, 0);
    outcome o;
    auto get32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        std::memcpy(&v, in.data() + at, 4);
        return v;
    };
    REQUIRE_MESSAGE(in.size() >= 16, "the child as uid ", uid, " sent no answer");
    o.stage = static_cast<int>(get32(0));
    o.at_hello = get32(4) != 0;
    o.err = static_cast<int>(get32(8));
    const std::size_t tl = get32(12);
    REQUIRE(in.size() >= 16 + tl);
    o.text.assign(reinterpret_cast<const char*>(in.data()) + 16, tl);
    o.payload.assign(in.begin() + static_cast<std::ptrdiff_t>(16 + tl), in.end());
    return o;
}

// STATUS as `uid`.
inline d::status_reply status_as(const std::string& sock, uid_t uid, const std::vector<gid_t>& groups = {}) {
    auto o = as_uid(sock, uid, groups, [](d::client& c) { return c.call(d::msg_type::status, {}); });
    REQUIRE_MESSAGE(o.stage == 0, "STATUS as uid ", uid, ": failed at stage ", o.stage);
    REQUIRE_MESSAGE(o.err == 0, "STATUS as uid ", uid, ": ", o.text);
    auto s = d::parse_status_reply(o.payload);
    REQUIRE_MESSAGE(s, s.error().message);
    return std::move(s).value();
}

// A forked child that takes `uid` (and `groups`) and runs `body(hold)`. The body sets
// up what it needs (connections, fds, mappings), then calls hold(true) -- or hold(false)
// when it could not -- which tells the parent and waits, keeping all of it, until the
// parent lets it go (release(), or the object's end); then the child exits. `ready` says
// whether the body got there with true (within 30 s). Its end is bounded: a child that
// does not go on its own is killed by its PID.
struct held_child {
    pid_t pid = -1;
    int hold_fd = -1;
    bool ready = false;
    template <typename Body>
    held_child(uid_t uid, const std::vector<gid_t>& groups, Body body) {
        int up[2], h[2];
        REQUIRE(::pipe2(up, O_CLOEXEC) == 0);
        REQUIRE(::pipe2(h, O_CLOEXEC) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(up[0]);
            ::close(h[1]);
            bool told = false;
            auto hold = [&](bool ok) {
                const char r = ok ? 'r' : 'x';
                (void)!::write(up[1], &r, 1);
                told = true;
                char b;
                (void)!::read(h[0], &b, 1);  // until the parent closes it
            };
            try {
                if (become(uid, groups)) body(hold);
            } catch (...) {
            }
            if (!told) (void)!::write(up[1], "x", 1);
            ::_exit(0);
        }
        ::close(up[1]);
        ::close(h[0]);
        hold_fd = h[1];
        pollfd f{up[0], POLLIN, 0};
        char r = 0;
        ready = ::poll(&f, 1, 30000) == 1 && ::read(up[0], &r, 1) == 1 && r == 'r';
        ::close(up[0]);
    }
    void release() {
        if (pid < 0) return;
        ::close(hold_fd);
        const auto end = std::chrono::steady_clock::now() + 10s;
        while (::waitpid(pid, nullptr, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > end) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
                break;
            }
            std::this_thread::sleep_for(5ms);
        }
        pid = -1;
    }
    ~held_child() { release(); }
    held_child(const held_child&) = delete;
    held_child& operator=(const held_child&) = delete;
};

// A client of another uid that stays connected: a held_child that says HELLO and maps
// `pages` pages of its own memory, holding its connection until this object goes.
struct tenant : held_child {
    tenant(const std::string& sock, uid_t uid, unsigned pages = 0, std::vector<gid_t> groups = {})
        : held_child(uid, groups, [&](auto& hold) {
              auto c = d::client::connect(sock);
              auto hello = c ? c->hello() : cxv::result<d::hello_reply>(c.error());
              const int fd = sealed_memfd(4096);
              bool mapped = hello.ok() && fd >= 0;
              for (unsigned i = 0; mapped && i < pages; ++i) {
                  auto a = map_page(*c, fd);
                  mapped = a && a->err == 0;
              }
              hold(mapped);
          }) {
        REQUIRE_MESSAGE(ready, "the client as uid ", uid, " did not connect and map");
    }
};

}  // namespace cxv::test
