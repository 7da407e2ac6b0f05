// Faults through cxvd (docs/daemon.md, "Faults"): the daemon's death and a restarted
// daemon, and a firmware health syndrome that the daemon recovers from. Two peer
// processes (event_peer.cc) run RC traffic through the daemon; at the fault each must
// see every WR it had posted come back flushed (counted, in order), its next control
// call fail at once with ECONNRESET or ENODEV, and the fatal event; then each opens the
// device again and exchanges checked traffic.
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <sstream>

#include <doctest/doctest.h>

#include "client/remote.h"
#include "hw/doorbell.h"
#include "hw/init_seg.h"
#include "tests/daemon/peer_proc.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

// A peer's DEAD line, checked: WRs flushed (the peer checked each was outstanding and
// that all were), the next control call's errno and time, the fatal events.
void check_dead(peer_proc& p, const std::string& who) {
    const std::string line = p.expect("DEAD ", 20s);
    std::istringstream in(line.substr(5));
    unsigned long sends = 0, recvs = 0, ms = 0, fatal = 0;
    int err = 0;
    in >> sends >> recvs >> err >> ms >> fatal;
    INFO(who, ": ", line);
    // The receives are always posted (32 of them), so there is something to flush.
    CHECK(recvs >= 1);
    CHECK((err == ECONNRESET || err == ENODEV));
    CHECK(ms < 1000);
    CHECK(fatal >= 1);
    MESSAGE(who, " flushed ", sends, " sends and ", recvs, " receives");
}

// Both peers in TRAFFIC until each has seen 100 completions.
void run_traffic(peer_proc& a, peer_proc& b) {
    a.say("TRAFFIC");
    b.say("TRAFFIC");
    a.expect("RUNNING");
    b.expect("RUNNING");
}

// Both peers open the device at `sock` anew and exchange checked SENDs.
void reopen_and_exchange(peer_proc& a, peer_proc& b, const std::string& sock) {
    a.say("REOPEN " + sock);
    b.say("REOPEN " + sock);
    connect_pair(a, b);
    a.say("GO 50");
    b.say("GO 50");
    a.expect("PASS 50");
    b.expect("PASS 50");
}

}  // namespace

TEST_CASE("cxvd killed under traffic: clients flush, fail fast, get the fatal event; a new daemon serves them") {
    auto rig = std::make_unique<daemon_rig>();
    daemon_env env(rig->sock);
    peer_proc a(rig->dir, 0), b(rig->dir, 1);
    connect_pair(a, b);
    a.say("GO 20");
    b.say("GO 20");
    a.expect("PASS 20");
    b.expect("PASS 20");
    run_traffic(a, b);
    // A third client, its QP connected to itself and idle, waits in cq::wait_event.
    peer_proc c(rig->dir, 2);
    const std::string rc = c.expect("READY ");
    c.say("PEER " + rc.substr(6));
    c.expect("CONNECTED");
    c.say("WAITDEAD 20000");
    c.expect("ARMED");

    const auto t0 = std::chrono::steady_clock::now();
    rig->proc->kill_now();  // SIGKILL by PID, reaped
    check_dead(a, "client 0");
    check_dead(b, "client 1");
    // The waiter woke with the fatal event, and its 32 receives came back flushed.
    CHECK(c.expect("WOKE ", 10s) == "WOKE 32 0");
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);

    // A new daemon on the same function (the same cxv-sim setup), at a fresh socket.
    daemon_rig again;
    CHECK(again.sock != rig->sock);
    reopen_and_exchange(a, b, again.sock);
    a.say("EXIT");
    b.say("EXIT");
    c.say("EXIT");
    CHECK(a.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
    CHECK(b.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
    CHECK(c.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
}

TEST_CASE("a health syndrome in cxvd's function: clients get the fatal event and flushes, the daemon recovers") {
    daemon_rig rig;
    daemon_env env(rig.sock);
    peer_proc a(rig.dir, 0), b(rig.dir, 1);
    connect_pair(a, b);
    run_traffic(a, b);

    // The syndrome goes where the firmware writes it, the health buffer of the
    // initialization segment (PRM "Health Buffer"). The model's cxv_sim_control file
    // exists only inside the daemon's process (the one that opened the group), so the
    // test writes the register itself, through the VFIO device fd the daemon hands out
    // with a UAR page (docs/daemon.md "Trust model": that fd reaches all of BAR0).
    test_client w(rig.sock);
    auto u = w.call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0}));
    REQUIRE_MESSAGE(u.err == 0, u.text);
    auto grant = d::parse_alloc_uar_reply(u.payload);
    REQUIRE(grant);
    REQUIRE(u.fds.size() == 1);
    const std::uint64_t bar0 = grant->mmap_offset - std::uint64_t{grant->uar} * cxv::hw::uar_page_size;
    void* seg = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, u.fds[0].get(), static_cast<off_t>(bar0));
    REQUIRE_MESSAGE(seg != MAP_FAILED, std::strerror(errno));
    ifc::set<ifc::health_buffer::synd>(static_cast<std::byte*>(seg) + cxv::hw::init_seg_offset::health_buffer, 0x5);
    ::munmap(seg, 4096);
    // And the fd let go: while any process holds a device fd, vfio keeps the group open
    // and the daemon cannot open it again to recover.
    u.fds.clear();

    check_dead(a, "client 0");
    check_dead(b, "client 1");
    // The daemon logged the recovery and serves again.
    std::string log;
    for (int i = 0; i < 1500; ++i) {
        log = rig.log();
        if (log.find("recovered") != std::string::npos) break;
        std::this_thread::sleep_for(10ms);
    }
    INFO("daemon log: ", log);
    REQUIRE(log.find("recovered") != std::string::npos);
    const auto at = log.find("the function is dead");
    REQUIRE(at != std::string::npos);
    MESSAGE(log.substr(at, log.find('\n', log.find("recovered")) - at));
    CHECK(log.find("health syndrome 0x5") != std::string::npos);
    CHECK(rig.proc->running());

    // New clients (the same processes with a new cxv::device) get traffic through.
    reopen_and_exchange(a, b, rig.sock);
    test_client fresh(rig.sock);
    const auto s = fresh.status();
    CHECK(find_client(s, a.proc->pid) != nullptr);
    CHECK(find_client(s, b.proc->pid) != nullptr);
    a.say("EXIT");
    b.say("EXIT");
    CHECK(a.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
    CHECK(b.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
}

TEST_CASE("a fatal-event callback that destroys its device, on the event reader's thread: no callback after, no use after free") {
    // What a consumer naturally does at IBV_EVENT_DEVICE_FATAL: let the device go, from
    // the callback. The hca's teardown then stops the event reader from that reader's own
    // thread, and the remote function may go with the hca: the reader must touch nothing
    // freed (ASan, --config=san) and call nothing more.
    auto rig = std::make_unique<daemon_rig>();
    struct box {
        std::mutex mu;
        std::unique_ptr<cxv::driver::hca> h;
        std::atomic<int> fatal{0}, after{0};
        std::atomic<bool> destroyed{false};
    };
    auto b = std::make_shared<box>();
    cxv::driver::hca::options o;
    o.on_event = [b](const cxv::driver::hca_event& e) {
        if (b->destroyed.load()) b->after.fetch_add(1);
        if (e.what != cxv::driver::hca_event::fatal) return;
        b->fatal.fetch_add(1);
        std::unique_ptr<cxv::driver::hca> h;
        {
            std::lock_guard lock(b->mu);
            h = std::move(b->h);
        }
        h.reset();  // the device, its channel and the remote function go here
        b->destroyed.store(true);
    };
    o.on_completion = [b](std::uint32_t) {
        if (b->destroyed.load()) b->after.fetch_add(1);
    };
    auto h = cxv::daemon::attach(rig->sock, "", o);
    REQUIRE_MESSAGE(h, h.error().message);
    {
        std::lock_guard lock(b->mu);
        b->h = std::move(h).value();
    }
    rig->proc->kill_now();
    for (int i = 0; i < 500 && !b->destroyed.load(); ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(b->destroyed.load());
    std::this_thread::sleep_for(200ms);  // the reader thread, detached, ends meanwhile
    CHECK(b->fatal.load() == 1);
    CHECK(b->after.load() == 0);
}
