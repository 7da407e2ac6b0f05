// The file-system side of the presentation layer: the sysfs and /dev entries Linux
// has for a function bound to vfio-pci, for each emulated function.
//
//   /sys/devices/pci<DDDD>:<BB>/<bdf>/           the function (vendor, device, class, ...,
//                                                 config, iommu_group, driver and subsystem
//                                                 links)
//   /sys/bus/pci/devices/<bdf>                   -> ../../../devices/pci<DDDD>:<BB>/<bdf>
//   /sys/bus/pci/drivers/vfio-pci/<bdf>          -> the function
//   /sys/kernel/iommu_groups/<N>/devices/<bdf>   -> the function; type
//   /dev/vfio/vfio, /dev/vfio/<N>                 character devices
//   .../<bdf>/cxv_sim_control                     write-only: fault injection (not on a card)
//   .../<pf>/sriov_{totalvfs,numvfs,offset,stride,vf_device,drivers_autoprobe}, virtfn<N>
//   .../<vf>/physfn                               SR-IOV (drivers/pci/iov.c)
//   /sys/module/vfio_pci/parameters/enable_sriov
//
// SR-IOV follows Linux too: writing sriov_numvfs on a PF whose driver can (mlx5_core, or
// vfio-pci with enable_sriov) makes its VFs exist, each a function with its own
// address, IOMMU group and /dev/vfio node; 0 removes them. A PF's driver decides what a
// new VF binds to: vfio-pci sets the VF's driver_override to vfio-pci (its bus
// notifier), and with sriov_drivers_autoprobe (1) a VF is probed at once. The VF token a
// vfio-pci PF's user sets (VFIO_DEVICE_FEATURE) is kept here too, for the VFs' opens in
// any process of the run. Deviations: removing VFs while a process holds a VF's group
// is EBUSY (Linux waits for the holder).
//
// The binding follows Linux (drivers/pci/pci-sysfs.c, pci-driver.c, drivers/base/bus.c):
// a function starts on the driver its spec names (vfio-pci by default) and moves through
// <bdf>/driver_override, /sys/bus/pci/drivers/{vfio-pci,mlx5_core}/{bind,unbind} and
// /sys/bus/pci/drivers_probe. Its driver link, the drivers' <bdf> links and /dev/vfio/<N>
// (vfio-pci) or net/<ifname>/ (mlx5_core, a netdev) come and go with it. Every process
// under one `cxv-sim run` sees one binding, as processes on one host do: the launcher
// makes a memfd that its children inherit (CXV_SIM_BINDING_FD), 64 bytes a function
// (the driver, then driver_override); it also holds each open group (hold_group), so that
// a second process's open of a group another holds is EBUSY, as on a host. Deviations:
// unbinding vfio-pci while this process
// holds the group fails with EBUSY, where Linux waits for the holder to let go; an
// override is at most 62 bytes (Linux: a page).
//
// Paths are resolved as the kernel would (repeated and trailing slashes, ".", "..",
// symbolic links inside the emulated tree); a path that leads out of it through one of
// its links is handed back rewritten, and a path that never touches it passes through.
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/vfio/options.h"
#include "sim/vport_links.h"

namespace cxv::sim::vfio {

// `file` has fixed text; `config` is the function's config space, read from the host
// when opened (host::open_node); `bar_wc` is sysfs `resource0_wc`, BAR0 for a
// write-combining mmap (the BAR is prefetchable, as a ConnectX's is).
// `attr`: a binding attribute that takes writes (its `binding`).
enum class node_kind { directory, file, symlink, vfio_container, vfio_group, control, config, bar_wc, attr };

// When a node exists, by the driver its function is bound to.
enum class shown : std::uint8_t { always, on_vfio, on_mlx5, on_driver };
enum class binding : std::uint8_t { driver_override, bind, unbind, drivers_probe, sriov_numvfs, sriov_autoprobe };

struct node {
    node_kind kind;
    std::string text;       // file contents, or link target; attr bind/unbind: the driver
    unsigned function = 0;  // vfio_group, control, config, bar_wc: index into the function list
    bool shared = false;    // a directory the host may also have entries in
    std::uint64_t inode = 0;
    shown when = shown::always;
    bool driver_link = false;  // <bdf>/driver: its target is the bound driver
    bool uevent = false;       // <bdf>/uevent: its DRIVER= line is the bound driver
    binding attr = binding::driver_override;
    bool vf = false;  // a VF's (`function`): there only while its PF's sriov_numvfs covers it
};

struct dir_entry {
    std::string name;
    unsigned char type;  // DT_DIR, DT_REG, DT_LNK, DT_CHR
};

struct lookup {
    enum { not_ours, found, redirect, error } what = not_ours;
    const node* n = nullptr;  // found
    std::string path;         // redirect: the real path to use instead; otherwise the
                              // path as resolved (lexically for the host's part)
    int err = 0;              // error: an errno value
};

// Where the host placed a function's BAR0 (sysfs "resource", and BAR0 in sysfs "config").
std::uint64_t bar0_address(const function_spec& f);

class sysfs {
public:
    explicit sysfs(const std::vector<function_spec>& functions);

    // Cheap test that a path may concern the emulated tree at all.
    static bool candidate(const char* path) noexcept;

    // Resolves an absolute path; `follow` says whether a final symbolic link is followed.
    lookup resolve(const char* path, bool follow) const;

    // The emulated entries of a directory (ours, or a host directory such as
    // /sys/bus/pci/devices that gains entries), by resolved path; nullptr if none.
    const std::vector<dir_entry>* entries(const std::string& dir) const;

    // stat(2) of a node.
    void fill_stat(const node& n, struct stat& st) const;

    // Whether a node exists as the functions are bound now; by resolved path too.
    bool present(const node& n) const;
    bool present(const std::string& path) const;
    // A symlink's target and a file's contents as they are now.
    std::string link_text(const node& n) const;
    std::string file_text(const node& n) const;
    // A write of `text` to the binding attribute `n`: the byte count taken, or -errno as
    // Linux answers. `group_open(i)`: whether function i's group is open here.
    long write_attr(const node& n, std::string_view text, const std::function<bool(unsigned)>& group_open);

    // SR-IOV state: the VFs a PF has enabled; whether function i exists now (a PF always,
    // a VF while enabled); a PF's VF token (all zero until its user sets one) and the
    // setting of it; the function that is VF `vf` of PF `pf` (-1: none).
    unsigned num_vfs(unsigned pf) const;
    bool exists(unsigned function) const;
    std::array<std::uint8_t, 16> vf_token(unsigned pf) const;
    void set_vf_token(unsigned pf, const std::array<std::uint8_t, 16>& uuid);
    int physfn(unsigned function) const { return physfn_.at(function); }
    // VF n (from 1) of PF `pf`'s function (-1: it has no such VF).
    int vf_function(unsigned pf, unsigned n) const;
    // A VF's vport record as its PF's firmware set it (sim/vport_links.h); nullopt until
    // set since the PF's last reset. clear_vports: every VF of `pf` back to unset.
    std::optional<vport_record> vport(unsigned function) const;
    void set_vport(unsigned function, const vport_record& r);
    void clear_vports(unsigned pf);
    // This run's name among the runs on the host (its binding file's inode; without one,
    // this process's pid): processes of one run are one host, another run another.
    const std::string& run_id() const noexcept { return run_id_; }

    static constexpr std::size_t kSlotBytes = 64;  // of the binding file, per function

    // The group of `function` is opened (true) or is held by another process of the run
    // (false: EBUSY, as vfio_group_fops_open answers a second opener); release_group()
    // when it closes. Without the run's shared file every process has its own devices.
    bool hold_group(unsigned function);
    void release_group(unsigned function);
    static constexpr std::size_t kHoldBase = 1u << 20;  // the hold bytes' offset in the file
    // The VFs' vport records: kVportBytes per function from this offset.
    static constexpr std::size_t kVportBase = 2u << 20, kVportBytes = 32;

private:
    enum : std::uint8_t { kNone = 1, kVfio, kMlx5 };  // 0: a slot not written yet
    // A function's slot of the binding file: the driver (byte 0), driver_override (up to
    // kOverrideMax bytes from 1, NUL-terminated), and for a PF its VF token, its
    // sriov_numvfs and sriov_drivers_autoprobe.
    static constexpr std::size_t kOverrideMax = 43, kTokenAt = 45, kNumVfsAt = 61, kFlagsAt = 62;
    struct binding_state {
        std::uint8_t driver = kNone;
        std::string override;
        std::array<std::uint8_t, 16> token{};
        std::uint8_t num_vfs = 0;
        bool autoprobe = true;
    };
    long write_num_vfs(unsigned pf, std::string_view v, const std::function<bool(unsigned)>& group_open);
    static const char* driver_name(std::uint8_t d) noexcept;
    int function_of(std::string_view bdf) const;
    binding_state load(unsigned function) const;
    void store(unsigned function, const binding_state& s);
    void add(const std::string& path, node n);
    std::map<std::string, node> nodes_;
    std::map<std::string, std::vector<dir_entry>> entries_;
    std::vector<std::uint64_t> bar_sizes_;  // BAR0 of each function
    std::vector<std::string> bdfs_;
    std::vector<std::uint8_t> initial_;  // each function's driver at the start
    std::vector<int> physfn_;            // each function's PF (-1: a PF)
    std::vector<unsigned> vf_index_;     // a VF's number under its PF
    std::vector<unsigned> total_vfs_;    // a PF's sriov_totalvfs
    std::vector<int> first_vf_;          // a PF's VF 0 (-1: none)
    bool vfio_enable_sriov_ = false;
    int shared_fd_ = -1;                 // the launcher's binding file, when inherited
    std::map<unsigned, vport_record> local_vports_;  // without the binding file (under state_mu_)
    std::string run_id_;
    int hold_fd_ = -1;                   // this process's own description of it (group holds)
    mutable std::mutex state_mu_;
    std::vector<binding_state> local_;  // the binding, without a shared file
};

}  // namespace cxv::sim::vfio
