// cxv exec, two processes: Debian's unmodified qperf 0.4.11 as server (`qperf -lp PORT`,
// which forks a process per test) and as client (`qperf 127.0.0.1 -lp PORT -t 1 TEST`),
// each under its own `cxv-sim run --fabric DIR --set fabric_index=N`. qperf exchanges its
// parameters and its QPs' addresses over its own TCP connection; with -cm1 its RC tests
// connect through librdmacm (cxv's). On InfiniBand every test runs, the RC ones also with
// -cm1; on RoCE the RC ones with -cm1, and what cannot work on RoCE with rdma-core either
// fails as it does there.
//
// What is checked is qperf's own report (-vvs -uu: every figure in plain units), not only
// the exit status: a latency above zero and below a second, every ping of a latency test
// answered, bandwidths and message rates above zero, messages received and no more than
// were sent, and no error counted.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The figures of a qperf report ("    latency  =  21814 ns"), by name, in seconds, bytes,
// bytes/s, messages/s or plain counts (the prefixes qperf would use without -uu are
// taken too).
std::map<std::string, double> figures(const std::string& log) {
    static const std::map<std::string, double> scale = {
        {"ns", 1e-9},           {"us", 1e-6},       {"ms", 1e-3},          {"sec", 1},
        {"bytes/sec", 1},       {"KB/sec", 1e3},    {"MB/sec", 1e6},       {"GB/sec", 1e9},
        {"/sec", 1},            {"K/sec", 1e3},     {"M/sec", 1e6},        {"G/sec", 1e9},
        {"bytes", 1},           {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
        {"", 1},                {"thousand", 1e3},  {"million", 1e6},      {"billion", 1e9}};
    std::map<std::string, double> out;
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream w(line);
        std::string name, eq, number, unit;
        if (!(w >> name >> eq >> number) || eq != "=") continue;
        w >> unit;
        std::erase(number, ',');
        char* end = nullptr;
        const double x = std::strtod(number.c_str(), &end);
        const auto s = scale.find(unit);
        if (end == number.c_str() || *end != '\0' || s == scale.end()) continue;
        out[name] = x * s->second;
    }
    return out;
}

// What one qperf server and client did, and how long from the server's start to the
// client's end.
struct qperf_run {
    int server = -1, client = -1;
    std::string server_log, client_log;
    std::chrono::steady_clock::duration took{};
};

// The PIDs of `pid`'s children (qperf's server forks one per test).
std::vector<pid_t> children_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    std::vector<pid_t> out;
    for (pid_t c; f >> c;) out.push_back(c);
    return out;
}

// A qperf server at fabric place 0 and a client of 127.0.0.1 at place 1 running
// `client_args`, each under cxv-sim run and cxv exec (CXV_SIM, CXV), on a TCP port nobody
// uses. The client starts when the server listens. The server's process for the test
// ends with it (or is killed by its PID at the deadline); then the server is killed.
qperf_run run_qperf(const std::string& port_type, const std::vector<std::string>& client_args) {
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const std::string port = std::to_string(free_port());
    auto argv_for = [&](unsigned index, const std::vector<std::string>& qperf) {
        std::vector<std::string> v = {env_path("CXV_SIM"), "run", "--fabric", fabric, "--port-type", port_type,
                                      "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20",
                                      "--", env_path("CXV"), "exec", "--", "/usr/bin/qperf"};
        v.insert(v.end(), qperf.begin(), qperf.end());
        return v;
    };
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + 60s;
    child server(argv_for(0, {"-lp", port}), s.dir + "/server.log");
    while (!listening(std::stoul(port)) && server.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    qperf_run r;
    if (listening(std::stoul(port))) {
        std::vector<std::string> args = {"127.0.0.1", "-lp", port};
        args.insert(args.end(), client_args.begin(), client_args.end());
        child client(argv_for(1, args), s.dir + "/client.log");
        r.client = client.wait(deadline);
        r.took = std::chrono::steady_clock::now() - start;
        r.client_log = slurp(client.log);
    }
    while (server.pid > 0 && !children_of(server.pid).empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    if (server.pid > 0) {
        for (const pid_t c : children_of(server.pid)) ::kill(c, SIGKILL);
    }
    r.server = server.running() ? 0 : server.status;  // still listening, as a qperf server does
    server.kill_now();
    r.server_log = slurp(server.log);
    return r;
}

void setup_environment() {
    ::unsetenv("LD_LIBRARY_PATH");
    // Under --config=san cxv's libraries bring ASan into qperf's processes, whose leak
    // check would report what qperf itself leaves: it deallocates its PD before it
    // deregisters its MR, which fails with EBUSY (as on rdma-core), so the PD and its
    // context stay until the process exits.
    if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0' && !has(o, "detect_leaks=0")) {
        ::setenv("ASAN_OPTIONS", (std::string(o) + ":detect_leaks=0").c_str(), 1);
    }
}

bool finite_positive(const std::map<std::string, double>& f, const std::string& name) {
    const auto i = f.find(name);
    return i != f.end() && std::isfinite(i->second) && i->second > 0;
}

double get(const std::map<std::string, double>& f, const std::string& name) {
    const auto i = f.find(name);
    return i == f.end() ? -1 : i->second;
}

// The headline figures of a report, for the test's note ("latency 25.8 us, msg_rate
// 38.8 K/s").
std::string headline(const std::map<std::string, double>& f) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(1);
    for (const char* name : {"latency", "bw", "send_bw", "recv_bw", "msg_rate"}) {
        const double v = get(f, name);
        if (v < 0) continue;
        if (o.tellp() > 0) o << ", ";
        if (std::string(name) == "latency") {
            o << name << " " << v * 1e6 << " us";
        } else if (std::string(name) == "msg_rate") {
            o << name << " " << v / 1e3 << " K/s";
        } else {
            o << name << " " << v / 1e6 << " MB/s";
        }
    }
    return o.str();
}

// Runs `test` (with `extra` options) and checks qperf's report of it.
void check_test(const std::string& port_type, const std::string& test, std::vector<std::string> extra = {}) {
    setup_environment();
    std::vector<std::string> args = {"-t", "1", "-vvs", "-uu"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(test);
    const qperf_run r = run_qperf(port_type, args);
    const std::map<std::string, double> f = figures(r.client_log);
    {
        INFO("server log:\n" << r.server_log);
        INFO("client log:\n" << r.client_log);
        REQUIRE(r.client == 0);
        CHECK(r.server == 0);
        CHECK(!has(r.server_log, "fail"));
        CHECK(has(r.client_log, test + ":\n"));
        for (const auto& [name, value] : f) {
            if (name.ends_with("_errors")) CHECK_MESSAGE(value == 0, name);
        }
        if (test.ends_with("_lat")) {
            // A ping-pong: each side answers every message it gets, so at most the last
            // one is still on its way when the time is up.
            CHECK(finite_positive(f, "latency"));
            CHECK(get(f, "latency") < 1.0);
            CHECK(finite_positive(f, "msg_rate"));
            for (const char* side : {"loc_", "rem_"}) {
                CAPTURE(side);
                CHECK(finite_positive(f, std::string(side) + "send_msgs"));
                CHECK(get(f, std::string(side) + "recv_msgs") >= get(f, std::string(side) + "send_msgs") - 1);
            }
        } else if (test == "ud_bw") {
            // UD may lose datagrams (a receiver short of buffers drops them), never
            // invent any.
            CHECK(finite_positive(f, "send_bw"));
            CHECK(finite_positive(f, "recv_bw"));
            CHECK(finite_positive(f, "recv_msgs"));
            CHECK(get(f, "recv_msgs") <= get(f, "send_msgs"));
        } else {  // rc_bw, rc_rdma_read_bw, rc_compare_swap_mr
            if (test != "rc_compare_swap_mr") CHECK(finite_positive(f, "bw"));
            CHECK(finite_positive(f, "msg_rate"));
            CHECK(finite_positive(f, "recv_msgs"));
            CHECK(get(f, "recv_msgs") <= get(f, "send_msgs"));
        }
    }
    std::string options;
    for (const std::string& e : extra) options += " " + e;
    MESSAGE(port_type << " " << test << options << ": " << headline(f));
}

// A test that cannot run on this port with rdma-core either: qperf reports `error` (from
// whichever side met it first) and both end at once, the client with qperf's status 1.
void check_refused(const std::string& port_type, const std::string& test, const std::string& error) {
    setup_environment();
    const qperf_run r = run_qperf(port_type, {"-t", "1", test});
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.client == 1);
    CHECK(has(r.server_log + r.client_log, error));
    CHECK(r.took < 30s);
}

// The bandwidth tests' messages: 4 KiB, two packets each at qperf's 2 KiB path MTU. With
// its default, 64 KiB, qperf's 1,024 messages in flight are 32 k packets, more than the
// model's link backlog holds: the rest are lost and resent after the ACK timeout, and
// the bandwidth falls to a quarter (docs/exec.md, "qperf").
const std::vector<std::string> kSmall = {"-m", "4k"};

}  // namespace

TEST_CASE("qperf on InfiniBand, QPs connected by qperf's own exchange") {
    SUBCASE("rc_lat") { check_test("ib", "rc_lat"); }
    SUBCASE("rc_bw") { check_test("ib", "rc_bw", kSmall); }
    SUBCASE("ud_lat") { check_test("ib", "ud_lat"); }
    SUBCASE("ud_bw") { check_test("ib", "ud_bw"); }
    SUBCASE("rc_rdma_write_lat") { check_test("ib", "rc_rdma_write_lat"); }
    SUBCASE("rc_rdma_read_bw") { check_test("ib", "rc_rdma_read_bw", kSmall); }
    SUBCASE("rc_compare_swap_mr") { check_test("ib", "rc_compare_swap_mr"); }
}

// -cm1: qperf's RC tests connect through librdmacm (its UD tests ignore the option).
// qperf 0.4.11's server tells the client its CM port just before it calls rdma_listen
// (fixed upstream in 118a571); the client makes its QP before it connects, so it has not
// been seen to come first, which would be a REJECTED as from a kernel CM.
TEST_CASE("qperf on InfiniBand, RC through the connection manager (-cm1)") {
    SUBCASE("rc_lat -cm1") { check_test("ib", "rc_lat", {"-cm1"}); }
    SUBCASE("rc_bw -cm1") { check_test("ib", "rc_bw", {"-cm1", "-m", "4k"}); }
    SUBCASE("rc_rdma_write_lat -cm1") { check_test("ib", "rc_rdma_write_lat", {"-cm1"}); }
    SUBCASE("rc_rdma_read_bw -cm1") { check_test("ib", "rc_rdma_read_bw", {"-cm1", "-m", "4k"}); }
    SUBCASE("rc_compare_swap_mr -cm1") { check_test("ib", "rc_compare_swap_mr", {"-cm1"}); }
}

// On RoCE every packet needs a GRH (its IP header), and qperf 0.4.11 never asks for one
// (no GID option; its address vectors have is_global 0): only the connection manager's
// address vector has it, so the RC tests run with -cm1.
TEST_CASE("qperf on RoCE v2, RC through the connection manager (-cm1)") {
    SUBCASE("rc_lat -cm1") { check_test("eth", "rc_lat", {"-cm1"}); }
    SUBCASE("rc_bw -cm1") { check_test("eth", "rc_bw", {"-cm1", "-m", "4k"}); }
    SUBCASE("rc_rdma_write_lat -cm1") { check_test("eth", "rc_rdma_write_lat", {"-cm1"}); }
    SUBCASE("rc_rdma_read_bw -cm1") { check_test("eth", "rc_rdma_read_bw", {"-cm1", "-m", "4k"}); }
    SUBCASE("rc_compare_swap_mr -cm1") { check_test("eth", "rc_compare_swap_mr", {"-cm1"}); }
}

// What qperf cannot do on RoCE with rdma-core either. Its UD tests never use the
// connection manager (rd_params in qperf's rdma.c clears -cm for every transport but RC)
// and build their address handle without a GRH, which rdma-core's mlx5 provider refuses
// on an Ethernet port (EINVAL); its RC tests without -cm1 move their QP to RTR with such
// an address vector, which Linux's ib_core refuses (rdma_check_ah_attr: EINVAL). A clear
// error at once on both sides, not a hang.
TEST_CASE("qperf on RoCE v2 without a GRH: refused as on rdma-core") {
    SUBCASE("ud_lat") { check_refused("eth", "ud_lat", "failed to create address handle: Invalid argument"); }
    SUBCASE("ud_bw") { check_refused("eth", "ud_bw", "failed to create address handle: Invalid argument"); }
    SUBCASE("rc_lat without -cm1") {
        check_refused("eth", "rc_lat", "failed to modify QP to RTR: Invalid argument");
    }
}
