// No client of cxvd can stall another (issue 33, docs/daemon.md "No client stalls
// another"). While one client's departure is torn down (thousands of mappings and
// objects), or one client floods the daemon with 4 MiB commands, another client's
// control calls (HELLO, STATUS, a small COMMAND) each come back within 250 ms (or a tenth
// of the teardown, when that is longer) -- a bound against a stall (which lasts the whole
// teardown: seconds), not a speed check: on today's two cores they take a few
// milliseconds. And one client's completion-event storm overflows its own event queue only: the
// other client receives every one of its events, and the storming one gets an overflow
// event saying how many it lost.
//
// Every loop is bounded in count and time; the daemon and its model are killed by PID
// at the end (daemon_rig).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <doctest/doctest.h>
#include <infiniband/verbs.h>

#include "api/cxv.h"
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "tests/daemon/load.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

constexpr auto kBound = 250ms;  // a stall, not a speed check

long ms_of(clk::duration d) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}
double ms_f(clk::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Control calls of clients that are not the one under load, timed one by one: a new
// client's connect and HELLO, and STATUS and a small command of one that stays.
struct prober {
    std::string sock;
    test_client c;
    clk::duration worst{}, worst_hello{}, worst_status{}, worst_command{};
    std::size_t calls = 0, over = 0;  // over: calls slower than the bound
    explicit prober(const std::string& s) : sock(s), c(s) {}
    template <typename Fn>
    auto timed(clk::duration& slot, Fn fn) {
        const auto t0 = clk::now();
        auto r = fn();
        const auto took = clk::now() - t0;
        slot = std::max(slot, took);
        worst = std::max(worst, took);
        ++calls;
        over += took >= kBound;
        return r;
    }
    d::status_reply status() {
        return timed(worst_status, [&] { return c.status(); });
    }
    // A newcomer: connect, HELLO (once per connection), gone again.
    void hello() {
        auto h = timed(worst_hello, [&] {
            auto n = d::client::connect(sock);
            return n ? n->call(d::msg_type::hello, d::body(d::hello_req{}), {}, 30s) : n.error();
        });
        REQUIRE_MESSAGE(h, h.error().message);
        CHECK(h->err == 0);
    }
    // A small firmware command of its own: ALLOC_PD, then DEALLOC_PD.
    void command() {
        const auto pd = timed(worst_command, [&] { return c.alloc_pd(); });
        CHECK(timed(worst_command, [&] { return c.dealloc_pd(pd); }) == 0);
    }
    std::string str() const {
        return fmt::format("{} calls ({} over {} ms), slowest {:.1f} ms (HELLO {:.1f}, STATUS {:.1f}, COMMAND {:.1f})",
                           calls, over, kBound.count(), ms_f(worst), ms_f(worst_hello), ms_f(worst_status),
                           ms_f(worst_command));
    }
};

std::size_t mappings_to_tear_down() {
    // The case is ~50,000 (its teardown takes ~10 s); the default run takes
    // 20,000, set up in ~5 s and torn down in ~1 s, where a stall before the fix lasted
    // seconds.
    const char* n = std::getenv("CXVD_STALL_MAPPINGS");
    const long asked = n != nullptr ? std::atol(n) : 0;
    return static_cast<std::size_t>(std::max(asked, 20000L));  // its 3,008 keys and CQs need as many
}

}  // namespace

TEST_CASE("a departed client's thousands of mappings and objects are torn down while another's control calls stay prompt") {
    const std::size_t n = mappings_to_tear_down();
    constexpr std::size_t kCqs = 8, kKeys = 3000;
    // The model's command trace in the daemon's log: its firmware objects (load.h).
    ::setenv("CXV_SIM_TRACE_COMMANDS", "1", 1);
    // Firmware pages for 3,000 keys at once (the model asks for more as it goes, and a
    // burst of creates can outrun that: NO_RESOURCES).
    daemon_rig rig({"--quota-mappings", std::to_string(n)}, {"--set", "init_pages=1024"});
    ::unsetenv("CXV_SIM_TRACE_COMMANDS");
    prober b(rig.sock);
    const auto fw_base = fw_objects_from_trace(rig.log());
    const auto maps_base = daemon_memfd_maps(rig.pid());

    // The departing client: n mappings (the first kCqs of two pages, a CQ's ring and its
    // doorbell record), a UAR, a PD, kCqs CQs and kKeys memory keys on its pages.
    auto a = std::make_unique<test_client>(rig.sock);
    shared_memory page(4096), two(8192);
    const auto t0 = clk::now();
    std::vector<std::uint64_t> iovas;
    for (std::size_t i = 0; i < n; ++i) {
        int err = 0;
        iovas.push_back(a->map(i < kCqs ? two : page, &err));
        REQUIRE_MESSAGE(err == 0, "mapping ", i);
    }
    const auto mapped = clk::now() - t0;
    const auto uar = a->alloc_uar();
    const auto pd = a->alloc_pd();
    for (std::size_t i = 0; i < kCqs; ++i) (void)a->cq(iovas[i], iovas[i] + 4096, uar);
    for (std::size_t i = 0; i < kKeys; ++i) {
        auto k = a->create_mkey(pd, iovas[kCqs + i], 1);
        REQUIRE_MESSAGE(k.err == 0, k.text);
    }
    const auto made = clk::now() - t0 - mapped;
    const auto before = b.status();
    REQUIRE(before.clients_total == 2);
    const std::uint64_t bytes = (2 * kCqs + (n - kCqs)) * 4096;

    // It goes; the other client asks, again and again, until the departed one is gone
    // from STATUS (its teardown done) -- at most 120 s.
    const auto t1 = clk::now();
    a->c.close("the test's departing client");
    std::size_t during = 0;  // STATUS replies that still listed it
    bool gone = false;
    for (int i = 0; i < 200000 && clk::now() - t1 < 120s; ++i) {
        b.hello();
        const auto s = b.status();
        // Never half torn down: listed as it was when it went, until it is gone (the
        // others, this prober and its newcomers, have no mapping).
        bool listed = false;
        for (const auto& c : s.clients) {
            if (c.maps == n && c.cqs == kCqs && c.mkeys == kKeys && c.uars == 1) listed = true;
            else CHECK(c.maps == 0);
        }
        if (!listed) {
            gone = true;
            break;
        }
        ++during;
        if (i % 8 == 0) b.command();
        std::this_thread::sleep_for(1ms);
    }
    const auto torn = clk::now() - t1;
    MESSAGE(fmt::format("{} mappings set up in {} ms, {} objects and a UAR in {} ms; all torn down in {} ms; the "
                        "other client meanwhile: {}, {} STATUS replies listing the departed client",
                        n, ms_of(mapped), kCqs + kKeys + 1, ms_of(made), ms_of(torn), b.str(), during));
    REQUIRE_MESSAGE(gone, "the departed client was not gone within 120 s");
    // A stall is a call that waits for the teardown (all of it, before the fix): no call
    // may take half of it, nor 250 ms when that is more (a sanitizer build on a loaded
    // machine tears 20,000 mappings down in ~20 s, one command at a time in the model).
    // Half, not less: on two cores shared with a QEMU guest of another test, a call that
    // did not wait for the teardown has been seen to take 393 ms of a 1,141 ms teardown,
    // the model's thread and the daemon's lanes waiting for a CPU.
    const auto bound = std::max<clk::duration>(kBound, torn / 2);
    CHECK_MESSAGE(b.worst < bound, "a control call took ", ms_f(b.worst), " ms during a teardown of ", ms_of(torn),
                  " ms");
    CHECK(during >= 3);  // the calls did overlap the teardown

    // Everything released: the log's account, the model's firmware objects, the daemon's
    // memfd mappings, and the uid's mapping quota (n) whole again.
    const auto log = rig.log();
    const std::string account = fmt::format("gone (its socket closed): {} objects destroyed, 1 UARs returned, {} bytes "
                                            "unmapped\n",
                                            kCqs + kKeys + 1, bytes);
    CHECK_MESSAGE(log.find(account) != std::string::npos, "no line '", account, "' in the daemon's log");
    CHECK(log.find("commands failed") == std::string::npos);
    const auto fw = fw_objects_from_trace(log);
    CHECK_MESSAGE(fw == fw_base, "firmware objects now: ", fw.str(), "; before: ", fw_base.str());
    const auto maps = daemon_memfd_maps(rig.pid());
    CHECK(maps.count == maps_base.count);
    CHECK(maps.bytes == maps_base.bytes);
    std::vector<std::uint64_t> again;
    for (std::size_t i = 0; i < 64; ++i) {
        int err = 0;
        again.push_back(b.c.map(page, &err));
        CHECK(err == 0);
    }
    for (const auto iova : again) CHECK(b.c.unmap(iova) == 0);
}

TEST_CASE("one client flooding 4 MiB commands (a 2 GiB key's CREATE_MKEY) does not hold up another's small ones") {
    constexpr std::size_t kBig = std::size_t{2} << 30, kPages = kBig / 4096;
    // The model keeps a key's MTT in firmware pages the driver gave it: 4 MiB of MTT
    // needs 1,024 pages at once.
    daemon_rig rig({"--quota-pinned-bytes", std::to_string(std::uint64_t{4} << 30)}, {"--set", "init_pages=2048"});
    prober b(rig.sock);
    test_client a(rig.sock);
    shared_memory big(kBig);  // never touched: the device only names its pages
    int err = 0;
    const auto iova = a.map(big, &err);
    REQUIRE(err == 0);
    const auto pd = a.alloc_pd();
    auto in = d::sealed_memfd(test_client::mkey_input(pd, iova, kPages));
    REQUIRE_MESSAGE(in, in.error().message);
    const d::command_fd_req req{0, ifc::create_mkey_out::size_bytes,
                                static_cast<std::uint32_t>(ifc::create_mkey_in::size_bytes + kPages * 8)};

    // The flood: a's own thread, CREATE_MKEY and DESTROY_MKEY back to back, for 2.5 s or
    // 40 keys. (No doctest assertion in that thread: it counts, the test checks.)
    std::atomic<bool> stop{false};
    std::atomic<int> keys{0}, failures{0};
    std::atomic<long> slowest_us{0};
    std::string first_failure;
    std::thread flood([&] {
        const auto end = clk::now() + 2500ms;
        for (int k = 0; k < 40 && clk::now() < end && !stop; ++k) {
            const int fds[] = {in->get()};
            const auto t0 = clk::now();
            auto r = a.c.call(d::msg_type::command_fd, d::body(req), fds, 60s);
            const long us =
                static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - t0).count());
            if (us > slowest_us) slowest_us = us;
            if (!r || r->err != 0) {
                if (failures++ == 0) first_failure = r ? r->text : r.error().message;
                break;
            }
            ++keys;
            auto del = cxv::driver::command<ifc::destroy_mkey_in>(cmd_opcode::DESTROY_MKEY);
            ifc::set<ifc::destroy_mkey_in::mkey_index>(
                del.data(), ifc::get<ifc::create_mkey_out::mkey_index>(r->payload.data()));
            d::command_req dr;
            dr.out_len = ifc::destroy_mkey_out::size_bytes;
            dr.in = del;
            auto x = a.c.call(d::msg_type::command, d::body(dr), {}, 60s);
            if (!x || x->err != 0) {
                if (failures++ == 0) first_failure = x ? x->text : x.error().message;
                break;
            }
        }
        stop = true;
    });
    struct joiner {
        std::thread& t;
        std::atomic<bool>& stop;
        ~joiner() {
            stop = true;
            t.join();
        }
    } join{flood, stop};
    std::this_thread::sleep_for(50ms);  // the first key is on its way
    for (int i = 0; i < 100000 && !stop; ++i) {
        b.hello();
        (void)b.status();
        if (i % 4 == 0) b.command();  // it may wait for the key the model is creating
        std::this_thread::sleep_for(1ms);
    }
    MESSAGE(fmt::format("{} keys of 2 GiB (4 MiB of MTT each), the slowest CREATE_MKEY {:.0f} ms; the other client "
                        "meanwhile: {}",
                        keys.load(), slowest_us.load() / 1000.0, b.str()));
    CHECK_MESSAGE(failures == 0, first_failure);
    CHECK(keys >= 3);
    // HELLO and STATUS are the daemon's alone: prompt. A firmware command waits for the
    // one the function is running (the model runs one at a time: a 2 GiB key's is
    // hundreds of milliseconds of its thread), never for the flood's queue behind it.
    CHECK_MESSAGE(b.worst_hello < kBound, "HELLO took ", ms_f(b.worst_hello), " ms during the flood");
    CHECK_MESSAGE(b.worst_status < kBound, "STATUS took ", ms_f(b.worst_status), " ms during the flood");
    const auto one_large = std::chrono::microseconds(slowest_us.load());
    CHECK_MESSAGE(b.worst_command < one_large + kBound, "a small COMMAND took ", ms_f(b.worst_command),
                  " ms during the flood, the slowest large one ", ms_f(one_large), " ms");
    CHECK(b.calls >= 30);
}

namespace {

// Two RC QPs of one device looped to each other on one CQ: each round a SEND from QP 0
// to QP 1, its two completions polled; armed first, a round raises one completion event.
struct looped {
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::shared_ptr<cxv::cq> cq;
    std::shared_ptr<cxv::mr> mr;
    std::shared_ptr<cxv::qp> qp[2];
    std::byte* mem = nullptr;
    std::uint64_t sent = 0;
    static constexpr std::size_t kBuffer = 64 * 1024, kMsg = 64;

    explicit looped(const cxv::device::options& o) {
        auto d = cxv::device::open("", o);
        REQUIRE_MESSAGE(d, d.error().message);
        dev = std::move(d).value();
        auto p = dev->alloc_pd();
        REQUIRE(p);
        pd = *p;
        auto c = cxv::cq::create(*dev, 256);
        REQUIRE(c);
        cq = *c;
        const int fd = ::memfd_create("cxv-stall", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, kBuffer) == 0);
        REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
        void* m = ::mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        REQUIRE(m != MAP_FAILED);
        mem = static_cast<std::byte*>(m);
        auto r = cxv::mr::create(pd, mem, kBuffer, cxv::access_local_write);
        REQUIRE_MESSAGE(r, r.error().message);
        mr = *r;
        cxv::qp::attr qa;
        qa.domain = pd;
        qa.send_cq = cq;
        qa.recv_cq = cq;
        for (auto& q : qp) {
            auto made = cxv::qp::create(*dev, qa);
            REQUIRE(made);
            q = *made;
        }
        cxv::qp::modify_attr ma;
        ma.access = cxv::access_local_write;
        ma.path_mtu = 3;
        auto gid = dev->gid(0);
        REQUIRE(gid);
        ma.ah.dgid = *gid;
        ma.min_rnr_timer = 1;
        ma.timeout = 10;
        ma.retry_cnt = 7;
        ma.rnr_retry = 7;
        for (unsigned s = 0; s < 2; ++s) {
            ma.dest_qpn = qp[1 - s]->qpn();
            for (auto to : {cxv::qp_state::init, cxv::qp_state::rtr, cxv::qp_state::rts}) {
                auto st = qp[s]->modify(to, ma);
                REQUIRE_MESSAGE(st, st.error().message);
            }
        }
    }
    ~looped() {
        qp[0].reset();
        qp[1].reset();
        mr.reset();
        cq.reset();
        pd.reset();
        dev.reset();
        ::munmap(mem, kBuffer);
    }
    // Arms the CQ as a client that never takes its events would: with a fresh arm
    // sequence number each time (cq::request_notify carries the one wait_event last moved
    // on, and the device ignores an arm with the number of the event it already raised,
    // PRM "Completion Event"). The arm word goes to the doorbell record, then with the CQ
    // number to the UAR page's CQ doorbell (PRM "CQ Doorbell Record", "UAR").
    void arm_blind(std::uint32_t sn) {
        const cxv::driver::cq& c = *cq->object();
        auto* rec = reinterpret_cast<cxv::hw::cq_doorbell_record*>(c.doorbell_record());
        const std::uint32_t word = cxv::hw::cq_arm_value(sn, cxv::hw::cq_db_req_not, rec->update_ci.value());
        rec->arm_ci = cxv::hw::be32::from(word);
        cxv::hw::to_device();
        cxv::hw::mmio_window(dev->hca().device().bar0().base() + std::size_t{c.uar()} * cxv::hw::uar_page_size,
                             cxv::hw::uar_page_size)
            .write64_be(cxv::hw::uar_cq_doorbell, cxv::hw::cq_doorbell_value(word, c.cqn()));
    }
    // One round (armed first when `arm`): true when both completions came, good, within 5 s.
    bool round(bool arm) {
        if (arm) cq->request_notify(false);
        const std::uint64_t seq = sent++;
        ibv_sge rs{reinterpret_cast<std::uint64_t>(mem + 4096), kMsg, mr->lkey()};
        ibv_recv_wr rw{};
        rw.wr_id = seq;
        rw.sg_list = &rs;
        rw.num_sge = 1;
        ibv_recv_wr* rbad = nullptr;
        if (qp[1]->post_recv(&rw, &rbad) != 0) return false;
        ibv_sge ss{reinterpret_cast<std::uint64_t>(mem), kMsg, mr->lkey()};
        ibv_send_wr sw{};
        sw.wr_id = seq;
        sw.sg_list = &ss;
        sw.num_sge = 1;
        sw.opcode = IBV_WR_SEND;
        sw.send_flags = IBV_SEND_SIGNALED;
        ibv_send_wr* sbad = nullptr;
        if (qp[0]->post_send(&sw, &sbad) != 0) return false;
        int seen = 0;
        const auto end = clk::now() + 5s;
        while (seen < 2 && clk::now() < end) {
            ibv_wc wc[4];
            const int got = cq->poll(4, wc);
            for (int k = 0; k < got; ++k) {
                if (wc[k].status != IBV_WC_SUCCESS) return false;
                ++seen;
            }
        }
        return seen == 2;
    }
};

}  // namespace

TEST_CASE("one client's completion-event storm overflows its own event queue only; the other gets every event") {
    constexpr int kStorm = 1200, kEvery = 40;  // a quiet round every 40 storm rounds
    // A small queue per connection, so that the storm overflows it soon.
    daemon_rig rig({"--event-queue", "16"});
    daemon_env env(rig.sock);

    // The storming client arms its CQ before every round without taking the events (a
    // client may write its own doorbells as it likes), and its consumer is stuck: its
    // event thread waits in on_completion until the gate opens (at most 30 s), so its
    // channel and then its queue in the daemon fill up.
    std::atomic<bool> gate{false};
    std::atomic<int> storm_completions{0}, overflows{0};
    std::atomic<std::uint32_t> dropped{0};
    cxv::device::options so;
    so.on_completion = [&](std::uint32_t) {
        const auto until = clk::now() + 30s;
        while (!gate && clk::now() < until) std::this_thread::sleep_for(1ms);
        ++storm_completions;
    };
    so.on_event = [&](const cxv::event& e) {
        if (e.what == cxv::event::port_other && e.port == 0 && e.detail.find("dropped") != std::string::npos) {
            dropped += e.object;
            ++overflows;
        }
    };
    std::atomic<int> quiet_completions{0}, quiet_overflows{0};
    cxv::device::options qo;
    qo.on_completion = [&](std::uint32_t) { ++quiet_completions; };
    qo.on_event = [&](const cxv::event& e) {
        if (e.what == cxv::event::port_other && e.port == 0) ++quiet_overflows;
    };
    looped storm(so), quiet(qo);
    struct opener {  // the storm's event thread must be free before its device goes
        std::atomic<bool>& g;
        ~opener() { g = true; }
    } open_at_end{gate};

    int quiet_rounds = 0, quiet_events = 0;
    clk::duration slowest_event{};
    for (int i = 0; i < kStorm; ++i) {
        storm.arm_blind(static_cast<std::uint32_t>(i));
        REQUIRE_MESSAGE(storm.round(false), "storm round ", i);
        // Paced to ~3,000 events a second: every client's CQ reports to the function's one
        // completion EQ (256 EQEs, driver/hca/eq.h), which the daemon's event thread
        // drains; a client arming faster than that thread runs (two busy cores) could
        // overrun it, and an overrun EQ raises no event for anyone -- below the daemon.
        std::this_thread::sleep_for(300us);
        if (i % kEvery != kEvery - 1) continue;
        // The quiet client's round: armed, a SEND, and its completion event within 5 s.
        REQUIRE_MESSAGE(quiet.round(true), "quiet round ", quiet_rounds);
        ++quiet_rounds;
        const auto t0 = clk::now();
        if (quiet.cq->wait_event(5000ms)) ++quiet_events;
        slowest_event = std::max(slowest_event, clk::now() - t0);
    }
    gate = true;
    // The storming client, once its consumer moves: what its channel and queue held, then
    // the overflow event with the count of the rest (and its CQ woken).
    const auto end = clk::now() + 20s;
    while (overflows == 0 && clk::now() < end) std::this_thread::sleep_for(5ms);
    std::this_thread::sleep_for(100ms);  // anything after it (there should be nothing)
    MESSAGE(fmt::format("storm: {} events armed for, {} delivered (and {} CQ wake-up), {} dropped in {} overflow "
                        "event(s); quiet: {} of {} events, the slowest {:.1f} ms",
                        kStorm, storm_completions.load() - overflows.load(), overflows.load(), dropped.load(),
                        overflows.load(), quiet_events, quiet_rounds, ms_f(slowest_event)));
    CHECK(quiet_rounds == kStorm / kEvery);
    CHECK(quiet_events == quiet_rounds);
    CHECK(quiet_completions == quiet_rounds);
    CHECK(quiet_overflows == 0);
    REQUIRE_MESSAGE(overflows >= 1, "the storming client got no overflow event; daemon log: ",
                    rig.log().substr(0, 4000));
    CHECK(dropped > 0);
    // Every event it was owed either came or is counted in an overflow event; each
    // overflow event also woke its one CQ.
    CHECK(storm_completions - overflows + static_cast<int>(dropped) == kStorm);
    const auto log = rig.log();
    CHECK(log.find("its event queue is full") != std::string::npos);
}
