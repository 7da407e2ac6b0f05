// A run-time self-check of every layout in hw/: each scalar field written with all ones
// into a zeroed buffer must read back, set exactly its own bits, and leave the rest of
// the structure zero. Used by `cxv selfcheck` and the tests; cheap (a few milliseconds).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cxv::hw {

struct selfcheck_result {
    std::size_t layouts = 0;
    std::size_t fields = 0;          // all fields
    std::size_t scalars_checked = 0; // scalar fields exercised bit by bit
    std::vector<std::string> failures;
};

selfcheck_result run_layout_selfcheck();

}  // namespace cxv::hw
