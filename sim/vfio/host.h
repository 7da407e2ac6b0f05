// The kernel side of the presentation layer: what Linux's vfio, vfio_iommu_type1 and
// vfio-pci do for the emulated functions. It owns the open files (containers, groups,
// devices) behind the fds it hands out, the IOMMU domain of each container, the
// interrupt routing of each function, and the device models.
//
// Object lifetimes follow the kernel's: a device fd holds its group file, a group holds
// its container; a group's IOMMU mappings go when the last group leaves the container;
// the first device open and the last device close reset the function. The model of a
// function runs while its group is open.
//
// Every entry point returns a non-negative result or -errno. One lock serializes them
// (the kernel's are finer; nothing here is on a fast path).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/device.h"
#include "sim/pci/iommu.h"
#include "sim/vfio/options.h"
#include "sim/vfio/sysfs.h"

namespace cxv::sim::vfio {

// /proc/PID/fd shows an open VFIO node as its path (/dev/vfio/N, /dev/vfio/vfio), as on
// a host, where lsof(8) and `cxv setup --status` find a group's holders so. The layer's
// stand-in fd is a memfd named this prefix, the run's name (sysfs::run_id) and the path
// ("/memfd:cxv-sim:1f2e:/dev/vfio/7 (deleted)" in /proc); readlink(2) of such a link
// from a process of the same run gives the path alone. Another run is another host: its
// links stay as they are.
inline constexpr char kProcLinkPrefix[] = "cxv-sim:";

enum class file_kind { container, group, device, control, config, attr };

// An open file of /dev/vfio/vfio, /dev/vfio/<N>, a device fd, or one of the sysfs
// files whose contents are the function's live state.
struct vfio_file {
    explicit vfio_file(file_kind k) : kind(k) {}
    virtual ~vfio_file() = default;
    const file_kind kind;
};

struct function_state;

// A container: its groups and, once VFIO_SET_IOMMU has chosen type1, the IOMMU domain.
// `domain` is the authoritative table (it decides EEXIST/EINVAL); each attached
// function's model mirrors it.
struct container_file : vfio_file {
    container_file() : vfio_file(file_kind::container) {}
    ~container_file() override;
    static constexpr unsigned kDmaEntryLimit = 65535;  // type1's dma_entry_limit default
    bool iommu_set = false;
    bool v2 = true;
    unsigned dma_avail = kDmaEntryLimit;
    iommu domain;
    std::vector<function_state*> groups;
    // Mappings (by IOVA) whose vaddr was invalidated with VFIO_DMA_UNMAP_FLAG_VADDR and
    // not yet replaced; the device cannot reach them meanwhile.
    std::set<std::uint64_t> vaddr_invalid;
};

struct group_file : vfio_file {
    group_file(function_state& f, sysfs& s, unsigned i) : vfio_file(file_kind::group), fn(f), fs(s), index(i) {}
    ~group_file() override;  // vfio_group_fops_release
    function_state& fn;
    sysfs& fs;       // the hold across the run's processes (sysfs::hold_group)
    unsigned index;  // the function's
};

struct device_file : vfio_file {
    device_file(function_state& f, std::shared_ptr<group_file> g)
        : vfio_file(file_kind::device), fn(f), group(std::move(g)) {}
    ~device_file() override;  // vfio_device_fops_release
    function_state& fn;
    std::shared_ptr<group_file> group;  // a device fd keeps its group open
};

// The fault-injection control file of a function: each write is one command.
struct control_file : vfio_file {
    explicit control_file(function_state& f) : vfio_file(file_kind::control), fn(f) {}
    function_state& fn;
};

// A binding attribute of sysfs open for writing (driver_override, bind, unbind,
// drivers_probe): each write(2) is one store (sysfs::write_attr). A program's own writes
// come through the layer; libc's internal ones (stdio's, as a shell's `echo > FILE`
// makes them) cannot be intercepted and land in the placeholder file: what it holds is
// stored when the file closes (`pending`, a second fd of the placeholder), its error
// then unseen.
struct attr_file : vfio_file {
    attr_file(const node& a, sysfs& s, std::function<bool(unsigned)> open, int p)
        : vfio_file(file_kind::attr), n(a), fs(s), group_open(std::move(open)), pending(p) {}
    ~attr_file() override;
    const node& n;
    sysfs& fs;
    std::function<bool(unsigned)> group_open;
    int pending;
};

// The sysfs "config" attribute of a function, open for reading. Reads see the function's
// config space as it is at the time of the read; `readable` is how much of it the
// opener may read (pci_read_config: 64 bytes without CAP_SYS_ADMIN).
struct config_file : vfio_file {
    config_file(function_state& f, std::size_t r) : vfio_file(file_kind::config), fn(f), readable(r) {}
    function_state& fn;
    const std::size_t readable;
};

// Per emulated function: the device model and the host state around it.
struct function_state {
    function_spec spec;
    unsigned index = 0;                         // in the function list (sysfs's numbering)
    std::unique_ptr<device> model;              // while the group is open
    group_file* opened = nullptr;               // the group's one open file
    std::shared_ptr<container_file> container;  // set with VFIO_GROUP_SET_CONTAINER
    unsigned container_users = 0;               // the group, plus each open device fd
    unsigned device_opens = 0;
    // Interrupts as vfio-pci routes them: the enabled index (-1 none) and, per vector,
    // the host's own reference to the eventfd (-1 none).
    int irq_type = -1;
    std::vector<int> triggers;
    int err_trigger = -1, req_trigger = -1;  // the error and request interrupt eventfds
    int intx_trigger = -1, intx_unmask = -1;  // INTx (irq_type 0): trigger and unmask eventfds
    // The device fds' hold, across processes: each device fd is an open file description
    // of its own of the model's BAR file, with a read lock (OFD) on one byte, so that the
    // lock lasts while any process has the fd (passed with SCM_RIGHTS, inherited) or a
    // BAR mapping of it. `held_probe`, another description of the BAR file of the last
    // model whose device fds went out (-1: none), finds such a lock: the group is not
    // opened again meanwhile (EBUSY), as a device fd holds its group file on Linux
    // (vfio_group_fops_release runs only once no device fd is left).
    int held_probe = -1;
};

// Kernel-side operations on a function, called with the host lock held.
void attach_group(container_file& c, function_state& f);  // the IOMMU domain reaches it
void detach_group(function_state& f);                      // vfio_group_detach_container
void enable_function(function_state& f);                   // first device open
void disable_function(function_state& f);                  // last device close
void reset_function(function_state& f);                    // FLR, state restored
void disable_msix(function_state& f);
void disable_intx(function_state& f);

class host {
public:
    static host& get();  // created on first use, never destroyed (see preload.cc)
    static host* existing() noexcept { return instance_.load(std::memory_order_acquire); }
    // kProcLinkPrefix, this run's name and ':': what a stand-in's memfd name starts with.
    std::string proc_link_prefix() const { return std::string(kProcLinkPrefix) + fs_.run_id() + ":"; }

    // pthread_atfork handlers: the lock is taken across fork() so that the child
    // inherits consistent state.
    void fork_prepare() { mu_.lock(); }
    void fork_parent() { mu_.unlock(); }
    void fork_child() {
        forget_all_after_fork();
        mu_.unlock();
    }

    // Fast, lock-free: does this fd belong to the presentation layer?
    static bool tracked(int fd) noexcept {
        return fd >= 0 && (fd < kMaxFast ? fast_[fd].load(std::memory_order_acquire)
                                         : high_.load(std::memory_order_acquire));
    }

    const sysfs& fs() const noexcept { return fs_; }

    // CXV_SIM_LEAK_REPORT: at process exit (after the program's atexit handlers and
    // static destructors), what the program left behind: open container, group and
    // device fds, DMA mappings, BAR mappings. One line on stderr.
    void leak_report();
    const std::vector<function_spec>& functions() const noexcept { return specs_; }

    // open(2) of an emulated node; returns the new fd.
    int open_node(const node& n, int flags);
    // Before the real close(2) of a tracked fd: forget it (releasing what it held).
    void forget(int fd);
    // In a child after fork(): the child's copies of VFIO fds become inert files; the
    // parent's devices, models and interrupt routing are left alone (nothing released).
    void forget_all_after_fork() noexcept;
    // A BAR mapping holds its device file, as the kernel's vm_file does: the device is
    // released at the last munmap, not at close.
    void mapped(int fd, void* addr, std::size_t len);
    void unmapped(void* addr, std::size_t len);
    static bool has_mappings() noexcept { return any_maps_.load(std::memory_order_acquire); }
    // After a successful dup of a tracked fd (newfd may have been tracked too).
    void duplicated(int oldfd, int newfd);

    // A directory fd for an emulated directory (an fd of an empty directory, plus the
    // entries readdir adds), and the emulated directory an fd stands for, if any.
    int open_directory(const std::string& path, int flags);
    std::string directory_of(int fd);
    void duplicated_directory(int oldfd, int newfd);
    void forget_directory(int fd);
    static bool has_directories() noexcept { return any_dirs_.load(std::memory_order_acquire); }

    // Returned by ioctl/mmap_offset/pread/pwrite for an fd that is not (or no longer)
    // one of ours: the caller hands the call to the C library.
    static constexpr long kPassThrough = -0x7fffffff;

    long ioctl(int fd, unsigned long request, void* arg);
    // mmap(2) of a device fd: validates like vfio_pci_core_mmap and returns the offset
    // in the BAR file to map, or -errno.
    long long mmap_offset(int fd, std::size_t len, int prot, int flags, long long offset);
    // pread(2) of a device fd (config space, BAR0) or of a sysfs config file.
    long pread(int fd, void* buf, std::size_t len, long long offset);
    long pwrite(int fd, const void* buf, std::size_t len, long long offset);
    // A write(2) to a control file: applies one fault-injection command (see
    // docs/device-model.md), or kPassThrough for other fds.
    long control(int fd, const void* buf, std::size_t len);

private:
    static constexpr int kMaxFast = 1 << 16;
    static std::array<std::atomic<bool>, kMaxFast> fast_;
    static std::atomic<bool> high_;
    static std::atomic<bool> any_dirs_;
    static std::atomic<bool> any_maps_;
    static std::atomic<host*> instance_;

    host();
    int ensure_model(function_state& f);  // 0 or -errno; with mu_ held
    void track(int fd, std::shared_ptr<vfio_file> file);
    std::shared_ptr<vfio_file> find(int fd);

    // Containers (iommu_type1.cc).
    long container_ioctl(const std::shared_ptr<container_file>& c, unsigned long request,
                         void* arg);
    long iommu_get_info(container_file& c, void* arg);
    long iommu_map_dma(container_file& c, void* arg);
    long iommu_unmap_dma(container_file& c, void* arg);

    // sysfs "config" (host.cc).
    int open_config(function_state& f, int flags);
    long read_config(const config_file& c, void* buf, std::size_t len, long long offset);

    // Groups (host.cc).
    long group_ioctl(const std::shared_ptr<group_file>& g, unsigned long request, void* arg);
    long group_set_container(function_state& f, void* arg);
    long group_get_device_fd(const std::shared_ptr<group_file>& g, void* arg);

    // Devices (pci_device.cc).
    long device_ioctl(device_file& d, unsigned long request, void* arg);
    long device_get_region_info(function_state& f, void* arg);
    long device_get_irq_info(function_state& f, void* arg);
    long device_set_irqs(function_state& f, void* arg);
    long set_vector(function_state& f, unsigned vector, int fd);
    // The function, region index and offset a device-fd access at `offset` addresses:
    // 0, -EINVAL for other files or a negative offset, kPassThrough for unknown fds.
    struct region_access {
        function_state* fn = nullptr;
        std::uint64_t index = 0, pos = 0;
    };
    long locate(int fd, long long offset, region_access& out);
    long set_single_trigger(int& trigger, unsigned count, unsigned type, const std::uint8_t* data);
    long set_intx(function_state& f, unsigned action, unsigned start, unsigned count, unsigned type,
                  const std::uint8_t* data);
    long device_feature(function_state& f, void* arg);
    // vfio_pci_validate_vf_token: 0, or -EINVAL / -EACCES as Linux refuses the open.
    long check_vf_token(function_state& f, bool given, const std::array<std::uint8_t, 16>& uuid);
    // A PF's config space reads show the VFs sysfs has enabled (SR-IOV NumVFs, VF Enable).
    void sync_num_vfs(function_state& f);

    std::vector<function_spec> specs_;
    std::string setup_error_;
    bool trace_ = false;           // CXV_SIM_TRACE_VFIO: every VFIO ioctl and its result
    bool trace_commands_ = false;  // CXV_SIM_TRACE_COMMANDS: every firmware command
    bool leak_report_ = false;     // CXV_SIM_LEAK_REPORT: what is left at exit
    std::FILE* command_log_ = nullptr;  // CXV_SIM_COMMAND_LOG=FILE: every command's fields, appended
    sysfs fs_;
    std::vector<std::unique_ptr<function_state>> functions_;

    std::mutex mu_;
    std::unordered_map<int, std::shared_ptr<vfio_file>> fds_;
    struct dir_fd {
        std::string path;
        dev_t dev;
        ino_t ino;
    };
    std::unordered_map<int, dir_fd> dirs_;  // checked by inode, as closedir is not seen
    int empty_dir_ = -1;                    // an empty private directory
    struct bar_map {
        std::uintptr_t start, end;
        std::shared_ptr<vfio_file> file;
    };
    std::vector<bar_map> maps_;
};

}  // namespace cxv::sim::vfio
