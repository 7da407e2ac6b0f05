// cxv-perf's results and how they are shown: perftest's tables column for column, the
// percentiles and log-bucketed histogram perftest lacks, a JSON file with every figure
// and the run's configuration, and a latency plot (CDF and histogram) drawn by gnuplot.
//
// Nothing here runs inside a timed loop: the loops record raw TSC stamps into
// preallocated arrays (latency) or counters (bandwidth) and hand them over afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace cxv::perf {

// What a run was: printed in the header block and written to the JSON file.
struct run_config {
    std::string test;           // send_lat, send_bw, write_lat, write_bw, read_lat, ...
    std::string connection;     // RC, UC, UD
    std::string device;         // BDF
    std::string firmware;       // "xx.yy.zzzz"
    std::string link_layer;     // "Ethernet" or "InfiniBand"
    std::string cpu;            // /proc/cpuinfo "model name"
    double tsc_hz = 0;          // the calibrated TSC frequency
    std::string cxv_version;
    bool model = false;         // the function is the software model, not a card
    unsigned port = 1;
    unsigned mtu = 0;           // bytes
    unsigned qps = 1;
    unsigned tx_depth = 0, rx_depth = 0;
    unsigned inline_size = 0;
    unsigned post_list = 1;
    unsigned cq_moderation = 0;
    bool events = false;
    bool bidirectional = false;
    bool report_gbits = false;
    bool rdma_cm = false;       // -R: the QPs connected by the connection manager
    int gid_index = -1;         // -1: none (InfiniBand LIDs)
    bool server = false;        // this side is the server
    // Added with the report library (perftest prints them for these tests only):
    unsigned out_reads = 0;     // read/atomic tests: "Outstand reads" (perftest's -o)
    std::string atomic_type;    // atomic tests: "FETCH_AND_ADD" or "CMP_AND_SWAP"
    bool relaxed_ordering = false;  // "PCIe relax order": memory keys with relaxed ordering
};

// One size of a latency test. samples[i] is iteration i's time in TSC ticks, warm-up
// already excluded. For send_lat and write_lat (ping-pong) a sample is one round trip
// and the report halves it, as perftest does; read_lat and atomic_lat report it whole.
struct latency_sample_set {
    std::size_t bytes = 0;
    std::vector<std::uint64_t> samples;
    bool round_trip_halved = false;
    // Added: the "#iterations" column; 0 means samples.size(). perftest prints the
    // iterations it ran (-n), one more than the samples of a ping-pong (the differences
    // of consecutive stamps).
    std::uint64_t iterations = 0;
};

// One size of a bandwidth test: iterations completed, the time they took (TSC ticks,
// from the first post to the last completion), and the peak rate seen over any window
// of the run as perftest computes it (its "BW peak"): the caller passes the shortest
// per-iteration interval in ticks (0 when unknown: the peak is then the average).
struct bandwidth_sample_set {
    std::size_t bytes = 0;
    std::uint64_t iterations = 0;
    std::uint64_t ticks = 0;
    double min_ticks_per_iteration = 0;  // a quotient of ticks over iterations, not rounded
};

// Figures derived from a latency_sample_set, in microseconds. Every sample counts (perftest
// drops the two slowest) and percentiles are nearest-rank: report.cc lists where these
// figures differ from perftest's on purpose.
struct latency_figures {
    std::size_t bytes = 0;
    std::uint64_t iterations = 0;
    double min = 0, max = 0, typical = 0, avg = 0, stdev = 0;  // typical: the median
    double p50 = 0, p90 = 0, p99 = 0, p999 = 0, p9999 = 0;
    bool round_trip_halved = false;  // added: the samples were halved round trips
    // Log-bucketed histogram: bucket k counts samples in [lower[k], lower[k+1]) µs.
    // bucket_lower_us has one element more than bucket_count (the last upper edge);
    // 8 buckets per power of two, only the non-empty range (see stats.h).
    std::vector<double> bucket_lower_us;
    std::vector<std::uint64_t> bucket_count;
};
latency_figures compute_latency(const latency_sample_set& s, double tsc_hz);

struct bandwidth_figures {
    std::size_t bytes = 0;
    std::uint64_t iterations = 0;
    double peak_mb_s = 0, avg_mb_s = 0, msg_rate_mpps = 0;  // MB = 2^20 bytes, as perftest
    double peak_gbit_s = 0, avg_gbit_s = 0;                 // --report_gbits
};
bandwidth_figures compute_bandwidth(const bandwidth_sample_set& s, double tsc_hz);

// Collects a run's figures, prints them as perftest does, and writes the files.
class report {
public:
    explicit report(run_config c);

    // perftest's header block (the dashes, "Send Latency Test", the device, the
    // connection type, the TX/RX depths, the MTU, the local/remote address lines
    // go to print_addresses) and the table's column line. Call once before any row.
    //
    // As perftest, the address lines come between the header block and the column line:
    // the column line (with its dashes) is printed by print_columns(), or by the first
    // add() if print_columns() was not called, so header, addresses, columns, rows come
    // out in perftest's order whatever the caller does in between.
    void print_header(std::FILE* out) const;
    // Added: the dashes and the column line, once (later calls print nothing).
    void print_columns(std::FILE* out);
    // Added: perftest's banner on a server before the client has connected (printed
    // before the header block).
    void print_waiting_for_client(std::FILE* out) const;
    // One address line, as perftest prints "local address: LID 0x01 QPN 0x0011 PSN ..."
    void print_address(std::FILE* out, const char* side, unsigned lid, unsigned qpn, unsigned psn,
                       std::uint64_t rkey, std::uint64_t vaddr, const std::string& gid) const;

    // Adds one size and prints its row (perftest's columns), then, for latency, one
    // more line with p50/p90/p99/p99.9/p99.99/max.
    void add(std::FILE* out, const latency_sample_set& s);
    void add(std::FILE* out, const bandwidth_sample_set& s);
    // The closing dashes.
    void print_footer(std::FILE* out) const;

    // The JSON file: {"config": {...}, "latency": [...], "bandwidth": [...]} with every
    // figure above and the histogram. Returns false (and a message) on an I/O error.
    bool write_json(const std::string& path, std::string* error) const;
    // The plot: an SVG (path ending .svg) or PNG (.png) of the latency CDF and the
    // histogram of every size, drawn by gnuplot (Debian's gnuplot-nox). Returns false
    // with a message when there is no latency data, gnuplot is missing or fails.
    bool write_plot(const std::string& path, std::string* error) const;

    const std::vector<latency_figures>& latency() const { return latency_; }
    const std::vector<bandwidth_figures>& bandwidth() const { return bandwidth_; }
    const run_config& config() const { return config_; }

private:
    run_config config_;
    std::vector<latency_figures> latency_;
    std::vector<bandwidth_figures> bandwidth_;
    // Per latency size, the points of its CDF (µs, fraction) for write_plot.
    std::vector<std::vector<std::pair<double, double>>> cdf_;
    bool columns_printed_ = false;
};

// A GID as perftest prints it on its "GID:" line (16 bytes, each as two decimal digits,
// colon-separated), for print_address's gid argument.
std::string perftest_gid(const std::uint8_t (&raw)[16]);

// The colour ("#rrggbb") of size `i` of `n` in write_plot: distinct for every size.
std::string plot_colour(std::size_t i, std::size_t n);

// The TSC: read, and its frequency calibrated once against CLOCK_MONOTONIC_RAW
// (about 50 ms), or taken from the kernel's tsc_khz where available.
std::uint64_t tsc_now();
double tsc_calibrate();
// Added: how tsc_calibrate() got its figure ("sysfs tsc_freq_khz" or
// "CLOCK_MONOTONIC_RAW over 50 ms"); calibrates first if it has not run yet.
const char* tsc_calibration_source();

}  // namespace cxv::perf
