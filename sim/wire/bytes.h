// Field access in frames: the wire is big-endian (IBA 5.2.1; RFC 1700's network order),
// except the ICRC and VCRC, which are stored as little-endian words. Whole words are
// byte-swapped and stored at once. For sim/wire (frame.cc, neighbour.cc) and the MADs of
// sim/link/subnet_admin.cc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cxv::sim::wire {

inline void put8(std::byte* p, std::uint32_t v) noexcept { p[0] = static_cast<std::byte>(v); }
inline void put16(std::byte* p, std::uint32_t v) noexcept {
    const std::uint16_t be = __builtin_bswap16(static_cast<std::uint16_t>(v));
    std::memcpy(p, &be, 2);
}
inline void put32(std::byte* p, std::uint32_t v) noexcept {
    const std::uint32_t be = __builtin_bswap32(v);
    std::memcpy(p, &be, 4);
}
inline void put64(std::byte* p, std::uint64_t v) noexcept {
    const std::uint64_t be = __builtin_bswap64(v);
    std::memcpy(p, &be, 8);
}
inline void put_le32(std::byte* p, std::uint32_t v) noexcept { std::memcpy(p, &v, 4); }

template <typename T>
inline T load(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline std::uint8_t get8(const std::byte* p) noexcept { return static_cast<std::uint8_t>(p[0]); }
inline std::uint16_t get16(const std::byte* p) noexcept { return __builtin_bswap16(load<std::uint16_t>(p)); }
inline std::uint32_t get32(const std::byte* p) noexcept { return __builtin_bswap32(load<std::uint32_t>(p)); }
inline std::uint32_t get24(const std::byte* p) noexcept { return std::uint32_t{get8(p)} << 16 | get16(p + 1); }
inline std::uint64_t get64(const std::byte* p) noexcept { return __builtin_bswap64(load<std::uint64_t>(p)); }
inline std::uint32_t get_le32(const std::byte* p) noexcept { return load<std::uint32_t>(p); }

// Addresses and other byte strings, as they are.
template <std::size_t N>
inline void put_bytes(std::byte* p, const std::array<std::uint8_t, N>& a) noexcept {
    std::memcpy(p, a.data(), N);
}
template <std::size_t N>
inline void get_bytes(std::array<std::uint8_t, N>& a, const std::byte* p) noexcept {
    std::memcpy(a.data(), p, N);
}

}  // namespace cxv::sim::wire
