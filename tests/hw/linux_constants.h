// The constants tests/hw:linux_mlx5_constants_cxx copied from Linux's include/linux/mlx5
// headers (see tests/hw/BUILD), as a name -> value map, for the tests that look up
// Linux's value of one of ours by its Linux name.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>

#include "tests/hw/linux/mlx5_constants.h"

namespace cxv::test {

inline const std::map<std::string_view, std::uint64_t>& linux_constants() {
    static const std::map<std::string_view, std::uint64_t> m = {
#define CXV_LINUX_ENTRY(n) {#n, static_cast<std::uint64_t>(n)},
        CXV_LINUX_MLX5_CONSTANTS(CXV_LINUX_ENTRY)
#undef CXV_LINUX_ENTRY
    };
    return m;
}

}  // namespace cxv::test
