// Black-box conformance of the VFIO presentation layer, part 1: sysfs, the container,
// the group and the device fd's regions. Runs under `cxv-sim run --devices 2` and uses
// only syscalls. Every expected value is Linux 6.1's (drivers/vfio/, drivers/pci/), cited
// by function; none is taken from sim/vfio/.
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "tests/vfio/vfio_test_util.h"

extern "C" ssize_t __pread_chk(int fd, void* buf, size_t nbytes, off_t offset, size_t buflen);

namespace cxv::vfio_test {
namespace {

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string read_link(const std::string& p) {
    char buf[256];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof(buf));
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string basename_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// stat() straight to the kernel, past any LD_PRELOAD interposer: what the host gives.
int host_stat_errno(const std::string& p) {
    struct stat st {};
    errno = 0;
    return syscall(SYS_newfstatat, AT_FDCWD, p.c_str(), &st, 0) == 0 ? 0 : errno;
}

bool matches_hex_attr(const std::string& s, std::size_t digits) {
    if (s.size() != 2 + digits + 1 || s.compare(0, 2, "0x") != 0 || s.back() != '\n') return false;
    return std::all_of(s.begin() + 2, s.end() - 1, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c)); });
}

// Standard capability IDs in list order.
std::vector<std::uint8_t> cap_ids(const std::vector<std::uint8_t>& c) {
    std::vector<std::uint8_t> ids;
    for (const std::size_t pos : cap_list(c)) ids.push_back(c[pos]);
    return ids;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// sysfs and /dev/vfio
// ---------------------------------------------------------------------------------------

TEST_CASE("sysfs: device directory, with trailing and double slashes") {
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(bdf(i));
        CHECK(is_dir(sysfs_dir(i)));
        CHECK(is_dir(sysfs_dir(i) + "/"));  // rdma-core's mlx5_vfio_get_iommu_group_id form
        CHECK(is_dir(sysfs_dir(i) + "//"));
        struct stat st {};
        CHECK_OK(::stat((sysfs_dir(i) + "//vendor").c_str(), &st));
        CHECK(S_ISREG(st.st_mode));
    }
}

TEST_CASE("sysfs: identity attributes (pci-sysfs.c pci_config_attr formats)") {
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(bdf(i));
        // rdma-core reads "<bdf>//vendor" with one read(fd, buf, 128) and strtoul(.., 0).
        unique_fd fd(::open((sysfs_dir(i) + "//vendor").c_str(), O_RDONLY));
        REQUIRE(fd);
        char buf[128] = {};
        const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        CHECK(n == 7);
        CHECK(std::strtoul(buf, nullptr, 0) == 0x15b3);

        CHECK(slurp(sysfs_dir(i) + "/vendor") == "0x15b3\n");
        CHECK(slurp(sysfs_dir(i) + "/device") == "0x101b\n");
        CHECK(slurp(sysfs_dir(i) + "/class") == "0x020700\n");  // InfiniBand controller (--port-type ib)
        CHECK(matches_hex_attr(slurp(sysfs_dir(i) + "/subsystem_vendor"), 4));
        CHECK(matches_hex_attr(slurp(sysfs_dir(i) + "/subsystem_device"), 4));
        const std::string numa = slurp(sysfs_dir(i) + "/numa_node");  // "%d\n" (numa_node_show)
        REQUIRE(!numa.empty());
        CHECK(numa.back() == '\n');
        char* end = nullptr;
        std::strtol(numa.c_str(), &end, 10);
        CHECK(*end == '\n');
    }
}

TEST_CASE("sysfs: stdio, byte-wise reads and pread behave like a kernfs file") {
    const std::string vendor = sysfs_dir(0) + "/vendor";
    FILE* f = std::fopen(vendor.c_str(), "r");
    REQUIRE(f != nullptr);
    char line[64] = {};
    CHECK(std::fgets(line, sizeof(line), f) != nullptr);
    CHECK(std::string(line) == "0x15b3\n");
    CHECK(std::fgets(line, sizeof(line), f) == nullptr);  // EOF
    std::fclose(f);

    unique_fd fd(::open(vendor.c_str(), O_RDONLY));
    REQUIRE(fd);
    std::string got;
    char c = 0;
    while (::read(fd.get(), &c, 1) == 1) got.push_back(c);
    CHECK(got == "0x15b3\n");
    CHECK(::read(fd.get(), &c, 1) == 0);
    char tail[16] = {};
    CHECK(::pread(fd.get(), tail, sizeof(tail), 2) == 5);
    CHECK(std::string(tail, 5) == "15b3\n");
}

TEST_CASE("sysfs: config is the function's config space as the host sees it (pci-sysfs.c pci_read_config)") {
    // Expected: mode 0644 and the PCI Express size (pcie_config_attr); an opener without
    // CAP_SYS_ADMIN reads the first 64 bytes only, short reads at the end, no error.
    const std::size_t readable = has_sys_admin() ? 4096 : 64;
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(bdf(i));
        const std::string path = sysfs_dir(i) + "/config";
        struct stat st {};
        REQUIRE_OK(::stat(path.c_str(), &st));
        CHECK(S_ISREG(st.st_mode));
        CHECK((st.st_mode & 07777) == 0644);
        CHECK(st.st_size == 4096);
        unique_fd fd(::open(path.c_str(), O_RDONLY));
        REQUIRE(fd);
        std::vector<std::uint8_t> cfg(4096);
        CHECK(::pread(fd.get(), cfg.data(), cfg.size(), 0) == static_cast<ssize_t>(readable));
        CHECK(cfg32(cfg, PCI_VENDOR_ID) == 0x101b15b3u);
        CHECK(cfg16(cfg, PCI_CLASS_DEVICE) == 0x0207);
        // The host's BAR0 is where "resource" says (bus and CPU addresses are one on x86).
        const std::uint64_t bar0 = (std::uint64_t{cfg32(cfg, PCI_BASE_ADDRESS_1)} << 32) | cfg32(cfg, PCI_BASE_ADDRESS_0);
        CHECK((bar0 & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64);
        CHECK((bar0 & PCI_BASE_ADDRESS_MEM_MASK) == resource_start(i));
        std::uint8_t b = 0;
        CHECK(::pread(fd.get(), &b, 1, 4096) == 0);
        CHECK(::pread(fd.get(), cfg.data(), 8, static_cast<off_t>(readable) - 4) == 4);
        // read(2) from the file position.
        std::uint16_t vendor = 0;
        CHECK(::read(fd.get(), &vendor, 2) == 2);
        CHECK(vendor == 0x15b3);
        // Read-only opens cannot write (vfs_write: EBADF); kernfs binary attributes
        // without an mmap method refuse mmap (kernfs_fop_mmap: ENODEV).
        CHECK_ERRNO(::pwrite(fd.get(), &vendor, 2, 0), EBADF);
        CHECK(::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd.get(), 0) == MAP_FAILED);
        CHECK(errno == ENODEV);
    }
}

TEST_CASE("sysfs: config reads follow the function, and match the device fd's view but for BARs") {
    if (!has_sys_admin()) return;  // the capabilities are past the first 64 bytes
    unique_fd fd(::open((sysfs_dir(0) + "/config").c_str(), O_RDONLY));
    REQUIRE(fd);
    vfio_handles h = open_device(0);
    const std::uint16_t master = PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    config_write16(h.device.get(), PCI_COMMAND, master);
    // The fd opened before the change reads the function as it is now.
    std::vector<std::uint8_t> host(4096);
    REQUIRE(::pread(fd.get(), host.data(), host.size(), 0) == 4096);
    CHECK((cfg16(host, PCI_COMMAND) & master) == master);
    // vfio-pci virtualizes the BARs, INTx and some capability fields; the identity and
    // the capability list are the function's own.
    const std::vector<std::uint8_t> vfio = read_config(h.device.get(), 256);
    for (const std::size_t off : {PCI_VENDOR_ID, PCI_DEVICE_ID, PCI_CLASS_REVISION, PCI_SUBSYSTEM_VENDOR_ID}) {
        CAPTURE(off);
        CHECK(cfg32(host, off) == cfg32(vfio, off));
    }
    CHECK(cap_ids(host) == cap_ids(vfio));
    const std::size_t exp = find_cap(host, PCI_CAP_ID_EXP);
    REQUIRE(exp != 0);
    CHECK(cfg16(host, exp + PCI_EXP_LNKSTA) == cfg16(vfio, exp + PCI_EXP_LNKSTA));
}

TEST_CASE("sysfs: config without CAP_SYS_ADMIN reads the first 64 bytes") {
    if (!has_sys_admin()) return;  // the test above already ran unprivileged
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // Bits of the exit status: what went wrong in the child.
        if (!drop_sys_admin()) _exit(1);
        const int fd = ::open((sysfs_dir(0) + "/config").c_str(), O_RDONLY);
        if (fd < 0) _exit(2);
        std::uint8_t buf[256];
        int bad = 0;
        if (::pread(fd, buf, sizeof buf, 0) != 64) bad |= 4;
        if (::pread(fd, buf, sizeof buf, 64) != 0) bad |= 8;
        if ((buf[0] | (buf[1] << 8)) != 0x15b3) bad |= 16;
        ::close(fd);
        _exit(bad);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("sysfs: iommu_group and driver links") {
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(bdf(i));
        const std::string group = read_link(sysfs_dir(i) + "/iommu_group");
        CHECK(group.find("/kernel/iommu_groups/") != std::string::npos);
        CHECK(basename_of(group) == std::to_string(group_number(i)));
        // readlink truncates silently to the buffer (fs/stat.c do_readlinkat).
        char small[4];
        CHECK(::readlink((sysfs_dir(i) + "/iommu_group").c_str(), small, sizeof(small)) == 4);
        CHECK(std::string(small, 4) == group.substr(0, 4));
        struct stat st {};
        CHECK_OK(::lstat((sysfs_dir(i) + "/iommu_group").c_str(), &st));
        CHECK(S_ISLNK(st.st_mode));

        const std::string driver = read_link(sysfs_dir(i) + "/driver");
        CHECK(basename_of(driver) == "vfio-pci");
        CHECK(driver.find("/drivers/vfio-pci") != std::string::npos);
    }
}

TEST_CASE("sysfs: /dev/vfio nodes are character devices") {
    struct stat st {};
    CHECK_OK(::stat("/dev/vfio/vfio", &st));
    CHECK(S_ISCHR(st.st_mode));
    for (unsigned i = 0; i < num_devices; ++i) {
        CAPTURE(group_path(i));
        CHECK_OK(::stat(group_path(i).c_str(), &st));
        CHECK(S_ISCHR(st.st_mode));
    }
}

TEST_CASE("sysfs: missing and non-emulated paths") {
    struct stat st {};
    CHECK_ERRNO(::stat((sysfs_dir(0) + "/no_such_attribute").c_str(), &st), ENOENT);
    CHECK_ERRNO(::open((sysfs_dir(0) + "/no_such_attribute").c_str(), O_RDONLY), ENOENT);
    CHECK_ERRNO(::readlink((sysfs_dir(0) + "/no_such_link").c_str(), reinterpret_cast<char*>(&st), 8), ENOENT);
    // vendor is 0444 without a store method: kernfs_fop_open refuses write opens (EACCES),
    // even for root.
    CHECK_ERRNO(::open((sysfs_dir(0) + "/vendor").c_str(), O_WRONLY), EACCES);
    // A function that is not emulated is whatever the host has.
    for (const std::string p : {"/sys/bus/pci/devices/0000:c5:00.2/", "/sys/bus/pci/devices/0000:c5:00.2/vendor",
                                "/dev/vfio/122", "/sys/bus/pci/devices/0000:c6:00.0"}) {
        CAPTURE(p);
        const int host = host_stat_errno(p);
        errno = 0;
        const int r = ::stat(p.c_str(), &st);
        CHECK((r == 0 ? 0 : errno) == host);
    }
    CHECK(host_stat_errno("/sys/bus/pci/devices/0000:c5:00.2/") == ENOENT);  // sanity: host has no such BDF
}

// ---------------------------------------------------------------------------------------
// Container: /dev/vfio/vfio (drivers/vfio/container.c)
// ---------------------------------------------------------------------------------------

TEST_CASE("container: API version and extensions") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    REQUIRE(c);
    CHECK(ioctl(c.get(), VFIO_GET_API_VERSION) == VFIO_API_VERSION);  // vfio_fops_unl_ioctl
    // vfio_container_ioctl_check_extension -> vfio_iommu_type1_check_extension(NULL, arg)
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1_IOMMU) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1_NESTING_IOMMU) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_UNMAP_ALL) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_UPDATE_VADDR) == 0);  // "iommu && ..." with iommu NULL
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_SPAPR_TCE_IOMMU) == 0);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_NOIOMMU_IOMMU) == 0);  // Debian: VFIO_NOIOMMU not set
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, 0x1234) == 0);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, 0) == 0);
}

TEST_CASE("container: ioctls before SET_IOMMU fail with EINVAL") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    REQUIRE(c);
    // vfio_ioctl_set_iommu: list_empty(&container->group_list) -> -EINVAL
    CHECK_ERRNO(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU), EINVAL);
    // vfio_fops_unl_ioctl default: no iommu_driver -> ret stays -EINVAL
    std::vector<char> buf(4096, 0);
    vfio_iommu_type1_dma_map map{};
    map.argsz = sizeof(map);
    map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
    map.vaddr = reinterpret_cast<std::uintptr_t>(buf.data()) & ~(page - 1);
    map.iova = 0x100000;
    map.size = page;
    CHECK_ERRNO(ioctl(c.get(), VFIO_IOMMU_MAP_DMA, &map), EINVAL);
    vfio_iommu_type1_dma_unmap unmap{};
    unmap.argsz = sizeof(unmap);
    unmap.iova = 0x100000;
    unmap.size = page;
    CHECK_ERRNO(ioctl(c.get(), VFIO_IOMMU_UNMAP_DMA, &unmap), EINVAL);
    vfio_iommu_type1_info info{};
    info.argsz = sizeof(info);
    CHECK_ERRNO(ioctl(c.get(), VFIO_IOMMU_GET_INFO, &info), EINVAL);
    CHECK_ERRNO(ioctl(c.get(), _IO(VFIO_TYPE, VFIO_BASE + 60)), EINVAL);
}

TEST_CASE("container: SET_IOMMU once a group is attached") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g = open_fd(group_path(0));
    REQUIRE(c);
    REQUIRE(g);
    int cfd = c.get();
    REQUIRE_OK(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    // vfio_ioctl_set_iommu: no driver claims the extension -> ret keeps -ENODEV
    CHECK_ERRNO(ioctl(c.get(), VFIO_SET_IOMMU, 42), ENODEV);
    CHECK_ERRNO(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_SPAPR_TCE_IOMMU), ENODEV);
    CHECK_OK(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
    // container->iommu_driver already set -> -EINVAL
    CHECK_ERRNO(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU), EINVAL);
    // Now CHECK_EXTENSION goes to the bound driver, with its iommu data.
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, VFIO_UPDATE_VADDR) == 1);
    CHECK(ioctl(c.get(), VFIO_CHECK_EXTENSION, 0x1234) == 0);
    CHECK(ioctl(c.get(), VFIO_GET_API_VERSION) == VFIO_API_VERSION);
    // Unknown ioctls are passed to vfio_iommu_type1_ioctl: -ENOTTY.
    CHECK_ERRNO(ioctl(c.get(), _IO(VFIO_TYPE, VFIO_BASE + 60)), ENOTTY);
}

// ---------------------------------------------------------------------------------------
// Group: /dev/vfio/<N> (drivers/vfio/vfio_main.c)
// ---------------------------------------------------------------------------------------

TEST_CASE("group: GET_STATUS") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g = open_fd(group_path(0));
    REQUIRE(g);
    vfio_group_status st{};
    st.argsz = 7;  // vfio_group_ioctl_get_status: argsz < minsz (8) -> -EINVAL
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_STATUS, &st), EINVAL);
    st.argsz = sizeof(st);
    st.flags = 0xdead0000;
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_GET_STATUS, &st));
    CHECK(st.flags == VFIO_GROUP_FLAGS_VIABLE);
    int cfd = c.get();
    REQUIRE_OK(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_GET_STATUS, &st));
    CHECK(st.flags == (VFIO_GROUP_FLAGS_VIABLE | VFIO_GROUP_FLAGS_CONTAINER_SET));
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_UNSET_CONTAINER));
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_GET_STATUS, &st));
    CHECK(st.flags == VFIO_GROUP_FLAGS_VIABLE);
}

TEST_CASE("group: only one open at a time (vfio_group_fops_open -> EBUSY)") {
    unique_fd g0 = open_fd(group_path(0));
    REQUIRE(g0);
    CHECK_ERRNO(::open(group_path(0).c_str(), O_RDWR), EBUSY);
    unique_fd g1 = open_fd(group_path(1));  // the other group is independent
    CHECK(g1);
    g0.reset();
    g0 = open_fd(group_path(0));
    CHECK(g0);
    // Containers are not exclusive: each open is a new container.
    unique_fd c1 = open_fd("/dev/vfio/vfio");
    unique_fd c2 = open_fd("/dev/vfio/vfio");
    CHECK(c1);
    CHECK(c2);
}

TEST_CASE("group: SET_CONTAINER and UNSET_CONTAINER errors") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g = open_fd(group_path(0));
    REQUIRE(c);
    REQUIRE(g);
    int bad = -1;  // vfio_group_ioctl_set_container: fdget fails -> -EBADF
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &bad), EBADF);
    unique_fd null = open_fd("/dev/null");
    int nfd = null.get();  // vfio_container_from_file(): not a container -> -EINVAL
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &nfd), EINVAL);
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_UNSET_CONTAINER), EINVAL);  // no container
    int cfd = c.get();
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd), EINVAL);  // group->container set
    CHECK_OK(ioctl(g.get(), VFIO_GROUP_UNSET_CONTAINER));
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_UNSET_CONTAINER), EINVAL);
    // Unknown group ioctls: vfio_group_fops_unl_ioctl default -> -ENOTTY.
    CHECK_ERRNO(ioctl(g.get(), VFIO_GET_API_VERSION), ENOTTY);
    CHECK_ERRNO(ioctl(g.get(), _IO(VFIO_TYPE, VFIO_BASE + 60)), ENOTTY);
}

TEST_CASE("group: GET_DEVICE_FD before the IOMMU is set") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g = open_fd(group_path(0));
    REQUIRE(g);
    // vfio_device_assign_container: !group->container -> -EINVAL
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(0).c_str()), EINVAL);
    int cfd = c.get();
    REQUIRE_OK(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    // ... !group->container->iommu_driver -> -EINVAL
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(0).c_str()), EINVAL);
    // The name is looked up first: a wrong name is -ENODEV even now.
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:00:00.0"), ENODEV);
}

TEST_CASE("group: GET_DEVICE_FD name matching (vfio_device_get_from_name, vfio_pci_core_match)") {
    unique_fd c = open_fd("/dev/vfio/vfio");
    unique_fd g = open_fd(group_path(0));
    REQUIRE(g);
    int cfd = c.get();
    REQUIRE_OK(ioctl(g.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    REQUIRE_OK(ioctl(c.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
    // No match in the group -> ERR_PTR(-ENODEV).
    for (const char* name : {"0000:c5:00.1", "0000:C5:00.0", "c5:00.0", "0000:c5:00.0x", "", "0000:c5:00."}) {
        CAPTURE(name);
        CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, name), ENODEV);
    }
    // The name followed by a space and an unknown option: match() returns -EINVAL.
    CHECK_ERRNO(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.0 bogus=1"), EINVAL);
    // Trailing spaces only: still a match.
    unique_fd d1(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.0  "));
    CHECK(d1);
    // The device fd: O_RDWR anon file, always O_CLOEXEC (get_unused_fd_flags(O_CLOEXEC)).
    unique_fd d2(ioctl(g.get(), VFIO_GROUP_GET_DEVICE_FD, bdf(0).c_str()));
    REQUIRE(d2);
    CHECK(d2.get() != d1.get());
    CHECK((fcntl(d2.get(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK((fcntl(d2.get(), F_GETFL) & O_ACCMODE) == O_RDWR);
    // Container and group fds were opened without O_CLOEXEC and stay that way.
    CHECK((fcntl(g.get(), F_GETFD) & FD_CLOEXEC) == 0);
    CHECK((fcntl(c.get(), F_GETFD) & FD_CLOEXEC) == 0);
    // Several device fds may be open at once (open_count); each works on its own.
    d1.reset();
    vfio_device_info info{};
    info.argsz = sizeof(info);
    CHECK_OK(ioctl(d2.get(), VFIO_DEVICE_GET_INFO, &info));
}

TEST_CASE("group: UNSET_CONTAINER is EBUSY while a device fd is open") {
    vfio_handles h = open_device(0);
    // vfio_group_ioctl_unset_container: container_users != 1 -> -EBUSY
    CHECK_ERRNO(ioctl(h.group.get(), VFIO_GROUP_UNSET_CONTAINER), EBUSY);
    h.device.reset();
    CHECK_OK(ioctl(h.group.get(), VFIO_GROUP_UNSET_CONTAINER));
    // Detaching the last group deprivileges the container (vfio_group_detach_container).
    vfio_iommu_type1_info info{};
    info.argsz = sizeof(info);
    CHECK_ERRNO(ioctl(h.container.get(), VFIO_IOMMU_GET_INFO, &info), EINVAL);
    CHECK_ERRNO(ioctl(h.container.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU), EINVAL);
}

// ---------------------------------------------------------------------------------------
// Device fd: info and regions (drivers/vfio/pci/vfio_pci_core.c)
// ---------------------------------------------------------------------------------------

TEST_CASE("device: GET_INFO (vfio_pci_ioctl_get_info)") {
    vfio_handles h = open_device(0);
    vfio_device_info info{};
    info.argsz = 15;
    CHECK_ERRNO(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info), EINVAL);
    info.argsz = 16;  // minsz: no cap_offset
    CHECK_OK(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info));
    CHECK(info.flags == (VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET));
    CHECK(info.num_regions == VFIO_PCI_NUM_REGIONS);  // 9: no device-specific regions
    CHECK(info.num_irqs == VFIO_PCI_NUM_IRQS);        // 5
    info = {};
    info.argsz = sizeof(info);
    info.cap_offset = 0xdeadbeef;  // argsz >= capsz: cap_offset is written (0: no caps)
    CHECK_OK(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info));
    CHECK(info.cap_offset == 0);
    CHECK(info.argsz == sizeof(info));
    CHECK(info.flags == (VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET));
}

TEST_CASE("device: GET_REGION_INFO (vfio_pci_ioctl_get_region_info)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    vfio_region_info info{};
    info.argsz = 31;
    info.index = VFIO_PCI_BAR0_REGION_INDEX;
    CHECK_ERRNO(ioctl(d, VFIO_DEVICE_GET_REGION_INFO, &info), EINVAL);

    const vfio_region_info bar0 = region_info(d, VFIO_PCI_BAR0_REGION_INDEX);
    CHECK(bar0.offset == 0);
    CHECK(bar0.size >= 0x4000);  // init segment + UAR pages
    CHECK((bar0.size & (bar0.size - 1)) == 0);
    const std::uint32_t rwm = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE | VFIO_REGION_INFO_FLAG_MMAP;
    CHECK((bar0.flags & rwm) == rwm);
    CHECK((bar0.flags & ~(rwm | VFIO_REGION_INFO_FLAG_CAPS)) == 0);

    // BAR1..5 of a function with one 64-bit BAR: pci_resource_len() == 0 -> size 0, flags 0.
    const std::vector<std::uint8_t> cfg = read_config(d);
    const bool bar0_64 = (cfg32(cfg, PCI_BASE_ADDRESS_0) & PCI_BASE_ADDRESS_MEM_TYPE_MASK) == PCI_BASE_ADDRESS_MEM_TYPE_64;
    CHECK(bar0_64);
    for (unsigned i = VFIO_PCI_BAR1_REGION_INDEX; i <= VFIO_PCI_BAR5_REGION_INDEX; ++i) {
        CAPTURE(i);
        const vfio_region_info r = region_info(d, i);
        CHECK(r.offset == region_offset(i));
        if (cfg32(cfg, PCI_BASE_ADDRESS_0 + 4 * i) == 0 || (i == 1 && bar0_64)) {
            CHECK(r.size == 0);
            CHECK(r.flags == 0);
        }
    }
    const vfio_region_info rom = region_info(d, VFIO_PCI_ROM_REGION_INDEX);
    CHECK(rom.offset == region_offset(VFIO_PCI_ROM_REGION_INDEX));
    CHECK((rom.flags & ~VFIO_REGION_INFO_FLAG_READ) == 0);  // ROM: READ or nothing

    const vfio_region_info config = region_info(d, VFIO_PCI_CONFIG_REGION_INDEX);
    CHECK(config.index == VFIO_PCI_CONFIG_REGION_INDEX);
    CHECK(config.offset == (std::uint64_t{7} << 40));
    CHECK(config.size == 4096);  // pdev->cfg_size of a PCIe function
    CHECK(config.flags == (VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE));

    // VGA (8) without has_vga, and anything >= VFIO_PCI_NUM_REGIONS + 0: -EINVAL.
    for (std::uint32_t index : {8u, 9u, 10u, 64u, 0xffffffffu}) {
        CAPTURE(index);
        info = {};
        info.argsz = sizeof(info);
        info.index = index;
        CHECK_ERRNO(ioctl(d, VFIO_DEVICE_GET_REGION_INFO, &info), EINVAL);
    }
}

TEST_CASE("device: BAR0 holding the MSI-X table reports the MSIX_MAPPABLE capability") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    const std::vector<std::uint8_t> cfg = read_config(d);
    const std::size_t msix = find_cap(cfg, PCI_CAP_ID_MSIX);
    REQUIRE(msix != 0);
    REQUIRE((cfg32(cfg, msix + PCI_MSIX_TABLE) & PCI_MSIX_TABLE_BIR) == 0);  // table in BAR0
    // vfio_pci_ioctl_get_region_info: index == vdev->msix_bar -> msix_mappable_cap();
    // caps.size = 8, so with argsz 32 the kernel sets FLAG_CAPS, asks for argsz 40 and
    // leaves cap_offset 0.
    vfio_region_info info{};
    info.argsz = sizeof(info);
    info.index = VFIO_PCI_BAR0_REGION_INDEX;
    info.cap_offset = 0xdeadbeef;
    REQUIRE_OK(ioctl(d, VFIO_DEVICE_GET_REGION_INFO, &info));
    CHECK((info.flags & VFIO_REGION_INFO_FLAG_CAPS) != 0);
    CHECK(info.argsz == sizeof(info) + sizeof(vfio_info_cap_header));
    CHECK(info.cap_offset == 0);

    alignas(8) unsigned char buf[64] = {};
    auto* big = reinterpret_cast<vfio_region_info*>(buf);
    big->argsz = sizeof(buf);
    big->index = VFIO_PCI_BAR0_REGION_INDEX;
    REQUIRE_OK(ioctl(d, VFIO_DEVICE_GET_REGION_INFO, big));
    CHECK((big->flags & VFIO_REGION_INFO_FLAG_CAPS) != 0);
    CHECK(big->argsz == sizeof(buf));  // unchanged when it is big enough
    REQUIRE(big->cap_offset == sizeof(vfio_region_info));
    vfio_info_cap_header hdr{};
    std::memcpy(&hdr, buf + big->cap_offset, sizeof(hdr));
    CHECK(hdr.id == VFIO_REGION_INFO_CAP_MSIX_MAPPABLE);
    CHECK(hdr.version == 1);
    CHECK(hdr.next == 0);
}

TEST_CASE("device: GET_IRQ_INFO (vfio_pci_ioctl_get_irq_info, vfio_pci_get_irq_count)") {
    vfio_handles h = open_device(0);
    const int d = h.device.get();
    vfio_irq_info info{};
    info.argsz = 15;
    info.index = VFIO_PCI_MSIX_IRQ_INDEX;
    CHECK_ERRNO(ioctl(d, VFIO_DEVICE_GET_IRQ_INFO, &info), EINVAL);
    for (std::uint32_t index : {5u, 6u, 0xffffffffu}) {
        info = {};
        info.argsz = sizeof(info);
        info.index = index;
        CHECK_ERRNO(ioctl(d, VFIO_DEVICE_GET_IRQ_INFO, &info), EINVAL);
    }
    const std::vector<std::uint8_t> cfg = read_config(d);
    const std::uint32_t noresize = VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE;

    const vfio_irq_info intx = irq_info(d, VFIO_PCI_INTX_IRQ_INDEX);
    CHECK(intx.flags == (VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED));
    CHECK(intx.count == (cfg[PCI_INTERRUPT_PIN] != 0 ? 1u : 0u));

    const vfio_irq_info msi = irq_info(d, VFIO_PCI_MSI_IRQ_INDEX);
    CHECK(msi.flags == noresize);
    const std::size_t msi_pos = find_cap(cfg, PCI_CAP_ID_MSI);
    CHECK(msi.count == (msi_pos == 0 ? 0u : 1u << ((cfg16(cfg, msi_pos + PCI_MSI_FLAGS) & PCI_MSI_FLAGS_QMASK) >> 1)));

    const vfio_irq_info msix = irq_info(d, VFIO_PCI_MSIX_IRQ_INDEX);
    CHECK(msix.flags == noresize);
    const std::size_t msix_pos = find_cap(cfg, PCI_CAP_ID_MSIX);
    REQUIRE(msix_pos != 0);
    CHECK(msix.count == (cfg16(cfg, msix_pos + PCI_MSIX_FLAGS) & PCI_MSIX_FLAGS_QSIZE) + 1u);
    CHECK(msix.count >= 2);  // vector 0 for the driver, more for DevX users

    REQUIRE(find_cap(cfg, PCI_CAP_ID_EXP) != 0);  // PCIe: the ERR index exists
    const vfio_irq_info err = irq_info(d, VFIO_PCI_ERR_IRQ_INDEX);
    CHECK(err.flags == noresize);
    CHECK(err.count == 1);
    const vfio_irq_info req = irq_info(d, VFIO_PCI_REQ_IRQ_INDEX);
    CHECK(req.flags == noresize);
    CHECK(req.count == 1);
}

TEST_CASE("device: sysfs resource file agrees with BAR0 (pci-sysfs.c resource_show)") {
    vfio_handles h = open_device(0);
    const vfio_region_info bar0 = region_info(h.device.get(), VFIO_PCI_BAR0_REGION_INDEX);
    std::istringstream in(slurp(sysfs_dir(0) + "/resource"));
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
        CAPTURE(line);
        unsigned long long start = 0, end = 0, flags = 0;
        CHECK(line.size() == 3 * 18 + 2);  // "0x%016llx 0x%016llx 0x%016llx"
        CHECK(std::sscanf(line.c_str(), "0x%llx 0x%llx 0x%llx", &start, &end, &flags) == 3);
        if (lines == 0) {
            CHECK(end - start + 1 == bar0.size);
            CHECK((flags & 0x200) != 0);  // IORESOURCE_MEM
        }
        ++lines;
    }
    CHECK(lines == 13);  // PCI_BRIDGE_RESOURCES rows for a non-bridge function
}

}  // namespace cxv::vfio_test
