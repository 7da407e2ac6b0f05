// Helpers for the black-box conformance tests of the VFIO presentation layer
// (vfio_api_test.cc, vfio_api_dma_test.cc). Expected values come from the Linux 6.1
// sources (drivers/vfio/, drivers/pci/pci-sysfs.c), never from sim/vfio/.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace cxv::vfio_test {

// The launcher's defaults (contract): device i is 0000:c5:00.<i> in IOMMU group 120+i.
// The sim_test target runs with --devices 2.
inline constexpr unsigned num_devices = 2;
inline std::string bdf(unsigned i) { return "0000:c5:00." + std::to_string(i); }
inline unsigned group_number(unsigned i) { return 120 + i; }
inline std::string group_path(unsigned i) { return "/dev/vfio/" + std::to_string(group_number(i)); }
inline std::string sysfs_dir(unsigned i) { return "/sys/bus/pci/devices/" + bdf(i); }

inline constexpr std::uint64_t page = 4096;
inline std::uint64_t region_offset(unsigned index) { return std::uint64_t{index} << 40; }  // VFIO_PCI_INDEX_TO_OFFSET

// doctest prints a const char* as a pointer; a doctest::String as text.
inline doctest::String errname(int e) {
    const char* n = strerrorname_np(e);
    return doctest::String(n != nullptr ? n : "0");
}

// `expr` must fail with -1 and errno `err`.
#define CHECK_ERRNO(expr, err)                                                                  \
    do {                                                                                        \
        errno = 0;                                                                              \
        const long cxv_r_ = static_cast<long>(expr);                                            \
        const int cxv_e_ = errno;                                                               \
        CHECK_MESSAGE(cxv_r_ == -1, #expr " returned " << cxv_r_ << ", expected -1");           \
        CHECK_MESSAGE(cxv_e_ == (err), #expr ": errno " << ::cxv::vfio_test::errname(cxv_e_)    \
                                                        << ", expected "                       \
                                                        << ::cxv::vfio_test::errname(err));     \
    } while (0)

// `expr` must return 0.
#define CHECK_OK(expr)                                                                          \
    do {                                                                                        \
        errno = 0;                                                                              \
        const long cxv_r_ = static_cast<long>(expr);                                            \
        const int cxv_e_ = errno;                                                               \
        CHECK_MESSAGE(cxv_r_ == 0, #expr " returned " << cxv_r_ << " errno "                    \
                                                      << ::cxv::vfio_test::errname(cxv_e_));    \
    } while (0)

#define REQUIRE_OK(expr)                                                                        \
    do {                                                                                        \
        errno = 0;                                                                              \
        const long cxv_r_ = static_cast<long>(expr);                                            \
        const int cxv_e_ = errno;                                                               \
        REQUIRE_MESSAGE(cxv_r_ == 0, #expr " returned " << cxv_r_ << " errno "                  \
                                                        << ::cxv::vfio_test::errname(cxv_e_));  \
    } while (0)

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) : fd_(fd) {}
    unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        reset(std::exchange(o.fd_, -1));
        return *this;
    }
    ~unique_fd() { reset(); }
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    int release() { return std::exchange(fd_, -1); }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

inline unique_fd open_fd(const std::string& path, int flags = O_RDWR) {
    return unique_fd(::open(path.c_str(), flags));
}

// Container + group (+ IOMMU) + device of emulated function `i`, opened the way
// rdma-core's mlx5_vfio_alloc_context does.
struct vfio_handles {
    unique_fd container, group, device;
};

inline vfio_handles open_device(unsigned i, unsigned long iommu_type = VFIO_TYPE1v2_IOMMU) {
    vfio_handles h;
    h.container = open_fd("/dev/vfio/vfio");
    REQUIRE_MESSAGE(h.container, "open /dev/vfio/vfio: " << errname(errno));
    h.group = open_fd(group_path(i));
    REQUIRE_MESSAGE(h.group, "open " << group_path(i) << ": " << errname(errno));
    int cfd = h.container.get();
    REQUIRE_OK(ioctl(h.group.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    REQUIRE_OK(ioctl(h.container.get(), VFIO_SET_IOMMU, iommu_type));
    h.device = unique_fd(ioctl(h.group.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(i).c_str()));
    REQUIRE_MESSAGE(h.device, "GET_DEVICE_FD " << bdf(i) << ": " << errname(errno));
    return h;
}

inline vfio_region_info region_info(int device, unsigned index) {
    vfio_region_info info{};
    info.argsz = sizeof(info);
    info.index = index;
    REQUIRE_OK(ioctl(device, VFIO_DEVICE_GET_REGION_INFO, &info));
    return info;
}

inline vfio_irq_info irq_info(int device, unsigned index) {
    vfio_irq_info info{};
    info.argsz = sizeof(info);
    info.index = index;
    REQUIRE_OK(ioctl(device, VFIO_DEVICE_GET_IRQ_INFO, &info));
    return info;
}

// VFIO_DEVICE_SET_IRQS with `data` appended; argsz defaults to the exact size.
inline int set_irqs(int device, std::uint32_t flags, std::uint32_t index, std::uint32_t start,
                    std::uint32_t count, const void* data = nullptr, std::size_t data_len = 0,
                    std::uint32_t argsz = 0) {
    std::vector<std::uint64_t> storage((sizeof(vfio_irq_set) + data_len) / 8 + 2, 0);
    auto* s = reinterpret_cast<vfio_irq_set*>(storage.data());
    s->argsz = argsz != 0 ? argsz : static_cast<std::uint32_t>(sizeof(vfio_irq_set) + data_len);
    s->flags = flags;
    s->index = index;
    s->start = start;
    s->count = count;
    if (data_len != 0) std::memcpy(s->data, data, data_len);
    return ioctl(device, VFIO_DEVICE_SET_IRQS, s);
}

inline int set_eventfds(int device, std::uint32_t index, std::uint32_t start,
                        const std::vector<std::int32_t>& fds) {
    return set_irqs(device, VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER, index, start,
                    static_cast<std::uint32_t>(fds.size()), fds.data(), fds.size() * sizeof(std::int32_t));
}

// Reads and clears an EFD_NONBLOCK eventfd: its count, or 0 when it was not signalled.
inline std::uint64_t drain(int efd) {
    std::uint64_t v = 0;
    return ::read(efd, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v)) ? v : 0;
}

// Config space of the device (region 7).
inline std::vector<std::uint8_t> read_config(int device, std::size_t len = 256) {
    std::vector<std::uint8_t> buf(len);
    const ssize_t n = ::pread(device, buf.data(), len, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX)));
    REQUIRE(n == static_cast<ssize_t>(len));
    return buf;
}

inline std::uint16_t cfg16(const std::vector<std::uint8_t>& c, std::size_t off) {
    return static_cast<std::uint16_t>(c[off] | (c[off + 1] << 8));
}
inline std::uint32_t cfg32(const std::vector<std::uint8_t>& c, std::size_t off) {
    return static_cast<std::uint32_t>(cfg16(c, off)) | (static_cast<std::uint32_t>(cfg16(c, off + 2)) << 16);
}

// Offsets of the standard capabilities in config space, in list order.
inline std::vector<std::size_t> cap_list(const std::vector<std::uint8_t>& c) {
    std::vector<std::size_t> out;
    if ((cfg16(c, PCI_STATUS) & PCI_STATUS_CAP_LIST) == 0) return out;
    std::size_t pos = c[PCI_CAPABILITY_LIST] & ~3u;
    for (int loops = 48; pos >= 0x40 && pos < 0x100 && loops > 0; --loops) {
        out.push_back(pos);
        pos = c[pos + 1] & ~3u;
    }
    return out;
}

// Offset of standard capability `id` in the (virtualised) config space, or 0.
inline std::size_t find_cap(const std::vector<std::uint8_t>& c, std::uint8_t id) {
    for (const std::size_t pos : cap_list(c)) {
        if (c[pos] == id) return pos;
    }
    return 0;
}

inline std::uint16_t config_read16(int device, std::size_t off) {
    std::uint16_t v = 0;
    REQUIRE(::pread(device, &v, 2, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX) + off)) == 2);
    return v;
}
inline void config_write16(int device, std::size_t off, std::uint16_t v) {
    REQUIRE(::pwrite(device, &v, 2, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX) + off)) == 2);
}
inline std::uint32_t config_read32(int device, std::size_t off) {
    std::uint32_t v = 0;
    REQUIRE(::pread(device, &v, 4, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX) + off)) == 4);
    return v;
}
inline void config_write32(int device, std::size_t off, std::uint32_t v) {
    REQUIRE(::pwrite(device, &v, 4, static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX) + off)) == 4);
}

inline std::uint32_t be32(const void* p) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

// Whole contents of a small (sysfs) file read with read(2), or "" with errno set.
inline std::string slurp(const std::string& path) {
    unique_fd fd(::open(path.c_str(), O_RDONLY));
    if (!fd) return {};
    std::string out;
    char buf[128];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n <= 0) break;
        out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
}

// The start of BAR0 in sysfs "resource" (its first line), 0 if unreadable.
inline std::uint64_t resource_start(unsigned i) {
    unsigned long long start = 0;
    return std::sscanf(slurp(sysfs_dir(i) + "/resource").c_str(), "0x%llx", &start) == 1 ? start : 0;
}

// CAP_SYS_ADMIN in the calling thread's effective set: what decides, for example, how
// much of sysfs "config" a process may read (pci_read_config).
inline bool has_sys_admin() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3]{};
    return syscall(SYS_capget, &hdr, caps) == 0 &&
           (caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

// Drops CAP_SYS_ADMIN from the calling thread's effective set (for a forked child).
inline bool drop_sys_admin() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &hdr, caps) != 0) return false;
    caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
    return syscall(SYS_capset, &hdr, caps) == 0;
}

}  // namespace cxv::vfio_test
