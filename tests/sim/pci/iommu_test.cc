// The model's IOMMU: VFIO type1 map/unmap rules, and device accesses that fault.
#include <cstdlib>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "sim/pci/iommu.h"

using cxv::sim::iommu;
using cxv::sim::map_error;

namespace {

struct pages {
    explicit pages(std::size_t n) : size(n * 4096) {
        p = static_cast<std::byte*>(std::aligned_alloc(4096, size));
        std::memset(p, 0, size);
    }
    ~pages() { std::free(p); }
    std::byte* p;
    std::size_t size;
};

}  // namespace

TEST_CASE("MAP_DMA: alignment, zero size and overlaps are refused as the kernel does") {
    iommu m;
    pages mem(8);
    CHECK(m.map(0x10000, mem.p, 0, true, true) == map_error::invalid);
    CHECK(m.map(0x10001, mem.p, 4096, true, true) == map_error::invalid);
    CHECK(m.map(0x10000, mem.p + 1, 4096, true, true) == map_error::invalid);
    CHECK(m.map(0x10000, mem.p, 100, true, true) == map_error::invalid);
    CHECK(m.map(0x10000, mem.p, 4 * 4096, true, true) == map_error::none);
    CHECK(m.map(0x12000, mem.p, 4096, true, true) == map_error::exists);
    CHECK(m.map(0xf000, mem.p, 2 * 4096, true, true) == map_error::exists);
    CHECK(m.map(0x14000, mem.p + 4 * 4096, 4096, true, true) == map_error::none);
    CHECK(m.mapping_count() == 2);
}

TEST_CASE("UNMAP_DMA removes whole mappings and refuses to split one") {
    iommu m;
    pages mem(8);
    REQUIRE(m.map(0x10000, mem.p, 4 * 4096, true, true) == map_error::none);
    CHECK_FALSE(m.unmap(0x11000, 4096).has_value());  // inside a mapping
    CHECK(m.unmap(0x20000, 4096).value() == 0);       // nothing there
    CHECK(m.unmap(0x10000, 4 * 4096).value() == 4 * 4096);
    CHECK(m.mapping_count() == 0);
}

TEST_CASE("UNMAP_DMA whose end splits a mapping unmaps nothing, not even whole ones before it") {
    iommu m;
    pages mem(8);
    REQUIRE(m.map(0x10000, mem.p, 4096, true, true) == map_error::none);
    REQUIRE(m.map(0x11000, mem.p + 4096, 4 * 4096, true, true) == map_error::none);
    CHECK_FALSE(m.unmap(0x10000, 3 * 4096).has_value());
    CHECK(m.mapping_count() == 2);
    const auto table = m.mappings();
    REQUIRE(table.size() == 2);
    CHECK(table[1].iova == 0x11000);
    CHECK(table[1].size == 4 * 4096);
    CHECK(table[1].vaddr == mem.p + 4096);
}

TEST_CASE("device reads and writes go through the table; outside it they fault and change nothing") {
    iommu m;
    pages mem(2);
    REQUIRE(m.map(0x40000, mem.p, 4096, true, true) == map_error::none);
    const char msg[] = "hello";
    CHECK(m.write(0x40010, msg, sizeof(msg)));
    CHECK(std::memcmp(mem.p + 0x10, msg, sizeof(msg)) == 0);
    char back[sizeof(msg)] = {};
    CHECK(m.read(0x40010, back, sizeof(back)));
    CHECK(std::memcmp(back, msg, sizeof(msg)) == 0);
    // Straddling the end of the mapping: refused as a whole.
    std::vector<char> big(32, 'x');
    CHECK_FALSE(m.write(0x40ff0, big.data(), big.size()));
    CHECK(mem.p[0xff0] == std::byte{0});
    CHECK(m.fault_count() == 1);
    CHECK(m.faults()[0].write);
    // After UNMAP the same IOVA faults at once (no cached translation).
    REQUIRE(m.unmap(0x40000, 4096).value() == 4096);
    CHECK_FALSE(m.read(0x40010, back, 1));
    CHECK(m.fault_count() == 2);
}

TEST_CASE("read-only mappings refuse device writes") {
    iommu m;
    pages mem(1);
    REQUIRE(m.map(0x8000, mem.p, 4096, true, false) == map_error::none);
    const int v = 7;
    CHECK_FALSE(m.write(0x8000, &v, sizeof(v)));
    int r = 0;
    CHECK(m.read(0x8000, &r, sizeof(r)));
}
