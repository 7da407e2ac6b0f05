// PCI configuration space of the emulated function (4 KiB, PCI Express): identity, the
// command register, BAR0 (64-bit, prefetchable, with the sizing protocol), and the
// capabilities a ConnectX function has: power management, PCI Express, MSI-X, and on a
// PF that offers VFs the SR-IOV extended capability.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "sim/device_config.h"

namespace cxv::sim {

class config_space {
public:
    static constexpr std::size_t size = 4096;
    static constexpr std::uint8_t cap_pm = 0x40;
    static constexpr std::uint8_t cap_pcie = 0x60;
    static constexpr std::uint8_t cap_msix = 0xa0;
    static constexpr std::uint16_t ext_cap_sriov = 0x100;  // a PF with VFs to offer
    static constexpr std::uint32_t msix_table_offset = 0x2000;  // in BAR0
    static constexpr std::uint32_t msix_pba_offset = 0x3000;

    config_space(const device_config& cfg, std::size_t bar0_size, unsigned msix_vectors);
    void reset();
    // Reads and writes of 1, 2 or 4 bytes at natural alignment, or byte ranges; writes
    // change only the bits a function lets software change.
    std::size_t read(std::size_t off, void* dst, std::size_t len) const;
    std::size_t write(std::size_t off, const void* src, std::size_t len);

    std::uint16_t command() const;
    bool bus_master() const { return command() & 0x4; }
    bool memory_enabled() const { return command() & 0x2; }
    bool msix_enabled() const;
    // The SR-IOV capability's NumVFs, VF Enable and VF MSE, as the host's PCI core set
    // them when sriov_numvfs was written (no-op without the capability).
    void set_num_vfs(std::uint16_t n);

private:
    void put8(std::size_t off, std::uint8_t v) { bytes_[off] = v; }
    void put16(std::size_t off, std::uint16_t v);
    void put32(std::size_t off, std::uint32_t v);
    std::uint32_t get32(std::size_t off) const;

    const device_config& cfg_;
    std::size_t bar0_size_;
    unsigned msix_vectors_;
    mutable std::mutex mu_;
    std::array<std::uint8_t, size> bytes_{};
    std::array<std::uint8_t, size> writable_{};  // per-byte mask of software-writable bits
};

}  // namespace cxv::sim
