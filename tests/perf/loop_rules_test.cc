// cxv-perf's timed loops keep the fast path's rules: no system call and no allocation
// while they measure. Both sides run in this process on one emulated function (as
// --loopback); each side's thread installs a seccomp filter on itself alone (every
// system call but those a thread needs to end raises SIGSYS, whose handler counts it)
// and counts operator new, then runs its loop of each test shape. The loops
// poll without yielding here (idle_yield off) and read the TSC, not a clock.
#include <doctest/doctest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/loops.h"
#include "bench/perf/options.h"
#include "bench/perf/setup.h"
#include "tests/fastpath_guard.h"
#include "tests/skip.h"

#if defined(CXV_SANITIZED)
// The sanitizer runtimes make system calls of their own on any thread and own operator
// new: the rules are checked in the default build only.
TEST_CASE("cxv-perf's loops: no system call and no allocation" *
          cxv::test::skip_in_build(true, "the sanitizer runtimes make system calls of their own on the filtered thread")) {}
#else

namespace {

using namespace cxv::perf;
using namespace cxv::test;

options parse(std::vector<std::string> args) {
    args.insert(args.begin(), "cxv-perf");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    auto o = parse_options(static_cast<int>(argv.size()), argv.data());
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
    return o.value();
}

// Both sides of `args` on the function, connected; the client loop measured under the
// filter while the server side runs on a thread of its own.
void measure(const std::shared_ptr<function>& fn, const std::vector<std::string>& args) {
    const options o = parse(args);
    auto srv = make_side(o, fn, true);
    REQUIRE_MESSAGE(srv.ok(), (srv.ok() ? "" : srv.error().message));
    auto cli = make_side(o, fn, false);
    REQUIRE_MESSAGE(cli.ok(), (cli.ok() ? "" : cli.error().message));
    side& s = *srv.value();
    side& c = *cli.value();
    s.remote = c.local;
    c.remote = s.local;
    REQUIRE(connect_side(s).ok());
    REQUIRE(connect_side(c).ok());
    if (o.op == operation::send) {
        for (side* x : {&s, &c}) {
            for (unsigned i = 0; i < o.rx_depth; ++i) REQUIRE(post_receive(*x, 0, i % x->slots) == 0);
        }
    }
    const std::size_t size = o.size;
    prepare_size(s, size);

    const double hz = tsc_calibrate();
    loop_context sc, cc;
    for (loop_context* x : {&sc, &cc}) {
        x->o = &o;
        x->tsc_hz = hz;
        x->stall_ticks = static_cast<std::uint64_t>(hz * 30);
        x->idle_yield = false;
    }
    const std::uint64_t warmup = warmup_of(o);
    // Everything the client loop is handed, made before the filter.
    std::vector<std::uint64_t> samples(o.iters, 0), stamps(2 * (o.iters / o.cq_mod + 16), 0);
    bandwidth_sample_set bw;
    std::uint64_t measured = 0, per_qp = 0;
    bool filtered = false, ran = false;
    std::string failure, server_failure;

    reset_guard_counts();
    bool server_filtered = false;
    std::thread server([&] {
        cxv::status r = cxv::ok_status();
        std::vector<std::uint64_t> count(o.qps, 0);
        std::uint64_t received = 0;
        void* volatile warm = std::malloc(64);
        std::free(warm);
        server_filtered = forbid_syscalls();
        if (!server_filtered) return;
        t_counting = true;
        if (o.latency) {
            r = latency_server(sc, s, size, warmup);
        } else {
            r = bandwidth_server(sc, s, size, o.iters, false, count, received);  // SEND: the receives
        }
        t_counting = false;
        if (!r) server_failure = "server: " + r.error().message;
    });
    std::thread client([&] {
        void* volatile warm = std::malloc(64);  // this thread's allocator state, before the filter
        std::free(warm);
        filtered = forbid_syscalls();
        if (!filtered) return;
        t_counting = true;
        const cxv::status r = o.latency ? latency_client(cc, c, size, warmup, samples, measured)
                                        : bandwidth_client(cc, c, size, stamps, bw, per_qp);
        t_counting = false;
        ran = r.ok();
        if (!r.ok()) failure = "client: " + r.error().message;
    });
    client.join();
    server.join();
    REQUIRE_MESSAGE(filtered, "seccomp filters cannot be installed here");
    REQUIRE(server_filtered);
    INFO(failure);
    INFO(server_failure);
    CHECK(server_failure.empty());
    CHECK(ran);
    CHECK(g_syscalls.load() == 0);
    CHECK_MESSAGE(g_first_syscall.load() == -1, "the first system call: ", g_first_syscall.load());
    CHECK(g_allocations.load() == 0);
    CHECK(cc.verified.bad == 0);
    CHECK(sc.verified.bad == 0);
    if (o.latency) {
        CHECK(measured == o.iters);
    } else {
        CHECK(bw.iterations == o.iters);
    }
}

}  // namespace

TEST_CASE("cxv-perf's loops: no system call and no allocation while they measure") {
    REQUIRE(install_sigsys_handler());
    auto fn = open_function("0000:c5:00.0", 1);
    REQUIRE_MESSAGE(fn.ok(), (fn.ok() ? "" : fn.error().message));
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"send_lat", "-n", "300", "-s", "64", "--verify"},
             {"write_lat", "-n", "300", "-s", "4096", "--verify"},
             {"read_lat", "-n", "300", "-s", "256", "--verify"},
             {"atomic_lat", "-n", "300", "--verify"},
             {"send_bw", "-n", "2000", "-s", "512", "-t", "64", "-Q", "8", "-l", "4", "--verify"},
             {"write_bw", "-n", "2000", "-s", "1024", "-t", "64", "-Q", "8", "--verify"},
             {"read_bw", "-n", "2000", "-s", "1024", "-t", "32", "-Q", "8", "--verify"},
             {"atomic_bw", "-n", "2000", "-t", "32", "-Q", "8", "--verify"},
             {"send_lat", "-c", "UD", "-n", "300", "-s", "64"},
         }) {
        CAPTURE(args[0]);
        measure(fn.value(), args);
    }
}

// The checker (tests/fastpath_guard) is shown to see a system call and an allocation by
// tests/e2e/fastpath_rules_test.

#endif
