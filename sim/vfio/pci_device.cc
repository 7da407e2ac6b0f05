// Device fds: what drivers/vfio/pci/vfio_pci_core.c, vfio_pci_intrs.c, vfio_pci_config.c
// and vfio_pci_rdwr.c do (Linux 6.1) for a ConnectX function bound to vfio-pci.
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "sim/vfio/host.h"
#include "sim/vfio/libc.h"

namespace cxv::sim::vfio {

namespace {

constexpr unsigned kOffsetShift = 40;  // VFIO_PCI_OFFSET_SHIFT
constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kOffsetShift) - 1;
constexpr std::uint16_t kCommandMemory = 0x2;

void set_command(device& d, std::uint16_t v) { d.pci_config().write(0x04, &v, sizeof v); }

void set_msix_enable(device& d, bool on) {
    std::uint8_t ctl = 0;
    d.pci_config().read(config_space::cap_msix + 3, &ctl, 1);
    ctl = static_cast<std::uint8_t>(on ? (ctl | 0x80) : (ctl & ~0x80));
    d.pci_config().write(config_space::cap_msix + 3, &ctl, 1);
}

// vfio_pci_get_irq_count
unsigned irq_count(const function_state& f, unsigned index) {
    switch (index) {
    case VFIO_PCI_INTX_IRQ_INDEX: return 1;  // INTA
    case VFIO_PCI_MSI_IRQ_INDEX: return 0;   // a ConnectX function has no MSI capability
    case VFIO_PCI_MSIX_IRQ_INDEX: return f.spec.model.msix_vectors;
    case VFIO_PCI_ERR_IRQ_INDEX: return 1;   // PCI Express
    case VFIO_PCI_REQ_IRQ_INDEX: return 1;
    default: return 0;
    }
}

// vfio_pci_bar_rw: how many bytes of a BAR0 access at `pos` go through, or -errno.
long bar_access_size(function_state& f, std::uint64_t pos, std::size_t len) {
    const std::size_t size = f.model->bar().size();
    if (pos >= size) return -EINVAL;
    // __vfio_pci_memory_enabled: with memory decode off, BAR accesses fail.
    if (!f.model->pci_config().memory_enabled()) return -EIO;
    return static_cast<long>(std::min<std::size_t>(len, size - pos));
}

bool in_msix_table(const function_state& f, std::uint64_t a) {
    const std::uint64_t start = config_space::msix_table_offset;
    return a >= start && a < start + std::uint64_t{f.spec.model.msix_vectors} * 16;
}

// vfio_config_do_rw: the whole access must lie inside config space.
bool inside_config(std::uint64_t pos, std::size_t len) {
    return pos < config_space::size && len <= config_space::size - pos;
}

// One load or store of a whole T at `reg` (naturally aligned), to or from the user's bytes.
template <typename T>
void single_access(std::byte* reg, std::uint8_t* user, bool write) {
    auto* p = reinterpret_cast<T*>(reg);
    T v;
    if (write) {
        std::memcpy(&v, user, sizeof v);
        __atomic_store_n(p, v, __ATOMIC_RELAXED);
    } else {
        v = __atomic_load_n(p, __ATOMIC_RELAXED);
        std::memcpy(user, &v, sizeof v);
    }
}

// do_io_rw: naturally aligned 8-, 4-, 2- and 1-byte accesses, each one load or store,
// so that the device never sees half a doorbell; the MSI-X table is skipped.
void bar_copy(const function_state& f, std::uint64_t pos, std::size_t n, std::uint8_t* user,
              bool write) {
    std::byte* bar = f.model->bar().base();
    for (std::size_t done = 0; done < n;) {
        const std::uint64_t a = pos + done;
        std::size_t w = 1;
        for (std::size_t c : {8u, 4u, 2u}) {
            if (a % c == 0 && n - done >= c) {
                w = c;
                break;
            }
        }
        std::uint8_t* u = user + done;
        if (in_msix_table(f, a)) {
            if (!write) std::memset(u, 0xff, w);
        } else if (w == 8) {
            single_access<std::uint64_t>(bar + a, u, write);
        } else if (w == 4) {
            single_access<std::uint32_t>(bar + a, u, write);
        } else if (write) {
            std::memcpy(bar + a, u, w);
        } else {
            std::memcpy(u, bar + a, w);
        }
        done += w;
    }
}

bool is_eventfd(int fd) {
    char path[64], target[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = libc().readlink(path, target, sizeof target - 1);
    if (n < 0) return false;
    target[n] = '\0';
    return std::strcmp(target, "anon_inode:[eventfd]") == 0;
}

void signal_eventfd(int fd) {
    const std::uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
}

// An eventfd the caller passed, validated as eventfd_ctx_fdget does, as our own copy.
long own_eventfd(int fd) {
    if (libc().fcntl(fd, F_GETFD) < 0) return -EBADF;
    if (!is_eventfd(fd)) return -EINVAL;
    const int own = libc().fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return own < 0 ? -errno : own;
}

void replace_fd(int& slot, int fd) {
    if (slot >= 0) libc().close(slot);
    slot = fd;
}

}  // namespace

// ---- enable, disable, reset ----

void enable_function(function_state& f) {
    // vfio_pci_core_enable: pci_enable_device, then a function reset; no interrupts.
    f.irq_type = -1;
    f.triggers.assign(f.spec.model.msix_vectors, -1);
    f.model->reset();
    set_command(*f.model, kCommandMemory);
}

void disable_function(function_state& f) {
    // vfio_pci_core_disable: interrupts off, bus mastering off, a function reset.
    disable_msix(f);
    disable_intx(f);
    for (int* t : {&f.err_trigger, &f.req_trigger}) {
        if (*t >= 0) libc().close(*t);
        *t = -1;
    }
    f.model->reset();
    set_command(*f.model, 0);
}

void reset_function(function_state& f) {
    // pci_try_reset_function saves config space around the FLR and restores it, and the
    // host re-programs the MSI-X vectors it routes: the user sees a fresh device whose
    // BAR mapping, bus mastering and interrupts still work.
    std::array<std::uint8_t, config_space::size> saved{};
    f.model->pci_config().read(0, saved.data(), saved.size());
    f.model->reset();
    f.model->pci_config().write(0, saved.data(), saved.size());
    for (unsigned v = 0; v < f.triggers.size(); ++v) {
        if (f.triggers[v] >= 0) f.model->msix().set(v, f.triggers[v]);
    }
}

void disable_msix(function_state& f) {
    for (int& fd : f.triggers) {
        if (fd >= 0) libc().close(fd);
        fd = -1;
    }
    if (f.model) {
        f.model->msix().clear();
        set_msix_enable(*f.model, false);
    }
    f.irq_type = -1;
}

// ---- ioctls ----

long host::device_ioctl(device_file& d, unsigned long request, void* arg) {
    function_state& f = d.fn;
    switch (request) {
    case VFIO_DEVICE_GET_INFO: {
        // vfio_pci_ioctl_get_info
        vfio_device_info info{};
        std::size_t minsz = offsetof(vfio_device_info, cap_offset);
        std::memcpy(&info, arg, minsz);
        if (info.argsz < minsz) return -EINVAL;
        // "For backward compatibility, cannot require this": cap_offset only if room.
        if (info.argsz >= offsetof(vfio_device_info, cap_offset) + sizeof info.cap_offset) {
            minsz = offsetof(vfio_device_info, cap_offset) + sizeof info.cap_offset;
            info.cap_offset = 0;
        }
        info.flags = VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET;  // FLR capable
        info.num_regions = VFIO_PCI_NUM_REGIONS;
        info.num_irqs = VFIO_PCI_NUM_IRQS;
        std::memcpy(arg, &info, minsz);
        return 0;
    }
    case VFIO_DEVICE_GET_REGION_INFO:
        return device_get_region_info(f, arg);
    case VFIO_DEVICE_GET_IRQ_INFO:
        return device_get_irq_info(f, arg);
    case VFIO_DEVICE_SET_IRQS:
        return device_set_irqs(f, arg);
    case VFIO_DEVICE_RESET:
        reset_function(f);
        return 0;
    case VFIO_DEVICE_FEATURE:
        return device_feature(f, arg);
    default:
        // Hot reset, ioeventfds, device features and migration are not emulated.
        return -ENOTTY;
    }
}

long host::device_get_region_info(function_state& f, void* arg) {
    // vfio_pci_ioctl_get_region_info
    vfio_region_info info{};
    std::memcpy(&info, arg, sizeof info);
    if (info.argsz < sizeof info) return -EINVAL;
    std::vector<std::byte> caps;
    switch (info.index) {
    case VFIO_PCI_CONFIG_REGION_INDEX:
        info.offset = std::uint64_t{info.index} << kOffsetShift;
        info.size = config_space::size;
        info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
        break;
    case VFIO_PCI_BAR0_REGION_INDEX:
        info.offset = 0;
        info.size = f.spec.model.bar0_size;
        info.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE |
                     VFIO_REGION_INFO_FLAG_MMAP;
        {
            // The MSI-X table lives in BAR0 and may be mapped with the rest of it.
            vfio_info_cap_header h{VFIO_REGION_INFO_CAP_MSIX_MAPPABLE, 1, 0};
            caps.resize(sizeof h);
            std::memcpy(caps.data(), &h, sizeof h);
        }
        break;
    case VFIO_PCI_BAR1_REGION_INDEX ... VFIO_PCI_BAR5_REGION_INDEX:
    case VFIO_PCI_ROM_REGION_INDEX:
        // BAR1 is BAR0's upper half (64-bit BAR); no other BARs, no expansion ROM.
        info.offset = std::uint64_t{info.index} << kOffsetShift;
        info.size = 0;
        info.flags = 0;
        break;
    default:
        return -EINVAL;  // no VGA, no device-specific regions
    }
    if (!caps.empty()) {
        info.flags |= VFIO_REGION_INFO_FLAG_CAPS;
        if (info.argsz < sizeof info + caps.size()) {
            info.argsz = static_cast<std::uint32_t>(sizeof info + caps.size());
            info.cap_offset = 0;
        } else {
            std::memcpy(static_cast<std::byte*>(arg) + sizeof info, caps.data(), caps.size());
            info.cap_offset = sizeof info;
        }
    }
    std::memcpy(arg, &info, sizeof info);
    return 0;
}

long host::device_get_irq_info(function_state& f, void* arg) {
    // vfio_pci_ioctl_get_irq_info
    vfio_irq_info info{};
    std::memcpy(&info, arg, sizeof info);
    if (info.argsz < sizeof info || info.index >= VFIO_PCI_NUM_IRQS) return -EINVAL;
    info.flags = VFIO_IRQ_INFO_EVENTFD;
    info.count = irq_count(f, info.index);
    if (info.index == VFIO_PCI_INTX_IRQ_INDEX) {
        info.flags |= VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED;
    } else {
        info.flags |= VFIO_IRQ_INFO_NORESIZE;
    }
    std::memcpy(arg, &info, sizeof info);
    return 0;
}

long host::set_vector(function_state& f, unsigned vector, int fd) {
    // vfio_msi_set_vector_signal
    if (vector >= f.triggers.size()) return -EINVAL;
    if (f.triggers[vector] >= 0) {
        f.model->msix().set(vector, -1);
        libc().close(f.triggers[vector]);
        f.triggers[vector] = -1;
    }
    if (fd < 0) return 0;
    const long own = own_eventfd(fd);
    if (own < 0) return own;
    f.triggers[vector] = static_cast<int>(own);
    f.model->msix().set(vector, static_cast<int>(own));
    return 0;
}

long host::set_single_trigger(int& trigger, unsigned count, unsigned type,
                              const std::uint8_t* data) {
    // vfio_pci_set_ctx_trigger_single: DATA_NONE and DATA_BOOL are loopback tests.
    if (type == VFIO_IRQ_SET_DATA_NONE) {
        if (trigger < 0) return -EINVAL;
        if (count != 0) {
            signal_eventfd(trigger);
        } else {
            libc().close(trigger);
            trigger = -1;
        }
        return 0;
    }
    if (count == 0) return -EINVAL;
    if (type == VFIO_IRQ_SET_DATA_BOOL) {
        if (data[0] != 0 && trigger >= 0) signal_eventfd(trigger);
        return 0;
    }
    std::int32_t fd = -1;
    std::memcpy(&fd, data, sizeof fd);
    if (fd == -1) {
        if (trigger >= 0) libc().close(trigger);
        trigger = -1;
    } else if (fd >= 0) {
        const long own = own_eventfd(fd);
        if (own < 0) return own;
        replace_fd(trigger, static_cast<int>(own));
    }
    return 0;
}


void disable_intx(function_state& f) {
    replace_fd(f.intx_trigger, -1);
    replace_fd(f.intx_unmask, -1);
    if (f.irq_type == VFIO_PCI_INTX_IRQ_INDEX) f.irq_type = -1;
}

long host::set_intx(function_state& f, unsigned action, unsigned start, unsigned count,
                    unsigned type, const std::uint8_t* data) {
    // vfio_pci_set_intx_mask / _unmask / _trigger. The model never asserts INTx; the
    // routing and the loopback work as in the kernel.
    const bool intx = f.irq_type == VFIO_PCI_INTX_IRQ_INDEX;
    std::int32_t fd = -1;
    if (type == VFIO_IRQ_SET_DATA_EVENTFD && count > 0) std::memcpy(&fd, data, sizeof fd);
    switch (action) {
    case VFIO_IRQ_SET_ACTION_MASK:
        if (!intx || start != 0 || count != 1) return -EINVAL;
        return type == VFIO_IRQ_SET_DATA_EVENTFD ? -ENOTTY : 0;
    case VFIO_IRQ_SET_ACTION_UNMASK:
        if (!intx || start != 0 || count != 1) return -EINVAL;
        if (type == VFIO_IRQ_SET_DATA_EVENTFD) {
            if (fd < 0) {
                replace_fd(f.intx_unmask, -1);
                return 0;
            }
            const long own = own_eventfd(fd);
            if (own < 0) return own;
            replace_fd(f.intx_unmask, static_cast<int>(own));
        }
        return 0;
    case VFIO_IRQ_SET_ACTION_TRIGGER:
        if (intx && count == 0 && type == VFIO_IRQ_SET_DATA_NONE) {
            disable_intx(f);
            return 0;
        }
        if (!(intx || f.irq_type == -1) || start != 0 || count != 1) return -EINVAL;
        if (type == VFIO_IRQ_SET_DATA_EVENTFD) {
            int own = -1;
            if (fd >= 0) {
                const long r = own_eventfd(fd);
                if (r < 0) return r;
                own = static_cast<int>(r);
            }
            replace_fd(f.intx_trigger, own);
            f.irq_type = VFIO_PCI_INTX_IRQ_INDEX;
            return 0;
        }
        if (!intx) return -EINVAL;
        if ((type == VFIO_IRQ_SET_DATA_NONE || data[0] != 0) && f.intx_trigger >= 0) {
            signal_eventfd(f.intx_trigger);
        }
        return 0;
    default:
        return -ENOTTY;
    }
}


long host::device_feature(function_state& f, void* arg) {
    // vfio_ioctl_device_feature
    vfio_device_feature feature{};
    std::memcpy(&feature, arg, sizeof feature);
    if (feature.argsz < sizeof feature) return -EINVAL;
    if (feature.flags & ~(VFIO_DEVICE_FEATURE_MASK | VFIO_DEVICE_FEATURE_SET |
                          VFIO_DEVICE_FEATURE_GET | VFIO_DEVICE_FEATURE_PROBE)) {
        return -EINVAL;
    }
    if (!(feature.flags & VFIO_DEVICE_FEATURE_PROBE) && (feature.flags & VFIO_DEVICE_FEATURE_SET) &&
        (feature.flags & VFIO_DEVICE_FEATURE_GET)) {
        return -EINVAL;
    }
    // VFIO_DEVICE_FEATURE_PCI_VF_TOKEN (vfio_pci_core_feature_token): a PF with the
    // SR-IOV capability takes a new VF token, SET only (a GET would show the previous
    // user's). No migration or DMA logging; runtime power management (the LOW_POWER
    // features) is not emulated.
    if ((feature.flags & VFIO_DEVICE_FEATURE_MASK) != VFIO_DEVICE_FEATURE_PCI_VF_TOKEN ||
        f.spec.physfn >= 0 || f.spec.model.sriov_totalvfs == 0) {
        return -ENOTTY;
    }
    // vfio_check_feature(flags, argsz, SET, sizeof(uuid)).
    if (feature.flags & VFIO_DEVICE_FEATURE_GET) return -EINVAL;
    if (feature.flags & VFIO_DEVICE_FEATURE_PROBE) return 0;
    if (!(feature.flags & VFIO_DEVICE_FEATURE_SET)) return -EINVAL;
    std::array<std::uint8_t, 16> uuid{};
    if (feature.argsz - sizeof feature < uuid.size()) return -EINVAL;
    std::memcpy(uuid.data(), static_cast<const std::uint8_t*>(arg) + sizeof feature, uuid.size());
    fs_.set_vf_token(f.index, uuid);
    return 0;
}

long host::device_set_irqs(function_state& f, void* arg) {
    // vfio_pci_ioctl_set_irqs: vfio_set_irqs_validate_and_prepare, then the handler.
    vfio_irq_set hdr{};
    constexpr std::size_t minsz = offsetof(vfio_irq_set, data);
    std::memcpy(&hdr, arg, minsz);
    const unsigned max = irq_count(f, hdr.index);
    if (hdr.argsz < minsz || hdr.index >= VFIO_PCI_NUM_IRQS || hdr.count >= UINT32_MAX - hdr.start ||
        (hdr.flags & ~(VFIO_IRQ_SET_DATA_TYPE_MASK | VFIO_IRQ_SET_ACTION_TYPE_MASK))) {
        return -EINVAL;
    }
    if (hdr.start >= max || hdr.start + hdr.count > max) return -EINVAL;
    std::size_t elem = 0;
    switch (hdr.flags & VFIO_IRQ_SET_DATA_TYPE_MASK) {
    case VFIO_IRQ_SET_DATA_NONE: elem = 0; break;
    case VFIO_IRQ_SET_DATA_BOOL: elem = 1; break;
    case VFIO_IRQ_SET_DATA_EVENTFD: elem = 4; break;
    default: return -EINVAL;
    }
    if (elem != 0 && hdr.argsz - minsz < std::size_t{hdr.count} * elem) return -EINVAL;
    const auto* data = static_cast<const std::uint8_t*>(arg) + minsz;
    const unsigned action = hdr.flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
    const unsigned type = hdr.flags & VFIO_IRQ_SET_DATA_TYPE_MASK;

    if (hdr.index == VFIO_PCI_INTX_IRQ_INDEX) {
        return set_intx(f, action, hdr.start, hdr.count, type, data);
    }
    if (hdr.index != VFIO_PCI_MSIX_IRQ_INDEX) {
        if (action != VFIO_IRQ_SET_ACTION_TRIGGER) return -ENOTTY;
        // vfio_pci_set_err_trigger / vfio_pci_set_req_trigger
        if (hdr.start != 0 || hdr.count > 1) return -EINVAL;
        int& trigger = hdr.index == VFIO_PCI_ERR_IRQ_INDEX ? f.err_trigger : f.req_trigger;
        return set_single_trigger(trigger, hdr.count, type, data);
    }
    if (action != VFIO_IRQ_SET_ACTION_TRIGGER) return -ENOTTY;  // MSI-X masking: not exported

    // vfio_pci_set_msi_trigger
    const bool msix_on = f.irq_type == VFIO_PCI_MSIX_IRQ_INDEX;
    if (msix_on && hdr.count == 0 && type == VFIO_IRQ_SET_DATA_NONE) {
        disable_msix(f);
        return 0;
    }
    if (!msix_on && f.irq_type != -1) return -EINVAL;  // INTx is enabled
    if (type == VFIO_IRQ_SET_DATA_EVENTFD) {
        if (!msix_on) {
            // vfio_msi_enable allocates start + count vectors; 6.1 cannot grow them later.
            const unsigned nvec = hdr.start + hdr.count;
            if (nvec == 0) return -ERANGE;
            f.triggers.assign(nvec, -1);
            f.irq_type = VFIO_PCI_MSIX_IRQ_INDEX;
            set_msix_enable(*f.model, true);
        }
        // vfio_msi_set_block
        if (hdr.start >= f.triggers.size() || hdr.start + hdr.count > f.triggers.size()) {
            return -EINVAL;
        }
        for (unsigned i = 0; i < hdr.count; ++i) {
            std::int32_t fd = -1;
            std::memcpy(&fd, data + 4 * i, sizeof fd);
            if (const long r = set_vector(f, hdr.start + i, fd); r != 0) {
                for (unsigned j = 0; j < i; ++j) set_vector(f, hdr.start + j, -1);
                if (!msix_on) disable_msix(f);
                return r;
            }
        }
        return 0;
    }
    // Loopback: DATA_NONE fires the vectors, DATA_BOOL those marked true.
    if (!msix_on || hdr.start + hdr.count > f.triggers.size()) return -EINVAL;
    for (unsigned i = 0; i < hdr.count; ++i) {
        const int fd = f.triggers[hdr.start + i];
        if (fd < 0) continue;
        if (type == VFIO_IRQ_SET_DATA_NONE || data[i] != 0) signal_eventfd(fd);
    }
    return 0;
}

// ---- mmap, pread, pwrite ----

long long host::mmap_offset(int fd, std::size_t len, int /*prot*/, int flags, long long offset) {
    std::lock_guard lock(mu_);
    auto file = find(fd);
    if (!file) return kPassThrough;
    if (file->kind == file_kind::group || file->kind == file_kind::control || file->kind == file_kind::config ||
        file->kind == file_kind::attr) {
        return -ENODEV;  // no mmap
    }
    if (file->kind == file_kind::container) return -EINVAL;
    const function_state& f = static_cast<device_file&>(*file).fn;
    // vfio_pci_core_mmap
    const std::uint64_t off = static_cast<std::uint64_t>(offset);
    const std::uint64_t index = off >> kOffsetShift;
    if (offset < 0 || (off & 4095) || len == 0) return -EINVAL;  // mmap(2)'s own checks
    if (index >= VFIO_PCI_NUM_REGIONS) return -EINVAL;
    if ((flags & MAP_SHARED) == 0) return -EINVAL;  // MAP_SHARED or MAP_SHARED_VALIDATE
    if (index != VFIO_PCI_BAR0_REGION_INDEX) return -EINVAL;  // no other mappable region
    const std::uint64_t start = off & kOffsetMask;
    const std::uint64_t req = (std::uint64_t{len} + 4095) & ~std::uint64_t{4095};
    if (start + req > f.spec.model.bar0_size) return -EINVAL;
    return static_cast<long long>(start);
}

long host::locate(int fd, long long offset, region_access& out) {
    auto file = find(fd);
    if (!file) return kPassThrough;
    if (file->kind != file_kind::device || offset < 0) return -EINVAL;
    out.fn = &static_cast<device_file&>(*file).fn;
    out.index = static_cast<std::uint64_t>(offset) >> kOffsetShift;
    out.pos = static_cast<std::uint64_t>(offset) & kOffsetMask;
    return 0;
}

long host::pread(int fd, void* buf, std::size_t len, long long offset) {
    std::lock_guard lock(mu_);
    if (auto file = find(fd); file && file->kind == file_kind::config) {
        return read_config(static_cast<const config_file&>(*file), buf, len, offset);
    }
    region_access r;
    if (const long e = locate(fd, offset, r); e != 0) return e;
    if (r.index == VFIO_PCI_CONFIG_REGION_INDEX) {
        if (!inside_config(r.pos, len)) return -EFAULT;
        sync_num_vfs(*r.fn);
        return static_cast<long>(r.fn->model->pci_config().read(r.pos, buf, len));
    }
    if (r.index == VFIO_PCI_BAR0_REGION_INDEX) {
        const long n = bar_access_size(*r.fn, r.pos, len);
        if (n <= 0) return n;
        // The MSI-X table is the host's: it reads as all ones through read(2).
        bar_copy(*r.fn, r.pos, static_cast<std::size_t>(n), static_cast<std::uint8_t*>(buf), false);
        return n;
    }
    return -EINVAL;
}

long host::pwrite(int fd, const void* buf, std::size_t len, long long offset) {
    std::lock_guard lock(mu_);
    if (auto file = find(fd); file && file->kind == file_kind::config) return -EBADF;  // opened read-only
    region_access r;
    if (const long e = locate(fd, offset, r); e != 0) return e;
    function_state& f = *r.fn;
    const std::uint64_t index = r.index, pos = r.pos;
    if (index == VFIO_PCI_CONFIG_REGION_INDEX) {
        if (!inside_config(pos, len)) return -EFAULT;
        const std::size_t n = len;
        const auto* src = static_cast<const std::uint8_t*>(buf);
        // The MSI-X message control word is the host's (vfio virtualizes it): writes to
        // it are dropped; every other byte goes to the function.
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t at = pos + i;
            if (at == config_space::cap_msix + 2 || at == config_space::cap_msix + 3) continue;
            f.model->pci_config().write(at, src + i, 1);
        }
        return static_cast<long>(n);
    }
    if (index == VFIO_PCI_BAR0_REGION_INDEX) {
        const long n = bar_access_size(f, pos, len);
        if (n <= 0) return n;
        // Writes to the MSI-X table are dropped (the host owns it).
        bar_copy(f, pos, static_cast<std::size_t>(n),
                 const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(buf)), true);
        return n;
    }
    return -EINVAL;
}

}  // namespace cxv::sim::vfio
