// The model's IOMMU: VFIO type1 map/unmap rules, and device accesses that fault.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
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

TEST_CASE("an access right after UNMAP faults although the same translation was just used") {
    iommu m;
    pages mem(3);
    REQUIRE(m.map(0x10000, mem.p, 4096, true, true) == map_error::none);
    REQUIRE(m.map(0x20000, mem.p + 4096, 2 * 4096, true, true) == map_error::none);
    std::uint32_t v = 0;
    for (int i = 0; i < 3; ++i) CHECK(m.read(0x10040, &v, sizeof(v)));  // the translation is warm
    REQUIRE(m.unmap(0x10000, 4096).value() == 4096);
    // The mapping that remains now sits where the unmapped one was in the table.
    CHECK_FALSE(m.read(0x10040, &v, sizeof(v)));
    CHECK_FALSE(m.write(0x10040, &v, sizeof(v)));
    REQUIRE(m.fault_count() == 2);
    CHECK(m.faults()[0].iova == 0x10040);
    CHECK_FALSE(m.faults()[0].write);
    CHECK(m.faults()[1].write);
    CHECK(m.read(0x20040, &v, sizeof(v)));
    // The same IOVA mapped again to other memory: the access goes to the new memory.
    REQUIRE(m.map(0x10000, mem.p + 2 * 4096, 4096, true, true) == map_error::none);
    const std::uint32_t w = 0x5a5a5a5a;
    CHECK(m.write(0x10040, &w, sizeof(w)));
    CHECK(std::memcmp(mem.p + 2 * 4096 + 0x40, &w, sizeof(w)) == 0);
    CHECK(std::memcmp(mem.p + 0x40, &w, sizeof(w)) != 0);
    // And after CLEAR nothing is reachable.
    m.clear();
    CHECK_FALSE(m.read(0x20040, &v, sizeof(v)));
    CHECK(m.fault_count() == 3);
}

TEST_CASE("an access across adjacent mappings is one access; a gap or a read-only part refuses all of it") {
    iommu m;
    pages mem(4);
    // IOVA 0x30000-0x32000 in two mappings whose memory is not adjacent; 0x32000 unmapped;
    // 0x33000 read-only.
    REQUIRE(m.map(0x30000, mem.p + 2 * 4096, 4096, true, true) == map_error::none);
    REQUIRE(m.map(0x31000, mem.p, 4096, true, true) == map_error::none);
    REQUIRE(m.map(0x33000, mem.p + 3 * 4096, 4096, true, false) == map_error::none);
    std::vector<unsigned char> data(64);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i + 1);
    CHECK(m.write(0x30fe0, data.data(), data.size()));
    CHECK(std::memcmp(mem.p + 2 * 4096 + 0xfe0, data.data(), 32) == 0);
    CHECK(std::memcmp(mem.p, data.data() + 32, 32) == 0);
    std::vector<unsigned char> back(64);
    CHECK(m.read(0x30fe0, back.data(), back.size()));
    CHECK(back == data);
    CHECK(m.fault_count() == 0);
    // Into the gap: nothing written, not even the mapped first part.
    std::memset(mem.p, 0, mem.size);
    CHECK_FALSE(m.write(0x31fe0, data.data(), data.size()));
    CHECK(mem.p[0xfe0] == std::byte{0});
    // Into the read-only mapping from the one before it (gap first, then adjacent).
    REQUIRE(m.map(0x32000, mem.p + 1 * 4096, 4096, true, true) == map_error::none);
    CHECK_FALSE(m.write(0x32fe0, data.data(), data.size()));
    CHECK(mem.p[4096 + 0xfe0] == std::byte{0});
    CHECK(m.read(0x32fe0, back.data(), back.size()));
    CHECK(m.fault_count() == 2);
}

TEST_CASE("a kept translation reads while the table is unchanged; after any MAP or UNMAP, or with a fault injected, not") {
    iommu m;
    pages mem(4);
    mem.p[100] = std::byte{7};
    REQUIRE(m.map(0x10000, mem.p, 2 * 4096, true, false) == map_error::none);
    std::uint64_t gen = 0;
    CHECK(m.translate(0x10000, 4096, true, gen) == nullptr);      // read-only
    CHECK(m.translate(0x11000, 2 * 4096, false, gen) == nullptr);  // past the mapping
    CHECK(m.translate(0x20000, 1, false, gen) == nullptr);         // not mapped
    std::byte* h = m.translate(0x10000, 4096, false, gen);
    REQUIRE(h == mem.p);
    std::byte b{};
    CHECK(m.read_cached(gen, h + 100, &b, 1));
    CHECK(b == std::byte{7});
    // Another mapping: the table changed, the translation is taken again.
    REQUIRE(m.map(0x40000, mem.p + 3 * 4096, 4096, true, true) == map_error::none);
    CHECK_FALSE(m.read_cached(gen, h + 100, &b, 1));
    h = m.translate(0x10000, 4096, false, gen);
    CHECK(m.read_cached(gen, h + 100, &b, 1));
    // An injected fault: the ordinary access takes it.
    m.inject_fault(0x10000, 1);
    CHECK_FALSE(m.read_cached(gen, h + 100, &b, 1));
    CHECK_FALSE(m.read(0x10000, &b, 1));
    CHECK(m.read_cached(gen, h + 100, &b, 1));
    REQUIRE(m.unmap(0x10000, 2 * 4096));
    CHECK_FALSE(m.read_cached(gen, h + 100, &b, 1));
    CHECK(m.translate(0x10000, 4096, false, gen) == nullptr);
    CHECK(m.fault_count() == 1);  // translate records none
}

TEST_CASE("an injected fault refuses the next access to its range, once") {
    iommu m;
    pages mem(2);
    REQUIRE(m.map(0x50000, mem.p, 2 * 4096, true, true) == map_error::none);
    std::uint64_t v = 0;
    m.inject_fault(0x51000, 4096);
    CHECK(m.read(0x50000, &v, sizeof(v)));  // another range
    CHECK_FALSE(m.read(0x50ffc, &v, sizeof(v)));  // overlaps it
    CHECK(m.read(0x50ffc, &v, sizeof(v)));
    REQUIRE(m.fault_count() == 1);
    CHECK(m.faults()[0].iova == 0x50ffc);
}

// PCIe keeps a device's posted writes in order, and programs rely on it: perftest's
// write_lat polls the last byte of its buffer and takes the message as complete when it
// changes. So a device write must reach memory in address order: whoever sees its last
// byte sees every byte before it. (glibc's memcpy of 4 KiB does not store in that order.)
TEST_CASE("a device write reaches host memory in address order: its last byte comes last") {
    constexpr std::size_t kLen = 4096;
    constexpr std::uint64_t kIova = 0x200000;
    pages mem(kLen / 4096);
    const auto byte_at = [&](std::size_t i) {
        return std::atomic_ref<std::uint8_t>(*reinterpret_cast<std::uint8_t*>(mem.p + i)).load(std::memory_order_acquire);
    };
    iommu m;
    REQUIRE(m.map(kIova, mem.p, kLen, true, true) == map_error::none);

    constexpr unsigned kRounds = 20000;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::atomic<unsigned> acked{0};
    std::atomic<bool> stop{false}, refused{false};
    std::thread device([&] {
        // The source at an odd offset, as a payload sits in a frame behind its headers.
        std::vector<std::uint8_t> frame(kLen + 64);
        std::uint8_t* const buf = frame.data() + 36;
        for (unsigned round = 1; round <= kRounds && !stop.load(); ++round) {
            std::memset(buf, static_cast<int>(round & 0xff), kLen);
            if (!m.write(kIova, buf, kLen)) refused = true;
            while (acked.load(std::memory_order_acquire) != round && !stop.load()) std::this_thread::yield();
        }
    });
    unsigned torn = 0, rounds = 0;
    for (unsigned round = 1; round <= kRounds; ++round) {
        const auto want = static_cast<std::uint8_t>(round & 0xff);
        bool timed_out = false;
        for (unsigned spins = 0; byte_at(kLen - 1) != want; ++spins) {
            if ((spins & 1023) == 1023) {
                if (std::chrono::steady_clock::now() > deadline) {
                    timed_out = true;
                    break;
                }
                std::this_thread::yield();
            }
        }
        if (timed_out) break;
        for (std::size_t i = 0; i < kLen; ++i) {
            if (byte_at(i) != want) {
                ++torn;
                break;
            }
        }
        ++rounds;
        acked.store(round, std::memory_order_release);
    }
    stop.store(true);
    device.join();
    // Seen only while both threads run at once (a loaded machine may run them in turns):
    // before, glibc's memcpy tore 20-110 of 20,000 writes on an idle 2-core machine.
    MESSAGE(rounds, " writes watched");
    CHECK_FALSE(refused.load());
    CHECK(rounds > 100);
    CHECK(torn == 0);
}

TEST_CASE("a run of accesses holds the table: an UNMAP waits for the run to end, then takes effect") {
    iommu m;
    pages mem(1);
    REQUIRE(m.map(0x10000, mem.p, 4096, true, true) == map_error::none);
    std::atomic<int> step{0};
    std::atomic<bool> unmapped{false};
    bool read_in_run = false, read_with_writer_waiting = false, nested_read = false, still_waiting = false;
    std::thread device([&] {
        {
            const iommu::access_run run(m);
            std::uint32_t v = 0;
            read_in_run = m.read(0x10040, &v, sizeof(v));
            step = 1;
            while (step.load() != 2) std::this_thread::yield();
            // The UNMAP has begun and waits for this run; accesses of the run go on, and
            // a run inside the run takes nothing more (taking the reader side again would
            // wait for the writer, which waits for this run).
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            still_waiting = !unmapped.load();
            read_with_writer_waiting = m.read(0x10040, &v, sizeof(v));
            {
                const iommu::access_run inner(m);
                nested_read = m.write(0x10044, &v, sizeof(v));
            }
        }
        step = 3;
    });
    while (step.load() != 1) std::this_thread::yield();
    std::thread unmapper([&] {
        step = 2;
        CHECK(m.unmap(0x10000, 4096).value() == 4096);
        unmapped = true;
    });
    device.join();
    unmapper.join();
    CHECK(read_in_run);
    CHECK(still_waiting);
    CHECK(read_with_writer_waiting);
    CHECK(nested_read);
    CHECK(step.load() == 3);
    std::uint32_t v = 0;
    CHECK_FALSE(m.read(0x10040, &v, sizeof(v)));  // the UNMAP took effect once the run ended
    CHECK(m.fault_count() == 1);
}

TEST_CASE("another thread's accesses during a run lock as before; a run after the run starts clean") {
    iommu m;
    pages mem(1);
    REQUIRE(m.map(0x10000, mem.p, 4096, true, true) == map_error::none);
    std::atomic<bool> in_run{false}, done{false};
    std::thread device([&] {
        const iommu::access_run run(m);
        in_run = true;
        while (!done.load()) std::this_thread::yield();
    });
    while (!in_run.load()) std::this_thread::yield();
    const std::uint32_t w = 0xa5a5a5a5;
    CHECK(m.write(0x10080, &w, sizeof(w)));
    std::uint32_t v = 0;
    CHECK(m.read(0x10080, &v, sizeof(v)));
    CHECK(v == w);
    CHECK_FALSE(m.read(0x90000, &v, sizeof(v)));  // a fault is still a fault
    done = true;
    device.join();
    {
        const iommu::access_run run(m);
        CHECK(m.read(0x10080, &v, sizeof(v)));
    }
    REQUIRE(m.unmap(0x10000, 4096).value() == 4096);  // no run left holding the table
    CHECK_FALSE(m.read(0x10080, &v, sizeof(v)));
}
