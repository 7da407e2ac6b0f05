// cxv-perf -R on the model: the QPs connected with rdma_cm(3) by cxv's connection manager (the
// code of its librdmacm.so.1, linked in), server and client as two
// processes each under its own `cxv-sim run --fabric DIR`, --verify on; a client whose
// QPs do not fit the server's is rejected with the server's reason; an absent server
// gives one clear line and a non-zero exit.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"
#include "tests/perf/pair.h"

namespace {

using namespace cxv::test;
using namespace cxv::test::perf;

void check_cm_header(const outcome& o) {
    INFO("client stdout:\n" << o.client_out << "\nserver stdout:\n" << o.server_out);
    CHECK(o.client_out.find(" rdma_cm QPs\t : ON") != std::string::npos);
    CHECK(o.client_out.find(" Data ex. method : rdma_cm") != std::string::npos);
    CHECK(o.server_out.find(" rdma_cm QPs\t : ON") != std::string::npos);
}

TEST_CASE("-R: latency tests connected by the CM, --verify") {
    for (const char* test : {"send_lat", "read_lat", "atomic_lat", "write_lat"}) {
        const std::string t = test;
        CAPTURE(t);
        const std::string size = t == "atomic_lat" ? "8" : "64";
        const outcome o = run_pair({t, "-R", "-n", "100", "-s", size, "--verify"});
        check_passed(o);
        check_cm_header(o);
        check_latency_rows(o.client_out, {std::stod(size)}, 100);
    }
}

TEST_CASE("-R: bandwidth with one CM connection per QP, --verify") {
    SUBCASE("write_bw, 3 QPs") {
        const outcome o = run_pair({"write_bw", "-R", "-q", "3", "-n", "200", "-s", "1024", "--verify"});
        check_passed(o);
        check_cm_header(o);
        check_bandwidth_rows(o.client_out, {1024}, 600);
    }
    SUBCASE("send_bw over UD (REQ and REP, no RTU)") {
        const outcome o = run_pair({"send_bw", "-R", "-c", "UD", "-n", "200", "-s", "1024", "--verify"});
        check_passed(o);
        check_cm_header(o);
        check_bandwidth_rows(o.client_out, {1024}, 200);
    }
}

TEST_CASE("-R: a client whose QPs differ is rejected, and both say why") {
    const outcome o = run_pair({"write_bw", "-R", "-n", "100"}, {"-q", "2"});
    check_refused(o.server_err, o.server, "rdma_cm: rejected the client's connection: the client has 2 QPs, the server 1");
    check_refused(o.client_err, o.client, "rdma_cm: the server rejected the connection: the client has 2 QPs, the server 1");
}

TEST_CASE("-R: an absent server: one clear line and exit 1") {
    const std::string sim = env_path("CXV_SIM"), perf = env_path("CXV_PERF");
    scratch s;
    const std::string port = std::to_string(free_port());
    child c({sim, "run", "--port-type", "ib", "--", perf, "send_lat", "-R", "-p", port, "127.0.0.1"},
            s.dir + "/absent.out", s.dir + "/absent.err");
    const int rc = c.wait(clock_type::now() + 30s);
    check_refused(slurp(c.err), rc, "rdma_cm: cannot connect to 127.0.0.1:" + port + ": Connection refused");
}

}  // namespace
