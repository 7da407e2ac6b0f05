// PCI discovery (libpci) of the functions cxv-sim presents: exactly the emulated
// functions, with the IDs, driver, IOMMU groups and NUMA node sysfs shows.
#include <doctest/doctest.h>

#include <string>

#include "driver/pci/pci.h"
#include "hw/pci_ids.h"

using namespace cxv;

TEST_CASE("discover() finds every emulated function, bound to vfio-pci, in its own group") {
    auto found = driver::pci::discover();
    REQUIRE_MESSAGE(found.ok(), (found.ok() ? "" : found.error().message));
    const auto& fns = found.value();
    // This machine has no mlx5 hardware: exactly what the layer presents (sim_args below).
    REQUIRE(fns.size() == 3);
    for (unsigned i = 0; i < fns.size(); ++i) {
        const auto& f = fns[i];
        CAPTURE(f.bdf);
        CHECK(f.bdf == "0000:3b:00." + std::to_string(i));
        CHECK(f.vendor == hw::mellanox_vendor_id);
        CHECK(f.device == 0x101b);  // the model is a ConnectX-6
        CHECK(f.name == "ConnectX-6");
        CHECK_FALSE(f.virtual_function);
        CHECK(f.driver == "vfio-pci");
        CHECK(f.iommu_group == 40 + static_cast<int>(i));
        CHECK(f.usable());
    }
}
