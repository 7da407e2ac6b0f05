// cxv-perf's cost per iteration: one tsc_now() and one sample stored in a preallocated
// array, what a latency loop adds to every iteration it measures (target: < 20 ns).
//
//   overhead                 ns per iteration (median of 9 runs of 10^6) and, when
//                            valgrind is installed, instructions per iteration (callgrind)
//   overhead --no-callgrind  ns only
//   overhead --loop N        run the loop N times (what callgrind counts)
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/perf/report.h"

namespace {

// The measured loop; never inlined, so that callgrind can count exactly it.
[[gnu::noinline]] void cxv_bench_loop(std::uint64_t* samples, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) samples[i] = cxv::perf::tsc_now();
}

double now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Instructions callgrind counts inside cxv_bench_loop for `overhead --loop n`; -1 on failure.
double callgrind_instructions(const char* self, std::size_t n) {
    char out[] = "/tmp/cxv-overhead-cg-XXXXXX";
    const int fd = ::mkstemp(out);
    if (fd < 0) return -1;
    ::close(fd);
    const std::string out_arg = std::string("--callgrind-out-file=") + out;
    const std::string n_arg = std::to_string(n);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, STDOUT_FILENO);
            ::dup2(null, STDERR_FILENO);
        }
        const char* argv[] = {"valgrind", "--tool=callgrind", "--toggle-collect=*cxv_bench_loop*", out_arg.c_str(),
                              self, "--loop", n_arg.c_str(), nullptr};
        ::execvp("valgrind", const_cast<char* const*>(argv));
        ::_exit(127);
    }
    int status = -1;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ::unlink(out);
        return -1;
    }
    std::ifstream in(out);
    std::string line;
    double total = -1;
    while (std::getline(in, line))
        if (line.rfind("summary:", 0) == 0 || line.rfind("totals:", 0) == 0) total = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
    ::unlink(out);
    return total;
}

}  // namespace

int main(int argc, char** argv) {
    bool callgrind = true;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--loop") && i + 1 < argc) {
            const std::size_t n = std::strtoull(argv[i + 1], nullptr, 0);
            std::vector<std::uint64_t> samples(n);
            cxv_bench_loop(samples.data(), n);
            return samples.empty() || samples.back() >= samples.front() ? 0 : 1;
        }
        if (!std::strcmp(argv[i], "--no-callgrind")) {
            callgrind = false;
        } else {
            std::fprintf(stderr, "usage: overhead [--no-callgrind] | --loop N\n");
            return 2;
        }
    }

    constexpr std::size_t kIters = 1'000'000;
    std::vector<std::uint64_t> samples(kIters);
    cxv_bench_loop(samples.data(), kIters);  // warm up: pages touched, caches, frequency
    std::vector<double> ns;
    for (int r = 0; r < 9; ++r) {
        const double t0 = now_ns();
        cxv_bench_loop(samples.data(), kIters);
        ns.push_back((now_ns() - t0) / kIters);
    }
    std::sort(ns.begin(), ns.end());
    const double hz = cxv::perf::tsc_calibrate();
    const double ticks = static_cast<double>(samples.back() - samples.front()) / (kIters - 1);
    std::printf("tsc_now() + store: %.2f ns/iteration (median of 9 x %zu; min %.2f, max %.2f); "
                "%.1f TSC ticks between consecutive stamps at %.4f GHz (%s)\n",
                ns[4], kIters, ns.front(), ns.back(), ticks, hz / 1e9, cxv::perf::tsc_calibration_source());
    if (callgrind) {
        const double a = callgrind_instructions(argv[0], 1000), b = callgrind_instructions(argv[0], 11000);
        if (a < 0 || b < 0)
            std::printf("instructions: valgrind (callgrind) not available or failed\n");
        else
            std::printf("tsc_now() + store: %.2f instructions/iteration (callgrind)\n", (b - a) / 10000);
    }
    std::printf("target: < 20 ns/iteration: %s\n", ns[4] < 20 ? "met" : "NOT met");
    return 0;
}
