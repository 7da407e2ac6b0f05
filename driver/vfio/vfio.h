// VFIO: the driver's only way to a device. A function bound to vfio-pci is opened
// through its IOMMU group and a type1 container; the driver then reaches it by
//   (1) loads and stores to BAR0, mapped from the device fd,
//   (2) DMA to memory it mapped into the container's IOMMU (MAP_DMA),
//   (3) MSI-X interrupts delivered to eventfds (SET_IRQS),
// and nothing else. (Linux: Documentation/driver-api/vfio.rst; include/uapi/linux/vfio.h.)
//
// Every object is RAII and made by a named create()/open() returning result<T>; errors
// say what a person should do (bind the function to vfio-pci, make the group viable,
// raise RLIMIT_MEMLOCK, enable the IOMMU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "hw/mmio.h"

namespace cxv::driver::vfio {

class device;

// Usable IOVA ranges (VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) and page sizes.
struct iommu_info {
    std::uint64_t page_sizes = 0;  // iova_pgsizes bitmap
    struct range {
        std::uint64_t first, last;  // inclusive
    };
    std::vector<range> ranges;
};

// Memory the device can reach: host memory mapped at an IOVA. Unmapped (and, if the
// mapping allocated it, freed) on destruction. Movable, not copyable.
class dma_buffer {
public:
    dma_buffer() = default;
    dma_buffer(dma_buffer&&) noexcept;
    dma_buffer& operator=(dma_buffer&&) noexcept;
    dma_buffer(const dma_buffer&) = delete;
    dma_buffer& operator=(const dma_buffer&) = delete;
    ~dma_buffer();

    std::byte* data() const noexcept { return data_; }
    std::uint64_t iova() const noexcept { return iova_; }
    std::size_t size() const noexcept { return size_; }
    explicit operator bool() const noexcept { return data_ != nullptr; }
    // The IOVA of a byte inside the buffer.
    std::uint64_t iova_of(const void* p) const noexcept {
        return iova_ + static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - data_);
    }

private:
    friend class device;
    dma_buffer(std::shared_ptr<void> owner, void* data, std::uint64_t iova, std::size_t size) noexcept
        : owner_(std::move(owner)), data_(static_cast<std::byte*>(data)), iova_(iova), size_(size) {}
    std::shared_ptr<void> owner_;  // keeps the container alive; unmaps on release
    std::byte* data_ = nullptr;
    std::uint64_t iova_ = 0;
    std::size_t size_ = 0;
};

// A device region (VFIO_DEVICE_GET_REGION_INFO): a BAR, the config space, ... with the
// parts that may be mmapped (the sparse-mmap capability; the whole region otherwise).
struct region_info {
    unsigned index = 0;
    std::uint64_t size = 0;
    std::uint64_t offset = 0;  // of the region in the device fd
    bool readable = false, writable = false, mappable = false;
    struct area {
        std::uint64_t offset, size;  // inside the region
    };
    std::vector<area> mmap_areas;  // empty when not mappable
};

// Interrupt kinds of a PCI function (VFIO_PCI_*_IRQ_INDEX).
enum class irq_kind : unsigned { intx = 0, msi = 1, msix = 2 };

// The control path of a function that another process owns and opened through VFIO (a
// daemon, docs/daemon.md), as a device reached from here needs it: memory the device may
// reach is handed over as a sealed memfd and mapped there, and UAR pages are granted one
// at a time with the device fd to map them from. Implemented above the driver (daemon/).
class remote_backend {
public:
    virtual ~remote_backend() = default;
    // [offset, offset + length) of `fd` (a memfd sealed against shrinking; the callee
    // keeps its own reference) mapped for the device: the IOVA it got, aligned to `align`
    // (a power of two ≥ 4 KiB).
    virtual result<std::uint64_t> map_memory(int fd, std::uint64_t offset, std::uint64_t length,
                                             bool device_writes, std::uint64_t align) = 0;
    virtual status unmap_memory(std::uint64_t iova) = 0;
    struct uar_grant {
        std::uint32_t uar = 0;
        unique_fd fd;  // the device fd the page is mapped from, now the caller's
        std::uint64_t mmap_offset = 0, mmap_length = 0;
    };
    virtual result<uar_grant> alloc_uar() = 0;
    virtual status dealloc_uar(std::uint32_t uar) = 0;

    // The owner is gone (it died or dropped this process): every page mapped here from
    // the device fd it granted is replaced with anonymous memory, so that nothing here
    // keeps the device file open — on a card the last close of a vfio-pci device resets
    // the function, which ends whatever DMA it still does into this process's memory —
    // and a doorbell store from a poster that has not heard lands nowhere. Any thread;
    // the pages mapped later are dropped at once (device::alloc_uar fails, ENODEV).
    void drop_device_mappings() noexcept;
    // device's bookkeeping: [at, at + len) was mapped from a granted device fd (false:
    // dropped already, and so is that page), and the mappings in [lo, lo + len) go.
    bool add_device_mapping(void* at, std::size_t len) noexcept;
    void remove_device_mappings(void* lo, std::size_t len) noexcept;

private:
    std::mutex maps_mu_;
    bool maps_dropped_ = false;
    std::vector<std::pair<void*, std::size_t>> maps_;
};

// An opened vfio-pci function: with its own group and container (open), or reached
// through the process that owns it (attach).
class device {
public:
    // Opens the function at `bdf` ("DDDD:BB:DD.F") the way the kernel documents it:
    // container, group (must be viable), type1v2 IOMMU, device fd; maps BAR0; reads the
    // IOMMU's page sizes and IOVA ranges; enables memory decode and bus mastering.
    // `vf_token` (a UUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"): a VF whose PF is
    // bound to vfio-pci opens only with the token the PF's user set (set_vf_token), given
    // to VFIO_GROUP_GET_DEVICE_FD as "BDF vf_token=UUID"; empty for any other function.
    static result<std::unique_ptr<device>> open(const std::string& bdf, const std::string& vf_token = {});
    // A function another process owns, reached through `b`: no container, no interrupts,
    // no config space. bar0() is a window of BAR0's size in which only the UAR pages
    // granted to this process are mapped (alloc_uar); the rest faults. alloc_dma and
    // alloc_dma_huge allocate sealed memfds and hand them over; map_dma takes memory that
    // is backed by a memfd (registered in memfd_ranges.h, or found through
    // /proc/self/maps) and re-backs private memory with one in place (memfd_ranges.h).
    // `bar_size` is BAR0's, as the owner tells it (the fd it passes may not answer VFIO
    // ioctls here: under the model it is not a VFIO fd at all); fd() is -1.
    static result<std::unique_ptr<device>> attach(const std::string& bdf, std::shared_ptr<remote_backend> b,
                                                  std::size_t bar_size);
    bool remote() const noexcept;
    // Remote only: a UAR page granted by the owner, mapped at its place in bar0()
    // (EOPNOTSUPP for a function opened here: its driver runs ALLOC_UAR itself).
    result<std::uint32_t> alloc_uar();

    ~device();
    device(const device&) = delete;
    device& operator=(const device&) = delete;

    const std::string& bdf() const noexcept;
    // The device fd, for a daemon to pass to a client (SCM_RIGHTS) that maps a UAR page
    // of BAR0 from it; the device object keeps owning it.
    int fd() const noexcept;
    const hw::mmio_window& bar0() const noexcept;
    // BAR0 mapped write-combining through sysfs `resource0_wc` (root; a prefetchable
    // BAR), for BlueFlame: VFIO maps BARs uncached. Null when there is none or it cannot
    // be mapped; then bar0() is all there is.
    const hw::mmio_window* bar0_wc() const noexcept;
    const iommu_info& iommu() const noexcept;
    unsigned msix_count() const noexcept;  // vectors the function has

    // Zeroed, page-aligned memory of at least `size` bytes, mapped for the device to
    // read and write, at an IOVA aligned to `align` (a power of two ≥ 4 KiB) inside a
    // usable range.
    result<dma_buffer> alloc_dma(std::size_t size, std::size_t align = 4096);
    // The same from 2 MiB hugepages (size rounded up to 2 MiB, IOVA 2 MiB-aligned at
    // least): fewer IOMMU entries and TLB misses for large rings and buffers. Fails with
    // ENOMEM and what to do when the system has no free 2 MiB hugepages.
    result<dma_buffer> alloc_dma_huge(std::size_t size, std::size_t align = std::size_t{2} << 20);
    // The caller's memory [p, p+len) made reachable: the pages that hold it are mapped
    // (any alignment of p and len); the returned buffer's data() is the page-aligned
    // start, at an IOVA aligned to `align` (a power of two ≥ 4 KiB). The caller keeps the
    // memory alive while the mapping exists.
    result<dma_buffer> map_dma(void* p, std::size_t len, bool device_writes = true, std::size_t align = 4096);

    // Routes MSI-X vector `v` to a new eventfd (non-blocking) owned by the device
    // object; returns the fd. All vectors are enabled at the first call (Linux 6.1
    // cannot add vectors later).
    result<int> msix_eventfd(unsigned v);
    // VFIO_DEVICE_RESET (function level reset).
    status reset();
    // A PF's VF token (VFIO_DEVICE_FEATURE_PCI_VF_TOKEN, set only): the secret its VFs'
    // users must give to open them while this process drives the PF (open's vf_token).
    // EINVAL for a malformed UUID; the kernel's errno otherwise (no SR-IOV: EINVAL).
    status set_vf_token(const std::string& uuid);

    // Any region of the device, with its sparse-mmap areas.
    result<region_info> region(unsigned index) const;
    // PCI configuration space through the config region (1, 2 or 4 bytes).
    result<std::uint32_t> config_read(unsigned offset, unsigned width) const;
    status config_write(unsigned offset, unsigned width, std::uint32_t value);

    // Interrupts other than MSI-X: the number of vectors of `kind`, a vector routed to
    // a new eventfd (owned by the device object; for MSI all vectors are enabled at the
    // first call, as for MSI-X), INTx unmasking (VFIO masks INTx at each interrupt until
    // the driver has quietened the device and unmasks it), and turning a kind off.
    unsigned irq_count(irq_kind kind) const;
    result<int> irq_eventfd(irq_kind kind, unsigned vector);
    status unmask_intx();
    status disable_irqs(irq_kind kind);

private:
    struct impl;
    explicit device(std::unique_ptr<impl> p);
    // MAP_DMA of [vaddr, vaddr+size) (page-aligned) at a fresh IOVA; `owned` memory is
    // released with the mapping.
    result<dma_buffer> map_range(void* vaddr, std::size_t size, std::size_t align, bool writable, bool owned);
    // The remote forms (remote.cc): [vaddr, vaddr+size) is the mapping of `fd` at `offset`.
    result<dma_buffer> remote_map(int fd, std::uint64_t offset, void* vaddr, std::size_t size, bool writable,
                                  bool owned, std::size_t align);
    result<dma_buffer> remote_alloc(std::size_t size, bool huge, std::size_t align);
    result<dma_buffer> remote_map_user(void* p, std::size_t len, bool writable, std::size_t align);
    std::unique_ptr<impl> p_;
};

}  // namespace cxv::driver::vfio
