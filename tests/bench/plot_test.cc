// report::write_plot: a real SVG and PNG from gnuplot, and the errors a user sees.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include <doctest/doctest.h>

#include "bench/perf/report.h"
#include "tests/skip.h"

using namespace cxv::perf;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Two sizes of a ping-pong test at 2 GHz with a long tail (and one zero-tick sample).
report two_sizes() {
    run_config c;
    c.test = "send_lat";
    c.connection = "RC";
    c.device = "0000:03:00.0 'quoted'";
    c.tsc_hz = 2e9;
    report r(c);
    std::FILE* null = std::fopen("/dev/null", "w");
    for (std::size_t bytes : {2, 4096}) {
        latency_sample_set s;
        s.bytes = bytes;
        s.round_trip_halved = true;
        for (std::uint64_t i = 0; i < 20000; ++i)
            s.samples.push_back(4000 + bytes + (i * i) % 997 + (i % 1000 == 0 ? 90000 : 0));
        s.samples.push_back(0);
        r.add(null, s);
    }
    std::fclose(null);
    return r;
}

}  // namespace

TEST_CASE("an SVG and a PNG of the CDF and the histogram") {
    if (!cxv::test::on_path("gnuplot")) {
        // Not silent: the missing tool is the test's finding (tools/setup installs it).
        FAIL_CHECK("gnuplot is not installed (Debian: gnuplot-nox; tools/setup installs it)");
        return;
    }
    char dir[] = "/tmp/cxv-plot-test-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const report r = two_sizes();
    std::string error;

    const std::string svg = std::string(dir) + "/lat.svg";
    REQUIRE_MESSAGE(r.write_plot(svg, &error), error);
    const std::string text = slurp(svg);
    CHECK((text.rfind("<?xml", 0) == 0 || text.rfind("<svg", 0) == 0));
    CHECK(text.find("</svg>") != std::string::npos);
    CHECK(text.find("<path") != std::string::npos);
    CHECK(text.find("4096 B") != std::string::npos);  // both sizes in the key
    CHECK(text.find("2 B") != std::string::npos);

    const std::string png = std::string(dir) + "/lat.png";
    REQUIRE_MESSAGE(r.write_plot(png, &error), error);
    const std::string bytes = slurp(png);
    CHECK(bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
    CHECK(bytes.size() > 1000);

    std::remove(svg.c_str());
    std::remove(png.c_str());
    rmdir(dir);
}

TEST_CASE("every size of -a (23) has a colour of its own") {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < 23; ++i) {
        const std::string c = plot_colour(i, 23);
        CHECK(c.size() == 7);
        CHECK(c[0] == '#');
        seen.insert(c);
    }
    CHECK(seen.size() == 23);
    // Neighbours differ in more than a shade: at least 64 apart in some channel.
    for (std::size_t i = 1; i < 23; ++i) {
        const auto a = std::stoul(plot_colour(i - 1, 23).substr(1), nullptr, 16);
        const auto b = std::stoul(plot_colour(i, 23).substr(1), nullptr, 16);
        int most = 0;
        for (int shift : {0, 8, 16}) {
            const int d = std::abs(static_cast<int>((a >> shift) & 0xff) - static_cast<int>((b >> shift) & 0xff));
            most = std::max(most, d);
        }
        CHECK_MESSAGE(most >= 64, i);
    }
    // And gnuplot draws with them: both of two_sizes' colours are in the SVG.
    if (!cxv::test::on_path("gnuplot")) {
        FAIL_CHECK("gnuplot is not installed (Debian: gnuplot-nox; tools/setup installs it)");
        return;
    }
    char dir[] = "/tmp/cxv-plot-test-XXXXXX";
    REQUIRE(mkdtemp(dir));
    std::string error;
    const std::string svg = std::string(dir) + "/lat.svg";
    REQUIRE_MESSAGE(two_sizes().write_plot(svg, &error), error);
    const std::string text = slurp(svg);
    for (std::size_t i = 0; i < 2; ++i) {
        const auto hex = std::stoul(plot_colour(i, 2).substr(1), nullptr, 16);
        char rgb[32];  // gnuplot's SVG writes rgb(%3d, %3d, %3d)
        std::snprintf(rgb, sizeof rgb, "rgb(%3lu, %3lu, %3lu)", (hex >> 16) & 0xff, (hex >> 8) & 0xff, hex & 0xff);
        CHECK_MESSAGE(text.find(rgb) != std::string::npos, std::string(rgb));
    }
    std::remove(svg.c_str());
    rmdir(dir);
}

TEST_CASE("write_plot errors: no data, a wrong suffix, gnuplot missing") {
    std::string error;
    report empty(run_config{});
    CHECK_FALSE(empty.write_plot("/tmp/x.svg", &error));
    CHECK(error.find("no latency data") != std::string::npos);

    const report r = two_sizes();
    CHECK_FALSE(r.write_plot("/tmp/x.pdf", &error));
    CHECK(error.find(".svg or .png") != std::string::npos);

    // No gnuplot on PATH: a clear message, and no file.
    char dir[] = "/tmp/cxv-plot-nogp-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const char* old = getenv("PATH");
    const std::string saved = old ? old : "";
    setenv("PATH", dir, 1);
    const std::string out = std::string(dir) + "/lat.svg";
    const bool ok = r.write_plot(out, &error);
    setenv("PATH", saved.c_str(), 1);
    CHECK_FALSE(ok);
    CHECK(error.find("gnuplot not found") != std::string::npos);
    CHECK(error.find("gnuplot-nox") != std::string::npos);
    struct stat st {};
    CHECK(stat(out.c_str(), &st) != 0);

    // A "gnuplot" that fails: its status and its stderr are in the message.
    const std::string fake = std::string(dir) + "/gnuplot";
    {
        std::ofstream f(fake);
        f << "#!/bin/sh\necho 'line 3: no such terminal' >&2\nexit 3\n";
    }
    chmod(fake.c_str(), 0755);
    setenv("PATH", dir, 1);
    const bool ok2 = r.write_plot(out, &error);
    setenv("PATH", saved.c_str(), 1);
    CHECK_FALSE(ok2);
    CHECK(error.find("exited with status 3") != std::string::npos);
    CHECK(error.find("no such terminal") != std::string::npos);
    CHECK(stat(out.c_str(), &st) != 0);  // nothing half-written left
    std::remove(fake.c_str());
    std::remove(out.c_str());
    rmdir(dir);
}
