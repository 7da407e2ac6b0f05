// perftest's tables, byte for byte as perftest 4.5 (Debian's 4.5+0.17) prints them: the
// header block of ctx_print_test_info(), the address lines of ctx_print_pingpong_data()
// and the rows of print_report_lat() / print_full_bw_report() (perftest's
// src/perftest_parameters.{c,h} and src/perftest_communication.{c,h}, read for the
// output format only). Where our figures differ from perftest's on purpose:
//  - every sample counts: perftest drops the two slowest samples before computing any
//    figure (its LAT_MEASURE_TAIL) and so never shows the true maximum;
//  - the 99% and 99.9% columns are nearest-rank percentiles (stats.h); perftest takes the
//    sample at index ceil(n * p) of the remaining ones, one rank above nearest-rank;
//  - t_stdev is computed in floating point; perftest truncates every deviation to whole
//    microseconds first, so it prints 0.00 whenever the jitter is below 1 µs.
#include "bench/perf/report.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string_view>
#include <tuple>
#include <utility>

#include "base/json.h"
#include "bench/perf/stats.h"

namespace cxv::perf {
namespace {

// perftest's output formats (what a script parsing perftest's output expects).
constexpr const char* kDashes =
    "---------------------------------------------------------------------------------------\n";
constexpr const char* kLatencyColumns =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
    "99% percentile[usec]   99.9% percentile[usec] \n";
constexpr const char* kBandwidthColumnsMB =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
constexpr const char* kBandwidthColumnsGb =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n";
constexpr const char* kLatencyRow =
    " %-7zu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n";
constexpr const char* kBandwidthRow = " %-7zu    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n";
// perftest's row when reporting Gb/s below 0.1 Gb/s (more decimals).
constexpr const char* kBandwidthRowSmall =
    " %-7zu    %" PRIu64 "           %-7.6f            %-7.6f            %-7.6f\n";
// Ours: the percentiles perftest lacks, on a line of its own that a perftest parser skips
// ('#' as in its column line).
constexpr const char* kPercentileRow =
    " # cxv percentiles[usec] %zu bytes: p50=%.2f p90=%.2f p99=%.2f p99.9=%.2f p99.99=%.2f max=%.2f\n";

// Bytes per "MB" and per "Gb" in perftest's bandwidth figures: MB/sec is 2^20 bytes per
// second, Gb/sec is 10^9 bits = 125'000'000 bytes per second.
constexpr double kMB = 1 << 20;
constexpr double kGbBytes = 125'000'000;

// send_lat -> {"send", "lat"}
std::pair<std::string_view, std::string_view> split_test(std::string_view test) {
    const auto us = test.rfind('_');
    if (us == std::string_view::npos) return {test, {}};
    return {test.substr(0, us), test.substr(us + 1)};
}

const char* verb_title(std::string_view verb) {
    if (verb == "send" || verb.starts_with("raw_ethernet")) return "Send";  // perftest's raw tests say Send
    if (verb == "write") return "RDMA_Write";
    if (verb == "read") return "RDMA_Read";
    if (verb == "atomic") return "Atomic";
    return nullptr;
}

const char* link_type(const std::string& link_layer) {
    if (link_layer == "Ethernet") return "Ethernet";
    if (link_layer == "InfiniBand" || link_layer == "IB" || link_layer.empty()) return "IB";
    return "Unknown";
}

latency_figures figures_from_sorted(std::size_t bytes, const std::vector<double>& us, bool halved) {
    latency_figures f;
    f.bytes = bytes;
    f.iterations = us.size();
    f.round_trip_halved = halved;
    if (us.empty()) return f;
    f.min = us.front();
    f.max = us.back();
    f.typical = median(us);
    std::tie(f.avg, f.stdev) = mean_stdev(us);
    f.p50 = nearest_rank(us, 500'000);
    f.p90 = nearest_rank(us, 900'000);
    f.p99 = nearest_rank(us, 990'000);
    f.p999 = nearest_rank(us, 999'000);
    f.p9999 = nearest_rank(us, 999'900);
    log_histogram h = make_log_histogram(us);
    f.bucket_lower_us = std::move(h.lower_us);
    f.bucket_count = std::move(h.count);
    return f;
}

// The samples in µs, sorted; empty when tsc_hz is not a frequency.
std::vector<double> sorted_us(const latency_sample_set& s, double tsc_hz) {
    std::vector<double> us;
    if (!(tsc_hz > 0)) return us;
    std::vector<std::uint64_t> ticks = s.samples;
    std::sort(ticks.begin(), ticks.end());
    const double per_tick = 1e6 / tsc_hz / (s.round_trip_halved ? 2 : 1);
    us.reserve(ticks.size());
    for (std::uint64_t t : ticks) us.push_back(static_cast<double>(t) * per_tick);
    return us;
}

}  // namespace

latency_figures compute_latency(const latency_sample_set& s, double tsc_hz) {
    latency_figures f = figures_from_sorted(s.bytes, sorted_us(s, tsc_hz), s.round_trip_halved);
    f.iterations = s.iterations ? s.iterations : s.samples.size();
    return f;
}

bandwidth_figures compute_bandwidth(const bandwidth_sample_set& s, double tsc_hz) {
    bandwidth_figures f;
    f.bytes = s.bytes;
    f.iterations = s.iterations;
    if (s.ticks == 0 || !(tsc_hz > 0)) return f;
    const double seconds = static_cast<double>(s.ticks) / tsc_hz;
    const double bytes = static_cast<double>(s.bytes) * static_cast<double>(s.iterations);
    f.avg_mb_s = bytes / seconds / kMB;
    f.avg_gbit_s = bytes / seconds / kGbBytes;
    f.msg_rate_mpps = static_cast<double>(s.iterations) / seconds / 1e6;
    if (s.min_ticks_per_iteration > 0) {
        // One message in the shortest interval per iteration (perftest's "opt_delta").
        const double best = s.min_ticks_per_iteration / tsc_hz;
        f.peak_mb_s = static_cast<double>(s.bytes) / best / kMB;
        f.peak_gbit_s = static_cast<double>(s.bytes) / best / kGbBytes;
    } else {
        f.peak_mb_s = f.avg_mb_s;
        f.peak_gbit_s = f.avg_gbit_s;
    }
    return f;
}

report::report(run_config c) : config_(std::move(c)) {}

void report::print_header(std::FILE* out) const {
    const auto [verb, kind] = split_test(config_.test);
    const char* title = verb_title(verb);
    const bool bw = kind == "bw";
    std::string line = "                    ";
    line += title ? title : config_.test.c_str();
    line += ' ';
    if (verb == "atomic" && !config_.atomic_type.empty()) line += config_.atomic_type + ' ';
    if (bw) {
        if (config_.bidirectional) line += "Bidirectional ";
        if (config_.post_list > 1) line += "Post List ";
        line += "BW ";
    } else if (kind == "lat") {
        line += "Latency ";
    }
    line += "Test\n";
    std::fputs(kDashes, out);
    std::fputs(line.c_str(), out);
    if (config_.events) std::fprintf(out, " Test with events. Using %s_comp%d\n", config_.device.c_str(), 0);
    std::fprintf(out, " Dual-port       : %s\t\tDevice         : %s\n", "OFF", config_.device.c_str());
    std::fprintf(out, " Number of qps   : %u\t\tTransport type : %s\n", config_.qps, "IB");
    std::fprintf(out, " Connection type : %s\t\tUsing SRQ      : %s\n", config_.connection.c_str(), "OFF");
    std::fprintf(out, " PCIe relax order: %s\n", config_.relaxed_ordering ? "ON" : "OFF");
    std::fprintf(out, " ibv_wr* API     : %s\n", "OFF");  // cxv posts ibv_send_wr lists on its own fast path
    if (!config_.server || config_.bidirectional) std::fprintf(out, " TX depth        : %u\n", config_.tx_depth);
    if (config_.post_list > 1) std::fprintf(out, " Post List       : %u\n", config_.post_list);
    if (verb == "send" && (config_.server || config_.bidirectional))
        std::fprintf(out, " RX depth        : %u\n", config_.rx_depth);
    if (bw) std::fprintf(out, " CQ Moderation   : %u\n", config_.cq_moderation);
    std::fprintf(out, " Mtu             : %u[B]\n", config_.mtu);
    std::fprintf(out, " Link type       : %s\n", link_type(config_.link_layer));
    if (config_.gid_index >= 0) std::fprintf(out, " GID index       : %d\n", config_.gid_index);
    if (verb != "read" && verb != "atomic")
        std::fprintf(out, " Max inline data : %u[B]\n", config_.inline_size);
    else
        std::fprintf(out, " Outstand reads  : %u\n", config_.out_reads);
    std::fprintf(out, " rdma_cm QPs\t : %s\n", config_.rdma_cm ? "ON" : "OFF");
    std::fprintf(out, " Data ex. method : %s\n", config_.rdma_cm ? "rdma_cm" : "Ethernet");
    std::fputs(kDashes, out);
}

void report::print_columns(std::FILE* out) {
    if (columns_printed_) return;
    columns_printed_ = true;
    const bool bw = split_test(config_.test).second == "bw";
    std::fputs(kDashes, out);
    std::fputs(bw ? (config_.report_gbits ? kBandwidthColumnsGb : kBandwidthColumnsMB) : kLatencyColumns, out);
}

void report::print_waiting_for_client(std::FILE* out) const {
    std::fputs(
        "\n************************************\n"
        "* Waiting for client to connect... *\n"
        "************************************\n",
        out);
}

void report::print_address(std::FILE* out, const char* side, unsigned lid, unsigned qpn, unsigned psn,
                           std::uint64_t rkey, std::uint64_t vaddr, const std::string& gid) const {
    const std::string_view verb = split_test(config_.test).first;
    std::fprintf(out, " %s address: LID %#04x QPN %#06x PSN %#06x", side, lid, qpn, psn);
    if (verb == "read") std::fprintf(out, " OUT %#04x", config_.out_reads);
    if (verb == "read" || verb == "write") std::fprintf(out, " RKey %#08" PRIx64 " VAddr %#016" PRIx64, rkey, vaddr);
    std::fputc('\n', out);
    if (config_.gid_index >= 0 && !gid.empty()) std::fprintf(out, " GID: %s\n", gid.c_str());
}

void report::add(std::FILE* out, const latency_sample_set& s) {
    const std::vector<double> us = sorted_us(s, config_.tsc_hz);
    latency_figures f = figures_from_sorted(s.bytes, us, s.round_trip_halved);
    f.iterations = s.iterations ? s.iterations : s.samples.size();
    cdf_.push_back(cdf_points(us, 2000));
    print_columns(out);
    std::fprintf(out, kLatencyRow, f.bytes, f.iterations, f.min, f.max, f.typical, f.avg, f.stdev, f.p99, f.p999);
    std::fprintf(out, kPercentileRow, f.bytes, f.p50, f.p90, f.p99, f.p999, f.p9999, f.max);
    latency_.push_back(std::move(f));
}

void report::add(std::FILE* out, const bandwidth_sample_set& s) {
    const bandwidth_figures f = compute_bandwidth(s, config_.tsc_hz);
    print_columns(out);
    if (!config_.report_gbits)
        std::fprintf(out, kBandwidthRow, f.bytes, f.iterations, f.peak_mb_s, f.avg_mb_s, f.msg_rate_mpps);
    else if (f.avg_gbit_s < 0.1)
        std::fprintf(out, kBandwidthRowSmall, f.bytes, f.iterations, f.peak_gbit_s, f.avg_gbit_s, f.msg_rate_mpps);
    else
        std::fprintf(out, kBandwidthRow, f.bytes, f.iterations, f.peak_gbit_s, f.avg_gbit_s, f.msg_rate_mpps);
    bandwidth_.push_back(f);
}

void report::print_footer(std::FILE* out) const { std::fputs(kDashes, out); }

bool report::write_json(const std::string& path, std::string* error) const {
    const run_config& c = config_;
    json_writer j;
    j.begin_object();
    j.member("tool", "cxv-perf");
    j.member("format", 1);
    j.key("config");
    j.begin_object();
    j.member("test", c.test);
    j.member("connection", c.connection);
    j.member("device", c.device);
    j.member("firmware", c.firmware);
    j.member("link_layer", c.link_layer);
    j.member("cpu", c.cpu);
    j.member("tsc_hz", c.tsc_hz);
    j.member("cxv_version", c.cxv_version);
    j.member("model", c.model);
    j.member("port", c.port);
    j.member("mtu", c.mtu);
    j.member("qps", c.qps);
    j.member("tx_depth", c.tx_depth);
    j.member("rx_depth", c.rx_depth);
    j.member("inline_size", c.inline_size);
    j.member("post_list", c.post_list);
    j.member("cq_moderation", c.cq_moderation);
    j.member("events", c.events);
    j.member("bidirectional", c.bidirectional);
    j.member("rdma_cm", c.rdma_cm);
    j.member("report_gbits", c.report_gbits);
    j.member("gid_index", c.gid_index);
    j.member("server", c.server);
    j.member("out_reads", c.out_reads);
    j.member("atomic_type", c.atomic_type);
    j.member("relaxed_ordering", c.relaxed_ordering);
    j.end_object();

    j.key("latency");
    j.begin_array();
    for (const latency_figures& f : latency_) {
        j.begin_object();
        j.member("bytes", f.bytes);
        j.member("iterations", f.iterations);
        j.member("round_trip_halved", f.round_trip_halved);
        j.member("t_min_us", f.min);
        j.member("t_max_us", f.max);
        j.member("t_typical_us", f.typical);
        j.member("t_avg_us", f.avg);
        j.member("t_stdev_us", f.stdev);
        j.member("p50_us", f.p50);
        j.member("p90_us", f.p90);
        j.member("p99_us", f.p99);
        j.member("p99_9_us", f.p999);
        j.member("p99_99_us", f.p9999);
        j.key("histogram");
        j.begin_object();
        j.member("buckets_per_power_of_two", kBucketsPerOctave);
        j.key("buckets");
        j.begin_array();
        for (std::size_t k = 0; k < f.bucket_count.size(); ++k) {
            j.begin_object();
            j.member("lower_us", f.bucket_lower_us[k]);
            j.member("upper_us", f.bucket_lower_us[k + 1]);
            j.member("count", f.bucket_count[k]);
            j.end_object();
        }
        j.end_array();
        j.end_object();
        j.end_object();
    }
    j.end_array();

    j.key("bandwidth");
    j.begin_array();
    for (const bandwidth_figures& f : bandwidth_) {
        j.begin_object();
        j.member("bytes", f.bytes);
        j.member("iterations", f.iterations);
        j.member("bw_peak_mb_s", f.peak_mb_s);
        j.member("bw_avg_mb_s", f.avg_mb_s);
        j.member("bw_peak_gbit_s", f.peak_gbit_s);
        j.member("bw_avg_gbit_s", f.avg_gbit_s);
        j.member("msg_rate_mpps", f.msg_rate_mpps);
        j.end_object();
    }
    j.end_array();
    j.end_object();

    std::string text = j.str();
    text += '\n';
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        if (error) *error = path + ": " + std::strerror(errno);
        return false;
    }
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int saved = errno;
    if (std::fclose(f) != 0 || !written) {
        if (error) *error = path + ": " + std::strerror(written ? errno : saved);
        return false;
    }
    return true;
}

std::string perftest_gid(const std::uint8_t (&raw)[16]) {
    std::string s;
    char buf[4];
    for (int i = 0; i < 16; ++i) {
        std::snprintf(buf, sizeof buf, "%02d", raw[i]);
        if (i) s += ':';
        s += buf;
    }
    return s;
}

}  // namespace cxv::perf
