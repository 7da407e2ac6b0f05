// Big-endian scalar types for hardware data (WQEs, CQEs, EQEs, doorbell records).
//
// The PRM describes every structure the HCA reads or writes in big-endian byte order.
// These types hold the device's byte order in memory and convert only through named
// accessors, so a missing swap is a type error rather than a silent bug.
#pragma once

#include <cstdint>
#include <type_traits>

namespace cxv::hw {

namespace detail {

template <typename T>
constexpr T byteswap(T v) noexcept {
    static_assert(std::is_unsigned_v<T>);
    if constexpr (sizeof(T) == 1) {
        return v;
    } else if constexpr (sizeof(T) == 2) {
        return static_cast<T>(__builtin_bswap16(v));
    } else if constexpr (sizeof(T) == 4) {
        return static_cast<T>(__builtin_bswap32(v));
    } else {
        static_assert(sizeof(T) == 8);
        return static_cast<T>(__builtin_bswap64(v));
    }
}

}  // namespace detail

// Converts between host and big-endian order (a no-op on big-endian hosts).
template <typename T>
constexpr T to_be(T v) noexcept {
    if constexpr (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
        return detail::byteswap(v);
    } else {
        return v;
    }
}

template <typename T>
constexpr T from_be(T v) noexcept {
    return to_be(v);
}

// A big-endian 16-bit value as a host-order 32-bit one (the upper half zero), for
// arithmetic in 32-bit words: on x86-64 a zero-extending load and a ROL of the low
// word; GCC 12 narrows `__builtin_bswap16(v) & mask` to 16 bits and widens it again.
inline std::uint32_t from_be16_widened(std::uint16_t v) noexcept {
#if defined(__x86_64__)
    std::uint32_t r = v;
    __asm__("rolw $8, %w0" : "+r"(r));
    return r;
#else
    return from_be(v);
#endif
}

// A big-endian 32-bit value as a host-order 64-bit one (the upper half zero), for
// arithmetic in 64-bit words. On x86-64 this is one BSWAP of the 32-bit register,
// which clears the upper half; GCC 12 follows __builtin_bswap32 with a widening move.
inline std::uint64_t from_be_widened(std::uint32_t v) noexcept {
#if defined(__x86_64__)
    std::uint64_t r = v;
    __asm__("bswap %k0" : "+r"(r));
    return r;
#else
    return from_be(v);
#endif
}

// A big-endian value of type T as stored in device-visible memory. Trivial, so it can
// live in structures the device reads, and the same size and alignment as T.
template <typename T>
struct big_endian {
    static_assert(std::is_unsigned_v<T>);
    using value_type = T;

    T raw;  // bytes exactly as they sit in memory

    static constexpr big_endian from(T host) noexcept { return big_endian{to_be(host)}; }
    constexpr T value() const noexcept { return from_be(raw); }
    constexpr void set(T host) noexcept { raw = to_be(host); }

    friend constexpr bool operator==(big_endian a, big_endian b) noexcept { return a.raw == b.raw; }
};

using be16 = big_endian<std::uint16_t>;
using be32 = big_endian<std::uint32_t>;
using be64 = big_endian<std::uint64_t>;

static_assert(sizeof(be16) == 2 && alignof(be16) == 2);
static_assert(sizeof(be32) == 4 && alignof(be32) == 4);
static_assert(sizeof(be64) == 8 && alignof(be64) == 8);
static_assert(std::is_trivial_v<be32> && std::is_standard_layout_v<be32>);
static_assert(be32::from(0x01020304).value() == 0x01020304);

}  // namespace cxv::hw
