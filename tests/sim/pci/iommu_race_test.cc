// The model's IOMMU under concurrent use: device threads copying while the driver's
// thread unmaps and maps again. Once UNMAP_DMA has returned the memory is made
// inaccessible (PROT_NONE), so a device access that still used the old translation
// would crash the test rather than pass unnoticed.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "sim/pci/iommu.h"

using cxv::sim::iommu;
using cxv::sim::map_error;

TEST_CASE("no device access touches memory after its UNMAP returned") {
    // Accesses one by one, or in runs of eight as a device's round of work makes them.
    bool in_runs = false;
    SUBCASE("single accesses") { in_runs = false; }
    SUBCASE("runs of accesses") { in_runs = true; }
    constexpr std::size_t kSize = 4 * 4096;
    constexpr std::uint64_t kIova = 0x100000;
    void* mem = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(mem != MAP_FAILED);
    iommu m;
    REQUIRE(m.map(kIova, mem, kSize, true, true) == map_error::none);
    // A second mapping stays throughout, so that the table is never empty.
    std::vector<std::byte> other(4096 * 2);
    auto* other_page = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(other.data()) + 4095) & ~std::uintptr_t{4095});
    REQUIRE(m.map(0x900000, other_page, 4096, true, true) == map_error::none);

    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> ok{0}, refused{0};
    auto device = [&](unsigned which) {
        std::byte buf[256];
        std::memset(buf, static_cast<int>(which), sizeof(buf));
        for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed);) {
            std::optional<iommu::access_run> run;
            if (in_runs) run.emplace(m);
            for (unsigned k = 0; k < (in_runs ? 8u : 1u); ++k, ++i) {
                const std::uint64_t at = kIova + (i * 4096 + which * 512) % kSize;
                const bool done = (i & 1) ? m.write(at, buf, sizeof(buf)) : m.read(at, buf, sizeof(buf));
                (done ? ok : refused).fetch_add(1, std::memory_order_relaxed);
                std::uint32_t v = 0;
                (void)m.read(0x900000 + which * 8, &v, sizeof(v));
            }
        }
    };
    std::thread a(device, 0), b(device, 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    unsigned rounds = 0;
    while (rounds < 2000 && (rounds < 100 || ok.load() < 50 || refused.load() < 50) &&
           std::chrono::steady_clock::now() < deadline) {
        REQUIRE(m.unmap(kIova, kSize).value() == kSize);
        REQUIRE(mprotect(mem, kSize, PROT_NONE) == 0);
        std::this_thread::yield();
        REQUIRE(mprotect(mem, kSize, PROT_READ | PROT_WRITE) == 0);
        REQUIRE(m.map(kIova, mem, kSize, true, true) == map_error::none);
        std::this_thread::yield();
        ++rounds;
    }
    stop = true;
    a.join();
    b.join();
    MESSAGE("rounds ", rounds, ", accesses done ", ok.load(), ", refused ", refused.load());
    CHECK(ok.load() > 0);
    CHECK(refused.load() > 0);
    CHECK(m.fault_count() > 0);
    munmap(mem, kSize);
}
