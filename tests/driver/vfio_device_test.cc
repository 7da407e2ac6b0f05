// driver/vfio's device object against the layer's Linux 6.1 vfio-pci semantics: regions
// and their mmap areas, config space, interrupts other than MSI-X, the IOVA allocator's
// placement and alignment.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "driver/vfio/vfio.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace cxv::driver::vfio;

TEST_CASE("regions, config space and interrupt counts") {
    auto dev = test::open_device();
    auto bar = dev->region(0);
    REQUIRE(bar.ok());
    CHECK(bar->mappable);
    CHECK(bar->size == dev->bar0().size());
    REQUIRE(bar->mmap_areas.size() == 1);  // MSI-X mappable: the whole BAR
    CHECK(bar->mmap_areas[0].size == bar->size);
    auto cfg = dev->region(7);
    REQUIRE(cfg.ok());
    CHECK_FALSE(cfg->mappable);
    CHECK(cfg->mmap_areas.empty());
    CHECK(dev->config_read(0, 2).value() == 0x15b3);
    CHECK((dev->config_read(4, 2).value() & 0x6) == 0x6);  // memory decode and bus master on
    CHECK_FALSE(dev->config_read(0, 3).ok());
    CHECK(dev->irq_count(irq_kind::intx) == 1);
    CHECK(dev->irq_count(irq_kind::msix) == dev->msix_count());
    auto fd = dev->irq_eventfd(irq_kind::intx, 0);
    REQUIRE(fd.ok());
    CHECK(fd.value() >= 0);
    CHECK(dev->unmask_intx().ok());
    CHECK_FALSE(dev->irq_eventfd(irq_kind::intx, 1).ok());
    CHECK(dev->disable_irqs(irq_kind::intx).ok());
    // MSI-X after INTx is off.
    CHECK(dev->msix_eventfd(0).ok());
}

TEST_CASE("the IOVA allocator: inside the usable ranges, aligned, never overlapping, reused") {
    auto dev = test::open_device();
    const auto& info = dev->iommu();
    REQUIRE_FALSE(info.ranges.empty());
    CHECK((info.page_sizes & 4096) != 0);
    std::vector<dma_buffer> bufs;
    std::set<std::pair<std::uint64_t, std::uint64_t>> spans;
    for (std::size_t align : {std::size_t{4096}, std::size_t{1} << 16, std::size_t{2} << 20, std::size_t{4096}}) {
        auto b = dev->alloc_dma(3 * 4096, align);
        REQUIRE(b.ok());
        CHECK(b->iova() % align == 0);
        CHECK(b->size() == 3 * 4096);
        bool inside = false;
        for (const auto& r : info.ranges) inside |= b->iova() >= r.first && b->iova() + b->size() - 1 <= r.last;
        CHECK(inside);
        for (const auto& [lo, hi] : spans) CHECK((b->iova() + b->size() <= lo || b->iova() >= hi));
        spans.insert({b->iova(), b->iova() + b->size()});
        bufs.push_back(std::move(b).value());
    }
    // Freed space is found again.
    const auto first = bufs[0].iova();
    bufs[0] = dma_buffer{};
    auto again = dev->alloc_dma(4096);
    REQUIRE(again.ok());
    CHECK(again->iova() == first);
    // User memory at any alignment: the pages holding it.
    std::vector<char> mem(10000);
    auto m = dev->map_dma(mem.data() + 5, 9000);
    REQUIRE(m.ok());
    CHECK(m->data() <= reinterpret_cast<std::byte*>(mem.data() + 5));
    CHECK(m->iova_of(mem.data() + 5) % 4096 == reinterpret_cast<std::uintptr_t>(mem.data() + 5) % 4096);
    CHECK_FALSE(dev->alloc_dma(4096, 3000).ok());
}

TEST_CASE("2 MiB hugepage DMA: aligned when the system has hugepages, a clear error when not") {
    auto dev = test::open_device();
    auto huge = dev->alloc_dma_huge(100);
    if (huge.ok()) {
        CHECK(huge->size() == (std::size_t{2} << 20));
        CHECK(huge->iova() % (std::size_t{2} << 20) == 0);
    } else {
        MESSAGE("no hugepages here: " << huge.error().message);
        CHECK(huge.error().message.find("nr_hugepages") != std::string::npos);
    }
    CHECK_FALSE(dev->alloc_dma_huge(0).ok());
}
