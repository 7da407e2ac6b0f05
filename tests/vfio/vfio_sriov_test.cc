// Black-box conformance of the presentation layer's SR-IOV, against Linux 6.1's
// drivers/pci/iov.c (sriov_* attributes, sriov_numvfs_store), drivers/vfio/pci
// (vfio_pci_sriov_configure, vfio_pci_bus_notifier, vfio_pci_core_match,
// vfio_pci_validate_vf_token, vfio_pci_core_feature_token) and the PCIe Base SR-IOV
// Extended Capability. Runs under `cxv-sim run --set sriov_totalvfs=3` with the PF on
// vfio-pci, with vfio-pci's enable_sriov on (vfio_sriov_test) or off (its default:
// vfio_sriov_off_test). Only syscalls; nothing is taken from sim/vfio/.
#include <sys/syscall.h>

#include <array>
#include <string>

#include "tests/vfio/vfio_test_util.h"

namespace cxv::vfio_test {
namespace {

const std::string kPf = "/sys/bus/pci/devices/0000:c5:00.0";

std::string attr(const std::string& path) {
    unique_fd f = open_fd(path, O_RDONLY);
    if (!f) return "<" + std::string(errname(errno).c_str()) + ">";
    char buf[256];
    const ssize_t n = ::read(f.get(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string link_of(const std::string& path) {
    char buf[256];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

bool exists(const std::string& path) {
    struct stat st{};
    return ::lstat(path.c_str(), &st) == 0;
}

// write(2) of `text` to a sysfs attribute: 0, or the errno the store answered.
int store(const std::string& path, const std::string& text) {
    unique_fd f = open_fd(path, O_WRONLY);
    if (!f) return errno;
    return ::write(f.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : errno;
}

std::uint16_t get16(const std::vector<std::uint8_t>& c, std::size_t off) {
    return static_cast<std::uint16_t>(c[off] | (c[off + 1] << 8));
}

// The function's config space as sysfs shows it (root reads all 4 KiB).
std::vector<std::uint8_t> config_of(const std::string& dir) {
    std::vector<std::uint8_t> c(4096);
    unique_fd f = open_fd(dir + "/config", O_RDONLY);
    REQUIRE(f);
    REQUIRE(::pread(f.get(), c.data(), c.size(), 0) == 4096);
    return c;
}

// The SR-IOV extended capability's offset in `c` (0: none), walking the list from 0x100.
std::size_t sriov_cap(const std::vector<std::uint8_t>& c) {
    for (std::size_t pos = 0x100; pos != 0 && pos + 4 <= c.size();) {
        const std::uint32_t h = c[pos] | (c[pos + 1] << 8) | (c[pos + 2] << 16) | (std::uint32_t{c[pos + 3]} << 24);
        if ((h & 0xffff) == PCI_EXT_CAP_ID_SRIOV) return pos;
        pos = h >> 20;
    }
    return 0;
}

// Container, group (and IOMMU) of function `n` of the 4; the device fd under `name`.
struct opened {
    unique_fd container, group;
};
opened open_group(unsigned n) {
    opened o;
    o.container = open_fd("/dev/vfio/vfio");
    REQUIRE(o.container);
    o.group = open_fd("/dev/vfio/" + std::to_string(120 + n));
    REQUIRE_MESSAGE(o.group, "open /dev/vfio/" << 120 + n << ": " << errname(errno));
    int cfd = o.container.get();
    REQUIRE_OK(ioctl(o.group.get(), VFIO_GROUP_SET_CONTAINER, &cfd));
    REQUIRE_OK(ioctl(o.container.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
    return o;
}

constexpr const char* kZero = "00000000-0000-0000-0000-000000000000";
constexpr const char* kToken = "bd8d9d2b-5a5f-4f5a-a211-f591514ba1f3";

bool sriov_on() { return attr("/sys/module/vfio_pci/parameters/enable_sriov") == "Y\n"; }

}  // namespace

TEST_CASE("a PF's SR-IOV attributes and capability, before any VF") {
    CHECK(attr(kPf + "/sriov_totalvfs") == "3\n");
    CHECK(attr(kPf + "/sriov_numvfs") == "0\n");
    CHECK(attr(kPf + "/sriov_offset") == "1\n");  // the VFs follow the PF: 0000:c5:00.1 on
    CHECK(attr(kPf + "/sriov_stride") == "1\n");
    CHECK(attr(kPf + "/sriov_vf_device") == "101c\n");  // iov.c prints "%x"
    CHECK(attr(kPf + "/sriov_drivers_autoprobe") == "1\n");
    struct stat st{};
    REQUIRE(::stat((kPf + "/sriov_numvfs").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0664);
    const auto c = config_of(kPf);
    const std::size_t cap = sriov_cap(c);
    REQUIRE(cap != 0);
    CHECK(get16(c, cap + 0x0e) == 3);       // TotalVFs
    CHECK(get16(c, cap + 0x10) == 0);       // NumVFs
    CHECK(get16(c, cap + 0x14) == 1);       // First VF Offset
    CHECK(get16(c, cap + 0x16) == 1);       // VF Stride
    CHECK(get16(c, cap + 0x1a) == 0x101c);  // VF Device ID
    CHECK((get16(c, cap + 0x08) & 1) == 0);  // VF Enable
    // No VF yet: none of their files.
    CHECK_FALSE(exists("/sys/bus/pci/devices/0000:c5:00.1"));
    CHECK_FALSE(exists(kPf + "/virtfn0"));
    CHECK_FALSE(exists("/dev/vfio/121"));
}

TEST_CASE("sriov_numvfs: range, parsing, and a PF whose driver cannot configure SR-IOV") {
    CHECK(store(kPf + "/sriov_numvfs", "4") == ERANGE);
    CHECK(store(kPf + "/sriov_numvfs", "two") == EINVAL);
    CHECK(store(kPf + "/sriov_numvfs", "-1") == EINVAL);
    CHECK(store(kPf + "/sriov_numvfs", "0") == 0);  // already 0: nothing to do
    if (!sriov_on()) {
        // vfio_pci_sriov_configure without enable_sriov.
        CHECK(store(kPf + "/sriov_numvfs", "1") == ENOENT);
        CHECK(attr(kPf + "/sriov_numvfs") == "0\n");
        return;
    }
    // No driver at all: nobody to configure it (iov.c).
    REQUIRE(store("/sys/bus/pci/drivers/vfio-pci/unbind", "0000:c5:00.0") == 0);
    CHECK(store(kPf + "/sriov_numvfs", "1") == ENOENT);
    REQUIRE(store("/sys/bus/pci/drivers/vfio-pci/bind", "0000:c5:00.0") == ENODEV);  // no override: not vfio-pci's
    REQUIRE(store(kPf + "/driver_override", "vfio-pci") == 0);
    REQUIRE(store("/sys/bus/pci/drivers_probe", "0000:c5:00.0") == 0);
    CHECK(link_of(kPf + "/driver").ends_with("/vfio-pci"));
}

TEST_CASE("VFs of a vfio-pci PF: they appear with their own address and group, captured by vfio-pci, and go") {
    if (!sriov_on()) return;
    REQUIRE(store(kPf + "/sriov_numvfs", "2") == 0);
    CHECK(attr(kPf + "/sriov_numvfs") == "2\n");
    for (unsigned i = 0; i < 2; ++i) {
        CAPTURE(i);
        const std::string vf = "0000:c5:00." + std::to_string(i + 1);
        const std::string dir = "/sys/bus/pci/devices/" + vf;
        REQUIRE(exists(dir));
        CHECK(link_of(kPf + "/virtfn" + std::to_string(i)) == "../" + vf);
        CHECK(link_of(dir + "/physfn") == "../0000:c5:00.0");
        CHECK(attr(dir + "/vendor") == "0x15b3\n");
        CHECK(attr(dir + "/device") == "0x101c\n");
        CHECK(link_of(dir + "/iommu_group").ends_with("/" + std::to_string(121 + i)));
        // vfio_pci_bus_notifier: a vfio-pci PF's VF gets driver_override vfio-pci, and
        // with autoprobe it is bound at once.
        CHECK(attr(dir + "/driver_override") == "vfio-pci\n");
        CHECK(link_of(dir + "/driver").ends_with("/vfio-pci"));
        CHECK(exists("/dev/vfio/" + std::to_string(121 + i)));
        CHECK(attr(dir + "/current_link_width") == "0\n");  // a VF has no link of its own
    }
    CHECK_FALSE(exists("/sys/bus/pci/devices/0000:c5:00.3"));
    CHECK_FALSE(exists(kPf + "/virtfn2"));
    const auto c = config_of(kPf);
    const std::size_t cap = sriov_cap(c);
    REQUIRE(cap != 0);
    CHECK(get16(c, cap + 0x10) == 2);        // NumVFs
    CHECK((get16(c, cap + 0x08) & 9) == 9);  // VF Enable, VF MSE
    // Changing the count needs a disable first (iov.c: EBUSY).
    CHECK(store(kPf + "/sriov_numvfs", "3") == EBUSY);
    CHECK(store(kPf + "/sriov_numvfs", "0") == 0);
    CHECK_FALSE(exists("/sys/bus/pci/devices/0000:c5:00.1"));
    CHECK_FALSE(exists("/dev/vfio/121"));
    CHECK_FALSE(exists(kPf + "/virtfn0"));
    // A VF that does not exist cannot be bound.
    CHECK(store("/sys/bus/pci/drivers_probe", "0000:c5:00.1") == ENODEV);
    // Without autoprobe the VFs come unbound, with vfio-pci's override.
    REQUIRE(store(kPf + "/sriov_drivers_autoprobe", "0") == 0);
    REQUIRE(store(kPf + "/sriov_numvfs", "1") == 0);
    CHECK_FALSE(exists("/sys/bus/pci/devices/0000:c5:00.1/driver"));
    CHECK(attr("/sys/bus/pci/devices/0000:c5:00.1/driver_override") == "vfio-pci\n");
    REQUIRE(store("/sys/bus/pci/drivers_probe", "0000:c5:00.1") == 0);
    CHECK(link_of("/sys/bus/pci/devices/0000:c5:00.1/driver").ends_with("/vfio-pci"));
    REQUIRE(store(kPf + "/sriov_numvfs", "0") == 0);
    REQUIRE(store(kPf + "/sriov_drivers_autoprobe", "1") == 0);
}

TEST_CASE("the VF token: a vfio-pci PF's VFs open only with it; the PF's user sets it; VFs in use guard it") {
    if (!sriov_on()) return;
    REQUIRE(store(kPf + "/sriov_numvfs", "1") == 0);
    {
        opened vf = open_group(1);
        // vfio_pci_validate_vf_token: no token, or the wrong one, is EACCES; an unknown
        // or repeated option EINVAL; the PF's token (all zero until set) opens it.
        CHECK_ERRNO(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.1"), EACCES);
        CHECK_ERRNO(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.1 vf_token=" + std::string(kToken)).c_str()),
                    EACCES);
        CHECK_ERRNO(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.1 vf_token=nonsense"), EINVAL);
        CHECK_ERRNO(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD,
                          ("0000:c5:00.1 vf_token=" + std::string(kZero) + " vf_token=" + kZero).c_str()),
                    EINVAL);
        unique_fd d(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.1  vf_token=" + std::string(kZero)).c_str()));
        REQUIRE_MESSAGE(d, errname(errno));
        // The VF is in use: the PF now opens only with the VFs' token.
        opened pf = open_group(0);
        CHECK_ERRNO(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.0"), EACCES);
        CHECK_ERRNO(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.0 vf_token=" + std::string(kToken)).c_str()),
                    EACCES);
        unique_fd p(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.0 vf_token=" + std::string(kZero)).c_str()));
        REQUIRE_MESSAGE(p, errname(errno));
        // VFIO_DEVICE_FEATURE_PCI_VF_TOKEN: SET only; PROBE says so.
        // The feature header and its 16-byte UUID, as one buffer (vfio_device_feature
        // ends in a flexible array).
        struct token_feature {
            std::array<std::uint8_t, sizeof(vfio_device_feature) + 16> bytes{};
            vfio_device_feature& f() { return *reinterpret_cast<vfio_device_feature*>(bytes.data()); }
            void set_uuid(const std::array<std::uint8_t, 16>& u) {
                std::memcpy(bytes.data() + sizeof(vfio_device_feature), u.data(), u.size());
            }
        } feat;
        feat.f().argsz = sizeof feat.bytes;
        feat.f().flags = VFIO_DEVICE_FEATURE_PCI_VF_TOKEN | VFIO_DEVICE_FEATURE_PROBE | VFIO_DEVICE_FEATURE_SET;
        CHECK_OK(ioctl(p.get(), VFIO_DEVICE_FEATURE, feat.bytes.data()));
        feat.f().flags = VFIO_DEVICE_FEATURE_PCI_VF_TOKEN | VFIO_DEVICE_FEATURE_GET;
        CHECK_ERRNO(ioctl(p.get(), VFIO_DEVICE_FEATURE, feat.bytes.data()), EINVAL);
        feat.f().flags = VFIO_DEVICE_FEATURE_PCI_VF_TOKEN | VFIO_DEVICE_FEATURE_SET;
        feat.f().argsz = sizeof(vfio_device_feature) + 8;  // shorter than a UUID
        CHECK_ERRNO(ioctl(p.get(), VFIO_DEVICE_FEATURE, feat.bytes.data()), EINVAL);
        feat.f().argsz = sizeof feat.bytes;
        feat.set_uuid({0xbd, 0x8d, 0x9d, 0x2b, 0x5a, 0x5f, 0x4f, 0x5a, 0xa2, 0x11, 0xf5, 0x91, 0x51, 0x4b, 0xa1, 0xf3});
        CHECK_OK(ioctl(p.get(), VFIO_DEVICE_FEATURE, feat.bytes.data()));
        // A VF's device fd has no VF token feature.
        CHECK_ERRNO(ioctl(d.get(), VFIO_DEVICE_FEATURE, feat.bytes.data()), ENOTTY);
    }
    // The new token: the old one no longer opens the VF.
    {
        opened vf = open_group(1);
        CHECK_ERRNO(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.1 vf_token=" + std::string(kZero)).c_str()),
                    EACCES);
        unique_fd d(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.1 vf_token=" + std::string(kToken)).c_str()));
        CHECK_MESSAGE(d, errname(errno));
        // VFs going while a VF's group is held: EBUSY here (Linux waits for the holder).
        CHECK(store(kPf + "/sriov_numvfs", "0") == EBUSY);
    }
    // With no VF in use, a PF opened with a token sets it.
    {
        opened pf = open_group(0);
        unique_fd p(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.0 vf_token=" + std::string(kZero)).c_str()));
        REQUIRE_MESSAGE(p, errname(errno));
    }
    {
        opened vf = open_group(1);
        unique_fd d(ioctl(vf.group.get(), VFIO_GROUP_GET_DEVICE_FD, ("0000:c5:00.1 vf_token=" + std::string(kZero)).c_str()));
        CHECK_MESSAGE(d, errname(errno));
    }
    CHECK(store(kPf + "/sriov_numvfs", "0") == 0);
}

TEST_CASE("a function that is neither PF with SR-IOV nor VF refuses a token (EINVAL)") {
    // The PF of this run has the capability; a token on its open is fine (tested above).
    // Its VF of a PF not on vfio-pci refuses one: covered by tests/tools/sriov_test.sh,
    // where the PF is mlx5_core's. Here: the option's syntax on the PF.
    opened pf = open_group(0);
    CHECK_ERRNO(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.0 vf_token="), EINVAL);
    CHECK_ERRNO(ioctl(pf.group.get(), VFIO_GROUP_GET_DEVICE_FD, "0000:c5:00.0 vf_token=00000000-0000-0000-0000-00000000000g"),
                EINVAL);
}

}  // namespace cxv::vfio_test
