// cxv info: bring-up, a description of the function, teardown.
#pragma once

#include <string>

namespace cxv::tool {

int print_info(const std::string& bdf);

}  // namespace cxv::tool
