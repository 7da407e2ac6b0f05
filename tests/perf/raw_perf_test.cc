// cxv-perf's raw Ethernet tests (bench/perf/raw.cc) on the model's Ethernet functions:
// raw_ethernet_bw, raw_ethernet_lat and raw_ethernet_burst_lat between two processes
// (each under `cxv-sim run --fabric DIR`) and in one (--loopback, two functions), with
// perftest's columns checked, --json, and the options refused with one clear line.
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"
#include "tests/perf/pair.h"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using namespace cxv::test;
using namespace cxv::test::perf;

const std::vector<std::string> kUdp = {"-J", "169.254.0.1", "-j", "169.254.0.2", "-K", "5000", "-k", "6000"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// The number before " of N frames received" on the server.
double received_of(const std::string& server_out, std::uint64_t sent) {
    const std::string tail = " of " + std::to_string(sent) + " frames received";
    const auto at = server_out.find(tail);
    if (at == std::string::npos) return -1;
    const auto start = server_out.rfind(' ', at - 1);
    return std::strtod(server_out.substr(start + 1, at - start - 1).c_str(), nullptr);
}

}  // namespace

TEST_CASE("raw_ethernet_bw between two processes: L2 frames, and IPv4/UDP frames steered to the server's port") {
    SUBCASE("L2, 1518 bytes by pointer") {
        const outcome o = run_pair({"raw_ethernet_bw", "-n", "3000"}, {}, {}, "eth");
        check_passed(o);
        check_bandwidth_rows(o.client_out, {1518}, 3000);
        const double got = received_of(o.server_out, 3000);
        CHECK(got > 0);
        CHECK(got <= 3000);
    }
    SUBCASE("UDP, 128 bytes inline") {
        const outcome o = run_pair(with({"raw_ethernet_bw", "-n", "3000", "-s", "128"}, kUdp), {}, {}, "eth");
        check_passed(o);
        check_bandwidth_rows(o.client_out, {128}, 3000);
        CHECK(received_of(o.server_out, 3000) > 0);
    }
}

TEST_CASE("raw_ethernet_lat between two processes: UDP inline, TCP by pointer") {
    SUBCASE("UDP, 64 bytes") {
        const outcome o = run_pair(with({"raw_ethernet_lat", "-n", "300"}, kUdp), {}, {}, "eth");
        check_passed(o);
        check_latency_rows(o.client_out, {64}, 300);
        CHECK(received_of(o.server_out, 300) == 300);
    }
    SUBCASE("TCP, 1024 bytes") {
        const outcome o =
            run_pair({"raw_ethernet_lat", "-n", "200", "-s", "1024", "--tcp", "-J", "169.254.0.1", "-j", "169.254.0.2"},
                     {}, {}, "eth");
        check_passed(o);
        check_latency_rows(o.client_out, {1024}, 200);
    }
}

TEST_CASE("--raw_ipv6: IPv6/UDP and IPv6/TCP frames steered by the server's IPv6 address and port") {
    const std::vector<std::string> v6 = {"--raw_ipv6", "-J", "fe80::c5:1", "-j", "fe80::c5:2", "--flow_label", "0x12345"};
    SUBCASE("raw_ethernet_lat, UDP, 128 bytes") {
        const outcome o = run_pair(with({"raw_ethernet_lat", "-n", "300", "-s", "128"}, v6), {}, {}, "eth");
        check_passed(o);
        check_latency_rows(o.client_out, {128}, 300);
        CHECK(received_of(o.server_out, 300) == 300);
    }
    SUBCASE("raw_ethernet_bw, TCP, 1024 bytes by pointer") {
        const outcome o =
            run_pair(with({"raw_ethernet_bw", "-n", "2000", "-s", "1024", "--tcp"}, v6), {}, {}, "eth");
        check_passed(o);
        check_bandwidth_rows(o.client_out, {1024}, 2000);
        CHECK(received_of(o.server_out, 2000) > 0);
    }
}

TEST_CASE("raw_ethernet_burst_lat: bursts of 64, every 4th frame answered") {
    const outcome o =
        run_pair(with({"raw_ethernet_burst_lat", "-n", "512", "--burst_size", "64", "--reply_every", "4"}, kUdp), {}, {},
                 "eth");
    check_passed(o);
    check_latency_rows(o.client_out, {64}, 512);
    CHECK(received_of(o.server_out, 512) == 512);
}

TEST_CASE("--loopback: two functions in one process, --json") {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    const std::string json = s.dir + "/lat.json";
    child c({sim, "run", "--devices", "2", "--port-type", "eth", "--", perf, "raw_ethernet_lat", "--loopback", "-d",
             "0000:c5:00.0", "-d", "0000:c5:00.1", "-n", "500", "--json", json},
            s.dir + "/loop.out", s.dir + "/loop.err");
    const int rc = c.wait(clock_type::now() + 60s);
    const std::string out = slurp(c.log);
    INFO(out << slurp(c.err));
    REQUIRE(rc == 0);
    check_latency_rows(out, {64}, 500);
    const std::string j = slurp(json);
    CHECK(j.find("\"raw_ethernet_lat\"") != std::string::npos);
    CHECK(j.find("\"RawEth\"") != std::string::npos);
}

TEST_CASE("raw tests' bad options: one clear line and exit 1") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"raw_ethernet_bw", "--loopback"}, "needs two functions"},
        {{"raw_ethernet_bw", "-J", "169.254.0.1"}, "-J and -j go together"},
        {{"raw_ethernet_lat", "--tcp"}, "--tcp needs -J and -j"},
        {{"raw_ethernet_lat", "-s", "32"}, "bad -s (64 .. 1518"},
        {{"raw_ethernet_burst_lat", "--burst_size", "128", "--reply_every", "3"}, "must divide"},
        {{"raw_ethernet_bw", "-J", "fe80::1", "-j", "fe80::2"}, "IPv6 with --raw_ipv6"},
        {{"raw_ethernet_bw", "--raw_ipv6", "-J", "169.254.0.1", "-j", "169.254.0.2"}, "an IPv6 address, with --raw_ipv6"},
        {{"raw_ethernet_bw", "--raw_ipv6"}, "--raw_ipv6 needs -J and -j"},
        {{"raw_ethernet_lat", "--flow_label", "5", "-J", "169.254.0.1", "-j", "169.254.0.2"}, "needs --raw_ipv6"},
        {{"raw_ethernet_lat", "--raw_ipv6", "-J", "fe80::1", "-j", "fe80::2"}, "-s 64 leaves no room"},
        {{"raw_ethernet_bw", "-B", "02:00:00:00:00"}, "bad -B"},
        {{"raw_ethernet_lat", "--bogus"}, "unknown option --bogus"},
        {{"raw_ethernet_lat", "-D", "2", "-n", "10"}, "-D and -n"},
    };
    check_bad_options(cases);
}
