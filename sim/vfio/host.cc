#include "sim/vfio/host.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/vfio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "sim/vfio/libc.h"

namespace cxv::sim::vfio {

std::array<std::atomic<bool>, host::kMaxFast> host::fast_{};
std::atomic<bool> host::high_{false};
std::atomic<bool> host::any_dirs_{false};
std::atomic<bool> host::any_maps_{false};
std::atomic<host*> host::instance_{nullptr};

namespace {

std::vector<function_spec> load_specs(std::string& err) {
    options o;
    if (auto s = o.load_environment(); !s) {
        err = s.error().message;
        return {};
    }
    auto f = o.functions();
    if (!f) {
        err = f.error().message;
        return {};
    }
    return std::move(f).value();
}

// The byte of the BAR file each device fd's description holds a read lock on (far past
// the BAR: a lock needs no data there).
constexpr off_t kDeviceHeldByte = off_t{1} << 40;

// A new open file description of the file behind `fd` (not a dup, which shares one).
int new_description(int fd) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC));
}

// F_OFD_SETLK (`type` F_RDLCK) or F_OFD_GETLK (F_WRLCK: is any held?) on kDeviceHeldByte.
int device_hold(int fd, int cmd, short type, short* found = nullptr) {
    struct flock l{};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = kDeviceHeldByte;
    l.l_len = 1;
    const int r = libc().fcntl(fd, cmd, &l);
    if (found != nullptr) *found = l.l_type;
    return r;
}

// A real, inert fd to stand for an open VFIO file. A container's or group's is named
// after its device node, which /proc/PID/fd then shows (kProcLinkPrefix).
int placeholder_fd(const char* name, int flags) {
    return memfd_create(name, (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
}

// A placeholder holding `len` bytes from `data`, positioned at the start: an open sysfs
// file (read(2), stdio and mmap-free readers then need nothing from the layer).
int filled_fd(const char* name, int flags, const void* data, std::size_t len) {
    const int fd = placeholder_fd(name, flags);
    if (fd < 0) return -errno;
    if (::write(fd, data, len) != static_cast<ssize_t>(len) || ::lseek(fd, 0, SEEK_SET) != 0) {
        const int e = errno != 0 ? errno : EIO;
        libc().close(fd);
        return -e;
    }
    return fd;
}

// The function's config space as the host sees it, which sysfs "config" shows: the
// model's registers (live while the group is open, the reset state otherwise) with
// BAR0 holding the address the host assigned, as in "resource". Only the BAR differs
// from the device fd's config region, where vfio-pci virtualizes it.
std::array<std::uint8_t, config_space::size> host_config_space(function_state& f, unsigned num_vfs) {
    std::array<std::uint8_t, config_space::size> bytes{};
    if (f.model) {
        f.model->pci_config().read(0, bytes.data(), bytes.size());
    } else {
        config_space reset_state(f.spec.model, f.spec.model.bar0_size, f.spec.model.msix_vectors);
        reset_state.set_num_vfs(static_cast<std::uint16_t>(num_vfs));
        reset_state.read(0, bytes.data(), bytes.size());
    }
    const std::uint64_t bar = bar0_address(f.spec) | 0xc;  // 64-bit, prefetchable memory
    for (unsigned i = 0; i < 8; ++i) bytes[0x10 + i] = static_cast<std::uint8_t>(bar >> (8 * i));
    return bytes;
}

// pci-sysfs.c pci_read_config: an opener without CAP_SYS_ADMIN reads only the first 64
// bytes (the standard header up to the capabilities); the rest reads as end of file.
std::size_t readable_config_bytes() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3]{};
    if (syscall(SYS_capget, &hdr, caps) != 0) return 64;
    return (caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) ? config_space::size : 64;
}

}  // namespace

namespace {

// What a fork's child leaves behind on purpose (forget_all_after_fork): no leak to report
// when a child that never execs exits (a shell's subshell, under the sanitizer build).
void abandon([[maybe_unused]] const void* p) noexcept {
#if defined(__SANITIZE_ADDRESS__)
    __lsan_ignore_object(p);
#endif
}

}  // namespace

host& host::get() {
    // Never destroyed: programs call close() and friends from atexit handlers and other
    // libraries' destructors, after this library's own static destructors would run.
    static host* h = [] {
        auto* p = new host();
        instance_.store(p, std::memory_order_release);
        return p;
    }();
    return *h;
}

void host::leak_report() {
    if (!leak_report_) return;
    std::lock_guard lock(mu_);
    unsigned containers = 0, groups = 0, devices = 0;
    std::set<const container_file*> seen;
    std::size_t dma = 0;
    std::uint64_t dma_bytes = 0;
    auto count_dma = [&](const container_file* c) {
        if (c == nullptr || !seen.insert(c).second) return;
        for (const auto& m : c->domain.mappings()) {
            ++dma;
            dma_bytes += m.size;
        }
    };
    for (const auto& [fd, file] : fds_) {
        if (file->kind == file_kind::container) {
            ++containers;
            count_dma(static_cast<const container_file*>(file.get()));
        }
        if (file->kind == file_kind::group) ++groups;
        if (file->kind == file_kind::device) ++devices;
    }
    for (const auto& f : functions_) count_dma(f->container.get());
    std::fprintf(stderr,
                 "cxv-sim: at exit: %u container, %u group and %u device fds open, %zu DMA mappings "
                 "(%llu bytes), %zu BAR mappings%s\n",
                 containers, groups, devices, dma, static_cast<unsigned long long>(dma_bytes), maps_.size(),
                 containers + groups + devices + dma + maps_.size() == 0 ? ": clean" : "");
}

host::host() : specs_(load_specs(setup_error_)), fs_(specs_) {
    if (const char* t = std::getenv("CXV_SIM_TRACE_VFIO"); t && *t && *t != '0') trace_ = true;
    if (const char* t = std::getenv("CXV_SIM_TRACE_COMMANDS"); t && *t && *t != '0') {
        trace_commands_ = true;
    }
    if (const char* t = std::getenv("CXV_SIM_LEAK_REPORT"); t && *t && *t != '0') leak_report_ = true;
    if (const char* t = std::getenv("CXV_SIM_COMMAND_LOG"); t && *t) {
        command_log_ = std::fopen(t, "ae");
        if (command_log_ == nullptr) {
            std::fprintf(stderr, "cxv-sim: CXV_SIM_COMMAND_LOG: cannot open %s: %s\n", t, std::strerror(errno));
        } else {
            std::setvbuf(command_log_, nullptr, _IOLBF, 0);  // whole lines, even if the program is killed
        }
    }
    if (!setup_error_.empty()) {
        std::fprintf(stderr, "cxv-sim: no emulated devices: %s\n", setup_error_.c_str());
    }
    for (const auto& s : specs_) {
        auto f = std::make_unique<function_state>();
        f->spec = s;
        f->index = static_cast<unsigned>(functions_.size());
        functions_.push_back(std::move(f));
    }
}

void host::track(int fd, std::shared_ptr<vfio_file> file) {
    fds_[fd] = std::move(file);
    if (fd < kMaxFast) {
        fast_[fd].store(true, std::memory_order_release);
    } else {
        high_.store(true, std::memory_order_release);
    }
}

std::shared_ptr<vfio_file> host::find(int fd) {
    auto it = fds_.find(fd);
    return it == fds_.end() ? nullptr : it->second;
}

namespace {

// An SR-IOV PF's and its VFs' vport records, kept in the run's binding file (sysfs.h).
// A record not set yet reads as the VF's own configuration (its MAC and GUIDs, the admin
// state AUTO), as firmware that assigned it addresses would answer.
class run_vports final : public vport_links {
public:
    run_vports(sysfs& fs, const std::vector<std::unique_ptr<function_state>>& functions, unsigned self)
        : fs_(fs), functions_(functions), self_(self) {}
    vport_record vf(unsigned n) const override {
        const int f = fs_.vf_function(self_, n);
        return f < 0 ? vport_record{} : of(static_cast<unsigned>(f));
    }
    void set_vf(unsigned n, const vport_record& r) override {
        if (const int f = fs_.vf_function(self_, n); f >= 0) fs_.set_vport(static_cast<unsigned>(f), r);
    }
    vport_record own() const override { return of(self_); }

private:
    vport_record of(unsigned f) const {
        if (auto r = fs_.vport(f)) return *r;
        const device_config& m = functions_.at(f)->spec.model;
        vport_record d;
        d.mac = m.mac;
        d.node_guid = m.node_guid;
        return d;
    }
    sysfs& fs_;
    const std::vector<std::unique_ptr<function_state>>& functions_;
    unsigned self_;
};

}  // namespace

// The function's model, made at its first use (the group's open, or resource0_wc). An
// SR-IOV PF's model starts with its VFs' vport records unset (vfio-pci reset it); a
// VF's takes its addresses from the record its PF set.
int host::ensure_model(function_state& f) {
    if (f.model) return 0;
    device_config cfg = f.spec.model;
    if (cfg.sriov_totalvfs != 0 || f.spec.physfn >= 0) {
        auto links = std::make_shared<run_vports>(fs_, functions_, f.index);
        if (f.spec.physfn >= 0) {
            const vport_record r = links->own();
            cfg.mac = r.mac;
            cfg.node_guid = r.node_guid;
        } else {
            fs_.clear_vports(f.index);
        }
        cfg.vports = std::move(links);
    }
    auto d = device::create(cfg);
    if (!d) {
        std::fprintf(stderr, "cxv-sim: %s: %s\n", f.spec.address.str().c_str(), d.error().message.c_str());
        return -ENODEV;
    }
    f.model = std::move(d).value();
    sync_num_vfs(f);
    if (trace_commands_) f.model->tracer().set_live(stderr, "cxv-sim " + f.spec.address.str());
    if (command_log_ != nullptr) f.model->tracer().set_command_log(command_log_, "cxv-sim " + f.spec.address.str());
    return 0;
}

int host::open_node(const node& n, int flags) {
    const int access = flags & O_ACCMODE;
    switch (n.kind) {
    case node_kind::directory:
        return -EISDIR;  // open_directory() serves O_RDONLY opens
    case node_kind::symlink:
        return -ELOOP;  // only reached with O_NOFOLLOW
    case node_kind::file: {
        if (flags & O_DIRECTORY) return -ENOTDIR;
        if (access != O_RDONLY) return -EACCES;  // sysfs attributes here have no store
        const std::string text = fs_.file_text(n);
        return filled_fd("cxv-sim-sysfs", flags, text.data(), text.size());
    }
    case node_kind::attr: {
        if (flags & O_DIRECTORY) return -ENOTDIR;
        if (access == O_RDONLY) {
            if (n.attr != binding::driver_override && n.attr != binding::sriov_numvfs &&
                n.attr != binding::sriov_autoprobe) {
                return -EACCES;  // 0200
            }
            const std::string text = fs_.file_text(n);
            return filled_fd("cxv-sim-sysfs", flags, text.data(), text.size());
        }
        std::lock_guard lock(mu_);
        const int fd = placeholder_fd("cxv-sim-sysfs-attr", flags);
        if (fd < 0) return -errno;
        const int pending = libc().fcntl(fd, F_DUPFD_CLOEXEC, 0);
        track(fd, std::make_shared<attr_file>(
                      n, fs_, [this](unsigned i) { return functions_.at(i)->opened != nullptr; }, pending));
        return fd;
    }
    case node_kind::config: {
        if (flags & O_DIRECTORY) return -ENOTDIR;
        // Root may write config space through sysfs on Linux; the layer does not model
        // writes that bypass vfio-pci.
        if (access != O_RDONLY) return -EACCES;
        std::lock_guard lock(mu_);
        return open_config(*functions_.at(n.function), flags);
    }
    case node_kind::vfio_container: {
        if (flags & O_DIRECTORY) return -ENOTDIR;
        std::lock_guard lock(mu_);
        const int fd = placeholder_fd((proc_link_prefix() + "/dev/vfio/vfio").c_str(), flags);
        if (fd < 0) return -errno;
        track(fd, std::make_shared<container_file>());
        return fd;
    }
    case node_kind::bar_wc: {
        // pci-sysfs.c resource<N>_wc: root only, for mmap. The file is BAR0's memory
        // itself (the model's BAR file), so a mapping of it is the BAR as the device sees
        // it; the CPU side's write combining is the platform's business.
        if (flags & O_DIRECTORY) return -ENOTDIR;
        if (access != O_RDWR) return -EACCES;
        std::lock_guard lock(mu_);
        function_state& f = *functions_.at(n.function);
        if (const int e = ensure_model(f); e != 0) return e;
        const int fd = libc().fcntl(f.model->bar().fd(), (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
        return fd < 0 ? -errno : fd;
    }
    case node_kind::control: {
        if (access == O_RDONLY) return -EACCES;  // write-only
        std::lock_guard lock(mu_);
        const int fd = placeholder_fd("cxv-sim-control", flags);
        if (fd < 0) return -errno;
        track(fd, std::make_shared<control_file>(*functions_.at(n.function)));
        return fd;
    }
    case node_kind::vfio_group: {
        if (flags & O_DIRECTORY) return -ENOTDIR;
        std::lock_guard lock(mu_);
        function_state& f = *functions_.at(n.function);
        if (f.opened != nullptr) return -EBUSY;  // vfio_group_fops_open: one open per group
        // ... and while a device fd of its last open lives on in any process.
        if (f.held_probe >= 0) {
            short held = F_UNLCK;
            if (device_hold(f.held_probe, F_OFD_GETLK, F_WRLCK, &held) == 0 && held != F_UNLCK) return -EBUSY;
            libc().close(f.held_probe);
            f.held_probe = -1;
        }
        // ... also across the processes of the run, as on a host: a second process's open
        // of a group another holds is EBUSY.
        if (!fs_.hold_group(n.function)) return -EBUSY;
        if (const int e = ensure_model(f); e != 0) {
            fs_.release_group(n.function);
            return e;
        }
        const int fd = placeholder_fd((proc_link_prefix() + "/dev/vfio/" + std::to_string(f.spec.iommu_group)).c_str(),
                                      flags);
        if (fd < 0) {
            const int saved = errno;
            fs_.release_group(n.function);
            return -saved;
        }
        auto g = std::make_shared<group_file>(f, fs_, n.function);
        f.opened = g.get();
        track(fd, std::move(g));
        return fd;
    }
    }
    return -ENOENT;
}

int host::open_config(function_state& f, int flags) {
    // The placeholder holds the bytes as they are now, for stdio (whose reads do not
    // come through the layer) and after fork; read and pread see them as they are then.
    const std::size_t readable = readable_config_bytes();
    sync_num_vfs(f);
    const auto bytes = host_config_space(f, fs_.num_vfs(f.index));
    const int fd = filled_fd("cxv-sim-config", flags, bytes.data(), readable);
    if (fd >= 0) track(fd, std::make_shared<config_file>(f, readable));
    return fd;
}

long host::read_config(const config_file& c, void* buf, std::size_t len, long long offset) {
    if (offset < 0) return -EINVAL;
    const auto pos = static_cast<std::size_t>(offset);
    if (pos >= c.readable) return 0;
    const std::size_t n = std::min(len, c.readable - pos);
    sync_num_vfs(c.fn);
    const auto bytes = host_config_space(c.fn, fs_.num_vfs(c.fn.index));
    std::memcpy(buf, bytes.data() + pos, n);
    return static_cast<long>(n);
}

int host::open_directory(const std::string& path, int flags) {
    std::lock_guard lock(mu_);
    if (empty_dir_ < 0) {
        // A private empty directory stands for every emulated one (readdir adds the
        // entries). It stays while the process runs: a removed directory would fail
        // getdents with ENOENT.
        char tmpl[] = "/tmp/cxv-sim-dir-XXXXXX";
        if (mkdtemp(tmpl) == nullptr) return -errno;
        empty_dir_ = libc().open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        const int e = errno;
        if (empty_dir_ < 0) {
            rmdir(tmpl);
            return -e;
        }
        static std::string path;
        path = tmpl;
        std::atexit([] { rmdir(path.c_str()); });
    }
    const int fd = libc().fcntl(empty_dir_, (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
    if (fd < 0) return -errno;
    struct stat st {};
    libc().fstat(fd, &st);
    dirs_[fd] = {path, st.st_dev, st.st_ino};
    any_dirs_.store(true, std::memory_order_release);
    return fd;
}

void host::duplicated_directory(int oldfd, int newfd) {
    std::lock_guard lock(mu_);
    auto it = dirs_.find(oldfd);
    if (it != dirs_.end()) dirs_[newfd] = it->second;
}

void host::forget_directory(int fd) {
    std::lock_guard lock(mu_);
    dirs_.erase(fd);
}

std::string host::directory_of(int fd) {
    std::lock_guard lock(mu_);
    auto it = dirs_.find(fd);
    if (it == dirs_.end()) return {};
    struct stat st {};
    if (libc().fstat(fd, &st) != 0 || st.st_dev != it->second.dev || st.st_ino != it->second.ino) {
        dirs_.erase(it);
        return {};
    }
    return it->second.path;
}

void host::forget(int fd) {
    std::shared_ptr<vfio_file> file;
    std::lock_guard lock(mu_);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return;
    file = std::move(it->second);
    fds_.erase(it);
    if (fd < kMaxFast) fast_[fd].store(false, std::memory_order_release);
    file.reset();  // the release, if this was the last reference, under the lock
}

void host::forget_all_after_fork() noexcept {
    // The lock was taken before fork() (pthread_atfork prepare) and is held here.
    // Everything the parent owns is abandoned on purpose: no destructor may run, since
    // each would reset or stop the parent's device (BAR0 is shared memory).
    abandon(new decltype(fds_)(std::move(fds_)));
    abandon(new decltype(maps_)(std::move(maps_)));
    for (auto& f : functions_) {
        auto* abandoned = f.release();
        abandon(abandoned);
        auto fresh = std::make_unique<function_state>();
        fresh->spec = abandoned->spec;
        fresh->index = abandoned->index;
        f = std::move(fresh);
    }
    fds_.clear();
    maps_.clear();
    dirs_.clear();
    for (auto& b : fast_) b.store(false, std::memory_order_relaxed);
    high_.store(false);
    any_maps_.store(false);
}

void host::mapped(int fd, void* addr, std::size_t len) {
    std::lock_guard lock(mu_);
    auto file = find(fd);
    if (!file) return;
    const auto start = reinterpret_cast<std::uintptr_t>(addr);
    maps_.push_back({start, start + ((len + 4095) & ~std::size_t{4095}), std::move(file)});
    any_maps_.store(true, std::memory_order_release);
}

void host::unmapped(void* addr, std::size_t len) {
    std::vector<std::shared_ptr<vfio_file>> released;
    std::lock_guard lock(mu_);
    const auto lo = reinterpret_cast<std::uintptr_t>(addr);
    const auto hi = lo + ((len + 4095) & ~std::size_t{4095});
    // A mapping stays referenced while any of its pages is still mapped.
    std::vector<bar_map> kept;
    for (auto& m : maps_) {
        if (hi <= m.start || lo >= m.end) {
            kept.push_back(std::move(m));
            continue;
        }
        if (m.start < lo) kept.push_back({m.start, lo, m.file});
        if (hi < m.end) kept.push_back({hi, m.end, m.file});
        released.push_back(std::move(m.file));
    }
    maps_ = std::move(kept);
    any_maps_.store(!maps_.empty(), std::memory_order_release);
    released.clear();  // the release, if these were the last references, under the lock
}

void host::duplicated(int oldfd, int newfd) {
    std::shared_ptr<vfio_file> replaced;
    std::lock_guard lock(mu_);
    auto it = fds_.find(oldfd);
    if (it == fds_.end()) return;
    auto file = it->second;
    if (auto old = fds_.find(newfd); old != fds_.end()) replaced = std::move(old->second);
    track(newfd, std::move(file));
    replaced.reset();
}

long host::ioctl(int fd, unsigned long request, void* arg) {
    std::lock_guard lock(mu_);
    auto file = find(fd);
    if (!file) return kPassThrough;
    long r = -ENOTTY;
    switch (file->kind) {
    case file_kind::container:
        r = container_ioctl(std::static_pointer_cast<container_file>(file), request, arg);
        break;
    case file_kind::group:
        r = group_ioctl(std::static_pointer_cast<group_file>(file), request, arg);
        break;
    case file_kind::device:
        r = device_ioctl(static_cast<device_file&>(*file), request, arg);
        break;
    case file_kind::control:
    case file_kind::config:
    case file_kind::attr:
        r = -ENOTTY;  // kernfs files have no ioctl
        break;
    }
    if (trace_) {
        static constexpr const char* kinds[] = {"container", "group", "device", "control", "config", "attr"};
        std::fprintf(stderr, "cxv-sim: ioctl(%d [%s], VFIO+%lu) = %ld%s%s\n", fd,
                     kinds[static_cast<int>(file->kind)], request - VFIO_GET_API_VERSION, r,
                     r < 0 ? " " : "", r < 0 ? std::strerror(static_cast<int>(-r)) : "");
    }
    return r;
}

// ---- groups (drivers/vfio/vfio_main.c) ----

long host::group_ioctl(const std::shared_ptr<group_file>& g, unsigned long request, void* arg) {
    function_state& f = g->fn;
    switch (request) {
    case VFIO_GROUP_GET_STATUS: {
        vfio_group_status st{};
        std::memcpy(&st, arg, sizeof st);
        if (st.argsz < sizeof st) return -EINVAL;
        // Viable: no other driver in the group owns DMA.
        st.flags = VFIO_GROUP_FLAGS_VIABLE | (f.container ? VFIO_GROUP_FLAGS_CONTAINER_SET : 0);
        std::memcpy(arg, &st, sizeof st);
        return 0;
    }
    case VFIO_GROUP_SET_CONTAINER:
        return group_set_container(f, arg);
    case VFIO_GROUP_UNSET_CONTAINER:
        if (!f.container) return -EINVAL;
        if (f.container_users != 1) return -EBUSY;  // device fds still open
        detach_group(f);
        return 0;
    case VFIO_GROUP_GET_DEVICE_FD:
        return group_get_device_fd(g, arg);
    default:
        return -ENOTTY;
    }
}

long host::group_set_container(function_state& f, void* arg) {
    int cfd = -1;
    std::memcpy(&cfd, arg, sizeof cfd);
    if (cfd < 0 || libc().fcntl(cfd, F_GETFD) < 0) return -EBADF;
    if (f.container) return -EINVAL;
    auto file = find(cfd);
    if (!file || file->kind != file_kind::container) return -EINVAL;
    auto c = std::static_pointer_cast<container_file>(file);
    c->groups.push_back(&f);
    f.container = c;
    f.container_users = 1;
    if (c->iommu_set) attach_group(*c, f);
    return 0;
}

void host::sync_num_vfs(function_state& f) {
    if (f.model && f.spec.model.sriov_totalvfs != 0) {
        f.model->pci_config().set_num_vfs(static_cast<std::uint16_t>(fs_.num_vfs(f.index)));
    }
}

namespace {

// uuid_parse: 8-4-4-4-12 hex digits; false for anything else.
bool parse_uuid(std::string_view s, std::array<std::uint8_t, 16>& out) {
    constexpr std::size_t kLen = 36;
    if (s.size() < kLen) return false;
    std::size_t b = 0;
    for (std::size_t i = 0; i < kLen;) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
            ++i;
            continue;
        }
        const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
        if (!hex(s[i]) || !hex(s[i + 1])) return false;
        out[b++] = static_cast<std::uint8_t>(std::stoi(std::string(s.substr(i, 2)), nullptr, 16));
        i += 2;
    }
    return true;
}

}  // namespace

long host::check_vf_token(function_state& f, bool given, const std::array<std::uint8_t, 16>& uuid) {
    if (f.spec.physfn >= 0) {
        // A VF: when its PF is vfio-pci's, the PF user's token must come with the open.
        const auto pf = static_cast<unsigned>(f.spec.physfn);
        const bool pf_vfio = fs_.present("/sys/bus/pci/drivers/vfio-pci/" + functions_.at(pf)->spec.address.str());
        if (!pf_vfio) return given ? -EINVAL : 0;
        if (!given || fs_.vf_token(pf) != uuid) return -EACCES;
        return 0;
    }
    if (f.spec.model.sriov_totalvfs == 0) return given ? -EINVAL : 0;  // not a PF or VF
    // A PF whose VFs are in use: their token proves the collaboration; otherwise a token
    // given with the open becomes the VFs' token. (In use: a VF device fd open in this
    // process; a VF another process of the run holds is not seen here.)
    unsigned users = 0;
    for (const auto& g : functions_) users += g->spec.physfn == static_cast<int>(f.index) && g->device_opens > 0;
    if (users != 0) {
        if (!given || fs_.vf_token(f.index) != uuid) return -EACCES;
    } else if (given) {
        fs_.set_vf_token(f.index, uuid);
    }
    return 0;
}

long host::group_get_device_fd(const std::shared_ptr<group_file>& g, void* arg) {
    function_state& f = g->fn;
    const char* name = static_cast<const char*>(arg);
    // vfio_device_get_from_name + vfio_pci_core_match: the PCI address, then only spaces
    // and one option, vf_token=UUID (vfio_pci_validate_vf_token decides whether it must
    // or may be there).
    const std::string bdf = f.spec.address.str();
    const std::size_t len = strnlen(name, 4096);
    if (len == 4096) return -EINVAL;  // strndup_user: longer than a page
    if (std::strncmp(name, bdf.c_str(), bdf.size()) != 0) return -ENODEV;
    bool token_given = false;
    std::array<std::uint8_t, 16> token{};
    if (len > bdf.size()) {
        if (name[bdf.size()] != ' ') return -ENODEV;
        const std::string_view rest(name + bdf.size(), len - bdf.size());
        constexpr std::string_view opt = "vf_token=";
        for (std::size_t i = 0; i < rest.size();) {
            if (rest[i] == ' ') {
                ++i;
                continue;
            }
            if (token_given || rest.substr(i, opt.size()) != opt) return -EINVAL;  // unknown or repeated
            i += opt.size();
            if (!parse_uuid(rest.substr(i), token)) return -EINVAL;
            token_given = true;
            i += 36;
        }
    }
    if (const long e = check_vf_token(f, token_given, token); e != 0) return e;
    // vfio_device_assign_container: a container with an IOMMU model set.
    if (!f.container || !f.container->iommu_set) return -EINVAL;
    const int fd = new_description(f.model->bar().fd());
    if (fd < 0) return -errno;
    if (device_hold(fd, F_OFD_SETLK, F_RDLCK) != 0 ||
        (f.held_probe < 0 && (f.held_probe = new_description(f.model->bar().fd())) < 0)) {
        const int e = errno;
        libc().close(fd);
        return -e;
    }
    ++f.container_users;
    if (f.device_opens++ == 0) enable_function(f);
    track(fd, std::make_shared<device_file>(f, g));
    return fd;
}

void attach_group(container_file& c, function_state& f) {
    // The group joins the container's IOMMU domain: its mappings now reach the device
    // (except those whose vaddr is being replaced).
    for (const auto& m : c.domain.mappings()) {
        if (c.vaddr_invalid.contains(m.iova)) continue;
        (void)f.model->mmu().map(m.iova, m.vaddr, m.size, m.readable, m.writable);
    }
}

void detach_group(function_state& f) {
    auto c = std::move(f.container);
    if (!c) return;
    std::erase(c->groups, &f);
    if (f.model) f.model->mmu().clear();
    // The last group out takes the IOMMU model and its mappings with it.
    if (c->groups.empty() && c->iommu_set) {
        c->domain.clear();
        c->vaddr_invalid.clear();
        c->iommu_set = false;
        c->dma_avail = container_file::kDmaEntryLimit;
    }
    f.container_users = 0;
}

container_file::~container_file() = default;

group_file::~group_file() {
    detach_group(fn);
    fn.opened = nullptr;
    fn.model.reset();
    fs.release_group(index);
}

device_file::~device_file() {
    if (--fn.device_opens == 0) disable_function(fn);
    if (fn.container_users > 0) --fn.container_users;
}

}  // namespace cxv::sim::vfio
