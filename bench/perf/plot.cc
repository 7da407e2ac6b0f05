// report::write_plot: the latency CDF and histogram of every size, drawn by gnuplot.
//
// The data and the script go to a fresh directory under /tmp; gnuplot runs there
// (fork + execv, no shell) with its standard output redirected to the plot file, so
// no path of the caller's ever appears inside the script (nothing to quote).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "bench/perf/report.h"
#include "bench/perf/stats.h"

namespace cxv::perf {
namespace {

constexpr int kGnuplotTimeoutSeconds = 60;

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The first executable "gnuplot" on PATH, or "".
std::string find_gnuplot() {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= dirs.size()) {
        std::size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        std::string dir = dirs.substr(start, end - start);
        if (dir.empty()) dir = ".";
        const std::string candidate = dir + "/gnuplot";
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return {};
}

// Only letters, digits and a few harmless characters of a caller's string reach the
// script (in a title).
std::string plain(const std::string& s) {
    std::string out;
    for (char c : s)
        if (std::isalnum(static_cast<unsigned char>(c)) || std::strchr(" _-.:+/", c)) out += c;
    return out;
}

std::string read_small_file(const std::string& path, std::size_t limit) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() > limit) text.resize(limit);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

// Runs gnuplot SCRIPT in DIR, its stdout to OUT_FD, its stderr to DIR/stderr.txt. Bounded
// in time; returns "" on success, else what went wrong.
std::string run_gnuplot(const std::string& gnuplot, const std::string& dir, int out_fd) {
    const std::string err_path = dir + "/stderr.txt";
    unique_fd err_fd(::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!err_fd) return err_path + ": " + std::strerror(errno);
    // gnuplot gets this process's environment but LD_PRELOAD: what is preloaded here (the
    // model's VFIO presentation under cxv-sim, a sanitizer's runtime) is not its business,
    // and a leak checker at its exit would fail the plot.
    std::vector<char*> env;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.push_back(*e);
    }
    env.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        return std::string("fork: ") + std::strerror(errno);
    }
    if (pid == 0) {
        // Only async-signal-safe calls between fork and exec.
        if (::chdir(dir.c_str()) != 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd.get(), STDERR_FILENO) < 0)
            ::_exit(126);
        char* const argv[] = {const_cast<char*>("gnuplot"), const_cast<char*>("plot.gp"), nullptr};
        ::execve(gnuplot.c_str(), argv, env.data());
        ::_exit(127);
    }
    err_fd.reset();  // the child's copy is the one gnuplot writes
    int status = 0;
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return std::string("waitpid: ") + std::strerror(errno);
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > kGnuplotTimeoutSeconds) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return gnuplot + " did not finish in " + std::to_string(kGnuplotTimeoutSeconds) + " s (killed)";
        }
        const timespec pause{0, 5'000'000};
        ::nanosleep(&pause, nullptr);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    std::string what = gnuplot + (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                                    : " was killed by signal " + std::to_string(WTERMSIG(status)));
    const std::string err = read_small_file(err_path, 2000);
    if (!err.empty()) what += ": " + err;
    return what;
}

}  // namespace

std::string plot_colour(std::size_t i, std::size_t n) {
    // gnuplot's own line colours repeat after 8, and -a has 23 sizes. Hues spread over
    // 300 degrees (the last stays clear of the first's red), in size order so that
    // neighbouring sizes look related; every other line darker, so neighbours differ.
    const double h = n > 1 ? 300.0 * static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    const double v = i % 2 == 0 ? 0.9 : 0.6;
    const double s = 0.85;
    const double c = v * s;
    const double x = c * (1 - std::fabs(std::fmod(h / 60.0, 2.0) - 1));
    const double m = v - c;
    double r = 0, g = 0, b = 0;
    switch (static_cast<int>(h / 60.0) % 6) {
    case 0: r = c, g = x; break;
    case 1: r = x, g = c; break;
    case 2: g = c, b = x; break;
    case 3: g = x, b = c; break;
    case 4: r = x, b = c; break;
    default: r = c, b = x; break;
    }
    char out[8];
    std::snprintf(out, sizeof out, "#%02x%02x%02x", static_cast<unsigned>(std::lround((r + m) * 255)),
                  static_cast<unsigned>(std::lround((g + m) * 255)), static_cast<unsigned>(std::lround((b + m) * 255)));
    return out;
}

bool report::write_plot(const std::string& path, std::string* error) const {
    const auto fail = [&](std::string why) {
        if (error) *error = "plot " + path + ": " + std::move(why);
        return false;
    };
    if (latency_.empty()) return fail("no latency data to plot");
    const bool svg = ends_with(path, ".svg");
    if (!svg && !ends_with(path, ".png")) return fail("the file name must end in .svg or .png");
    const std::string gnuplot = find_gnuplot();
    if (gnuplot.empty())
        return fail("gnuplot not found on PATH (Debian: apt-get install gnuplot-nox; tools/setup installs it)");

    char tmpl[] = "/tmp/cxv-plot-XXXXXX";
    if (!::mkdtemp(tmpl)) return fail(std::string("mkdtemp: ") + std::strerror(errno));
    const std::string dir = tmpl;
    struct remove_dir {
        std::string d;
        ~remove_dir() {
            std::error_code ec;
            std::filesystem::remove_all(d, ec);
        }
    } cleanup{dir};

    // Data: one CDF file and one histogram file per size.
    //  - The CDF is drawn on a "nines" axis, -log10(1 - F), so that the tail is as
    //    readable as the body: 1 is the 90th percentile, 2 the 99th, 3 the 99.9th. F is
    //    taken at the middle of each sample's step ((i + 0.5) / n), which keeps the
    //    slowest sample finite (at log10(2n)).
    //  - The histogram is an outline of steps: (first lower edge, 0), then each bucket's
    //    (lower edge, count), then (last upper edge, last count) and down to 0.
    for (std::size_t i = 0; i < latency_.size(); ++i) {
        const latency_figures& f = latency_[i];
        std::ofstream cdf(dir + "/cdf_" + std::to_string(i) + ".dat");
        cdf.precision(17);
        const double half = 0.5 / static_cast<double>(f.iterations ? f.iterations : 1);
        for (const auto& [x, y] : cdf_[i]) cdf << x << ' ' << -std::log10(1 - (y - half)) << '\n';
        std::ofstream hist(dir + "/hist_" + std::to_string(i) + ".dat");
        hist.precision(17);
        if (!f.bucket_count.empty()) hist << f.bucket_lower_us[0] << " 0\n";
        for (std::size_t k = 0; k < f.bucket_count.size(); ++k)
            hist << f.bucket_lower_us[k] << ' ' << f.bucket_count[k] << '\n';
        if (!f.bucket_count.empty()) hist << f.bucket_lower_us.back() << " 0\n";
        if (!cdf || !hist) return fail("cannot write the data files in " + dir);
    }

    std::ostringstream gp;
    gp << (svg ? "set terminal svg size 1200,500 dynamic background rgb 'white'\n"
               : "set terminal pngcairo size 1200,500\n");
    gp << "set termoption noenhanced\nset output\n";  // standard output: the plot file
    gp << "set multiplot layout 1,2 title '" << plain(config_.test) << ' ' << plain(config_.connection) << " on "
       << plain(config_.device) << (config_.model ? " (model)" : "") << "'\n";
    gp << "set grid\nset logscale x\nset xlabel 'latency [usec]"
       << (latency_[0].round_trip_halved ? ", half round trip" : "") << "'\n";
    // A latency of 0 cannot go on a log axis: the lowest bucket's edge 0 is moved up.
    gp << "set key bottom right\nset ylabel 'percentile (CDF, log scale of 1 - F)'\nset yrange [0:*]\n"
          "set ytics ('0' 0, '50%%' log10(2), '90%%' 1, '99%%' 2, '99.9%%' 3, '99.99%%' 4, '99.999%%' 5, '99.9999%%' 6)\n";
    const auto plot_all = [&](const char* stem, const char* style) {
        gp << "plot ";
        for (std::size_t i = 0; i < latency_.size(); ++i) {
            if (i) gp << ", ";
            gp << '\'' << stem << i << ".dat' using ($1 > 0 ? $1 : 1e-3):2 with " << style << " lw 1.5 lc rgb '"
               << plot_colour(i, latency_.size()) << "' title '" << latency_[i].bytes << " B'";
        }
        gp << '\n';
    };
    plot_all("cdf_", "lines");
    gp << "set key top right\nset ylabel 'samples per bucket (" << kBucketsPerOctave << " per power of two)'\n";
    gp << "set yrange [0:*]\nset ytics autofreq\n";
    plot_all("hist_", "steps");
    gp << "unset multiplot\n";
    {
        std::ofstream script(dir + "/plot.gp");
        script << gp.str();
        if (!script) return fail("cannot write " + dir + "/plot.gp");
    }

    const unique_fd out_fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out_fd) return fail(std::strerror(errno));
    const std::string why = run_gnuplot(gnuplot, dir, out_fd.get());
    struct stat st {};
    const std::string problem = !why.empty()                                        ? why
                                : ::stat(path.c_str(), &st) != 0 || st.st_size == 0 ? gnuplot + " wrote nothing"
                                                                                    : "";
    if (!problem.empty()) {
        ::unlink(path.c_str());  // no half-written plot left behind
        return fail(problem);
    }
    return true;
}

}  // namespace cxv::perf
