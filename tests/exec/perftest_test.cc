// cxv exec, two processes: Debian's unmodified perftest (ib_send_lat, ib_send_bw,
// ib_write_lat, ib_write_bw, ib_read_lat, ib_read_bw, ib_atomic_lat, ib_atomic_bw) as
// server and client, each under its own `cxv-sim run --fabric DIR --set fabric_index=N`,
// with nothing on LD_LIBRARY_PATH: perftest links rdma-core's libmlx5.so.1 and
// libefa.so.1, and cxv exec's own copies answer it. Each test with its own TCP exchange,
// on InfiniBand and on RoCE, and with -R (the QPs connected through cxv's librdmacm).
//
// The figures are the model's (on a loaded machine, milliseconds): what is checked is
// that both sides end with status 0 and print perftest's result row.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

constexpr unsigned kIters = 100;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// perftest's result row under its "#bytes" header, with kIters iterations and, for a
// latency test, a typical latency above zero, for a bandwidth test a message rate above
// zero (the MB/s of small messages may print as 0.00 on the model).
bool has_result(const std::string& log, bool latency) {
    const std::vector<double> v = perftest_row(log);
    if (latency) return v.size() >= 9 && v[1] == kIters && v[4] > 0;
    return v.size() >= 5 && v[1] == kIters && v[4] > 0;
}

// One line of cxv's librdmacm trace (CXV_CM_TRACE, api/abi/cm_wire.h).
struct cm_step {
    long long ns = 0;     // the step's time (a connect's: when it returned)
    long long began = 0;  // a connect's: when it started; else ns
    std::string what;
    unsigned port = 0;
};

std::vector<cm_step> cm_steps(const std::string& log) {
    std::vector<cm_step> out;
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream w(line);
        std::string tag, pid, address;
        cm_step s;
        if (!(w >> tag >> s.ns >> pid >> s.what >> address) || tag != "cxv-cm:") continue;
        const auto colon = address.rfind(':');
        if (colon == std::string::npos) continue;
        s.port = static_cast<unsigned>(std::stoul(address.substr(colon + 1)));
        std::string word;
        s.began = w >> word >> s.began && word == "began" ? s.began : s.ns;
        out.push_back(s);
    }
    return out;
}

// The server of -R listens twice on its port: for the first handshake, then for the QPs.
bool listened_twice(const std::string& server_log) {
    unsigned n = 0;
    for (const cm_step& s : cm_steps(server_log)) n += s.what == "listen" ? 1 : 0;
    return n >= 2;
}

// Whether the client lost perftest 4.5-0.17's -R race, as the two traces show it: its
// connect to port P was refused (REJECTED, reason 8) by a server with no listener on P.
// The server had none from its "unlisten" of P (the first handshake's listener, the time
// taken before its socket closed) to its next "listen" on P (taken once it listens); the
// refused connect was under way from its "began" time to its own. The race is proven
// when the two intervals meet. Anything else (a connect refused wholly while the server
// listened, or no refusal) is not the race, and fails the test.
bool lost_listen_race(const exec_pair& r) {
    if (r.client == 0 || !has(r.client_log, "RDMA_CM_EVENT_REJECTED")) return false;
    const std::vector<cm_step> client = cm_steps(r.client_log), server = cm_steps(r.server_log);
    for (const cm_step& refused : client) {
        if (refused.what != "refused") continue;
        for (const cm_step& gone : server) {
            if (gone.port != refused.port || gone.what != "unlisten" || gone.ns > refused.ns) continue;
            const cm_step* back = nullptr;  // the first listen on P after it
            for (const cm_step& s : server) {
                if (s.port == refused.port && s.what == "listen" && s.ns > gone.ns && (!back || s.ns < back->ns)) {
                    back = &s;
                }
            }
            if (back != nullptr && back->ns >= refused.began) return true;
        }
    }
    return false;
}

void check_test(const std::string& port_type, const std::string& test, const std::vector<std::string>& args) {
    ::unsetenv("LD_LIBRARY_PATH");
    // Under --config=san cxv's libraries bring ASan into perftest's processes, whose leak
    // check then reports the buffers Debian's perftest never frees before it exits: not
    // ours to find here (as in tests/perf/perftest_on_model_test).
    if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0' && !has(o, "detect_leaks=0")) {
        ::setenv("ASAN_OPTIONS", (std::string(o) + ":detect_leaks=0").c_str(), 1);
    }
    // The ACK timeout cxv-perf takes on the model (-u 18, 1 s): a loaded machine may keep a
    // process from a core for longer than perftest's default (14, 67 ms). Run once.
    std::vector<std::string> all = {"-n", std::to_string(kIters), "-F", "-u", "18"};
    all.insert(all.end(), args.begin(), args.end());
    // With -R, a pair whose client provably lost perftest's own race (see below) runs
    // again, up to kAttempts pairs in all; each such loss is reported.
    const bool rdma_cm = std::find(args.begin(), args.end(), "-R") != args.end();
    constexpr unsigned kAttempts = 12;
    unsigned lost = 0;
    if (rdma_cm) ::setenv("CXV_CM_TRACE", "1", 1);
    auto run = [&] {
        exec_pair p;
        for (unsigned attempt = 0; attempt < (rdma_cm ? kAttempts : 1); ++attempt) {
            p = run_exec_pair(port_type, "/usr/bin/ib_" + test, all, {}, std::chrono::seconds(240),
                              rdma_cm ? listened_twice : nullptr);
            if (!rdma_cm || !lost_listen_race(p)) break;
            ++lost;
        }
        return p;
    };
    exec_pair r = run();
    // A run whose clock estimate failed (processes.h) is run again, at most twice more.
    for (int again = 0; again < 2 && perftest_clock_failed(r.client_log, r.server_log); ++again) {
        MESSAGE("ib_" << test << ": perftest's CPU clock estimate failed; run again");
        r = run();
    }
    ::unsetenv("CXV_CM_TRACE");
    if (lost != 0) MESSAGE("ib_" << test << ": the client lost perftest's -R race in " << lost << " pair(s)");
    REQUIRE_MESSAGE(!(rdma_cm && lost_listen_race(r)), "every pair lost perftest's -R race");
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    const bool latency = test.size() > 4 && test.substr(test.size() - 4) == "_lat";
    CHECK(has_result(r.client_log, latency));
    // The servers of read_lat and atomic_lat only answer (the reads and atomics are the
    // client's), and print no result.
    if (test != "read_lat" && test != "atomic_lat") CHECK(has_result(r.server_log, latency));
}

}  // namespace

TEST_CASE("perftest between two processes on InfiniBand, its own TCP exchange") {
    SUBCASE("ib_send_lat") { check_test("ib", "send_lat", {}); }
    SUBCASE("ib_send_bw") { check_test("ib", "send_bw", {}); }
    SUBCASE("ib_write_lat") { check_test("ib", "write_lat", {}); }
    SUBCASE("ib_write_bw") { check_test("ib", "write_bw", {}); }
    SUBCASE("ib_read_lat") { check_test("ib", "read_lat", {}); }
    SUBCASE("ib_read_bw") { check_test("ib", "read_bw", {}); }
    SUBCASE("ib_atomic_lat") { check_test("ib", "atomic_lat", {}); }
    SUBCASE("ib_atomic_bw") { check_test("ib", "atomic_bw", {}); }
}

// -R: the QPs connected through cxv's librdmacm. perftest 4.5-0.17's server listens for
// the QPs' connections only after a first handshake over an rdma_cm connection of its
// own, while its client connects right after the same handshake. Where the client wins
// (on this 2-core machine, loaded, about one pair in four: the server's last handshake
// write completes only when the client's ACK has come back through the model) its connect
// finds nobody listening and is REJECTED with reason 8, as rdma_cm reports a REQ to a
// service nobody listens on, and perftest's retry then uses the ids it has just destroyed
// and crashes (fixed upstream in perftest 3d9d8d0). Such a pair runs again only when
// cxv's CM trace proves that race (lost_listen_race); any other failure fails the test.
TEST_CASE("perftest with -R on InfiniBand, the QPs connected through librdmacm") {
    SUBCASE("ib_send_lat -R") { check_test("ib", "send_lat", {"-R"}); }
    SUBCASE("ib_send_bw -R") { check_test("ib", "send_bw", {"-R"}); }
    SUBCASE("ib_write_lat -R") { check_test("ib", "write_lat", {"-R"}); }
    SUBCASE("ib_write_bw -R") { check_test("ib", "write_bw", {"-R"}); }
    SUBCASE("ib_read_lat -R") { check_test("ib", "read_lat", {"-R"}); }
    SUBCASE("ib_read_bw -R") { check_test("ib", "read_bw", {"-R"}); }
    SUBCASE("ib_atomic_lat -R") { check_test("ib", "atomic_lat", {"-R"}); }
    SUBCASE("ib_atomic_bw -R") { check_test("ib", "atomic_bw", {"-R"}); }
}

TEST_CASE("perftest on RoCE v2, by GID index and with -R") {
    SUBCASE("ib_send_lat -x 1") { check_test("eth", "send_lat", {"-x", "1"}); }
    SUBCASE("ib_write_bw -x 1") { check_test("eth", "write_bw", {"-x", "1"}); }
    SUBCASE("ib_read_lat -x 0") { check_test("eth", "read_lat", {"-x", "0"}); }
    SUBCASE("ib_send_lat -R") { check_test("eth", "send_lat", {"-R"}); }
    SUBCASE("ib_write_bw -R") { check_test("eth", "write_bw", {"-R"}); }
}
