// Black-box conformance of the VFIO presentation layer, part 2: the device fd's config
// space, BAR0 (pread and mmap), reset and interrupts. Expected values are Linux 6.1's
// (drivers/vfio/pci/vfio_pci_{core,config,rdwr,intrs}.c), cited by function.
#include "tests/vfio/vfio_test_util.h"

extern "C" ssize_t __pread_chk(int fd, void* buf, size_t nbytes, off_t offset, size_t buflen);

namespace cxv::vfio_test {
namespace {

const off_t cfg_off = static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX));

void* map_region(int device, std::size_t len, std::uint64_t offset, int flags = MAP_SHARED) {
    return ::mmap(nullptr, len, PROT_READ | PROT_WRITE, flags, device, static_cast<off_t>(offset));
}

#define CHECK_MMAP_FAILS(device, len, offset, flags, err)                                  \
    do {                                                                                   \
        errno = 0;                                                                         \
        void* cxv_p_ = map_region(device, len, offset, flags);                             \
        const int cxv_e_ = errno;                                                          \
        CHECK_MESSAGE(cxv_p_ == MAP_FAILED, "mmap len " << (len) << " off " << (offset)); \
        if (cxv_p_ != MAP_FAILED) ::munmap(cxv_p_, len);                                   \
        CHECK_MESSAGE(cxv_e_ == (err), "mmap errno " << errname(cxv_e_));                  \
    } while (0)

std::vector<unique_fd> make_eventfds(std::size_t n) {
    std::vector<unique_fd> v;
    for (std::size_t i = 0; i < n; ++i) {
        v.emplace_back(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        REQUIRE(v.back());
    }
    return v;
}

constexpr std::uint32_t trigger_eventfd = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
constexpr std::uint32_t trigger_none = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
constexpr std::uint32_t trigger_bool = VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER;

}  // namespace

// ---------------------------------------------------------------------------------------
// Config space (vfio_pci_config.c)
// ---------------------------------------------------------------------------------------

TEST_CASE("config: reads (vfio_pci_config_rw)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    // rdma-core's FORTIFY-compiled pread of the whole region.
    alignas(4) std::uint8_t buf[4096];
    CHECK(__pread_chk(d, buf, sizeof(buf), cfg_off, sizeof(buf)) == 4096);
    CHECK((buf[0] | (buf[1] << 8)) == 0x15b3);
    CHECK((buf[2] | (buf[3] << 8)) == 0x101b);
    CHECK((buf[PCI_CLASS_DEVICE] | (buf[PCI_CLASS_DEVICE + 1] << 8)) == 0x0207);
    std::uint32_t id = 0;
    CHECK(::pread64(d, &id, 4, cfg_off) == 4);
    CHECK(id == 0x101b15b3u);
    CHECK(config_read16(d, PCI_VENDOR_ID) == 0x15b3);
    std::uint8_t b = 0;
    CHECK(::pread(d, &b, 1, cfg_off + 3) == 1);  // unaligned byte
    CHECK(b == 0x10);
    CHECK(::pread(d, buf, 0, cfg_off) == 0);  // vfio_pci_core_read: !count -> 0
    // vfio_config_do_rw: *ppos + count > cfg_size -> -EFAULT (no short read).
    CHECK_ERRNO(::pread(d, buf, 4, cfg_off + 4094), EFAULT);
    CHECK_ERRNO(::pread(d, buf, 4, cfg_off + 4096), EFAULT);
    CHECK_ERRNO(::pread(d, buf, 8, cfg_off + 4092), EFAULT);
    CHECK(::pread(d, buf, 4, cfg_off + 4092) == 4);
    // An offset in a region that does not exist: vfio_pci_rw index check -> -EINVAL.
    CHECK_ERRNO(::pread(d, buf, 4, static_cast<off_t>(region_offset(9))), EINVAL);
    CHECK_ERRNO(::pwrite(d, buf, 4, static_cast<off_t>(region_offset(9))), EINVAL);
}

TEST_CASE("config: command register and read-only fields") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    // vfio_pci_core_enable: pci_enable_device() sets memory decode, pci_clear_master()
    // clears bus mastering before the user sees the device.
    const std::uint16_t cmd0 = config_read16(d, PCI_COMMAND);
    CHECK((cmd0 & PCI_COMMAND_MEMORY) != 0);
    CHECK((cmd0 & PCI_COMMAND_MASTER) == 0);
    // rdma-core: pwrite(COMMAND = MEM | BUS MASTER) must return 2.
    const std::uint16_t cmd = PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    CHECK(::pwrite(d, &cmd, 2, cfg_off + PCI_COMMAND) == 2);
    CHECK((config_read16(d, PCI_COMMAND) & cmd) == cmd);
    CHECK(::pwrite(d, &cmd, 0, cfg_off + PCI_COMMAND) == 0);
    // Vendor/device ids: perm write bits NO_WRITE -> dropped, but the write "succeeds".
    const std::uint16_t junk = 0x1234;
    CHECK(::pwrite(d, &junk, 2, cfg_off + PCI_VENDOR_ID) == 2);
    CHECK(config_read16(d, PCI_VENDOR_ID) == 0x15b3);
    // The MSI-X capability has no writefn (cap_perms default): control writes are dropped.
    const std::vector<std::uint8_t> cfg = read_config(d);
    const std::size_t msix = find_cap(cfg, PCI_CAP_ID_MSIX);
    REQUIRE(msix != 0);
    const std::uint16_t flags = cfg16(cfg, msix + PCI_MSIX_FLAGS);
    CHECK((flags & PCI_MSIX_FLAGS_ENABLE) == 0);
    config_write16(d, msix + PCI_MSIX_FLAGS, static_cast<std::uint16_t>(flags | PCI_MSIX_FLAGS_ENABLE));
    CHECK(config_read16(d, msix + PCI_MSIX_FLAGS) == flags);
    // Past the end: -EFAULT.
    CHECK_ERRNO(::pwrite(d, &cmd, 2, cfg_off + 4095), EFAULT);
}

TEST_CASE("config: BAR sizing on the virtual BARs (vfio_bar_fixup)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    const std::uint32_t lo0 = config_read32(d, PCI_BASE_ADDRESS_0);
    const std::uint32_t hi0 = config_read32(d, PCI_BASE_ADDRESS_1);
    CHECK((lo0 & PCI_BASE_ADDRESS_SPACE) == PCI_BASE_ADDRESS_SPACE_MEMORY);
    REQUIRE((lo0 & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64);
    config_write32(d, PCI_BASE_ADDRESS_0, 0xffffffff);
    config_write32(d, PCI_BASE_ADDRESS_1, 0xffffffff);
    const std::uint32_t lo = config_read32(d, PCI_BASE_ADDRESS_0);
    const std::uint32_t hi = config_read32(d, PCI_BASE_ADDRESS_1);
    CHECK((lo & ~PCI_BASE_ADDRESS_MEM_MASK) == (lo0 & ~PCI_BASE_ADDRESS_MEM_MASK));  // flags kept
    const std::uint64_t mask = (std::uint64_t{hi} << 32) | (lo & PCI_BASE_ADDRESS_MEM_MASK);
    CHECK(~mask + 1 == bar0.size);
    // Unimplemented BARs read 0 whatever is written.
    config_write32(d, PCI_BASE_ADDRESS_2, 0xffffffff);
    CHECK(config_read32(d, PCI_BASE_ADDRESS_2) == 0);
    config_write32(d, PCI_BASE_ADDRESS_0, lo0);
    config_write32(d, PCI_BASE_ADDRESS_1, hi0);
    CHECK(config_read32(d, PCI_BASE_ADDRESS_0) == lo0);
    CHECK(config_read32(d, PCI_BASE_ADDRESS_1) == hi0);
}

// ---------------------------------------------------------------------------------------
// BAR0: pread (vfio_pci_bar_rw) and mmap (vfio_pci_core_mmap)
// ---------------------------------------------------------------------------------------

TEST_CASE("bar0: mmap shows the initialization segment") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    void* p = map_region(d, bar0.size, bar0.offset);
    REQUIRE(p != MAP_FAILED);
    const auto* seg = static_cast<const std::uint8_t*>(p);
    CHECK((be32(seg + 0x4) >> 16) == 5);          // cmdif_rev_fw_sub: cmdif rev 5
    CHECK((be32(seg + 0x14) & 0xff) == 0x56);     // cmdq_addr_l_sz: log_sz 5, log_stride 6
    // The same bytes through pread (ioread32 of little-endian hosts: memory order).
    alignas(4) std::uint8_t buf[0x18];
    CHECK(::pread(d, buf, sizeof(buf), static_cast<off_t>(bar0.offset)) == static_cast<ssize_t>(sizeof(buf)));
    CHECK(std::memcmp(buf, seg, sizeof(buf)) == 0);
    // A second, partial mapping at a page offset sees the same memory.
    void* q = map_region(d, page, bar0.offset + page);
    REQUIRE(q != MAP_FAILED);
    CHECK(std::memcmp(q, seg + page, 64) == 0);
    CHECK(::munmap(q, page) == 0);
    CHECK(::munmap(p, bar0.size) == 0);
}

TEST_CASE("bar0: pread limits and the MSI-X table hole") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    std::uint8_t buf[64];
    // pos >= end -> -EINVAL; a read crossing the end is shortened.
    CHECK_ERRNO(::pread(d, buf, 4, static_cast<off_t>(bar0.size)), EINVAL);
    CHECK(::pread(d, buf, 8, static_cast<off_t>(bar0.size - 4)) == 4);
    // BAR1 of a 64-bit BAR0 has no resource -> -EINVAL.
    CHECK_ERRNO(::pread(d, buf, 4, static_cast<off_t>(region_offset(VFIO_PCI_BAR1_REGION_INDEX))), EINVAL);
    // do_io_rw: reads of [msix_offset, msix_offset + msix_size) are filled with 0xff.
    const std::vector<std::uint8_t> cfg = read_config(d);
    const std::size_t msix = find_cap(cfg, PCI_CAP_ID_MSIX);
    REQUIRE(msix != 0);
    const std::uint32_t table = cfg32(cfg, msix + PCI_MSIX_TABLE);
    REQUIRE((table & PCI_MSIX_TABLE_BIR) == 0);
    const std::uint64_t off = table & PCI_MSIX_TABLE_OFFSET;
    CHECK(::pread(d, buf, 16, static_cast<off_t>(off)) == 16);
    for (int i = 0; i < 16; ++i) CHECK(buf[i] == 0xff);
}

TEST_CASE("bar0: reads with memory decode off fail with EIO (__vfio_pci_memory_enabled)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const std::uint16_t cmd = config_read16(d, PCI_COMMAND);
    config_write16(d, PCI_COMMAND, static_cast<std::uint16_t>(cmd & ~PCI_COMMAND_MEMORY));
    std::uint32_t v = 0;
    CHECK_ERRNO(::pread(d, &v, 4, 4), EIO);
    CHECK_ERRNO(::pwrite(d, &v, 4, 0x10), EIO);
    config_write16(d, PCI_COMMAND, cmd);
    CHECK(::pread(d, &v, 4, 4) == 4);
}

TEST_CASE("bar0: mmap errors (vfio_pci_core_mmap)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    CHECK_MMAP_FAILS(d, bar0.size + page, 0, MAP_SHARED, EINVAL);   // req_start + req_len > phys_len
    CHECK_MMAP_FAILS(d, page, bar0.size, MAP_SHARED, EINVAL);
    CHECK_MMAP_FAILS(d, page, 0, MAP_PRIVATE, EINVAL);              // !(vm_flags & VM_SHARED)
    CHECK_MMAP_FAILS(d, page, region_offset(VFIO_PCI_BAR1_REGION_INDEX), MAP_SHARED, EINVAL);  // !bar_mmap_supported
    CHECK_MMAP_FAILS(d, page, region_offset(VFIO_PCI_ROM_REGION_INDEX), MAP_SHARED, EINVAL);   // index >= ROM
    CHECK_MMAP_FAILS(d, page, region_offset(VFIO_PCI_CONFIG_REGION_INDEX), MAP_SHARED, EINVAL);
    CHECK_MMAP_FAILS(d, page, region_offset(9), MAP_SHARED, EINVAL);
}

TEST_CASE("device: VFIO_DEVICE_RESET and unknown ioctls") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    void* p = map_region(d, bar0.size, bar0.offset);
    REQUIRE(p != MAP_FAILED);
    CHECK_OK(ioctl(d, VFIO_DEVICE_RESET));  // reset_works: pci_try_reset_function()
    // The BAR mapping is zapped and faults back in (vfio_pci_mmap_fault).
    CHECK((be32(static_cast<const std::uint8_t*>(p) + 4) >> 16) == 5);
    ::munmap(p, bar0.size);
    // vfio_pci_core_ioctl default -> -ENOTTY
    CHECK_ERRNO(ioctl(d, VFIO_GET_API_VERSION), ENOTTY);
    CHECK_ERRNO(ioctl(d, VFIO_IOMMU_MAP_DMA, nullptr), ENOTTY);
    CHECK_ERRNO(ioctl(d, _IO(VFIO_TYPE, VFIO_BASE + 60)), ENOTTY);
    // vfio_ioctl_device_feature: argsz < minsz -> -EINVAL; an unknown feature reaches
    // vfio_pci_core_ioctl_feature -> -ENOTTY.
    vfio_device_feature f{};
    f.argsz = 4;
    f.flags = VFIO_DEVICE_FEATURE_PROBE | VFIO_DEVICE_FEATURE_GET | 0x7ff;
    CHECK_ERRNO(ioctl(d, VFIO_DEVICE_FEATURE, &f), EINVAL);
    f.argsz = sizeof(f);
    CHECK_ERRNO(ioctl(d, VFIO_DEVICE_FEATURE, &f), ENOTTY);
    f.flags = VFIO_DEVICE_FEATURE_GET | VFIO_DEVICE_FEATURE_SET | 0x7ff;  // GET and SET without PROBE
    CHECK_ERRNO(ioctl(d, VFIO_DEVICE_FEATURE, &f), EINVAL);
}

// ---------------------------------------------------------------------------------------
// Interrupts: VFIO_DEVICE_SET_IRQS (vfio_pci_ioctl_set_irqs, vfio_pci_intrs.c)
// ---------------------------------------------------------------------------------------

TEST_CASE("irqs: header validation (vfio_set_irqs_validate_and_prepare)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const std::uint32_t n = irq_info(d, VFIO_PCI_MSIX_IRQ_INDEX).count;
    std::vector<unique_fd> efds = make_eventfds(n);
    std::vector<std::int32_t> fds;
    for (auto& e : efds) fds.push_back(e.get());
    const std::size_t len = fds.size() * 4;
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSIX_IRQ_INDEX, 0, n, fds.data(), len, 19), EINVAL);
    // argsz - minsz < count * size
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSIX_IRQ_INDEX, 0, n, fds.data(), len, static_cast<std::uint32_t>(20 + len - 4)), EINVAL);
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_NUM_IRQS, 0, 1, fds.data(), 4), EINVAL);  // index >= max_irq_type
    CHECK_ERRNO(set_irqs(d, trigger_eventfd | (1u << 6), VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, fds.data(), 4), EINVAL);  // unknown flag
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), EINVAL);
    // start >= num_irqs, start + count > num_irqs
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSIX_IRQ_INDEX, n, 1, fds.data(), 4), EINVAL);
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSIX_IRQ_INDEX, 1, n, fds.data(), len), EINVAL);
    CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSIX_IRQ_INDEX, 0xffffffffu, 1, fds.data(), 4), EINVAL);
    // MSI has no vectors on this function (no MSI capability): start >= 0 -> -EINVAL.
    if (irq_info(d, VFIO_PCI_MSI_IRQ_INDEX).count == 0)
        CHECK_ERRNO(set_irqs(d, trigger_eventfd, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, fds.data(), 4), EINVAL);
    // MASK/UNMASK on MSI-X: no handler in vfio_pci_set_irqs_ioctl -> -ENOTTY.
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), ENOTTY);
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), ENOTTY);
    // Two action bits match no case either -> -ENOTTY.
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), ENOTTY);
    // Disabling MSI-X while it is not enabled: !irq_is(vdev, index) -> -EINVAL.
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0), EINVAL);
    // Loopback while not enabled -> -EINVAL.
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), EINVAL);
}

TEST_CASE("irqs: MSI-X eventfds, per-vector changes and loopback (vfio_pci_set_msi_trigger)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const std::uint32_t n = irq_info(d, VFIO_PCI_MSIX_IRQ_INDEX).count;
    REQUIRE(n >= 2);
    std::vector<unique_fd> efds = make_eventfds(n + 1);
    // rdma-core's first call: {fd, -1, -1, ...} for every vector.
    std::vector<std::int32_t> fds(n, -1);
    fds[0] = efds[0].get();
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, fds));
    // The physical MSI-X enable bit is now visible in config space.
    const std::size_t msix = find_cap(read_config(d), PCI_CAP_ID_MSIX);
    CHECK((config_read16(d, msix + PCI_MSIX_FLAGS) & PCI_MSIX_FLAGS_ENABLE) != 0);

    // Loopback with DATA_NONE signals vectors that have a trigger.
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, n));
    CHECK(drain(efds[0].get()) == 1);
    CHECK(drain(efds[0].get()) == 0);

    // DevX-style per-vector allocation: vector 1 gets its own eventfd.
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {efds[1].get()}));
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 1, 1));
    CHECK(drain(efds[1].get()) == 1);
    CHECK(drain(efds[0].get()) == 0);
    // DATA_BOOL loopback: only vectors whose byte is non-zero.
    const std::uint8_t bools[2] = {0, 1};
    CHECK_OK(set_irqs(d, trigger_bool, VFIO_PCI_MSIX_IRQ_INDEX, 0, 2, bools, 2));
    CHECK(drain(efds[0].get()) == 0);
    CHECK(drain(efds[1].get()) == 1);
    // Replacing vector 1's eventfd: the old one is no longer signalled.
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {efds[n].get()}));
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 1, 1));
    CHECK(drain(efds[1].get()) == 0);
    CHECK(drain(efds[n].get()) == 1);
    // Unset vector 1 (fd -1): loopback signals nothing there.
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {-1}));
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, n));
    CHECK(drain(efds[n].get()) == 0);
    CHECK(drain(efds[0].get()) == 1);
    // A non-eventfd fd: eventfd_ctx_fdget -> -EINVAL; a closed fd number -> -EBADF.
    unique_fd null = open_fd("/dev/null");
    CHECK_ERRNO(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {null.get()}), EINVAL);
    const int closed = null.release();
    ::close(closed);
    CHECK_ERRNO(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {closed}), EBADF);
    // MSI cannot be enabled while MSI-X is: !(irq_is || is_irq_none) (if MSI exists at all).
    // DATA_NONE | TRIGGER with count 0 disables MSI-X (vfio_msi_disable).
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0));
    CHECK((config_read16(d, msix + PCI_MSIX_FLAGS) & PCI_MSIX_FLAGS_ENABLE) == 0);
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), EINVAL);  // no longer enabled
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0), EINVAL);
}

TEST_CASE("irqs: MSI-X enable sizes the vector table once (vfio_msi_enable nvec = start + count)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const std::uint32_t n = irq_info(d, VFIO_PCI_MSIX_IRQ_INDEX).count;
    REQUIRE(n >= 3);
    std::vector<unique_fd> efds = make_eventfds(3);
    // Enabling with vector 0 only allocates one vector; Linux 6.1 cannot grow it
    // (vfio_msi_set_block: start + count > num_ctx -> -EINVAL).
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, {efds[0].get()}));
    CHECK_ERRNO(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 1, {efds[1].get()}), EINVAL);
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 2), EINVAL);  // start + count > num_ctx
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1));
    CHECK(drain(efds[0].get()) == 1);
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0));
    // Enabling at start 2 allocates vectors 0..2, only vector 2 has a trigger.
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 2, {efds[2].get()}));
    CHECK_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, {efds[0].get()}));
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 3));
    CHECK(drain(efds[0].get()) == 1);
    CHECK(drain(efds[2].get()) == 1);
    // A failing enabling call leaves MSI-X disabled (vfio_msi_disable on error).
    CHECK_OK(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0));
    unique_fd null = open_fd("/dev/null");
    CHECK_ERRNO(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, {efds[0].get(), null.get()}), EINVAL);
    CHECK_ERRNO(set_irqs(d, trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0), EINVAL);
}

TEST_CASE("irqs: closing the device fd disables MSI-X (vfio_pci_core_close_device)") {
    vfio_handles h = open_device(0);
    std::vector<unique_fd> efds = make_eventfds(1);
    REQUIRE_OK(set_eventfds(h.device.get(), VFIO_PCI_MSIX_IRQ_INDEX, 0, {efds[0].get()}));
    config_write16(h.device.get(), PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
    h.device.reset();
    h.device = unique_fd(ioctl(h.group.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(0).c_str()));
    REQUIRE(h.device);
    CHECK_ERRNO(set_irqs(h.device.get(), trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1), EINVAL);
    CHECK_ERRNO(set_irqs(h.device.get(), trigger_none, VFIO_PCI_MSIX_IRQ_INDEX, 0, 0), EINVAL);
    // ... and pci_clear_master() ran again on open.
    CHECK((config_read16(h.device.get(), PCI_COMMAND) & PCI_COMMAND_MASTER) == 0);
}

TEST_CASE("irqs: REQ and ERR triggers (vfio_pci_set_ctx_trigger_single)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    for (std::uint32_t index : {std::uint32_t{VFIO_PCI_REQ_IRQ_INDEX}, std::uint32_t{VFIO_PCI_ERR_IRQ_INDEX}}) {
        CAPTURE(index);
        std::vector<unique_fd> efds = make_eventfds(1);
        CHECK_OK(set_eventfds(d, index, 0, {efds[0].get()}));
        CHECK_OK(set_irqs(d, trigger_none, index, 0, 1));  // loopback
        CHECK(drain(efds[0].get()) == 1);
        const std::uint8_t yes = 1;
        CHECK_OK(set_irqs(d, trigger_bool, index, 0, 1, &yes, 1));
        CHECK(drain(efds[0].get()) == 1);
        CHECK_ERRNO(set_irqs(d, trigger_bool, index, 0, 0, &yes, 1), EINVAL);  // !count
        CHECK_OK(set_irqs(d, trigger_none, index, 0, 0));  // count 0: release the trigger
        // DATA_NONE without a trigger falls through to -EINVAL.
        CHECK_ERRNO(set_irqs(d, trigger_none, index, 0, 1), EINVAL);
        CHECK_ERRNO(set_irqs(d, trigger_none, index, 0, 0), EINVAL);
        CHECK(drain(efds[0].get()) == 0);
        // DATA_EVENTFD -1 releases too.
        CHECK_OK(set_eventfds(d, index, 0, {efds[0].get()}));
        CHECK_OK(set_eventfds(d, index, 0, {-1}));
        CHECK_ERRNO(set_irqs(d, trigger_none, index, 0, 1), EINVAL);
        CHECK_ERRNO(set_irqs(d, trigger_none, index, 1, 1), EINVAL);  // start >= 1
        CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK, index, 0, 1), ENOTTY);
    }
}

}  // namespace cxv::vfio_test
