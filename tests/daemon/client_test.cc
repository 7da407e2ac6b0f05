// The client side of cxvd: the driver in a process started without cxv-sim, with
// CXV_DAEMON set, opens the daemon's function through cxv::device and runs the same
// driver objects and fast path as over VFIO (docs/daemon.md, "The client side").
//
// Two peer processes (peer.cc) connect RC QPs to each other through one daemon and
// exchange SENDs and an RDMA WRITE, every byte checked; one is then killed mid-traffic.
// In this process: opening with no daemon listening fails at once with the reason, and
// memory registration takes memfd-backed memory as it is, re-backs private memory in
// place, and hands a cxv::buffer over by its fd.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "api/cxv.h"
#include "driver/hca/hca.h"
#include "tests/daemon/peer_proc.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {


// The daemon's log line about client `pid` going ("client pid N (comm) gone (...): ...").
std::string gone_line(const std::string& log, pid_t pid) {
    const auto at = log.find("client pid " + std::to_string(pid) + " (");
    if (at == std::string::npos) return {};
    return log.substr(at, log.find('\n', at) - at);
}

// This process's keys and mappings at the daemon, over all its connections (the device's
// and the watcher's).
struct mine {
    std::uint32_t connections = 0, mkeys = 0, maps = 0;
};
mine my_books(test_client& watcher) {
    mine m;
    for (const auto& c : watcher.status().clients) {
        if (c.pid != ::getpid()) continue;
        ++m.connections;
        m.mkeys += c.mkeys;
        m.maps += c.maps;
    }
    return m;
}

}  // namespace

TEST_CASE("two client processes connect RC QPs through cxvd, exchange checked traffic, and one is killed") {
    daemon_rig rig;
    daemon_env env(rig.sock);
    test_client watcher(rig.sock);

    peer_proc a(rig.dir, 0, env_path("CXVD_PEER")), b(rig.dir, 1, env_path("CXVD_PEER"));
    const std::string ra = a.hear(), rb = b.hear();
    REQUIRE_MESSAGE(ra.rfind("READY ", 0) == 0, ra, " / ", slurp(a.proc->log));
    REQUIRE_MESSAGE(rb.rfind("READY ", 0) == 0, rb, " / ", slurp(b.proc->log));

    // Both processes' objects are the daemon's books: a PD, a CQ, a QP and a key each.
    auto s = watcher.status();
    for (pid_t pid : {a.proc->pid, b.proc->pid}) {
        const auto* c = find_client(s, pid);
        REQUIRE_MESSAGE(c != nullptr, "peer ", pid, " is not among cxvd's clients");
        CHECK(c->pds == 1);
        CHECK(c->cqs == 1);
        CHECK(c->qps == 1);
        CHECK(c->mkeys == 1);
        CHECK(c->uars >= 1);
        CHECK(c->pinned >= 64 * 1024);  // the registered memfd, besides the rings
    }

    a.say("PEER " + rb.substr(6));
    b.say("PEER " + ra.substr(6));
    REQUIRE_MESSAGE(a.hear() == "CONNECTED", slurp(a.proc->log));
    REQUIRE_MESSAGE(b.hear() == "CONNECTED", slurp(b.proc->log));

    constexpr int kSends = 200;
    a.say("GO " + std::to_string(kSends));
    b.say("GO " + std::to_string(kSends));
    const std::string pass = "PASS " + std::to_string(kSends) + " " + std::to_string(kSends);
    CHECK_MESSAGE(a.hear() == pass, slurp(a.proc->log));
    CHECK_MESSAGE(b.hear() == pass, slurp(b.proc->log));

    // Mid-traffic, b is killed. a's QP is then connected to a QP the daemon destroyed
    // in b's cleanup: a's next SENDs are never acknowledged and complete in error
    // (transport retries exhausted) instead of carrying on.
    a.say("TRAFFIC");
    b.say("TRAFFIC");
    REQUIRE_MESSAGE(a.hear() == "RUNNING", slurp(a.proc->log));
    REQUIRE_MESSAGE(b.hear() == "RUNNING", slurp(b.proc->log));
    const pid_t victim = b.proc->pid;
    b.proc->kill_now();

    const std::string after = a.hear(60s);
    MESSAGE("the survivor after its peer's death: ", after);
    REQUIRE_MESSAGE(after.rfind("ERROR ", 0) == 0, after, " / ", slurp(a.proc->log));
    const int st = std::atoi(after.c_str() + 6);
    CHECK_MESSAGE((st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR || st == IBV_WC_REM_ACCESS_ERR ||
                   st == IBV_WC_REM_INV_REQ_ERR || st == IBV_WC_REM_OP_ERR || st == IBV_WC_WR_FLUSH_ERR),
                  "ibv_wc_status ", st);

    // The daemon's books are the survivor's objects only.
    s = wait_status(watcher, [&](const d::status_reply& r) { return find_client(r, victim) == nullptr; }, 2s);
    CHECK_MESSAGE(find_client(s, victim) == nullptr, "the killed peer is still a client: ", rig.log());
    const auto* survivor = find_client(s, a.proc->pid);
    REQUIRE(survivor != nullptr);
    CHECK(survivor->pds == 1);
    CHECK(survivor->cqs == 1);
    CHECK(survivor->qps == 1);
    CHECK(survivor->mkeys == 1);
    CHECK(s.clients.size() == 2);  // the survivor and this watcher

    // The daemon destroyed what the killed peer had: its QP, CQ, key and PD.
    const std::string victim_gone = gone_line(rig.log(), victim);
    CHECK_MESSAGE(victim_gone.find(": 4 objects destroyed") != std::string::npos, victim_gone);

    // The survivor goes cleanly: its driver destroys its objects through the daemon,
    // which has nothing left to clean up.
    const pid_t survivor_pid = a.proc->pid;
    a.say("EXIT");
    CHECK(a.proc->wait(std::chrono::steady_clock::now() + 30s) == 0);
    s = wait_status(watcher, [&](const d::status_reply& r) { return r.clients.size() == 1; }, 2s);
    CHECK(s.clients.size() == 1);
    const std::string survivor_gone = gone_line(rig.log(), survivor_pid);
    CHECK_MESSAGE(survivor_gone.find(": 0 objects destroyed, 0 UARs returned, 0 bytes unmapped") != std::string::npos,
                  survivor_gone);
}

TEST_CASE("with CXV_DAEMON pointing at no daemon, cxv::device::open fails at once and says why") {
    scratch dir;
    SUBCASE("no socket there (ENOENT)") {
        daemon_env env(dir.dir + "/none.sock");
        const auto t0 = std::chrono::steady_clock::now();
        auto dev = cxv::device::open("");
        CHECK(std::chrono::steady_clock::now() - t0 < 5s);
        REQUIRE_FALSE(dev);
        CHECK(dev.error().code == ENOENT);
        CHECK_MESSAGE(dev.error().message.find(dir.dir + "/none.sock") != std::string::npos, dev.error().message);
        CHECK_MESSAGE(dev.error().message.find("cxvd") != std::string::npos, dev.error().message);
    }
    SUBCASE("a socket nobody listens on (ECONNREFUSED)") {
        const std::string path = dir.dir + "/dead.sock";
        const int s = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
        REQUIRE(s >= 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strcpy(a.sun_path, path.c_str());
        REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);  // bound, never listening
        daemon_env env(path);
        const auto t0 = std::chrono::steady_clock::now();
        auto dev = cxv::device::open("");
        CHECK(std::chrono::steady_clock::now() - t0 < 5s);
        ::close(s);
        REQUIRE_FALSE(dev);
        CHECK(dev.error().code == ECONNREFUSED);
        CHECK_MESSAGE(dev.error().message.find("is it running?") != std::string::npos, dev.error().message);
    }
}

TEST_CASE("through cxvd, memory registration takes memfd-backed memory and says what to do with any other") {
    daemon_rig rig;
    daemon_env env(rig.sock);
    test_client watcher(rig.sock);
    auto dev = cxv::device::open("");
    REQUIRE_MESSAGE(dev, dev.error().message);
    CHECK((*dev)->hca().attached());
    CHECK((*dev)->hca().device().remote());
    // Interrupts and resets are the owner's: refused here, not attempted on its fd.
    auto irq = (*dev)->hca().device().msix_eventfd(0);
    REQUIRE_FALSE(irq);
    CHECK(irq.error().code == EOPNOTSUPP);
    CHECK((*dev)->hca().device().reset().error().code == EOPNOTSUPP);
    // The port as the daemon's HELLO told it: up, with the GIDs the daemon programmed.
    auto port = (*dev)->port(1);
    REQUIRE_MESSAGE(port, port.error().message);
    CHECK(port->up);
    CHECK(port->ethernet);
    REQUIRE(port->gids.size() == watcher.hello.devices[0].gids.size());
    CHECK(port->gids.size() >= 2);
    CHECK(port->gids[0] == watcher.hello.devices[0].gids[0]);
    CHECK(port->gids[0][0] == 0xfe);  // fe80::/64 from the MAC
    // What the daemon does not forward is refused with its reason, not hung on.
    auto counters = (*dev)->counters();
    REQUIRE_FALSE(counters);
    CHECK(counters.error().code == EPERM);
    CHECK_MESSAGE(counters.error().message.find("allow-list") != std::string::npos, counters.error().message);
    auto pd = (*dev)->alloc_pd();
    REQUIRE_MESSAGE(pd, pd.error().message);

    SUBCASE("anonymous memory (malloc) is re-backed by a memfd in place, contents kept") {
        std::vector<std::byte> heap(64 * 1024);
        for (std::size_t i = 0; i < heap.size(); ++i) heap[i] = static_cast<std::byte>(i * 13);
        auto mr = cxv::mr::create(*pd, heap.data(), heap.size(), cxv::access_local_write);
        REQUIRE_MESSAGE(mr, mr.error().message);
        bool kept = true;
        for (std::size_t i = 0; i < heap.size(); ++i) kept = kept && heap[i] == static_cast<std::byte>(i * 13);
        CHECK(kept);
        const auto me = my_books(watcher);
        CHECK(me.connections == 2);
        CHECK(me.mkeys == 1);
    }
    SUBCASE("a private mapping of a memfd is re-backed too: the daemon sees the copy") {
        const int fd = ::memfd_create("cxv-private", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, 65536) == 0);
        auto* m = static_cast<std::byte*>(::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
        REQUIRE(m != MAP_FAILED);
        m[100] = std::byte{0x5a};
        {
            auto mr = cxv::mr::create(*pd, m, 65536, cxv::access_local_write);
            REQUIRE_MESSAGE(mr, mr.error().message);
            CHECK(m[100] == std::byte{0x5a});
        }
        ::munmap(m, 65536);
        ::close(fd);
    }
    SUBCASE("a cxv::buffer is handed over as it is (its fd), no re-backing") {
        auto b = cxv::buffer::create(3 * 4096 + 1);
        REQUIRE_MESSAGE(b, b.error().message);
        CHECK((*b)->size() == 4 * 4096);
        (*b)->data()[5] = std::byte{7};
        auto mr = cxv::mr::create(*pd, (*b)->data() + 4096, 2 * 4096, cxv::access_local_write | cxv::access_remote_write);
        REQUIRE_MESSAGE(mr, mr.error().message);
        CHECK((*b)->data()[5] == std::byte{7});
        // Still the buffer's own file at its address (/proc/self/maps), not a re-backing one.
        std::ifstream maps("/proc/self/maps");
        std::string line, at;
        const auto addr = reinterpret_cast<std::uintptr_t>((*b)->data() + 4096);
        while (std::getline(maps, line)) {
            const auto lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
            const auto hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
            if (addr >= lo && addr < hi) at = line;
        }
        CHECK_MESSAGE(at.find("/memfd:cxv-buffer") != std::string::npos, at);
        const auto me = my_books(watcher);
        CHECK(me.mkeys == 1);
    }
    SUBCASE("a sealed memfd mapped shared is registered, at an offset inside it too, and read-only") {
        const int fd = ::memfd_create("cxv-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, 65536) == 0);
        REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
        auto* m = static_cast<std::byte*>(::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        REQUIRE(m != MAP_FAILED);
        {
            auto mr = cxv::mr::create(*pd, m + 8192 + 100, 10000, cxv::access_local_write | cxv::access_remote_write);
            REQUIRE_MESSAGE(mr, mr.error().message);
            // Memory the device only reads (no write access): mapped read-only.
            auto ro = cxv::mr::create(*pd, m + 32768, 4096, 0);
            REQUIRE_MESSAGE(ro, ro.error().message);
            const auto me = my_books(watcher);
            CHECK(me.connections == 2);
            CHECK(me.mkeys == 2);
            CHECK(me.maps >= 2);
        }
        const auto me = my_books(watcher);
        CHECK(me.mkeys == 0);  // deregistered through the daemon
        ::munmap(m, 65536);
        ::close(fd);
    }
    SUBCASE("an unsealed memfd is refused by the daemon (it could shrink under the mapping)") {
        const int fd = ::memfd_create("cxv-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, 65536) == 0);
        void* m = ::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(m != MAP_FAILED);
        auto mr = cxv::mr::create(*pd, m, 65536, cxv::access_local_write);
        REQUIRE_FALSE(mr);
        CHECK(mr.error().code == EPERM);
        ::munmap(m, 65536);
        ::close(fd);
    }
}
