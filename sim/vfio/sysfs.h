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
//
// Paths are resolved as the kernel would (repeated and trailing slashes, ".", "..",
// symbolic links inside the emulated tree); a path that leads out of it through one of
// its links is handed back rewritten, and a path that never touches it passes through.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/vfio/options.h"

namespace cxv::sim::vfio {

// `file` has fixed text; `config` is the function's config space, read from the host
// when opened (host::open_node); `bar_wc` is sysfs `resource0_wc`, BAR0 for a
// write-combining mmap (the BAR is prefetchable, as a ConnectX's is).
enum class node_kind { directory, file, symlink, vfio_container, vfio_group, control, config, bar_wc };

struct node {
    node_kind kind;
    std::string text;       // file contents, or link target
    unsigned function = 0;  // vfio_group, control, config, bar_wc: index into the function list
    bool shared = false;    // a directory the host may also have entries in
    std::uint64_t inode = 0;
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

private:
    void add(const std::string& path, node n);
    std::map<std::string, node> nodes_;
    std::map<std::string, std::vector<dir_entry>> entries_;
    std::vector<std::uint64_t> bar_sizes_;  // BAR0 of each function
};

}  // namespace cxv::sim::vfio
