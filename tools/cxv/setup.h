// cxv setup: what stands between a ConnectX function and cxv, and the binding that
// removes it (docs/hardware.md), as SPDK's setup.sh and DPDK's dpdk-devbind do.
//
//   cxv setup --status [BDF...]   each mlx5 function (default: all): driver, IOMMU group
//                                 and its other members, netdevs, /dev/vfio node; and the
//                                 machine: IOMMU, vfio-pci, memlock limit, hugepages
//   cxv setup --bind BDF...       to vfio-pci (driver_override, so it holds past a reprobe)
//   cxv setup --unbind BDF...     back to the kernel's driver (mlx5_core)
//
// A function that is not a ConnectX is refused; so is unbinding one whose netdev is up,
// unless --force: the kernel's RDMA device and the netdev go with mlx5_core.
#pragma once

#include <string>
#include <vector>

namespace cxv::tool {

enum class setup_action { status, bind, unbind };

struct setup_request {
    setup_action action = setup_action::status;
    std::vector<std::string> bdfs;
    bool force = false;
    std::string sysfs = "/sys";  // another root: a sysfs mounted elsewhere (containers)
};

int run_setup(const setup_request& r);

}  // namespace cxv::tool
