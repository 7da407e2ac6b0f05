// cxv-perf end to end on the model: server and client as two processes, each under its
// own `cxv-sim run --fabric DIR` (InfiniBand), every test with every transport it has,
// --verify on; the tables' rows checked for sane figures; bad options, an absent server
// and parameters that differ each give one clear line and a non-zero exit.
// Processes are started here and always reaped or killed by PID; every wait is bounded.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/bench/json_parse.h"
#include "tests/exec/processes.h"
#include "tests/perf/pair.h"
#include "tests/skip.h"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using namespace cxv::test;
using namespace cxv::test::perf;

struct combination {
    const char* test;
    const char* conn;
};
constexpr combination kAll[] = {
    {"send_lat", "RC"},  {"send_lat", "UC"}, {"send_lat", "UD"}, {"write_lat", "RC"}, {"write_lat", "UC"},
    {"read_lat", "RC"},  {"atomic_lat", "RC"}, {"send_bw", "RC"}, {"send_bw", "UC"},   {"send_bw", "UD"},
    {"write_bw", "RC"}, {"write_bw", "UC"},  {"read_bw", "RC"},   {"atomic_bw", "RC"},
};

TEST_CASE("every test over every transport it has, two processes, --verify") {
    for (const auto& c : kAll) {
        const std::string test = c.test;
        const bool latency = test.ends_with("_lat");
        const bool atomic = test.starts_with("atomic");
        std::vector<std::string> sizes = atomic ? std::vector<std::string>{"8"} : std::vector<std::string>{"64", "4096"};
        for (const auto& size : sizes) {
            CAPTURE(test);
            const std::string conn = c.conn;
            CAPTURE(conn);
            CAPTURE(size);
            const outcome o = run_pair({test, "-c", c.conn, "-n", "200", "-s", size, "--verify"});
            check_passed(o);
            if (latency) {
                check_latency_rows(o.client_out, {std::stod(size)}, 200);
            } else {
                // UC and UD may lose messages the server had no receive for: counted by the
                // sender all the same, as perftest.
                check_bandwidth_rows(o.client_out, {std::stod(size)}, 200);
            }
        }
    }
}

TEST_CASE("-a sweeps the sizes up to --max_size, with several QPs, post lists and CQ moderation") {
    SUBCASE("send_lat") {
        const outcome o = run_pair({"send_lat", "-a", "--max_size", "1024", "-n", "100", "--verify"});
        check_passed(o);
        check_latency_rows(o.client_out, {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, 100);
    }
    SUBCASE("write_bw") {
        const outcome o = run_pair({"write_bw", "-a", "--max_size", "1024", "-n", "100", "-q", "2", "-l", "4", "-Q", "8",
                                    "-t", "32", "--verify"});
        check_passed(o);
        check_bandwidth_rows(o.client_out, {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, 200);
    }
}

TEST_CASE("--json writes its file; -D runs for its duration") {
    scratch s;
    const std::string json = s.dir + "/run.json";
    const std::string svg = s.dir + "/run.svg";
    const outcome o = run_pair({"read_lat", "-s", "256", "-n", "100"}, {"--json", json, "--plot", svg});
    check_passed(o);
    // The JSON: the run's configuration and every figure of the size, as the table says.
    std::ifstream in(json);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    cxv::test::json_value doc;
    cxv::test::json_parser parser(text);
    REQUIRE_MESSAGE(parser.parse(&doc), parser.error());
    const auto* config = doc.get("config");
    REQUIRE(config != nullptr);
    REQUIRE(config->get("test") != nullptr);
    CHECK(config->get("test")->string == "read_lat");
    CHECK(config->get("connection")->string == "RC");
    CHECK(config->get("model")->boolean);
    CHECK(config->get("tsc_hz")->number > 1e8);
    CHECK(!config->get("device")->string.empty());
    CHECK(!config->get("firmware")->string.empty());
    CHECK(!config->get("cxv_version")->string.empty());
    const auto* lat = doc.get("latency");
    REQUIRE(lat != nullptr);
    REQUIRE(lat->array.size() == 1);
    const auto& row = lat->array[0];
    CHECK(row.get("bytes")->number == 256);
    CHECK(row.get("t_min_us")->number > 0);
    CHECK(row.get("t_min_us")->number <= row.get("t_typical_us")->number);
    CHECK(row.get("t_typical_us")->number <= row.get("t_max_us")->number);
    CHECK(row.get("p99_us")->number <= row.get("t_max_us")->number);
    double counted = 0;
    for (const auto& b : row.get("histogram")->get("buckets")->array) counted += b.get("count")->number;
    CHECK(counted == row.get("iterations")->number);  // a sample per measured iteration
    // The plot, drawn by gnuplot (tools/setup installs it).
    REQUIRE_MESSAGE(on_path("gnuplot"), "gnuplot is not installed (Debian: gnuplot-nox; tools/setup installs it)");
    {
        std::ifstream p(svg);
        const std::string plot((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
        CHECK(plot.find("<svg") != std::string::npos);
        CHECK(plot.find("<path") != std::string::npos);
    }

    const auto t0 = clock_type::now();
    const outcome d = run_pair({"write_bw", "-s", "1024", "-D", "2", "--verify"});
    check_passed(d);
    CHECK(clock_type::now() - t0 >= 2s);
    const auto rows = rows_of(d.client_out, 5);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0][1] > 0);
    CHECK(d.client_err.find("iterations") != std::string::npos);  // the progress line
}

TEST_CASE("--verify finds what did not arrive intact: UC WRITEs lost on the wire") {
    // The client's link drops a fifth of its frames: UC has no retransmission, so some
    // WRITEs never land and the server's target keeps older iterations' bytes.
    const std::vector<std::string> faults = {"--set", "link_drop=0.2", "--set", "link_seed=3"};
    const outcome bad = run_pair({"write_bw", "-c", "UC", "-n", "200", "-s", "256", "--verify"}, {}, faults);
    INFO("server stderr: " << bad.server_err << "\nclient stderr: " << bad.client_err);
    CHECK(bad.server == 1);
    CHECK(bad.client == 1);
    CHECK(bad.server_err.find("--verify: ") != std::string::npos);
    CHECK(bad.server_err.find("with wrong data") != std::string::npos);
    CHECK(bad.client_err.find("the server: --verify: ") != std::string::npos);
    // The same run without --verify reports its figures and passes.
    const outcome plain = run_pair({"write_bw", "-c", "UC", "-n", "200", "-s", "256"}, {}, faults);
    check_passed(plain);
}

TEST_CASE("-b: both directions at once, --verify on both sides") {
    for (const char* test : {"send_bw", "write_bw", "read_bw", "atomic_bw"}) {
        const std::string t = test;
        CAPTURE(t);
        const std::string size = t == "atomic_bw" ? "8" : "512";
        const outcome o = run_pair({t, "-b", "-n", "200", "-s", size, "-t", "32", "-Q", "4", "--verify"});
        check_passed(o);
        check_bandwidth_rows(o.client_out, {std::stod(size)}, 400);  // both directions' iterations
    }
}

TEST_CASE("-b -D: both directions for a duration, --verify on both sides") {
    for (const char* test : {"send_bw", "write_bw", "read_bw"}) {
        const std::string t = test;
        CAPTURE(t);
        const auto t0 = clock_type::now();
        const outcome o = run_pair({t, "-b", "-D", "2", "-s", "512", "-t", "32", "-Q", "4", "--verify"}, {}, {}, "ib", 90s);
        check_passed(o);
        CHECK(clock_type::now() - t0 >= 2s);
        const auto rows = rows_of(o.client_out, 5);
        INFO("client output:\n" << o.client_out);
        REQUIRE(rows.size() == 1);
        CHECK(rows[0][0] == 512);
        CHECK(rows[0][1] > 0);
        CHECK(rows[0][2] >= rows[0][3] * 0.999);  // peak >= average
        CHECK(o.client_out.find("Bidirectional") != std::string::npos);
    }
}

TEST_CASE("RoCE: the QPs addressed by GID (RoCEv2 frames between the processes)") {
    for (const char* gid : {"0", "1"}) {
        CAPTURE(std::string(gid));
        const outcome o = run_pair({"write_lat", "-n", "100", "-s", "64", "-x", gid, "--verify"}, {}, {}, "eth");
        check_passed(o);
        check_latency_rows(o.client_out, {64}, 100);
        const outcome b = run_pair({"send_bw", "-n", "200", "-s", "1024", "-x", gid, "--verify"}, {}, {}, "eth");
        check_passed(b);
        check_bandwidth_rows(b.client_out, {1024}, 200);
    }
}

TEST_CASE("-e: completions by event") {
    const outcome o = run_pair({"send_lat", "-e", "-n", "100", "-s", "64", "--verify"});
    check_passed(o);
    check_latency_rows(o.client_out, {64}, 100);
}

TEST_CASE("--loopback: both sides in one process") {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    child c({sim, "run", "--port-type", "ib", "--", perf, "send_bw", "--loopback", "-n", "300", "-s", "512", "--verify"},
            s.dir + "/loop.out", s.dir + "/loop.err");
    const int rc = c.wait(clock_type::now() + 60s);
    const std::string out = slurp(c.log);
    INFO(out << slurp(c.err));
    REQUIRE(rc == 0);
    check_bandwidth_rows(out, {512}, 300);
}

TEST_CASE("-a past its first second says how far it is, on stderr; stdout keeps perftest's table") {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    // 23 sizes up to 8 MiB, 200 round trips each: seconds on the model.
    child c({sim, "run", "--port-type", "ib", "--", perf, "send_lat", "--loopback", "-a", "-n", "200"},
            s.dir + "/loop.out", s.dir + "/loop.err");
    const auto start = clock_type::now();
    const int rc = c.wait(start + 120s);
    const std::string out = slurp(c.log), err = slurp(c.err);
    INFO(out << err);
    REQUIRE(rc == 0);
    CHECK(out.find("sizes done") == std::string::npos);
    if (clock_type::now() - start < 2s) {
        MESSAGE("the sweep took under 2 s: no progress was due");
        return;
    }
    CHECK(err.find("of 23 sizes done, now 8388608 bytes") != std::string::npos);
}

// cxv-perf ARGS --loopback under one `cxv-sim run`: its exit status and stdout.
int run_loopback(const std::vector<std::string>& args, std::string& out, std::chrono::seconds limit = 60s) {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    std::vector<std::string> argv = {sim, "run", "--port-type", "ib", "--", perf, "--loopback"};
    argv.insert(argv.begin() + 6, args.begin(), args.end());
    child c(argv, s.dir + "/loop.out", s.dir + "/loop.err");
    const int rc = c.wait(clock_type::now() + limit);
    out = slurp(c.log);
    INFO(out << slurp(c.err));
    return rc;
}

TEST_CASE("post lists with the default -Q complete (they stalled at the first unsignalled list)") {
    // -l 64 with -t 128 and the default -Q 100 once stopped with 192 posted and 100 done.
    std::string out;
    REQUIRE(run_loopback({"write_bw", "-l", "64", "-n", "256", "-s", "64", "--verify"}, out, 25s) == 0);
    check_bandwidth_rows(out, {64}, 256);
}

TEST_CASE("write_lat: the client waits for the server's WRITE even when its pattern's last byte is zero") {
    // -s 74: iteration 0's last byte is 0x00, as the client's fresh receive area once was,
    // so the client ran one message ahead (and --verify saw the wrong data).
    const outcome o = run_pair({"write_lat", "-n", "100", "-s", "74", "--verify"}, {}, {}, "ib", 25s);
    check_passed(o);
    check_latency_rows(o.client_out, {74}, 100);
    std::string out;
    REQUIRE(run_loopback({"write_lat", "-n", "100", "-s", "74", "--verify"}, out, 25s) == 0);
    check_latency_rows(out, {74}, 100);
}

TEST_CASE("bad options: one clear line and exit 1") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"send_lat", "--bogus"}, "unknown option --bogus"},
        {{"fetch_lat"}, "unknown test 'fetch_lat'"},
        {{"write_lat", "-c", "UD"}, "does not run over UD"},
        {{"read_bw", "-c", "UC"}, "does not run over UC"},
        {{"atomic_lat", "-c", "UD"}, "does not run over UD"},
        {{"send_lat", "-c", "XRC"}, "unsupported connection type 'XRC'"},
        {{"send_lat", "-s", "0"}, "bad -s"},
        {{"send_lat", "-n"}, "needs a value"},
        {{"atomic_bw", "-s", "64"}, "8-byte"},
        {{"send_lat", "-q", "2"}, "bandwidth tests only"},
        {{"send_bw", "-R", "--loopback"}, "not with --loopback"},
        {{"send_lat", "-b"}, "bandwidth tests only"},
        {{"write_lat", "-e"}, "does not apply to write_lat"},
        {{"send_lat", "--cpu_util"}, "needs -D"},
        {{"send_lat", "-m", "1000"}, "bad -m"},
        {{"send_lat", "-u", "40"}, "bad -u"},
        {{"send_lat", "host1", "host2"}, "unexpected argument"},
        {{"write_bw", "-l", "3", "-Q", "5", "-t", "6"}, "would stall"},
        {{"send_lat", "-n", "100000001"}, "bad -n (5 .. 100000000)"},
    };
    check_bad_options(cases);
}

TEST_CASE("an absent server: one clear line and exit 1") {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    const std::string port = std::to_string(free_port());
    child c({sim, "run", "--port-type", "ib", "--", perf, "send_lat", "-p", port, "127.0.0.1"}, s.dir + "/absent.out",
            s.dir + "/absent.err");
    const int rc = c.wait(clock_type::now() + 30s);
    check_refused(slurp(c.err), rc, "cannot connect to 127.0.0.1:" + port + ": Connection refused");
}

TEST_CASE("parameters that differ: the server refuses, both say why") {
    const outcome o = run_pair({"send_lat", "-n", "100"}, {"-s", "128"});
    check_refused(o.server_err, o.server, "-s 2 here, 128 on the client");
    check_refused(o.client_err, o.client, "the server refused the parameters");
}

}  // namespace
