// pciutils' libpci (what lspci and setpci are built on), unmodified, on the presentation
// layer: it must find the emulated functions among the host's and read them as it reads
// a card bound to vfio-pci: identity, BARs, config space with its capabilities, and the
// sysfs properties. Expected values are Linux's and the launcher's defaults
// (0000:c5:00.<i>, group 120 + i, NUMA node unknown), not sim/vfio/'s.
#include <doctest/doctest.h>

extern "C" {
#include <pci/pci.h>
}

#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/vfio/vfio_test_util.h"

using namespace cxv::vfio_test;

namespace {

std::vector<std::string> warnings;

void record_warning(char* msg, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, msg);
    std::vsnprintf(buf, sizeof buf, msg, ap);
    va_end(ap);
    warnings.emplace_back(buf);
}

std::string prop(pci_dev* d, unsigned p) {
    const char* s = pci_get_string_property(d, p);
    return s != nullptr ? s : "";
}

}  // namespace

TEST_CASE("libpci: the emulated functions, once each, read like functions bound to vfio-pci") {
    pci_access* a = pci_alloc();
    a->warning = record_warning;
    a->method = PCI_ACCESS_SYS_BUS_PCI;
    pci_init(a);
    pci_scan_bus(a);
    std::vector<pci_dev*> ours;
    unsigned others = 0;
    for (pci_dev* d = a->devices; d != nullptr; d = d->next) {
        if (d->domain == 0 && d->bus == 0xc5) {
            ours.push_back(d);
        } else {
            ++others;
        }
    }
    REQUIRE(ours.size() == num_devices);
    MESSAGE(others << " host functions listed beside them");
    for (pci_dev* d : ours) {
        const unsigned i = d->func;
        CAPTURE(bdf(i));
        CHECK(d->dev == 0);
        pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT | PCI_FILL_SUBSYS | PCI_FILL_IRQ |
                             PCI_FILL_BASES | PCI_FILL_SIZES | PCI_FILL_IO_FLAGS | PCI_FILL_CAPS | PCI_FILL_EXT_CAPS |
                             PCI_FILL_MODULE_ALIAS | PCI_FILL_LABEL | PCI_FILL_PHYS_SLOT | PCI_FILL_NUMA_NODE |
                             PCI_FILL_IOMMU_GROUP | PCI_FILL_DRIVER);
        // Not PCI_FILL_PARENT: libpci 3.9 leaks a realpath() result there, on any machine.
        CHECK(d->vendor_id == 0x15b3);
        CHECK(d->device_id == 0x101b);
        CHECK(d->device_class == 0x0207);  // InfiniBand (the launcher's default port type)
        CHECK(d->subsys_vendor_id == 0x15b3);
        // Config space through sysfs "config".
        CHECK(pci_read_word(d, PCI_VENDOR_ID) == 0x15b3);
        CHECK(pci_read_word(d, PCI_DEVICE_ID) == 0x101b);
        // BAR0: a 64-bit prefetchable memory BAR, where "resource" says, of BAR0's size.
        CHECK((d->flags[0] & PCI_IORESOURCE_MEM) != 0);
        CHECK((d->flags[0] & PCI_IORESOURCE_MEM_64) != 0);
        CHECK((d->flags[0] & PCI_IORESOURCE_PREFETCH) != 0);
        CHECK((d->base_addr[0] & PCI_ADDR_MEM_MASK) == resource_start(i));
        CHECK(d->size[0] == std::uint64_t{32} << 20);
        CHECK(d->size[1] == 0);
        // The capability list is past the first 64 bytes: only CAP_SYS_ADMIN reads it.
        if (has_sys_admin()) {
            CHECK(pci_find_cap(d, PCI_CAP_ID_PM, PCI_CAP_NORMAL) != nullptr);
            CHECK(pci_find_cap(d, PCI_CAP_ID_MSIX, PCI_CAP_NORMAL) != nullptr);
            const pci_cap* exp = pci_find_cap(d, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
            REQUIRE(exp != nullptr);
            const unsigned lnksta = pci_read_word(d, exp->addr + PCI_EXP_LNKSTA);
            CHECK(((lnksta & PCI_EXP_LNKSTA_WIDTH) >> 4) == 16);
            CHECK(std::to_string((lnksta & PCI_EXP_LNKSTA_WIDTH) >> 4) + "\n" ==
                  slurp(sysfs_dir(i) + "/current_link_width"));
        }
        CHECK(prop(d, PCI_FILL_DRIVER) == "vfio-pci");
        CHECK(prop(d, PCI_FILL_IOMMU_GROUP) == std::to_string(group_number(i)));
        CHECK(prop(d, PCI_FILL_MODULE_ALIAS).starts_with("pci:v000015B3d0000101B"));
        CHECK(d->numa_node == -1);
    }
    CHECK_MESSAGE(warnings.empty(), (warnings.empty() ? "" : warnings.front()));
    pci_cleanup(a);
}
