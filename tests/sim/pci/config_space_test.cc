// The configuration space and BAR0 of the model's PCI function on their own, read as
// Linux's PCI core and vfio-pci read them; the expected values come from
// <linux/pci_regs.h> and the device configuration.
#include <doctest/doctest.h>
#include <linux/pci_regs.h>

#include <cstdint>
#include <vector>

#include "sim/device_config.h"
#include "sim/pci/bar.h"
#include "sim/pci/config_space.h"

namespace cxv::sim {
namespace {

template <typename T>
T rd(const config_space& c, std::size_t off) {
    T v{};
    REQUIRE(c.read(off, &v, sizeof(v)) == sizeof(v));
    return v;
}

template <typename T>
void wr(config_space& c, std::size_t off, T v) {
    REQUIRE(c.write(off, &v, sizeof(v)) == sizeof(v));
}

TEST_CASE("config space: identity and the capability list a ConnectX function has") {
    device_config cfg;
    config_space c(cfg, cfg.bar0_size, 64);
    CHECK(rd<std::uint16_t>(c, PCI_VENDOR_ID) == 0x15b3);
    CHECK(rd<std::uint16_t>(c, PCI_DEVICE_ID) == cfg.device_id);
    CHECK(rd<std::uint16_t>(c, PCI_SUBSYSTEM_VENDOR_ID) == cfg.subsystem_vendor_id);
    CHECK(rd<std::uint8_t>(c, PCI_CLASS_DEVICE + 1) == 0x02);  // network controller
    CHECK((rd<std::uint16_t>(c, PCI_STATUS) & PCI_STATUS_CAP_LIST) != 0);
    // Walk the list: power management, PCI Express, MSI-X, then the end.
    std::vector<std::uint8_t> ids;
    for (std::uint8_t at = rd<std::uint8_t>(c, PCI_CAPABILITY_LIST); at != 0 && ids.size() < 8;
         at = rd<std::uint8_t>(c, at + PCI_CAP_LIST_NEXT)) {
        ids.push_back(rd<std::uint8_t>(c, at + PCI_CAP_LIST_ID));
    }
    CHECK(ids == std::vector<std::uint8_t>{PCI_CAP_ID_PM, PCI_CAP_ID_EXP, PCI_CAP_ID_MSIX});
    // MSI-X: table size N-1, table and PBA in BAR0 (BIR 0).
    const std::size_t msix = config_space::cap_msix;
    CHECK((rd<std::uint16_t>(c, msix + PCI_MSIX_FLAGS) & PCI_MSIX_FLAGS_QSIZE) == 63);
    CHECK(rd<std::uint32_t>(c, msix + PCI_MSIX_TABLE) == config_space::msix_table_offset);
    CHECK(rd<std::uint32_t>(c, msix + PCI_MSIX_PBA) == config_space::msix_pba_offset);
    // The link as Linux's pcie_get_speed_cap and pcie_bandwidth_available read it: beyond
    // 5 GT/s the speed is in Link Capabilities 2's vector (bit 4: 16 GT/s), the current
    // speed and width in Link Status.
    const std::size_t exp = config_space::cap_pcie;
    CHECK((rd<std::uint32_t>(c, exp + PCI_EXP_LNKCAP2) & PCI_EXP_LNKCAP2_SLS_16_0GB) != 0);
    CHECK((rd<std::uint16_t>(c, exp + PCI_EXP_LNKSTA) & PCI_EXP_LNKSTA_CLS) == PCI_EXP_LNKSTA_CLS_16_0GB);
    CHECK(((rd<std::uint16_t>(c, exp + PCI_EXP_LNKSTA) & PCI_EXP_LNKSTA_NLW) >> PCI_EXP_LNKSTA_NLW_SHIFT) == 16);
}

TEST_CASE("config space: BAR0 is 64-bit prefetchable memory and answers the sizing protocol") {
    device_config cfg;
    config_space c(cfg, cfg.bar0_size, 64);
    const std::uint32_t flags = rd<std::uint32_t>(c, PCI_BASE_ADDRESS_0);
    CHECK((flags & PCI_BASE_ADDRESS_SPACE) == PCI_BASE_ADDRESS_SPACE_MEMORY);
    CHECK((flags & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64);
    CHECK((flags & PCI_BASE_ADDRESS_MEM_PREFETCH) != 0);
    // All ones written: the address bits that stick give the size.
    wr<std::uint32_t>(c, PCI_BASE_ADDRESS_0, 0xffffffff);
    wr<std::uint32_t>(c, PCI_BASE_ADDRESS_1, 0xffffffff);
    const std::uint64_t lo = rd<std::uint32_t>(c, PCI_BASE_ADDRESS_0) & PCI_BASE_ADDRESS_MEM_MASK;
    const std::uint64_t hi = rd<std::uint32_t>(c, PCI_BASE_ADDRESS_1);
    CHECK(~((hi << 32) | lo) + 1 == cfg.bar0_size);
    // The type bits are read-only.
    CHECK((rd<std::uint32_t>(c, PCI_BASE_ADDRESS_0) & ~PCI_BASE_ADDRESS_MEM_MASK) == flags);
}

TEST_CASE("config space: the command register keeps only the bits a function implements; reset clears it") {
    device_config cfg;
    config_space c(cfg, cfg.bar0_size, 64);
    CHECK_FALSE(c.memory_enabled());
    wr<std::uint16_t>(c, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_IO);
    CHECK(c.memory_enabled());
    CHECK(c.bus_master());
    CHECK((c.command() & PCI_COMMAND_IO) == 0);  // no I/O BAR
    CHECK_FALSE(c.msix_enabled());
    wr<std::uint16_t>(c, config_space::cap_msix + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
    CHECK(c.msix_enabled());
    c.reset();
    CHECK_FALSE(c.memory_enabled());
    CHECK_FALSE(c.msix_enabled());
}

TEST_CASE("BAR0: 32-bit registers are big-endian in memory, as the PRM's initialization segment") {
    auto bar = bar0::create(std::size_t{1} << 20);
    REQUIRE(bar);
    bar0& b = *bar.value();
    b.store32(0x10, 0x11223344);
    CHECK(b.base()[0x10] == std::byte{0x11});
    CHECK(b.base()[0x13] == std::byte{0x44});
    CHECK(b.load32(0x10) == 0x11223344);
    CHECK(b.exchange32(0x10, 0) == 0x11223344);
    CHECK(b.load32(0x10) == 0);
    b.store32(0x20, 5);
    b.zero();
    CHECK(b.load32(0x20) == 0);
}

}  // namespace
}  // namespace cxv::sim
