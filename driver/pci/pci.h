// Discovery: every mlx5 function on the machine (ConnectX-4 to -8 and BlueField, PFs
// and VFs), as libpci enumerates it, with what a person needs to decide whether and how
// to open it with driver/vfio: the driver it is bound to, its IOMMU group, its NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/result.h"

namespace cxv::driver::pci {

struct function {
    std::string bdf;  // "DDDD:BB:DD.F"
    std::uint16_t vendor = 0, device = 0;
    std::string name;  // from hw/pci_ids.h
    bool virtual_function = false;
    std::string driver;    // bound kernel driver ("vfio-pci", "mlx5_core"), empty if none
    int iommu_group = -1;  // -1: none (the IOMMU is off)
    int numa_node = -1;    // -1: unknown
    bool usable() const { return driver == "vfio-pci" && iommu_group >= 0; }
};

// Every mlx5 function libpci finds (sysfs on Linux), in bus order. An empty list is not
// an error; a libpci failure is (with its message).
result<std::vector<function>> discover();

}  // namespace cxv::driver::pci
