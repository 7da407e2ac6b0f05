#include "bench/perf/stats.h"

#include <algorithm>
#include <cmath>

namespace cxv::perf {

double nearest_rank(const std::vector<double>& sorted, std::uint32_t p_ppm) {
    const std::uint64_t n = sorted.size();
    const std::uint64_t p = std::min<std::uint64_t>(p_ppm, 1'000'000);
    // rank = ceil(p * n / 10^6), at least 1.
    const std::uint64_t rank = std::max<std::uint64_t>(1, (p * n + 999'999) / 1'000'000);
    return sorted[rank - 1];
}

double median(const std::vector<double>& sorted) {
    const std::size_t n = sorted.size();
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

std::pair<double, double> mean_stdev(const std::vector<double>& samples) {
    if (samples.empty()) return {0, 0};
    double sum = 0;
    for (double x : samples) sum += x;
    const double mean = sum / static_cast<double>(samples.size());
    double sq = 0;
    for (double x : samples) sq += (x - mean) * (x - mean);
    return {mean, std::sqrt(sq / static_cast<double>(samples.size()))};
}

double log_bucket_lower(int k) { return std::exp2(static_cast<double>(k) / kBucketsPerOctave); }

int log_bucket(double x_us) {
    if (!(x_us > log_bucket_lower(kLowestBucket + 1))) return kLowestBucket;  // also NaN
    if (std::isinf(x_us)) return 64 * kBucketsPerOctave;
    int k = static_cast<int>(std::floor(std::log2(x_us) * kBucketsPerOctave));
    // log2 may round across an edge: settle k so that lower(k) <= x < lower(k + 1).
    while (log_bucket_lower(k + 1) <= x_us) ++k;
    while (log_bucket_lower(k) > x_us) --k;
    return k;
}

log_histogram make_log_histogram(const std::vector<double>& samples_us) {
    log_histogram h;
    if (samples_us.empty()) return h;
    int lo = log_bucket(samples_us.front()), hi = lo;
    for (double x : samples_us) {
        const int k = log_bucket(x);
        lo = std::min(lo, k);
        hi = std::max(hi, k);
    }
    h.count.assign(static_cast<std::size_t>(hi - lo + 1), 0);
    for (double x : samples_us) ++h.count[static_cast<std::size_t>(log_bucket(x) - lo)];
    for (int k = lo; k <= hi + 1; ++k) h.lower_us.push_back(log_bucket_lower(k));
    if (lo == kLowestBucket) h.lower_us.front() = 0;
    return h;
}

std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& sorted, std::size_t max_points) {
    std::vector<std::pair<double, double>> out;
    const std::size_t n = sorted.size();
    if (n == 0) return out;
    const auto point = [&](std::size_t i) {
        out.emplace_back(sorted[i], static_cast<double>(i + 1) / static_cast<double>(n));
    };
    if (max_points == 0 || n <= 2 * max_points) {
        for (std::size_t i = 0; i < n; ++i) point(i);
        return out;
    }
    const std::size_t tail = n - max_points;
    for (std::size_t j = 0; j < max_points; ++j) {
        const std::size_t i = j * tail / max_points;
        point(i);
    }
    for (std::size_t i = tail; i < n; ++i) point(i);
    return out;
}

}  // namespace cxv::perf
