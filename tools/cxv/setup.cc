#include "tools/cxv/setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/unique_fd.h"
#include "driver/pci/pci.h"
#include "hw/pci_ids.h"
#include "tools/cxv/holders.h"

namespace cxv::tool {

namespace {

bool exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// Writes `text` to a sysfs attribute: "" when it took, else what went wrong.
std::string write_attr(const std::string& path, const std::string& text) {
    const unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return fmt::format("{}: {}", path, std::strerror(errno));
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    const int e = errno;
    if (n != static_cast<ssize_t>(text.size())) return fmt::format("writing '{}' to {}: {}", text, path, std::strerror(e));
    return {};
}

// A function as sysfs describes it.
struct state {
    std::string bdf, dir;
    bool present = false;
    unsigned vendor = 0, device = 0;
    const hw::pci_device_id* mlx5 = nullptr;
    std::string driver, group;
    std::vector<std::string> netdevs, netdevs_up;
};

state read_state(const std::string& sysfs, const std::string& bdf) {
    state s;
    s.bdf = bdf;
    s.dir = sysfs + "/bus/pci/devices/" + bdf;
    s.present = exists(s.dir);
    if (!s.present) return s;
    s.vendor = static_cast<unsigned>(std::strtoul(read_text(s.dir + "/vendor").c_str(), nullptr, 16));
    s.device = static_cast<unsigned>(std::strtoul(read_text(s.dir + "/device").c_str(), nullptr, 16));
    if (s.vendor == hw::mellanox_vendor_id) s.mlx5 = hw::find_mlx5_device(static_cast<std::uint16_t>(s.device));
    s.driver = link_base(s.dir + "/driver");
    s.group = link_base(s.dir + "/iommu_group");
    for (const auto& n : entries(s.dir + "/net")) {
        s.netdevs.push_back(n);
        if (read_text(s.dir + "/net/" + n + "/operstate") == "up") s.netdevs_up.push_back(n);
    }
    return s;
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

// Runs /sbin/modprobe MODULE; true when it exited 0.
bool modprobe(const char* module) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const char* argv[] = {"modprobe", module, nullptr};
        ::execv("/sbin/modprobe", const_cast<char* const*>(argv));
        ::_exit(127);
    }
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string describe(const state& s) {
    return fmt::format("{} ({:04x}:{:04x}{})", s.mlx5 != nullptr ? s.mlx5->name : "not a ConnectX", s.vendor,
                       s.device, s.mlx5 != nullptr && s.mlx5->virtual_function ? ", VF" : "");
}

// --- status --------------------------------------------------------------------------------

bool print_function(const setup_request& r, const state& s) {
    if (!s.present) {
        fmt::print("{}: no such PCI function ({} does not exist)\n", s.bdf, s.dir);
        return false;
    }
    fmt::print("{}  {}\n", s.bdf, describe(s));
    std::vector<std::string> todo;
    if (s.mlx5 == nullptr) todo.push_back("cxv drives ConnectX (mlx5) functions only (cxv devices lists them)");
    fmt::print("  driver:      {}\n", s.driver.empty() ? "none" : s.driver);
    if (s.driver != "vfio-pci") todo.push_back("bind it to vfio-pci: cxv setup --bind " + s.bdf);
    if (s.group.empty()) {
        fmt::print("  IOMMU group: none\n");
        todo.push_back("turn the IOMMU on: intel_iommu=on (Intel) or amd_iommu=on (AMD) on the kernel command line, "
                       "and VT-d/AMD-Vi in the firmware setup");
    } else {
        std::vector<std::string> members;
        std::vector<std::string> blocking;
        for (const auto& m : entries(r.sysfs + "/kernel/iommu_groups/" + s.group + "/devices")) {
            const std::string drv = link_base(r.sysfs + "/bus/pci/devices/" + m + "/driver");
            members.push_back(m + (drv.empty() ? "" : " (" + drv + ")"));
            if (m != s.bdf && !drv.empty() && drv != "vfio-pci") blocking.push_back(m + " (" + drv + ")");
        }
        fmt::print("  IOMMU group: {}: {}\n", s.group, join(members));
        if (!blocking.empty()) {
            todo.push_back("VFIO opens group " + s.group + " only when each member is on vfio-pci or on no driver: " +
                           join(blocking) + " (cxv setup --bind them, or move the card to a slot of its own group)");
        }
        const std::string node = "/dev/vfio/" + s.group;
        if (s.driver == "vfio-pci") {
            if (!exists(node)) {
                todo.push_back(node + " is missing (udev has not made it yet?)");
            } else if (::access(node.c_str(), R_OK | W_OK) != 0) {
                fmt::print("  {}: not open to this user ({})\n", node, std::strerror(errno));
                todo.push_back("give this user " + node + " (chown, or a udev rule: docs/hardware.md)");
            } else {
                const auto held = group_holders(s.group);
                fmt::print("  {}: {}\n", node, held.empty() ? "free" : "held by " + join(held));
            }
        }
    }
    fmt::print("  netdevs:     {}\n", s.netdevs.empty() ? "none" : join(s.netdevs) + (s.netdevs_up.empty() ? "" : ", up: " + join(s.netdevs_up)));
    // SR-IOV (drivers/pci/iov.c): a PF's VFs, or a VF's PF.
    if (const std::string total = read_text(s.dir + "/sriov_totalvfs"); !total.empty() && total != "0") {
        std::vector<std::string> vfs;
        for (const auto& e : entries(s.dir)) {
            if (e.rfind("virtfn", 0) == 0) vfs.push_back(link_base(s.dir + "/" + e));
        }
        std::sort(vfs.begin(), vfs.end());
        fmt::print("  SR-IOV:      {} of {} VFs{}{}\n", read_text(s.dir + "/sriov_numvfs"), total,
                   vfs.empty() ? "" : ": ", join(vfs));
        if (vfs.empty() && s.driver == "vfio-pci" && read_text(r.sysfs + "/module/vfio_pci/parameters/enable_sriov") != "Y") {
            fmt::print("               (VFs of a vfio-pci PF need vfio-pci's enable_sriov=1)\n");
        }
    } else if (const std::string pf = link_base(s.dir + "/physfn"); !pf.empty()) {
        fmt::print("  SR-IOV:      a VF of {}\n", pf);
    }
    fmt::print("  cxv:         {}\n", todo.empty() ? "ready" : todo.front());
    for (std::size_t i = 1; i < todo.size(); ++i) fmt::print("               {}\n", todo[i]);
    return todo.empty();
}

void print_machine(const setup_request& r) {
    fmt::print("machine:\n");
    const auto groups = entries(r.sysfs + "/kernel/iommu_groups");
    fmt::print("  IOMMU:       {}\n", groups.empty() ? "off (no IOMMU groups): intel_iommu=on / amd_iommu=on"
                                                     : fmt::format("on ({} groups)", groups.size()));
    fmt::print("  vfio-pci:    {}\n", exists(r.sysfs + "/bus/pci/drivers/vfio-pci") ? "loaded" : "not loaded (modprobe vfio-pci)");
    rlimit lim{};
    ::getrlimit(RLIMIT_MEMLOCK, &lim);
    const auto show = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", v / 1024); };
    std::string memlock = fmt::format("{} (hard {})", show(lim.rlim_cur), show(lim.rlim_max));
    if (::geteuid() == 0) {
        memlock += ", root: not limited";
    } else if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < (rlim_t{1} << 30)) {
        memlock += ": every registered buffer and queue is pinned; raise it (limits.d: memlock unlimited)";
    }
    fmt::print("  memlock:     {}\n", memlock);
    std::ifstream meminfo("/proc/meminfo");
    std::string total = "0", free = "0", size = "?";
    for (std::string line; std::getline(meminfo, line);) {
        const auto value = [&] {
            std::string v = line.substr(line.find(':') + 1);
            v.erase(0, v.find_first_not_of(' '));
            return v;
        };
        if (line.rfind("HugePages_Total:", 0) == 0) total = value();
        if (line.rfind("HugePages_Free:", 0) == 0) free = value();
        if (line.rfind("Hugepagesize:", 0) == 0) size = value();
    }
    fmt::print("  hugepages:   {} of {} free ({} each){}\n", free, total, size,
               total == "0" ? "; optional (queues and buffers may use them): sysctl vm.nr_hugepages=N" : "");
}

int status(const setup_request& r) {
    std::vector<std::string> bdfs = r.bdfs;
    if (bdfs.empty()) {
        auto found = driver::pci::discover(r.sysfs + "/bus/pci");
        if (!found) {
            fmt::print(stderr, "cxv setup: {}\n", found.error().message);
            return EXIT_FAILURE;
        }
        for (const auto& f : *found) bdfs.push_back(f.bdf);
        if (bdfs.empty()) fmt::print("no mlx5 functions found (lspci -d 15b3: shows what the bus has)\n");
    }
    bool ready = true;
    for (const auto& b : bdfs) ready &= print_function(r, read_state(r.sysfs, b));
    print_machine(r);
    return ready ? EXIT_SUCCESS : EXIT_FAILURE;
}

// --- bind and unbind -----------------------------------------------------------------------

// The checks both directions share: the function exists and is a ConnectX.
bool refuse(const state& s) {
    if (!s.present) {
        fmt::print(stderr, "cxv setup: {}: no such PCI function ({} does not exist)\n", s.bdf, s.dir);
        return true;
    }
    if (s.mlx5 == nullptr) {
        fmt::print(stderr, "cxv setup: {}: not a ConnectX ({:04x}:{:04x}); cxv binds mlx5 functions only\n", s.bdf,
                   s.vendor, s.device);
        return true;
    }
    return false;
}

int bind_one(const setup_request& r, const std::string& bdf) {
    const state s = read_state(r.sysfs, bdf);
    if (refuse(s)) return EXIT_FAILURE;
    if (s.driver == "vfio-pci") {
        fmt::print("{}: already on vfio-pci (IOMMU group {})\n", bdf, s.group);
        return EXIT_SUCCESS;
    }
    if (s.group.empty()) {
        fmt::print(stderr, "cxv setup: {}: no IOMMU group, so vfio-pci cannot serve it: turn the IOMMU on "
                           "(intel_iommu=on or amd_iommu=on on the kernel command line)\n", bdf);
        return EXIT_FAILURE;
    }
    if (!s.netdevs_up.empty() && !r.force) {
        fmt::print(stderr, "cxv setup: {}: {} is up; binding to vfio-pci takes it and the kernel's RDMA device away "
                           "from {}. Bring it down (ip link set DEV down) or give --force\n", bdf,
                   join(s.netdevs_up), s.driver);
        return EXIT_FAILURE;
    }
    if (!exists(r.sysfs + "/bus/pci/drivers/vfio-pci") && (!modprobe("vfio-pci") || !exists(r.sysfs + "/bus/pci/drivers/vfio-pci"))) {
        fmt::print(stderr, "cxv setup: vfio-pci is not loaded and modprobe vfio-pci failed\n");
        return EXIT_FAILURE;
    }
    // driver_override: vfio-pci and no other driver takes it at the next probe (a reload
    // of mlx5_core included), until --unbind clears it.
    std::string err = write_attr(s.dir + "/driver_override", "vfio-pci");
    if (err.empty() && !s.driver.empty()) err = write_attr(s.dir + "/driver/unbind", bdf);
    if (err.empty()) err = write_attr(r.sysfs + "/bus/pci/drivers_probe", bdf);
    if (!err.empty()) {
        fmt::print(stderr, "cxv setup: {}: {}\n", bdf, err);
        return EXIT_FAILURE;
    }
    const state now = read_state(r.sysfs, bdf);
    if (now.driver != "vfio-pci") {
        fmt::print(stderr, "cxv setup: {}: still on {} after the probe (dmesg says why)\n", bdf,
                   now.driver.empty() ? "no driver" : now.driver);
        return EXIT_FAILURE;
    }
    fmt::print("{}: {} -> vfio-pci (IOMMU group {}, /dev/vfio/{})\n", bdf, s.driver.empty() ? "no driver" : s.driver,
               now.group, now.group);
    return EXIT_SUCCESS;
}

int unbind_one(const setup_request& r, const std::string& bdf) {
    const state s = read_state(r.sysfs, bdf);
    if (refuse(s)) return EXIT_FAILURE;
    if (s.driver != "vfio-pci") {
        fmt::print("{}: not on vfio-pci ({})\n", bdf, s.driver.empty() ? "no driver" : s.driver);
        return EXIT_SUCCESS;
    }
    // vfio-pci's remove waits for the last user of the device: a held function would
    // hang the unbind (and this tool) until its holder lets go.
    if (const auto held = group_holders(s.group); !held.empty() && !r.force) {
        fmt::print(stderr, "cxv setup: {}: /dev/vfio/{} is held by {}; stop it first (or --force, and the unbind "
                           "waits for it)\n", bdf, s.group, join(held));
        return EXIT_FAILURE;
    }
    std::string err = write_attr(s.dir + "/driver_override", "\n");
    if (err.empty()) err = write_attr(s.dir + "/driver/unbind", bdf);
    if (err.empty()) err = write_attr(r.sysfs + "/bus/pci/drivers_probe", bdf);
    if (!err.empty()) {
        fmt::print(stderr, "cxv setup: {}: {}\n", bdf, err);
        return EXIT_FAILURE;
    }
    const state now = read_state(r.sysfs, bdf);
    fmt::print("{}: vfio-pci -> {}\n", bdf,
               now.driver.empty() ? "no driver (modprobe mlx5_core, then: echo BDF > /sys/bus/pci/drivers_probe)"
                                  : now.driver + (now.netdevs.empty() ? "" : ", netdev " + join(now.netdevs)));
    return EXIT_SUCCESS;
}

}  // namespace

int run_setup(const setup_request& r) {
    if (r.action == setup_action::status) return status(r);
    if (r.bdfs.empty()) {
        fmt::print(stderr, "cxv setup: which functions? (cxv setup --status lists them)\n");
        return 2;
    }
    int rc = EXIT_SUCCESS;
    for (const auto& b : r.bdfs) {
        if ((r.action == setup_action::bind ? bind_one(r, b) : unbind_one(r, b)) != EXIT_SUCCESS) rc = EXIT_FAILURE;
    }
    return rc;
}

}  // namespace cxv::tool
