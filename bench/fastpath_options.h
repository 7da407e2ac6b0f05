// fastpath's command line (see fastpath.cc). Parsed with CLI11 in a file of its own: in
// fastpath.cc, the translation unit whose functions callgrind measures, the parser's
// code changed how GCC inlined the fast path (15 more instructions per inline send).
#pragma once

#include <string>

namespace cxv::bench {

struct fastpath_options {
    std::string json;     // also write the results here
    std::string loop_op;  // run this operation `iters` times and nothing else
    unsigned iters = 0;
    bool short_run = false;
    bool callgrind = true;
    bool check_targets = false;
};

// 0 to go on; otherwise the status to exit with (after --help, or a bad option).
int parse_options(int argc, char** argv, fastpath_options& o);

}  // namespace cxv::bench
