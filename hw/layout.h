// Bit-exact descriptions of PRM command and context layouts.
//
// The PRM draws each command mailbox and context as a table of big-endian dwords, with
// fields given by bit range. We describe a structure once, as a table of fields with
// their absolute bit offset (bit 0 = the most significant bit of byte 0, the PRM's
// numbering, which is also how Linux's mlx5_ifc.h counts), and get typed accessors with
// compile-time offsets over a plain byte buffer. No C bit-fields anywhere: their order
// is the compiler's choice, the PRM's is not.
//
// A structure is declared with a field table and CXV_IFC_LAYOUT (see ifc_*.h):
//
//     #define CXV_IFC_cqc(F, S, A, T)  F(status, 0x000, 4)  F(log_cq_size, 0x0c3, 5)  ...
//     CXV_IFC_LAYOUT(cqc, 0x200)
//
// (each table entry on its own line, continued with a backslash), where the entries are
//
//   F(name, bit_offset, bit_width)            a scalar: at most 32 bits inside one dword,
//                                             or 64 bits starting on a dword
//   S(name, bit_offset, layout)               a nested structure
//   A(name, bit_offset, elem_bits, count)     an array of scalars of 8, 16, 32 or 64 bits;
//                                             count 0 means "runs to the end" (PRM lists)
//   T(name, bit_offset, layout, count)        an array of nested structures
//
// and used as:  set<cqc::log_cq_size>(buf, 10);  get<cqc::status>(buf);
//               nested<create_cq_in::cq_context>(buf) -> pointer to the cqc inside.
// Each layout also carries its field list for printers and conformance tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "hw/endian.h"

namespace cxv::hw::ifc {

enum class field_kind : std::uint8_t { scalar, nested, array, struct_array };

template <std::size_t Offset, std::size_t Width>
struct scalar_field {
    static constexpr field_kind kind = field_kind::scalar;
    static constexpr std::size_t bit_offset = Offset;
    static constexpr std::size_t bit_width = Width;
    using value_type = std::conditional_t<(Width <= 32), std::uint32_t, std::uint64_t>;

    static_assert(Width >= 1, "empty field");
    static_assert((Width <= 32 && Offset / 32 == (Offset + Width - 1) / 32) ||
                      (Width == 64 && Offset % 32 == 0),
                  "a scalar field is at most 32 bits inside one dword, or 64 bits on a dword;"
                  " describe anything else as an array");

    static constexpr value_type max_value =
        static_cast<value_type>(Width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << Width) - 1);
};

template <std::size_t Offset, typename Layout>
struct nested_field {
    static constexpr field_kind kind = field_kind::nested;
    static constexpr std::size_t bit_offset = Offset;
    static constexpr std::size_t bit_width = Layout::size_bits;
    using layout = Layout;
    static_assert(Offset % 8 == 0, "nested structures start on a byte");
};

template <std::size_t Offset, std::size_t ElemBits, std::size_t Count>
struct array_field {
    static constexpr field_kind kind = field_kind::array;
    static constexpr std::size_t bit_offset = Offset;
    static constexpr std::size_t elem_bits = ElemBits;
    static constexpr std::size_t count = Count;  // 0: runs to the end of the buffer
    static constexpr std::size_t bit_width = ElemBits * Count;
    using value_type = std::conditional_t<
        ElemBits == 8, std::uint8_t,
        std::conditional_t<ElemBits == 16, std::uint16_t,
                           std::conditional_t<ElemBits == 32, std::uint32_t, std::uint64_t>>>;
    static_assert(ElemBits == 8 || ElemBits == 16 || ElemBits == 32 || ElemBits == 64,
                  "array elements are 8, 16, 32 or 64 bits");
    static_assert(Offset % ElemBits == 0 || (ElemBits == 64 && Offset % 32 == 0),
                  "array elements are naturally aligned");
};

template <std::size_t Offset, typename Layout, std::size_t Count>
struct struct_array_field {
    static constexpr field_kind kind = field_kind::struct_array;
    static constexpr std::size_t bit_offset = Offset;
    static constexpr std::size_t count = Count;  // 0: runs to the end of the buffer
    static constexpr std::size_t bit_width = Layout::size_bits * Count;
    using layout = Layout;
    static_assert(Offset % 8 == 0 && Layout::size_bits % 8 == 0);
};

template <typename... Fields>
struct field_list {};

// Terminates the field lists that CXV_IFC_LAYOUT builds (the macro's trailing comma).
struct end_of_fields {
    static constexpr std::size_t bit_offset = 0;
    static constexpr std::size_t bit_width = 0;
};

// Calls fn(F{}) for each field F of Layout, in order.
template <typename Layout, typename Fn>
constexpr void for_each_field(Fn&& fn);

namespace detail {

inline std::uint32_t load_dword(const void* base, std::size_t byte_offset) noexcept {
    std::uint32_t raw;
    std::memcpy(&raw, static_cast<const std::byte*>(base) + byte_offset, sizeof(raw));
    return from_be(raw);
}

inline void store_dword(void* base, std::size_t byte_offset, std::uint32_t v) noexcept {
    const std::uint32_t raw = to_be(v);
    std::memcpy(static_cast<std::byte*>(base) + byte_offset, &raw, sizeof(raw));
}

// Checks at compile time that fields are in ascending order, do not overlap, and lie
// inside the structure; flexible arrays must come last.
template <std::size_t SizeBits, typename... Fields>
constexpr bool well_formed(field_list<Fields...>*) {
    // The last entry is end_of_fields; it stands for the end of the structure.
    std::size_t offsets[] = {Fields::bit_offset...};
    constexpr std::size_t widths[] = {Fields::bit_width...};
    offsets[sizeof...(Fields) - 1] = SizeBits;
    for (std::size_t i = 0; i + 1 < sizeof...(Fields); ++i) {
        if (offsets[i] + widths[i] > offsets[i + 1]) return false;
    }
    return true;
}

template <typename Fn, typename... Fields>
constexpr void for_each(field_list<Fields...>*, Fn& fn) {
    auto one = [&fn]<typename F>(F*) {
        if constexpr (!std::is_same_v<F, end_of_fields>) fn(F{});
    };
    (one(static_cast<Fields*>(nullptr)), ...);
}

}  // namespace detail

template <typename Layout, typename Fn>
constexpr void for_each_field(Fn&& fn) {
    detail::for_each(static_cast<typename Layout::fields*>(nullptr), fn);
}

// Reads a scalar field.
template <typename F>
inline typename F::value_type get(const void* base) noexcept {
    static_assert(F::kind == field_kind::scalar);
    constexpr std::size_t dword_byte = F::bit_offset / 32 * 4;
    if constexpr (F::bit_width == 64) {
        const std::uint64_t hi = detail::load_dword(base, dword_byte);
        return (hi << 32) | detail::load_dword(base, dword_byte + 4);
    } else {
        constexpr std::size_t shift = 32 - F::bit_offset % 32 - F::bit_width;
        return (detail::load_dword(base, dword_byte) >> shift) & F::max_value;
    }
}

// Writes a scalar field, leaving every other bit of its dword untouched. Bits of `v`
// above the field's width are dropped; use fits<F>() where that must not happen.
template <typename F>
inline void set(void* base, typename F::value_type v) noexcept {
    static_assert(F::kind == field_kind::scalar);
    constexpr std::size_t dword_byte = F::bit_offset / 32 * 4;
    if constexpr (F::bit_width == 64) {
        detail::store_dword(base, dword_byte, static_cast<std::uint32_t>(v >> 32));
        detail::store_dword(base, dword_byte + 4, static_cast<std::uint32_t>(v));
    } else {
        constexpr std::size_t shift = 32 - F::bit_offset % 32 - F::bit_width;
        constexpr std::uint32_t mask = F::max_value << shift;
        const std::uint32_t old = detail::load_dword(base, dword_byte);
        detail::store_dword(base, dword_byte, (old & ~mask) | ((v << shift) & mask));
    }
}

template <typename F>
constexpr bool fits(std::uint64_t v) noexcept {
    static_assert(F::kind == field_kind::scalar);
    return v <= F::max_value;
}

// The start of a nested structure, or of a (struct) array field.
template <typename F>
constexpr std::byte* at(void* base) noexcept {
    static_assert(F::bit_offset % 8 == 0);
    return static_cast<std::byte*>(base) + F::bit_offset / 8;
}

template <typename F>
constexpr const std::byte* at(const void* base) noexcept {
    static_assert(F::bit_offset % 8 == 0);
    return static_cast<const std::byte*>(base) + F::bit_offset / 8;
}

// Element i of a scalar array (big-endian in memory).
template <typename F>
inline typename F::value_type get(const void* base, std::size_t i) noexcept {
    static_assert(F::kind == field_kind::array);
    using T = typename F::value_type;
    T raw;
    std::memcpy(&raw, at<F>(base) + i * sizeof(T), sizeof(T));
    return from_be(raw);
}

template <typename F>
inline void set(void* base, std::size_t i, typename F::value_type v) noexcept {
    static_assert(F::kind == field_kind::array);
    using T = typename F::value_type;
    const T raw = to_be(v);
    std::memcpy(at<F>(base) + i * sizeof(T), &raw, sizeof(T));
}

// Element i of an array of structures.
template <typename F>
constexpr std::byte* at(void* base, std::size_t i) noexcept {
    static_assert(F::kind == field_kind::struct_array);
    return at<F>(base) + i * (F::layout::size_bits / 8);
}

template <typename F>
constexpr const std::byte* at(const void* base, std::size_t i) noexcept {
    static_assert(F::kind == field_kind::struct_array);
    return at<F>(base) + i * (F::layout::size_bits / 8);
}

}  // namespace cxv::hw::ifc

// --- the declaration macros ---------------------------------------------------------

#define CXV_IFC_DECL_F(n, off, w)                                  \
    struct n : ::cxv::hw::ifc::scalar_field<off, w> {             \
        static constexpr ::std::string_view name = #n;            \
    };
#define CXV_IFC_DECL_S(n, off, lay)                                \
    struct n : ::cxv::hw::ifc::nested_field<off, ::cxv::hw::ifc::lay> { \
        static constexpr ::std::string_view name = #n;            \
    };
#define CXV_IFC_DECL_A(n, off, eb, cnt)                            \
    struct n : ::cxv::hw::ifc::array_field<off, eb, cnt> {        \
        static constexpr ::std::string_view name = #n;            \
    };
#define CXV_IFC_DECL_T(n, off, lay, cnt)                           \
    struct n : ::cxv::hw::ifc::struct_array_field<off, ::cxv::hw::ifc::lay, cnt> { \
        static constexpr ::std::string_view name = #n;            \
    };
#define CXV_IFC_LIST(n, ...) n,

// Declares struct ::cxv::hw::ifc::<name> from the table CXV_IFC_<name>. Must be used
// inside namespace cxv::hw::ifc.
#define CXV_IFC_LAYOUT(lname, size) CXV_IFC_LAYOUT_RENAMED(lname, lname, size)

// The same, for the few PRM structures that have a field of their own name (C++ forbids
// a member named like its class): the C++ type is lname, the PRM name prm_name.
#define CXV_IFC_LAYOUT_RENAMED(lname, prm_name, size)                                    \
    struct lname {                                                                       \
        static constexpr ::std::string_view ifc_name = #prm_name;                        \
        static constexpr ::std::size_t size_bits = size;                                 \
        static constexpr ::std::size_t size_bytes = size / 8;                            \
        CXV_IFC_##lname(CXV_IFC_DECL_F, CXV_IFC_DECL_S, CXV_IFC_DECL_A, CXV_IFC_DECL_T)  \
        using fields = ::cxv::hw::ifc::field_list<CXV_IFC_##lname(                       \
            CXV_IFC_LIST, CXV_IFC_LIST, CXV_IFC_LIST, CXV_IFC_LIST)::cxv::hw::ifc::end_of_fields>; \
    };                                                                                   \
    static_assert(lname::size_bits % 32 == 0, #lname ": PRM structures are whole dwords"); \
    static_assert(::cxv::hw::ifc::detail::well_formed<lname::size_bits>(                 \
                      static_cast<lname::fields*>(nullptr)),                             \
                  #lname ": fields out of order, overlapping or outside the structure");
