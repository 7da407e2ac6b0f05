// driver/vfio's device object against the layer's Linux 6.1 vfio-pci semantics: regions
// and their mmap areas, config space, interrupts other than MSI-X, the IOVA allocator's
// placement and alignment.
#include <sys/mman.h>

#include <cerrno>
#include <fstream>

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "driver/vfio/vfio.h"
#include "tests/driver/test_util.h"
#include "tests/skip.h"

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

namespace {

// HugePages_Free in /proc/meminfo: 2 MiB pages no one holds.
long free_hugepages() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    long value = 0;
    while (in >> key >> value) {
        if (key == "HugePages_Free:") return value;
        in.ignore(256, '\n');
    }
    return 0;
}

}  // namespace

TEST_CASE("2 MiB hugepage DMA: whole hugepages, the IOVA aligned to them" *
          cxv::test::skip_unless(free_hugepages() > 0,
                                 "no free 2 MiB hugepages (tools/setup reserves 8: /proc/sys/vm/nr_hugepages)")) {
    auto dev = test::open_device();
    auto huge = dev->alloc_dma_huge(100);
    REQUIRE_MESSAGE(huge.ok(), huge.error().message);
    CHECK(huge->size() == (std::size_t{2} << 20));
    CHECK(huge->iova() % (std::size_t{2} << 20) == 0);
    CHECK_FALSE(dev->alloc_dma_huge(0).ok());
}

TEST_CASE("2 MiB hugepage DMA: with none free, a clear error that says how to reserve them") {
    auto dev = test::open_device();
    // Every free hugepage taken here first (bounded: 16 GiB of them at most).
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    std::vector<void*> held;
    for (int i = 0; i < 8192; ++i) {
        void* p = ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p == MAP_FAILED) break;
        held.push_back(p);
    }
    auto huge = dev->alloc_dma_huge(100);
    for (void* p : held) ::munmap(p, kHuge);
    REQUIRE_FALSE(huge.ok());
    CHECK(huge.error().code == ENOMEM);
    CHECK_MESSAGE(huge.error().message.find("nr_hugepages") != std::string::npos, huge.error().message);
}
