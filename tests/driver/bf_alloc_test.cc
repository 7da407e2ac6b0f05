// driver::bf_allocator: BlueFlame register handout from UAR pages, with ALLOC_UAR played
// by a function of the test.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "driver/hca/bf_alloc.h"
#include "hw/doorbell.h"

using cxv::driver::bf_allocator;
using cxv::driver::bf_reg;

namespace {

constexpr std::size_t kBar = 64 * cxv::hw::uar_page_size;

// ALLOC_UAR giving pages 5, 6, ... and counting its calls.
struct fake_uars {
    std::uint32_t next = 5;
    int calls = 0;
    auto fn() {
        return [this]() -> cxv::result<std::uint32_t> {
            ++calls;
            return next++;
        };
    }
};

}  // namespace

TEST_CASE("registers fill the second half of a UAR page, each handed out once") {
    fake_uars f;
    bf_allocator a(f.fn(), kBar, 8, "test");  // 256-byte registers: 8 in the half page
    std::set<std::pair<std::uint32_t, std::size_t>> seen;
    for (int i = 0; i < 8; ++i) {
        auto r = a.alloc();
        REQUIRE(r.ok());
        CHECK(r->uar == 5);
        CHECK(r->size == 256);
        CHECK(r->offset >= cxv::hw::uar_bf_offset);
        CHECK(r->offset + r->size <= cxv::hw::uar_page_size);
        CHECK(r->offset % 256 == 0);
        CHECK(seen.insert({r->uar, r->offset}).second);
    }
    CHECK(f.calls == 1);
    // The page is used up: the next register comes from a new one.
    auto r = a.alloc();
    REQUIRE(r.ok());
    CHECK(r->uar == 6);
    CHECK(f.calls == 2);
    CHECK(a.uars() == std::vector<std::uint32_t>{5, 6});
}

TEST_CASE("a freed register is handed out again before any new UAR page") {
    fake_uars f;
    bf_allocator a(f.fn(), kBar, 11, "test");  // one 2 KiB register per page
    auto r1 = a.alloc();
    REQUIRE(r1.ok());
    CHECK(r1->offset == cxv::hw::uar_bf_offset);
    a.free(*r1);
    auto r2 = a.alloc();
    REQUIRE(r2.ok());
    CHECK(r2->uar == r1->uar);
    CHECK(r2->offset == r1->offset);
    CHECK(f.calls == 1);
}

TEST_CASE("a UAR beyond BAR0 or an impossible register size is refused, and the page still listed") {
    SUBCASE("UAR beyond BAR0") {
        fake_uars f;
        f.next = 64;  // pages 0..63 fit
        bf_allocator a(f.fn(), kBar, 8, "test");
        auto r = a.alloc();
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == EPROTO);
        CHECK(a.uars() == std::vector<std::uint32_t>{64});  // deallocated at teardown all the same
    }
    SUBCASE("registers larger than the half page") {
        fake_uars f;
        bf_allocator a(f.fn(), kBar, 12, "test");
        auto r = a.alloc();
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == EPROTO);
    }
    SUBCASE("registers smaller than 64 bytes") {
        fake_uars f;
        bf_allocator a(f.fn(), kBar, 5, "test");
        CHECK_FALSE(a.alloc().ok());
    }
    SUBCASE("ALLOC_UAR fails") {
        bf_allocator a([]() -> cxv::result<std::uint32_t> { return cxv::error{EAGAIN, "no UAR"}; }, kBar, 8, "test");
        auto r = a.alloc();
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == EAGAIN);
        CHECK(a.uars().empty());
    }
    CHECK(bf_allocator::check_uar(63, kBar, "test").ok());
    CHECK_FALSE(bf_allocator::check_uar(64, kBar, "test").ok());
}
