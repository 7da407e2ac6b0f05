// cxv exec and rdma-core's provider libraries, which perftest, UCX and libfabric link
// directly: cxv's libmlx5.so.1 and libefa.so.1 export every name and symbol version of
// Debian's (read from Debian's libraries now, not from a list), nothing more; a program
// linked against rdma-core's copies gets cxv's (tests/exec/provider_calls.c); and every
// perftest binary loads under cxv exec with nothing on LD_LIBRARY_PATH.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"

namespace {

using namespace cxv::test;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }


void same_exports(const std::string& debian, const std::string& ours, std::size_t at_least) {
    const std::set<std::string> want = exported_symbols(debian);
    const std::set<std::string> got = exported_symbols(ours);
    REQUIRE_MESSAGE(want.size() >= at_least, "objdump -T " << debian << " listed " << want.size() << " symbols");
    for (const std::string& s : want) CHECK_MESSAGE(got.count(s) == 1, "missing: " << s);
    for (const std::string& s : got) CHECK_MESSAGE(want.count(s) == 1, "not in Debian's: " << s);
    MESSAGE(ours << ": " << got.size() << " of " << want.size() << " names and versions of " << debian);
}

// The directory cxv exec puts first on LD_LIBRARY_PATH, as it names it (realpath).
std::string dir_of(const std::string& path) {
    return std::filesystem::canonical(path.substr(0, path.rfind('/'))).string();
}

}  // namespace

TEST_CASE("cxv's libmlx5.so.1 exports exactly the names and symbol versions of rdma-core's") {
    same_exports("/usr/lib/x86_64-linux-gnu/libmlx5.so.1", env_path("CXV_LIBMLX5"), 100);
}

TEST_CASE("cxv's libefa.so.1 exports exactly the names and symbol versions of rdma-core's") {
    same_exports("/usr/lib/x86_64-linux-gnu/libefa.so.1", env_path("CXV_LIBEFA"), 5);
}

TEST_CASE("mlx5dv and efadv calls of a program linked against rdma-core (tests/exec/provider_calls.c)") {
    for (const char* port_type : {"ib", "eth"}) {
        CAPTURE(port_type);
        const ran r = run_exec_under_sim({"--port-type", port_type}, {env_path("CXV_PROVIDER_CALLS")});
        INFO(r.output);
        CHECK(r.status == 0);
        CHECK(!has(r.output, "FAIL "));
        for (const char* check :
             {"libmlx5 and libefa beside cxv's libibverbs", "not rdma-core's libmlx5",
              "mlx5dv_is_supported of cxv's device", "mlx5dv_is_supported of another device",
              "mlx5dv_open_device with DevX: EOPNOTSUPP", "mlx5dv_open_device with a comp_mask: EINVAL",
              "mlx5dv_open_device without flags opens the device", "mlx5dv_query_device",
              "mlx5dv_query_device: version-1 CQEs and nothing else", "mlx5dv_query_device: the fields filled",
              "mlx5dv_query_device: no CQE compression, striding RQ, offloads",
              "mlx5dv_query_device asking for nothing", "mlx5dv_init_obj of a CQ: its ring (dv_objects.c)",
              "mlx5dv_init_obj of nothing: EINVAL", "mlx5dv_create_qp without mlx5 attributes: an RC QP",
              "mlx5dv_create_cq without mlx5 attributes: a CQ", "mlx5dv_devx_general_cmd: EOPNOTSUPP",
              "mlx5dv_devx_obj_create: NULL, EOPNOTSUPP", "mlx5dv_devx_get_event: -1, EOPNOTSUPP",
              "mlx5dv_dr_domain_create: NULL, EOPNOTSUPP", "mlx5dv_qp_cancel_posted_send_wrs: -EOPNOTSUPP",
              "mlx5dv_get_clock_info: EOPNOTSUPP", "mlx5dv_query_port: EOPNOTSUPP", "mlx5dv_crypto_login: EOPNOTSUPP",
              "efadv_query_device: EOPNOTSUPP", "efadv_create_qp_ex: NULL, EOPNOTSUPP",
              "efadv_create_driver_qp: NULL, EOPNOTSUPP", "efadv_create_cq: NULL, EOPNOTSUPP",
              "efadv_cq_from_ibv_cq_ex of cxv's CQ: NULL, EOPNOTSUPP", "efadv_query_ah: EOPNOTSUPP",
              "ibv_close_device"}) {
            CHECK_MESSAGE(has(r.output, std::string("ok ") + check + "\n"), check);
        }
    }
}

// What stopped them in the loader before: rdma-core's libmlx5 and libefa need rdma-core's
// libibverbs (libefa.so.1: undefined symbol: ibv_cmd_destroy_cq, version
// IBVERBS_PRIVATE_34). Each binary prints its usage; the loader's trace shows cxv's
// provider libraries initialised and rdma-core's not loaded. No device is needed.
TEST_CASE("every perftest binary loads under cxv exec, with cxv's libmlx5 and libefa") {
    ::unsetenv("LD_LIBRARY_PATH");
    const std::string ours = dir_of(env_path("CXV_LIBMLX5"));
    for (const char* tool : {"ib_send_lat", "ib_send_bw", "ib_write_lat", "ib_write_bw", "ib_read_lat", "ib_read_bw",
                             "ib_atomic_lat", "ib_atomic_bw"}) {
        CAPTURE(tool);
        scratch s;
        std::vector<std::string> argv = {env_path("CXV"), "exec", "--", "/usr/bin/env", "LD_DEBUG=libs"};
        // Under --config=san: no leak check of Debian's perftest (its buffers are not ours).
        if (const char* o = std::getenv("ASAN_OPTIONS"); o != nullptr && *o != '\0') {
            argv.push_back(std::string("ASAN_OPTIONS=") + o + ":detect_leaks=0:verify_asan_link_order=0");
        }
        argv.insert(argv.end(), {std::string("/usr/bin/") + tool, "-h"});
        const ran r = run(argv, s.dir + "/out.log");
        INFO(r.output);
        CHECK(r.status == 1);  // perftest's -h prints the usage and exits 1; a loader failure is 127
        CHECK(has(r.output, "Usage:"));
        // (Not "undefined symbol": under ASan the trace has the runtime's own lookups.)
        CHECK(!has(r.output, "error while loading shared libraries"));
        for (const char* lib : {"libmlx5.so.1", "libefa.so.1", "libibverbs.so.1", "librdmacm.so.1"}) {
            CHECK_MESSAGE(has(r.output, "calling init: " + ours + "/" + lib + "\n"), lib << " from " << ours);
            CHECK_MESSAGE(!has(r.output, std::string("calling init: /usr/lib/x86_64-linux-gnu/") + lib), lib);
        }
    }
}
