#include "tools/cxv/list.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "driver/pci/pci.h"

namespace cxv::tool {

int print_list(bool json) {
    auto found = driver::pci::discover();
    if (!found) {
        fmt::print(stderr, "cxv list: {}\n", found.error().message);
        return EXIT_FAILURE;
    }
    const auto& fns = found.value();
    if (json) {
        fmt::print("[");
        for (std::size_t i = 0; i < fns.size(); ++i) {
            const auto& f = fns[i];
            fmt::print("{}{{\"bdf\":\"{}\",\"vendor\":\"{:04x}\",\"device\":\"{:04x}\",\"name\":\"{}\",\"vf\":{},"
                       "\"driver\":\"{}\",\"iommu_group\":{},\"numa_node\":{},\"usable\":{}}}",
                       i ? "," : "", f.bdf, f.vendor, f.device, f.name, f.virtual_function, f.driver, f.iommu_group,
                       f.numa_node, f.usable());
        }
        fmt::print("]\n");
        return EXIT_SUCCESS;
    }
    if (fns.empty()) {
        fmt::print("no mlx5 functions found (to try cxv without a card: cxv-sim run -- cxv list)\n");
        return EXIT_SUCCESS;
    }
    fmt::print("{:<13} {:<20} {:<9} {:<3} {:<10} {:<6} {:<5} {}\n", "bdf", "name", "id", "vf", "driver", "group",
               "numa", "cxv");
    for (const auto& f : fns) {
        const std::string group = f.iommu_group >= 0 ? std::to_string(f.iommu_group) : "-";
        const std::string why = f.usable()              ? "ready"
                                : f.iommu_group < 0     ? "no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on)"
                                : f.driver.empty()      ? "no driver: bind it to vfio-pci"
                                                        : "bound to " + f.driver + ": bind it to vfio-pci";
        fmt::print("{:<13} {:<20} {:04x}:{:04x} {:<3} {:<10} {:<6} {:<5} {}\n", f.bdf, f.name, f.vendor, f.device,
                   f.virtual_function ? "yes" : "no", f.driver.empty() ? "-" : f.driver, group, f.numa_node, why);
    }
    return EXIT_SUCCESS;
}

}  // namespace cxv::tool
