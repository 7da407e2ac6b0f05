#include "bench/fastpath_rdma_core.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/errno_text.h"
#include "base/unique_fd.h"

extern char** environ;

namespace cxv::bench {

namespace {

// The compiler and flags //bench:fastpath is built with (bench/BUILD), for rdma-core's side.
#ifndef CXV_FASTPATH_CC
#error "bench/BUILD defines CXV_FASTPATH_CC and CXV_FASTPATH_CFLAGS"
#endif

// Runs `argv` with `env` added to the environment, its stdout and stderr into `output`
// (null: /dev/null); the exit status, or -1 when it did not run or ended by a signal.
int run(const std::vector<std::string>& argv, std::string* output, const std::vector<std::string>& env = {}) {
    char out_path[] = "/tmp/cxv-fastpath-XXXXXX";
    const unique_fd out(::mkstemp(out_path));
    if (!out) return -1;
    ::unlink(out_path);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (output != nullptr) {
        posix_spawn_file_actions_adddup2(&fa, out.get(), STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&fa, out.get(), STDERR_FILENO);
    } else {
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    }
    std::vector<std::string> envs(env);
    for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int spawned = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (spawned != 0) return -1;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    if (output != nullptr) {
        output->clear();
        char buf[4096];
        for (off_t at = 0;;) {
            const ssize_t n = ::pread(out.get(), buf, sizeof buf, at);
            if (n <= 0) break;
            output->append(buf, static_cast<std::size_t>(n));
            at += n;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Where Bazel keeps fastpath's data files: $RUNFILES_DIR (bazel run), else beside the
// binary (FILE.runfiles).
std::string runfile(const std::string& self, const std::string& path) {
    if (const char* r = std::getenv("RUNFILES_DIR"); r != nullptr && *r != '\0') {
        const std::string p = std::string(r) + "/cxv/" + path;
        if (::access(p.c_str(), R_OK) == 0) return p;
    }
    return self + ".runfiles/cxv/" + path;
}

std::string last_lines(const std::string& text, std::size_t n) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
    std::string tail;
    for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) tail += lines[i] + "\n";
    return tail;
}

}  // namespace

double callgrind_per_op(const std::vector<std::string>& program, const std::string& toggle, const std::string& op,
                        unsigned per_call) {
    auto count = [&](unsigned iters) -> double {
        char out[] = "/tmp/cxv-callgrind-XXXXXX";
        if (const unique_fd fd(::mkstemp(out)); !fd) return -1;
        std::vector<std::string> argv = {"valgrind", "--tool=callgrind", "--toggle-collect=" + toggle,
                                         std::string("--callgrind-out-file=") + out};
        argv.insert(argv.end(), program.begin(), program.end());
        argv.insert(argv.end(), {"--loop", op, "--iters", std::to_string(iters)});
        const int rc = run(argv, nullptr);
        double total = -1;
        std::ifstream in(out);
        for (std::string line; rc == 0 && std::getline(in, line);) {
            if (line.rfind("summary:", 0) == 0 || line.rfind("totals:", 0) == 0) {
                total = std::stod(line.substr(line.find(':') + 1));
            }
        }
        std::remove(out);
        return total;
    };
    const unsigned a = 2000, b = 12000;
    const double ca = count(a), cb = count(b);
    if (ca < 0 || cb < 0) return -1;
    return (cb - ca) / (double(b - a) * per_call);
}

result<rdma_core_side> rdma_core_side::create(const std::string& tree, const std::string& self) {
    std::error_code ec;
    if (!std::filesystem::is_directory(tree, ec)) return error{ENOENT, "--rdma-core " + tree + ": not a directory"};
    const std::string script = runfile(self, "bench/rdma_core/build.sh");
    if (::access(script.c_str(), R_OK) != 0) return sys_error(errno, "fastpath: " + script);
    char dir[] = "/tmp/cxv-rdma-core-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return sys_error(errno, "fastpath: mkdtemp");
    rdma_core_side side;
    side.dir_ = dir;
    side.program_ = side.dir_ + "/rc_fastpath";
    std::string log;
    const int rc = run({"sh", script, tree, side.dir_}, &log,
                       {std::string("CC=") + CXV_FASTPATH_CC, std::string("CFLAGS=") + CXV_FASTPATH_CFLAGS});
    if (rc != 0) {
        return error{EINVAL, "building rdma-core's mlx5 provider from " + tree + " failed (bench/rdma_core/build.sh):\n" +
                                 last_lines(log, 12)};
    }
    std::ifstream info(side.dir_ + "/INFO");
    std::stringstream text;
    text << info.rdbuf();
    side.info_ = text.str();
    while (!side.info_.empty() && side.info_.back() == '\n') side.info_.pop_back();
    // INFO's first line: "rdma-core VERSION (...) at TREE".
    if (side.info_.rfind("rdma-core ", 0) == 0) side.release_ = side.info_.substr(10, side.info_.find(' ', 10) - 10);
    std::string list;
    if (run({side.program_, "--list"}, &list) != 0) return error{EIO, "rc_fastpath --list failed: " + list};
    std::istringstream lines(list);
    std::string name;
    unsigned per_call = 0;
    while (lines >> name >> per_call) side.ops_.emplace_back(name, per_call);
    return side;
}

rdma_core_side::rdma_core_side(rdma_core_side&& o) noexcept
    : dir_(std::move(o.dir_)),
      program_(std::move(o.program_)),
      info_(std::move(o.info_)),
      release_(std::move(o.release_)),
      ops_(std::move(o.ops_)) {
    o.dir_.clear();
}

rdma_core_side::~rdma_core_side() {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

bool rdma_core_side::has(const std::string& op, unsigned& per_call) const {
    for (const auto& [name, n] : ops_) {
        if (name == op) {
            per_call = n;
            return true;
        }
    }
    return false;
}

double rdma_core_side::ns_per_op(const std::string& op, unsigned repeats, unsigned calls) const {
    std::string out;
    if (run({program_, "--time", op, "--repeats", std::to_string(repeats), "--calls", std::to_string(calls)}, &out) !=
        0) {
        return -1;
    }
    return std::strtod(out.c_str(), nullptr);
}

double rdma_core_side::instructions_per_op(const std::string& op, unsigned per_call) const {
    return callgrind_per_op({program_}, "rc_bench_*", op, per_call);
}

}  // namespace cxv::bench
