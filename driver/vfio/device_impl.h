// The insides of vfio::device shared by its two implementations: a function opened here
// through VFIO (device.cc) and one another process owns (remote.cc). Not for use outside
// driver/vfio.
#pragma once

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/vfio.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "driver/vfio/iova.h"
#include "driver/vfio/vfio.h"

namespace cxv::driver::vfio {

// The function's IOMMU group: its name and device node.
struct iommu_group {
    std::string name, path;
};

// The container's IOMMU domain and its IOVA space. Shared by the device and every
// dma_buffer, so that a buffer outliving its device still unmaps cleanly.
struct domain {
    unique_fd container;
    iommu_info info;
    std::unique_ptr<iova_allocator> iovas;  // over info.ranges, once they are known
};

struct mapping {
    std::shared_ptr<domain> dom;
    std::uint64_t iova = 0, size = 0;
    void* owned = nullptr;  // memory this mapping allocated (munmap on release)
    ~mapping() {
        vfio_iommu_type1_dma_unmap u{};
        u.argsz = sizeof u;
        u.iova = iova;
        u.size = size;
        (void)::ioctl(dom->container.get(), VFIO_IOMMU_UNMAP_DMA, &u);
        dom->iovas->release(iova);
        if (owned) ::munmap(owned, size);
    }
};

// A function another process owns: its backend, and the UAR pages granted so far.
struct remote_state {
    std::shared_ptr<remote_backend> backend;
    std::mutex mu;
    std::vector<std::uint32_t> uars;  // granted, mapped into the BAR0 window
};

struct device::impl {
    std::string bdf;
    std::shared_ptr<domain> dom;
    unique_fd group, fd;
    void* bar = nullptr;
    std::size_t bar_size = 0;
    hw::mmio_window window;
    void* wc = nullptr;  // resource0_wc mapping, bar_size bytes
    hw::mmio_window wc_window;
    unsigned msix = 0;
    bool msix_enabled = false;
    std::vector<unique_fd> eventfds;
    // INTx and MSI: enabled or not, and the eventfds per vector.
    bool other_enabled[2] = {false, false};
    std::vector<unique_fd> other_fds[2];
    std::uint64_t config_offset = 0;
    // Set when another process owns the function (device::attach): `bar` is then a
    // reservation of BAR0's size with only the granted UAR pages mapped, and `fd` -1
    // (each grant's device fd is closed once its page is mapped).
    std::unique_ptr<remote_state> remote;

    // The steps of device::open.
    status attach(const iommu_group& g, domain& dom, const std::string& vf_token);
    status map_bar0();
    status enable_device();
    void read_msix_count();

    // The eventfds, the device fd and the group close after the body, in that order.
    ~impl() {
        // The UAR pages unmapped before they are given back: the owner may grant them to
        // another client at once.
        if (remote && bar) remote->backend->remove_device_mappings(bar, bar_size);
        if (bar) ::munmap(bar, bar_size);
        if (remote) {
            for (std::uint32_t u : remote->uars) (void)remote->backend->dealloc_uar(u);
        }
        if (wc) ::munmap(wc, bar_size);
    }
};

}  // namespace cxv::driver::vfio
