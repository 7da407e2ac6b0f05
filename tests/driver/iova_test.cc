// driver::vfio::iova_allocator: first-fit, aligned IOVA reservations inside the IOMMU's
// usable ranges, without a device.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "driver/vfio/iova.h"

using cxv::driver::vfio::iova_allocator;

TEST_CASE("reservations are first fit, aligned, and never overlap") {
    iova_allocator a({{0x10000, 0xffffff}});
    const auto r1 = a.reserve(0x1000, 0x1000);
    REQUIRE(r1);
    CHECK(*r1 == 0x10000);  // the range's start
    const auto r2 = a.reserve(0x3000, 0x1000);
    REQUIRE(r2);
    CHECK(*r2 == 0x11000);  // right after the first
    const auto r3 = a.reserve(0x1000, 0x10000);
    REQUIRE(r3);
    CHECK(*r3 == 0x20000);  // the next 64 KiB boundary clear of both
    CHECK(*r3 % 0x10000 == 0);
}

TEST_CASE("IOVA 0 is never handed out, even where the range starts there") {
    iova_allocator a({{0, 0xfffff}});
    const auto r = a.reserve(0x1000, 0x1000);
    REQUIRE(r);
    CHECK(*r == iova_allocator::page_size);
}

TEST_CASE("a released reservation's space is reused") {
    iova_allocator a({{0x10000, 0xffffff}});
    const auto r1 = a.reserve(0x2000, 0x1000);
    const auto r2 = a.reserve(0x2000, 0x1000);
    REQUIRE(r1);
    REQUIRE(r2);
    a.release(*r1);
    const auto r3 = a.reserve(0x1000, 0x1000);
    REQUIRE(r3);
    CHECK(*r3 == *r1);
    // A reservation larger than the hole goes after the others.
    const auto r4 = a.reserve(0x4000, 0x1000);
    REQUIRE(r4);
    CHECK(*r4 == *r2 + 0x2000);
}

TEST_CASE("a range too small is skipped for the next; no room anywhere gives nothing") {
    iova_allocator a({{0x10000, 0x11fff}, {0x100000, 0x1fffff}});
    const auto small = a.reserve(0x2000, 0x1000);
    REQUIRE(small);
    CHECK(*small == 0x10000);
    const auto next = a.reserve(0x2000, 0x1000);  // the first range is full
    REQUIRE(next);
    CHECK(*next == 0x100000);
    CHECK_FALSE(a.reserve(0x200000, 0x1000));      // larger than any range
    // A reservation ending exactly at a range's last byte fits.
    iova_allocator b({{0x10000, 0x13fff}});
    const auto whole = b.reserve(0x4000, 0x1000);
    REQUIRE(whole);
    CHECK(*whole == 0x10000);
    CHECK_FALSE(b.reserve(0x1000, 0x1000));
}

TEST_CASE("a range at the top of the address space does not wrap around") {
    iova_allocator a({{0xfffffffffff00000ull, 0xffffffffffffffffull}});
    const auto r = a.reserve(0x1000, 0x1000);
    REQUIRE(r);
    CHECK(*r == 0xfffffffffff00000ull);
    // What would end on the last byte makes the end address wrap to 0: refused, never
    // placed at a wrapped-around IOVA.
    CHECK_FALSE(a.reserve(0xff000, 0x1000));
    const auto below = a.reserve(0xfe000, 0x1000);
    REQUIRE(below);
    CHECK(*below == 0xfffffffffff01000ull);
}

namespace {

// The plain first fit the allocator must agree with: each range in address order, from its
// start (never below one page), moved past whatever reservation it meets.
struct reference {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // first, last; sorted
    std::map<std::uint64_t, std::uint64_t> used;

    std::optional<std::uint64_t> reserve(std::uint64_t size, std::uint64_t align) {
        for (const auto& [first, last] : ranges) {
            std::uint64_t at = (std::max<std::uint64_t>(first, iova_allocator::page_size) + align - 1) & ~(align - 1);
            for (;;) {
                if (at + size < at || at + size - 1 > last) break;
                bool moved = false;
                for (const auto& [u, n] : used) {
                    if (u < at + size && at < u + n) {
                        at = (u + n + align - 1) & ~(align - 1);
                        moved = true;
                        break;
                    }
                }
                if (!moved) {
                    used[at] = size;
                    return at;
                }
            }
        }
        return std::nullopt;
    }
};

}  // namespace

TEST_CASE("random reservations and releases agree with a plain first fit, gap for gap") {
    // Two ranges that touch (a reservation never spans both) and one apart.
    const std::vector<cxv::driver::vfio::iommu_info::range> ranges = {
        {0x0, 0x3fffff}, {0x400000, 0x7fffff}, {0x10000000, 0x10ffffff}};
    iova_allocator a(ranges);
    reference ref;
    for (const auto& r : ranges) ref.ranges.emplace_back(r.first, r.last);
    std::mt19937_64 rng(20261128);
    std::vector<std::uint64_t> held;
    unsigned placed = 0, refused = 0, released = 0;
    for (int step = 0; step < 6000; ++step) {
        if (!held.empty() && rng() % 3 == 0) {
            const std::size_t i = rng() % held.size();
            a.release(held[i]);
            ref.used.erase(held[i]);
            held[i] = held.back();
            held.pop_back();
            ++released;
            continue;
        }
        const std::uint64_t size = (1 + rng() % 64) * iova_allocator::page_size;
        const std::uint64_t align = iova_allocator::page_size << (rng() % 6);
        const auto want = ref.reserve(size, align);
        const auto got = a.reserve(size, align);
        REQUIRE_MESSAGE(want == got, "step ", step, ": size ", size, " align ", align);
        if (got) {
            held.push_back(*got);
            ++placed;
        } else {
            ++refused;
        }
    }
    MESSAGE("placed ", placed, ", refused ", refused, ", released ", released);
    CHECK(placed > 1000);
    CHECK(refused > 0);  // the ranges filled up at times
}

TEST_CASE("releasing an IOVA that was never reserved changes nothing") {
    iova_allocator a({{0x10000, 0x1ffff}});
    const auto r = a.reserve(0x1000, 0x1000);
    REQUIRE(r);
    a.release(*r + 0x1000);
    const auto next = a.reserve(0x1000, 0x1000);
    REQUIRE(next);
    CHECK(*next == *r + 0x1000);
}
