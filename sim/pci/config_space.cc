#include "sim/pci/config_space.h"

#include <algorithm>

namespace cxv::sim {

config_space::config_space(const device_config& cfg, std::size_t bar0_size, unsigned msix_vectors)
    : cfg_(cfg), bar0_size_(bar0_size), msix_vectors_(msix_vectors) {
    reset();
}

void config_space::put16(std::size_t off, std::uint16_t v) {
    bytes_[off] = static_cast<std::uint8_t>(v);
    bytes_[off + 1] = static_cast<std::uint8_t>(v >> 8);
}

void config_space::put32(std::size_t off, std::uint32_t v) {
    put16(off, static_cast<std::uint16_t>(v));
    put16(off + 2, static_cast<std::uint16_t>(v >> 16));
}

std::uint32_t config_space::get32(std::size_t off) const {
    return bytes_[off] | (bytes_[off + 1] << 8) | (bytes_[off + 2] << 16) |
           (std::uint32_t{bytes_[off + 3]} << 24);
}

void config_space::reset() {
    std::lock_guard lock(mu_);
    bytes_.fill(0);
    writable_.fill(0);
    // Header type 0 (PCI Local Bus spec; little-endian, as config space is).
    put16(0x00, 0x15b3);
    put16(0x02, cfg_.device_id);
    put16(0x06, 0x0010);  // status: capabilities list
    bytes_[0x08] = 0x00;  // revision
    bytes_[0x09] = 0x00;
    bytes_[0x0a] = cfg_.port == port_type::ETHERNET ? 0x00 : 0x07;  // Ethernet / InfiniBand
    bytes_[0x0b] = 0x02;  // network controller
    bytes_[0x0c] = 0x10;  // cache line size (dwords)
    // BAR0/1: 64-bit prefetchable memory, size-aligned; software writes the address.
    put32(0x10, 0x0000000c);
    put32(0x14, 0);
    const std::uint64_t bar_mask = ~std::uint64_t{bar0_size_ - 1};
    for (int i = 0; i < 4; ++i) {
        writable_[0x10 + i] = static_cast<std::uint8_t>(bar_mask >> (8 * i)) & (i == 0 ? 0xf0 : 0xff);
        writable_[0x14 + i] = static_cast<std::uint8_t>(bar_mask >> (32 + 8 * i));
    }
    put16(0x2c, cfg_.subsystem_vendor_id);
    put16(0x2e, cfg_.subsystem_id);
    bytes_[0x34] = cap_pm;
    bytes_[0x3d] = 0x01;  // INTA
    writable_[0x3c] = 0xff;
    // Command: memory space, bus master, INTx disable.
    writable_[0x04] = 0x06;
    writable_[0x05] = 0x04;

    // Power management capability (version 3), D0.
    bytes_[cap_pm] = 0x01;
    bytes_[cap_pm + 1] = cap_pcie;
    put16(cap_pm + 2, 0x0003);
    // PCI Express capability v2, endpoint; Gen4 x16 link.
    bytes_[cap_pcie] = 0x10;
    bytes_[cap_pcie + 1] = cap_msix;
    put16(cap_pcie + 2, 0x0002);
    put32(cap_pcie + 4, 0x10008fe2);            // device capabilities: FLR, 512B payload
    put32(cap_pcie + 0x0c, 0x00000104 | (16u << 4));  // link capabilities: 16 GT/s x16
    put16(cap_pcie + 0x12, 0x0004 | (16u << 4));      // link status
    // Link capabilities 2 (PCIe 3.0 7.8.18): the supported speeds vector, 2.5 to 16 GT/s
    // (bits 1-4). A link faster than 5 GT/s is described only here: without it Linux reads
    // the speed as unknown ("0.000 Gb/s available PCIe bandwidth (Unknown x16 link)", as
    // its mlx5_core printed against the model).
    put32(cap_pcie + 0x2c, 0x0000001e);
    put16(cap_pcie + 0x30, 0x0004);  // link control 2: target link speed 16 GT/s
    writable_[cap_pcie + 8] = 0xff;                   // device control
    writable_[cap_pcie + 9] = 0xff;
    // MSI-X: table and PBA in BAR0.
    bytes_[cap_msix] = 0x11;
    bytes_[cap_msix + 1] = 0x00;
    put16(cap_msix + 2, static_cast<std::uint16_t>(msix_vectors_ - 1));
    put32(cap_msix + 4, msix_table_offset);
    put32(cap_msix + 8, msix_pba_offset);
    writable_[cap_msix + 3] = 0xc0;  // enable, function mask

    // SR-IOV extended capability (PCIe Base 4.0, 9.3.3), version 1, the last in the list.
    // Read-only here: the host's PCI core sets NumVFs and VF Enable (set_num_vfs), and
    // vfio-pci does not let a user write them.
    if (cfg_.sriov_totalvfs != 0) {
        const std::size_t c = ext_cap_sriov;
        put32(c, 0x0010 | (1u << 16));
        put32(c + 0x04, 0);                       // SR-IOV capabilities: no VF migration
        put16(c + 0x0c, cfg_.sriov_totalvfs);     // InitialVFs
        put16(c + 0x0e, cfg_.sriov_totalvfs);     // TotalVFs
        put16(c + 0x14, cfg_.sriov_vf_offset);    // First VF Offset
        put16(c + 0x16, cfg_.sriov_vf_stride);    // VF Stride
        put16(c + 0x1a, cfg_.sriov_vf_device_id); // VF Device ID
        put32(c + 0x1c, 0x00000553);              // supported page sizes: 4K, 8K, 64K, 256K, 1M, 4M
        put32(c + 0x20, 0x00000001);              // system page size: 4 KiB
        put32(c + 0x24, 0x0000000c);              // VF BAR0: 64-bit prefetchable memory
    }
}

void config_space::set_num_vfs(std::uint16_t n) {
    std::lock_guard lock(mu_);
    if (cfg_.sriov_totalvfs == 0) return;
    put16(ext_cap_sriov + 0x10, n);                                  // NumVFs
    put16(ext_cap_sriov + 0x08, n != 0 ? 0x0009 : 0x0000);          // VF Enable, VF MSE
}

std::size_t config_space::read(std::size_t off, void* dst, std::size_t len) const {
    std::lock_guard lock(mu_);
    if (off >= size) return 0;
    len = std::min(len, size - off);
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(off), len, static_cast<std::uint8_t*>(dst));
    return len;
}

std::size_t config_space::write(std::size_t off, const void* src, std::size_t len) {
    std::lock_guard lock(mu_);
    if (off >= size) return 0;
    len = std::min(len, size - off);
    const auto* s = static_cast<const std::uint8_t*>(src);
    for (std::size_t i = 0; i < len; ++i) {
        const std::uint8_t m = writable_[off + i];
        bytes_[off + i] = static_cast<std::uint8_t>((bytes_[off + i] & ~m) | (s[i] & m));
    }
    return len;
}

std::uint16_t config_space::command() const {
    std::lock_guard lock(mu_);
    return static_cast<std::uint16_t>(bytes_[0x04] | (bytes_[0x05] << 8));
}

bool config_space::msix_enabled() const {
    std::lock_guard lock(mu_);
    return bytes_[cap_msix + 3] & 0x80;
}

}  // namespace cxv::sim
