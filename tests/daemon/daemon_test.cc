// cxvd under the model (`cxv-sim run -- cxvd`), with clients that are this test process
// and processes it forks, none under cxv-sim: what the daemon passes them (memory, the
// device fd for a UAR page) works across processes as it would with a card. Each case
// checks what a client may and may not do, and that a client that goes leaves nothing.
#include <signal.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include <doctest/doctest.h>

#include "tests/daemon/load.h"
#include "tests/daemon/rig.h"
#include "tests/skip.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

}  // namespace

TEST_CASE("HELLO names the function; STATUS lists it and this client; SIGTERM stops the daemon cleanly") {
    daemon_rig rig;
    test_client c(rig.sock);
    const auto& dev = c.hello.devices.at(0);
    CHECK(dev.bdf == "0000:c5:00.0");
    CHECK(!dev.firmware.empty());
    CHECK(dev.port_up);
    CHECK(dev.ethernet);
    CHECK(dev.caps.size() >= 256);
    CHECK(c.daemon_pid() == rig.pid());
    auto s = c.status();
    REQUIRE(s.devices.size() == 1);
    CHECK(s.devices[0].firmware == dev.firmware);
    const auto* me = find_client(s, ::getpid());
    REQUIRE(me != nullptr);
    CHECK(me->uid == ::getuid());
    CHECK(!me->comm.empty());
    CHECK(me->cqs == 0);

    REQUIRE(::kill(rig.pid(), SIGTERM) == 0);
    CHECK(rig.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
    const auto log = rig.log();
    CHECK(log.find("<6>cxvd: stopping") != std::string::npos);
    CHECK(log.find("<6>cxvd: stopped") != std::string::npos);
    CHECK(!std::filesystem::exists(rig.sock));
}

TEST_CASE("every vfio-pci function by default, or those --device names; requests name the function") {
    SUBCASE("default: all of them") {
        daemon_rig rig({}, {"--devices", "2"});
        test_client c(rig.sock);
        REQUIRE(c.hello.devices.size() == 2);
        CHECK(c.hello.devices[0].bdf == "0000:c5:00.0");
        CHECK(c.hello.devices[1].bdf == "0000:c5:00.1");
        shared_memory m(4096);
        const int fd[] = {m.fd};
        auto on1 = c.call(d::msg_type::map_memory, d::body(d::map_memory_req{1, true, 0, 4096}), fd);
        CHECK(on1.err == 0);
        auto on2 = c.call(d::msg_type::map_memory, d::body(d::map_memory_req{2, true, 0, 4096}), fd);
        CHECK(on2.err == ENODEV);
        CHECK(c.call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{1})).err == 0);
        CHECK(find_client(c.status(), ::getpid())->uars == 1);
    }
    SUBCASE("--device picks one") {
        daemon_rig rig({"--device", "0000:c5:00.1"}, {"--devices", "2"});
        test_client c(rig.sock);
        REQUIRE(c.hello.devices.size() == 1);
        CHECK(c.hello.devices[0].bdf == "0000:c5:00.1");
    }
}

TEST_CASE("MAP_MEMORY: a sealed memfd is mapped and counted; unsealed memory and the pinned quota are refused") {
    daemon_rig rig({"--quota-pinned-bytes", std::to_string(1 << 20)});
    test_client c(rig.sock);
    shared_memory half(512 * 1024), more(768 * 1024), loose(4096, false);
    int err = 0;
    const auto iova = c.map(half, &err);
    CHECK(err == 0);
    CHECK(iova != 0);
    CHECK(find_client(c.status(), ::getpid())->pinned == 512 * 1024);
    CHECK(c.map(loose, &err) == 0);
    CHECK(err == EPERM);
    auto a = c.call(d::msg_type::map_memory, d::body(d::map_memory_req{0, true, 0, more.size}),
                    std::vector<int>{more.fd});
    CHECK(a.err == EDQUOT);
    CHECK(a.text.find("quota") != std::string::npos);
    CHECK(c.unmap(iova + 4096) == EPERM);  // not the start of a mapping
    CHECK(c.unmap(iova) == 0);
    CHECK(find_client(c.status(), ::getpid())->pinned == 0);
    CHECK(c.map(more, &err) != 0);  // within the quota now
    CHECK(err == 0);
}

TEST_CASE("CREATE_CQ on the client's own memory and UAR; someone else's memory, UAR or CQ is refused") {
    daemon_rig rig;
    test_client a(rig.sock), b(rig.sock);
    shared_memory ma(8192), mb(8192);
    const auto ia = a.map(ma), ib = b.map(mb);
    const auto ua = a.alloc_uar(), ub = b.alloc_uar();
    CHECK(ua != ub);

    const auto cqn = a.cq(ia, ia + 4096, ua);
    CHECK(a.query_cq(cqn) == 0);
    CHECK(a.status().clients.size() == 2);
    CHECK(find_client(a.status(), ::getpid()) != nullptr);

    // Memory the client never mapped, memory another client mapped, another's UAR, an EQ
    // other than the completion EQ.
    CHECK(a.create_cq(ia + (64 << 20), ia + 4096, ua).err == EPERM);
    CHECK(a.create_cq(ia, ia + 4096, ua, a.hello.devices[0].comp_eqn + 1).err == EPERM);
    CHECK(a.create_cq(ib, ia + 4096, ua).err == EPERM);
    CHECK(a.create_cq(ia, ib + 4096, ua).err == EPERM);
    CHECK(a.create_cq(ia, ia + 4096, ub).err == EPERM);
    // Another client can neither destroy nor query it.
    CHECK(b.destroy_cq(cqn) == EPERM);
    CHECK(b.query_cq(cqn) == EPERM);
    // Nor can its owner pull the memory or the UAR from under it.
    CHECK(a.unmap(ia) == EBUSY);
    CHECK(a.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, ua})).err == EBUSY);
    CHECK(b.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, ua})).err == EPERM);
    CHECK(a.query_cq(cqn) == 0);
    CHECK(a.destroy_cq(cqn) == 0);
    CHECK(a.query_cq(cqn) == EPERM);  // gone from its objects
    CHECK(a.unmap(ia) == 0);
    CHECK(a.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, ua})).err == 0);
}

TEST_CASE("PDs and memory keys: only MTT keys on the client's own PD and memory; the allow-list") {
    daemon_rig rig({"--quota-mrs", "2"});
    test_client a(rig.sock), b(rig.sock);
    shared_memory ma(4 * 4096), mb(4096);
    const auto ia = a.map(ma), ib = b.map(mb);
    const auto pa = a.alloc_pd(), pb = b.alloc_pd();
    auto k = a.create_mkey(pa, ia, 4);
    REQUIRE_MESSAGE(k.err == 0, k.text);
    const auto key = ifc::get<ifc::create_mkey_out::mkey_index>(k.payload.data());
    CHECK(a.create_mkey(pb, ia, 4).err == EPERM);       // another client's PD
    CHECK(a.create_mkey(pa, ib, 1).err == EPERM);       // another client's memory
    CHECK(a.create_mkey(pa, ia + 4096, 4).err == EPERM);  // runs past the mapping
    CHECK(a.create_mkey(pa, ia, 4, 0).err == EPERM);    // PA mode: every IOVA of the function
    CHECK(a.create_mkey(pa, ia, 1).err == 0);
    auto over = a.create_mkey(pa, ia, 1);
    CHECK(over.err == EDQUOT);
    CHECK(over.text.find("quota") != std::string::npos);
    CHECK(b.destroy_mkey(key) == EPERM);
    CHECK(b.dealloc_pd(pa) == EPERM);
    CHECK(a.dealloc_pd(pa) == EBUSY);  // its keys first
    CHECK(a.destroy_mkey(key) == 0);
    // Commands off the allow-list: the function's own state, another kind of object.
    for (auto op : {cmd_opcode::TEARDOWN_HCA, cmd_opcode::QUERY_HCA_CAP, cmd_opcode::CREATE_EQ, cmd_opcode::ALLOC_UAR}) {
        auto in = cxv::driver::command<ifc::alloc_pd_in>(op);
        auto r = a.command(in, 16);
        CHECK(r.err == EPERM);
        CHECK(r.text.find("allow-list") != std::string::npos);
    }
    CHECK(a.status().clients.size() == 2);
}

TEST_CASE("QPs: made on the client's own PD, CQ, UAR and memory, moved and queried by it alone") {
    daemon_rig rig({"--quota-qps", "1"});
    test_client a(rig.sock), b(rig.sock);
    shared_memory ma(4 * 4096), mb(2 * 4096);
    const auto ia = a.map(ma), ib = b.map(mb);
    const auto ua = a.alloc_uar(), ub = b.alloc_uar();
    const auto pa = a.alloc_pd(), pb = b.alloc_pd();
    const auto ca = a.cq(ia, ia + 4096, ua), cb = b.cq(ib, ib + 4096, ub);
    const std::uint64_t wq = ia + 2 * 4096, dbr = ia + 3 * 4096;
    CHECK(a.create_qp(pb, ca, ua, wq, dbr).err == EPERM);         // another's PD
    CHECK(a.create_qp(pa, cb, ua, wq, dbr).err == EPERM);         // another's CQ
    CHECK(a.create_qp(pa, ca, ub, wq, dbr).err == EPERM);         // another's UAR
    CHECK(a.create_qp(pa, ca, ua, ib, dbr).err == EPERM);         // another's memory
    CHECK(a.create_qp(pa, ca, ua, wq, ib + 64).err == EPERM);     // another's doorbell record
    auto rl = a.create_qp(pa, ca, ua, wq, dbr, true);             // the reserved lkey
    CHECK(rl.err == EPERM);
    CHECK(rl.text.find("rlky") != std::string::npos);
    const auto qpn = a.qp(pa, ca, ua, wq, dbr);
    CHECK(a.create_qp(pa, ca, ua, wq, dbr).err == EDQUOT);
    CHECK(b.rst2init(qpn) == EPERM);
    CHECK(b.query_qp(qpn) == EPERM);
    CHECK(b.destroy_qp(qpn) == EPERM);
    CHECK(a.rst2init(qpn, 1) == EPERM);  // a Q counter set: the daemon's
    CHECK(a.rst2init(qpn) == 0);
    CHECK(a.query_qp(qpn) == 0);
    CHECK(a.destroy_cq(ca) == EBUSY);  // the QP holds its CQ, PD, UAR and memory
    CHECK(a.dealloc_pd(pa) == EBUSY);
    CHECK(a.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, ua})).err == EBUSY);
    CHECK(a.unmap(ia) == EBUSY);
    CHECK(find_client(a.status(), ::getpid()) != nullptr);
    CHECK(a.destroy_qp(qpn) == 0);
    CHECK(a.query_qp(qpn) == EPERM);
    CHECK(a.destroy_cq(ca) == 0);
    CHECK(a.dealloc_pd(pa) == 0);
}

TEST_CASE("a client killed with SIGKILL: its objects, UARs and memory go within a second; another's stay") {
    daemon_rig rig;
    test_client keeper(rig.sock);
    shared_memory mk(8192);
    const auto ik = keeper.map(mk);
    const auto cq_kept = keeper.cq(ik, ik + 4096, keeper.alloc_uar());
    const std::size_t fds_before = rig.fd_count();

    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t victim = ::fork();
    REQUIRE(victim >= 0);
    if (victim == 0) {
        // A failed REQUIRE throws: caught here, so the child never runs the parent's tests.
        try {
        ::close(ready[0]);
        test_client v(rig.sock);
        shared_memory m(4 * 4096);
        const auto iova = v.map(m);
        const auto uar = v.alloc_uar();
        (void)v.cq(iova, iova + 4096, uar);
        (void)v.cq(iova + 8192, iova + 4096 + 64, uar);
        const auto pd = v.alloc_pd();
        if (v.create_mkey(pd, iova, 4).err != 0) ::_exit(3);
        shared_memory w(2 * 4096);
        const auto wiova = v.map(w);
        const auto cqn = v.cq(wiova, wiova + 4096 + 128, uar);
        if (v.rst2init(v.qp(pd, cqn, uar, iova + 3 * 4096, wiova + 4096)) != 0) ::_exit(4);
        (void)!::write(ready[1], "r", 1);
        for (;;) ::pause();
        } catch (...) {
            ::_exit(5);
        }
    }
    // Killed and reaped by PID whatever happens below (a failed REQUIRE unwinds).
    struct reaper {
        pid_t pid;
        ~reaper() {
            if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
        }
    } guard{victim};
    ::close(ready[1]);
    char r = 0;
    pollfd p{ready[0], POLLIN, 0};
    REQUIRE(::poll(&p, 1, 30000) == 1);
    REQUIRE(::read(ready[0], &r, 1) == 1);
    ::close(ready[0]);
    auto s = keeper.status();
    const auto* v = find_client(s, victim);
    REQUIRE(v != nullptr);
    CHECK(v->cqs == 3);
    CHECK(v->pds == 1);
    CHECK(v->mkeys == 1);
    CHECK(v->qps == 1);
    CHECK(v->uars == 1);
    CHECK(v->maps == 2);
    CHECK(v->pinned == 6 * 4096);

    REQUIRE(::kill(victim, SIGKILL) == 0);
    REQUIRE(::waitpid(victim, nullptr, 0) == victim);
    guard.pid = -1;
    // Cleaned up without the keeper doing anything (how fast: bench/daemon_control).
    s = wait_status(keeper, [&](const d::status_reply& x) { return find_client(x, victim) == nullptr; }, 30s);
    CHECK(find_client(s, victim) == nullptr);
    const auto* k = find_client(s, ::getpid());
    REQUIRE(k != nullptr);
    CHECK(k->cqs == 1);
    CHECK(k->uars == 1);
    CHECK(keeper.query_cq(cq_kept) == 0);  // undisturbed
    const auto log = rig.log();
    // The whole line: nothing may follow (", N commands failed"), and no error anywhere.
    CHECK(log.find("gone (its socket closed): 6 objects destroyed, 1 UARs returned, 24576 bytes unmapped\n") !=
          std::string::npos);
    CHECK(log.find("commands failed") == std::string::npos);
    CHECK(log.find("<3>") == std::string::npos);
    CHECK(rig.fd_count() == fds_before);
}

TEST_CASE("1,000 connect / create / destroy / disconnect cycles leave no fd, object, firmware object or memory behind") {
    // The model's command trace in the daemon's log: its firmware objects (load.h).
    ::setenv("CXV_SIM_TRACE_COMMANDS", "1", 1);
    daemon_rig rig;
    ::unsetenv("CXV_SIM_TRACE_COMMANDS");
    test_client watcher(rig.sock);
    const auto base = watcher.status();
    const std::size_t fds_before = rig.fd_count();
    const fw_objects fw_base = fw_objects_from_trace(rig.log());
    const memfd_maps maps_base = daemon_memfd_maps(rig.pid());
    std::uint64_t rss_warm = 0;
    shared_memory m(16384);
    for (int i = 0; i < 1000; ++i) {
        test_client c(rig.sock);
        const auto iova = c.map(m);
        const auto uar = c.alloc_uar();
        const auto pd = c.alloc_pd();
        const auto cqn = c.cq(iova, iova + 4096, uar);
        auto key = c.create_mkey(pd, iova + 12288, 1);
        REQUIRE_MESSAGE(key.err == 0, key.text);
        const auto mkey = ifc::get<ifc::create_mkey_out::mkey_index>(key.payload.data());
        const auto qpn = c.qp(pd, cqn, uar, iova + 8192, iova + 4096 + 64);
        if (i % 2 == 0) {  // half tidy up themselves, half leave it to the daemon
            REQUIRE(c.destroy_qp(qpn) == 0);
            REQUIRE(c.destroy_mkey(mkey) == 0);
            REQUIRE(c.destroy_cq(cqn) == 0);
            REQUIRE(c.dealloc_pd(pd) == 0);
            REQUIRE(c.call(d::msg_type::dealloc_uar, d::body(d::dealloc_uar_req{0, uar})).err == 0);
            REQUIRE(c.unmap(iova) == 0);
        }
        if (i == 99) {
            rss_warm = rss_kib(rig.pid());  // allocator and caches warmed up
            // The trace sees this cycle's objects (so the count at the end means something).
            CHECK(fw_objects_from_trace(rig.log()).qps >= fw_base.qps + 1);
        }
    }
    const auto s = wait_status(watcher, [&](const d::status_reply& x) { return x.clients.size() == 1; }, 2000ms);
    CHECK(s.clients.size() == base.clients.size());
    CHECK(s.clients_served == base.clients_served + 1000);
    std::size_t fds = 0;
    for (int i = 0; i < 100 && (fds = rig.fd_count()) != fds_before; ++i) std::this_thread::sleep_for(10ms);
    CHECK(fds == fds_before);
    // The firmware holds what it held before the first cycle (every create undone).
    const fw_objects fw = fw_objects_from_trace(rig.log());
    CHECK_MESSAGE(fw == fw_base, "firmware objects now: ", fw.str(), "; before: ", fw_base.str());
    const auto maps = daemon_memfd_maps(rig.pid());
    CHECK(maps.count == maps_base.count);
    CHECK(maps.bytes == maps_base.bytes);
    // 900 cycles after the warm-up grow the daemon by less than 4 MiB (about 4.5 KiB a
    // cycle would be a leak of every connection's books or buffers).
    // Not under ASan: its quarantine holds up to 256 MiB of freed memory (and
    // LeakSanitizer checks leaks there instead).
    REQUIRE(rss_warm > 0);
#if !defined(__SANITIZE_ADDRESS__)
    const std::uint64_t rss = rss_kib(rig.pid());
    CHECK_MESSAGE(rss < rss_warm + 4096, "RSS ", rss, " KiB after 1,000 cycles, ", rss_warm, " KiB after 100");
#endif
}

TEST_CASE("malformed, oversized, truncated, wrong-version and out-of-order requests get errors; serving goes on") {
    daemon_rig rig;
    auto raw = test_client::connect(rig.sock);
    auto expect = [&](std::vector<std::byte> msg, int err, std::span<const int> fds = {}) {
        auto a = raw.call_raw(msg, fds);
        REQUIRE_MESSAGE(a, a.error().message);
        CHECK_MESSAGE(a->err == err, a->text);
        CHECK(a->text.empty() == (err == 0));
    };
    expect(d::encode(d::msg_type::status, 1, {}), EPROTO);  // before HELLO
    auto hello = d::encode(d::msg_type::hello, 1, d::body(d::hello_req{}));
    auto bad_magic = hello;
    bad_magic[1] = std::byte{0};
    expect(bad_magic, EPROTO);
    auto v2 = hello;
    v2[4] = std::byte{d::protocol_version + 1};  // a version this daemon does not speak
    expect(v2, EPROTONOSUPPORT);
    expect(std::vector<std::byte>(hello.begin(), hello.begin() + 9), EBADMSG);   // truncated header
    expect(std::vector<std::byte>(hello.begin(), hello.end() - 1), EBADMSG);      // truncated body
    expect(std::vector<std::byte>(d::max_message_bytes + 4096, std::byte{7}), EMSGSIZE);
    expect(d::encode(static_cast<d::msg_type>(42), 1, {}), EOPNOTSUPP);
    expect(d::encode(d::msg_type::hello, 1, d::body(d::hello_req{5, 9})), EPROTONOSUPPORT);
    expect(hello, 0);
    expect(hello, EPROTO);  // twice
    expect(d::encode(d::msg_type::status, 5, {}), EPROTO);  // sequence 2 expected
    expect(d::encode(d::msg_type::status, 2, {}), 0);
    shared_memory m(4096);
    const int fd[] = {m.fd};
    // A refusal of a request in sequence moves the sequence on, as the client's did.
    expect(d::encode(d::msg_type::status, 3, {}), EBADF, fd);  // an fd where none goes
    expect(d::encode(d::msg_type::map_memory, 4, d::body(d::map_memory_req{0, true, 0, 8192})), EINVAL, fd);
    expect(d::encode(d::msg_type::map_memory, 5, d::body(d::map_memory_req{7, true, 0, 4096})), ENODEV, fd);
    d::command_req short_cmd;
    short_cmd.out_len = 16;
    short_cmd.in = cxv::driver::command<ifc::alloc_pd_in>(cmd_opcode::CREATE_CQ);  // shorter than create_cq_in
    expect(d::encode(d::msg_type::command, 6, d::body(short_cmd)), EBADMSG);
    auto cut = d::encode(d::msg_type::status, 7, {});
    cut.push_back(std::byte{0});  // a body where STATUS has none: the header says 0 bytes
    expect(cut, EBADMSG);
    expect(d::encode(d::msg_type::status, 7, {}), EPROTO);  // 7 was taken by the refused one
    expect(d::encode(d::msg_type::status, 8, {}), 0);
    // Another connection is served all along.
    test_client other(rig.sock);
    CHECK(other.status().clients.size() == 2);
}

TEST_CASE("a refused request does not desynchronise the client; a late reply is not taken for the next") {
    daemon_rig rig;
    test_client c(rig.sock);
    shared_memory m(4096);
    // Refused by the parser (8 KiB of a 4 KiB file), after client::call counted it.
    auto a = c.call(d::msg_type::map_memory, d::body(d::map_memory_req{0, true, 0, 8192}), std::vector<int>{m.fd});
    CHECK(a.err == EINVAL);
    auto b = c.call(d::msg_type::unmap_memory, std::vector<std::byte>(3));  // a body of the wrong size
    CHECK(b.err == EBADMSG);
    CHECK(c.status().clients.size() == 1);  // EPROTO here before the fix
    // A request that times out (0 ms): its reply (ALLOC_UAR's, with the device fd) comes
    // late and must not be read as the answer to the STATUS after it.
    auto late = c.c.call(d::msg_type::alloc_uar, d::body(d::alloc_uar_req{0}), {}, std::chrono::milliseconds(0));
    REQUIRE(!late);
    CHECK(late.error().code == ETIMEDOUT);
    const auto s = c.status();
    CHECK(s.clients.size() == 1);
    CHECK(find_client(s, ::getpid())->uars == 1);
}

TEST_CASE("a uid not on the allow-list is refused with a reply saying so; one on it is served" *
          cxv::test::skip_unless(::getuid() == 0, "the allow-list by uid: not root, cannot take another uid")) {
    daemon_rig rig({"--allow-uid", "65533"});
    // The administrator opens the socket to others (its mode and directory), as a group
    // would be given access on a real host; the daemon's allow-list still decides.
    REQUIRE(::chmod(rig.dir.dir.c_str(), 0755) == 0);
    REQUIRE(::chmod(rig.sock.c_str(), 0666) == 0);
    auto as_uid = [&](uid_t uid, int want_err) {
        return in_child([&] {
            if (::setgid(uid) != 0 || ::setuid(uid) != 0) return 10;
            auto c = d::client::connect(rig.sock);
            if (!c) return 11;
            auto a = c->call(d::msg_type::hello, d::body(d::hello_req{}));
            if (!a) return 12;
            if (a->err != want_err) return 13;
            if (want_err == EACCES && a->text.find("not allowed") == std::string::npos) return 14;
            return 0;
        });
    };
    CHECK(as_uid(65534, EACCES) == 0);
    CHECK(as_uid(65533, 0) == 0);
    CHECK(rig.log().find("<4>cxvd: refused pid") != std::string::npos);
    test_client c(rig.sock);  // root still served
    CHECK(c.status().refused >= 1);
}

TEST_CASE("a client that does not read its replies is dropped when its socket is full; others are served") {
    daemon_rig rig;
    test_client slow(rig.sock), other(rig.sock);
    // STATUS after STATUS, never reading: the daemon's replies fill the slow client's
    // socket, and the daemon, which never blocks on a send, drops it.
    bool dropped = false;
    std::uint32_t seq = slow.c.next_seq();
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (!dropped && std::chrono::steady_clock::now() < end) {
        const auto msg = d::encode(d::msg_type::status, seq, {});
        auto s = d::send_message(slow.c.fd(), msg, {}, MSG_DONTWAIT);
        if (s) {
            ++seq;
        } else if (s.error().code == EAGAIN) {
            std::this_thread::sleep_for(1ms);
        } else {
            dropped = true;  // EPIPE / ECONNRESET: the daemon closed it
        }
        if (seq % 64 == 0) dropped = dropped || rig.log().find("its socket is full") != std::string::npos;
    }
    INFO(rig.log());
    CHECK(dropped);
    CHECK(rig.log().find("its socket is full") != std::string::npos);
    const auto s = wait_status(other, [](const d::status_reply& x) { return x.clients.size() == 1; }, 1000ms);
    CHECK(s.clients.size() == 1);
}

TEST_CASE("cxv status prints the daemon's functions and clients as a table") {
    daemon_rig rig;
    test_client c(rig.sock);
    shared_memory m(8192);
    const auto iova = c.map(m);
    (void)c.cq(iova, iova + 4096, c.alloc_uar());
    const std::string out = rig.dir.dir + "/status.out";
    ::setenv("CXV_DAEMON", rig.sock.c_str(), 1);
    auto r = run({env_path("CXV_TOOL"), "status"}, out, 30s);
    ::unsetenv("CXV_DAEMON");
    INFO(r.output);
    CHECK(r.status == 0);
    // Two clients: this process and cxv status itself.
    CHECK(r.output.find("cxvd at " + rig.sock + ": 1 function(s), 2 client(s) now") != std::string::npos);
    CHECK(r.output.find("0000:c5:00.0") != std::string::npos);
    CHECK(r.output.find("Active") != std::string::npos);
    // This process's row: pid, uid, 1 CQ, 1 UAR, 1 mapping of 8 KiB.
    CHECK(r.output.find(std::to_string(::getpid()) + " ") != std::string::npos);
    CHECK(r.output.find("8.0 KiB") != std::string::npos);
    CHECK(r.output.find(" cxv ") != std::string::npos);
    // --socket beats the environment; a socket nobody serves is a clear error.
    auto none = run({env_path("CXV_TOOL"), "status", "--socket", rig.dir.dir + "/nobody.sock"}, out, 30s);
    CHECK(none.status == 1);
    CHECK(none.output.find("cannot reach cxvd") != std::string::npos);
}
