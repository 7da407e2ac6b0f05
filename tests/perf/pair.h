// cxv-perf's two-process runs on the model, for the tests of this package: server and
// client each under its own `cxv-sim run --fabric DIR`, and the checks of their tables.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace cxv::test::perf {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct outcome {
    int server = -1, client = -1;
    std::string server_out, server_err, client_out, client_err;
};

// cxv-perf ARGS as server (fabric place 0) and ARGS + 127.0.0.1 as client (place 1).
inline outcome run_pair(const std::vector<std::string>& args, const std::vector<std::string>& client_extra = {},
                 const std::vector<std::string>& client_sim = {}, const std::string& port_type = "ib",
                 std::chrono::seconds limit = 60s) {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const std::string port = std::to_string(free_port());
    auto start = [&](unsigned index, bool client) {
        std::vector<std::string> argv = {sim, "run", "--fabric", fabric, "--port-type", port_type, "--set",
                                         "fabric_index=" + std::to_string(index), "--link-up-ms", "20"};
        if (client) argv.insert(argv.end(), client_sim.begin(), client_sim.end());
        argv.push_back("--");
        argv.push_back(perf);
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"-d", bdf_at(sim, fabric, index), "-p", port});
        if (client) {
            argv.insert(argv.end(), client_extra.begin(), client_extra.end());
            argv.push_back("127.0.0.1");
        }
        const std::string base = s.dir + (client ? "/client" : "/server");
        return std::make_unique<child>(argv, base + ".out", base + ".err");
    };
    auto server = start(0, false);
    auto client = start(1, true);
    const auto deadline = clock_type::now() + limit;
    outcome o;
    o.client = client->wait(deadline);
    o.server = server->wait(deadline);
    o.server_out = slurp(server->log);
    o.server_err = slurp(server->err);
    o.client_out = slurp(client->log);
    o.client_err = slurp(client->err);
    return o;
}

inline std::vector<std::string> split_ws(const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> f;
    std::string w;
    while (in >> w) f.push_back(w);
    return f;
}

inline bool is_number(const std::string& w) {
    char* end = nullptr;
    std::strtod(w.c_str(), &end);
    return !w.empty() && *end == '\0';
}

// The table's rows: lines of exactly `columns` numbers.
inline std::vector<std::vector<double>> rows_of(const std::string& out, std::size_t columns) {
    std::vector<std::vector<double>> rows;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        const auto f = split_ws(line);
        if (f.size() != columns) continue;
        bool all = true;
        for (const auto& w : f) all = all && is_number(w);
        if (!all) continue;
        std::vector<double> r;
        for (const auto& w : f) r.push_back(std::strtod(w.c_str(), nullptr));
        rows.push_back(r);
    }
    return rows;
}

inline void check_latency_rows(const std::string& out, const std::vector<double>& sizes, double iterations) {
    INFO("client output:\n" << out);
    CHECK(out.find("#bytes") != std::string::npos);
    CHECK(out.find("t_typical[usec]") != std::string::npos);
    const auto rows = rows_of(out, 9);  // #bytes #iterations min max typical avg stdev 99% 99.9%
    REQUIRE(rows.size() == sizes.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        CHECK(r[0] == sizes[i]);
        CHECK(r[1] == iterations);
        CHECK(r[2] > 0);
        CHECK(r[2] <= r[4]);  // min <= typical
        CHECK(r[4] <= r[3]);  // typical <= max
        CHECK(r[2] <= r[5]);  // min <= avg <= max
        CHECK(r[5] <= r[3]);
        CHECK(r[6] >= 0);
        CHECK(r[7] <= r[3]);  // 99 % <= max
    }
}

inline void check_bandwidth_rows(const std::string& out, const std::vector<double>& sizes, double iterations) {
    INFO("client output:\n" << out);
    CHECK(out.find("BW average[MB/sec]") != std::string::npos);
    const auto rows = rows_of(out, 5);  // #bytes #iterations peak average MsgRate
    REQUIRE(rows.size() == sizes.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        CHECK(r[0] == sizes[i]);
        CHECK(r[1] == iterations);
        CHECK(r[4] > 0);              // the message rate (MB/s may round to 0.00 for 2 bytes)
        CHECK(r[3] >= 0);
        CHECK(r[2] >= r[3] * 0.999);  // peak >= average
        // MB/s = bytes * Mpps * 10^6 / 2^20, to the table's rounding
        const double mb = r[0] * r[4] * 1e6 / 1048576.0;
        CHECK(std::abs(r[3] - mb) <= 0.02 * mb + 0.01);
    }
}

inline void check_passed(const outcome& o) {
    INFO("server stdout:\n" << o.server_out << "\nserver stderr:\n" << o.server_err);
    INFO("client stdout:\n" << o.client_out << "\nclient stderr:\n" << o.client_err);
    REQUIRE(o.client == 0);
    REQUIRE(o.server == 0);
    CHECK(o.client_out.find("the model's, not a card's") != std::string::npos);
}

// One clear line on stderr, and exit status 1.
inline void check_refused(const std::string& err, int rc, const std::string& says) {
    INFO("stderr: " << err);
    CHECK(rc == 1);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.starts_with("cxv-perf: "));
    CHECK(err.find(says) != std::string::npos);
}

// Each case's cxv-perf ARGS refused with one line on stderr that says `says`, exit 1.
inline void check_bad_options(const std::vector<std::pair<std::vector<std::string>, std::string>>& cases) {
    const std::string perf = env_path("CXV_PERF");
    scratch s;
    for (const auto& [args, says] : cases) {
        std::vector<std::string> argv = {perf};
        argv.insert(argv.end(), args.begin(), args.end());
        child c(argv, s.dir + "/bad.out", s.dir + "/bad.err");
        const int rc = c.wait(clock_type::now() + 10s);
        CAPTURE(args[0]);
        CAPTURE(args.size() > 1 ? args[1] : "");
        check_refused(slurp(c.err), rc, says);
    }
}

}  // namespace cxv::test::perf
