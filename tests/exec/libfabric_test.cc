// cxv exec: Debian's unmodified libfabric 1.17 (libfabric-bin's fi_info and fi_pingpong)
// through its verbs provider, which drives cxv's libibverbs.so.1 and librdmacm.so.1 (the
// connection manager, and the addresses: 127.0.0.1). fi_info lists the function with
// the three endpoint types; fi_pingpong runs between two processes, each under its own
// `cxv-sim run --fabric DIR --set fabric_index=N`, over a connected endpoint (FI_EP_MSG:
// RC QPs through librdmacm), a reliable datagram one (FI_EP_RDM: ofi_rxm over verbs' MSG
// endpoints) and an unreliable datagram one (FI_EP_DGRAM: UD QPs), on InfiniBand and RoCE,
// with its data integrity checks on; its result row is read and checked on both sides.
//
// The figures are the model's on a loaded machine (milliseconds per transfer between two
// processes on 2 cores): what is checked is that they are there, above zero where they
// must be, and agree with each other.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

constexpr unsigned kIters = 10;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What Debian's libfabric, run under cxv exec, needs from the environment: nothing on
// LD_LIBRARY_PATH but cxv's directory (cxv exec puts it there), and under --config=san
// no leak check of libfabric's own allocations, which it keeps to its exit.
void prepare_environment() {
    ::unsetenv("LD_LIBRARY_PATH");
    if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0' && !has(o, "detect_leaks=0")) {
        ::setenv("ASAN_OPTIONS", (std::string(o) + ":detect_leaks=0").c_str(), 1);
    }
}

// fi_pingpong's way of writing a byte count ("64", "4k", "1.2k", "80k": binary units,
// one decimal below ten of the unit) and an iteration count ("10", "2k": decimal units).
std::string byte_label(std::uint64_t n) {
    const char* units = "\0kmg";
    int u = 0;
    std::uint64_t unit = 1;
    while (u < 3 && n >= (unit << 10)) {
        unit <<= 10;
        ++u;
    }
    std::string s = std::to_string(n / unit);
    if (n / unit < 10 && (n % unit) * 10 / unit != 0) s += "." + std::to_string((n % unit) * 10 / unit);
    if (u > 0) s += units[u];
    return s;
}

std::string count_label(std::uint64_t n) {
    if (n >= 1000000000) return std::to_string(n / 1000000000) + "b";
    if (n >= 1000000) return std::to_string(n / 1000000) + "m";
    if (n >= 1000) return std::to_string(n / 1000) + "k";
    return std::to_string(n);
}

// Checks fi_pingpong's result row (under its "bytes #sent #ack total time MB/sec
// usec/xfer Mxfers/sec" header) for `size` bytes and kIters iterations of two transfers
// each: the labels as asked, every transfer acknowledged, a latency above zero and a time
// that agree (time = usec/xfer x 2 x iterations, to the time's two decimals: 0.00s for a
// run under 5 ms), and the rates those imply (to their two decimals).
void check_result(const std::string& log, unsigned size, const char* side) {
    CAPTURE(side);
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line) && !(has(line, "bytes") && has(line, "usec/xfer"))) {
    }
    REQUIRE_MESSAGE(std::getline(lines, line), "no result row");
    CAPTURE(line);
    std::istringstream w(line);
    std::string bytes, sent, acked, total, time;
    double mb_per_s = -1, usec = -1, mxfers = -1;
    w >> bytes >> sent >> acked >> total >> time >> mb_per_s >> usec >> mxfers;
    REQUIRE(!w.fail());
    CHECK(bytes == byte_label(size));
    CHECK(sent == count_label(kIters));
    CHECK(acked == "=" + count_label(kIters));
    const std::uint64_t moved = std::uint64_t{2} * kIters * size;
    CHECK(total == byte_label(moved));
    REQUIRE(time.size() > 1);
    CHECK(time.back() == 's');
    const double seconds = std::strtod(time.c_str(), nullptr);
    CHECK(seconds >= 0);
    CHECK(usec > 0);
    const double elapsed_us = usec * 2 * kIters;
    CHECK(std::fabs(elapsed_us / 1e6 - seconds) <= 0.005 + 1e-4 * seconds);
    CHECK(mb_per_s > 0);
    CHECK(std::fabs(mb_per_s - static_cast<double>(moved) / elapsed_us) <= 0.005 + 1e-3 * mb_per_s);
    CHECK(std::fabs(mxfers - 1.0 / usec) <= 0.005 + 1e-3 * mxfers);
}

struct pair_logs {
    int server = -1, client = -1;
    std::string server_log, client_log;
};

// fi_pingpong as a server (fabric place 0) and as a client of 127.0.0.1 (place 1), each
// under `cxv-sim run --fabric DIR --port-type PORT_TYPE --set fabric_index=N -- cxv exec
// --`, with its out-of-band exchange on a free TCP port (-B on the server, -P on the
// client): the client starts once the server listens there. Both within 60 s; a server
// still running 5 s after its client failed waits for nothing more and is killed.
pair_logs run_pingpong(const std::string& port_type, const std::string& endpoint, const std::string& provider,
                       unsigned size) {
    prepare_environment();
    scratch s;
    const std::string fabric = s.dir + "/fabric";
    std::filesystem::create_directories(fabric);
    const unsigned port = free_port();
    auto argv_for = [&](unsigned index, bool client) {
        std::vector<std::string> v = {env_path("CXV_SIM"), "run", "--fabric", fabric, "--port-type", port_type,
                                      "--set", "fabric_index=" + std::to_string(index), "--link-up-ms", "20",
                                      "--", env_path("CXV"), "exec", "--", "/usr/bin/fi_pingpong",
                                      "-p", provider, "-e", endpoint, "-I", std::to_string(kIters),
                                      "-S", std::to_string(size), "-c"};
        v.insert(v.end(), {client ? "-P" : "-B", std::to_string(port)});
        if (client) v.push_back("127.0.0.1");
        return v;
    };
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    child server(argv_for(0, false), s.dir + "/server.log");
    while (!listening(port) && server.running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    pair_logs r;
    if (listening(port)) {
        child client(argv_for(1, true), s.dir + "/client.log");
        r.client = client.wait(deadline);
        r.client_log = slurp(client.log);
        if (r.client != 0) server.wait(std::min(deadline, std::chrono::steady_clock::now() + 5s));
    }
    r.server = server.wait(deadline);
    r.server_log = slurp(server.log);
    return r;
}

// FI_ECANCELED, fi_pingpong's exit status for the flushed send below.
constexpr int kCanceled = 125;

// fi_pingpong over RDM ends with a race of its own (docs/exec.md, "libfabric"): after the
// timed iterations each side sends "fin" and exits once it has its peer's, without waiting
// for its own to be acknowledged; ofi_rxm takes the peer's disconnect as it comes and
// closes the connection, flushing a send not yet acknowledged. On a card the peer's ACK
// comes microseconds before its disconnect; cxv's connection manager carries the
// disconnect over TCP, beside the wire, and on a loaded machine it may come first. Then
// one side exits 125 with "cq_readerr: Work Request Flushed Error", after its result row
// (printed once every iteration was done and its data checked); that, and nothing else,
// is told as a note (MESSAGE), not a failure.
bool fin_race(int status, const std::string& log, int peer) {
    return status == kCanceled && peer == 0 &&
           has(log, "cq_readerr: Work Request Flushed Error") && has(log, "usec/xfer");
}

void check_pingpong(const std::string& port_type, const std::string& endpoint, const std::string& provider,
                    unsigned size) {
    const pair_logs r = run_pingpong(port_type, endpoint, provider, size);
    INFO("server log:\n" << r.server_log);
    INFO("client log:\n" << r.client_log);
    const bool rdm = endpoint == "rdm";
    if (rdm && (fin_race(r.server, r.server_log, r.client) || fin_race(r.client, r.client_log, r.server))) {
        MESSAGE("fi_pingpong -e rdm on " << port_type << ": the peer's disconnect came before the ACK of the "
                                             "last \"fin\" (docs/exec.md, \"libfabric\")");
    } else {
        CHECK(r.server == 0);
        CHECK(r.client == 0);
    }
    check_result(r.server_log, size, "server");
    check_result(r.client_log, size, "client");
}

// fi_info's entries ("provider: ..." and the indented lines after it) as text each.
std::vector<std::string> entries(const std::string& output) {
    std::vector<std::string> out;
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("provider: ", 0) == 0) out.emplace_back();
        if (!out.empty()) out.back() += line + "\n";
    }
    return out;
}

bool listed(const std::vector<std::string>& all, const std::string& provider, const std::string& domain,
            const std::string& type, const std::string& protocol) {
    for (const std::string& e : all) {
        if (has(e, "provider: " + provider + "\n") && has(e, "domain: " + domain + "\n") &&
            has(e, "type: " + type + "\n") && has(e, "protocol: " + protocol + "\n") &&
            has(e, "fabric: IB-0xfe80000000000000\n")) {
            return true;
        }
    }
    return false;
}

}  // namespace

TEST_CASE("fi_info -p verbs lists the function with FI_EP_MSG, FI_EP_RDM and FI_EP_DGRAM") {
    prepare_environment();
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {"/usr/bin/fi_info", "-p", "verbs"});
        INFO(r.output);
        CHECK(r.status == 0);
        const std::vector<std::string> all = entries(r.output);
        CHECK(listed(all, "verbs", "mlx5_0", "FI_EP_MSG", "FI_PROTO_RDMA_CM_IB_RC"));
        CHECK(listed(all, "verbs;ofi_rxm", "mlx5_0", "FI_EP_RDM", "FI_PROTO_RXM"));
        CHECK(listed(all, "verbs", "mlx5_0-dgram", "FI_EP_DGRAM", "FI_PROTO_IB_UD"));
        // The details of the MSG endpoint: the source address the provider found for the
        // function (librdmacm's), and the port as libibverbs reports it.
        const ran v = run_exec_under_sim({"--port-type", port_type},
                                         {"/usr/bin/fi_info", "-p", "verbs", "-t", "FI_EP_MSG", "-v"});
        INFO(v.output);
        CHECK(v.status == 0);
        CHECK(has(v.output, "src_addr: fi_sockaddr_in://127.0.0.1:0\n"));
        CHECK(has(v.output, "name: mlx5_0\n"));
        CHECK(has(v.output, "vendor_id: 0x02c9\n"));
        CHECK(has(v.output, "state: FI_LINK_UP\n"));
        const std::string network = std::string(port_type) == "ib" ? "InfiniBand" : "Ethernet";
        CHECK(has(v.output, "network_type: " + network + "\n"));
    }
}

// The fix ofi_rxm's client needed: it listens on the source address that the verbs
// provider reads from an id after rdma_resolve_addr, which was unset until a connection.
TEST_CASE("rdma_resolve_addr binds the id's source as rdma_cm does (tests/exec/resolve_source.c)") {
    const unsigned port = free_port();
    unsigned given = free_port();
    while (given == port) given = free_port();
    const ran r = run_exec_under_sim({}, {env_path("CXV_RESOLVE_SOURCE"), std::to_string(port), std::to_string(given)});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(!has(r.output, "FAIL "));
    for (const char* check : {"no source: the routed address with a port of its own",
                              "the connection comes from the resolved source",
                              "a source given keeps its address and port", "a wildcard source gets the routed address",
                              "IPv6: the routed address ::1"}) {
        CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
    }
}

// The fix that the endpoints' teardown needed: the verbs provider polls its CQ right
// after destroying a QP and takes each wr_id for its own context; cxv gave the destroyed
// QP's completions (wr_id 0), and fi_pingpong crashed at its end.
TEST_CASE("ibv_poll_cq returns no completion of a destroyed QP (tests/exec/destroyed_qp_cq.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_DESTROYED_QP_CQ")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(!has(r.output, "FAIL "));
        for (const char* check : {"ibv_destroy_qp of a QP with completions in its CQ",
                                  "the other QP's completion still comes", "none of the destroyed QP's"}) {
            CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
        }
    }
}

TEST_CASE("fi_pingpong between two processes on InfiniBand") {
    SUBCASE("-e msg") { check_pingpong("ib", "msg", "verbs", 4096); }
    SUBCASE("-e rdm") { check_pingpong("ib", "rdm", "verbs;ofi_rxm", 4096); }
    SUBCASE("-e dgram") { check_pingpong("ib", "dgram", "verbs", 4096); }
}

TEST_CASE("fi_pingpong between two processes on RoCE v2") {
    SUBCASE("-e msg") { check_pingpong("eth", "msg", "verbs", 4096); }
    SUBCASE("-e rdm") { check_pingpong("eth", "rdm", "verbs;ofi_rxm", 4096); }
    SUBCASE("-e dgram") { check_pingpong("eth", "dgram", "verbs", 4096); }
}
