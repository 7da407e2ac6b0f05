#include "tools/cxv/list.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "driver/pci/pci.h"
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace {

void print_json(const std::vector<driver::pci::function>& fns) {
    json_writer j(json_writer::layout::one_line);
    j.begin_array();
    for (const auto& f : fns) {
        j.begin_object();
        j.member("bdf", f.bdf);
        j.member("vendor", fmt::format("{:04x}", f.vendor));
        j.member("device", fmt::format("{:04x}", f.device));
        j.member("name", f.name);
        j.member("vf", f.virtual_function);
        j.key("physfn");
        if (f.physfn.empty()) {
            j.null();
        } else {
            j.value(f.physfn);
        }
        j.member("driver", f.driver);
        j.member("iommu_group", f.iommu_group);
        j.member("numa_node", f.numa_node);
        j.member("link_speed", f.link_speed);
        j.member("link_width", f.link_width);
        j.member("usable", f.usable());
        j.end_object();
    }
    j.end_array();
    fmt::print("{}\n", j.str());
}

// What stands between the function and `cxv info`, or "ready".
std::string readiness(const driver::pci::function& f) {
    if (f.usable()) return "ready";
    if (f.iommu_group < 0) return "no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on)";
    if (f.driver.empty()) return "no driver: bind it to vfio-pci";
    return "bound to " + f.driver + ": bind it to vfio-pci";
}

}  // namespace

int print_list(bool json) {
    auto found = driver::pci::discover();
    if (!found) {
        fmt::print(stderr, "cxv list: {}\n", found.error().message);
        return EXIT_FAILURE;
    }
    const auto& fns = found.value();
    if (json) {
        print_json(fns);
        return EXIT_SUCCESS;
    }
    if (fns.empty()) {
        fmt::print("no mlx5 functions found (to try cxv without a card: cxv-sim run -- cxv list)\n");
        return EXIT_SUCCESS;
    }
    fmt::print("{:<13} {:<20} {:<9} {:<2} {:<10} {:<6} {:<5} {:<14} {}\n", "bdf", "name", "id", "fn", "driver",
               "group", "numa", "link", "cxv");
    for (const auto& f : fns) {
        const std::string group = f.iommu_group >= 0 ? std::to_string(f.iommu_group) : "-";
        const std::string link =
            f.link_width > 0 && !f.link_speed.empty() ? fmt::format("{} x{}", f.link_speed, f.link_width) : "-";
        fmt::print("{:<13} {:<20} {:04x}:{:04x} {:<2} {:<10} {:<6} {:<5} {:<14} {}\n", f.bdf, f.name, f.vendor,
                   f.device, f.virtual_function ? "VF" : "PF", f.driver.empty() ? "-" : f.driver, group,
                   f.numa_node, link, readiness(f));
    }
    return EXIT_SUCCESS;
}

}  // namespace cxv::tool
