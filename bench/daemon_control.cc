// Control-operation latency through cxvd beside the same operations in-process, on the
// model: create and destroy a CQ and an RC QP, register and deregister memory (4 KiB,
// 32 MiB, and 1 GiB through the daemon). Each operation is timed on its own, ns per
// operation, median and p99 over the repeats.
//
//   in-process  the program under `cxv-sim run`, the function opened through VFIO: the
//               driver runs each PRM command on its own command queue.
//   cxvd        a client process (not under cxv-sim) with CXV_DAEMON set: each command
//               is a COMMAND request (COMMAND_FD for a key's MTT over 32 KiB), memory a
//               MAP_MEMORY of a sealed memfd, run by the daemon on its queue.
//
// 1 GiB is measured through the daemon only: in-process the driver's queue has 256
// mailbox blocks (cmd_queue::options), so its largest CREATE_MKEY input is 128 KiB, a
// 63.9 MiB key in 4 KiB pages; cxvd preallocates 8,448 blocks (--mailbox-blocks).
//
// Run: daemon_control --sim PATH/cxv-sim --cxvd PATH/cxvd [--short]
// (it starts `cxv-sim run -- <itself> --inproc` and `cxv-sim run -- cxvd`, measures the
// daemon column itself, and prints both side by side).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/cxv.h"
#include "base/unique_fd.h"

namespace {

using clock_type = std::chrono::steady_clock;

template <typename T>
T must(cxv::result<T> r, const char* what) {
    if (!r) {
        std::fprintf(stderr, "daemon_control: %s: %s\n", what, r.error().message.c_str());
        std::exit(1);
    }
    return std::move(r).value();
}

struct stats {
    double median = 0, p99 = 0;
    std::size_t n = 0;
};
stats summarize(std::vector<double> ns) {
    std::sort(ns.begin(), ns.end());
    stats s;
    s.n = ns.size();
    if (ns.empty()) return s;
    s.median = ns[ns.size() / 2];
    s.p99 = ns[std::min(ns.size() - 1, (ns.size() * 99 + 99) / 100 - 1)];
    return s;
}

// A sealed memfd of `bytes`, mapped shared (what the daemon path needs; in-process any
// memory would do, the same kind is used for both).
struct memfd_buffer {
    void* addr = nullptr;
    std::size_t size = 0;
    explicit memfd_buffer(std::size_t bytes) : size(bytes) {
        const cxv::unique_fd fd(::memfd_create("cxv-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        if (!fd || ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0 ||
            ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
            std::perror("daemon_control: memfd");
            std::exit(1);
        }
        addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
        if (addr == MAP_FAILED) {
            std::perror("daemon_control: mmap");
            std::exit(1);
        }
    }
    ~memfd_buffer() { ::munmap(addr, size); }
};

using results = std::vector<std::pair<std::string, stats>>;

// In-process: the first function bound to vfio-pci (sysfs, as `cxv list` reads it; the
// model presents its functions there). Through the daemon: "" (its first).
std::string first_function() {
    if (std::getenv("CXV_DAEMON") != nullptr) return "";
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/drivers/vfio-pci", ec)) {
        const std::string n = e.path().filename().string();
        if (n.size() == 12 && n[4] == ':' && n[7] == ':' && n[10] == '.' && (best.empty() || n < best)) best = n;
    }
    return best;
}

// Every operation on the device `open` gives, `reps` times each (fewer for large keys).
results measure(bool with_1g, int reps) {
    auto dev = must(cxv::device::open(first_function()), "cxv::device::open");
    auto pd = must(dev->alloc_pd(), "alloc_pd");
    auto cq = must(cxv::cq::create(*dev, 256), "cq::create");
    results out;
    auto time_pair = [&](const std::string& name, int n, auto create) {
        std::vector<double> c, d;
        for (int i = 0; i < n + 2; ++i) {  // two warm-up rounds
            const auto t0 = clock_type::now();
            auto obj = create();
            const auto t1 = clock_type::now();
            obj.reset();
            const auto t2 = clock_type::now();
            if (i < 2) continue;
            c.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
            d.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
        }
        out.emplace_back(name + " create", summarize(c));
        out.emplace_back(name + " destroy", summarize(d));
    };
    time_pair("cq (256 CQEs)", reps, [&] { return must(cxv::cq::create(*dev, 256), "cq::create"); });
    time_pair("rc qp (64/64 WRs)", reps, [&] {
        cxv::qp::attr a;
        a.domain = pd;
        a.send_cq = a.recv_cq = cq;
        return must(cxv::qp::create(*dev, a), "qp::create");
    });
    const std::size_t sizes[] = {4096, std::size_t{32} << 20, std::size_t{1} << 30};
    const char* names[] = {"mr 4 KiB", "mr 32 MiB", "mr 1 GiB"};
    for (int k = 0; k < 3; ++k) {
        if (k == 2 && !with_1g) continue;
        memfd_buffer buf(sizes[k]);
        const int n = k == 0 ? reps : k == 1 ? std::max(5, reps / 10) : std::max(3, reps / 40);
        time_pair(names[k], n, [&] {
            return must(cxv::mr::create(pd, buf.addr, buf.size, cxv::access_local_write | cxv::access_remote_write),
                        "mr::create");
        });
    }
    return out;
}

void print_lines(const results& r) {
    for (const auto& [name, s] : r) std::printf("%s|%.0f|%.0f|%zu\n", name.c_str(), s.median, s.p99, s.n);
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& out) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        std::vector<char*> v;
        for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
        v.push_back(nullptr);
        ::execv(v[0], v.data());
        ::_exit(127);
    }
    return pid;
}

// Waits for `pid` (bounded); its exit status, or -1 after killing it.
int wait_for(pid_t pid, std::chrono::seconds limit) {
    const auto end = clock_type::now() + limit;
    int st = 0;
    while (::waitpid(pid, &st, WNOHANG) == 0) {
        if (clock_type::now() > end) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &st, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string slurp(const std::string& path) {
    std::string s;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

std::map<std::string, stats> parse_lines(const std::string& text) {
    std::map<std::string, stats> m;
    std::size_t at = 0;
    while (at < text.size()) {
        const auto nl = text.find('\n', at);
        const std::string line = text.substr(at, nl - at);
        at = nl == std::string::npos ? text.size() : nl + 1;
        char name[64];
        stats s;
        if (std::sscanf(line.c_str(), "%63[^|]|%lf|%lf|%zu", name, &s.median, &s.p99, &s.n) == 4) m[name] = s;
    }
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    std::string sim, cxvd;
    bool inproc = false, short_run = false;
    CLI::App app{"daemon_control: control-operation latency through cxvd beside in-process, on the model"};
    auto* sim_opt = app.add_option("--sim", sim, "the cxv-sim launcher");
    auto* cxvd_opt = app.add_option("--cxvd", cxvd, "the cxvd binary");
    app.add_flag("--short", short_run, "fewer repeats");
    // The in-process half, which the run starts under cxv-sim itself.
    auto* inproc_opt = app.add_flag("--inproc", inproc)->group("");
    inproc_opt->excludes(sim_opt)->excludes(cxvd_opt);
    CLI11_PARSE(app, argc, argv);
    const int reps = short_run ? 20 : 200;
    if (inproc) {
        print_lines(measure(false, reps));
        return 0;
    }
    if (sim.empty() || cxvd.empty()) {
        std::fprintf(stderr, "daemon_control: --sim and --cxvd are needed (or run it with bazel run)\n");
        return 2;
    }
    char dir_template[] = "/tmp/cxv-bench-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) return 1;
    const std::string dir = dir_template;
    const std::string self = std::filesystem::canonical("/proc/self/exe").string();
    const std::vector<std::string> sim_run = {sim, "run", "--port-type", "eth", "--link-up-ms", "20"};

    // The in-process column: this program under the model.
    auto argv_in = sim_run;
    argv_in.insert(argv_in.end(), {"--", self, "--inproc"});
    if (short_run) argv_in.push_back("--short");
    const int rc_in = wait_for(spawn(argv_in, dir + "/inproc.txt"), std::chrono::seconds(600));
    const auto in = parse_lines(slurp(dir + "/inproc.txt"));
    if (rc_in != 0) std::fprintf(stderr, "daemon_control: in-process run failed (%d): %s\n", rc_in, slurp(dir + "/inproc.txt").c_str());

    // The daemon column: cxvd under the model (firmware pages for a 1 GiB key's 2 MiB of
    // MTT at once; 4 GiB pinned), this process its client.
    const std::string sock = dir + "/cxvd.sock";
    auto argv_d = sim_run;
    argv_d.insert(argv_d.end(), {"--set", "init_pages=1024", "--", cxvd, "--socket", sock, "--quota-pinned-bytes",
                                 std::to_string(std::uint64_t{4} << 30)});
    const pid_t daemon = spawn(argv_d, dir + "/cxvd.log");
    for (int i = 0; i < 3000 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::setenv("CXV_DAEMON", sock.c_str(), 1);
    const results remote = measure(true, reps);
    ::kill(daemon, SIGTERM);
    if (wait_for(daemon, std::chrono::seconds(30)) != 0) std::fprintf(stderr, "daemon_control: cxvd did not stop cleanly\n");
    std::filesystem::remove_all(dir);

    std::printf("control-operation latency on the model, ns per operation (median / p99), %d repeats "
                "(32 MiB: %d, 1 GiB: %d)\n\n",
                reps, std::max(5, reps / 10), std::max(3, reps / 40));
    std::printf("| operation | in-process median | in-process p99 | cxvd median | cxvd p99 | cxvd / in-process |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    for (const auto& [name, d] : remote) {
        const auto it = in.find(name);
        if (it == in.end()) {
            std::printf("| %s | – | – | %.0f | %.0f | – |\n", name.c_str(), d.median, d.p99);
        } else {
            std::printf("| %s | %.0f | %.0f | %.0f | %.0f | %.1fx |\n", name.c_str(), it->second.median, it->second.p99,
                        d.median, d.p99, d.median / std::max(1.0, it->second.median));
        }
    }
    return rc_in == 0 ? 0 : 1;
}
