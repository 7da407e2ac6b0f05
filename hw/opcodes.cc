#include "hw/opcodes.h"

namespace cxv::hw {

#define CXV_NAME_CASE(name, value) \
    case value:                    \
        return #name;
#define CXV_NAME_CASE_PRM(name, prm, value) \
    case value:                             \
        return #prm;

std::string_view name(cmd_opcode v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_CMD_OPCODES_X(CXV_NAME_CASE_PRM) }
    return {};
}

std::string_view name(cmd_status v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_CMD_STATUSES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(cmd_delivery_status v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_CMD_DELIVERY_STATUSES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(wqe_opcode v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_WQE_OPCODES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(cqe_opcode v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_CQE_OPCODES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(cqe_syndrome v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_CQE_SYNDROMES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(event_type v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_EVENT_TYPES(CXV_NAME_CASE) }
    return {};
}

std::string_view name(port_change_subtype v) noexcept {
    switch (static_cast<unsigned>(v)) { CXV_PORT_CHANGE_SUBTYPES(CXV_NAME_CASE) }
    return {};
}

}  // namespace cxv::hw
