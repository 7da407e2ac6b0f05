// cxv exec: Debian's unmodified UCX 1.13 (ucx-utils: ucx_info, ucx_perftest; its
// libuct_ib links libibverbs and libmlx5, which cxv exec answers) and Open MPI 4.1 over
// UCX (mpirun --mca pml ucx), on the model.
//
// - ucx_info -d: the function's memory domain mlx5_0 with the transports rc_verbs and
//   ud_verbs on its port mlx5_0:1. UCX opens a device only where its uverbs node
//   /dev/infiniband/<dev_name> may be read and written (rdma-core lists only such
//   devices): cxv exec presents one per device (tools/cxv/exec.cc).
// - ucx_perftest between two processes, each under its own `cxv-sim run --fabric`: the
//   UCP tests tag_lat and ucp_put_bw over rc_verbs (with ud_verbs for wire-up only:
//   UCX_TLS=rc_verbs alone has no transport to exchange the RC addresses with, on a
//   card as here) and over ud_verbs. UCX_LOG_LEVEL=info makes UCX name the transport
//   each endpoint uses; UCX_TLS and UCX_NET_DEVICES leave it no other (no tcp, no shared
//   memory), and the figures of its result row are above zero.
// - An MPI ping-pong (mpi_pingpong.c, built with mpicc when the test runs), two ranks on
//   this machine through mpirun, each under its own `cxv-sim run --fabric` (a wrapper
//   script picks the fabric place from OMPI_COMM_WORLD_RANK), UCX restricted to
//   rc_verbs (ud_verbs for wire-up) and self: the data comes back as sent, and both
//   ranks' UCX names rc_verbs for the peer.
// - mlx5dv_init_obj, which UCX's rc_mlx5 and ud_mlx5 drive the queues through: a program
//   of its own (dv_objects.c) sends with WQEs and doorbells it writes itself; UCX opens
//   rc_mlx5 and ud_mlx5 on cxv too (ucx_info -d, and the tests that run over them).
//
// The model's figures on a loaded 2-core machine are milliseconds (every process spins
// its UCX progress loop and its model thread); what is checked is that they are there.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;

constexpr unsigned kIters = 100;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

unsigned count(const std::string& text, const std::string& part) {
    unsigned n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

// The environment every UCX process of these tests gets: only the function's port, only
// `tls`, and UCX's INFO lines (the transports each endpoint uses).
void set_ucx_env(const std::string& tls) {
    ::unsetenv("LD_LIBRARY_PATH");
    ::setenv("UCX_TLS", tls.c_str(), 1);
    ::setenv("UCX_NET_DEVICES", "mlx5_0:1", 1);
    ::setenv("UCX_LOG_LEVEL", "info", 1);
    // Under --config=san cxv's libraries bring ASan into UCX's processes, whose leak check
    // would report what UCX and Open MPI leave for the exit to free: not ours to find.
    if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0' && !has(o, "detect_leaks=0")) {
        ::setenv("ASAN_OPTIONS", (std::string(o) + ":detect_leaks=0").c_str(), 1);
    }
}

// The transports ucx_info -d lists for a memory domain: its "Transport:" lines up to the
// next "Memory domain:", each with its "Device:".
std::vector<std::string> transports_of(const std::string& out, const std::string& md) {
    std::istringstream lines(out);
    std::string line, transport;
    bool in_md = false;
    std::vector<std::string> found;
    while (std::getline(lines, line)) {
        if (has(line, "# Memory domain:")) {
            in_md = line.substr(line.find(':') + 2) == md;
            continue;
        }
        if (!in_md) continue;
        if (const auto at = line.find("Transport: "); at != std::string::npos) transport = line.substr(at + 11);
        if (const auto at = line.find("Device: "); at != std::string::npos && !transport.empty()) {
            found.push_back(transport + " " + line.substr(at + 8));
            transport.clear();
        }
    }
    return found;
}

// ucx_perftest's "Final:" row: iterations, then latency (50th percentile, average,
// overall, µs), bandwidth (average, overall, MB/s), message rate (average, overall).
// The averages are of the last report interval; the overall figures are the run's.
struct final_row {
    bool found = false;
    std::vector<double> v;
};

final_row final_of(const std::string& log) {
    std::istringstream lines(log);
    std::string line;
    final_row r;
    while (std::getline(lines, line)) {
        if (line.rfind("Final:", 0) != 0) continue;
        // Word by word through strtod, which reads the "inf" ucx_perftest prints for the
        // average of a last interval with no iterations in it (operator>> stops there).
        std::istringstream w(line.substr(6));
        r.v.clear();
        for (std::string word; w >> word;) {
            char* end = nullptr;
            const double x = std::strtod(word.c_str(), &end);
            if (end == word.c_str() || *end != '\0') break;
            r.v.push_back(x);
        }
        r.found = r.v.size() >= 8;
    }
    return r;
}

// ucx_perftest as a server and a client of it, `-t test -n kIters ARGS`, over `tls`; the
// transport UCX chose for the peer must be `expect` on the function's port.
void check_perftest(const std::string& tls, const std::string& test, const std::vector<std::string>& args,
                    const std::string& expect, const std::string& port_type = "ib") {
    set_ucx_env(tls);
    std::vector<std::string> all = {"-t", test, "-n", std::to_string(kIters)};
    all.insert(all.end(), args.begin(), args.end());
    const exec_pair r = run_exec_pair(port_type, "/usr/bin/ucx_perftest", all, {}, std::chrono::seconds(60));
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    CHECK(r.server == 0);
    CHECK(r.client == 0);
    for (const auto* log : {&r.server_log, &r.client_log}) {
        CHECK(has(*log, "(" + expect + "/mlx5_0:1)"));
        CHECK_FALSE(has(*log, "tcp/"));
    }
    const final_row f = final_of(r.client_log);
    REQUIRE(f.found);
    CHECK(f.v[0] == kIters);
    const bool latency = test.find("_lat") != std::string::npos;
    if (latency) {
        MESSAGE(test << " over " << expect << ": " << f.v[3] << " us overall, " << f.v[1] << " us median");
        CHECK(f.v[3] > 0);  // overall latency
        CHECK(f.v[1] > 0);  // 50th percentile
    } else {
        MESSAGE(test << " over " << expect << ": " << f.v[5] << " MB/s, " << f.v[7] << " msg/s overall");
        CHECK(f.v[5] > 0);  // overall bandwidth
        CHECK(f.v[7] > 0);  // overall message rate
    }
}

}  // namespace

TEST_CASE("ucx_info -d lists the function with rc_verbs, ud_verbs, rc_mlx5 and ud_mlx5") {
    set_ucx_env("all");
    ::unsetenv("UCX_LOG_LEVEL");
    const ran r = run_exec_under_sim({}, {"/usr/bin/ucx_info", "-d"});
    INFO(r.output);
    CHECK(r.status == 0);
    const auto t = transports_of(r.output, "mlx5_0");
    CHECK(std::find(t.begin(), t.end(), "rc_verbs mlx5_0:1") != t.end());
    CHECK(std::find(t.begin(), t.end(), "ud_verbs mlx5_0:1") != t.end());
    CHECK(std::find(t.begin(), t.end(), "rc_mlx5 mlx5_0:1") != t.end());
    CHECK(std::find(t.begin(), t.end(), "ud_mlx5 mlx5_0:1") != t.end());
}

// What UCX's mlx5 transports (rc_mlx5, ud_mlx5) take from libmlx5: mlx5dv_init_obj of
// cxv's QPs, CQs, SRQs, PDs and AHs, driven by a program of its own (dv_objects.c).
TEST_CASE("mlx5dv_init_obj: a program drives cxv's queues through the layouts it gives") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_DV_OBJECTS")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK_FALSE(has(r.output, "FAIL "));
        for (const char* check :
             {"ok the QP's rings", "ok the CQs' rings", "ok the send completion in the send CQ's ring",
              "ok the receive completion in the receive CQ's ring", "ok the data arrived",
              "ok the completion event of the CQ armed through its UAR page",
              "ok MLX5_1.0's cq_uar points at the UAR address",
              "ok its head after a receive: the next WQE of the list", "ok the AH's address vector"}) {
            CHECK_MESSAGE(has(r.output, check), check);
        }
        CHECK(has(r.output, "0 failed"));
    }
}

// A raw packet QP driven through mlx5dv_init_obj's rings, record and register, as DPDK's
// mlx5 driver runs one (dv_raw_qp.c): a frame from one function's QP to another's.
TEST_CASE("mlx5dv_init_obj: a program sends and receives a frame on raw packet QPs through their rings") {
    const ran r = run_exec_under_sim({"--port-type", "eth", "--devices", "2"}, {env_path("CXV_DV_RAW_QP")});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_FALSE(has(r.output, "FAIL "));
    for (const char* check : {"ok the raw packet QP's rings", "ok its SQ, RQ, TIR and TIS numbers",
                              "ok the send completion in the send CQ's ring",
                              "ok the receive completion in the receive CQ's ring", "ok the frame arrived"}) {
        CHECK_MESSAGE(has(r.output, check), check);
    }
    CHECK(has(r.output, "0 failed"));
}

// What UCX's mlx5 transports make through libmlx5 and find in sysfs, by a program of its
// own (dv_create.c): CQs of 128-byte CQEs polled across their wrap, RC QPs with the
// scatter-to-CQE flags, rdma-core's refusals, and the PCI IDs two levels above ibdev_path.
TEST_CASE("mlx5dv_create_cq and mlx5dv_create_qp as UCX calls them") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_DV_CREATE")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK_FALSE(has(r.output, "FAIL "));
        for (const char* check :
             {"ok the PCI function two levels above ibdev_path", "ok its cqe_size is 128",
              "ok mlx5dv_create_qp: RC QPs with either scatter-to-CQE flag",
              "ok ibv_poll_cq takes every completion across the wrap",
              "ok each CQE in the second half of its 128-byte entry", "ok mlx5dv_create_cq: a 96-byte CQE is EINVAL",
              "ok mlx5dv_create_qp: a DCI is EOPNOTSUPP"}) {
            CHECK_MESSAGE(has(r.output, check), check);
        }
        CHECK(has(r.output, "0 failed"));
    }
}

TEST_CASE("ucx_perftest between two processes over rc_verbs") {
    SUBCASE("tag_lat") { check_perftest("rc_verbs,ud_verbs:aux", "tag_lat", {}, "rc_verbs"); }
    SUBCASE("ucp_put_bw") { check_perftest("rc_verbs,ud_verbs:aux", "ucp_put_bw", {"-s", "4096"}, "rc_verbs"); }
}

TEST_CASE("ucx_perftest between two processes over ud_verbs") {
    SUBCASE("tag_lat") { check_perftest("ud_verbs", "tag_lat", {}, "ud_verbs"); }
    SUBCASE("ucp_put_bw") { check_perftest("ud_verbs", "ucp_put_bw", {"-s", "4096"}, "ud_verbs"); }
}

// UCX's own mlx5 transports: the queues made through libibverbs and mlx5dv_create_cq
// (128-byte CQEs where UCX inlines received data), then driven by UCX itself through
// mlx5dv_init_obj's layouts: WQEs it writes, doorbell records, BlueFlame or doorbell
// registers, CQEs it reads.
TEST_CASE("ucx_perftest between two processes over rc_mlx5") {
    SUBCASE("tag_lat") { check_perftest("rc_mlx5,ud_mlx5:aux", "tag_lat", {}, "rc_mlx5"); }
    SUBCASE("ucp_put_bw") { check_perftest("rc_mlx5,ud_mlx5:aux", "ucp_put_bw", {"-s", "4096"}, "rc_mlx5"); }
}

TEST_CASE("ucx_perftest between two processes over ud_mlx5") {
    SUBCASE("tag_lat") { check_perftest("ud_mlx5", "tag_lat", {}, "ud_mlx5"); }
    SUBCASE("ucp_put_bw") { check_perftest("ud_mlx5", "ucp_put_bw", {"-s", "4096"}, "ud_mlx5"); }
}

// On RoCE v2 UCX picks the IPv4 GID by its type, which it reads from
// /sys/class/infiniband/<dev>/ports/1/gid_attrs/types/<index> (cxv exec's class
// directory, written by cxv's libibverbs as a context opens), and tells an IPv4 GRH area
// from an IPv6 one by the receive completion's sl (the CQE's RoCE packet type).
TEST_CASE("ucx_perftest between two processes on RoCE v2: ud_verbs and rc_mlx5") {
    SUBCASE("ud_verbs") { check_perftest("ud_verbs", "tag_lat", {}, "ud_verbs", "eth"); }
    SUBCASE("rc_mlx5") { check_perftest("rc_mlx5,ud_mlx5:aux", "tag_lat", {}, "rc_mlx5", "eth"); }
}

TEST_CASE("Open MPI ping-pong, two ranks each on its own function, over UCX rc_verbs") {
    set_ucx_env("rc_verbs,ud_verbs:aux,self");
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const std::string program = s.dir + "/mpi_pingpong";
    const ran built = run({"/usr/bin/mpicc", "-O2", "-Wall", "-Werror", env_path("CXV_MPI_PINGPONG_C"), "-o", program},
                          s.dir + "/mpicc.log");
    INFO("mpicc:\n" << built.output);
    REQUIRE(built.status == 0);
    // Each rank under its own cxv-sim run at fabric place = its rank.
    const std::string wrapper = s.dir + "/rank.sh";
    {
        std::ofstream w(wrapper);
        w << "#!/bin/sh\nexec " << env_path("CXV_SIM") << " run --fabric " << fabric
          << " --link-up-ms 20 --set fabric_index=$OMPI_COMM_WORLD_RANK -- " << env_path("CXV") << " exec -- \"$@\"\n";
    }
    ::chmod(wrapper.c_str(), 0755);
    // Open MPI's own wire-up on loopback only; no byte transfer layer but self, so nothing
    // but UCX's pml can carry the messages.
    const ran r = run({"/usr/bin/mpirun", "--allow-run-as-root", "-np", "2", "--mca", "pml", "ucx", "--mca", "btl",
                       "self", "--mca", "osc", "^ucx", "--mca", "oob_tcp_if_include", "lo", "-x", "UCX_TLS", "-x",
                       "UCX_NET_DEVICES", "-x", "UCX_LOG_LEVEL", wrapper, program},
                      s.dir + "/mpirun.log", std::chrono::seconds(60));
    INFO(r.output);
    CHECK(r.status == 0);
    // "pingpong ok SIZE ROUNDS USEC" for each size, the mean round trip above zero.
    for (const std::string size : {"8", "4096", "65536", "1048576"}) {
        const std::string tag = "pingpong ok " + size + " ";
        const auto at = r.output.find(tag);
        REQUIRE_MESSAGE(at != std::string::npos, tag);
        std::istringstream row(r.output.substr(at + tag.size()));
        int rounds = 0;
        double usec = 0;
        row >> rounds >> usec;
        MESSAGE("MPI ping-pong of " << size << " bytes: " << usec << " us round trip");
        CHECK(rounds == 20);
        CHECK(usec > 0);
    }
    // Both ranks' endpoint to the other: rc_verbs on the function's port, and nothing else.
    CHECK(count(r.output, "tag(rc_verbs/mlx5_0:1)") == 2);
    CHECK_FALSE(has(r.output, "tcp/"));
    CHECK_FALSE(has(r.output, "posix/"));
    CHECK_FALSE(has(r.output, "sysv/"));
}
