// sim/wire/payload.h: payload_buffer behaves as the std::vector<std::byte> it replaces, inline
// up to its inline capacity and on the heap beyond, through copies, moves and growth.
#include "sim/wire/payload.h"

#include <doctest/doctest.h>

#include <random>
#include <span>
#include <utility>
#include <vector>

namespace cxv::sim::wire {
namespace {

constexpr std::size_t inline_max = payload_buffer::inline_capacity;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 31 + seed);
    return v;
}

bool same(const payload_buffer& b, const std::vector<std::byte>& v) {
    return b.size() == v.size() && std::equal(b.begin(), b.end(), v.begin());
}

TEST_CASE("a payload keeps up to its inline capacity inside the object") {
    payload_buffer b;
    CHECK(b.empty());
    CHECK(b.capacity() == inline_max);
    const std::byte* inside = b.data();
    const auto v = pattern(inline_max, 1);
    b.assign(v.begin(), v.end());
    CHECK(b.data() == inside);
    CHECK(same(b, v));
    b.push_back(std::byte{7});  // one more: to the heap
    CHECK(b.data() != inside);
    CHECK(b.size() == inline_max + 1);
    CHECK(std::equal(v.begin(), v.end(), b.begin()));
    CHECK(b.back() == std::byte{7});
}

TEST_CASE("payload_buffer follows std::vector through random operations") {
    std::mt19937_64 rng(7);
    payload_buffer b;
    std::vector<std::byte> v;
    for (int step = 0; step < 3000; ++step) {
        const std::size_t n = rng() % 3 == 0 ? rng() % 5000 : rng() % 300;
        const auto src = pattern(n, static_cast<unsigned>(step));
        switch (rng() % 9) {
        case 0: b.assign(src.begin(), src.end()); v.assign(src.begin(), src.end()); break;
        case 1: b.insert(b.end(), src.begin(), src.end()); v.insert(v.end(), src.begin(), src.end()); break;
        case 2: b.resize(n); v.resize(n); break;
        case 3: b.clear(); v.clear(); break;
        case 4: b.assign(n, std::byte{0x5a}); v.assign(n, std::byte{0x5a}); break;
        case 5: {  // copy, then the copy is used
            payload_buffer c(b);
            CHECK(c == b);
            b = c;
            break;
        }
        case 6: {  // move there and back
            payload_buffer c(std::move(b));
            CHECK(b.empty());
            b = std::move(c);
            break;
        }
        case 7: {  // insert in the middle
            const std::size_t at = v.empty() ? 0 : rng() % v.size();
            b.insert(b.begin() + at, src.begin(), src.end());
            v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), src.begin(), src.end());
            break;
        }
        default: b.reserve(n); v.reserve(n); break;
        }
        REQUIRE(same(b, v));
    }
}

TEST_CASE("copies and moves of inline and heap payloads") {
    for (const std::size_t n : {std::size_t{0}, std::size_t{64}, inline_max, inline_max + 1, std::size_t{4096}}) {
        CAPTURE(n);
        const auto v = pattern(n, 3);
        payload_buffer a;
        a.assign(v.begin(), v.end());
        payload_buffer copy = a;
        CHECK(same(copy, v));
        CHECK(copy.data() != a.data());
        const std::byte* heap = a.data();
        payload_buffer moved = std::move(a);
        CHECK(same(moved, v));
        CHECK(a.empty());
        if (n > inline_max) CHECK(moved.data() == heap);  // the heap block changes hands
        payload_buffer target;
        const auto big = pattern(5000, 4);
        target.assign(big.begin(), big.end());
        target = std::move(moved);
        CHECK(same(target, v));
        target = {};
        CHECK(target.empty());
        target = copy;
        CHECK(target == copy);
        target = target;  // self-assignment keeps the bytes
        CHECK(same(target, v));
    }
}

TEST_CASE("a payload is a contiguous range of bytes") {
    payload_buffer b;
    b.resize(10);
    CHECK(b[9] == std::byte{0});  // resize zeroes, as a vector's
    b[3] = std::byte{9};
    const std::span<const std::byte> s = b;
    CHECK(s.size() == 10);
    CHECK(s[3] == std::byte{9});
    const std::vector<std::byte> v(b.begin(), b.end());
    CHECK(same(b, v));
    payload_buffer c;
    c.assign(s.begin(), s.end());
    CHECK(c == b);
    c[0] = std::byte{1};
    CHECK(c != b);
}

}  // namespace
}  // namespace cxv::sim::wire
