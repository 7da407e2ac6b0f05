#include "sim/wire/crc.h"

#include <bit>
#include <cstring>

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

constexpr slice_tables<std::uint32_t, 0xedb88320u, 16> crc32_tables;  // 0x04C11DB7 reflected
constexpr slice_tables<std::uint16_t, 0xd008u, 16> vcrc_tables;        // 0x100B reflected

std::uint64_t load64(const std::byte* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

template <typename T, const auto& Tab>
T byte_step(T c, std::byte b) noexcept {
    return static_cast<T>((c >> 8) ^ Tab.t[0][(c ^ static_cast<std::uint8_t>(b)) & 0xff]);
}

// Slicing by 16: 16 bytes per step through 16 tables, then byte by byte. The register
// `c` is reflected and at most 32 bits wide, so it is XORed into the first 8 bytes.
template <typename T, const auto& Tab>
T sliced16(T c, const std::byte* p, std::size_t n) noexcept {
    const auto& t = Tab.t;
    while (n >= 16) {
        const std::uint64_t a = load64(p) ^ c, b = load64(p + 8);
        c = static_cast<T>(t[15][a & 0xff] ^ t[14][(a >> 8) & 0xff] ^ t[13][(a >> 16) & 0xff] ^
                           t[12][(a >> 24) & 0xff] ^ t[11][(a >> 32) & 0xff] ^ t[10][(a >> 40) & 0xff] ^
                           t[9][(a >> 48) & 0xff] ^ t[8][a >> 56] ^ t[7][b & 0xff] ^ t[6][(b >> 8) & 0xff] ^
                           t[5][(b >> 16) & 0xff] ^ t[4][(b >> 24) & 0xff] ^ t[3][(b >> 32) & 0xff] ^
                           t[2][(b >> 40) & 0xff] ^ t[1][(b >> 48) & 0xff] ^ t[0][b >> 56]);
        p += 16;
        n -= 16;
    }
    while (n-- > 0) c = byte_step<T, Tab>(c, *p++);
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

std::uint32_t crc32_sliced(std::uint32_t c, const std::byte* p, std::size_t n) noexcept;

#if defined(__x86_64__)
// CRC-32 by carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction", 2009), in the bit-reflected form: four 128-bit lanes are
// folded forward 512 bits at a time, then into one lane, then reduced to 64 and 32 bits,
// the last step by Barrett reduction. The constants are x^k mod P(x) for the fold
// distances, reflected (each is a 33-bit value), and Barrett's mu = x^64 / P(x) and P(x).
// n is a multiple of 16, at least 64.
#define CXV_CLMUL __attribute__((target("pclmul,sse4.1")))
CXV_CLMUL inline __m128i load(const std::byte* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); }
// a * x^k folded onto b: the low and high 64 bits of a times their constants.
CXV_CLMUL inline __m128i fold(__m128i a, __m128i k, __m128i b) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), b);
}
CXV_CLMUL std::uint32_t crc32_clmul(std::uint32_t c, const std::byte* p,
                                                                       std::size_t n) noexcept {
    const __m128i fold512 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);  // x^(512+32), x^(512-32) mod P
    const __m128i fold128 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);  // x^(128+32), x^(128-32) mod P
    const __m128i fold64 = _mm_set_epi64x(0, 0x163cd6124);              // x^64 mod P
    const __m128i barrett = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // mu, P
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(c)));
    __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
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
#endif

}  // namespace

std::uint32_t crc32_update(std::uint32_t c, std::span<const std::byte> bytes) noexcept {
    const std::byte* p = bytes.data();
    std::size_t n = bytes.size();
#if defined(__x86_64__)
    if (n >= 64 && have_clmul) {
        const std::size_t bulk = n & ~std::size_t{15};
        c = crc32_clmul(c, p, bulk);
        p += bulk;
        n -= bulk;
    }
#endif
    return crc32_sliced(c, p, n);
}

namespace {
std::uint32_t crc32_sliced(std::uint32_t c, const std::byte* p, std::size_t n) noexcept {
    return sliced16<std::uint32_t, crc32_tables>(c, p, n);
}
}  // namespace

std::uint16_t vcrc(std::span<const std::byte> bytes) noexcept {
    return static_cast<std::uint16_t>(~sliced16<std::uint16_t, vcrc_tables>(0xffff, bytes.data(), bytes.size()));
}

std::uint32_t icrc_roce(std::span<const std::byte> ip_to_pad, bool ipv6) noexcept {
    // The headers with variant fields go through a masked copy (IP + UDP + BTH: 60 bytes at
    // most); the rest is summed in place.
    const std::size_t ip = ipv6 ? 40 : 20, masked = ip + 8 + bth_bytes;
    std::byte h[40 + 8 + bth_bytes];
    std::memcpy(h, ip_to_pad.data(), masked);
    constexpr std::byte ones{0xff};
    if (ipv6) {  // RFC 8200 "IPv6 Header Format": version 4 bits, traffic class 8, flow label 20
        h[0] |= std::byte{0x0f};
        h[1] = h[2] = h[3] = ones;
        h[7] = ones;  // hop limit
    } else {          // RFC 791 "Internet Header Format"
        h[1] = ones;  // type of service (DSCP, ECN)
        h[8] = ones;  // time to live
        h[10] = h[11] = ones;  // header checksum
    }
    h[ip + 6] = h[ip + 7] = ones;  // UDP checksum
    h[ip + 8 + 4] = ones;          // BTH: FECN, BECN, resv6
    std::uint32_t c = crc32_update(after_masked_lrh(), {h, masked});
    c = crc32_update(c, ip_to_pad.subspan(masked));
    return ~c;
}

std::uint32_t icrc_ib(std::span<const std::byte> lrh_to_pad) noexcept {
    constexpr std::byte ones{0xff};
    const bool grh = (static_cast<std::uint8_t>(lrh_to_pad[1]) & 0x3) == 0x3;  // LRH LNH: IBA global
    const std::size_t masked = lrh_bytes + (grh ? grh_bytes : 0) + bth_bytes;
    std::byte h[lrh_bytes + grh_bytes + bth_bytes];
    std::memcpy(h, lrh_to_pad.data(), masked);
    std::size_t bth = lrh_bytes;
    if (grh) {
        for (std::size_t i = 0; i < lrh_bytes; ++i) h[i] = ones;
        h[8] |= std::byte{0x0f};  // GRH: IPVer 4 bits, TClass 8, FlowLabel 20
        h[9] = h[10] = h[11] = ones;
        h[15] = ones;  // HopLmt
        bth += grh_bytes;
    } else {
        h[0] |= std::byte{0xf0};  // LRH VL
    }
    h[bth + 4] = ones;
    std::uint32_t c = crc32_update(~0u, {h, masked});
    c = crc32_update(c, lrh_to_pad.subspan(masked));
    return ~c;
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
