// The pcap writer from several threads, read back; a file cut short still reads.
#include "sim/wire/pcap.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

namespace cxv::sim::wire {
namespace {

std::string temp_path(const char* name) {
    const char* dir = std::getenv("TEST_TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/" + name + "-" + std::to_string(::getpid()) + ".pcap";
}

// Frame i of thread t: its length and bytes say who wrote it.
std::vector<std::byte> frame_of(int t, int i) {
    std::vector<std::byte> f(static_cast<std::size_t>(60 + (i * 37 + t) % 1500));
    for (std::size_t k = 0; k < f.size(); ++k) f[k] = std::byte(static_cast<std::uint8_t>(t * 31 + i + k));
    f[0] = std::byte(static_cast<std::uint8_t>(t));
    f[1] = std::byte(static_cast<std::uint8_t>(i));
    f[2] = std::byte(static_cast<std::uint8_t>(i >> 8));
    return f;
}

TEST_CASE("frames written by four threads all read back whole, with their timestamps") {
    const std::string path = temp_path("pcap_threads");
    constexpr int threads = 4, per_thread = 300;
    {
        auto w = pcap_writer::open(path, pcap_link::ethernet);
        REQUIRE_MESSAGE(w.ok(), w.error().message);
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t) {
            ts.emplace_back([&, t] {
                for (int i = 0; i < per_thread; ++i) {
                    const auto when = std::chrono::system_clock::time_point(std::chrono::microseconds(
                        std::int64_t{1700000000} * 1000000 + t * 1000 + i));
                    CHECK((*w)->write(frame_of(t, i), when));
                }
            });
        }
        for (auto& t : ts) t.join();
    }
    auto f = read_pcap(path);
    REQUIRE_MESSAGE(f.ok(), f.error().message);
    CHECK(f->link_type == 1);
    CHECK(!f->nanoseconds);
    REQUIRE(f->records.size() == threads * per_thread);
    std::map<std::pair<int, int>, int> seen;
    for (const pcap_record& r : f->records) {
        REQUIRE(r.data.size() >= 3);
        const int t = static_cast<int>(r.data[0]);
        const int i = static_cast<int>(r.data[1]) | static_cast<int>(r.data[2]) << 8;
        CHECK(r.data == frame_of(t, i));
        CHECK(r.orig_len == r.data.size());
        CHECK(r.ts_sec == 1700000000u);
        CHECK(r.ts_frac == static_cast<std::uint32_t>(t * 1000 + i));
        ++seen[{t, i}];
    }
    CHECK(seen.size() == threads * per_thread);
    std::filesystem::remove(path);
}

TEST_CASE("each record reaches the file as written; a file cut mid-record reads to its last whole record") {
    const std::string path = temp_path("pcap_cut");
    auto w = pcap_writer::open(path, pcap_link::infiniband_erf, 100);
    REQUIRE(w.ok());
    std::vector<std::byte> big(150, std::byte{0x5a});
    REQUIRE((*w)->write(big));
    REQUIRE((*w)->write(std::vector<std::byte>(40, std::byte{1})));
    // Still open: what a killed process would leave.
    const auto size = std::filesystem::file_size(path);
    CHECK(size == 24 + 16 + 100 + 16 + 16 + 40);
    auto f = read_pcap(path);
    REQUIRE(f.ok());
    CHECK(f->link_type == 197);
    CHECK(f->snaplen == 100);
    REQUIRE(f->records.size() == 2);
    CHECK(f->records[0].data.size() == 100 - 16);  // cut to snaplen, with the ERF header
    CHECK(f->records[0].orig_len == 150);
    std::filesystem::resize_file(path, size - 1);
    f = read_pcap(path);
    REQUIRE(f.ok());
    CHECK(f->records.size() == 1);
    (*w)->close();
    CHECK(!(*w)->write(big));
    CHECK(!read_pcap(path + ".absent").ok());
    CHECK(!pcap_writer::open("/nonexistent-dir/x.pcap", pcap_link::ethernet).ok());
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace cxv::sim::wire
