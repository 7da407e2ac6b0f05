// Linux's include/linux/mlx5/mlx5_ifc.h (6.1) for the model's tests: fields of command
// inputs, outputs and registers read and written at the offset and width Linux's driver
// uses, not through hw/'s layouts (which the model itself uses, so a mistake there
// would pass). mlx5_ifc.h declares one u8 per bit, so offsetof and sizeof are in bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "tests/hw/linux_mlx5_ifc.h"

namespace cxv::test {

// Bits [off, off + width) of a big-endian PRM structure (width <= 64; bit 0 is the most
// significant bit of byte 0). Past the end of `b`: std::out_of_range (a failed check).
inline std::uint64_t linux_bits(std::span<const std::byte> b, std::size_t off, std::size_t width) {
    if (width == 0 || width > 64 || off + width > b.size() * 8) throw std::out_of_range("field past the buffer");
    std::uint64_t v = 0;
    for (std::size_t bit = off; bit < off + width; ++bit) {
        v = (v << 1) | ((std::to_integer<unsigned>(b[bit / 8]) >> (7 - bit % 8)) & 1);
    }
    return v;
}

// The same bits written with the low `width` bits of v.
inline void linux_put(std::span<std::byte> b, std::size_t off, std::size_t width, std::uint64_t v) {
    if (width == 0 || width > 64 || off + width > b.size() * 8) throw std::out_of_range("field past the buffer");
    for (std::size_t i = 0; i < width; ++i) {
        const std::size_t bit = off + i;
        const auto mask = std::byte{static_cast<unsigned char>(0x80u >> (bit % 8))};
        if ((v >> (width - 1 - i)) & 1) {
            b[bit / 8] |= mask;
        } else {
            b[bit / 8] &= ~mask;
        }
    }
}

// The bytes a field of structure Bits is read from: a buffer as it is, or a pointer
// taken to hold the whole structure.
template <typename Bits>
std::span<const std::byte> linux_span(std::span<const std::byte> b) {
    return b;
}
template <typename Bits>
std::span<const std::byte> linux_span(const std::byte* p) {
    return {p, sizeof(Bits) / 8};
}

}  // namespace cxv::test

#define CXV_LINUX_OFF(typ, fld) offsetof(struct mlx5_ifc_##typ##_bits, fld)
#define CXV_LINUX_WIDTH(typ, fld) sizeof(((struct mlx5_ifc_##typ##_bits*)nullptr)->fld)
#define CXV_LINUX_BYTES(typ) (sizeof(struct mlx5_ifc_##typ##_bits) / 8)
// MLX5_GET / MLX5_SET as Linux does them. `b` is a buffer (a span, a vector) or, for
// GET, a pointer to a whole `typ`.
#define CXV_LINUX_SPAN(typ, b) ::cxv::test::linux_span<struct mlx5_ifc_##typ##_bits>(b)
#define CXV_LINUX_GET(typ, b, fld) \
    ::cxv::test::linux_bits(CXV_LINUX_SPAN(typ, b), CXV_LINUX_OFF(typ, fld), CXV_LINUX_WIDTH(typ, fld))
#define CXV_LINUX_SET(typ, b, fld, v) \
    ::cxv::test::linux_put((b), CXV_LINUX_OFF(typ, fld), CXV_LINUX_WIDTH(typ, fld), (v))
