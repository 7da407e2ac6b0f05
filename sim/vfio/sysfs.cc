#include "sim/vfio/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>

#include <fmt/format.h>

namespace cxv::sim::vfio {

namespace {

constexpr unsigned kMaxLinks = 40;  // as the kernel's MAXSYMLINKS

// Components of a path, in order ("" and "." dropped; ".." kept).
std::deque<std::string> components(const std::string& path) {
    std::deque<std::string> out;
    std::size_t pos = 0;
    while (pos <= path.size()) {
        auto next = path.find('/', pos);
        if (next == std::string::npos) next = path.size();
        std::string c = path.substr(pos, next - pos);
        if (!c.empty() && c != ".") out.push_back(std::move(c));
        pos = next + 1;
    }
    return out;
}

std::string parent_of(const std::string& p) {
    const auto slash = p.rfind('/');
    return slash == 0 || slash == std::string::npos ? std::string{} : p.substr(0, slash);
}

std::string resource_text(const function_spec& f) {
    // sysfs "resource": start, end and flags of each of the 13 resources (6 BARs, ROM,
    // 6 bridge windows). BAR0 is a 64-bit prefetchable memory BAR.
    const std::uint64_t start = bar0_address(f);
    std::string out = fmt::format("0x{:016x} 0x{:016x} 0x{:016x}\n", start,
                                  start + f.model.bar0_size - 1, 0x14220c);
    for (int i = 1; i < 13; ++i) out += fmt::format("0x{:016x} 0x{:016x} 0x{:016x}\n", 0, 0, 0);
    return out;
}

}  // namespace

std::uint64_t bar0_address(const function_spec& f) {
    // A plausible address: functions 64 MiB apart, so distinct and size-aligned for
    // BAR0 sizes up to 64 MiB (the default is 32 MiB).
    return 0x38000000000ull + (std::uint64_t{f.address.bus} << 32) +
           (std::uint64_t{f.address.device * 8u + f.address.function} << 26);
}

sysfs::sysfs(const std::vector<function_spec>& functions) {
    if (functions.empty()) return;
    const node shared_dir{node_kind::directory, {}, 0, true};
    add("/sys/bus/pci/drivers/vfio-pci", shared_dir);
    add("/sys/bus/pci/drivers/mlx5_core", shared_dir);
    add("/dev/vfio", shared_dir);
    add("/dev/vfio/vfio", {node_kind::vfio_container, {}});
    // The binding attributes (pci-sysfs.c, bus.c): bind and unbind of each driver,
    // drivers_probe of the bus.
    for (const char* drv : {"vfio-pci", "mlx5_core"}) {
        for (const binding b : {binding::bind, binding::unbind}) {
            node n{node_kind::attr, drv};
            n.attr = b;
            add(fmt::format("/sys/bus/pci/drivers/{}/{}", drv, b == binding::bind ? "bind" : "unbind"), std::move(n));
        }
    }
    {
        node probe{node_kind::attr, {}};
        probe.attr = binding::drivers_probe;
        add("/sys/bus/pci/drivers_probe", std::move(probe));
    }
    // The binding shared by the processes of one `cxv-sim run` (sysfs.h).
    if (const char* v = std::getenv(kBindingVariable); v != nullptr && *v != '\0') {
        const int fd = std::atoi(v);
        char link[64] = {};
        const std::string self = fmt::format("/proc/self/fd/{}", fd);
        if (::readlink(self.c_str(), link, sizeof link - 1) > 0 &&
            std::string_view(link).starts_with(std::string("/memfd:") + kBindingName)) {
            shared_fd_ = fd;
        }
    }
    {
        struct stat st{};
        run_id_ = shared_fd_ >= 0 && ::fstat(shared_fd_, &st) == 0 ? fmt::format("{:x}", st.st_ino)
                                                                   : fmt::format("p{}", ::getpid());
    }
    local_.resize(functions.size());
    for (unsigned i = 0; i < functions.size(); ++i) {
        const function_spec& f = functions[i];
        // Every node of a VF is there only while the VF exists (present()).
        const bool is_vf = f.physfn >= 0;
        const auto put = [&](const std::string& path, node n) {
            if (is_vf) {
                n.vf = true;
                n.function = i;
            }
            add(path, std::move(n));
        };
        physfn_.push_back(f.physfn);
        vf_index_.push_back(f.vf_index);
        total_vfs_.push_back(is_vf ? 0 : f.model.sriov_totalvfs);
        first_vf_.push_back(-1);
        if (is_vf && first_vf_.at(static_cast<unsigned>(f.physfn)) < 0) {
            first_vf_[static_cast<unsigned>(f.physfn)] = static_cast<int>(i);
        }
        vfio_enable_sriov_ = f.vfio_pci_enable_sriov;
        bar_sizes_.push_back(f.model.bar0_size);
        const std::string bdf = f.address.str();
        bdfs_.push_back(bdf);
        initial_.push_back(f.kernel_driver == "vfio-pci" ? kVfio : f.kernel_driver == "mlx5_core" ? kMlx5 : kNone);
        local_[i].driver = initial_.back();
        const std::string root = fmt::format("pci{:04x}:{:02x}", f.address.domain, f.address.bus);
        const std::string dev = "/sys/devices/" + root + "/" + bdf;
        const std::string group = fmt::format("/sys/kernel/iommu_groups/{}", f.iommu_group);
        const bool eth = f.model.port == port_type::ETHERNET;
        add("/sys/devices/" + root, shared_dir);  // the bus's, shared with its PFs
        put(dev, {node_kind::directory, {}});
        const auto file = [&](const char* name, std::string text) {
            put(dev + "/" + name, {node_kind::file, std::move(text)});
        };
        file("vendor", "0x15b3\n");
        file("device", fmt::format("0x{:04x}\n", f.model.device_id));
        file("subsystem_vendor", fmt::format("0x{:04x}\n", f.model.subsystem_vendor_id));
        file("subsystem_device", fmt::format("0x{:04x}\n", f.model.subsystem_id));
        file("class", eth ? "0x020000\n" : "0x020700\n");
        file("revision", "0x00\n");
        file("numa_node", fmt::format("{}\n", f.numa_node));
        file("irq", "0\n");
        file("enable", "0\n");
        file("resource", resource_text(f));
        node config{node_kind::config, {}};
        config.function = i;
        put(dev + "/config", std::move(config));
        // A VF has no link of its own: its Link Status is reserved (PCIe Base 9.3.5), which
        // Linux shows as an unknown speed and width 0.
        file("current_link_speed", is_vf ? "Unknown\n" : "16.0 GT/s PCIe\n");
        file("current_link_width", is_vf ? "0\n" : "16\n");
        file("max_link_speed", is_vf ? "Unknown\n" : "16.0 GT/s PCIe\n");
        file("max_link_width", is_vf ? "0\n" : "16\n");
        file("modalias", fmt::format("pci:v000015B3d{:08X}sv{:08X}sd{:08X}bc02sc{:02X}i00\n",
                                     f.model.device_id, f.model.subsystem_vendor_id,
                                     f.model.subsystem_id, eth ? 0 : 7));
        node uevent{node_kind::file, fmt::format("PCI_CLASS={}\nPCI_ID=15B3:{:04X}\nPCI_SUBSYS_ID={:04X}:{:04X}\n"
                                                 "PCI_SLOT_NAME={}\n",
                                                 eth ? "20000" : "20700", f.model.device_id,
                                                 f.model.subsystem_vendor_id, f.model.subsystem_id, bdf)};
        uevent.function = i;
        uevent.uevent = true;
        put(dev + "/uevent", std::move(uevent));
        node override{node_kind::attr, {}};
        override.function = i;
        override.attr = binding::driver_override;
        put(dev + "/driver_override", std::move(override));
        put(dev + "/iommu_group",
            {node_kind::symlink, fmt::format("../../../kernel/iommu_groups/{}", f.iommu_group)});
        node driver{node_kind::symlink, {}};
        driver.function = i;
        driver.when = shown::on_driver;
        driver.driver_link = true;
        put(dev + "/driver", std::move(driver));
        put(dev + "/subsystem", {node_kind::symlink, "../../../bus/pci"});
        put("/sys/bus/pci/devices/" + bdf, {node_kind::symlink, "../../../devices/" + root + "/" + bdf});
        for (const auto& [drv, when] : {std::pair{"vfio-pci", shown::on_vfio}, std::pair{"mlx5_core", shown::on_mlx5}}) {
            node link{node_kind::symlink, "../../../../devices/" + root + "/" + bdf};
            link.function = i;
            link.when = when;
            put(fmt::format("/sys/bus/pci/drivers/{}/{}", drv, bdf), std::move(link));
        }
        // mlx5_core's netdev, named as udev names a ConnectX port (enp<bus>s<slot>f<fn>np0).
        const std::string net = fmt::format("{}/net/enp{}s{}f{}np0", dev, f.address.bus, f.address.device,
                                            f.address.function);
        for (const auto& [path, text] : {std::pair{dev + "/net", std::string()}, std::pair{net, std::string()},
                                         std::pair{net + "/operstate", std::string(f.netdev_up ? "up\n" : "down\n")},
                                         std::pair{net + "/address",
                                                   fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\n",
                                                               f.model.mac[0], f.model.mac[1], f.model.mac[2],
                                                               f.model.mac[3], f.model.mac[4], f.model.mac[5])}}) {
            node n{text.empty() ? node_kind::directory : node_kind::file, text};
            n.function = i;
            n.when = shown::on_mlx5;
            put(path, std::move(n));
        }
        put(group, {node_kind::directory, {}});
        put(group + "/devices", {node_kind::directory, {}});
        put(group + "/devices/" + bdf, {node_kind::symlink, "../../../../devices/" + root + "/" + bdf});
        put(group + "/type", {node_kind::file, "DMA\n"});
        node wc{node_kind::bar_wc, {}};
        wc.function = i;
        put(dev + "/resource0_wc", std::move(wc));
        node ctl{node_kind::control, {}};
        ctl.function = i;
        put(dev + "/cxv_sim_control", std::move(ctl));
        node g{node_kind::vfio_group, {}};
        g.function = i;
        g.when = shown::on_vfio;
        put(fmt::format("/dev/vfio/{}", f.iommu_group), std::move(g));
    }
    // SR-IOV (drivers/pci/iov.c): a PF's attributes and virtfn<N> links, a VF's physfn.
    add("/sys/module/vfio_pci", shared_dir);
    add("/sys/module/vfio_pci/parameters", shared_dir);
    add("/sys/module/vfio_pci/parameters/enable_sriov", {node_kind::file, vfio_enable_sriov_ ? "Y\n" : "N\n"});
    for (unsigned i = 0; i < functions.size(); ++i) {
        const function_spec& f = functions[i];
        const std::string dev = fmt::format("/sys/devices/pci{:04x}:{:02x}/{}", f.address.domain, f.address.bus,
                                            f.address.str());
        if (f.physfn >= 0) {
            node up{node_kind::symlink, "../" + functions.at(static_cast<unsigned>(f.physfn)).address.str()};
            up.vf = true;
            up.function = i;
            add(dev + "/physfn", std::move(up));
            node down{node_kind::symlink, "../" + f.address.str()};
            down.vf = true;
            down.function = i;
            add(fmt::format("/sys/devices/pci{:04x}:{:02x}/{}/virtfn{}", f.address.domain, f.address.bus,
                            functions.at(static_cast<unsigned>(f.physfn)).address.str(), f.vf_index),
                std::move(down));
            continue;
        }
        if (f.model.sriov_totalvfs == 0) continue;
        add(dev + "/sriov_totalvfs", {node_kind::file, fmt::format("{}\n", f.model.sriov_totalvfs)});
        add(dev + "/sriov_offset", {node_kind::file, fmt::format("{}\n", f.model.sriov_vf_offset)});
        add(dev + "/sriov_stride", {node_kind::file, fmt::format("{}\n", f.model.sriov_vf_stride)});
        add(dev + "/sriov_vf_device", {node_kind::file, fmt::format("{:x}\n", f.model.sriov_vf_device_id)});
        for (const binding b : {binding::sriov_numvfs, binding::sriov_autoprobe}) {
            node n{node_kind::attr, {}};
            n.function = i;
            n.attr = b;
            add(dev + (b == binding::sriov_numvfs ? "/sriov_numvfs" : "/sriov_drivers_autoprobe"), std::move(n));
        }
    }
}

const char* sysfs::driver_name(std::uint8_t d) noexcept {
    return d == kVfio ? "vfio-pci" : d == kMlx5 ? "mlx5_core" : "";
}

sysfs::binding_state sysfs::load(unsigned function) const {
    if (shared_fd_ < 0) {
        std::lock_guard lock(state_mu_);
        return local_[function];
    }
    char slot[kSlotBytes] = {};
    const auto got = ::syscall(SYS_pread64, shared_fd_, slot, kSlotBytes, function * kSlotBytes);
    binding_state s;
    s.driver = initial_[function];
    if (got != static_cast<long>(kSlotBytes) || slot[0] == 0) return s;  // not written yet
    s.driver = static_cast<std::uint8_t>(slot[0]);
    slot[1 + kOverrideMax] = '\0';
    s.override = std::string(slot + 1);
    std::memcpy(s.token.data(), slot + kTokenAt, s.token.size());
    s.num_vfs = static_cast<std::uint8_t>(slot[kNumVfsAt]);
    s.autoprobe = (slot[kFlagsAt] & 1) == 0;
    return s;
}

void sysfs::store(unsigned function, const binding_state& s) {
    if (shared_fd_ < 0) {
        std::lock_guard lock(state_mu_);
        local_[function] = s;
        return;
    }
    char slot[kSlotBytes] = {};
    slot[0] = static_cast<char>(s.driver);
    std::memcpy(slot + 1, s.override.data(), std::min(s.override.size(), kOverrideMax));
    std::memcpy(slot + kTokenAt, s.token.data(), s.token.size());
    slot[kNumVfsAt] = static_cast<char>(s.num_vfs);
    slot[kFlagsAt] = s.autoprobe ? 0 : 1;
    (void)::syscall(SYS_pwrite64, shared_fd_, slot, kSlotBytes, function * kSlotBytes);
}

// A group's hold: a write lock of one byte (past the slots) of the binding file, taken
// through an open file description of this process's own (open(2) of /proc/self/fd/N,
// not the inherited descriptor, whose locks every process of the run would share). Such
// a lock goes when its description closes, so a process that ends holding a group lets
// go of it as the kernel's release of /dev/vfio/N does; a child that fork(2) made
// shares its parent's, as it shares the parent's open group.
bool sysfs::hold_group(unsigned function) {
    if (shared_fd_ < 0) return true;
    std::lock_guard lock(state_mu_);
    if (hold_fd_ < 0) {
        const std::string self = fmt::format("/proc/self/fd/{}", shared_fd_);
        hold_fd_ = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, self.c_str(), O_RDWR | O_CLOEXEC));
        if (hold_fd_ < 0) return true;  // no way to tell: as without a shared file
    }
    struct flock l{};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = static_cast<off_t>(kHoldBase + function);
    l.l_len = 1;
    return ::syscall(SYS_fcntl, hold_fd_, F_OFD_SETLK, &l) == 0;
}

void sysfs::release_group(unsigned function) {
    std::lock_guard lock(state_mu_);
    if (hold_fd_ < 0) return;
    struct flock l{};
    l.l_type = F_UNLCK;
    l.l_whence = SEEK_SET;
    l.l_start = static_cast<off_t>(kHoldBase + function);
    l.l_len = 1;
    (void)::syscall(SYS_fcntl, hold_fd_, F_OFD_SETLK, &l);
}

bool sysfs::present(const node& n) const {
    if (n.vf && !exists(n.function)) return false;
    if (n.when == shown::always) return true;
    const std::uint8_t b = load(n.function).driver;
    return n.when == shown::on_driver ? b != kNone : n.when == shown::on_vfio ? b == kVfio : b == kMlx5;
}

bool sysfs::present(const std::string& path) const {
    auto it = nodes_.find(path);
    return it == nodes_.end() || present(it->second);
}

std::string sysfs::link_text(const node& n) const {
    if (!n.driver_link) return n.text;
    return std::string("../../../bus/pci/drivers/") + driver_name(load(n.function).driver);
}

std::string sysfs::file_text(const node& n) const {
    if (n.kind == node_kind::attr && n.attr == binding::driver_override) {
        const std::string over = load(n.function).override;
        return over.empty() ? "(null)\n" : over + "\n";
    }
    if (n.kind == node_kind::attr && n.attr == binding::sriov_numvfs) return fmt::format("{}\n", num_vfs(n.function));
    if (n.kind == node_kind::attr && n.attr == binding::sriov_autoprobe) {
        return load(n.function).autoprobe ? "1\n" : "0\n";
    }
    if (!n.uevent) return n.text;
    const std::uint8_t b = load(n.function).driver;
    return b == kNone ? n.text : std::string("DRIVER=") + driver_name(b) + "\n" + n.text;
}

int sysfs::function_of(std::string_view bdf) const {
    for (std::size_t i = 0; i < bdfs_.size(); ++i) {
        if (bdfs_[i] == bdf) return static_cast<int>(i);
    }
    return -1;
}

long sysfs::write_attr(const node& n, std::string_view text, const std::function<bool(unsigned)>& group_open) {
    const long taken = static_cast<long>(text.size());
    std::string_view v = text;
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);  // one newline, as sysfs_streq
    if (n.attr == binding::sriov_numvfs) return write_num_vfs(n.function, v, group_open);
    if (n.attr == binding::sriov_autoprobe) {
        // kstrtobool: 1/0, y/n, on/off.
        binding_state s = load(n.function);
        if (v == "1" || v == "y" || v == "Y" || v == "on") {
            s.autoprobe = true;
        } else if (v == "0" || v == "n" || v == "N" || v == "off") {
            s.autoprobe = false;
        } else {
            return -EINVAL;
        }
        store(n.function, s);
        return taken;
    }
    if (n.attr == binding::driver_override) {
        if (v.size() > kOverrideMax) return -EINVAL;  // Linux takes up to a page; driver names are short
        binding_state s = load(n.function);
        s.override = std::string(v);
        store(n.function, s);
        return taken;
    }
    const int i = function_of(v);
    if (i < 0 || !exists(static_cast<unsigned>(i))) return -ENODEV;  // bus_find_device_by_name
    const auto fn = static_cast<unsigned>(i);
    binding_state s = load(fn);
    const std::string& over = s.override;
    // Which driver a probe gives the function: the override's alone when one is set;
    // otherwise mlx5_core, whose ID table has it (vfio-pci has no IDs until new_id).
    const auto matches = [&](const std::string& drv) { return over.empty() ? drv == "mlx5_core" : drv == over; };
    const auto code = [](const std::string& drv) { return drv == "vfio-pci" ? kVfio : kMlx5; };
    switch (n.attr) {
    case binding::drivers_probe:
        if (s.driver != kNone) return taken;  // already bound: nothing to do
        for (const char* drv : {"vfio-pci", "mlx5_core"}) {
            if (matches(drv)) s.driver = code(drv);
        }
        store(fn, s);
        return taken;
    case binding::bind:
        if (s.driver != kNone) return -EBUSY;  // driver_attach: already has a driver
        if (!matches(n.text)) return -ENODEV;
        s.driver = code(n.text);
        store(fn, s);
        return taken;
    case binding::unbind:
        if (s.driver != code(n.text)) return -ENODEV;  // not this driver's
        if (n.text == "vfio-pci" && group_open(fn)) return -EBUSY;
        s.driver = kNone;
        store(fn, s);
        return taken;
    case binding::driver_override:
    case binding::sriov_numvfs:
    case binding::sriov_autoprobe: break;
    }
    return -EINVAL;
}

unsigned sysfs::num_vfs(unsigned pf) const { return physfn_.at(pf) >= 0 ? 0 : load(pf).num_vfs; }

bool sysfs::exists(unsigned function) const {
    const int pf = physfn_.at(function);
    return pf < 0 || num_vfs(static_cast<unsigned>(pf)) > vf_index_.at(function);
}

std::array<std::uint8_t, 16> sysfs::vf_token(unsigned pf) const { return load(pf).token; }

void sysfs::set_vf_token(unsigned pf, const std::array<std::uint8_t, 16>& uuid) {
    binding_state s = load(pf);
    s.token = uuid;
    store(pf, s);
}

// sriov_numvfs_store (drivers/pci/iov.c), with the PF driver's sriov_configure: mlx5_core
// takes any count; vfio-pci only with enable_sriov (else ENOENT), and captures its VFs'
// driver_override (vfio_pci_bus_notifier).
long sysfs::write_num_vfs(unsigned pf, std::string_view v, const std::function<bool(unsigned)>& group_open) {
    const long taken = static_cast<long>(v.size());
    std::string text(v);
    char* end = nullptr;
    errno = 0;
    const unsigned long n = std::strtoul(text.c_str(), &end, 0);  // kstrtou16(buf, 0)
    if (text.empty() || *end != '\0' || errno != 0 || n > 0xffff || text[0] == '-' || text[0] == ' ') return -EINVAL;
    if (n > total_vfs_.at(pf)) return -ERANGE;
    binding_state s = load(pf);
    if (n == s.num_vfs) return taken;
    if (s.driver == kNone) return -ENOENT;  // no driver bound: cannot configure SR-IOV
    if (s.driver == kVfio && !vfio_enable_sriov_) return -ENOENT;
    if (n != 0 && s.num_vfs != 0) return -EBUSY;  // "%d VFs already enabled. Disable before enabling %d VFs"
    const int first = first_vf_.at(pf);
    if (n == 0) {
        // pci_disable_sriov: the VFs go. (Linux waits while a VF's user holds it.)
        for (unsigned k = 0; k < s.num_vfs; ++k) {
            if (group_open(static_cast<unsigned>(first) + k)) return -EBUSY;
        }
        for (unsigned k = 0; k < s.num_vfs; ++k) store(static_cast<unsigned>(first) + k, binding_state{});
        s.num_vfs = 0;
        store(pf, s);
        return taken;
    }
    // pci_enable_sriov: the VFs appear; each is probed when sriov_drivers_autoprobe is
    // set, by its override's driver (vfio-pci's VFs) or by ID (mlx5_core).
    for (unsigned k = 0; k < n; ++k) {
        binding_state vf;
        if (s.driver == kVfio) vf.override = "vfio-pci";
        if (s.autoprobe) vf.driver = s.driver == kVfio ? kVfio : kMlx5;
        store(static_cast<unsigned>(first) + k, vf);
    }
    s.num_vfs = static_cast<std::uint8_t>(n);
    store(pf, s);
    return taken;
}

int sysfs::vf_function(unsigned pf, unsigned n) const {
    const int first = first_vf_.at(pf);
    if (first < 0 || n == 0 || n > total_vfs_.at(pf)) return -1;
    return first + static_cast<int>(n) - 1;
}

// In the binding file: byte 0 set, byte 1 the admin state, bytes 2-7 the MAC, then the
// node GUID (8 bytes, host order: every process of a run is this host).
std::optional<vport_record> sysfs::vport(unsigned function) const {
    if (shared_fd_ < 0) {
        std::lock_guard lock(state_mu_);
        const auto it = local_vports_.find(function);
        if (it == local_vports_.end()) return std::nullopt;
        return it->second;
    }
    unsigned char b[kVportBytes] = {};
    const auto got = ::syscall(SYS_pread64, shared_fd_, b, kVportBytes, kVportBase + function * kVportBytes);
    if (got != static_cast<long>(kVportBytes) || b[0] == 0) return std::nullopt;
    vport_record r;
    r.admin = static_cast<hw::vport_admin_state>(b[1]);
    std::memcpy(r.mac.data(), b + 2, r.mac.size());
    std::memcpy(&r.node_guid, b + 8, 8);
    return r;
}

void sysfs::set_vport(unsigned function, const vport_record& r) {
    if (shared_fd_ < 0) {
        std::lock_guard lock(state_mu_);
        local_vports_[function] = r;
        return;
    }
    unsigned char b[kVportBytes] = {};
    b[0] = 1;
    b[1] = static_cast<unsigned char>(r.admin);
    std::memcpy(b + 2, r.mac.data(), r.mac.size());
    std::memcpy(b + 8, &r.node_guid, 8);
    (void)::syscall(SYS_pwrite64, shared_fd_, b, kVportBytes, kVportBase + function * kVportBytes);
}

void sysfs::clear_vports(unsigned pf) {
    for (unsigned n = 1; n <= total_vfs_.at(pf); ++n) {
        const int f = vf_function(pf, n);
        if (f < 0) continue;
        if (shared_fd_ < 0) {
            std::lock_guard lock(state_mu_);
            local_vports_.erase(static_cast<unsigned>(f));
            continue;
        }
        const unsigned char zero[kVportBytes] = {};
        (void)::syscall(SYS_pwrite64, shared_fd_, zero, kVportBytes, kVportBase + static_cast<unsigned>(f) * kVportBytes);
    }
}

void sysfs::add(const std::string& path, node n) {
    if (nodes_.contains(path)) return;  // a directory shared by several functions
    n.inode = 0x5c000000u + nodes_.size();
    static constexpr unsigned char types[] = {DT_DIR, DT_REG, DT_LNK, DT_CHR, DT_CHR, DT_REG, DT_REG, DT_REG, DT_REG};
    const auto slash = path.rfind('/');
    auto& list = entries_[slash == 0 ? std::string{} : path.substr(0, slash)];
    const std::string name = path.substr(slash + 1);
    if (std::none_of(list.begin(), list.end(), [&](const dir_entry& e) { return e.name == name; })) {
        list.push_back({name, types[static_cast<int>(n.kind)]});
    }
    nodes_.insert_or_assign(path, std::move(n));
}

const std::vector<dir_entry>* sysfs::entries(const std::string& dir) const {
    auto it = entries_.find(dir);
    return it == entries_.end() ? nullptr : &it->second;
}

bool sysfs::candidate(const char* path) noexcept {
    return path != nullptr && path[0] == '/' &&
           (std::strncmp(path, "/sys/", 5) == 0 || std::strncmp(path, "/dev/", 5) == 0 ||
            (path[1] == '/'));  // "//sys/..." is the same path
}

lookup sysfs::resolve(const char* path, bool follow) const {
    if (nodes_.empty() || path == nullptr || path[0] != '/') return {};
    // A trailing slash means the path names a directory: a final link is followed.
    if (path[std::strlen(path) - 1] == '/') follow = true;
    std::deque<std::string> rest = components(path);
    std::string cur;  // resolved so far, "" is "/"
    const node* at = nullptr;
    bool touched = false;  // followed one of our links
    unsigned links = 0;
    while (!rest.empty()) {
        std::string c = std::move(rest.front());
        rest.pop_front();
        if (c == "..") {
            cur = parent_of(cur);
            auto it = nodes_.find(cur);
            at = it == nodes_.end() ? nullptr : &it->second;
            continue;
        }
        if (at != nullptr && at->kind != node_kind::directory) {
            return {lookup::error, nullptr, {}, ENOTDIR};
        }
        const std::string next = cur + "/" + c;
        auto it = nodes_.find(next);
        if (it == nodes_.end() || !present(it->second)) {
            // Below one of our own directories nothing else exists; elsewhere the host
            // decides.
            if (at != nullptr && !at->shared) return {lookup::error, nullptr, {}, ENOENT};
            cur = next;
            at = nullptr;
            continue;
        }
        const node& n = it->second;
        if (n.kind == node_kind::symlink && (!rest.empty() || follow)) {
            touched = true;
            if (++links > kMaxLinks) return {lookup::error, nullptr, {}, ELOOP};
            const std::string text = link_text(n);
            auto target = components(text);
            rest.insert(rest.begin(), target.begin(), target.end());
            if (!text.empty() && text[0] == '/') cur.clear();
            auto p = nodes_.find(cur);
            at = p == nodes_.end() ? nullptr : &p->second;
            continue;
        }
        cur = next;
        at = &n;
    }
    if (at != nullptr) return {lookup::found, at, cur, 0};
    if (touched) return {lookup::redirect, nullptr, cur.empty() ? "/" : cur, 0};
    return {lookup::not_ours, nullptr, cur, 0};
}

void sysfs::fill_stat(const node& n, struct stat& st) const {
    std::memset(&st, 0, sizeof st);
    st.st_ino = n.inode;
    st.st_nlink = 1;
    st.st_blksize = 4096;
    st.st_dev = makedev(0, 22);  // sysfs, unless the node is in devtmpfs
    switch (n.kind) {
    case node_kind::directory:
        st.st_mode = S_IFDIR | 0755;
        st.st_nlink = 2;
        break;
    case node_kind::file:
        st.st_mode = S_IFREG | 0444;
        st.st_size = 4096;  // sysfs reports a page for every attribute
        break;
    case node_kind::symlink:
        st.st_mode = S_IFLNK | 0777;
        st.st_size = static_cast<off_t>(link_text(n).size());
        break;
    case node_kind::attr:
        // pci-sysfs.c: driver_override 0644; bind, unbind, drivers_probe 0200; iov.c:
        // sriov_numvfs 0664, sriov_drivers_autoprobe 0644.
        st.st_mode = S_IFREG | (n.attr == binding::driver_override || n.attr == binding::sriov_autoprobe ? 0644
                                : n.attr == binding::sriov_numvfs                                        ? 0664
                                                                                                         : 0200);
        st.st_size = 4096;
        break;
    case node_kind::vfio_container:
        st.st_dev = makedev(0, 5);  // devtmpfs
        st.st_mode = S_IFCHR | 0666;
        st.st_rdev = makedev(10, 196);  // misc device VFIO_MINOR
        break;
    case node_kind::config:
        // pci-sysfs.c: mode 0644, the size of PCI Express config space (only a process
        // with CAP_SYS_ADMIN may read past the first 64 bytes, though).
        st.st_mode = S_IFREG | 0644;
        st.st_size = 4096;
        break;
    case node_kind::control:
        st.st_mode = S_IFREG | 0200;
        st.st_size = 4096;
        break;
    case node_kind::bar_wc:
        // pci-sysfs.c: resource<N>_wc, mode 0600, the BAR's size.
        st.st_mode = S_IFREG | 0600;
        st.st_size = static_cast<off_t>(bar_sizes_.at(n.function));
        break;
    case node_kind::vfio_group:
        st.st_dev = makedev(0, 5);
        st.st_mode = S_IFCHR | 0600;
        st.st_rdev = makedev(243, n.function);
        break;
    }
}

}  // namespace cxv::sim::vfio
