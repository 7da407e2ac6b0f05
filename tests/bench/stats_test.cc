// bench/perf/stats.h against figures computed here independently: percentiles by
// counting, the standard deviation by the textbook formula in long double, the histogram
// by brute force over bucket edges.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "bench/perf/report.h"
#include "bench/perf/stats.h"

using namespace cxv::perf;

namespace {

// Nearest rank by its definition: the smallest sample x such that at least p of all
// samples are <= x (counted, not indexed).
double by_counting(const std::vector<double>& sorted, double p) {
    for (double x : sorted) {
        const auto at_most = std::count_if(sorted.begin(), sorted.end(), [&](double y) { return y <= x; });
        if (static_cast<long double>(at_most) >= static_cast<long double>(p) * sorted.size() - 1e-9L) return x;
    }
    return sorted.back();
}

std::vector<double> random_sorted(std::size_t n, std::uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> d(0.5, 0.7);
    std::vector<double> v(n);
    for (double& x : v) x = d(rng);
    std::sort(v.begin(), v.end());
    return v;
}

}  // namespace

TEST_CASE("nearest-rank percentiles of small known sets") {
    // 1..10: p50 = 5 (rank 5), p90 = 9, p99 = 10, p99.9 = 10.
    std::vector<double> v;
    for (int i = 1; i <= 10; ++i) v.push_back(i);
    CHECK(nearest_rank(v, 500'000) == 5);
    CHECK(nearest_rank(v, 900'000) == 9);
    CHECK(nearest_rank(v, 910'000) == 10);
    CHECK(nearest_rank(v, 990'000) == 10);
    CHECK(nearest_rank(v, 0) == 1);
    CHECK(nearest_rank(v, 100'000) == 1);
    CHECK(nearest_rank(v, 100'001) == 2);
    // 1000 samples 1..1000: p99 = 990, p99.9 = 999, p99.99 = 1000.
    std::vector<double> w;
    for (int i = 1; i <= 1000; ++i) w.push_back(i);
    CHECK(nearest_rank(w, 990'000) == 990);
    CHECK(nearest_rank(w, 999'000) == 999);
    CHECK(nearest_rank(w, 999'900) == 1000);
    CHECK(nearest_rank(std::vector<double>{7}, 999'900) == 7);
}

TEST_CASE("percentiles, median, mean and stdev of random sets against naive formulas") {
    for (std::size_t n : {1u, 2u, 3u, 10u, 99u, 100u, 101u, 1000u, 4097u}) {
        const std::vector<double> v = random_sorted(n, static_cast<std::uint32_t>(n));
        for (std::uint32_t ppm : {500'000u, 900'000u, 990'000u, 999'000u, 999'900u})
            CHECK(nearest_rank(v, ppm) == by_counting(v, ppm / 1e6));
        const double naive_median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        CHECK(median(v) == naive_median);

        long double sum = 0, sum_sq = 0;
        for (double x : v) {
            sum += x;
            sum_sq += static_cast<long double>(x) * x;
        }
        const long double mean = sum / n;
        const double stdev = static_cast<double>(std::sqrt(std::max(0.0L, sum_sq / n - mean * mean)));
        const auto [m, s] = mean_stdev(v);
        CHECK(m == doctest::Approx(static_cast<double>(mean)).epsilon(1e-12));
        CHECK(s == doctest::Approx(stdev).epsilon(1e-9));
    }
    // A set with a known answer: 2, 4, 4, 4, 5, 5, 7, 9 has mean 5 and stdev 2.
    const auto [m, s] = mean_stdev({2, 4, 4, 4, 5, 5, 7, 9});
    CHECK(m == 5);
    CHECK(s == 2);
}

TEST_CASE("log buckets: 8 per power of two, edges exact at powers of two") {
    CHECK(log_bucket(1.0) == 0);
    CHECK(log_bucket(2.0) == 8);
    CHECK(log_bucket(0.5) == -8);
    CHECK(log_bucket(std::nextafter(2.0, 0.0)) == 7);
    CHECK(log_bucket(1024.0) == 80);
    CHECK(log_bucket(0.0) == kLowestBucket);
    CHECK(log_bucket(-1.0) == kLowestBucket);
    for (double x = 1e-3; x < 1e7; x *= 1.0137) {
        const int k = log_bucket(x);
        CHECK(log_bucket_lower(k) <= x);
        CHECK(x < log_bucket_lower(k + 1));
        CHECK(log_bucket_lower(k + 1) / log_bucket_lower(k) == doctest::Approx(std::exp2(1.0 / 8)));
    }
}

TEST_CASE("histogram: counts sum to the samples, each sample in its bucket, only the non-empty range") {
    for (std::size_t n : {1u, 5u, 1000u, 20000u}) {
        std::vector<double> v = random_sorted(n, 42 + static_cast<std::uint32_t>(n));
        v.push_back(0);  // a zero sample goes to the lowest bucket
        const log_histogram h = make_log_histogram(v);
        REQUIRE(h.lower_us.size() == h.count.size() + 1);
        std::uint64_t total = 0;
        for (auto c : h.count) total += c;
        CHECK(total == v.size());
        CHECK(h.count.front() > 0);
        CHECK(h.count.back() > 0);
        // Brute force: count the samples inside each bucket's edges.
        for (std::size_t k = 0; k < h.count.size(); ++k) {
            const auto inside = std::count_if(v.begin(), v.end(),
                                              [&](double x) { return x >= h.lower_us[k] && x < h.lower_us[k + 1]; });
            CHECK(static_cast<std::uint64_t>(inside) == h.count[k]);
        }
    }
    CHECK(make_log_histogram({}).count.empty());
}

TEST_CASE("compute_latency: ticks to µs, halved round trips, every figure") {
    latency_sample_set s;
    s.bytes = 64;
    // 1 GHz: one tick = 1 ns. Samples 1000..1999 ns (shuffled), halved: 0.5..0.9995 µs.
    for (int i = 0; i < 1000; ++i) s.samples.push_back(1000 + (i * 7919) % 1000);
    s.round_trip_halved = true;
    const latency_figures f = compute_latency(s, 1e9);
    CHECK(f.bytes == 64);
    CHECK(f.iterations == 1000);
    CHECK(f.min == doctest::Approx(0.5));
    CHECK(f.max == doctest::Approx(0.9995));
    CHECK(f.typical == doctest::Approx((0.7495 + 0.75) / 2));
    CHECK(f.avg == doctest::Approx(0.74975));
    CHECK(f.p50 == doctest::Approx(0.7495));
    CHECK(f.p90 == doctest::Approx(0.9495));
    CHECK(f.p99 == doctest::Approx(0.9945));
    CHECK(f.p999 == doctest::Approx(0.999));
    CHECK(f.p9999 == doctest::Approx(0.9995));
    // Uniform on 1000 points spaced 0.0005 µs: stdev = 0.0005 * sqrt((1000^2 - 1) / 12).
    CHECK(f.stdev == doctest::Approx(0.0005 * std::sqrt((1e6 - 1) / 12)));
    std::uint64_t total = 0;
    for (auto c : f.bucket_count) total += c;
    CHECK(total == 1000);

    s.round_trip_halved = false;
    CHECK(compute_latency(s, 1e9).min == doctest::Approx(1.0));
    s.iterations = 1001;  // as perftest: the iterations run, one more than the samples
    CHECK(compute_latency(s, 1e9).iterations == 1001);
    CHECK(compute_latency(s, 2e9).min == doctest::Approx(0.5));
}

TEST_CASE("compute_bandwidth: perftest's units (MB = 2^20 bytes, Gb = 10^9 bits)") {
    bandwidth_sample_set s;
    s.bytes = 65536;
    s.iterations = 100000;
    s.ticks = 2'000'000'000;  // 1 s at 2 GHz
    s.min_ticks_per_iteration = 10'000;
    const bandwidth_figures f = compute_bandwidth(s, 2e9);
    CHECK(f.avg_mb_s == doctest::Approx(65536.0 * 100000 / 1048576));
    CHECK(f.avg_gbit_s == doctest::Approx(65536.0 * 100000 * 8 / 1e9));
    CHECK(f.msg_rate_mpps == doctest::Approx(0.1));
    // Peak: one message of 65536 bytes in 10000 ticks = 5 µs.
    CHECK(f.peak_mb_s == doctest::Approx(65536.0 / 5e-6 / 1048576));
    CHECK(f.peak_gbit_s == doctest::Approx(65536.0 * 8 / 5e-6 / 1e9));
    s.min_ticks_per_iteration = 0;
    CHECK(compute_bandwidth(s, 2e9).peak_mb_s == compute_bandwidth(s, 2e9).avg_mb_s);
    s.ticks = 0;
    CHECK(compute_bandwidth(s, 2e9).avg_mb_s == 0);
}
