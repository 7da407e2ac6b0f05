// cxv exec, two processes: Debian's unmodified perftest raw Ethernet tests
// (raw_ethernet_bw, raw_ethernet_lat) as server and client, each under its own
// `cxv-sim run --fabric DIR --set fabric_index=N` with Ethernet ports. They use raw packet
// QPs (IBV_QPT_RAW_PACKET) and ibv_create_flow, which the context's verbs ops answer.
// perftest's raw tests have no exchange of their own: the server is given its MAC (-B)
// and the client's (-E), and the client the reverse.
//
// Each runs under stdbuf -oL: the test reads the server's output as it goes (its stdout
// is a file, which stdio would fill a block at a time).
//
// Duration mode (-D): perftest's server posts its receives only after it prints its
// header, so a client started at once may send before there is a buffer, and a frame a
// card (or the model) drops then would stall an iteration count for ever. Timed runs end
// on their own; what is checked is that both end with status 0 and print a result row
// that counted frames.
//
// raw_ethernet_burst_lat is not here: Debian's perftest 4.5-0.17 refuses its own default
// options before it opens a device ("SW Rate limiter cann't be executed on non-BW ...").
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The model gives the n-th function of a fabric the base MAC plus n, and a process's
// first function is its fabric_index times 16 (sim/vfio/options.cc).
const char* kBase = "02:00:00:00:00:01";
const char* kMac[2] = {"02:00:00:00:00:01", "02:00:00:00:00:11"};

struct pair_result {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

pair_result run_pair_once(const std::string& test, const std::vector<std::string>& args) {
    ::unsetenv("LD_LIBRARY_PATH");
    if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0' && !has(o, "detect_leaks=0")) {
        ::setenv("ASAN_OPTIONS", (std::string(o) + ":detect_leaks=0").c_str(), 1);
    }
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    auto argv_for = [&](int index) {
        std::vector<std::string> v = {env_path("CXV_SIM"), "run", "--fabric", fabric, "--port-type", "eth",
                                      "--set", "fabric_index=" + std::to_string(index), "--set",
                                      std::string("mac=") + kBase, "--link-up-ms", "20", "--",
                                      env_path("CXV"), "exec", "--", "/usr/bin/stdbuf", "-oL", "/usr/bin/" + test,
                                      index == 0 ? "--server" : "--client", "-B", kMac[index], "-E", kMac[1 - index],
                                      "-D", "2"};
        v.insert(v.end(), args.begin(), args.end());
        return v;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    pair_result r;
    child server(argv_for(0), s.dir + "/server.log");
    // The client once the server has its flows (it prints its header after them).
    while (server.running() && !has(slurp(server.log), "#bytes") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    {
        child client(argv_for(1), s.dir + "/client.log");
        r.client = client.wait(deadline);
        r.client_log = slurp(client.log);
    }
    r.server = server.wait(deadline);
    r.server_log = slurp(server.log);
    return r;
}

pair_result run_pair(const std::string& test, const std::vector<std::string>& args) {
    pair_result r = run_pair_once(test, args);
    // A run whose clock estimate failed (processes.h) is run again, at most twice more.
    for (int again = 0; again < 2 && perftest_clock_failed(r.client_log, r.server_log); ++again) {
        MESSAGE("perftest's CPU clock estimate failed; run again");
        r = run_pair_once(test, args);
    }
    return r;
}

void check_bw(const std::vector<std::string>& args) {
    const pair_result r = run_pair("raw_ethernet_bw", args);
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    // #bytes, #iterations, BW peak, BW average, MsgRate: frames counted on both sides.
    const auto c = perftest_row(r.client_log), s = perftest_row(r.server_log);
    REQUIRE(c.size() >= 5);
    REQUIRE(s.size() >= 5);
    CHECK(c[1] > 0);
    CHECK(c[4] > 0);
    CHECK(s[1] > 0);
    CHECK(s[4] > 0);
}

}  // namespace

TEST_CASE("raw_ethernet_bw: frames steered by destination MAC") { check_bw({}); }

TEST_CASE("raw_ethernet_bw: IPv4/UDP and TCP frames steered by address and port, 64 bytes") {
    const std::vector<std::string> ip = {"-J", "169.254.0.1", "-j", "169.254.0.2", "-K", "5000", "-k", "6000"};
    SUBCASE("UDP") {
        auto a = ip;
        a.insert(a.end(), {"-s", "64"});
        check_bw(a);
    }
    SUBCASE("TCP") {
        auto a = ip;
        a.push_back("--tcp");
        check_bw(a);
    }
}

TEST_CASE("raw_ethernet_bw: IPv6/UDP frames steered by address and port") {
    check_bw({"--raw_ipv6", "-J", "fe80::1", "-j", "fe80::2", "-K", "5000", "-k", "6000"});
}

TEST_CASE("raw_ethernet_lat: ping-pong of IPv4/UDP frames") {
    const pair_result r =
        run_pair("raw_ethernet_lat", {"-J", "169.254.0.1", "-j", "169.254.0.2", "-K", "5000", "-k", "6000"});
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    // Duration mode's row: #bytes, #iterations, t_avg, tps average.
    for (const auto* log : {&r.client_log, &r.server_log}) {
        const auto v = perftest_row(*log);
        REQUIRE(v.size() >= 4);
        CHECK(v[1] > 0);
        CHECK(v[2] > 0);
    }
}
