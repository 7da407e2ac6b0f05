// bench/perf/report: perftest's tables (checked against the format strings inside
// Debian's perftest binaries where they are installed, and against literals taken from
// perftest 4.5's sources), rows parsed back into the figures, and the JSON file.
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "bench/perf/report.h"
#include "tests/bench/json_parse.h"

using namespace cxv::perf;

namespace {

// Everything a report prints to a FILE*, as a string.
class capture {
public:
    capture() : f_(open_memstream(&buf_, &len_)) {}
    ~capture() {
        if (f_) std::fclose(f_);
        std::free(buf_);
    }
    std::FILE* file() { return f_; }
    std::string text() {
        std::fflush(f_);
        return std::string(buf_, len_);
    }

private:
    char* buf_ = nullptr;
    std::size_t len_ = 0;
    std::FILE* f_;
};

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// The NUL-terminated strings inside a perftest binary (its printf formats among them);
// empty when perftest is not installed.
std::set<std::string> binary_strings(const char* path) {
    std::ifstream in(path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::set<std::string> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i < data.size(); ++i)
        if (data[i] == '\0') {
            if (i - start >= 4) out.insert(data.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

// fmt is one of perftest's formats in that binary (printf("...\n") without a conversion
// is compiled to puts("..."), so a trailing newline may be missing there).
bool in_binary(const std::set<std::string>& strings, const std::string& fmt) {
    if (strings.count(fmt)) return true;
    return !fmt.empty() && fmt.back() == '\n' && strings.count(fmt.substr(0, fmt.size() - 1));
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

// perftest's formats, from perftest 4.5's src/perftest_parameters.h and
// src/perftest_communication.h (the row formats with a trailing newline: perftest prints
// it separately, as REPORT_EXT).
const char* const kDashes = "---------------------------------------------------------------------------------------\n";
const char* const kLatColumns =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% "
    "percentile[usec]   99.9% percentile[usec] ";
const char* const kBwColumns = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const char* const kBwColumnsG = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
const char* const kLatRow =
    " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f";
const char* const kBwRow = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf";

run_config client_send_lat() {
    run_config c;
    c.test = "send_lat";
    c.connection = "RC";
    c.device = "0000:03:00.0";
    c.link_layer = "Ethernet";
    c.tsc_hz = 2e9;
    c.mtu = 1024;
    c.qps = 1;
    c.tx_depth = 1;
    c.rx_depth = 512;
    c.inline_size = 236;
    c.gid_index = 3;
    return c;
}

latency_sample_set ramp(std::size_t bytes, std::uint64_t first, std::size_t n, bool halved) {
    latency_sample_set s;
    s.bytes = bytes;
    s.round_trip_halved = halved;
    for (std::size_t i = 0; i < n; ++i) s.samples.push_back(first + (i * 37) % n * 3);
    return s;
}

}  // namespace

TEST_CASE("the column lines are perftest's, character for character") {
    const auto lat = binary_strings("/usr/bin/ib_send_lat");
    const auto bw = binary_strings("/usr/bin/ib_send_bw");
    if (lat.empty() || bw.empty()) {
        MESSAGE("perftest is not installed: checked against the literals only");
    } else {
        CHECK(lat.count(kLatColumns));
        CHECK(bw.count(kBwColumns));
        CHECK(bw.count(kBwColumnsG));
        CHECK(lat.count(kLatRow));
        CHECK(bw.count(kBwRow));
    }

    for (bool gbits : {false, true}) {
        run_config c = client_send_lat();
        c.test = "write_bw";
        c.report_gbits = gbits;
        report r(c);
        capture out;
        r.print_columns(out.file());
        r.print_columns(out.file());  // once only
        CHECK(out.text() == std::string(kDashes) + (gbits ? kBwColumnsG : kBwColumns) + "\n");
    }
    report r(client_send_lat());
    capture out;
    r.add(out.file(), ramp(2, 1000, 100, true));  // the first row brings the column line
    const auto l = lines(out.text());
    REQUIRE(l.size() == 4);
    CHECK(l[0] + "\n" == kDashes);
    CHECK(l[1] == kLatColumns);
}

TEST_CASE("the header block of a send_lat client, as perftest prints it") {
    const auto bin = binary_strings("/usr/bin/ib_send_lat");
    // perftest's formats, each with our values; each format is checked to be in the
    // binary when perftest is installed.
    struct line {
        const char* fmt;
        std::string text;
    };
    const std::vector<line> expected = {
        {kDashes, kDashes},
        {nullptr, "                    Send Latency Test\n"},
        {" Dual-port       : %s\t\tDevice         : %s\n",
         format(" Dual-port       : %s\t\tDevice         : %s\n", "OFF", "0000:03:00.0")},
        {" Number of qps   : %d\t\tTransport type : %s\n",
         format(" Number of qps   : %d\t\tTransport type : %s\n", 1, "IB")},
        {" Connection type : %s\t\tUsing SRQ      : %s\n",
         format(" Connection type : %s\t\tUsing SRQ      : %s\n", "RC", "OFF")},
        {" PCIe relax order: %s\n", format(" PCIe relax order: %s\n", "OFF")},
        {" ibv_wr* API     : %s\n", format(" ibv_wr* API     : %s\n", "OFF")},
        {" TX depth        : %d\n", format(" TX depth        : %d\n", 1)},
        {" Mtu             : %lu[B]\n", format(" Mtu             : %lu[B]\n", 1024ul)},
        {" Link type       : %s\n", format(" Link type       : %s\n", "Ethernet")},
        {" GID index       : %d\n", format(" GID index       : %d\n", 3)},
        {" Max inline data : %d[B]\n", format(" Max inline data : %d[B]\n", 236)},
        {" rdma_cm QPs\t : %s\n", format(" rdma_cm QPs\t : %s\n", "OFF")},
        {" Data ex. method : %s", format(" Data ex. method : %s\n", "Ethernet")},
        {kDashes, kDashes},
    };
    std::string want;
    for (const line& l : expected) {
        want += l.text;
        if (l.fmt && !bin.empty()) {
            INFO("format: ", l.fmt);
            CHECK(in_binary(bin, l.fmt));
        }
    }
    report r(client_send_lat());
    capture out;
    r.print_header(out.file());
    CHECK(out.text() == want);

    // The server of send_lat shows its RX depth instead of the TX depth; a bandwidth
    // test its CQ moderation and "BW"; a read test its outstanding reads.
    run_config c = client_send_lat();
    c.server = true;
    capture server;
    report(c).print_header(server.file());
    CHECK(server.text().find(" TX depth") == std::string::npos);
    CHECK(server.text().find(" RX depth        : 512\n") != std::string::npos);
    c = client_send_lat();
    c.test = "write_bw";
    c.cq_moderation = 100;
    c.bidirectional = true;
    capture bw;
    report(c).print_header(bw.file());
    CHECK(lines(bw.text())[1] == "                    RDMA_Write Bidirectional BW Test");
    CHECK(bw.text().find(" CQ Moderation   : 100\n") != std::string::npos);
    c = client_send_lat();
    c.test = "read_lat";
    c.out_reads = 16;
    c.link_layer = "InfiniBand";
    c.gid_index = -1;
    capture rd;
    report(c).print_header(rd.file());
    CHECK(lines(rd.text())[1] == "                    RDMA_Read Latency Test");
    CHECK(rd.text().find(" Outstand reads  : 16\n") != std::string::npos);
    CHECK(rd.text().find(" Max inline") == std::string::npos);
    CHECK(rd.text().find(" Link type       : IB\n") != std::string::npos);
    CHECK(rd.text().find(" GID index") == std::string::npos);
}

TEST_CASE("the server's banner, as perftest prints it") {
    report r(client_send_lat());
    capture out;
    r.print_waiting_for_client(out.file());
    CHECK(out.text() ==
          "\n************************************\n* Waiting for client to connect... *\n"
          "************************************\n");
    const auto bin = binary_strings("/usr/bin/ib_send_lat");
    if (!bin.empty()) CHECK(in_binary(bin, "* Waiting for client to connect... *\n"));
}

TEST_CASE("address lines, as perftest prints them") {
    const std::uint8_t raw[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 192, 168, 1, 7};
    const std::string gid = perftest_gid(raw);
    CHECK(gid == "00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:07");
    report r(client_send_lat());
    capture out;
    r.print_address(out.file(), "local", 0, 0x11, 0x5d3a1, 0x1234, 0x7f0000001000, gid);
    CHECK(out.text() == " local address: LID 0000 QPN 0x0011 PSN 0x5d3a1\n GID: " + gid + "\n");
    run_config c = client_send_lat();
    c.test = "write_lat";
    c.gid_index = -1;
    capture w;
    report(c).print_address(w.file(), "remote", 1, 0x11, 0x22, 0x1234, 0x7f0000001000, gid);
    CHECK(w.text() == " remote address: LID 0x01 QPN 0x0011 PSN 0x0022 RKey 0x001234 VAddr 0x007f0000001000\n");
    const auto bin = binary_strings("/usr/bin/ib_write_lat");
    if (!bin.empty()) {
        CHECK(bin.count(" %s address: LID %#04x QPN %#06x PSN %#06x"));
        CHECK(bin.count(" RKey %#08x VAddr %#016llx"));
    }
}

TEST_CASE("latency rows: perftest's format, parsed back into the figures, then the percentile line") {
    report r(client_send_lat());
    capture out;
    for (std::size_t bytes : {2, 64, 4096}) r.add(out.file(), ramp(bytes, 1000 * (bytes + 1), 1000, true));
    r.print_footer(out.file());
    const auto l = lines(out.text());
    REQUIRE(l.size() == 2 + 2 * 3 + 1);
    CHECK(l.back() + "\n" == kDashes);
    REQUIRE(r.latency().size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        const latency_figures& f = r.latency()[i];
        const std::string& row = l[2 + 2 * i];
        // The row perftest's own format prints for these figures.
        CHECK(row == format(kLatRow, static_cast<unsigned long>(f.bytes), static_cast<unsigned long>(f.iterations),
                            f.min, f.max, f.typical, f.avg, f.stdev, f.p99, f.p999));
        unsigned long bytes = 0, iters = 0;
        double v[7];
        REQUIRE(std::sscanf(row.c_str(), "%lu %lu %lf %lf %lf %lf %lf %lf %lf", &bytes, &iters, &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6]) == 9);
        CHECK(bytes == f.bytes);
        CHECK(iters == 1000);
        const double want[7] = {f.min, f.max, f.typical, f.avg, f.stdev, f.p99, f.p999};
        for (int k = 0; k < 7; ++k)
            CHECK(v[k] == doctest::Approx(want[k]).epsilon(0).scale(0).epsilon(0.00501 / std::max(want[k], 1e-9)));
        // Samples (1000*(bytes+1) + 3k) ticks at 2 GHz, halved: min = 250*(bytes+1) ns.
        CHECK(f.min == doctest::Approx(0.25 * static_cast<double>(bytes + 1)));
        CHECK(f.max == doctest::Approx(0.25 * static_cast<double>(bytes + 1) + 999 * 3 / 4e3));

        const std::string& pct = l[3 + 2 * i];
        unsigned long pbytes = 0;
        double p[6];
        REQUIRE(std::sscanf(pct.c_str(),
                            " # cxv percentiles[usec] %lu bytes: p50=%lf p90=%lf p99=%lf p99.9=%lf p99.99=%lf max=%lf",
                            &pbytes, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5]) == 7);
        CHECK(pbytes == f.bytes);
        const double pw[6] = {f.p50, f.p90, f.p99, f.p999, f.p9999, f.max};
        for (int k = 0; k < 6; ++k) CHECK(std::fabs(p[k] - pw[k]) <= 0.00501);
    }
}

TEST_CASE("bandwidth rows: perftest's format (MB/sec and Gb/sec), parsed back") {
    bandwidth_sample_set s;
    s.bytes = 65536;
    s.iterations = 5000;
    s.ticks = 2'000'000'000 / 100;  // 10 ms at 2 GHz
    s.min_ticks_per_iteration = 2000;
    for (bool gbits : {false, true}) {
        run_config c = client_send_lat();
        c.test = "send_bw";
        c.report_gbits = gbits;
        report r(c);
        capture out;
        r.add(out.file(), s);
        const auto l = lines(out.text());
        REQUIRE(l.size() == 3);
        const bandwidth_figures& f = r.bandwidth().at(0);
        const double peak = gbits ? f.peak_gbit_s : f.peak_mb_s, avg = gbits ? f.avg_gbit_s : f.avg_mb_s;
        CHECK(l[2] == format(kBwRow, 65536ul, 5000ul, peak, avg, f.msg_rate_mpps));
        unsigned long bytes = 0, iters = 0;
        double v[3];
        REQUIRE(std::sscanf(l[2].c_str(), "%lu %lu %lf %lf %lf", &bytes, &iters, &v[0], &v[1], &v[2]) == 5);
        CHECK(bytes == 65536);
        CHECK(iters == 5000);
        // 5000 x 64 KiB in 10 ms: 31250 MB/s (2^20) or 262.144 Gb/s; 0.5 Mpps; peak 1 µs/msg.
        CHECK(v[1] == doctest::Approx(gbits ? 262.14 : 31250.00).epsilon(1e-6));
        CHECK(v[0] == doctest::Approx(gbits ? 524.29 : 62500.00).epsilon(1e-6));
        CHECK(v[2] == doctest::Approx(0.5));
    }
}

TEST_CASE("the JSON file: valid, every figure, the histogram, the whole configuration") {
    run_config c = client_send_lat();
    c.cpu = "AMD EPYC \"quoted\"\\ and a\ttab\x01";  // must be escaped
    c.firmware = "28.39.1002";
    c.model = true;
    report r(c);
    capture out;
    r.add(out.file(), ramp(8, 2000, 500, true));
    r.add(out.file(), ramp(1024, 9000, 700, false));
    bandwidth_sample_set b;
    b.bytes = 4096;
    b.iterations = 100;
    b.ticks = 1'000'000;
    r.add(out.file(), b);

    char dir[] = "/tmp/cxv-json-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string path = std::string(dir) + "/r.json";
    std::string error;
    REQUIRE(r.write_json(path, &error));
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

    cxv::test::json_value doc;
    cxv::test::json_parser parser(text);
    INFO(text.substr(0, 2000));
    REQUIRE_MESSAGE(parser.parse(&doc), parser.error());

    // Python's json module agrees, where Python is installed.
    if (access("/usr/bin/python3", X_OK) == 0) {
        const auto json_tool = [](const std::string& file) {
            const pid_t pid = fork();
            if (pid == 0) {
                const int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                dup2(null, 2);
                execl("/usr/bin/python3", "python3", "-m", "json.tool", file.c_str(), static_cast<char*>(nullptr));
                _exit(127);
            }
            int status = -1;
            waitpid(pid, &status, 0);
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        };
        CHECK(json_tool(path) == 0);
        std::ofstream(std::string(dir) + "/bad.json") << "{\"a\": [1, 2,]}";
        CHECK(json_tool(std::string(dir) + "/bad.json") != 0);  // the check can fail
    } else {
        MESSAGE("no /usr/bin/python3: JSON checked by the test's own parser only");
    }
    cxv::test::json_value bad;
    CHECK_FALSE(cxv::test::json_parser("{\"a\": [1, 2,]}").parse(&bad));
    CHECK_FALSE(cxv::test::json_parser("{\"a\": \"x\ty\"}").parse(&bad));

    const auto* config = doc.get("config");
    REQUIRE(config);
    CHECK(config->get("cpu")->string == c.cpu);
    CHECK(config->get("firmware")->string == "28.39.1002");
    CHECK(config->get("tsc_hz")->number == 2e9);
    CHECK(config->get("model")->boolean);
    CHECK(config->get("gid_index")->number == 3);
    for (const char* key : {"test",      "connection",    "device",      "firmware",      "link_layer",
                            "cpu",       "tsc_hz",        "cxv_version", "model",         "port",
                            "mtu",       "qps",           "tx_depth",    "rx_depth",      "inline_size",
                            "post_list", "cq_moderation", "events",      "bidirectional", "report_gbits",
                            "gid_index", "server",        "out_reads",   "atomic_type",   "relaxed_ordering"}) {
        INFO(key);
        CHECK(config->get(key));
    }

    const auto* lat = doc.get("latency");
    REQUIRE(lat);
    REQUIRE(lat->array.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
        const latency_figures& f = r.latency()[i];
        const auto& j = lat->array[i];
        CHECK(j.get("bytes")->number == f.bytes);
        CHECK(j.get("iterations")->number == f.iterations);
        CHECK(j.get("round_trip_halved")->boolean == f.round_trip_halved);
        const std::pair<const char*, double> figures[] = {
            {"t_min_us", f.min},     {"t_max_us", f.max},   {"t_typical_us", f.typical}, {"t_avg_us", f.avg},
            {"t_stdev_us", f.stdev}, {"p50_us", f.p50},     {"p90_us", f.p90},           {"p99_us", f.p99},
            {"p99_9_us", f.p999},    {"p99_99_us", f.p9999}};
        for (const auto& [key, value] : figures) {
            INFO(key);
            REQUIRE(j.get(key));
            CHECK(j.get(key)->number == value);  // shortest round-trip form: exact
        }
        const auto* buckets = j.get("histogram")->get("buckets");
        REQUIRE(buckets);
        REQUIRE(buckets->array.size() == f.bucket_count.size());
        double total = 0;
        for (std::size_t k = 0; k < f.bucket_count.size(); ++k) {
            CHECK(buckets->array[k].get("lower_us")->number == f.bucket_lower_us[k]);
            CHECK(buckets->array[k].get("upper_us")->number == f.bucket_lower_us[k + 1]);
            total += buckets->array[k].get("count")->number;
        }
        CHECK(total == f.iterations);
    }
    const auto* bw = doc.get("bandwidth");
    REQUIRE(bw);
    REQUIRE(bw->array.size() == 1);
    CHECK(bw->array[0].get("bw_avg_mb_s")->number == r.bandwidth()[0].avg_mb_s);
    CHECK(bw->array[0].get("msg_rate_mpps")->number == r.bandwidth()[0].msg_rate_mpps);
    CHECK(bw->array[0].get("bw_peak_gbit_s")->number == r.bandwidth()[0].peak_gbit_s);

    // An unwritable path is reported.
    CHECK_FALSE(r.write_json(std::string(dir) + "/no/such/dir/r.json", &error));
    CHECK(error.find("No such file") != std::string::npos);

    std::remove(path.c_str());
    std::remove((std::string(dir) + "/bad.json").c_str());
    rmdir(dir);
}
