// File lifetimes the kernel gets right and a preload layer easily gets wrong: fork,
// a BAR mapping that outlives its fd, streams, close_range, read/write at the file
// position, and INTx routing. Expected behaviour from Linux 6.1 (drivers/vfio/).
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "tests/vfio/vfio_test_util.h"

using namespace cxv::vfio_test;

namespace {

constexpr std::size_t kMarker = 0x4000;  // a UAR page: plain memory as far as the test goes

volatile std::uint32_t* map_bar(int device) {
    void* p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, device, 0);
    REQUIRE(p != MAP_FAILED);
    return static_cast<volatile std::uint32_t*>(p);
}

}  // namespace

TEST_CASE("fork: a child closing its copies leaves the parent's device as it was") {
    auto h = open_device(0);
    auto* bar = map_bar(h.device.get());
    bar[kMarker / 4] = 0xdeadbeef;
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The child's copies refer to the same files; closing them drops only the
        // child's references (the parent still holds the files).
        ::close(h.device.get());
        ::close(h.group.get());
        ::close(h.container.get());
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(bar[kMarker / 4] == 0xdeadbeef);
    // The parent's device still answers.
    vfio_device_info info{};
    info.argsz = sizeof info;
    CHECK_OK(ioctl(h.device.get(), VFIO_DEVICE_GET_INFO, &info));
    munmap(const_cast<std::uint32_t*>(bar), 1 << 20);
}

TEST_CASE("a BAR mapping keeps the device open after its fd is closed (vm_file)") {
    auto h = open_device(0);
    auto* bar = map_bar(h.device.get());
    bar[kMarker / 4] = 0x12345678;
    h.device.reset();
    h.group.reset();
    h.container.reset();
    // No release yet: the function was not reset, and the group is still in use.
    CHECK(bar[kMarker / 4] == 0x12345678);
    CHECK_ERRNO(::open(group_path(0).c_str(), O_RDWR), EBUSY);
    // The last munmap releases the device, and with it the group.
    REQUIRE(munmap(const_cast<std::uint32_t*>(bar), 1 << 20) == 0);
    auto g = open_fd(group_path(0));
    CHECK(g);
}

TEST_CASE("fclose of a stream on a group releases the group") {
    FILE* f = std::fopen(group_path(1).c_str(), "r+");
    REQUIRE(f != nullptr);
    CHECK_ERRNO(::open(group_path(1).c_str(), O_RDWR), EBUSY);
    REQUIRE(std::fclose(f) == 0);
    auto g = open_fd(group_path(1));
    CHECK(g);
}

TEST_CASE("close_range releases the VFIO files it closes") {
    auto g = open_fd(group_path(1));
    REQUIRE(g);
    const unsigned fd = static_cast<unsigned>(g.release());
    REQUIRE(close_range(fd, fd, 0) == 0);
    auto again = open_fd(group_path(1));
    CHECK(again);
}

TEST_CASE("read and write of a device fd act at the file position (vfio_pci_rw)") {
    auto h = open_device(0);
    const off_t cfg = static_cast<off_t>(region_offset(VFIO_PCI_CONFIG_REGION_INDEX));
    REQUIRE(lseek(h.device.get(), cfg, SEEK_SET) == cfg);
    std::uint16_t ids[2] = {};
    REQUIRE(::read(h.device.get(), ids, sizeof ids) == static_cast<ssize_t>(sizeof ids));
    CHECK(ids[0] == 0x15b3);
    CHECK(ids[1] == 0x101b);
    CHECK(lseek(h.device.get(), 0, SEEK_CUR) == cfg + 4);  // advanced
    const std::uint16_t command = PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER;
    REQUIRE(::write(h.device.get(), &command, 2) == 2);    // at cfg + 4: the command register
    CHECK((config_read16(h.device.get(), PCI_COMMAND) & PCI_COMMAND_MASTER) != 0);
    // Past the end of config space: EFAULT (vfio_config_do_rw), nothing moves.
    REQUIRE(lseek(h.device.get(), cfg + 4095, SEEK_SET) == cfg + 4095);
    CHECK_ERRNO(::read(h.device.get(), ids, sizeof ids), EFAULT);
    // A container has no read (vfio_fops_read without an IOMMU read op).
    char c;
    CHECK_ERRNO(::read(h.container.get(), &c, 1), EINVAL);
}

TEST_CASE("INTx: eventfd routing, loopback, and no MSI-X while INTx is enabled") {
    auto h = open_device(0);
    const int d = h.device.get();
    // Mask/unmask need INTx enabled (vfio_pci_set_intx_mask).
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK, VFIO_PCI_INTX_IRQ_INDEX, 0, 1),
                EINVAL);
    unique_fd efd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    REQUIRE(efd);
    REQUIRE_OK(set_eventfds(d, VFIO_PCI_INTX_IRQ_INDEX, 0, {efd.get()}));
    CHECK_OK(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_PCI_INTX_IRQ_INDEX, 0, 1));
    CHECK(drain(efd.get()) == 1);
    CHECK_OK(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK, VFIO_PCI_INTX_IRQ_INDEX, 0, 1));
    const std::int32_t raw = efd.get();
    CHECK_ERRNO(set_irqs(d, VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_MASK, VFIO_PCI_INTX_IRQ_INDEX, 0, 1,
                         &raw, sizeof raw),
                ENOTTY);
    unique_fd msix(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    CHECK_ERRNO(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, {msix.get()}), EINVAL);
    // Disable INTx (count 0, DATA_NONE); then MSI-X can be enabled.
    CHECK_OK(set_irqs(d, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_PCI_INTX_IRQ_INDEX, 0, 0));
    CHECK_OK(set_eventfds(d, VFIO_PCI_MSIX_IRQ_INDEX, 0, {msix.get()}));
}

TEST_CASE("the fault-injection control file reaches the function's model") {
    const std::string ctl = sysfs_dir(1) + "/cxv_sim_control";
    auto put = [&](const char* text) {
        unique_fd fd(::open(ctl.c_str(), O_WRONLY));
        REQUIRE(fd);
        return ::write(fd.get(), text, std::strlen(text));
    };
    CHECK_ERRNO(::open(ctl.c_str(), O_RDONLY), EACCES);
    CHECK_ERRNO(put("clear"), ENODEV);  // no model runs while the group is closed
    auto h = open_device(1);
    CHECK(put("clear") == 5);
    CHECK_ERRNO(put("fail NO_SUCH_COMMAND BAD_PARAM 0x1"), EINVAL);
    CHECK_ERRNO(put("bogus"), EINVAL);
    CHECK(put("fail QUERY_HCA_CAP BAD_PARAM 0x1234 2") > 0);
    CHECK(put("stall_health 1") > 0);
    CHECK(put("link down") > 0);
    // The health counter stops moving (BAR0 0x1010, low 24 bits).
    auto* bar = map_bar(h.device.get());
    const std::uint32_t before = bar[0x1010 / 4];
    usleep(200'000);
    CHECK(bar[0x1010 / 4] == before);
    CHECK(put("stall_health 0") > 0);
    usleep(200'000);
    CHECK(bar[0x1010 / 4] != before);
    munmap(const_cast<std::uint32_t*>(bar), 1 << 20);
}
