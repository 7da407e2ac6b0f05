#include "driver/pci/pci.h"

extern "C" {
#include <pci/pci.h>
}

#include <algorithm>
#include <csetjmp>
#include <cstdarg>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "hw/pci_ids.h"

namespace cxv::driver::pci {

namespace {

// libpci reports fatal errors through a callback that must not return (it would exit
// the process by default). Ours records the message and jumps back to discover(),
// which turns it into an error; what libpci allocated until then is not freed.
thread_local std::jmp_buf* fatal_jump = nullptr;
thread_local char fatal_message[256];

[[noreturn]] void on_fatal(char* msg, ...) {
    va_list ap;
    va_start(ap, msg);
    std::vsnprintf(fatal_message, sizeof fatal_message, msg, ap);
    va_end(ap);
    std::longjmp(*fatal_jump, 1);
}

void on_quiet(char*, ...) {}

// The property libpci read from sysfs, or "" (a link's target's last component).
std::string property(pci_dev* d, unsigned prop) {
    const char* s = pci_get_string_property(d, prop);
    return s ? std::string(s) : std::string();
}

// The libpci part: no C++ object lives in this frame, so the jump from on_fatal skips
// no destructor. Returns null with fatal_message set on failure.
pci_access* scan() {
    std::jmp_buf jump;
    pci_access* volatile acc = nullptr;
    fatal_jump = &jump;
    if (setjmp(jump) != 0) {
        fatal_jump = nullptr;
        return nullptr;
    }
    acc = pci_alloc();
    acc->error = on_fatal;
    acc->warning = on_quiet;
    acc->debug = on_quiet;
    pci_init(acc);
    pci_scan_bus(acc);
    for (pci_dev* d = acc->devices; d != nullptr; d = d->next) {
        pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_NUMA_NODE | PCI_FILL_IOMMU_GROUP |
                             PCI_FILL_DRIVER);
    }
    fatal_jump = nullptr;
    return acc;
}

}  // namespace

result<std::vector<function>> discover() {
    pci_access* acc = scan();
    if (acc == nullptr) {
        return error{EIO, fmt::format("PCI discovery (libpci) failed: {}; is /sys mounted and readable?",
                                      fatal_message)};
    }
    std::vector<function> out;
    for (pci_dev* d = acc->devices; d != nullptr; d = d->next) {
        if (d->vendor_id != hw::mellanox_vendor_id) continue;
        const hw::pci_device_id* id = hw::find_mlx5_device(d->device_id);
        if (id == nullptr) continue;  // a Mellanox function that is not an mlx5 HCA
        function f;
        f.bdf = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", d->domain, d->bus, d->dev, d->func);
        f.vendor = d->vendor_id;
        f.device = d->device_id;
        f.name = std::string(id->name);
        f.virtual_function = id->virtual_function;
        f.driver = property(d, PCI_FILL_DRIVER);
        if (const std::string g = property(d, PCI_FILL_IOMMU_GROUP); !g.empty()) f.iommu_group = std::atoi(g.c_str());
        f.numa_node = d->numa_node;
        out.push_back(std::move(f));
    }
    pci_cleanup(acc);
    std::sort(out.begin(), out.end(), [](const function& a, const function& b) { return a.bdf < b.bdf; });
    return out;
}

}  // namespace cxv::driver::pci
