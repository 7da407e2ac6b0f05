// Two processes on one fabric: cxv_wire_peer runs twice, as server and client, each
// under its own `cxv-sim run --fabric DIR`, so every byte between them crosses the
// model's wire as RoCEv2 or InfiniBand frames over the directory's datagram sockets.
// Processes are started here and always reaped or killed by PID.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace {

using namespace std::chrono_literals;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    REQUIRE_MESSAGE(v != nullptr, name, " is not set (run under bazel test)");
    return std::filesystem::absolute(v).string();
}

// A fresh directory under /tmp (UNIX socket paths must stay short), removed at the end.
struct scratch {
    std::string dir;
    scratch() {
        std::string t = "/tmp/cxv-wire-XXXXXX";
        REQUIRE(::mkdtemp(t.data()) != nullptr);
        dir = t;
        std::filesystem::create_directories(dir + "/oob");
    }
    ~scratch() { std::filesystem::remove_all(dir); }
};

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A child process, killed (by its PID) if still running when this goes away.
struct child {
    pid_t pid = -1;
    std::string log;
    child(const std::vector<std::string>& argv, std::string log_path) : log(std::move(log_path)) {
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(fd, 1);
            ::dup2(fd, 2);
            std::vector<char*> v;
            for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
            v.push_back(nullptr);
            ::execv(v[0], v.data());
            ::_exit(127);
        }
    }
    // The exit status, or -1 after killing it when it ran past `deadline`.
    int wait(std::chrono::steady_clock::time_point deadline) {
        while (pid > 0) {
            int st = 0;
            const pid_t r = ::waitpid(pid, &st, WNOHANG);
            if (r == pid) {
                pid = -1;
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, &st, 0);
                pid = -1;
                return -1;
            }
            std::this_thread::sleep_for(5ms);
        }
        return -1;
    }
    ~child() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

// What `cxv-sim list` says the process at fabric place `index` presents.
std::string bdf_at(const std::string& sim, const std::string& fabric, unsigned index) {
    const std::string cmd = sim + " list --fabric " + fabric + " --set fabric_index=" + std::to_string(index);
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char line[64] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    ::pclose(p);
    REQUIRE(got);
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

struct run_options {
    std::string port_type = "eth";
    std::string test = "traffic";
    std::vector<std::string> sim_args;   // for both processes
    std::vector<std::string> peer_args;  // for both peers
    std::chrono::seconds limit{90};
};

struct outcome {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

outcome run_pair(const run_options& o) {
    const std::string sim = env("CXV_SIM"), peer = env("CXV_WIRE_PEER");
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    auto start = [&](const char* role, unsigned index) {
        std::vector<std::string> argv = {sim, "run", "--fabric", fabric, "--port-type", o.port_type,
                                         "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20"};
        argv.insert(argv.end(), o.sim_args.begin(), o.sim_args.end());
        argv.insert(argv.end(), {"--", peer, "--role", role, "--oob", s.dir + "/oob", "--test", o.test, "--device",
                                 bdf_at(sim, fabric, index)});
        argv.insert(argv.end(), o.peer_args.begin(), o.peer_args.end());
        return std::make_unique<child>(argv, s.dir + "/" + role + ".log");
    };
    auto server = start("server", 0);
    auto client = start("client", 1);
    const auto deadline = std::chrono::steady_clock::now() + o.limit;
    outcome out;
    out.client = client->wait(deadline);
    out.server = server->wait(deadline);
    out.server_log = slurp(server->log);
    out.client_log = slurp(client->log);
    return out;
}

void check_both_passed(const outcome& r) {
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
}

TEST_CASE("RoCEv2: every operation between two processes (RC, UC, UD; NAKs; RNR)") {
    check_both_passed(run_pair({}));
}

TEST_CASE("InfiniBand: every operation between two processes") {
    run_options o;
    o.port_type = "ib";
    check_both_passed(run_pair(o));
}

TEST_CASE("RC delivers every message exactly once and in order through each link fault at 10 %") {
    for (const char* fault : {"link_drop", "link_duplicate", "link_reorder", "link_corrupt"}) {
        SUBCASE(fault) {
            run_options o;
            o.test = "stream";
            o.sim_args = {"--set", std::string(fault) + "=0.1", "--set", "link_seed=7"};
            o.peer_args = {"--count", "300"};
            check_both_passed(run_pair(o));
        }
    }
    SUBCASE("all at once, with delay, on InfiniBand") {
        run_options o;
        o.port_type = "ib";
        o.test = "stream";
        o.sim_args = {"--set", "link_drop=0.05", "--set", "link_duplicate=0.05", "--set", "link_reorder=0.05",
                      "--set", "link_corrupt=0.05", "--set", "link_delay_us=200"};
        o.peer_args = {"--count", "300"};
        check_both_passed(run_pair(o));
    }
}

TEST_CASE("a peer that is gone: retries, then IBV_WC_RETRY_EXC_ERR, never a hang") {
    run_options o;
    o.test = "gone";
    o.peer_args = {"--timeout", "8", "--retry", "3"};
    o.limit = std::chrono::seconds(60);
    check_both_passed(run_pair(o));
}

}  // namespace
