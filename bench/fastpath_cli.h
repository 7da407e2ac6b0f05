// fastpath's command line and its result file (see fastpath.cc), in a file of their own:
// in fastpath.cc, the translation unit whose functions callgrind measures, CLI11's code
// changed how GCC inlined the fast path (15 more instructions per inline send).
#pragma once

#include <string>
#include <vector>

namespace cxv::bench {

struct fastpath_options {
    std::string json;     // also write the results here
    std::string loop_op;  // run this operation `iters` times and nothing else
    unsigned iters = 0;
    bool short_run = false;
    bool callgrind = true;
    bool check_targets = false;
    std::string rdma_core;  // an rdma-core source tree: its mlx5 provider measured beside
};

// 0 to go on; otherwise the status to exit with (after --help, or a bad option).
int parse_options(int argc, char** argv, fastpath_options& o);

// One operation's figures (-1: not measured).
struct fastpath_result {
    std::string op;
    double ns_per_op = 0;
    double instructions_per_op = -1;
    double rdma_core_ns_per_op = -1;  // with --rdma-core
    double rdma_core_instructions_per_op = -1;
};
// [{"op", "ns_per_op", "instructions_per_op"}] into `path`, with "rdma_core_ns_per_op"
// and "rdma_core_instructions_per_op" where measured; false when it cannot be written.
bool write_json(const std::string& path, const std::vector<fastpath_result>& results);

}  // namespace cxv::bench
