#include "driver/pci/pci.h"

extern "C" {
#include <pci/pci.h>
}

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#include "hw/pci_ids.h"

namespace cxv::driver::pci {

namespace {

// libpci reports fatal errors through a callback that must not return (its default
// prints the message and exits). Ours records the message and jumps back into scan().
thread_local std::jmp_buf* fatal_jump = nullptr;
thread_local char fatal_message[256];

[[noreturn]] void on_fatal(char* msg, ...) {
    va_list ap;
    va_start(ap, msg);
    std::vsnprintf(fatal_message, sizeof fatal_message, msg, ap);
    va_end(ap);
    if (fatal_jump == nullptr) std::abort();  // outside scan(): libpci has no such call
    std::longjmp(*fatal_jump, 1);
}

void on_quiet(char*, ...) {}

struct access_deleter {
    void operator()(pci_access* a) const { pci_cleanup(a); }
};
using access_ptr = std::unique_ptr<pci_access, access_deleter>;

enum class scan_result { done, failed, failed_in_init };

// The function's entry in hw/pci_ids.h, or nullptr when it is not an mlx5 function.
const hw::pci_device_id* mlx5_id(const pci_dev* d) {
    return d->vendor_id == hw::mellanox_vendor_id ? hw::find_mlx5_device(d->device_id) : nullptr;
}

// Every libpci call that may report a fatal error, in one frame that holds no C++
// object, so that the jump from on_fatal skips no destructor. The first scan reads only
// the IDs, for every function on the machine; the rest is read for mlx5 functions.
scan_result scan(pci_access* acc, char* sysfs_bus) {
    std::jmp_buf jump;
    volatile bool in_init = true;
    fatal_jump = &jump;
    if (setjmp(jump) != 0) {
        fatal_jump = nullptr;
        return in_init ? scan_result::failed_in_init : scan_result::failed;
    }
    // sysfs only: the driver needs Linux's sysfs and VFIO anyway, and libpci's other
    // methods (/proc/bus/pci, I/O ports as root) know neither drivers nor IOMMU groups.
    acc->method = PCI_ACCESS_SYS_BUS_PCI;
    if (pci_set_param(acc, const_cast<char*>("sysfs.path"), sysfs_bus) != 0) {
        on_fatal(const_cast<char*>("this libpci has no sysfs.path parameter"));
    }
    pci_init(acc);
    in_init = false;
    pci_scan_bus(acc);
    for (pci_dev* d = acc->devices; d != nullptr; d = d->next) {
        pci_fill_info(d, PCI_FILL_IDENT);
        if (mlx5_id(d) != nullptr) {
            pci_fill_info(d, PCI_FILL_NUMA_NODE | PCI_FILL_IOMMU_GROUP | PCI_FILL_DRIVER);
        }
    }
    fatal_jump = nullptr;
    return scan_result::done;
}

// A string property libpci read (the last component of a link's target), or "".
std::string property(pci_dev* d, unsigned prop) {
    const char* s = pci_get_string_property(d, prop);
    return s != nullptr ? std::string(s) : std::string();
}

int to_int(std::string_view s, int otherwise) {
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && end == s.data() + s.size() ? v : otherwise;
}

// The first line of a sysfs attribute, or "" if there is none.
std::string attribute(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// The last component of a symbolic link's target, or "" if there is no such link.
std::string link_name(const std::string& path) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
    if (n <= 0 || n == static_cast<ssize_t>(sizeof target)) return {};
    const std::string_view t(target, static_cast<std::size_t>(n));
    return std::string(t.substr(t.rfind('/') + 1));
}

// current_link_speed: "16.0 GT/s PCIe" since Linux 5.9 ("16 GT/s" before), "Unknown"
// when the function has no link of its own (a VF).
std::string link_speed(std::string s) {
    if (s.empty() || s.starts_with("Unknown")) return {};
    if (s.ends_with(" PCIe")) s.resize(s.size() - 5);
    return s;
}

}  // namespace

result<std::vector<function>> discover(const std::string& sysfs_bus) {
    access_ptr acc(pci_alloc());  // libpci exits if this allocation fails: no callback of ours yet
    acc->error = on_fatal;
    acc->warning = on_quiet;
    acc->debug = on_quiet;
    std::string path = sysfs_bus;
    if (const scan_result r = scan(acc.get(), path.data()); r != scan_result::done) {
        // After a failure inside pci_init the access method may be half set up, and
        // pci_cleanup would tear down what was never built: leak the little there is.
        if (r == scan_result::failed_in_init) (void)acc.release();
        return error{EIO, fmt::format("PCI discovery (libpci) failed: {}. cxv reads the PCI bus from sysfs at {}: "
                                      "is sysfs mounted there and readable?",
                                      fatal_message, sysfs_bus)};
    }
    std::vector<function> out;
    for (pci_dev* d = acc->devices; d != nullptr; d = d->next) {
        const hw::pci_device_id* id = mlx5_id(d);
        if (id == nullptr) continue;
        function f;
        f.bdf = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", d->domain, d->bus, d->dev, d->func);
        f.vendor = d->vendor_id;
        f.device = d->device_id;
        f.name = std::string(id->name);
        f.virtual_function = id->virtual_function;
        f.driver = property(d, PCI_FILL_DRIVER);
        f.iommu_group = to_int(property(d, PCI_FILL_IOMMU_GROUP), -1);
        f.numa_node = d->numa_node;
        // libpci does not read these; sysfs has them for every PCI Express function.
        const std::string dir = sysfs_bus + "/devices/" + f.bdf;
        if (f.virtual_function) f.physfn = link_name(dir + "/physfn");
        f.link_speed = link_speed(attribute(dir + "/current_link_speed"));
        f.link_width = to_int(attribute(dir + "/current_link_width"), 0);
        out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(), [](const function& a, const function& b) { return a.bdf < b.bdf; });
    return out;
}

namespace {

result<unsigned> sriov_count(const std::string& pf, const std::string& sysfs_bus, const char* attr) {
    const std::string path = fmt::format("{}/devices/{}/{}", sysfs_bus, pf, attr);
    if (::access(path.c_str(), R_OK) != 0) {
        return error{errno == ENOENT ? ENODEV : errno,
                     fmt::format("{}: {}: {} (is it an SR-IOV PF?)", pf, path, std::strerror(errno))};
    }
    const int v = to_int(attribute(path), -1);
    if (v < 0) return error{EIO, fmt::format("{}: {} does not hold a count", pf, path)};
    return static_cast<unsigned>(v);
}

}  // namespace

result<unsigned> total_vfs(const std::string& pf, const std::string& sysfs_bus) {
    return sriov_count(pf, sysfs_bus, "sriov_totalvfs");
}

result<unsigned> num_vfs(const std::string& pf, const std::string& sysfs_bus) {
    return sriov_count(pf, sysfs_bus, "sriov_numvfs");
}

// sriov_numvfs_store (drivers/pci/iov.c) answers through write(2)'s errno: EBUSY while VFs
// are enabled and the count differs from 0, ENOENT when the PF's driver cannot enable
// VFs (vfio-pci without its enable_sriov parameter), ERANGE past sriov_totalvfs.
status set_num_vfs(const std::string& pf, unsigned n, const std::string& sysfs_bus) {
    const std::string path = fmt::format("{}/devices/{}/sriov_numvfs", sysfs_bus, pf);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return error{errno, fmt::format("{}: {}: {}", pf, path, std::strerror(errno))};
    const std::string text = fmt::format("{}\n", n);
    const ssize_t w = ::write(fd, text.data(), text.size());
    const int e = w < 0 ? errno : 0;
    if (::close(fd) != 0 && w >= 0) return error{errno, fmt::format("{}: {}: {}", pf, path, std::strerror(errno))};
    if (w >= 0) return ok_status();
    const char* why = e == ENOENT   ? " (its driver cannot enable VFs: for vfio-pci, load it with enable_sriov=1)"
                      : e == EBUSY  ? " (VFs are enabled: write 0 first)"
                      : e == ERANGE ? " (more than sriov_totalvfs)"
                                    : "";
    return error{e, fmt::format("{}: writing {} to {}: {}{}", pf, n, path, std::strerror(e), why)};
}

result<std::string> vf_address(const std::string& pf, unsigned i, const std::string& sysfs_bus) {
    const std::string link = fmt::format("{}/devices/{}/virtfn{}", sysfs_bus, pf, i);
    std::string name = link_name(link);
    if (name.empty()) return error{ENODEV, fmt::format("{}: no VF {} ({} does not exist)", pf, i, link)};
    return name;
}

}  // namespace cxv::driver::pci
