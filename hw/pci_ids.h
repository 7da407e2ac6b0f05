// PCI identities of the mlx5 family (vendor 0x15b3): the functions an mlx5 driver binds.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace cxv::hw {

inline constexpr std::uint16_t mellanox_vendor_id = 0x15b3;

struct pci_device_id {
    std::uint16_t device;
    std::string_view name;
    bool virtual_function;
};

inline constexpr pci_device_id mlx5_device_ids[] = {
    {0x1013, "ConnectX-4", false},
    {0x1014, "ConnectX-4 VF", true},
    {0x1015, "ConnectX-4 Lx", false},
    {0x1016, "ConnectX-4 Lx VF", true},
    {0x1017, "ConnectX-5", false},
    {0x1018, "ConnectX-5 VF", true},
    {0x1019, "ConnectX-5 Ex", false},
    {0x101a, "ConnectX-5 Ex VF", true},
    {0x101b, "ConnectX-6", false},
    {0x101c, "ConnectX-6 VF", true},
    {0x101d, "ConnectX-6 Dx", false},
    {0x101e, "ConnectX family VF", true},
    {0x101f, "ConnectX-6 Lx", false},
    {0x1021, "ConnectX-7", false},
    {0x1023, "ConnectX-8", false},
    {0xa2d2, "BlueField", false},
    {0xa2d3, "BlueField VF", true},
    {0xa2d6, "BlueField-2", false},
    {0xa2dc, "BlueField-3", false},
};

// The entry for a device ID, or nullptr when it is not an mlx5 function.
constexpr const pci_device_id* find_mlx5_device(std::uint16_t device) noexcept {
    for (const auto& d : mlx5_device_ids) {
        if (d.device == device) return &d;
    }
    return nullptr;
}

}  // namespace cxv::hw
