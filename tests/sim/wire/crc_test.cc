// sim/wire/crc.h against bit-at-a-time references written here from the definitions, the
// published check value of CRC-32, and packets captured on a real InfiniBand link.
#include "sim/wire/crc.h"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "sim/wire/frame.h"
#include "tests/sim/wire/wire_test_util.h"

namespace cxv::sim::wire {
namespace {

using test::from_hex;

// Reflected CRC one bit at a time: the definition, with nothing shared with crc.cc.
template <typename T>
T bitwise_crc(T poly, T init, const std::vector<std::byte>& v) {
    T c = init;
    for (std::byte b : v) {
        c ^= static_cast<std::uint8_t>(b);
        for (int k = 0; k < 8; ++k) c = (c & 1) ? static_cast<T>((c >> 1) ^ poly) : static_cast<T>(c >> 1);
    }
    return static_cast<T>(~c);
}

// RFC 1071 as written: big-endian 16-bit words, end-around carry.
std::uint16_t naive_sum(const std::vector<std::byte>& v) {
    std::uint32_t s = 0;
    for (std::size_t i = 0; i < v.size(); i += 2) {
        const std::uint32_t hi = static_cast<std::uint8_t>(v[i]);
        const std::uint32_t lo = i + 1 < v.size() ? static_cast<std::uint8_t>(v[i + 1]) : 0;
        s += hi << 8 | lo;
        s = (s & 0xffff) + (s >> 16);
    }
    return static_cast<std::uint16_t>(s);
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> v(n);
    for (auto& b : v) b = static_cast<std::byte>(rng());
    return v;
}

using test::ib_ack;
using test::ib_ud_grh;

// The CRCs have two implementations, PCLMULQDQ folding and slicing tables (the fallback for
// CPUs without it): every check runs on both.
std::vector<bool> paths() {
    if (detail::clmul_available()) return {false, true};
    MESSAGE("no PCLMULQDQ on this CPU: only the tables are tested");
    return {false};
}
struct path_guard {
    explicit path_guard(bool clmul) { detail::use_clmul_for_test(clmul); }
    ~path_guard() { detail::use_clmul_for_test(true); }
};

std::uint32_t le32(const std::byte* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<std::uint8_t>(p[i]);
    return v;
}

TEST_CASE("crc32 has CRC-32's check value and equals the bitwise definition at every length and split") {
    for (const bool clmul : paths()) {
        CAPTURE(clmul);
        const path_guard g(clmul);
        const char* check = "123456789";
        CHECK(crc32(std::as_bytes(std::span(check, 9))) == 0xcbf43926u);
        std::mt19937_64 rng(1);
        for (std::size_t n = 0; n < 300; ++n) {
            const auto v = random_bytes(rng, n);
            REQUIRE(crc32(v) == bitwise_crc<std::uint32_t>(0xedb88320u, ~0u, v));
            const std::size_t cut = n == 0 ? 0 : rng() % n;
            const std::span<const std::byte> s(v);
            CHECK(~crc32_update(crc32_update(~0u, s.first(cut)), s.subspan(cut)) == crc32(v));
        }
        const auto big = random_bytes(rng, 4096 + 7);
        CHECK(crc32(std::span(big).subspan(3)) ==
              bitwise_crc<std::uint32_t>(0xedb88320u, ~0u, std::vector(big.begin() + 3, big.end())));
    }
}

TEST_CASE("vcrc equals the bitwise CRC-16 with polynomial 0x100B at every length") {
    for (const bool clmul : paths()) {
        CAPTURE(clmul);
        const path_guard g(clmul);
        std::mt19937_64 rng(2);
        for (std::size_t n = 0; n < 300; ++n) {
            const auto v = random_bytes(rng, n);
            REQUIRE(vcrc(v) == bitwise_crc<std::uint16_t>(0xd008, 0xffff, v));  // 0x100B reflected
        }
        // Frame lengths up to the largest IB frame, at odd offsets.
        for (const std::size_t n : {511u, 1024u, 2048u + 13, 4096u + 26, 4202u}) {
            const auto v = random_bytes(rng, n + 5);
            const std::span<const std::byte> s = std::span(v).subspan(5);
            CHECK(vcrc(s) == bitwise_crc<std::uint16_t>(0xd008, 0xffff, std::vector(v.begin() + 5, v.end())));
        }
    }
}

TEST_CASE("PCLMULQDQ and the tables agree on every length to 4200 bytes") {
    if (!detail::clmul_available()) return;
    std::mt19937_64 rng(5);
    const auto v = random_bytes(rng, 4200 + 16);
    for (std::size_t n = 0; n <= 4200; ++n) {
        const std::span<const std::byte> s = std::span(v).subspan(n % 16, n);
        std::uint16_t vc[2];
        std::uint32_t c[2], ib[2], roce[2];
        for (const bool clmul : {false, true}) {
            const path_guard g(clmul);
            vc[clmul] = vcrc(s);
            c[clmul] = crc32(s);
            if (n >= 64) {
                ib[clmul] = icrc_ib(s);
                roce[clmul] = icrc_roce(s, n % 2 == 0);
            }
        }
        CAPTURE(n);
        REQUIRE(vc[0] == vc[1]);
        REQUIRE(c[0] == c[1]);
        if (n >= 64) {
            REQUIRE(ib[0] == ib[1]);
            REQUIRE(roce[0] == roce[1]);
        }
    }
}

TEST_CASE("ICRC and VCRC of packets captured on a real InfiniBand link") {
    for (const bool clmul : paths()) {
        CAPTURE(clmul);
        const path_guard g(clmul);
        for (const char* hex : {ib_ack, ib_ud_grh}) {
            const auto f = from_hex(hex);
            CAPTURE(f.size());
            const std::span<const std::byte> s(f);
            const std::size_t icrc_at = f.size() - 6;
            CHECK(icrc_ib(s.first(icrc_at)) == le32(f.data() + icrc_at));
            const std::uint16_t v = vcrc(s.first(f.size() - 2));
            CHECK(static_cast<std::uint8_t>(f[f.size() - 2]) == (v & 0xff));  // little-endian on the wire
            CHECK(static_cast<std::uint8_t>(f[f.size() - 1]) == (v >> 8));
        }
        // Without a GRH only the LRH's VL is variant: a different SL changes the ICRC, a different
        // VL does not. With a GRH the whole LRH is.
        auto ack = from_hex(ib_ack);
        const std::uint32_t icrc = icrc_ib(std::span(ack).first(24));
        ack[0] ^= std::byte{0x50};
        CHECK(icrc_ib(std::span(ack).first(24)) == icrc);
        ack[1] ^= std::byte{0x10};
        CHECK(icrc_ib(std::span(ack).first(24)) != icrc);
        auto ud = from_hex(ib_ud_grh);
        const std::span<const std::byte> uds = std::span(ud).first(ud.size() - 6);
        const std::uint32_t icrc_ud = icrc_ib(uds);
        ud[2] ^= std::byte{0x7f};  // DLID
        ud[9] ^= std::byte{0xff};  // traffic class and flow label
        ud[15] ^= std::byte{0x40};  // hop limit
        ud[52] ^= std::byte{0xc0};  // FECN, BECN
        CHECK(icrc_ib(uds) == icrc_ud);
        ud[13] ^= std::byte{0x01};  // PayLen is invariant
        CHECK(icrc_ib(uds) != icrc_ud);
    }
}

TEST_CASE("the RoCEv2 ICRC starts from the masked LRH and masks the IP/UDP/BTH variant fields") {
    for (const bool clmul : paths()) {
        CAPTURE(clmul);
        const path_guard g(clmul);
        std::mt19937_64 rng(3);
        for (std::size_t payload = 0; payload < 200; payload += 4) {
            for (const bool v6 : {false, true}) {
                CAPTURE(payload);
                CAPTURE(v6);
                const std::size_t ip = v6 ? 40 : 20;
                auto v = random_bytes(rng, ip + 8 + 12 + payload);
                v[0] = std::byte{static_cast<std::uint8_t>(v6 ? 0x60 : 0x45)};
                // The definition: CRC-32 over 8 bytes of ones, then the masked copy.
                std::vector<std::byte> ref(8, std::byte{0xff});
                auto m = v;
                if (v6) {
                    m[0] |= std::byte{0x0f};
                    m[1] = m[2] = m[3] = m[7] = std::byte{0xff};
                } else {
                    m[1] = m[8] = m[10] = m[11] = std::byte{0xff};
                }
                m[ip + 6] = m[ip + 7] = m[ip + 12] = std::byte{0xff};
                ref.insert(ref.end(), m.begin(), m.end());
                const std::uint32_t want = bitwise_crc<std::uint32_t>(0xedb88320u, ~0u, ref);
                CHECK(icrc_roce(v, v6) == want);
                v[ip + 8 + 5] ^= std::byte{1};  // DestQP is invariant
                CHECK(icrc_roce(v, v6) != want);
            }
        }
    }
}

TEST_CASE("the IB ICRC masks the LRH's VL, or with a GRH the LRH and the GRH's variant fields, at every length") {
    for (const bool clmul : paths()) {
        CAPTURE(clmul);
        const path_guard g(clmul);
        std::mt19937_64 rng(6);
        for (std::size_t payload = 0; payload < 200; payload += 4) {
            for (const bool grh : {false, true}) {
                CAPTURE(payload);
                CAPTURE(grh);
                const std::size_t bth = 8 + (grh ? 40 : 0);
                auto v = random_bytes(rng, bth + 12 + payload);
                v[1] = std::byte{static_cast<std::uint8_t>((static_cast<std::uint8_t>(v[1]) & 0xfc) | (grh ? 3 : 2))};
                auto m = v;  // the definition: a masked copy
                if (grh) {
                    for (std::size_t i = 0; i < 8; ++i) m[i] = std::byte{0xff};
                    m[8] |= std::byte{0x0f};
                    m[9] = m[10] = m[11] = m[15] = std::byte{0xff};
                } else {
                    m[0] |= std::byte{0xf0};
                }
                m[bth + 4] = std::byte{0xff};
                const std::uint32_t want = bitwise_crc<std::uint32_t>(0xedb88320u, ~0u, m);
                CHECK(icrc_ib(v) == want);
                v[bth + 5] ^= std::byte{1};  // DestQP is invariant
                CHECK(icrc_ib(v) != want);
            }
        }
    }
}

TEST_CASE("ones_complement_sum equals RFC 1071's word loop, in pieces too") {
    std::mt19937_64 rng(4);
    for (std::size_t n = 0; n < 200; ++n) {
        const auto v = random_bytes(rng, n);
        REQUIRE(ones_complement_sum(v) == naive_sum(v));
        const std::size_t cut = (n / 2) & ~std::size_t{1};
        const std::span<const std::byte> s(v);
        CHECK(ones_complement_sum(s.subspan(cut), ones_complement_sum(s.first(cut))) == naive_sum(v));
    }
    // A header with its checksum in place sums to all ones (RFC 1071 1.(3)).
    auto hdr = from_hex("4500003447a0400040110000a9fe0102a9fe0101");
    const std::uint16_t c = static_cast<std::uint16_t>(~ones_complement_sum(hdr));
    hdr[10] = std::byte(c >> 8);
    hdr[11] = std::byte(c & 0xff);
    CHECK(naive_sum(hdr) == 0xffff);
}

}  // namespace
}  // namespace cxv::sim::wire
