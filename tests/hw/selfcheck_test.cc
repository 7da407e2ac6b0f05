#include <doctest/doctest.h>

#include "hw/ifc.h"
#include "hw/selfcheck.h"

TEST_CASE("every scalar field of every layout owns exactly its bits") {
    const auto r = cxv::hw::run_layout_selfcheck();
    std::size_t expected_layouts = 0;
#define CXV_COUNT(cpp, prm) ++expected_layouts;
    CXV_IFC_LAYOUTS(CXV_COUNT)
#undef CXV_COUNT
    CHECK(r.layouts == expected_layouts);
    CHECK(r.scalars_checked > 0);
    CHECK(r.failures.empty());
    for (const auto& f : r.failures) MESSAGE("failed: ", f);
}
