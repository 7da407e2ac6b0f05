// fmt printers for hardware data, so that failures, traces and logs read as the PRM does:
//
//   fmt::print("{}", hw::ifc_view<ifc::create_cq_in>(buf));   create_cq_in{opcode=0x400 ...}
//   fmt::print("{}", cqe);                                     cqe{REQ qpn=0x12 wqe_counter=3 ...}
//   fmt::print("{}", hw::cmd_status::BAD_PARAM);               BAD_PARAM(0x3)
//
// Layout views print only non-zero fields (a command is mostly zeros); nested structures
// print recursively, arrays as their non-zero elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hw/cqe.h"
#include "hw/layout.h"
#include "hw/opcodes.h"
#include "hw/wqe.h"

namespace cxv::hw {

// A layout L over `size` bytes at p (size limits what is read: a short output mailbox
// prints only what it holds).
template <typename L>
struct ifc_view {
    const void* p;
    std::size_t size = L::size_bytes;
    explicit ifc_view(const void* data, std::size_t bytes = L::size_bytes) : p(data), size(bytes) {}
};

namespace detail {

template <typename L>
void format_layout(std::string& out, const void* p, std::size_t size) {
    out += L::ifc_name;
    out += '{';
    bool first = true;
    auto sep = [&] {
        if (!first) out += ' ';
        first = false;
    };
    ifc::for_each_field<L>([&]<typename F>(F) {
        const std::size_t end_byte = (F::bit_offset + F::bit_width + 7) / 8;
        if (end_byte > size) return;
        if constexpr (F::kind == ifc::field_kind::scalar) {
            const auto v = ifc::get<F>(p);
            if (v == 0) return;
            sep();
            fmt::format_to(std::back_inserter(out), "{}={:#x}", F::name, v);
        } else if constexpr (F::kind == ifc::field_kind::nested) {
            const std::string before = out;
            sep();
            out += F::name;
            out += '=';
            const auto mark = out.size();
            format_layout<typename F::layout>(out, ifc::at<F>(p), size - F::bit_offset / 8);
            // Leave out nested structures that are entirely zero.
            if (out.size() == mark + F::layout::ifc_name.size() + 2) out = before;
        } else if constexpr (F::kind == ifc::field_kind::array) {
            const std::size_t avail = (size - F::bit_offset / 8) / (F::elem_bits / 8);
            const std::size_t n = F::count == 0 ? avail : F::count;
            for (std::size_t i = 0; i < n && i < 64; ++i) {
                const auto v = ifc::get<F>(p, i);
                if (v == 0) continue;
                sep();
                fmt::format_to(std::back_inserter(out), "{}[{}]={:#x}", F::name, i, v);
            }
        } else {
            const std::size_t elem = F::layout::size_bytes;
            const std::size_t avail = (size - F::bit_offset / 8) / elem;
            const std::size_t n = F::count == 0 ? avail : F::count;
            for (std::size_t i = 0; i < n && i < 16; ++i) {
                const std::string before = out;
                sep();
                fmt::format_to(std::back_inserter(out), "{}[{}]=", F::name, i);
                const auto mark = out.size();
                format_layout<typename F::layout>(out, ifc::at<F>(p, i), elem);
                if (out.size() == mark + F::layout::ifc_name.size() + 2) out = before;
            }
        }
    });
    out += '}';
}

// Marks, in `named` (one flag per bit of the buffer), the bits that L's fields name, L
// starting at bit `base` of a buffer of `size` bytes.
template <typename L>
void mark_named(std::vector<bool>& named, std::size_t base, std::size_t size) {
    const auto mark = [&](std::size_t from, std::size_t bits) {
        for (std::size_t b = from; b < from + bits && b < size * 8; ++b) named[b] = true;
    };
    ifc::for_each_field<L>([&]<typename F>(F) {
        const std::size_t at = base + F::bit_offset;
        if (at >= size * 8) return;
        if constexpr (F::kind == ifc::field_kind::scalar) {
            mark(at, F::bit_width);
        } else if constexpr (F::kind == ifc::field_kind::nested) {
            mark_named<typename F::layout>(named, at, size);
        } else if constexpr (F::kind == ifc::field_kind::array) {
            mark(at, F::count == 0 ? size * 8 - at : F::count * F::elem_bits);
        } else {
            const std::size_t elem = F::layout::size_bytes * 8;
            const std::size_t n = F::count == 0 ? (size * 8 - at) / elem : F::count;
            for (std::size_t i = 0; i < n; ++i) mark_named<typename F::layout>(named, at + i * elem, size);
        }
    });
}

}  // namespace detail

template <typename L>
std::string to_string(ifc_view<L> v) {
    std::string out;
    detail::format_layout<L>(out, v.p, v.size);
    return out;
}

// The bits set in the `size` bytes at p that no field of L names (reserved in hw/'s
// layout, or a field hw/ does not describe), as " @0xBYTE=0xBITS" per byte; empty when
// there are none. A command trace shows with it what a driver sets that hw/ leaves out.
template <typename L>
std::string unnamed_bits(const void* p, std::size_t size) {
    std::vector<bool> named(size * 8);
    detail::mark_named<L>(named, 0, size);
    std::string out;
    const auto* bytes = static_cast<const std::uint8_t*>(p);
    for (std::size_t i = 0; i < size; ++i) {
        unsigned unnamed = 0;
        for (unsigned bit = 0; bit < 8; ++bit) {
            if (!named[i * 8 + bit]) unnamed |= 0x80u >> bit;  // PRM bit order: MSB first
        }
        if ((bytes[i] & unnamed) != 0) fmt::format_to(std::back_inserter(out), " @{:#x}={:#04x}", i, bytes[i] & unnamed);
    }
    return out;
}

std::string to_string(const wqe_ctrl_seg& s);
std::string to_string(const wqe_data_seg& s);
std::string to_string(const cqe64& c);

}  // namespace cxv::hw

template <typename L>
struct fmt::formatter<cxv::hw::ifc_view<L>> : fmt::formatter<std::string_view> {
    template <typename Ctx>
    auto format(const cxv::hw::ifc_view<L>& v, Ctx& ctx) const {
        return fmt::formatter<std::string_view>::format(cxv::hw::to_string(v), ctx);
    }
};

// Enums print as NAME(0xVALUE), or just the value when unknown.
#define CXV_HW_ENUM_FORMATTER(type)                                                        \
    template <>                                                                            \
    struct fmt::formatter<cxv::hw::type> : fmt::formatter<std::string_view> {             \
        template <typename Ctx>                                                            \
        auto format(cxv::hw::type v, Ctx& ctx) const {                                     \
            const auto n = cxv::hw::name(v);                                               \
            const auto value = static_cast<unsigned>(v);                                   \
            return fmt::format_to(ctx.out(), "{}({:#x})", n.empty() ? "unknown" : n, value); \
        }                                                                                  \
    };
CXV_HW_ENUM_FORMATTER(cmd_opcode)
CXV_HW_ENUM_FORMATTER(cmd_status)
CXV_HW_ENUM_FORMATTER(cmd_delivery_status)
CXV_HW_ENUM_FORMATTER(wqe_opcode)
CXV_HW_ENUM_FORMATTER(cqe_opcode)
CXV_HW_ENUM_FORMATTER(cqe_syndrome)
CXV_HW_ENUM_FORMATTER(event_type)
CXV_HW_ENUM_FORMATTER(port_change_subtype)
#undef CXV_HW_ENUM_FORMATTER

#define CXV_HW_STRUCT_FORMATTER(type)                                                      \
    template <>                                                                            \
    struct fmt::formatter<cxv::hw::type> : fmt::formatter<std::string_view> {             \
        template <typename Ctx>                                                            \
        auto format(const cxv::hw::type& v, Ctx& ctx) const {                              \
            return fmt::formatter<std::string_view>::format(cxv::hw::to_string(v), ctx);   \
        }                                                                                  \
    };
CXV_HW_STRUCT_FORMATTER(wqe_ctrl_seg)
CXV_HW_STRUCT_FORMATTER(wqe_data_seg)
CXV_HW_STRUCT_FORMATTER(cqe64)
#undef CXV_HW_STRUCT_FORMATTER
