// cxv exec, one process: Debian's ibv_devices and ibv_devinfo -v, unmodified, under
// cxv-sim run, see the model's functions through cxv's libibverbs.so.1 (rdma-core's own
// would find no device: there is no kernel RDMA stack here); and a program calling verbs
// cxv lacks gets the errno libibverbs documents.
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;

// `cxv-sim run SIM_ARGS -- cxv exec EXEC_ARGS -- PROGRAM...`
ran under_sim(const std::vector<std::string>& sim_args, const std::vector<std::string>& exec_args,
              const std::vector<std::string>& program) {
    scratch s;
    std::vector<std::string> argv = {env_path("CXV_SIM"), "run", "--link-up-ms", "20"};
    argv.insert(argv.end(), sim_args.begin(), sim_args.end());
    argv.insert(argv.end(), {"--", env_path("CXV"), "exec"});
    argv.insert(argv.end(), exec_args.begin(), exec_args.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    return run(argv, s.dir + "/out.log");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("ibv_devices lists the model's functions as mlx5_N with their node GUIDs") {
    SUBCASE("one function") {
        const ran r = under_sim({"--set", "node_guid=0x0002c90300abcd10"}, {}, {"/usr/bin/ibv_devices"});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(has(r.output, "mlx5_0"));
        CHECK(has(r.output, "0002c90300abcd10"));
        CHECK(!has(r.output, "mlx5_1"));
    }
    SUBCASE("two functions, in PCI address order") {
        const ran r = under_sim({"--devices", "2"}, {}, {"/usr/bin/ibv_devinfo", "-l"});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(has(r.output, "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n"));
    }
    SUBCASE("--device picks one function") {
        const ran all = under_sim({"--devices", "2"}, {}, {"/usr/bin/ibv_devices"});
        const ran one = under_sim({"--devices", "2"}, {"--device", "0000:c5:00.1"}, {"/usr/bin/ibv_devices"});
        INFO(all.output);
        INFO(one.output);
        REQUIRE(all.status == 0);
        REQUIRE(one.status == 0);
        // The second function's GUID, now listed alone as mlx5_0.
        const auto line = all.output.find("mlx5_1");
        REQUIRE(line != std::string::npos);
        const std::string guid = all.output.substr(all.output.find_first_not_of(" \t", line + 6), 16);
        CHECK(has(one.output, "mlx5_0"));
        CHECK(has(one.output, guid));
        CHECK(!has(one.output, "mlx5_1"));
    }
}

TEST_CASE("the program's ibv_* imports bind to cxv's library with rdma-core's symbol versions") {
    const ran r = under_sim({}, {}, {"/usr/bin/env", "LD_DEBUG=bindings", "/usr/bin/ibv_devinfo"});
    INFO(r.output);
    CHECK(r.status == 0);
    for (const char* import : {"`ibv_get_device_list' [IBVERBS_1.1]", "`ibv_open_device' [IBVERBS_1.1]",
                               "`ibv_query_gid_type' [IBVERBS_PRIVATE_34]", "`ibv_read_sysfs_file' [IBVERBS_1.0]"}) {
        CHECK_MESSAGE(has(r.output, std::string("api/abi/libibverbs.so.1 [0]: normal symbol ") + import), import);
    }
    CHECK(!has(r.output, "linux-gnu/libibverbs.so.1"));  // rdma-core's library is never loaded
}

TEST_CASE("ibv_devinfo -v shows what a ConnectX of the model's kind shows") {
    SUBCASE("ConnectX-6, InfiniBand") {
        const ran r = under_sim({"--port-type", "ib", "--set", "node_guid=0x0002c90300abcd10", "--set",
                                 "fw_version=20.41.1000", "--set", "lid=7"},
                                {}, {"/usr/bin/ibv_devinfo", "-v"});
        INFO(r.output);
        CHECK(r.status == 0);
        for (const char* line : {
                 "hca_id:\tmlx5_0\n",
                 "\ttransport:\t\t\tInfiniBand (0)\n",
                 "\tfw_ver:\t\t\t\t20.41.1000\n",
                 "\tnode_guid:\t\t\t0002:c903:00ab:cd10\n",
                 "\tsys_image_guid:\t\t\t0002:c903:00ab:cd10\n",
                 "\tvendor_id:\t\t\t0x02c9\n",
                 "\tvendor_part_id:\t\t\t4123\n",
                 "\tphys_port_cnt:\t\t\t1\n",
                 "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
                 "\t\t\tmax_mtu:\t\t4096 (5)\n",
                 "\t\t\tactive_mtu:\t\t4096 (5)\n",
                 "\t\t\tport_lid:\t\t7\n",
                 "\t\t\tlink_layer:\t\tInfiniBand\n",
                 "\t\t\tphys_state:\t\tLINK_UP (5)\n",
                 // The model's PTYS: 4X EDR, as mlx5_ib reports it (ib_proto_oper as is).
                 "\t\t\tactive_width:\t\t4X (2)\n",
                 "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n",
                 "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0002:c903:00ab:cd1",
                 // Multicast groups as mlx5_ib reports them from log_max_mcg and max_qp_mcg.
                 "\tmax_mcast_grp:\t\t\t2097152\n",
                 "\tmax_mcast_qp_attach:\t\t240\n",
                 "\tmax_total_mcast_qp_attach:\t503316480\n",
             }) {
            CHECK_MESSAGE(has(r.output, line), line);
        }
        CHECK(!has(r.output, "\t\t\tsm_lid:\t\t\t0\n"));  // the model's SM has a LID
    }
    SUBCASE("ConnectX-5, Ethernet (RoCE v2 GIDs)") {
        const ran r = under_sim({"--port-type", "eth", "--set", "device_id=0x1017"},
                                {}, {"/usr/bin/ibv_devinfo", "-v"});
        INFO(r.output);
        CHECK(r.status == 0);
        for (const char* line : {
                 "\tvendor_id:\t\t\t0x02c9\n",
                 "\tvendor_part_id:\t\t\t4119\n",
                 "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
                 "\t\t\tlink_layer:\t\tEthernet\n",
                 "\t\t\tpkey_tbl_len:\t\t1\n",
                 // 100GBASE-CR4 in PTYS: mlx5_ib's equivalent is 4X EDR.
                 "\t\t\tactive_width:\t\t4X (2)\n",
                 "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n",
                 "\t\t\tGID[  0]:\t\tfe80::",
                 ", RoCE v2\n",
                 "\t\t\tGID[  1]:\t\t::ffff:169.254.",  // the driver's link-local IPv4 address
             }) {
            CHECK_MESSAGE(has(r.output, line), line);
        }
    }
}

TEST_CASE("ibv_xsrq_pingpong is refused cleanly: cxv has no XRC") {
    const ran r = under_sim({}, {}, {"/usr/bin/ibv_xsrq_pingpong", "-p", std::to_string(free_port())});
    INFO(r.output);
    CHECK(r.status == 1);  // its own error exit, not a signal
    CHECK(has(r.output, "Couldn't Open the XRC Domain"));
}

TEST_CASE("verbs cxv does not offer fail with the errno libibverbs documents") {
    const ran r = under_sim({}, {}, {env_path("CXV_UNSUPPORTED")});
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string refused = std::string(" failed ") + std::strerror(EOPNOTSUPP) + "\n";
    for (const char* call : {"ibv_open_xrcd", "ibv_alloc_mw", "ibv_create_cq_ex_tm_info", "ibv_create_qp_xrc",
                             "ibv_resize_cq"}) {
        CHECK_MESSAGE(has(r.output, call + refused), call);
    }
    CHECK(has(r.output, std::string("ibv_attach_mcast failed ") + std::strerror(EINVAL) + "\n"));
    CHECK(has(r.output, "ibv_create_cq succeeded -\n"));
    CHECK(has(r.output, "ibv_close_device succeeded -\n"));
}

TEST_CASE("asynchronous events: an SRQ below its limit gives IBV_EVENT_SRQ_LIMIT_REACHED on async_fd") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = under_sim({"--port-type", port_type}, {}, {env_path("CXV_ASYNC_EVENTS")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(has(r.output, "srq max_wr>=16 1 max_sge 1 limit 4\n"));  // ibv_query_srq, armed
        CHECK(has(r.output, "event SRQ_LIMIT_REACHED srq-matches\n"));
        CHECK(has(r.output, "srq limit after the event 0\n"));
    }
}

TEST_CASE("a send queue of one WR of two-BB WQEs takes one WR after another (tests/exec/small_sq.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = under_sim({"--port-type", port_type}, {}, {env_path("CXV_SMALL_SQ")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(!has(r.output, "FAIL "));
        for (const char* check : {"max_send_wr at least 1", "fetch and add, one WR at a time",
                                  "compare and swap, one WR at a time", "RDMA READ of five SGEs, one WR at a time",
                                  "RDMA WRITE of five SGEs, one WR at a time", "the atomics added up"}) {
            CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
        }
    }
}

TEST_CASE("two contexts of one function in one process (tests/exec/two_contexts.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = under_sim({"--port-type", port_type}, {}, {env_path("CXV_TWO_CONTEXTS")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(!has(r.output, "FAIL "));
        for (const char* check : {"two contexts of one function", "sends from the first context's QP to the second's",
                                  "and back", "a bad rkey fails the WR", "the responder's event on its own context",
                                  "not on the other context", "the first context closes",
                                  "the second context, its QP reset (its flushed receives gone) and connected again, works on with a third", "a new open after the last close"}) {
            CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
        }
    }
}

TEST_CASE("ibv_fork_init: registered pages stay out of a child while any MR holds them (tests/exec/fork_ranges.c)") {
    const ran r = under_sim({}, {}, {env_path("CXV_FORK_RANGES")});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(!has(r.output, "FAIL "));
    for (const char* check : {"nothing registered", "three overlapping MRs", "the shared page stays after one MR goes",
                              "the same range registered twice, one gone", "a forked child faults on a registered page",
                              "all MRs gone", "dontfork twice, dofork once", "dofork as often as dontfork"}) {
        CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
    }
}

TEST_CASE("extended CQs and the ibv_wr_* send interface (tests/exec/ex_verbs.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = under_sim({"--port-type", port_type}, {}, {env_path("CXV_EX_VERBS")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(!has(r.output, "FAIL "));
        for (const char* check : {
                 "cq_ex timestamps", "hca_core_clock", "raw_packet_caps", "raw clock advances", "rt_values unknown mask EINVAL",
                 "cq_ex empty ENOENT", "cq_ex send", "cq_ex write_imm", "cq_ex recv",
                 "cq_ex recv_rdma_with_imm", "cq_ex channel event", "ibv_poll_cq on the cq_ex", "wr_send sge list",
                 "wr_send_imm inline", "wr_rdma_write", "wr_rdma_read", "wr_atomic_cmp_swp", "wr_atomic_fetch_add",
                 "wr batch of four", "wr_abort posts nothing", "wr batch with too many sge",
                 "wr batch beyond the queue", "send after abort", "wr batch on a full send queue",
                 "full send queue: no completion", "wr_set_ud_addr", "send_ops bind_mw refused",
                 "send_ops rdma_write on UD refused", "qp_to_qp_ex of a plain QP", "destroy cq_ex",
                 "destroy channel after its cq_ex"}) {
            CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
        }
        CHECK(has(r.output, "\n0 failed\n"));
    }
}
