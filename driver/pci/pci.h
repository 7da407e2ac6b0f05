// Discovery: every mlx5 function on the machine (ConnectX-4 to -8 and BlueField, PFs
// and VFs), as libpci enumerates it, with what a person needs to decide whether and how
// to open it with driver/vfio: the driver it is bound to, its IOMMU group, its NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace cxv::driver::pci {

struct function {
    std::string bdf;  // "DDDD:BB:DD.F"
    std::uint16_t vendor = 0, device = 0;
    std::string name;  // from hw/pci_ids.h
    bool virtual_function = false;
    std::string physfn;    // a VF's PF ("DDDD:BB:DD.F") when the kernel knows it, else empty
    std::string driver;    // bound kernel driver ("vfio-pci", "mlx5_core"), empty if none
    int iommu_group = -1;  // -1: none (the IOMMU is off)
    int numa_node = -1;    // -1: unknown
    std::string link_speed;  // negotiated, as sysfs spells it ("16.0 GT/s"); empty if unknown
    int link_width = 0;      // negotiated lanes; 0 if unknown (a VF has no link of its own)
    bool usable() const { return driver == "vfio-pci" && iommu_group >= 0; }
};

// Every mlx5 function libpci finds through Linux sysfs, in bus order. An empty list is
// not an error; a libpci failure is (with libpci's message and what to check), and it
// never ends the process. `sysfs_bus` is where the PCI bus is in sysfs: another path is
// for a sysfs mounted elsewhere (containers).
result<std::vector<function>> discover(const std::string& sysfs_bus = "/sys/bus/pci");

// SR-IOV through a PF's sysfs attributes (Linux Documentation/PCI/pci-iov-howto.rst): the
// VFs it can have (sriov_totalvfs; 0 for a function without SR-IOV) and has now
// (sriov_numvfs), enabling `n` of them (writing sriov_numvfs; a PF with VFs must go to 0
// first, as the kernel requires), and VF i's address (the virtfnI link, i from 0).
// Errors carry the kernel's errno and what it means here.
result<unsigned> total_vfs(const std::string& pf, const std::string& sysfs_bus = "/sys/bus/pci");
result<unsigned> num_vfs(const std::string& pf, const std::string& sysfs_bus = "/sys/bus/pci");
status set_num_vfs(const std::string& pf, unsigned n, const std::string& sysfs_bus = "/sys/bus/pci");
result<std::string> vf_address(const std::string& pf, unsigned i, const std::string& sysfs_bus = "/sys/bus/pci");

}  // namespace cxv::driver::pci
