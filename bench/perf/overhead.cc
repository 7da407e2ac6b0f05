// cxv-perf's cost per iteration: what a latency loop (latency.cc) adds to every iteration
// it measures: one inline TSC read, the sample (the difference from the previous stamp)
// stored in a preallocated array, and the progress count (target: < 20 ns).
//
//   overhead                 ns per iteration (median of 9 runs of 10^6, and the fastest
//                            of 20000 batches of 1000) of that loop and of the other TSC
//                            reads for comparison and, when valgrind is installed,
//                            instructions per iteration of the loop (callgrind)
//   overhead --no-callgrind  ns only
//   overhead --loop N        run the loop N times (what callgrind counts)
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/unique_fd.h"
#include "bench/perf/iteration_clock.h"
#include "bench/perf/report.h"
#include "bench/perf/tsc.h"

namespace {

std::atomic<std::uint64_t> progress{0};
// The warm-up count, read at run time as the latency loop's is (so its compare stays).
std::uint64_t warmup = 0;

// The measured loop: the latency loops' own per-iteration code (iteration_clock.h, the
// same inline function they call), with nothing else in the iteration; never inlined, so
// that callgrind can count exactly it.
[[gnu::noinline]] void cxv_bench_loop(std::uint64_t* samples, std::size_t n) {
    cxv::perf::iteration_clock clock;
    for (std::size_t i = 0; i < n; ++i) clock.tick(i, warmup, samples, &progress);
}
// The out-of-line ordered read, for comparison.
[[gnu::noinline]] void loop_call_ordered(std::uint64_t* samples, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) samples[i] = cxv::perf::tsc_now();
}
// The same with the inline reads of tsc.h (no call), ordered and bare.
[[gnu::noinline]] void loop_inline_ordered(std::uint64_t* samples, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) samples[i] = cxv::perf::tsc_ordered();
}
[[gnu::noinline]] void loop_inline_unordered(std::uint64_t* samples, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) samples[i] = cxv::perf::tsc_unordered();
}

struct timing {
    double median_ns, fastest_batch_ns;
};

double now_ns();

// ns per iteration: the median of 9 runs of 10^6, and the fastest of 20000 batches of
// 1000 (~25 µs each). On a shared machine other processes' time lands in every long run;
// the fastest short batch is the loop's own cost.
timing measure(void (*loop)(std::uint64_t*, std::size_t), std::vector<std::uint64_t>& samples) {
    loop(samples.data(), samples.size());  // warm up: pages touched, caches, frequency
    std::vector<double> ns;
    for (int r = 0; r < 9; ++r) {
        const double t0 = now_ns();
        loop(samples.data(), samples.size());
        ns.push_back((now_ns() - t0) / static_cast<double>(samples.size()));
    }
    std::sort(ns.begin(), ns.end());
    double best = 1e300;
    for (int b = 0; b < 20000; ++b) {
        const double t0 = now_ns();
        loop(samples.data(), 1000);
        best = std::min(best, (now_ns() - t0) / 1000);
    }
    return {ns[4], best};
}

double now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Instructions callgrind counts inside cxv_bench_loop for `overhead --loop n`; -1 on failure.
double callgrind_instructions(const char* self, std::size_t n) {
    char out[] = "/tmp/cxv-overhead-cg-XXXXXX";
    if (const cxv::unique_fd fd(::mkstemp(out)); !fd) return -1;
    const std::string out_arg = std::string("--callgrind-out-file=") + out;
    const std::string n_arg = std::to_string(n);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, STDOUT_FILENO);
            ::dup2(null, STDERR_FILENO);
        }
        const char* argv[] = {"valgrind",
                              "--tool=callgrind",
                              "--toggle-collect=*cxv_bench_loop*",
                              out_arg.c_str(),
                              self,
                              "--loop",
                              n_arg.c_str(),
                              nullptr};
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
        if (line.rfind("summary:", 0) == 0 || line.rfind("totals:", 0) == 0)
            total = std::strtod(line.c_str() + line.find(':') + 1, nullptr);
    ::unlink(out);
    return total;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"overhead: the cost of the harness's per-iteration work (one TSC read, one stored sample)"};
    bool no_callgrind = false;
    std::size_t loop = 0;
    app.add_flag("--no-callgrind", no_callgrind, "skip the instruction count (valgrind --tool=callgrind)");
    app.add_option("--loop", loop, "run only the latency loop N times (what callgrind counts)")->type_name("N");
    CLI11_PARSE(app, argc, argv);
    if (loop != 0) {
        std::vector<std::uint64_t> samples(loop);
        cxv_bench_loop(samples.data(), loop);
        return progress.load() == loop ? 0 : 1;
    }
    const bool callgrind = !no_callgrind;

    std::vector<std::uint64_t> samples(1'000'000);
    const double hz = cxv::perf::tsc_calibrate();
    std::printf("TSC at %.4f GHz (%s)\n", hz / 1e9, cxv::perf::tsc_calibration_source());
    const struct {
        const char* name;
        void (*loop)(std::uint64_t*, std::size_t);
    } variants[] = {{"latency loop (RDTSC, delta, progress)", cxv_bench_loop},
                    {"tsc_now() (LFENCE; RDTSC, a call)", loop_call_ordered},
                    {"tsc_ordered() (LFENCE; RDTSC, inline)", loop_inline_ordered},
                    {"tsc_unordered() (RDTSC, inline)", loop_inline_unordered}};
    timing first{};
    for (const auto& v : variants) {
        const timing t = measure(v.loop, samples);
        if (v.loop == cxv_bench_loop) first = t;
        std::printf("%-40s + store: %6.2f ns/iteration median, %6.2f fastest batch\n", v.name, t.median_ns,
                    t.fastest_batch_ns);
    }
    if (callgrind) {
        const double a = callgrind_instructions(argv[0], 1000), b = callgrind_instructions(argv[0], 11000);
        if (a < 0 || b < 0)
            std::printf("instructions: valgrind (callgrind) not available or failed\n");
        else
            std::printf("latency loop: %.2f instructions/iteration (callgrind)\n", (b - a) / 10000);
    }
    std::printf("target for the latency loop's own work: < 20 ns/iteration: %s (median), %s (fastest batch)\n",
                first.median_ns < 20 ? "met" : "NOT met", first.fastest_batch_ns < 20 ? "met" : "NOT met");
    return 0;
}
