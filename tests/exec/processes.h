// Processes for the cxv exec tests: children started with fork/exec, their output in a
// file, every wait bounded and a child still running at the end killed by its PID.
#pragma once

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace cxv::test {

inline std::string env_path(const char* name) {
    const char* v = std::getenv(name);
    REQUIRE_MESSAGE(v != nullptr, name, " is not set (run under bazel test)");
    return std::filesystem::absolute(v).string();
}

inline std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A fresh directory under /tmp (UNIX socket paths stay short), removed at the end.
struct scratch {
    std::string dir;
    scratch() {
        std::string t = "/tmp/cxv-exec-XXXXXX";
        REQUIRE(::mkdtemp(t.data()) != nullptr);
        dir = t;
    }
    ~scratch() { std::filesystem::remove_all(dir); }
};

// A child process: its stdout and stderr in `log` (its stderr in `err` instead when one
// is given), killed by its PID if still running when the object goes.
struct child {
    pid_t pid = -1;
    std::string log, err;
    child(const std::vector<std::string>& argv, std::string log_path, std::string err_path = {})
        : log(std::move(log_path)), err(err_path.empty() ? log : std::move(err_path)) {
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(fd, 1);
            ::dup2(err == log ? fd : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
            std::vector<char*> v;
            for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
            v.push_back(nullptr);
            ::execv(v[0], v.data());
            ::_exit(127);
        }
    }
    bool running() {
        if (pid <= 0) return false;
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) != pid) return true;
        pid = -1;
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
    }
    // The exit status (128 + signal for a signal), or -1 after killing it when it ran
    // past `deadline`.
    int wait(std::chrono::steady_clock::time_point deadline) {
        while (running()) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill_now();
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return status;
    }
    void kill_now() {
        if (pid <= 0) return;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
        status = -1;
    }
    ~child() { kill_now(); }
    int status = -1;
};

struct ran {
    int status = -1;
    std::string output;
};

// Runs `argv` to its end (killed after `limit`), its stdout and stderr together.
inline ran run(const std::vector<std::string>& argv, const std::string& log,
               std::chrono::seconds limit = std::chrono::seconds(60)) {
    child c(argv, log);
    ran r;
    r.status = c.wait(std::chrono::steady_clock::now() + limit);
    r.output = slurp(log);
    return r;
}

// What `cxv-sim list` says the process at place `index` of the fabric in `fabric` presents.
inline std::string bdf_at(const std::string& sim, const std::string& fabric, unsigned index) {
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

// A TCP port for a test's server, kept from every other test for the life of this process.
// It lies below the kernel's ephemeral range (ip_local_port_range): a port from bind(0)
// lies inside it, and once closed it may become the local end of any program's connect(),
// which makes the server's bind fail with EADDRINUSE (perf_test saw it in CI, beside the
// other tests' TCP exchanges). Tests running in parallel take ports through a lock file
// each, /tmp/cxv-test-ports/PORT, held with flock (never by name or PID), so two of them
// never pick the same port; tests/qemu/guest_test_lib.sh's free_ports takes the same locks.
inline unsigned free_port() {
    unsigned first = 32768;
    if (std::ifstream r("/proc/sys/net/ipv4/ip_local_port_range"); r) r >> first;
    unsigned low = 20000;
    if (first < low + 1000) low = 1024;
    REQUIRE_MESSAGE(first >= low + 1000, "no room below the ephemeral port range (it starts at ", first, ")");
    const std::string dir = "/tmp/cxv-test-ports";
    if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);
    auto bindable = [](unsigned port, int type) {
        const int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
        if (fd < 0) return false;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);  // bound, never listening nor connected: nothing lingers
        return ok;
    };
    static unsigned seed = static_cast<unsigned>(::getpid()) * 2654435761u ^
                           static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0; attempt < 2000; ++attempt) {
        seed = seed * 1103515245u + 12345u;
        const unsigned port = low + (seed >> 8) % (first - low);
        const std::string lock = dir + "/" + std::to_string(port);
        const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) continue;
        ::fchmod(fd, 0666);
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            ::close(fd);
            continue;
        }
        if (!bindable(port, SOCK_STREAM) || !bindable(port, SOCK_DGRAM)) {
            ::close(fd);
            continue;
        }
        return port;  // fd stays open, and the lock held, until this process ends
    }
    FAIL("no free TCP port below the ephemeral range after 2000 tries");
    return 0;
}

// Whether some socket listens on TCP `port` (/proc/net/tcp and tcp6, state 0A), without
// connecting to it (the pingpong servers take the first connection as their peer's).
inline bool listening(unsigned port) {
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream f(table);
        std::string line;
        std::getline(f, line);  // header
        while (std::getline(f, line)) {
            std::istringstream s(line);
            std::string slot, local, remote, state;
            s >> slot >> local >> remote >> state;
            const auto colon = local.rfind(':');
            if (colon == std::string::npos) continue;
            if (std::stoul(local.substr(colon + 1), nullptr, 16) == port && state == "0A") return true;
        }
    }
    return false;
}

// The calling thread in a network namespace of its own, with its loopback up, for the
// life of the object; the children it starts meanwhile share it. For tools whose TCP
// port is fixed (udaddy's 7174): another test, or another run of this one, cannot hold
// that port here. active() is false where the namespace could not be made (no
// CAP_SYS_ADMIN); the caller then runs in the machine's namespace.
class private_network {
public:
    private_network() {
        home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (home_ < 0) return;
        if (::unshare(CLONE_NEWNET) != 0) {
            ::close(home_);
            home_ = -1;
            return;
        }
        const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ifreq r{};
        std::strcpy(r.ifr_name, "lo");
        active_ = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &r) == 0 && ((r.ifr_flags |= IFF_UP), true) &&
                  ::ioctl(s, SIOCSIFFLAGS, &r) == 0;
        if (s >= 0) ::close(s);
        if (!active_) leave();  // no loopback there: back to the machine's namespace
    }
    ~private_network() { leave(); }
    private_network(const private_network&) = delete;
    private_network& operator=(const private_network&) = delete;
    bool active() const { return active_; }

private:
    void leave() {
        if (home_ < 0) return;
        if (::setns(home_, CLONE_NEWNET) != 0) {
            std::perror("private_network: setns back");
            std::abort();  // the rest of the tests would run in the wrong namespace
        }
        ::close(home_);
        home_ = -1;
    }
    int home_ = -1;
    bool active_ = false;
};

// The defined dynamic symbols of a shared library with their versions, as objdump -T
// prints them ("RDMACM_1.0 rdma_bind_addr"; a non-default version in parentheses,
// "(MLX5_1.0) mlx5dv_init_obj"); the version definitions are among them (objdump lists
// each as an absolute symbol of its own name).
inline std::set<std::string> exported_symbols(const std::string& library) {
    FILE* p = ::popen(("objdump -T " + library + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    std::set<std::string> out;
    char line[512];
    while (std::fgets(line, sizeof line, p) != nullptr) {
        const std::string l(line);
        if (l.find("*UND*") != std::string::npos || l.find(" g ") == std::string::npos) continue;
        std::istringstream s(l);
        std::vector<std::string> words;
        for (std::string w; s >> w;) words.push_back(w);
        if (words.size() < 2) continue;
        out.insert(words[words.size() - 2] + " " + words.back());
    }
    ::pclose(p);
    return out;
}

// What a server and its client did: exit statuses (-1: killed at the deadline) and logs.
struct exec_pair {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

// `PROGRAM -p PORT ARGS` as a server (fabric place 0) and as a client of 127.0.0.1
// (place 1), each under `cxv-sim run --fabric DIR --port-type PORT_TYPE --set
// fabric_index=N --link-up-ms 20 SIM_ARGS -- cxv exec --` (CXV_SIM, CXV). The client
// connects once: it starts when the server listens. A client that failed leaves its
// server waiting for it, which is then killed: at once, or once `server_settled` says
// its log has what the caller needs from it (within 10 s).
inline exec_pair run_exec_pair(const std::string& port_type, const std::string& program,
                               const std::vector<std::string>& args, const std::vector<std::string>& sim_args,
                               std::chrono::seconds limit,
                               bool (*server_settled)(const std::string& server_log) = nullptr) {
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const unsigned port = free_port();
    auto argv_for = [&](unsigned index, bool client) {
        std::vector<std::string> v = {env_path("CXV_SIM"), "run", "--fabric", fabric, "--port-type", port_type,
                                      "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20"};
        v.insert(v.end(), sim_args.begin(), sim_args.end());
        v.insert(v.end(), {"--", env_path("CXV"), "exec", "--", program, "-p", std::to_string(port)});
        v.insert(v.end(), args.begin(), args.end());
        if (client) v.push_back("127.0.0.1");
        return v;
    };
    const auto deadline = std::chrono::steady_clock::now() + limit;
    child server(argv_for(0, false), s.dir + "/server.log");
    while (!listening(port) && server.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    exec_pair r;
    if (listening(port)) {
        child client(argv_for(1, true), s.dir + "/client.log");
        r.client = client.wait(deadline);
        r.client_log = slurp(client.log);
        if (r.client != 0 && server_settled != nullptr) {
            const auto settle = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(10));
            while (server.running() && !server_settled(slurp(server.log)) && std::chrono::steady_clock::now() < settle) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        if (r.client != 0) server.kill_now();
    }
    r.server = server.wait(deadline);
    r.server_log = slurp(server.log);
    return r;
}

// perftest measures the CPU's clock itself before it reports (a linear fit of TSC
// cycles against gettimeofday over short sleeps); on a loaded machine (the sanitizer
// build, other tests beside it) the fit can fail ("Correlation coefficient r^2: ... <
// 0.9"), and the run then reports a rate of 0, t_avg inf, or no report at all and status
// 1. Such a run says nothing about the device.
inline bool perftest_clock_failed(const std::string& client_log, const std::string& server_log) {
    for (const auto* log : {&client_log, &server_log}) {
        if (log->find("Correlation coefficient") != std::string::npos ||
            log->find("Can't produce a report") != std::string::npos) {
            return true;
        }
    }
    return false;
}

// The numbers of perftest's result row: the first line of numbers under its "#bytes"
// header (empty when there is none). Word by word through strtod, which reads the "-nan"
// perftest prints for a standard deviation whose rounding went below zero (operator>>
// stops there).
inline std::vector<double> perftest_row(const std::string& log) {
    std::istringstream lines(log);
    std::string line;
    bool header = false;
    while (std::getline(lines, line)) {
        if (line.find("#bytes") != std::string::npos) {
            header = true;
            continue;
        }
        if (!header) continue;
        std::istringstream w(line);
        std::vector<double> v;
        for (std::string word; w >> word;) {
            char* end = nullptr;
            const double x = std::strtod(word.c_str(), &end);
            if (end == word.c_str() || *end != '\0') break;
            v.push_back(x);
        }
        if (!v.empty()) return v;
        header = false;
    }
    return {};
}

// `cxv-sim run SIM_ARGS -- cxv exec -- PROGRAM...` (CXV_SIM, CXV), within 120 s.
inline ran run_exec_under_sim(const std::vector<std::string>& sim_args, const std::vector<std::string>& program) {
    scratch s;
    std::vector<std::string> argv = {env_path("CXV_SIM"), "run", "--link-up-ms", "20"};
    argv.insert(argv.end(), sim_args.begin(), sim_args.end());
    argv.insert(argv.end(), {"--", env_path("CXV"), "exec", "--"});
    argv.insert(argv.end(), program.begin(), program.end());
    return run(argv, s.dir + "/out.log", std::chrono::seconds(120));
}

}  // namespace cxv::test
