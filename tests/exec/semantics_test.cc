// cxv exec, where rdma-core's semantics are what the programs people run (qperf,
// libfabric, perftest) depend on: every name and symbol version of Debian's librdmacm
// exported by cxv's, and the C programs beside this file (built against rdma-core, run
// under cxv-sim run -- cxv exec) checking the verbs and librdmacm calls one by one.
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


// Every check a program printed ("ok NAME" lines wanted; none "FAIL").
void expect_checks(const ran& r, std::initializer_list<const char*> checks) {
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(!has(r.output, "FAIL "));
    for (const char* check : checks) {
        CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), std::string(check));
    }
}

}  // namespace

TEST_CASE("cxv's librdmacm.so.1 exports every name of rdma-core's with its symbol version") {
    const std::string debian = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1";
    const std::set<std::string> want = exported_symbols(debian);
    const std::set<std::string> got = exported_symbols(env_path("CXV_LIBRDMACM"));
    REQUIRE_MESSAGE(want.size() > 60, "objdump -T " << debian << " listed " << want.size() << " symbols");
    REQUIRE(got.size() > 0);
    for (const std::string& s : want) CHECK_MESSAGE(got.count(s) == 1, "missing: " << s);
}

TEST_CASE("verbs calls follow rdma-core's libibverbs and mlx5 provider (tests/exec/semantics.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_SEMANTICS")});
        expect_checks(r, {"receive-only QP created", "receive-only QP reports max_send_wr 0",
                          "receive-only QP refuses a send with ENOMEM", "receive-only QP receives",
                          "receive-only QP queried", "AH with a GRH", "ibv_reg_mr with IBV_ACCESS_MW_BIND",
                          "a CQ of max_cqe + 1: EINVAL", "a CQ of 1M entries completes a WR",
                          "a CQ of max_cqe entries completes a WR", "phys_port_cnt_ex is 1", "dup of cmd_fd",
                          "poll of cmd_fd", "close of the copy", "ibv_close_device with objects open returns 0",
                          "objects of a closed context are destroyed after the close",
                          "the function opens again after", "ibv_close_device",
                          "the last object of a closed context, destroyed last, frees it"});
        CHECK(has(r.output, std::string(port_type) == "eth" ? "ok RoCE AH without a GRH: EINVAL\n"
                                                            : "ok InfiniBand AH without a GRH\n"));
        CHECK(has(r.output, std::string(port_type) == "eth" ? "ok RoCE RTR without a GRH: EINVAL\n"
                                                            : "ok InfiniBand RTR without a GRH\n"));
    }
}

TEST_CASE("ibv_get_cq_event and signals: EINTR without SA_RESTART (tests/exec/cq_event_signal.c)") {
    const ran r = run_exec_under_sim({}, {env_path("CXV_CQ_EVENT_SIGNAL")});
    expect_checks(r, {"a handler without SA_RESTART interrupts ibv_get_cq_event with EINTR",
                      "a handler with SA_RESTART lets ibv_get_cq_event wait on for the event", "the completion"});
}

TEST_CASE("empty SGEs are left out of the WQE, as rdma-core's mlx5 provider does (tests/exec/zero_sge.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_ZERO_SGE")});
        expect_checks(r, {"SEND of one empty SGE", "RDMA WRITE of one empty SGE", "empty first SGEs on both sides",
                          "receive of one empty SGE, two-segment WQEs", "receive of one empty SGE, one-segment WQEs",
                          "a list of receives and sends with empty SGEs"});
    }
}

TEST_CASE("a UD receive's wc.sl: the SL on InfiniBand, the packet type on RoCE (tests/exec/ud_sl.c)") {
    const ran ib = run_exec_under_sim({"--port-type", "ib"}, {env_path("CXV_UD_SL")});
    expect_checks(ib, {"InfiniBand: wc.sl is the sender's SL"});
    const ran eth = run_exec_under_sim({"--port-type", "eth"}, {env_path("CXV_UD_SL")});
    expect_checks(eth, {"RoCE over IPv6: wc.sl is 0x9 (UDP, IPv6)", "an IPv4 GID", "RoCE over IPv4: wc.sl is 0xa (UDP, IPv4)"});
}

TEST_CASE("librdmacm calls follow rdma-core's (tests/exec/cm_semantics.c)") {
    const ran r = run_exec_under_sim({}, {env_path("CXV_CM_SEMANTICS"), std::to_string(free_port())});
    expect_checks(r, {"rdma_getaddrinfo with the addresses in the hints",
                      "rdma_getaddrinfo passive with the source in the hints", "rdma_getaddrinfo with nothing: EINVAL",
                      "rdma_get_src_port of a bound id", "rdma_get_dst_port of a resolved id",
                      "rdma_set_local_ece: EOPNOTSUPP", "rdma_get_remote_ece: EOPNOTSUPP",
                      "rdma_join_multicast_ex without join flags: EINVAL",
                      "rdma_join_multicast_ex on InfiniBand: ENOSYS", "rdma_create_srq_ex: EOPNOTSUPP", "rsocket: ENOSYS",
                      "rsockets calls on a descriptor that is no rsocket: EBADF",
                      "rselect of an ordinary descriptor is select", "rdma_reject_ece: REJECTED with reason 35"});
}
