#include "hw/cmd_layouts.h"

#include <fmt/format.h>

#include "hw/ifc.h"
#include "hw/printers.h"

namespace cxv::hw {

std::size_t command_input_size(cmd_opcode op) noexcept {
    switch (op) {
#define CXV_CASE(name, in, out) \
    case cmd_opcode::name:      \
        return ifc::in::size_bytes;
        CXV_CMD_LAYOUTS(CXV_CASE)
#undef CXV_CASE
        default:
            return 0;
    }
}

std::size_t command_output_size(cmd_opcode op) noexcept {
    switch (op) {
#define CXV_CASE(name, in, out) \
    case cmd_opcode::name:      \
        return ifc::out::size_bytes;
        CXV_CMD_LAYOUTS(CXV_CASE)
#undef CXV_CASE
        default:
            return 0;
    }
}

std::string format_command_input(const void* in, std::size_t len) {
    if (len < ifc::cmd_in::size_bytes) return fmt::format("short command input ({} bytes)", len);
    const auto op = static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in));
    switch (op) {
#define CXV_CASE(name, in_layout, out_layout) \
    case cmd_opcode::name:                    \
        return to_string(ifc_view<ifc::in_layout>(in, len));
        CXV_CMD_LAYOUTS(CXV_CASE)
#undef CXV_CASE
        default:
            return fmt::format("{} {}", op, to_string(ifc_view<ifc::cmd_in>(in, len)));
    }
}

std::string format_command_output(cmd_opcode op, const void* out, std::size_t len) {
    switch (op) {
#define CXV_CASE(name, in_layout, out_layout) \
    case cmd_opcode::name:                    \
        return to_string(ifc_view<ifc::out_layout>(out, len));
        CXV_CMD_LAYOUTS(CXV_CASE)
#undef CXV_CASE
        default:
            return to_string(ifc_view<ifc::cmd_out>(out, len));
    }
}

std::string command_input_unnamed_bits(const void* in, std::size_t len) {
    if (len < ifc::cmd_in::size_bytes) return {};
    switch (static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in))) {
#define CXV_CASE(name, in_layout, out_layout) \
    case cmd_opcode::name:                    \
        return unnamed_bits<ifc::in_layout>(in, len);
        CXV_CMD_LAYOUTS(CXV_CASE)
#undef CXV_CASE
        default:
            return {};
    }
}

}  // namespace cxv::hw
