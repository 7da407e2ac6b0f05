#include "sim/wire/crc.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <initializer_list>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "sim/wire/packet.h"

namespace cxv::sim::wire {
namespace {

static_assert(std::endian::native == std::endian::little, "the sliced CRCs load words little-endian");

// Tables for a reflected CRC, N bytes at a time ("slicing-by-N"): t[0] is the classic byte
// table; t[s][b] is the register after b followed by s zero bytes, so the N bytes of a word
// are looked up independently and their contributions XORed together.
template <typename T, T Poly, int N>
struct slice_tables {
    T t[N][256];
    constexpr slice_tables() : t{} {
        for (unsigned b = 0; b < 256; ++b) {
            T c = static_cast<T>(b);
            for (int k = 0; k < 8; ++k) c = (c & 1) ? static_cast<T>((c >> 1) ^ Poly) : static_cast<T>(c >> 1);
            t[0][b] = c;
        }
        for (int s = 1; s < N; ++s) {
            for (unsigned b = 0; b < 256; ++b) t[s][b] = static_cast<T>((t[s - 1][b] >> 8) ^ t[0][t[s - 1][b] & 0xff]);
        }
    }
};

// The VCRC's polynomial P(x) = x^16+x^12+x^3+x+1 times x^16 is a degree-32 polynomial P',
// and for a register r of the CRC-16, x^16 r (mod P') = x^16 (r mod P): the CRC-16 is the
// CRC-32 machinery with P' (reflected: 0xD008, the CRC-16's own reflected polynomial), its
// register in the low 16 bits. So both CRCs share one table layout and one folding loop.
using tables16 = std::uint32_t[16][256];
constexpr slice_tables<std::uint32_t, 0xedb88320u, 16> crc32_tables;  // 0x04C11DB7 reflected
constexpr slice_tables<std::uint32_t, 0x0000d008u, 16> vcrc_tables;   // 0x100B reflected

std::uint64_t load64(const std::byte* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Slicing by 16: 16 bytes per step through 16 tables, then byte by byte. The register is
// reflected, so it is XORed into the first 4 bytes.
std::uint32_t sliced16(const tables16& t, std::uint32_t c,
                       const std::byte* p, std::size_t n) noexcept {
    while (n >= 16) {
        const std::uint64_t a = load64(p) ^ c, b = load64(p + 8);
        c = t[15][a & 0xff] ^ t[14][(a >> 8) & 0xff] ^ t[13][(a >> 16) & 0xff] ^ t[12][(a >> 24) & 0xff] ^
            t[11][(a >> 32) & 0xff] ^ t[10][(a >> 40) & 0xff] ^ t[9][(a >> 48) & 0xff] ^ t[8][a >> 56] ^
            t[7][b & 0xff] ^ t[6][(b >> 8) & 0xff] ^ t[5][(b >> 16) & 0xff] ^ t[4][(b >> 24) & 0xff] ^
            t[3][(b >> 32) & 0xff] ^ t[2][(b >> 40) & 0xff] ^ t[1][(b >> 48) & 0xff] ^ t[0][b >> 56];
        p += 16;
        n -= 16;
    }
    while (n-- > 0) c = (c >> 8) ^ t[0][(c ^ static_cast<std::uint8_t>(*p++)) & 0xff];
    return c;
}

// The register state after the 8 bytes of ones that stand for the LRH (IBA 7.8.1; RoCEv2
// has no LRH and keeps the ones). Linux rxe starts its ICRC from the same constant.
constexpr std::uint32_t after_masked_lrh() {
    std::uint32_t c = ~0u;
    for (int i = 0; i < 8; ++i) c = (c >> 8) ^ crc32_tables.t[0][(c ^ 0xffu) & 0xff];
    return c;
}
static_assert(after_masked_lrh() == 0xdebb20e3u);

// The ICRC's variant fields (IBA 7.8.1), as a mask ORed onto the first 64 bytes of what
// it covers: every variant field lies there. Masking while the bytes are loaded needs no
// masked copy of the headers.
using header_mask = std::array<std::uint8_t, 64>;
constexpr header_mask no_mask{};
constexpr header_mask make_mask(std::initializer_list<std::size_t> ones, std::size_t low_nibble_at = 64) {
    header_mask m{};
    for (std::size_t i : ones) m[i] = 0xff;
    if (low_nibble_at < 64) m[low_nibble_at] = 0x0f;
    return m;
}
// RoCEv2 over IPv4 (RFC 791): TOS, TTL, header checksum; UDP checksum; BTH byte 4.
constexpr header_mask roce_v4_mask = make_mask({1, 8, 10, 11, 20 + 6, 20 + 7, 20 + 8 + 4});
// Over IPv6 (RFC 8200): traffic class and flow label (after the 4-bit version), hop limit.
constexpr header_mask roce_v6_mask = make_mask({1, 2, 3, 7, 40 + 6, 40 + 7, 40 + 8 + 4}, 0);
// IB without a GRH: the LRH's VL (the high nibble of byte 0); BTH byte 4.
constexpr header_mask ib_local_mask = [] {
    header_mask m = make_mask({lrh_bytes + 4});
    m[0] = 0xf0;
    return m;
}();
// IB with a GRH: the whole LRH, the GRH's TClass, FlowLabel and HopLmt; BTH byte 4.
constexpr header_mask ib_global_mask = make_mask({0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 15, lrh_bytes + grh_bytes + 4},
                                                 lrh_bytes);

// The tables with a mask on the first 64 bytes: those go through a masked copy.
std::uint32_t sliced_masked(const tables16& t, std::uint32_t c,
                            const std::byte* p, std::size_t n, const header_mask& m) noexcept {
    if (&m != &no_mask) {
        std::byte h[64]{};
        const std::size_t k = std::min<std::size_t>(n, 64);
        std::memcpy(h, p, k);
        for (std::size_t i = 0; i < 64; i += 8) {  // whole words; bytes past k are not summed
            const std::uint64_t v = load64(h + i) | load64(reinterpret_cast<const std::byte*>(m.data()) + i);
            std::memcpy(h + i, &v, 8);
        }
        c = sliced16(t, c, h, k);
        p += k;
        n -= k;
    }
    return sliced16(t, c, p, n);
}

struct clmul_constants {
    std::uint64_t fold512_lo, fold512_hi, fold128_lo, fold128_hi, fold64, mu, poly;
};
// x^k mod P for the fold distances, reflected (33-bit values), Barrett's mu = x^64 / P and
// P itself, reflected: reflect32(x^(d-32) mod P) << 1 for a 64-bit lane moved by d bits.
constexpr clmul_constants crc32_k{0x154442bd4, 0x1c6e41596, 0x1751997d0, 0x0ccaa009e, 0x163cd6124, 0x1f7011641,
                                  0x1db710641};
constexpr clmul_constants vcrc_k{0x09c2, 0x64b0, 0x1f9ea, 0x1e9de, 0x15864, 0x1b4b0b111, 0x1a011};

#if defined(__x86_64__)
// CRC by carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction", 2009), in the bit-reflected form: four 128-bit lanes are
// folded forward 512 bits at a time (one lane under 64 bytes), then into one lane; a last
// partial block is folded in by shifting the lane (below); then 128 bits are reduced to 64
// and 32, the last step by Barrett reduction. The first 64 bytes are ORed with `m` as
// they are loaded. n is at least 16.
#define CXV_CLMUL __attribute__((target("pclmul,sse4.1")))
CXV_CLMUL inline __m128i load(const void* q) { return _mm_loadu_si128(static_cast<const __m128i*>(q)); }
CXV_CLMUL inline __m128i load(const std::byte* q, const header_mask& m, std::size_t i) {
    return _mm_or_si128(load(q), load(m.data() + i));
}
// a * x^k folded onto b: the low and high 64 bits of a times their constants.
CXV_CLMUL inline __m128i fold(__m128i a, __m128i k, __m128i b) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), b);
}
// PSHUFB controls: 16 bytes from `shift_table + r` move a lane's first r bytes to its end
// (the others zero; the 0x80 bytes also select the first operand of a blend), from
// `shift_table + 16 + r` its last 16 - r bytes to its start.
alignas(16) constexpr std::uint8_t shift_table[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
template <const clmul_constants& k>
CXV_CLMUL std::uint32_t crc_clmul(std::uint32_t c, const std::byte* p, std::size_t n, const header_mask& m) noexcept {
    const __m128i fold512 = _mm_set_epi64x(static_cast<long long>(k.fold512_hi), static_cast<long long>(k.fold512_lo));
    const __m128i fold128 = _mm_set_epi64x(static_cast<long long>(k.fold128_hi), static_cast<long long>(k.fold128_lo));
    const __m128i fold64 = _mm_set_epi64x(0, static_cast<long long>(k.fold64));
    const __m128i barrett = _mm_set_epi64x(static_cast<long long>(k.mu), static_cast<long long>(k.poly));
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    const std::byte* const start = p;
    const std::size_t total = n;
    __m128i x0 = _mm_xor_si128(load(p, m, 0), _mm_cvtsi32_si128(static_cast<int>(c)));
    if (n >= 64) {
        __m128i x1 = load(p + 16, m, 16), x2 = load(p + 32, m, 32), x3 = load(p + 48, m, 48);
        p += 64;
        n -= 64;
        for (; n >= 64; p += 64, n -= 64) {
            x0 = fold(x0, fold512, load(p));
            x1 = fold(x1, fold512, load(p + 16));
            x2 = fold(x2, fold512, load(p + 32));
            x3 = fold(x3, fold512, load(p + 48));
        }
        x0 = fold(x0, fold128, x1);
        x0 = fold(x0, fold128, x2);
        x0 = fold(x0, fold128, x3);
        for (; n >= 16; p += 16, n -= 16) x0 = fold(x0, fold128, load(p));
    } else {  // 16..63 bytes: all of them under the mask
        p += 16;
        n -= 16;
        for (; n >= 16; p += 16, n -= 16) x0 = fold(x0, fold128, load(p, m, static_cast<std::size_t>(p - start)));
    }
    if (n != 0) {
        // r = n bytes remain: the lane and they are 16 + r bytes of the message, that is the
        // lane's first r bytes (as a block of 16, zeros before them) followed by a block of
        // its other 16 - r bytes and the r new ones, the last 16 bytes of the input (loaded
        // from its end, over bytes already folded, which the blend drops).
        __m128i last = load(start + total - 16);
        if (total <= 64) last = _mm_or_si128(last, load(m.data() + total - 16));
        const __m128i to_end = load(shift_table + n), to_start = load(shift_table + 16 + n);
        const __m128i tail = _mm_blendv_epi8(last, _mm_shuffle_epi8(x0, to_start), to_end);
        x0 = fold(_mm_shuffle_epi8(x0, to_end), fold128, tail);
    }
    // 128 -> 96 bits: the low 64 bits times x^(128-32) mod P, onto the high 64.
    __m128i t = _mm_clmulepi64_si128(x0, fold128, 0x10);
    x0 = _mm_xor_si128(_mm_srli_si128(x0, 8), t);
    // 96 -> 64 bits.
    t = _mm_srli_si128(x0, 4);
    x0 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x0, low32), fold64, 0x00), t);
    // Barrett: q = floor(x * mu), x - q * P.
    t = _mm_clmulepi64_si128(_mm_and_si128(x0, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    x0 = _mm_xor_si128(x0, t);
    return static_cast<std::uint32_t>(_mm_extract_epi32(x0, 1));
}
#undef CXV_CLMUL

// Decided once, at static initialization (before it, a caller gets the tables: correct too).
bool detect_clmul() noexcept {
    __builtin_cpu_init();  // may run before libgcc's own constructor has
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
const bool have_clmul = detect_clmul();
bool use_clmul = have_clmul;
#endif

// The raw register of a CRC over n bytes with the first 64 masked by m: the folding loop
// from 16 bytes on, the tables under 16 bytes and without PCLMULQDQ.
template <const clmul_constants& k>
inline std::uint32_t crc_update(const tables16& t, std::uint32_t c, const std::byte* p, std::size_t n,
                                const header_mask& m) noexcept {
#if defined(__x86_64__)
    if (n >= 16 && use_clmul) [[likely]] return crc_clmul<k>(c, p, n, m);
#endif
    return sliced_masked(t, c, p, n, m);
}

}  // namespace

namespace detail {
bool clmul_available() noexcept {
#if defined(__x86_64__)
    return have_clmul;
#else
    return false;
#endif
}
void use_clmul_for_test(bool on) noexcept {
#if defined(__x86_64__)
    use_clmul = on && have_clmul;
#else
    (void)on;
#endif
}
}  // namespace detail

std::uint32_t crc32_update(std::uint32_t c, std::span<const std::byte> bytes) noexcept {
    return crc_update<crc32_k>(crc32_tables.t, c, bytes.data(), bytes.size(), no_mask);
}

std::uint16_t vcrc(std::span<const std::byte> bytes) noexcept {
    return static_cast<std::uint16_t>(~crc_update<vcrc_k>(vcrc_tables.t, 0xffff, bytes.data(), bytes.size(), no_mask));
}

std::uint32_t icrc_roce(std::span<const std::byte> ip_to_pad, bool ipv6) noexcept {
    return ~crc_update<crc32_k>(crc32_tables.t, after_masked_lrh(), ip_to_pad.data(), ip_to_pad.size(),
                       ipv6 ? roce_v6_mask : roce_v4_mask);
}

std::uint32_t icrc_ib(std::span<const std::byte> lrh_to_pad) noexcept {
    const bool grh = (static_cast<std::uint8_t>(lrh_to_pad[1]) & 0x3) == 0x3;  // LRH LNH: IBA global
    return ~crc_update<crc32_k>(crc32_tables.t, ~0u, lrh_to_pad.data(), lrh_to_pad.size(),
                       grh ? ib_global_mask : ib_local_mask);
}

std::uint16_t ones_complement_sum(std::span<const std::byte> bytes, std::uint16_t sum) noexcept {
    // Summed as little-endian 32-bit words into 64 bits and byte-swapped at the end: the
    // one's complement sum does not depend on the byte order (RFC 1071 2.(B)).
    const std::byte* p = bytes.data();
    std::size_t n = bytes.size();
    std::uint64_t acc = 0;
    while (n >= 8) {
        const std::uint64_t v = load64(p);
        acc += (v & 0xffffffffu) + (v >> 32);
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        std::byte tail[8]{};
        std::memcpy(tail, p, n);
        const std::uint64_t v = load64(tail);
        acc += (v & 0xffffffffu) + (v >> 32);
    }
    while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
    const std::uint32_t be = __builtin_bswap16(static_cast<std::uint16_t>(acc));
    std::uint32_t s = be + sum;
    s = (s & 0xffff) + (s >> 16);
    return static_cast<std::uint16_t>(s);
}

}  // namespace cxv::sim::wire
