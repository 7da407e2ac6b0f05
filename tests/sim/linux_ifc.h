// Linux's include/linux/mlx5/mlx5_ifc.h (6.1) for the model's tests: a field of a
// command output read at the offset and width Linux's driver reads it, not through
// hw/'s layouts (which the model itself uses, so a mistake there would pass).
#pragma once
#include <cstddef>
#include <cstdint>

typedef std::uint8_t u8;
typedef std::uint16_t u16;
typedef std::uint32_t u32;
typedef std::uint64_t u64;
#ifndef BIT
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#endif
#ifndef __packed
#define __packed __attribute__((packed))
#endif
#include "tests/hw/linux/mlx5_ifc.h"

namespace cxv::test {

// Bits [bit_off, bit_off + width) of a big-endian PRM structure (width <= 32).
inline std::uint32_t linux_bits(const std::byte* base, std::size_t bit_off, std::size_t width) {
    std::uint64_t v = 0;
    const std::size_t first = bit_off / 8, last = (bit_off + width - 1) / 8;
    for (std::size_t i = first; i <= last; ++i) v = (v << 8) | std::to_integer<std::uint8_t>(base[i]);
    const std::size_t tail = (last + 1) * 8 - (bit_off + width);
    return static_cast<std::uint32_t>((v >> tail) & ((std::uint64_t{1} << width) - 1));
}

}  // namespace cxv::test

// MLX5_GET(typ, p, fld) as Linux reads it: mlx5_ifc_<typ>_bits' offset and width (one
// u8 per bit, so offsetof and sizeof are in bits).
#define CXV_LINUX_GET(typ, p, fld)                                      \
    ::cxv::test::linux_bits((p), offsetof(struct mlx5_ifc_##typ##_bits, fld), \
                            sizeof(((struct mlx5_ifc_##typ##_bits*)nullptr)->fld))
