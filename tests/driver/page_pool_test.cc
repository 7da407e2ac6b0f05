// driver::page_ledger, the firmware page pool's accounting, with no device behind it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "driver/hca/page_pool.h"

using cxv::driver::page_ledger;

namespace {

constexpr std::uint64_t kPage = page_ledger::page_size;
constexpr std::uint64_t kBlockA = 0x200000, kBlockB = 0x800000;

}  // namespace

TEST_CASE("a block is carved into pages handed out lowest first, each once") {
    page_ledger l;
    l.add_block(kBlockA, 4 * kPage);
    CHECK(l.free() == 4);
    CHECK(l.given() == 0);
    const auto got = l.hand_out(3);
    CHECK(got == std::vector<std::uint64_t>{kBlockA, kBlockA + kPage, kBlockA + 2 * kPage});
    CHECK(l.given() == 3);
    CHECK(l.free() == 1);
    // Asking for more than is free gives what there is.
    const auto rest = l.hand_out(5);
    CHECK(rest == std::vector<std::uint64_t>{kBlockA + 3 * kPage});
    CHECK(l.given() == 4);
    CHECK(l.hand_out(1).empty());
}

TEST_CASE("pages come from the first block with free pages, then the next") {
    page_ledger l;
    l.add_block(kBlockA, 2 * kPage);
    l.add_block(kBlockB, 2 * kPage);
    const auto got = l.hand_out(3);
    REQUIRE(got.size() == 3);
    CHECK(got[0] == kBlockA);
    CHECK(got[1] == kBlockA + kPage);
    CHECK(got[2] == kBlockB);
    CHECK(std::set<std::uint64_t>(got.begin(), got.end()).size() == 3);
}

TEST_CASE("a page given back is free again; one never given is refused") {
    page_ledger l;
    l.add_block(kBlockA, 2 * kPage);
    const auto got = l.hand_out(2);
    CHECK(l.give_back(got[1]));
    CHECK(l.given() == 1);
    CHECK(l.free() == 1);
    CHECK_FALSE(l.give_back(got[1]));          // already back
    CHECK_FALSE(l.give_back(kBlockB));         // never given
    CHECK_FALSE(l.give_back(kBlockA + 1));     // not a page address
    CHECK(l.given() == 1);
    // The page given back is the next one handed out.
    CHECK(l.hand_out(1) == std::vector<std::uint64_t>{got[1]});
}

TEST_CASE("undo returns pages the firmware did not take; forget_given frees them all") {
    page_ledger l;
    l.add_block(kBlockA, 8 * kPage);
    const auto first = l.hand_out(3);
    const auto second = l.hand_out(2);
    l.undo(second);
    CHECK(l.given() == 3);
    CHECK(l.free() == 5);
    l.forget_given();
    CHECK(l.given() == 0);
    CHECK(l.free() == 8);
    for (auto p : first) CHECK_FALSE(l.give_back(p));
}

TEST_CASE("release_empty takes out the blocks with no page given, and only those") {
    page_ledger l;
    l.add_block(kBlockA, 2 * kPage);
    l.add_block(kBlockB, 2 * kPage);
    const auto got = l.hand_out(3);  // both of A's pages, one of B's
    CHECK(l.release_empty().empty());
    CHECK(l.give_back(got[0]));
    CHECK(l.give_back(got[1]));
    CHECK(l.release_empty() == std::vector<std::uint64_t>{kBlockA});
    CHECK(l.free() == 1);  // B's other page
    CHECK(l.given() == 1);
    // A's pages are gone with it: never handed out again, nor taken back.
    CHECK(l.hand_out(4) == std::vector<std::uint64_t>{kBlockB + kPage});
    CHECK_FALSE(l.give_back(got[0]));
    CHECK(l.give_back(got[2]));
    CHECK(l.release_empty().empty());  // B's second page is still given
}
