#include "sim/vfio/sysfs.h"

#include <dirent.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
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
    add("/dev/vfio", shared_dir);
    add("/dev/vfio/vfio", {node_kind::vfio_container, {}});
    for (unsigned i = 0; i < functions.size(); ++i) {
        const function_spec& f = functions[i];
        bar_sizes_.push_back(f.model.bar0_size);
        const std::string bdf = f.address.str();
        const std::string root = fmt::format("pci{:04x}:{:02x}", f.address.domain, f.address.bus);
        const std::string dev = "/sys/devices/" + root + "/" + bdf;
        const std::string group = fmt::format("/sys/kernel/iommu_groups/{}", f.iommu_group);
        const bool eth = f.model.port == port_type::ethernet;
        add("/sys/devices/" + root, shared_dir);
        add(dev, {node_kind::directory, {}});
        const auto file = [&](const char* name, std::string text) {
            add(dev + "/" + name, {node_kind::file, std::move(text)});
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
        add(dev + "/config", std::move(config));
        file("current_link_speed", "16.0 GT/s PCIe\n");
        file("current_link_width", "16\n");
        file("max_link_speed", "16.0 GT/s PCIe\n");
        file("max_link_width", "16\n");
        file("modalias", fmt::format("pci:v000015B3d{:08X}sv{:08X}sd{:08X}bc02sc{:02X}i00\n",
                                     f.model.device_id, f.model.subsystem_vendor_id,
                                     f.model.subsystem_id, eth ? 0 : 7));
        file("uevent", fmt::format("DRIVER=vfio-pci\nPCI_CLASS={}\nPCI_ID=15B3:{:04X}\n"
                                   "PCI_SUBSYS_ID={:04X}:{:04X}\nPCI_SLOT_NAME={}\n",
                                   eth ? "20000" : "20700", f.model.device_id,
                                   f.model.subsystem_vendor_id, f.model.subsystem_id, bdf));
        add(dev + "/iommu_group",
            {node_kind::symlink, fmt::format("../../../kernel/iommu_groups/{}", f.iommu_group)});
        add(dev + "/driver", {node_kind::symlink, "../../../bus/pci/drivers/vfio-pci"});
        add(dev + "/subsystem", {node_kind::symlink, "../../../bus/pci"});
        add("/sys/bus/pci/devices/" + bdf, {node_kind::symlink, "../../../devices/" + root + "/" + bdf});
        add("/sys/bus/pci/drivers/vfio-pci/" + bdf,
            {node_kind::symlink, "../../../../devices/" + root + "/" + bdf});
        add(group, {node_kind::directory, {}});
        add(group + "/devices", {node_kind::directory, {}});
        add(group + "/devices/" + bdf, {node_kind::symlink, "../../../../devices/" + root + "/" + bdf});
        add(group + "/type", {node_kind::file, "DMA\n"});
        node wc{node_kind::bar_wc, {}};
        wc.function = i;
        add(dev + "/resource0_wc", std::move(wc));
        node ctl{node_kind::control, {}};
        ctl.function = i;
        add(dev + "/cxv_sim_control", std::move(ctl));
        node g{node_kind::vfio_group, {}};
        g.function = i;
        add(fmt::format("/dev/vfio/{}", f.iommu_group), std::move(g));
    }
}

void sysfs::add(const std::string& path, node n) {
    if (nodes_.contains(path)) return;  // a directory shared by several functions
    n.inode = 0x5c000000u + nodes_.size();
    static constexpr unsigned char types[] = {DT_DIR, DT_REG, DT_LNK, DT_CHR, DT_CHR, DT_REG, DT_REG, DT_REG};
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
        if (it == nodes_.end()) {
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
            auto target = components(n.text);
            rest.insert(rest.begin(), target.begin(), target.end());
            if (!n.text.empty() && n.text[0] == '/') cur.clear();
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
        st.st_size = static_cast<off_t>(n.text.size());
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
