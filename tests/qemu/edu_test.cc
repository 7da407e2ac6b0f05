// driver/vfio against Linux's own vfio-pci: this program runs inside a QEMU guest (a
// stock Debian kernel with an emulated Intel IOMMU) on QEMU's `edu` teaching device,
// bound to vfio-pci, and goes through what the driver does on a ConnectX: container,
// group, device, regions, BAR mapping, IOMMU information, DMA mapping with real device
// DMA through the IOMMU, a DMA to an unmapped address that the IOMMU must block,
// INTx and MSI interrupts to eventfds. The edu device's address comes in CXV_EDU_BDF.
//
// edu's registers (QEMU docs/specs/edu.rst): 0x00 identification, 0x04 liveness
// (reads back the inverse of what was written), 0x24 interrupt status, 0x60 raise
// interrupt, 0x64 acknowledge, 0x80/0x88/0x90/0x98 DMA source, destination, count and
// command (bit 0 start, bit 1 edu→RAM); its DMA buffer is at 0x40000 in its own space.
#include <doctest/doctest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "driver/vfio/vfio.h"

using namespace cxv::driver::vfio;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kIdent = 0x00, kLiveness = 0x04, kIrqStatus = 0x24, kIrqRaise = 0x60, kIrqAck = 0x64;
constexpr std::size_t kDmaSrc = 0x80, kDmaDst = 0x88, kDmaCount = 0x90, kDmaCmd = 0x98;
constexpr std::uint64_t kEduBuffer = 0x40000;
constexpr std::uint32_t kDmaStart = 1, kDmaToRam = 2;
constexpr std::uint64_t kEduDmaMask = (1ull << 28) - 1;  // edu's DMA reaches 28 bits
constexpr std::size_t kLen = 3000;                       // QEMU 7.2's edu rejects a full 4096

std::unique_ptr<device> open_edu() {
    const char* bdf = std::getenv("CXV_EDU_BDF");
    REQUIRE_MESSAGE(bdf != nullptr, "CXV_EDU_BDF is not set");
    auto d = device::open(bdf);
    REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
    return std::move(d).value();
}

// edu's registers are little-endian; below 0x80 only 32-bit accesses count.
std::uint32_t rd32(const device& d, std::size_t off) {
    return *reinterpret_cast<const volatile std::uint32_t*>(d.bar0().base() + off);
}
void wr32(const device& d, std::size_t off, std::uint32_t v) {
    *reinterpret_cast<volatile std::uint32_t*>(d.bar0().base() + off) = v;
}
void wr64(const device& d, std::size_t off, std::uint64_t v) {
    *reinterpret_cast<volatile std::uint64_t*>(d.bar0().base() + off) = v;
}

// One edu DMA; waits for the start bit to clear (edu runs it from a timer, ~100 ms).
bool dma(const device& d, std::uint64_t src, std::uint64_t dst, std::size_t len, bool to_ram) {
    wr64(d, kDmaSrc, src);
    wr64(d, kDmaDst, dst);
    wr64(d, kDmaCount, len);
    wr64(d, kDmaCmd, kDmaStart | (to_ram ? kDmaToRam : 0));
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (rd32(d, kDmaCmd) & kDmaStart) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// Waits for an eventfd to count; returns the count (0 on timeout).
std::uint64_t wait_event(int fd, int ms = 2000) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return 0;
    std::uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == sizeof n ? n : 0;
}

}  // namespace

TEST_CASE("container, group, device: regions, BAR0, config space, IOMMU information") {
    auto d = open_edu();
    CHECK(rd32(*d, kIdent) == 0x010000ed);
    wr32(*d, kLiveness, 0x12345678);
    CHECK(rd32(*d, kLiveness) == ~0x12345678u);
    auto bar = d->region(0);
    REQUIRE(bar.ok());
    CHECK(bar->size == (1u << 20));
    CHECK(bar->mappable);
    CHECK(d->bar0().size() == bar->size);
    auto cfg = d->region(7);
    REQUIRE(cfg.ok());
    CHECK(cfg->offset == (7ull << 40));
    CHECK(d->config_read(0, 4).value() == 0x11e81234);
    CHECK((d->config_read(4, 2).value() & 0x6) == 0x6);  // open() turned on memory decode and bus mastering
    CHECK((d->iommu().page_sizes & 4096) != 0);
    REQUIRE_FALSE(d->iommu().ranges.empty());
    for (const auto& r : d->iommu().ranges) {
        char line[80];
        std::snprintf(line, sizeof line, "usable IOVA range 0x%llx-0x%llx", static_cast<unsigned long long>(r.first),
                      static_cast<unsigned long long>(r.last));
        MESSAGE(line);
    }
    CHECK(d->msix_count() == 0);  // edu has INTx and MSI only
    CHECK(d->irq_count(irq_kind::intx) == 1);
    CHECK(d->irq_count(irq_kind::msi) >= 1);
}

TEST_CASE("DMA through the IOMMU: RAM to device and back; an unmapped IOVA is blocked") {
    auto d = open_edu();
    auto out = d->alloc_dma(4096);
    auto in = d->alloc_dma(4096);
    REQUIRE(out.ok());
    REQUIRE(in.ok());
    REQUIRE(out->iova() + kLen - 1 <= kEduDmaMask);
    REQUIRE(in->iova() + kLen - 1 <= kEduDmaMask);
    for (std::size_t i = 0; i < kLen; ++i) out->data()[i] = static_cast<std::byte>(i * 7 + 3);
    REQUIRE(dma(*d, out->iova(), kEduBuffer, kLen, false));
    REQUIRE(dma(*d, kEduBuffer, in->iova(), kLen, true));
    CHECK(std::memcmp(in->data(), out->data(), kLen) == 0);

    // The caller's own memory, mapped at an odd offset, then unmapped: a DMA to where it
    // was must not reach it.
    std::vector<std::byte> mine(8192, std::byte{0});
    auto m = d->map_dma(mine.data() + 100, 4000);
    REQUIRE(m.ok());
    const std::uint64_t where = m->iova_of(mine.data() + 100);
    REQUIRE(where + kLen - 1 <= kEduDmaMask);
    REQUIRE(dma(*d, kEduBuffer, where, kLen, true));
    CHECK(std::memcmp(mine.data() + 100, out->data(), kLen) == 0);  // mapped: it arrives
    std::memset(mine.data(), 0, mine.size());
    *m = dma_buffer{};  // VFIO_IOMMU_UNMAP_DMA
    (void)dma(*d, kEduBuffer, where, kLen, true);
    bool untouched = true;
    for (auto b : mine) untouched = untouched && b == std::byte{0};
    CHECK_MESSAGE(untouched, "a DMA to an unmapped IOVA reached host memory");
}

TEST_CASE("INTx and MSI interrupts reach eventfds") {
    auto d = open_edu();
    auto intx = d->irq_eventfd(irq_kind::intx, 0);
    REQUIRE_MESSAGE(intx.ok(), (intx.ok() ? "" : intx.error().message));
    for (int round = 0; round < 2; ++round) {
        wr32(*d, kIrqRaise, 0x1);
        CHECK(wait_event(intx.value()) >= 1);
        CHECK(rd32(*d, kIrqStatus) == 0x1);
        // VFIO masked the line at the interrupt: quieten the device, then unmask.
        wr32(*d, kIrqAck, 0x1);
        CHECK(d->unmask_intx().ok());
    }
    REQUIRE(d->disable_irqs(irq_kind::intx).ok());

    auto msi = d->irq_eventfd(irq_kind::msi, 0);
    REQUIRE_MESSAGE(msi.ok(), (msi.ok() ? "" : msi.error().message));
    for (int round = 0; round < 3; ++round) {
        wr32(*d, kIrqRaise, 0x2);
        CHECK(wait_event(msi.value()) >= 1);
        wr32(*d, kIrqAck, 0x2);
    }
    CHECK(d->disable_irqs(irq_kind::msi).ok());
    CHECK(wait_event(msi.value(), 200) == 0);
}

TEST_CASE("DMA from 2 MiB hugepages (the guest reserves some)") {
    auto d = open_edu();
    auto huge = d->alloc_dma_huge(4096);
    REQUIRE_MESSAGE(huge.ok(), (huge.ok() ? "" : huge.error().message));
    CHECK(huge->size() == (std::size_t{2} << 20));
    CHECK(huge->iova() % (std::size_t{2} << 20) == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(huge->data()) % (std::size_t{2} << 20) == 0);
    std::byte* src = huge->data() + (1u << 20) + 5;  // deep inside the page, odd offset
    std::byte* dst = huge->data() + (3u << 19);
    REQUIRE(huge->iova_of(dst) + kLen - 1 <= kEduDmaMask);
    for (std::size_t i = 0; i < kLen; ++i) src[i] = static_cast<std::byte>(i ^ 0x5a);
    REQUIRE(dma(*d, huge->iova_of(src), kEduBuffer, kLen, false));
    REQUIRE(dma(*d, kEduBuffer, huge->iova_of(dst), kLen, true));
    CHECK(std::memcmp(src, dst, kLen) == 0);
}
