// PCI discovery (libpci) of the functions cxv-sim presents: exactly the emulated
// functions, with the IDs, driver, IOMMU groups, NUMA node and link sysfs shows (the
// settings in tests/driver/BUILD), and a libpci failure as an error, not an exit.
#include <doctest/doctest.h>

#include <string>

#include "driver/pci/pci.h"
#include "hw/pci_ids.h"

using namespace cxv;

TEST_CASE("discover() finds every emulated function, bound to vfio-pci, in its own group") {
    auto found = driver::pci::discover();
    REQUIRE_MESSAGE(found.ok(), (found.ok() ? "" : found.error().message));
    const auto& fns = found.value();
    // This machine has no mlx5 hardware: exactly what the layer presents.
    REQUIRE(fns.size() == 3);
    for (unsigned i = 0; i < fns.size(); ++i) {
        const auto& f = fns[i];
        CAPTURE(f.bdf);
        CHECK(f.bdf == "0000:3b:00." + std::to_string(i));
        CHECK(f.vendor == hw::mellanox_vendor_id);
        CHECK(f.device == 0x101b);  // the model is a ConnectX-6
        CHECK(f.name == "ConnectX-6");
        CHECK_FALSE(f.virtual_function);
        CHECK(f.physfn.empty());
        CHECK(f.driver == "vfio-pci");
        CHECK(f.iommu_group == 40 + static_cast<int>(i));
        CHECK(f.numa_node == 1);
        CHECK(f.link_speed == "16.0 GT/s");
        CHECK(f.link_width == 16);
        CHECK(f.usable());
    }
}

TEST_CASE("a libpci failure is an error with what to check, and the process goes on") {
    auto found = driver::pci::discover("/nonexistent/bus/pci");
    REQUIRE_FALSE(found.ok());
    const std::string& msg = found.error().message;
    CAPTURE(msg);
    CHECK(msg.find("libpci") != std::string::npos);
    CHECK(msg.find("/nonexistent/bus/pci") != std::string::npos);
    CHECK(msg.find("is sysfs mounted") != std::string::npos);
    // libpci is usable again afterwards.
    auto again = driver::pci::discover();
    REQUIRE(again.ok());
    CHECK(again->size() == 3);
}
