// The statistics behind cxv-perf's latency figures, on samples already sorted ascending:
// nearest-rank percentiles, the median perftest calls t_typical, the mean and standard
// deviation, and the log-bucketed histogram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cxv::perf {

// Nearest-rank percentile: of n sorted samples, the one of rank ceil(p * n) (ranks count
// from 1), i.e. the smallest sample such that at least a fraction p of all samples are
// less than or equal to it. It is always one of the samples, never an interpolation.
// p is in parts per million (99.9% = 999'000), so that the rank is computed exactly in
// integers; p = 0 gives the minimum. n must be > 0.
double nearest_rank(const std::vector<double>& sorted, std::uint32_t p_ppm);

// The median: the middle sample, or the mean of the two middle ones when n is even (as
// perftest's t_typical). n must be > 0.
double median(const std::vector<double>& sorted);

// The arithmetic mean and the population standard deviation (divided by n, as perftest),
// computed in two passes. Both 0 for no samples.
std::pair<double, double> mean_stdev(const std::vector<double>& samples);

// Log-bucketed histogram with kBucketsPerOctave buckets per power of two: bucket k holds
// the samples x with 2^(k/8) <= x < 2^((k+1)/8) (x in µs). Samples below 2^(kLowestBucket/8)
// (about 1 ns, or zero) are counted in bucket kLowestBucket, whose lower edge is then 0.
// Only the range from the first to the last non-empty bucket is emitted (empty buckets
// inside it are kept, with count 0). lower_us has one more element than count: the last
// is the upper edge of the last bucket.
inline constexpr int kBucketsPerOctave = 8;
inline constexpr int kLowestBucket = -80;  // 2^-10 µs
struct log_histogram {
    std::vector<double> lower_us;
    std::vector<std::uint64_t> count;
};
// The bucket index of x (µs), and the lower edge of bucket k.
int log_bucket(double x_us);
double log_bucket_lower(int k);
log_histogram make_log_histogram(const std::vector<double>& samples_us);

// Points of the empirical CDF (x = latency in µs, y = fraction of samples <= x) for a plot:
// every sample when there are few, else max_points spread evenly over the ranks plus every
// one of the slowest max_points samples (the tail is what a latency plot is read for).
std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& sorted, std::size_t max_points);

}  // namespace cxv::perf
