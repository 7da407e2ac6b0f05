// Every cxv program as a client of one cxvd (`cxv-sim run -- cxvd`), each process started
// without cxv-sim and with CXV_DAEMON set: Debian's unmodified ibverbs-utils under
// `cxv exec` (ibv_devices, ibv_devinfo, ibv_rc_pingpong and ibv_ud_pingpong as server and
// client on the daemon's one function), registration of malloc'd, memalign'd, anonymous
// and static memory (tests/exec/rebacking.c), `cxv list` and `cxv info`, and cxv-perf
// between two processes with --verify. After each, the daemon has no client left.
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/daemon/rig.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

// CXV_DAEMON for the children started while it lives.

// The daemon serves nobody but `watcher` (bounded wait): every client's objects went.
void check_no_clients(test_client& watcher) {
    const auto s = wait_status(watcher, [](const d::status_reply& r) { return r.clients.size() == 1; }, 5000ms);
    CHECK(s.clients.size() == 1);
    CHECK(s.clients_total == 1);
}

// "B bytes in S seconds = R Mbit/sec" / "N iters in S seconds = U usec/iter" as the
// pingpongs print them.
bool has_line(const std::string& log, unsigned long count, const char* what, const char* unit) {
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream w(line);
        unsigned long n = 0;
        double seconds = -1, rate = -1;
        std::string word, in, secs, eq, u;
        if ((w >> n >> word >> in >> seconds >> secs >> eq >> rate >> u) && n == count && word == what &&
            in == "in" && secs == "seconds" && eq == "=" && u == unit) {
            return true;
        }
    }
    return false;
}

struct pair_logs {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

// `server_argv` then, once it listens on `port`, `client_argv`; both bounded.
pair_logs run_pair(const scratch& s, const std::vector<std::string>& server_argv,
                   const std::vector<std::string>& client_argv, unsigned port) {
    const auto deadline = std::chrono::steady_clock::now() + 150s;
    child server(server_argv, s.dir + "/server.log");
    while (!listening(port) && server.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    pair_logs r;
    if (listening(port)) {
        child client(client_argv, s.dir + "/client.log");
        r.client = client.wait(deadline);
        r.client_log = slurp(client.log);
    }
    r.server = server.wait(deadline);
    r.server_log = slurp(server.log);
    return r;
}

// An ibverbs-utils pingpong, server and client under `cxv exec`, through the daemon.
void pingpong(const std::string& tool, const std::vector<std::string>& args, unsigned long size,
              unsigned long iters, const std::vector<std::string>& sim_args = {}) {
    daemon_rig rig({}, sim_args);
    test_client watcher(rig.sock);
    daemon_env env(rig.sock);
    scratch s;
    const unsigned port = free_port();
    auto argv = [&](bool client) {
        std::vector<std::string> v = {env_path("CXV"), "exec", "--", "/usr/bin/" + tool, "-p", std::to_string(port),
                                      "-s", std::to_string(size), "-n", std::to_string(iters)};
        v.insert(v.end(), args.begin(), args.end());
        if (client) v.push_back("127.0.0.1");
        return v;
    };
    const auto r = run_pair(s, argv(false), argv(true), port);
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    INFO("daemon log:\n" << rig.log());
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    for (const auto* log : {&r.server_log, &r.client_log}) {
        CHECK(has_line(*log, size * iters * 2, "bytes", "Mbit/sec"));
        CHECK(has_line(*log, iters, "iters", "usec/iter"));
    }
    check_no_clients(watcher);
}

}  // namespace

TEST_CASE("ibv_devices and ibv_devinfo list the daemon's function") {
    daemon_rig rig;
    test_client watcher(rig.sock);
    daemon_env env(rig.sock);
    scratch s;
    const auto devices = run({env_path("CXV"), "exec", "--", "/usr/bin/ibv_devices"}, s.dir + "/devices.log");
    INFO(devices.output);
    CHECK(devices.status == 0);
    CHECK(devices.output.find("mlx5_0") != std::string::npos);
    CHECK(devices.output.find("mlx5_1") == std::string::npos);
    const auto info = run({env_path("CXV"), "exec", "--", "/usr/bin/ibv_devinfo", "-v"}, s.dir + "/devinfo.log");
    INFO(info.output);
    CHECK(info.status == 0);
    CHECK(info.output.find("hca_id:\tmlx5_0") != std::string::npos);
    CHECK(info.output.find("fw_ver:\t\t\t\t" + watcher.hello.devices[0].firmware) != std::string::npos);
    CHECK(info.output.find("PORT_ACTIVE") != std::string::npos);
    CHECK(info.output.find("Ethernet") != std::string::npos);
    // The link's speed from the PTYS the daemon read at bring-up and sent in HELLO (a
    // client cannot read the register itself): 100GBASE-CR4, which mlx5_ib reports as
    // 4X EDR (its default, 4X QDR, would mean the register did not arrive).
    CHECK(watcher.hello.devices[0].ptys.size() == 64);
    CHECK(info.output.find("\t\t\tactive_speed:\t\t25.0 Gbps (32)\n") != std::string::npos);
    CHECK(info.output.find("\t\t\tactive_width:\t\t4X (2)\n") != std::string::npos);
    // --socket says the same as CXV_DAEMON.
    ::unsetenv("CXV_DAEMON");
    const auto by_flag =
        run({env_path("CXV"), "exec", "--socket", rig.sock, "--", "/usr/bin/ibv_devices"}, s.dir + "/flag.log");
    CHECK(by_flag.status == 0);
    CHECK(by_flag.output.find("mlx5_0") != std::string::npos);
    // A daemon that is not there: no device, and the reason.
    ::setenv("CXV_DAEMON", (s.dir + "/none.sock").c_str(), 1);
    const auto none = run({env_path("CXV"), "exec", "--", "/usr/bin/ibv_devices"}, s.dir + "/none.log");
    CHECK(none.status != 0);
    CHECK_MESSAGE(none.output.find("cannot reach cxvd") != std::string::npos, none.output);
    check_no_clients(watcher);
}

TEST_CASE("ibv_rc_pingpong through the daemon, two processes on its one function") {
    SUBCASE("RC, IPv4-mapped GID, polling") { pingpong("ibv_rc_pingpong", {"-g", "1"}, 4096, 100); }
    SUBCASE("RC, new send API, polling") { pingpong("ibv_rc_pingpong", {"-g", "1", "-N"}, 4096, 100); }
    // -e: every completion through a completion channel, i.e. the CQ's event from the
    // daemon's completion EQ over the client's event channel (docs/daemon.md, Events).
    SUBCASE("RC, completion events") { pingpong("ibv_rc_pingpong", {"-g", "1", "-e"}, 4096, 100); }
    // An InfiniBand port: LIDs rather than GIDs, the node GUID and PortInfo from the
    // read-only vport queries on the daemon's allow-list.
    SUBCASE("RC, InfiniBand port, LID-routed") { pingpong("ibv_rc_pingpong", {}, 4096, 100, {"--port-type", "ib"}); }
}

TEST_CASE("ibv_ud_pingpong through the daemon") { pingpong("ibv_ud_pingpong", {"-g", "0"}, 1024, 100); }

TEST_CASE("registering malloc, memalign, anonymous mmap and static memory through the daemon") {
    daemon_rig rig;
    test_client watcher(rig.sock);
    scratch s;
    {
        daemon_env env(rig.sock);
        const auto r = run({env_path("CXV"), "exec", "--", env_path("CXV_REBACKING")}, s.dir + "/rebacking.log");
        INFO(r.output);
        INFO("daemon log:\n" << rig.log());
        CHECK(r.status == 0);
        CHECK(r.output.find("PASSED") != std::string::npos);
        CHECK(r.output.find("FAIL") == std::string::npos);
        CHECK(r.output.find("ok malloc: re-backed by a memfd") != std::string::npos);
        CHECK(r.output.find("ok overlapping: from below into a live MR is EBUSY") != std::string::npos);
        CHECK(r.output.find("ok fork: re-backed pages are shared with the child") != std::string::npos);
        const auto f = run({env_path("CXV"), "exec", "--", env_path("CXV_REBACKING"), "fork"}, s.dir + "/fork.log");
        INFO(f.output);
        CHECK(f.status == 0);
        CHECK(f.output.find("ok fork: with ibv_fork_init the child has nothing at the buffer") != std::string::npos);
        CHECK(f.output.find("FAIL") == std::string::npos);
    }
    check_no_clients(watcher);
    // The same program on a function of its own (VFIO through cxv-sim): the same bytes.
    const auto direct = run({env_path("CXV_SIM"), "run", "--port-type", "eth", "--link-up-ms", "20", "--",
                             env_path("CXV"), "exec", "--", env_path("CXV_REBACKING")},
                            s.dir + "/direct.log");
    INFO(direct.output);
    CHECK(direct.status == 0);
    CHECK(direct.output.find("PASSED") != std::string::npos);
}

TEST_CASE("cxv list and cxv info through the daemon") {
    daemon_rig rig;
    test_client watcher(rig.sock);
    const std::string bdf = watcher.hello.devices[0].bdf;
    scratch s;
    {
        daemon_env env(rig.sock);
        const auto list = run({env_path("CXV"), "list"}, s.dir + "/list.log");
        INFO(list.output);
        CHECK(list.status == 0);
        CHECK(list.output.find("functions of the cxvd at " + rig.sock) != std::string::npos);
        CHECK(list.output.find(bdf) != std::string::npos);
        CHECK(list.output.find("Active") != std::string::npos);
        const auto json = run({env_path("CXV"), "list", "--json"}, s.dir + "/json.log");
        CHECK(json.status == 0);
        CHECK(json.output.find("\"bdf\":\"" + bdf + "\"") != std::string::npos);
        CHECK(json.output.find("\"daemon\":\"" + rig.sock + "\"") != std::string::npos);
        const auto info = run({env_path("CXV"), "info"}, s.dir + "/info.log");
        INFO(info.output);
        CHECK(info.status == 0);
        CHECK(info.output.find(bdf + ": firmware " + watcher.hello.devices[0].firmware) != std::string::npos);
        CHECK(info.output.find("  held by the cxvd at " + rig.sock + ": ") != std::string::npos);
        CHECK(info.output.find("GID 1: 0000:0000:0000:0000:0000:ffff:") != std::string::npos);
        CHECK(info.output.find("  port 1: link 100GBASE-CR4, 100 Gb/s, 4 lanes\n") != std::string::npos);
        CHECK(info.output.find("    tx_unicast_packets: ") != std::string::npos);
        // The vport counters count now, every client's traffic: a pingpong between two
        // other clients moves them (COUNTERS, not a fresh set).
        const auto before = run({env_path("CXV"), "info", "--json"}, s.dir + "/before.log");
        INFO(before.output);
        CHECK(before.status == 0);
        CHECK(before.output.find("\"daemon\":\"" + rig.sock + "\"") != std::string::npos);
        const unsigned port = free_port();
        auto argv = [&](bool client) {
            std::vector<std::string> v = {env_path("CXV"), "exec", "--", "/usr/bin/ibv_rc_pingpong", "-g", "1",
                                          "-p", std::to_string(port), "-n", "50"};
            if (client) v.push_back("127.0.0.1");
            return v;
        };
        const auto r = run_pair(s, argv(false), argv(true), port);
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        const auto after = run({env_path("CXV"), "info", "--json"}, s.dir + "/after.log");
        INFO(after.output);
        CHECK(after.status == 0);
        const auto count = [](const std::string& json, const std::string& name) -> long long {
            const std::string key = "\"" + name + "\":";
            const auto at = json.find(key);
            return at == std::string::npos ? -1 : std::atoll(json.c_str() + at + key.size());
        };
        // 50 round trips: at least 100 SENDs went out and came in (the loopback counts both).
        CHECK(count(before.output, "tx_unicast_packets") >= 0);
        CHECK(count(after.output, "tx_unicast_packets") >= count(before.output, "tx_unicast_packets") + 100);
        CHECK(count(after.output, "rx_unicast_packets") >= count(before.output, "rx_unicast_packets") + 100);
        const auto other = run({env_path("CXV"), "info", "0000:00:00.0"}, s.dir + "/other.log");
        CHECK(other.status != 0);
        CHECK_MESSAGE(other.output.find("does not serve 0000:00:00.0") != std::string::npos, other.output);
    }
    const auto by_flag = run({env_path("CXV"), "list", "--socket", rig.sock}, s.dir + "/flag.log");
    CHECK(by_flag.status == 0);
    CHECK(by_flag.output.find(bdf) != std::string::npos);
    check_no_clients(watcher);
}

TEST_CASE("cxv-perf between two processes through the daemon, --verify") {
    daemon_rig rig;
    test_client watcher(rig.sock);
    daemon_env env(rig.sock);
    scratch s;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"send_bw", "-n", "300", "-s", "4096", "-t", "32", "--verify"},
             {"write_lat", "-n", "300", "-s", "4096", "--verify"},
         }) {
        CAPTURE(args[0]);
        const unsigned port = free_port();
        std::vector<std::string> server = {env_path("CXV_PERF")};
        server.insert(server.end(), args.begin(), args.end());
        server.insert(server.end(), {"-x", "1", "-u", "18", "-p", std::to_string(port)});
        std::vector<std::string> client = server;
        client.push_back("127.0.0.1");
        const auto r = run_pair(s, server, client, port);
        INFO("server:\n" << r.server_log);
        INFO("client:\n" << r.client_log);
        CHECK(r.server == 0);
        CHECK(r.client == 0);
        CHECK(r.server_log.find("on " + watcher.hello.devices[0].bdf) != std::string::npos);
        CHECK(r.client_log.find("#bytes") != std::string::npos);
        CHECK(r.client_log.find(" 4096 ") != std::string::npos);
        CHECK(r.server_log.find("--verify:") == std::string::npos);
        CHECK(r.client_log.find("--verify:") == std::string::npos);
        check_no_clients(watcher);
    }
}
