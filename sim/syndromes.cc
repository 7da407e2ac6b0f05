#include "sim/syndromes.h"

namespace cxv::sim {

#define CXV_SYNDROME_NAME(name, value, what) \
    case value:                              \
        return #name;
#define CXV_SYNDROME_WHAT(name, value, what) \
    case value:                              \
        return what;

std::string_view name(cmd_syndrome v) noexcept {
    switch (static_cast<std::uint32_t>(v)) { CXV_CMD_SYNDROMES(CXV_SYNDROME_NAME) }
    return {};
}

std::string_view describe(cmd_syndrome v) noexcept {
    switch (static_cast<std::uint32_t>(v)) { CXV_CMD_SYNDROMES(CXV_SYNDROME_WHAT) }
    return {};
}

}  // namespace cxv::sim
