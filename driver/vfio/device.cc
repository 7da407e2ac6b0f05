#include "driver/vfio/vfio.h"
#include "driver/vfio/device_impl.h"
#include "driver/vfio/iova.h"

#include <fcntl.h>
#include <linux/mman.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "base/errno_text.h"
#include "hw/pci_ids.h"

namespace cxv::driver::vfio {

namespace {

constexpr std::uint64_t kPage = 4096;

std::string sysfs(const std::string& bdf) { return "/sys/bus/pci/devices/" + bdf; }

std::string read_link(const std::string& path) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return {};
    return std::string(buf, static_cast<std::size_t>(n));
}

std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// A sysfs attribute's text without its newline ("0x15b3"); empty if unreadable.
std::string read_line(const std::string& path) {
    char buf[64] = {};
    const unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return {};
    const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
    std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}


// What a function reached through its owner cannot do from here.
error not_here(const std::string& bdf, const char* what) {
    return error{EOPNOTSUPP, fmt::format("{}: {} is the owning process's (this function is reached through cxvd)",
                                         bdf, what)};
}

}  // namespace

dma_buffer::dma_buffer(dma_buffer&& o) noexcept
    : owner_(std::move(o.owner_)), data_(std::exchange(o.data_, nullptr)), iova_(o.iova_), size_(o.size_) {}

dma_buffer& dma_buffer::operator=(dma_buffer&& o) noexcept {
    owner_ = std::move(o.owner_);
    data_ = std::exchange(o.data_, nullptr);
    iova_ = o.iova_;
    size_ = o.size_;
    return *this;
}

dma_buffer::~dma_buffer() = default;

namespace {

// The capability chain VFIO appends to an info structure (struct vfio_info_cap_header:
// id, version, next offset from the structure's start; 0 ends it): calls
// `each(id, offset)` for every capability that lies inside the `argsz` bytes returned.
template <typename F>
void for_each_cap(const void* info, std::uint32_t first, std::uint32_t argsz, F each) {
    const auto* base = static_cast<const std::byte*>(info);
    for (std::uint32_t off = first; off != 0 && off + sizeof(vfio_info_cap_header) <= argsz;) {
        vfio_info_cap_header h;
        std::memcpy(&h, base + off, sizeof h);
        each(h.id, base + off);
        off = h.next;
    }
}

// VFIO_DEVICE_GET_REGION_INFO with its capability chain (sparse mmap areas).
result<region_info> read_region(int fd, unsigned index, const std::string& bdf) {
    std::vector<std::uint64_t> buf(64);
    auto* ri = reinterpret_cast<vfio_region_info*>(buf.data());
    ri->argsz = sizeof *ri;
    ri->index = index;
    if (::ioctl(fd, VFIO_DEVICE_GET_REGION_INFO, ri) != 0) {
        return sys_error(errno, fmt::format("{}: region {} info", bdf, index));
    }
    if (ri->argsz > sizeof *ri) {  // capabilities follow: ask again with room for them
        const std::uint32_t need = ri->argsz;
        buf.assign((need + 7) / 8, 0);
        ri = reinterpret_cast<vfio_region_info*>(buf.data());
        ri->argsz = need;
        ri->index = index;
        if (::ioctl(fd, VFIO_DEVICE_GET_REGION_INFO, ri) != 0) {
            return sys_error(errno, fmt::format("{}: region {} info", bdf, index));
        }
    }
    region_info r;
    r.index = index;
    r.size = ri->size;
    r.offset = ri->offset;
    r.readable = (ri->flags & VFIO_REGION_INFO_FLAG_READ) != 0;
    r.writable = (ri->flags & VFIO_REGION_INFO_FLAG_WRITE) != 0;
    r.mappable = (ri->flags & VFIO_REGION_INFO_FLAG_MMAP) != 0;
    bool sparse = false;
    if (ri->flags & VFIO_REGION_INFO_FLAG_CAPS) {
        for_each_cap(ri, ri->cap_offset, ri->argsz, [&](std::uint16_t id, const std::byte* cap) {
            if (id != VFIO_REGION_INFO_CAP_SPARSE_MMAP) return;
            vfio_region_info_cap_sparse_mmap sm;
            std::memcpy(&sm, cap, sizeof sm);
            sparse = true;
            for (std::uint32_t i = 0; i < sm.nr_areas; ++i) {
                vfio_region_sparse_mmap_area a;
                std::memcpy(&a, cap + sizeof sm + i * sizeof a, sizeof a);
                if (a.size != 0) r.mmap_areas.push_back({a.offset, a.size});
            }
        });
    }
    if (r.mappable && !sparse) r.mmap_areas.push_back({0, r.size});
    return r;
}

}  // namespace

device::device(std::unique_ptr<impl> p) : p_(std::move(p)) {}
device::~device() = default;
const std::string& device::bdf() const noexcept { return p_->bdf; }
int device::fd() const noexcept { return p_->fd.get(); }
const hw::mmio_window& device::bar0() const noexcept { return p_->window; }
const hw::mmio_window* device::bar0_wc() const noexcept { return p_->wc ? &p_->wc_window : nullptr; }
const iommu_info& device::iommu() const noexcept { return p_->dom->info; }
unsigned device::msix_count() const noexcept { return p_->msix; }
bool device::remote() const noexcept { return p_->remote != nullptr; }

namespace {

// sysfs: the function exists, is bound to vfio-pci, and sits in an IOMMU group.
result<iommu_group> find_group(const std::string& bdf) {
    struct ::stat st;
    if (::stat(sysfs(bdf).c_str(), &st) != 0) {
        return error{ENODEV, fmt::format("{}: no such PCI function ({} does not exist)", bdf, sysfs(bdf))};
    }
    const std::string driver = base_name(read_link(sysfs(bdf) + "/driver"));
    if (driver != "vfio-pci") {
        // Not every function is ours to bind: a host bridge or a NIC of another vendor.
        const std::string vendor = read_line(sysfs(bdf) + "/vendor");
        const std::string device = read_line(sysfs(bdf) + "/device");
        const auto id = static_cast<std::uint16_t>(std::strtoul(device.c_str(), nullptr, 16));
        if (std::strtoul(vendor.c_str(), nullptr, 16) != hw::mellanox_vendor_id || !hw::find_mlx5_device(id)) {
            return error{ENODEV, fmt::format("{}: not a ConnectX (mlx5) function ({}:{}); `cxv list` shows those "
                                             "there are", bdf, vendor, device)};
        }
        const std::string unbind =
            driver.empty() ? "" : fmt::format("  echo {} > {}/driver/unbind\n", bdf, sysfs(bdf));
        return error{ENODEV, fmt::format("{}: bound to {} instead of vfio-pci; `cxv setup --bind {}` binds it "
                                         "(docs/hardware.md), or by hand:\n"
                                         "  echo vfio-pci > {}/driver_override\n{}"
                                         "  echo {} > /sys/bus/pci/drivers_probe",
                                         bdf, driver.empty() ? "no driver" : driver, bdf, sysfs(bdf), unbind, bdf)};
    }
    const std::string group_link = read_link(sysfs(bdf) + "/iommu_group");
    if (group_link.empty()) {
        return error{ENODEV, fmt::format("{}: no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on "
                                         "on the kernel command line)", bdf)};
    }
    return iommu_group{base_name(group_link), "/dev/vfio/" + base_name(group_link)};
}

// A new container that offers the type1v2 IOMMU.
result<std::shared_ptr<domain>> open_container(const std::string& bdf) {
    auto dom = std::make_shared<domain>();
    dom->container.reset(::open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC));
    if (!dom->container) {
        return sys_error(errno, fmt::format("{}: /dev/vfio/vfio (load the vfio-pci module)", bdf));
    }
    if (::ioctl(dom->container.get(), VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
        ::ioctl(dom->container.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0) {
        return error{ENOTSUP, fmt::format("{}: the kernel's VFIO lacks the type1v2 IOMMU", bdf)};
    }
    return dom;
}

// The IOMMU's page sizes and usable IOVA ranges (legacy x86 ranges when the kernel does
// not report them), and the IOVA allocator over those ranges.
status read_iommu_info(domain& dom, const std::string& bdf) {
    std::vector<std::uint64_t> buf(512);
    auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buf.data());
    info->argsz = static_cast<std::uint32_t>(buf.size() * 8);
    if (::ioctl(dom.container.get(), VFIO_IOMMU_GET_INFO, info) != 0) return sys_error(errno, bdf + ": VFIO_IOMMU_GET_INFO");
    dom.info.page_sizes = (info->flags & VFIO_IOMMU_INFO_PGSIZES) ? info->iova_pgsizes : kPage;
    if (info->flags & VFIO_IOMMU_INFO_CAPS) {
        for_each_cap(info, info->cap_offset, info->argsz, [&](std::uint16_t id, const std::byte* cap) {
            if (id != VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) return;
            vfio_iommu_type1_info_cap_iova_range r;
            std::memcpy(&r, cap, sizeof r);
            for (std::uint32_t i = 0; i < r.nr_iovas; ++i) {
                vfio_iova_range one;
                std::memcpy(&one, cap + sizeof r + i * sizeof one, sizeof one);
                dom.info.ranges.push_back({one.start, one.end});
            }
        });
    }
    if (dom.info.ranges.empty()) dom.info.ranges = {{0x10000, 0xfedfffff}, {0xfef00000, (1ull << 39) - 1}};
    dom.iovas = std::make_unique<iova_allocator>(dom.info.ranges);
    return ok_status();
}

}  // namespace

// The group, viable, joins the container, which gets the type1v2 IOMMU; then the
// function's device fd.
status device::impl::attach(const iommu_group& g, domain& dom, const std::string& vf_token) {
    group.reset(::open(g.path.c_str(), O_RDWR | O_CLOEXEC));
    if (!group) {
        const int e = errno;
        if (e == EACCES || e == EPERM) {
            return sys_error(e, fmt::format("{}: {} (run as root or give this user the group's device node)",
                                            bdf, g.path));
        }
        if (e == EBUSY) return sys_error(e, fmt::format("{}: {} is open in another process", bdf, g.path));
        return sys_error(e, fmt::format("{}: {}", bdf, g.path));
    }
    vfio_group_status gs{};
    gs.argsz = sizeof gs;
    if (::ioctl(group.get(), VFIO_GROUP_GET_STATUS, &gs) != 0) return sys_error(errno, bdf + ": VFIO_GROUP_GET_STATUS");
    if (!(gs.flags & VFIO_GROUP_FLAGS_VIABLE)) {
        return error{EBUSY, fmt::format("{}: IOMMU group {} is not viable: bind every device in {}/devices to "
                                        "vfio-pci (or unbind it)",
                                        bdf, g.name, "/sys/kernel/iommu_groups/" + g.name)};
    }
    const int container = dom.container.get();  // the ioctl takes a pointer to the fd
    if (::ioctl(group.get(), VFIO_GROUP_SET_CONTAINER, &container) != 0) {
        return sys_error(errno, bdf + ": VFIO_GROUP_SET_CONTAINER");
    }
    if (::ioctl(dom.container.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) != 0) {
        return sys_error(errno, bdf + ": VFIO_SET_IOMMU (type1v2)");
    }
    // With a token the name carries it (vfio_pci_core_match: "BDF vf_token=UUID").
    const std::string name = vf_token.empty() ? bdf : fmt::format("{} vf_token={}", bdf, vf_token);
    fd.reset(::ioctl(group.get(), VFIO_GROUP_GET_DEVICE_FD, name.c_str()));
    if (!fd) {
        const int e = errno;
        if (e == EACCES) {
            return sys_error(e, fmt::format("{}: VFIO_GROUP_GET_DEVICE_FD: {}", bdf,
                                            vf_token.empty() ? "a VF of a PF that a vfio-pci user drives needs that "
                                                               "user's VF token"
                                                             : "not the VF token its PF's user set"));
        }
        return sys_error(e, bdf + ": VFIO_GROUP_GET_DEVICE_FD");
    }
    return ok_status();
}

// BAR0: the whole region in one window; where the sparse-mmap capability lists only some
// areas, the rest stays reserved and inaccessible. Also the same BAR write-combining,
// where the kernel offers it (best effort: without it BlueFlame falls back to 8-byte
// doorbells after the write-combining self-test).
status device::impl::map_bar0() {
    auto r = read_region(fd.get(), VFIO_PCI_BAR0_REGION_INDEX, bdf);
    if (!r) return r.error();
    if (!r->mappable || r->size == 0) return error{ENOTSUP, fmt::format("{}: BAR0 cannot be mapped", bdf)};
    bar = ::mmap(nullptr, r->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (bar == MAP_FAILED) {
        bar = nullptr;
        return sys_error(errno, bdf + ": address space for BAR0");
    }
    bar_size = r->size;
    for (const auto& a : r->mmap_areas) {
        void* at = static_cast<std::byte*>(bar) + a.offset;
        if (::mmap(at, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd.get(),
                   static_cast<off_t>(r->offset + a.offset)) == MAP_FAILED) {
            return sys_error(errno, fmt::format("{}: mmap of BAR0 [0x{:x}, +0x{:x})", bdf, a.offset, a.size));
        }
    }
    window = hw::mmio_window(bar, r->size);
    if (const unique_fd f(::open((sysfs(bdf) + "/resource0_wc").c_str(), O_RDWR | O_CLOEXEC)); f) {
        void* m = ::mmap(nullptr, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, f.get(), 0);
        if (m != MAP_FAILED) {
            wc = m;
            wc_window = hw::mmio_window(m, r->size);
        }
    }
    return ok_status();
}

// Memory decode and bus mastering on (the PCI command register), through the config
// region, whose offset is kept for config_read/config_write.
status device::impl::enable_device() {
    vfio_region_info cfg{};
    cfg.argsz = sizeof cfg;
    cfg.index = VFIO_PCI_CONFIG_REGION_INDEX;
    if (::ioctl(fd.get(), VFIO_DEVICE_GET_REGION_INFO, &cfg) != 0) return sys_error(errno, bdf + ": config region info");
    config_offset = cfg.offset;
    std::uint16_t cmd = 0;
    if (::pread(fd.get(), &cmd, 2, static_cast<off_t>(cfg.offset + PCI_COMMAND)) != 2) {
        return sys_error(errno, bdf + ": config read");
    }
    cmd |= PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    if (::pwrite(fd.get(), &cmd, 2, static_cast<off_t>(cfg.offset + PCI_COMMAND)) != 2) {
        return sys_error(errno, bdf + ": config write");
    }
    return ok_status();
}

void device::impl::read_msix_count() {
    vfio_irq_info irq{};
    irq.argsz = sizeof irq;
    irq.index = VFIO_PCI_MSIX_IRQ_INDEX;
    if (::ioctl(fd.get(), VFIO_DEVICE_GET_IRQ_INFO, &irq) == 0) msix = irq.count;
    eventfds.resize(msix);
}

// The order the kernel documents (Documentation/driver-api/vfio.rst): the group, a
// container with an IOMMU, the device; then BAR0, decode and mastering, interrupts.
result<std::unique_ptr<device>> device::open(const std::string& bdf, const std::string& vf_token) {
    auto p = std::make_unique<impl>();
    p->bdf = bdf;
    auto group = find_group(bdf);
    if (!group) return group.error();
    auto dom = open_container(bdf);
    if (!dom) return dom.error();
    if (auto s = p->attach(*group, **dom, vf_token); !s) return s.error();
    if (auto s = read_iommu_info(**dom, bdf); !s) return s.error();
    if (auto s = p->map_bar0(); !s) return s.error();
    if (auto s = p->enable_device(); !s) return s.error();
    p->read_msix_count();
    p->dom = std::move(dom).value();
    return std::unique_ptr<device>(new device(std::move(p)));
}

// A function another process owns: BAR0 reserved inaccessible, of the size the owner
// tells; UAR pages are mapped into it as they are granted (alloc_uar).
result<std::unique_ptr<device>> device::attach(const std::string& bdf, std::shared_ptr<remote_backend> b,
                                               std::size_t bar_size) {
    if (!b || bar_size == 0 || bar_size % kPage != 0) {
        return error{EINVAL, fmt::format("{}: attach needs a backend and BAR0's size ({} bytes)", bdf, bar_size)};
    }
    auto p = std::make_unique<impl>();
    p->bdf = bdf;
    p->dom = std::make_shared<domain>();
    p->remote = std::make_unique<remote_state>();
    p->remote->backend = std::move(b);
    p->bar = ::mmap(nullptr, bar_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p->bar == MAP_FAILED) {
        p->bar = nullptr;
        return sys_error(errno, bdf + ": address space for BAR0");
    }
    p->bar_size = bar_size;
    p->window = hw::mmio_window(p->bar, bar_size);
    return std::unique_ptr<device>(new device(std::move(p)));
}

result<dma_buffer> device::map_range(void* vaddr, std::size_t size, std::size_t align, bool writable,
                                     bool owned) {
    auto iova = p_->dom->iovas->reserve(size, align);
    if (!iova) return error{ENOSPC, fmt::format("{}: no free IOVA range for {} bytes", p_->bdf, size)};
    vfio_iommu_type1_dma_map m{};
    m.argsz = sizeof m;
    m.flags = VFIO_DMA_MAP_FLAG_READ | (writable ? VFIO_DMA_MAP_FLAG_WRITE : 0);
    m.vaddr = reinterpret_cast<std::uint64_t>(vaddr);
    m.iova = *iova;
    m.size = size;
    if (::ioctl(p_->dom->container.get(), VFIO_IOMMU_MAP_DMA, &m) != 0) {
        const int e = errno;
        p_->dom->iovas->release(*iova);
        if (e == ENOMEM) {
            rlimit rl{};
            getrlimit(RLIMIT_MEMLOCK, &rl);
            return error{e, fmt::format("{}: VFIO_IOMMU_MAP_DMA: out of locked memory (RLIMIT_MEMLOCK {} bytes; "
                                        "raise it with ulimit -l)", p_->bdf, rl.rlim_cur)};
        }
        return sys_error(e, p_->bdf + ": VFIO_IOMMU_MAP_DMA");
    }
    auto owner = std::make_shared<mapping>();
    owner->dom = p_->dom;
    owner->iova = *iova;
    owner->size = size;
    owner->owned = owned ? vaddr : nullptr;
    return dma_buffer(std::move(owner), vaddr, *iova, size);
}

result<dma_buffer> device::alloc_dma(std::size_t size, std::size_t align) {
    if (size == 0 || align < kPage || (align & (align - 1))) return error{EINVAL, "alloc_dma: bad size or alignment"};
    if (p_->remote) return remote_alloc(size, false, align);
    size = (size + kPage - 1) & ~(kPage - 1);
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (mem == MAP_FAILED) return sys_error(errno, p_->bdf + ": DMA memory");
    auto b = map_range(mem, size, align, true, true);
    if (!b) ::munmap(mem, size);
    return b;
}

result<dma_buffer> device::alloc_dma_huge(std::size_t size, std::size_t align) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    if (size == 0 || (align & (align - 1))) return error{EINVAL, "alloc_dma_huge: bad size or alignment"};
    if (p_->remote) return remote_alloc(size, true, std::max(align, kHuge));
    size = (size + kHuge - 1) & ~(kHuge - 1);
    align = std::max(align, kHuge);
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
    if (mem == MAP_FAILED) {
        const int e = errno;
        return error{e, fmt::format("{}: {} MiB of 2 MiB hugepages: {} (reserve them: echo N > "
                                    "/proc/sys/vm/nr_hugepages, or hugepages=N on the kernel command line)",
                                    p_->bdf, size >> 20, std::strerror(e))};
    }
    auto b = map_range(mem, size, align, true, true);
    if (!b) ::munmap(mem, size);
    return b;
}

result<dma_buffer> device::map_dma(void* p, std::size_t len, bool device_writes, std::size_t align) {
    if (p == nullptr || len == 0) return error{EINVAL, "map_dma: empty range"};
    if (align < kPage || (align & (align - 1))) return error{EINVAL, "map_dma: bad alignment"};
    if (p_->remote) return remote_map_user(p, len, device_writes, align);
    const auto start = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + len + kPage - 1) & ~(kPage - 1);
    return map_range(reinterpret_cast<void*>(start), end - start, align, device_writes, false);
}

result<int> device::msix_eventfd(unsigned v) {
    if (p_->remote) return not_here(p_->bdf, "MSI-X");
    if (v >= p_->msix) return error{EINVAL, fmt::format("{}: MSI-X vector {} of {}", p_->bdf, v, p_->msix)};
    if (!p_->eventfds[v]) {
        p_->eventfds[v].reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!p_->eventfds[v]) return sys_error(errno, p_->bdf + ": eventfd");
    }
    // The first use enables every vector at once (Linux 6.1 cannot add vectors later).
    const unsigned start = p_->msix_enabled ? v : 0;
    const unsigned count = p_->msix_enabled ? 1 : p_->msix;
    std::vector<std::byte> buf(sizeof(vfio_irq_set) + count * sizeof(std::int32_t));
    auto* s = reinterpret_cast<vfio_irq_set*>(buf.data());
    s->argsz = static_cast<std::uint32_t>(buf.size());
    s->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    s->index = VFIO_PCI_MSIX_IRQ_INDEX;
    s->start = start;
    s->count = count;
    for (unsigned i = 0; i < count; ++i) {
        const std::int32_t fd = p_->eventfds[start + i].get();
        std::memcpy(s->data + i * sizeof fd, &fd, sizeof fd);
    }
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_SET_IRQS, s) != 0) return sys_error(errno, p_->bdf + ": VFIO_DEVICE_SET_IRQS");
    p_->msix_enabled = true;
    return p_->eventfds[v].get();
}

result<region_info> device::region(unsigned index) const { return read_region(p_->fd.get(), index, p_->bdf); }

result<std::uint32_t> device::config_read(unsigned offset, unsigned width) const {
    if (width != 1 && width != 2 && width != 4) return error{EINVAL, "config_read: width 1, 2 or 4"};
    std::uint32_t v = 0;  // little-endian, as PCI configuration space is
    if (::pread(p_->fd.get(), &v, width, static_cast<off_t>(p_->config_offset + offset)) != static_cast<ssize_t>(width)) {
        return sys_error(errno, fmt::format("{}: config read at 0x{:x}", p_->bdf, offset));
    }
    return v;
}

status device::config_write(unsigned offset, unsigned width, std::uint32_t value) {
    if (p_->remote) return not_here(p_->bdf, "config space writes");
    if (width != 1 && width != 2 && width != 4) return error{EINVAL, "config_write: width 1, 2 or 4"};
    if (::pwrite(p_->fd.get(), &value, width, static_cast<off_t>(p_->config_offset + offset)) != static_cast<ssize_t>(width)) {
        return sys_error(errno, fmt::format("{}: config write at 0x{:x}", p_->bdf, offset));
    }
    return ok_status();
}

unsigned device::irq_count(irq_kind kind) const {
    vfio_irq_info irq{};
    irq.argsz = sizeof irq;
    irq.index = static_cast<unsigned>(kind);
    return ::ioctl(p_->fd.get(), VFIO_DEVICE_GET_IRQ_INFO, &irq) == 0 ? irq.count : 0;
}

result<int> device::irq_eventfd(irq_kind kind, unsigned vector) {
    if (p_->remote) return not_here(p_->bdf, "interrupts");
    if (kind == irq_kind::msix) return msix_eventfd(vector);
    const unsigned k = static_cast<unsigned>(kind);
    auto& fds = p_->other_fds[k];
    if (fds.empty()) fds.resize(irq_count(kind));
    if (vector >= fds.size()) {
        return error{EINVAL, fmt::format("{}: {} vector {} of {}", p_->bdf, kind == irq_kind::intx ? "INTx" : "MSI",
                                         vector, fds.size())};
    }
    if (!fds[vector]) {
        fds[vector].reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!fds[vector]) return sys_error(errno, p_->bdf + ": eventfd");
    }
    const unsigned start = p_->other_enabled[k] ? vector : 0;
    const unsigned count = p_->other_enabled[k] ? 1 : static_cast<unsigned>(fds.size());
    std::vector<std::byte> buf(sizeof(vfio_irq_set) + count * sizeof(std::int32_t));
    auto* s = reinterpret_cast<vfio_irq_set*>(buf.data());
    s->argsz = static_cast<std::uint32_t>(buf.size());
    s->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    s->index = k;
    s->start = start;
    s->count = count;
    for (unsigned i = 0; i < count; ++i) {
        const std::int32_t fd = fds[start + i].get();
        std::memcpy(s->data + i * sizeof fd, &fd, sizeof fd);
    }
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_SET_IRQS, s) != 0) return sys_error(errno, p_->bdf + ": VFIO_DEVICE_SET_IRQS");
    p_->other_enabled[k] = true;
    return fds[vector].get();
}

status device::unmask_intx() {
    if (p_->remote) return not_here(p_->bdf, "INTx");
    vfio_irq_set s{};
    s.argsz = sizeof s;
    s.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
    s.index = VFIO_PCI_INTX_IRQ_INDEX;
    s.start = 0;
    s.count = 1;
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_SET_IRQS, &s) != 0) return sys_error(errno, p_->bdf + ": INTx unmask");
    return ok_status();
}

status device::disable_irqs(irq_kind kind) {
    if (p_->remote) return not_here(p_->bdf, "interrupts");
    vfio_irq_set s{};
    s.argsz = sizeof s;
    s.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
    s.index = static_cast<unsigned>(kind);
    s.start = 0;
    s.count = 0;
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_SET_IRQS, &s) != 0) return sys_error(errno, p_->bdf + ": disabling interrupts");
    if (kind == irq_kind::msix) {
        p_->msix_enabled = false;
    } else {
        p_->other_enabled[static_cast<unsigned>(kind)] = false;
    }
    return ok_status();
}

status device::reset() {
    if (p_->remote) return not_here(p_->bdf, "reset");
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_RESET) != 0) return sys_error(errno, p_->bdf + ": VFIO_DEVICE_RESET");
    return ok_status();
}

// The UUID's 16 bytes in text order (RFC 4122's 8-4-4-4-12 hex digits), as the kernel's
// uuid_t holds it.
status device::set_vf_token(const std::string& uuid) {
    if (p_->remote) return not_here(p_->bdf, "set_vf_token");
    // The feature header, then the UUID in its flexible data.
    alignas(vfio_device_feature) std::uint8_t buf[sizeof(vfio_device_feature) + 16] = {};
    std::uint8_t* uuid_bytes = buf + sizeof(vfio_device_feature);
    std::size_t n = 0;
    bool good = uuid.size() == 36;
    for (std::size_t i = 0; good && i < uuid.size(); ++i) {
        const char c = uuid[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            good = c == '-';
            continue;
        }
        const int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                      : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                  : -1;
        if (v < 0) {
            good = false;
        } else {
            uuid_bytes[n / 2] = static_cast<std::uint8_t>(uuid_bytes[n / 2] << 4 | v);
            ++n;
        }
    }
    if (!good || n != 32) return error{EINVAL, fmt::format("{}: VF token \"{}\" is not a UUID", p_->bdf, uuid)};
    vfio_device_feature head{};
    head.argsz = sizeof buf;
    head.flags = VFIO_DEVICE_FEATURE_SET | VFIO_DEVICE_FEATURE_PCI_VF_TOKEN;
    std::memcpy(buf, &head, sizeof head);
    if (::ioctl(p_->fd.get(), VFIO_DEVICE_FEATURE, buf) != 0) {
        return sys_error(errno, p_->bdf + ": VFIO_DEVICE_FEATURE (PCI_VF_TOKEN)");
    }
    return ok_status();
}

}  // namespace cxv::driver::vfio
