// cxv exec, two processes: Debian's unmodified perftest (ib_send_lat, ib_send_bw,
// ib_write_lat, ib_write_bw, ib_read_lat, ib_read_bw, ib_atomic_lat, ib_atomic_bw) as
// server and client, each under its own `cxv-sim run --fabric DIR --set fabric_index=N`,
// with nothing on LD_LIBRARY_PATH: perftest links rdma-core's libmlx5.so.1 and
// libefa.so.1, and cxv exec's own copies answer it. Each test with its own TCP exchange,
// on InfiniBand and on RoCE (not -R: see below).
//
// The figures are the model's (on a loaded machine, milliseconds): what is checked is
// that both sides end with status 0 and print perftest's result row.
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
    std::istringstream lines(log);
    std::string line;
    bool header = false;
    while (std::getline(lines, line)) {
        if (has(line, "#bytes")) {
            header = true;
            continue;
        }
        if (!header) continue;
        header = false;
        // Word by word through strtod, which reads the "-nan" perftest prints for a
        // standard deviation whose rounding went below zero (operator>> stops there).
        std::istringstream w(line);
        std::vector<double> v;
        for (std::string word; w >> word;) {
            char* end = nullptr;
            const double x = std::strtod(word.c_str(), &end);
            if (end == word.c_str() || *end != '\0') break;
            v.push_back(x);
        }
        if (latency && v.size() >= 9 && v[1] == kIters && v[4] > 0) return true;
        if (!latency && v.size() >= 5 && v[1] == kIters && v[4] > 0) return true;
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
    const exec_pair r = run_exec_pair(port_type, "/usr/bin/ib_" + test, all, {}, std::chrono::seconds(240));
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

// Not here: -R (the QPs connected through librdmacm). Its server listens for the QPs'
// connections only after a first handshake, while its client connects right after the
// same handshake; where the client wins that race its connect finds nobody listening and
// is REJECTED (reason 8, invalid service ID, as rdma_cm reports it), and perftest
// 4.5-0.17's retry then uses the ids it has just destroyed and crashes (fixed upstream in
// perftest 3d9d8d0). On this 2-core machine a third of the runs lose the race: a test
// would have to run pairs again until one passed, which hides failures (docs/exec.md,
// "perftest"). Each -R test passed by hand when the race was won.
TEST_CASE("perftest on RoCE v2, by GID index") {
    SUBCASE("ib_send_lat -x 1") { check_test("eth", "send_lat", {"-x", "1"}); }
    SUBCASE("ib_write_bw -x 1") { check_test("eth", "write_bw", {"-x", "1"}); }
    SUBCASE("ib_read_lat -x 0") { check_test("eth", "read_lat", {"-x", "0"}); }
}
