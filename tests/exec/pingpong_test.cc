// cxv exec, two processes: Debian's unmodified ibv_*_pingpong as server and client, each
// under its own `cxv-sim run --fabric DIR --set fabric_index=N`, so every message crosses
// the model's wire. The tools exchange their addresses over TCP on 127.0.0.1 (-p PORT);
// on InfiniBand they address each other by LID, on RoCE by the GID index given with -g.
#include <chrono>
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

// "B bytes in S seconds = R Mbit/sec" and "N iters in S seconds = U usec/iter" with the
// counts the tool prints for `iters` round trips of `size` bytes.
// (Read word by word: std::regex does not build warning-free under the sanitizers.)
bool has_line(const std::string& log, unsigned long count, const char* what, const char* unit) {
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream w(line);
        unsigned long n = 0;
        double seconds = -1, rate = -1;
        std::string word, in, secs, eq, u;
        if ((w >> n >> word >> in >> seconds >> secs >> eq >> rate >> u) && n == count && word == what &&
            in == "in" && secs == "seconds" && eq == "=" && u == unit && seconds >= 0 && rate >= 0) {
            return true;
        }
    }
    return false;
}

void check_report(const std::string& log, unsigned long size, unsigned long iters) {
    CHECK(has_line(log, size * iters * 2, "bytes", "Mbit/sec"));
    CHECK(has_line(log, iters, "iters", "usec/iter"));
}

void check_pair(const std::string& port_type, const std::string& tool, std::vector<std::string> args,
                unsigned long size, unsigned long iters, const std::vector<std::string>& sim_args = {}) {
    args.insert(args.end(), {"-s", std::to_string(size), "-n", std::to_string(iters)});
    // Run once: a transport failure (the tools print "transport retry counter exceeded")
    // is a failure, with both sides' logs.
    const exec_pair r = run_exec_pair(port_type, "/usr/bin/" + tool, args, sim_args, std::chrono::seconds(150));
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    check_report(r.server_log, size, iters);
    check_report(r.client_log, size, iters);
}

}  // namespace

TEST_CASE("ibv_rc_pingpong on InfiniBand") {
    SUBCASE("polling") { check_pair("ib", "ibv_rc_pingpong", {}, 4096, 100); }
    SUBCASE("completion events (-e)") { check_pair("ib", "ibv_rc_pingpong", {"-e"}, 4096, 1000); }
    SUBCASE("10000 iterations with events") { check_pair("ib", "ibv_rc_pingpong", {"-e"}, 4096, 10000); }
    // --new_send: ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, and each send
    // through ibv_wr_start / ibv_wr_send / ibv_wr_set_sge / ibv_wr_complete.
    SUBCASE("new send API (--new_send), polling") {
        check_pair("ib", "ibv_rc_pingpong", {"--new_send", "-c"}, 4096, 100);
    }
    SUBCASE("new send API (--new_send) with events") {
        check_pair("ib", "ibv_rc_pingpong", {"--new_send", "-e", "-c"}, 4096, 1000);
    }
}

// Lost frames, each side's wire dropping 1 in 100 (and, on RoCE, ARP requests and
// replies with them): the tools' RC QPs (ACK timeout 67 ms, 7 retries) recover each loss
// by the model's retransmission, the message completing once and intact.
TEST_CASE("ibv_rc_pingpong through a lossy wire: every loss retransmitted") {
    const std::vector<std::string> lossy = {"--set", "link_drop=0.01", "--set", "link_seed=11"};
    SUBCASE("InfiniBand") { check_pair("ib", "ibv_rc_pingpong", {"-e"}, 4096, 500, lossy); }
    SUBCASE("RoCE v2, IPv4-mapped GID") { check_pair("eth", "ibv_rc_pingpong", {"-e", "-g", "1"}, 4096, 500, lossy); }
}

TEST_CASE("ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong on InfiniBand") {
    SUBCASE("UC") { check_pair("ib", "ibv_uc_pingpong", {"-e"}, 4096, 1000); }
    SUBCASE("UD (address handles from attributes)") { check_pair("ib", "ibv_ud_pingpong", {"-e"}, 1024, 1000); }
    SUBCASE("SRQ (16 QPs on one SRQ)") { check_pair("ib", "ibv_srq_pingpong", {"-e"}, 4096, 1000); }
}

TEST_CASE("the pingpongs on RoCE v2, addressed by GID index") {
    SUBCASE("RC, IPv4-mapped GID, polling") { check_pair("eth", "ibv_rc_pingpong", {"-g", "1"}, 4096, 100); }
    SUBCASE("RC, IPv4-mapped GID") { check_pair("eth", "ibv_rc_pingpong", {"-e", "-g", "1"}, 4096, 1000); }
    SUBCASE("RC, new send API") { check_pair("eth", "ibv_rc_pingpong", {"-N", "-e", "-g", "1"}, 4096, 1000); }
    SUBCASE("UC, link-local GID") { check_pair("eth", "ibv_uc_pingpong", {"-e", "-g", "0"}, 4096, 1000); }
    SUBCASE("UD") { check_pair("eth", "ibv_ud_pingpong", {"-e", "-g", "0"}, 1024, 1000); }
    SUBCASE("SRQ") { check_pair("eth", "ibv_srq_pingpong", {"-e", "-g", "1"}, 4096, 1000); }
}
