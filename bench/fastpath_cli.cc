#include "bench/fastpath_cli.h"

#include <fstream>

#include <CLI/CLI.hpp>

#include "base/json.h"

namespace cxv::bench {

int parse_options(int argc, char** argv, fastpath_options& o) {
    bool no_callgrind = false;
    CLI::App app{"fastpath: the fast path on plain memory, ns and instructions per operation"};
    app.add_option("--json", o.json, "also write [{op, ns_per_op, instructions_per_op}] to this file");
    app.add_flag("--short", o.short_run, "fewer repeats (CI)");
    app.add_flag("--no-callgrind", no_callgrind, "ns only");
    app.add_flag("--check-targets", o.check_targets, "exit 1 when an operation is above its target");
    auto* loop = app.add_option("--loop", o.loop_op, "run one operation --iters times (what callgrind counts)");
    app.add_option("--iters", o.iters, "the operations --loop runs")->needs(loop);
    app.add_option("--rdma-core", o.rdma_core,
                   "an rdma-core source tree: build its mlx5 provider with this program's compiler and flags and "
                   "measure it beside cxv in the same shapes (needs gcc, python3; docs/performance.md)")
        ->type_name("DIR")
        ->excludes(loop);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc != 0 ? rc : -1;
    }
    o.callgrind = !no_callgrind;
    return 0;
}

bool write_json(const std::string& path, const std::vector<fastpath_result>& results) {
    json_writer j(json_writer::layout::one_line);
    j.begin_array();
    for (const auto& r : results) {
        j.begin_object();
        j.member("op", r.op);
        j.member("ns_per_op", r.ns_per_op);
        j.member("instructions_per_op", r.instructions_per_op);
        if (r.rdma_core_ns_per_op >= 0) j.member("rdma_core_ns_per_op", r.rdma_core_ns_per_op);
        if (r.rdma_core_instructions_per_op >= 0) {
            j.member("rdma_core_instructions_per_op", r.rdma_core_instructions_per_op);
        }
        j.end_object();
    }
    j.end_array();
    std::ofstream f(path);
    f << j.str() << '\n';
    return static_cast<bool>(f);
}

}  // namespace cxv::bench
