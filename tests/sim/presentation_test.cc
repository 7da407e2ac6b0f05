// The presentation layer's settings and its emulated sysfs/dev tree, tested directly
// (the VFIO ioctls are tested end to end in tests/vfio/).
#include <doctest/doctest.h>

#include <sys/sysmacros.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/vfio/options.h"
#include "sim/vfio/sysfs.h"

using namespace cxv::sim;
using namespace cxv::sim::vfio;

TEST_CASE("PCI addresses parse and print as sysfs spells them") {
    auto a = pci_address::parse("0000:c5:00.1");
    REQUIRE(a.ok());
    CHECK(a->bus == 0xc5);
    CHECK(a->function == 1);
    CHECK(a->str() == "0000:c5:00.1");
    CHECK(pci_address::parse("0001:0a:1f.7")->str() == "0001:0a:1f.7");
    CHECK_FALSE(pci_address::parse("0000:c5:00.8").ok());   // function is 3 bits
    CHECK_FALSE(pci_address::parse("0000:c5:20.0").ok());   // device is 5 bits
    CHECK_FALSE(pci_address::parse("c5:00.0").ok());
    CHECK_FALSE(pci_address::parse("0000:c5:00.0 ").ok());
}

TEST_CASE("defaults: one InfiniBand ConnectX-6 at 0000:c5:00.0 in IOMMU group 120") {
    options o;
    auto f = o.functions();
    REQUIRE(f.ok());
    REQUIRE(f->size() == 1);
    CHECK(f->at(0).address.str() == "0000:c5:00.0");
    CHECK(f->at(0).iommu_group == 120);
    CHECK(f->at(0).model.device_id == 0x101b);
    CHECK(f->at(0).model.port == port_type::IB);
}

TEST_CASE("further functions count up in address, group, GUID, LID and MAC") {
    options o;
    REQUIRE(o.set("devices", "10").ok());
    REQUIRE(o.set("first_bdf", "0000:3b:00.6").ok());
    auto f = o.functions();
    REQUIRE(f.ok());
    REQUIRE(f->size() == 10);
    CHECK(f->at(1).address.str() == "0000:3b:00.7");
    CHECK(f->at(2).address.str() == "0000:3b:01.0");  // next device number
    CHECK(f->at(9).iommu_group == 129);
    CHECK(f->at(3).model.node_guid == f->at(0).model.node_guid + 3);
    CHECK(f->at(3).model.lid == f->at(0).model.lid + 3);
    CHECK(f->at(3).model.mac[5] == f->at(0).model.mac[5] + 3);
    REQUIRE(o.set("first_bdf", "0000:3b:1f.7").ok());
    CHECK_FALSE(o.functions().ok());  // ten functions do not fit behind 1f.7
}

TEST_CASE("bad settings are refused with the key in the message and change nothing") {
    options o;
    for (auto [k, v] : {std::pair{"devices", "0"}, {"devices", "65"}, {"devices", "two"},
                        {"port_type", "roce"}, {"bar0_size", "3000000"}, {"mac", "1:2:3"},
                        {"ipv4", "169.254.1.256"}, {"fw_version", "1.2"}, {"lid", "0xc000"},
                        {"first_group", "-1"}, {"nonsense", "1"}}) {
        auto s = o.set(k, v);
        CHECK_FALSE(s.ok());
        CHECK(s.error().message.find(k) != std::string::npos);
    }
    options fresh;
    CHECK(o.settings() == fresh.settings());
}

TEST_CASE("settings() reads back to the same options") {
    options o;
    REQUIRE(o.set("devices", "3").ok());
    REQUIRE(o.set("port_type", "eth").ok());
    REQUIRE(o.set("mac", "0a:0b:0c:0d:0e:0f").ok());
    REQUIRE(o.set("ipv4", "169.254.7.9").ok());
    REQUIRE(o.set("fw_version", "22.36.1010").ok());
    REQUIRE(o.set("health_period_ms", "250").ok());
    options back;
    for (const auto& [k, v] : o.settings()) REQUIRE(back.set(k, v).ok());
    CHECK(back.settings() == o.settings());
    CHECK(back.model.port == port_type::ETHERNET);
    CHECK(back.model.mac[0] == 0x0a);
    CHECK(back.model.health_period.count() == 250);
}

TEST_CASE("config file: key = value lines, comments, errors with line numbers") {
    char path[] = "/tmp/cxv-sim-test-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE* f = fdopen(fd, "w");
    std::fputs("# two Ethernet functions\ndevices = 2\n  port_type=eth   # trailing comment\n\n", f);
    std::fclose(f);
    options o;
    REQUIRE(o.load_file(path).ok());
    CHECK(o.devices == 2);
    CHECK(o.model.port == port_type::ETHERNET);
    f = std::fopen(path, "w");
    std::fputs("devices = 2\nlid\n", f);
    std::fclose(f);
    auto s = o.load_file(path);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find(":2:") != std::string::npos);
    std::remove(path);
    CHECK_FALSE(o.load_file(path).ok());
}

TEST_CASE("environment settings override the config file") {
    setenv("CXV_SIM_DEVICES", "4", 1);
    setenv("CXV_SIM_PORT_TYPE", "eth", 1);
    options o;
    REQUIRE(o.load_environment().ok());
    CHECK(o.devices == 4);
    CHECK(o.model.port == port_type::ETHERNET);
    setenv("CXV_SIM_DEVICES", "zero", 1);
    options bad;
    auto s = bad.load_environment();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find("CXV_SIM_DEVICES") != std::string::npos);
    unsetenv("CXV_SIM_DEVICES");
    unsetenv("CXV_SIM_PORT_TYPE");
}

namespace {

sysfs two_functions() {
    options o;
    REQUIRE(o.set("devices", "2").ok());
    return sysfs(o.functions().value());
}

}  // namespace

TEST_CASE("sysfs: the paths rdma-core's VFIO provider uses resolve as on a real system") {
    const sysfs fs = two_functions();
    auto dir = fs.resolve("/sys/bus/pci/devices/0000:c5:00.1/", true);
    REQUIRE(dir.what == lookup::found);
    CHECK(dir.n->kind == node_kind::directory);
    auto vendor = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0//vendor", true);
    REQUIRE(vendor.what == lookup::found);
    CHECK(vendor.n->text == "0x15b3\n");
    auto group = fs.resolve("/sys/bus/pci/devices/0000:c5:00.1/iommu_group", false);
    REQUIRE(group.what == lookup::found);
    CHECK(group.n->kind == node_kind::symlink);
    CHECK(group.n->text == "../../../kernel/iommu_groups/121");
    auto type = fs.resolve("/sys/bus/pci/devices/0000:c5:00.1/iommu_group/type", true);
    REQUIRE(type.what == lookup::found);
    CHECK(type.n->text == "DMA\n");
    auto dev = fs.resolve("/dev/vfio/121", true);
    REQUIRE(dev.what == lookup::found);
    CHECK(dev.n->kind == node_kind::vfio_group);
    CHECK(dev.n->function == 1);
    CHECK(fs.resolve("/dev/vfio/vfio", true).n->kind == node_kind::vfio_container);
}

TEST_CASE("sysfs: links, dot-dot, missing entries and foreign paths") {
    const sysfs fs = two_functions();
    // The bus link itself, not followed, and followed.
    auto link = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0", false);
    REQUIRE(link.what == lookup::found);
    CHECK(link.n->kind == node_kind::symlink);
    CHECK(fs.resolve("/sys/bus/pci/devices/0000:c5:00.0", true).n->kind == node_kind::directory);
    // Through the driver link and back down.
    auto back = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0/driver/0000:c5:00.1/device", true);
    REQUIRE(back.what == lookup::found);
    CHECK(back.n->text == "0x101b\n");
    auto dots = fs.resolve("/sys/devices/pci0000:c5/0000:c5:00.0/../0000:c5:00.1/./class", true);
    REQUIRE(dots.what == lookup::found);
    CHECK(dots.n->text == "0x020700\n");
    // Under an emulated function nothing else exists.
    auto missing = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0/sriov_numvfs", true);
    CHECK(missing.what == lookup::error);
    CHECK(missing.err == ENOENT);
    auto notdir = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0/vendor/x", true);
    CHECK(notdir.what == lookup::error);
    CHECK(notdir.err == ENOTDIR);
    // A link out of the tree hands back the host path.
    auto out = fs.resolve("/sys/bus/pci/devices/0000:c5:00.0/subsystem/drivers", true);
    REQUIRE(out.what == lookup::redirect);
    CHECK(out.path == "/sys/bus/pci/drivers");
    // Other devices, other groups and other files are the host's.
    CHECK(fs.resolve("/sys/bus/pci/devices/0000:00:00.0/vendor", true).what == lookup::not_ours);
    CHECK(fs.resolve("/dev/vfio/7", true).what == lookup::not_ours);
    CHECK(fs.resolve("/etc/passwd", true).what == lookup::not_ours);
    CHECK(fs.resolve("relative/path", true).what == lookup::not_ours);
}

TEST_CASE("sysfs: stat shapes") {
    const sysfs fs = two_functions();
    struct stat st;
    fs.fill_stat(*fs.resolve("/dev/vfio/vfio", true).n, st);
    CHECK(S_ISCHR(st.st_mode));
    CHECK(major(st.st_rdev) == 10);
    CHECK(minor(st.st_rdev) == 196);
    fs.fill_stat(*fs.resolve("/sys/bus/pci/devices/0000:c5:00.0", false).n, st);
    CHECK(S_ISLNK(st.st_mode));
    fs.fill_stat(*fs.resolve("/sys/bus/pci/devices/0000:c5:00.0", true).n, st);
    CHECK(S_ISDIR(st.st_mode));
    fs.fill_stat(*fs.resolve("/sys/bus/pci/devices/0000:c5:00.0/vendor", true).n, st);
    CHECK(S_ISREG(st.st_mode));
}
