// cxvd under load (issue 20): eight client processes at once, each moving checked
// traffic between two RC QPs of its own through the daemon's function (loop_peer.cc),
// and one of them killed with SIGKILL mid-traffic, then started again, 100 times. Each
// client loops back between its own QPs, so a kill touches no other client: the seven
// others run on and must never see an error (each ends with PASS, every payload
// checked). Afterwards the daemon's books (STATUS), the model's firmware objects (its
// command trace, load.h), the daemon's fds and the client memory it maps are back where
// they were before the first client came.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include <doctest/doctest.h>

#include "tests/daemon/load.h"
#include "tests/daemon/peer_proc.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

// A loop_peer process and this end of its control socket.
struct loop_proc : peer_proc {
    loop_proc(const scratch& dir, const std::string& name) : peer_proc(dir, name, env_path("CXVD_LOOP_PEER")) {}
    // Nothing said so far but RUNNING (a FAIL would be here).
    bool quiet() {
        pollfd p{ctl, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
            char buf[256];
            const ssize_t n = ::read(ctl, buf, sizeof buf);
            if (n > 0) pending.append(buf, static_cast<std::size_t>(n));
        }
        return pending.empty();
    }
};

// CXV_DAEMON for the clients, and the model's command trace in the daemon's log.
struct load_env {
    explicit load_env() { ::setenv("CXV_SIM_TRACE_COMMANDS", "1", 1); }
    ~load_env() {
        ::unsetenv("CXV_SIM_TRACE_COMMANDS");
        ::unsetenv("CXV_DAEMON");
    }
};

}  // namespace

TEST_CASE("eight clients at once; one killed mid-traffic 100 times, the others never see an error; all back to base") {
    constexpr int kClients = 8, kKills = 100;
    load_env env;
    daemon_rig rig;
    ::unsetenv("CXV_SIM_TRACE_COMMANDS");  // for the daemon only
    ::setenv("CXV_DAEMON", rig.sock.c_str(), 1);
    test_client watcher(rig.sock);
    const auto base = watcher.status();
    const fw_objects fw_base = fw_objects_from_trace(rig.log());
    const std::size_t fds_base = rig.fd_count();
    const memfd_maps maps_base = daemon_memfd_maps(rig.pid());
    REQUIRE(base.clients_total == 1);

    std::vector<std::unique_ptr<loop_proc>> procs;
    int started = 0;
    for (int i = 0; i < kClients; ++i) procs.push_back(std::make_unique<loop_proc>(rig.dir, fmt::format("c{}", started++)));
    for (auto& p : procs) {
        const auto l = p->hear(60s);
        REQUIRE_MESSAGE(l == "RUNNING", l, " / ", slurp(p->proc->log));
    }
    // All eight at once in the daemon's books: two QPs, a CQ, a PD and a key each.
    auto s = watcher.status();
    CHECK(s.clients_total == kClients + 1);
    for (const auto& p : procs) {
        const auto* row = find_client(s, p->proc->pid);
        REQUIRE(row != nullptr);
        CHECK(row->qps == 2);
        CHECK(row->cqs == 1);
        CHECK(row->mkeys == 1);
    }

    // A victim is always one that said RUNNING (mid-traffic); a newcomer is not waited
    // for until it is picked, so startups overlap the others' traffic.
    // The model's trace sees them too (so that the count at the end means something).
    const fw_objects fw_busy = fw_objects_from_trace(rig.log());
    CHECK_MESSAGE(fw_busy.qps >= fw_base.qps + 2 * kClients, fw_busy.str());
    CHECK(fw_busy.mkeys >= fw_base.mkeys + kClients);
    CHECK(fw_busy.uars > fw_base.uars);

    std::mt19937 rng(20);
    std::vector<bool> running(kClients, true);
    std::vector<pid_t> killed;
    for (int k = 0; k < kKills; ++k) {
        const int i = static_cast<int>(rng() % kClients);
        if (!running[i]) {
            const auto l = procs[i]->hear(60s);
            REQUIRE_MESSAGE(l == "RUNNING", "client ", i, ": ", l, " / ", slurp(procs[i]->proc->log));
        }
        killed.push_back(procs[i]->proc->pid);
        REQUIRE(procs[i]->quiet());  // no FAIL before its end
        procs[i]->proc->kill_now();  // SIGKILL mid-traffic, reaped
        procs[i] = std::make_unique<loop_proc>(rig.dir, fmt::format("c{}", started++));
        running[i] = false;
        for (int j = 0; j < kClients; ++j) {
            REQUIRE_MESSAGE(procs[j]->proc->running(), "client ", j, " ended: ", slurp(procs[j]->proc->log));
        }
    }
    for (int i = 0; i < kClients; ++i) {
        if (running[i]) continue;
        const auto l = procs[i]->hear(60s);
        REQUIRE_MESSAGE(l == "RUNNING", "client ", i, ": ", l, " / ", slurp(procs[i]->proc->log));
    }
    s = watcher.status();
    for (const pid_t v : killed) CHECK(find_client(s, v) == nullptr);
    // The survivors of the whole run and the last newcomers: every one ends with PASS.
    for (auto& p : procs) p->say("STOP");
    for (auto& p : procs) {
        const auto l = p->hear(30s);
        CHECK_MESSAGE(l.rfind("PASS ", 0) == 0, l, " / ", slurp(p->proc->log));
        CHECK(p->proc->wait(std::chrono::steady_clock::now() + 30s) == 0);
    }
    procs.clear();

    // Back to base: the daemon's books, the model's objects, fds, mapped client memory.
    s = wait_status(watcher, [](const d::status_reply& x) { return x.clients_total == 1; }, 5000ms);
    CHECK(s.clients_total == 1);
    CHECK(s.clients_served == base.clients_served + kClients + kKills);
    const auto* me = find_client(s, ::getpid());
    REQUIRE(me != nullptr);
    CHECK(me->qps + me->cqs + me->mkeys + me->pds + me->srqs + me->uars + me->maps == 0);
    CHECK(me->pinned == 0);
    fw_objects fw;
    for (int t = 0; t < 200 && !((fw = fw_objects_from_trace(rig.log())) == fw_base); ++t) std::this_thread::sleep_for(10ms);
    CHECK_MESSAGE(fw == fw_base, "firmware objects now: ", fw.str(), "; before: ", fw_base.str());
    CHECK(rig.fd_count() == fds_base);
    const auto maps = daemon_memfd_maps(rig.pid());
    CHECK(maps.count == maps_base.count);
    CHECK(maps.bytes == maps_base.bytes);
    const std::string log = rig.log();
    CHECK_MESSAGE(log.find("commands failed") == std::string::npos, "a cleanup failed");
}
