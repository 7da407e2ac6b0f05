// The device list and contexts: the functions bound to vfio-pci with vendor 0x15b3, as
// cxv list finds them (libpci), named mlx5_0, mlx5_1, ... in PCI address order; with
// CXV_DAEMON=PATH the functions the cxvd at PATH serves, in its order; or only the
// function CXV_DEVICE names (cxv exec --device). A context is cxv_open_device()'s.
//
// Why not a provider for rdma-core's libibverbs: rdma-core lists devices from the
// kernel's uverbs class in sysfs (/sys/class/infiniband_verbs), which a function bound
// to vfio-pci does not have, so its provider would never be asked; cxv answers the
// libibverbs ABI itself instead.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

#include "api/abi/abi.h"
#include "api/abi/providers.h"
#include "api/cxv.h"
#include "api/cxv_verbs.h"
#include "base/unique_fd.h"
#include "driver/hca/hca.h"
#include "driver/pci/pci.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "hw/pci_ids.h"

namespace cxv::abi {

namespace {

namespace ifc = hw::ifc;

std::mutex list_mu;
// Entries live as long as the process, as rdma-core's devices do: a program may keep a
// struct ibv_device pointer after ibv_free_device_list() while a context uses it.
std::vector<std::unique_ptr<device_entry>> entries;
bool listed = false;

std::unique_ptr<device_entry> make_entry(const std::string& bdf, unsigned index) {
    auto e = std::make_unique<device_entry>();
    std::snprintf(e->bdf, sizeof(e->bdf), "%s", bdf.c_str());
    e->index = index;
    e->dev.node_type = IBV_NODE_CA;
    e->dev.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(e->dev.name, sizeof(e->dev.name), "mlx5_%u", index);
    std::snprintf(e->dev.dev_name, sizeof(e->dev.dev_name), "uverbs%u", index);
    std::snprintf(e->dev.dev_path, sizeof(e->dev.dev_path), "/sys/bus/pci/devices/%s", e->bdf);
    // The device's RDMA class directory where `cxv exec` made one (tools/cxv/exec.cc:
    // /dev/infiniband/sysfs/<address>/infiniband/<name>, whose directory two levels up has
    // the function's PCI IDs, as a kernel's .../<address>/infiniband/<name> has), named
    // /sys/class/infiniband/<name> as rdma-core names it where cxv exec also put that link
    // (and it leads there: not a kernel device of the same name); else the function's own
    // sysfs directory.
    char view[sizeof(e->dev.ibdev_path)];
    std::snprintf(view, sizeof(view), "/dev/infiniband/sysfs/%s/infiniband/%s", e->bdf, e->dev.name);
    char klass[sizeof(e->dev.ibdev_path)];
    std::snprintf(klass, sizeof(klass), "/sys/class/infiniband/%s", e->dev.name);
    char resolved[PATH_MAX];
    struct stat st{};
    if (::realpath(klass, resolved) != nullptr && std::strcmp(resolved, view) == 0) {
        std::snprintf(e->dev.ibdev_path, sizeof(e->dev.ibdev_path), "%s", klass);
    } else if (::stat(view, &st) == 0 && S_ISDIR(st.st_mode)) {
        std::snprintf(e->dev.ibdev_path, sizeof(e->dev.ibdev_path), "%s", view);
    } else {
        std::snprintf(e->dev.ibdev_path, sizeof(e->dev.ibdev_path), "/sys/bus/pci/devices/%s", e->bdf);
    }
    return e;
}

// The list, found once. 0 or an errno value.
int discover_locked() {
    if (listed) return 0;
    std::vector<std::string> bdfs;
    const std::string daemon = cxv::daemon_path();
    if (const char* only = std::getenv("CXV_DEVICE"); only != nullptr && *only != '\0') {
        bdfs.emplace_back(only);
    } else if (!daemon.empty()) {
        // CXV_DAEMON: the daemon's functions, in its order (they are its to open).
        auto served = cxv::daemon_functions(daemon);
        if (!served) {
            std::fprintf(stderr, "cxv libibverbs: %s\n", served.error().message.c_str());
            return served.error().code ? served.error().code : EIO;
        }
        bdfs = std::move(served).value();
    } else {
        auto found = driver::pci::discover();
        if (!found) {
            std::fprintf(stderr, "cxv libibverbs: %s\n", found.error().message.c_str());
            return found.error().code ? found.error().code : EIO;
        }
        for (const auto& f : *found) {
            if (f.vendor == hw::mellanox_vendor_id && f.usable()) bdfs.push_back(f.bdf);
        }
        std::sort(bdfs.begin(), bdfs.end());
    }
    for (unsigned i = 0; i < bdfs.size(); ++i) entries.push_back(make_entry(bdfs[i], i));
    listed = true;
    return 0;
}

}  // namespace

device_entry* entry_of(ibv_device* d) { return reinterpret_cast<device_entry*>(d); }
device_entry* entry_of(ibv_context* ctx) { return entry_of(ctx->device); }
static_assert(offsetof(device_entry, dev) == 0);

namespace {

// Through a cxvd that does not forward QUERY_NIC_VPORT_CONTEXT (one before protocol 2):
// the node GUID as the modified EUI-64 of the port's MAC (RFC 4291 appendix A: ff:fe in
// the middle, the universal/local bit flipped), which is how a ConnectX's RoCE node GUID
// relates to its base MAC; the system image GUID the same.
int ids_from_mac(driver::hca& hca, device_entry& e) {
    const auto mac = hca.mac();
    std::uint64_t g = 0;
    const std::uint8_t b[8] = {static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4],
                               mac[5]};
    for (const auto v : b) g = g << 8 | v;
    e.node_guid = g;
    e.sys_image_guid = g;
    e.ids_known = true;
    return 0;
}

}  // namespace

int read_ids(ibv_context* ctx, device_entry& e) {
    driver::hca& hca = verbs_device(ctx).hca();
    std::vector<std::byte> in;
    result<std::vector<std::byte>> out = error{EIO, ""};
    if (hca.ethernet()) {
        // PRM QUERY_NIC_VPORT_CONTEXT: the node and system image GUIDs of an Ethernet port.
        in.resize(ifc::query_nic_vport_context_in::size_bytes);
        ifc::set<ifc::query_nic_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_NIC_VPORT_CONTEXT));
        out = hca.exec(in, ifc::query_nic_vport_context_out::size_bytes);
        if (!out && hca.attached() && out.error().code == EPERM) return ids_from_mac(hca, e);
        if (!out) return out.error().code ? out.error().code : EIO;
        const std::byte* v = ifc::at<ifc::query_nic_vport_context_out::nic_vport_context>(out->data());
        e.node_guid = ifc::get<ifc::nic_vport_context::node_guid>(v);
        e.sys_image_guid = ifc::get<ifc::nic_vport_context::system_image_guid>(v);
    } else {
        // PRM QUERY_HCA_VPORT_CONTEXT of port 1: the InfiniBand node's GUIDs.
        in.resize(ifc::query_hca_vport_context_in::size_bytes);
        ifc::set<ifc::query_hca_vport_context_in::opcode>(
            in.data(), static_cast<std::uint32_t>(hw::cmd_opcode::QUERY_HCA_VPORT_CONTEXT));
        ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), 1);
        out = hca.exec(in, ifc::query_hca_vport_context_out::size_bytes);
        if (!out) return out.error().code ? out.error().code : EIO;
        const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(out->data());
        e.node_guid = ifc::get<ifc::hca_vport_context::node_guid>(v);
        e.sys_image_guid = ifc::get<ifc::hca_vport_context::system_image_guid>(v);
    }
    e.ids_known = true;
    return 0;
}

}  // namespace cxv::abi

using namespace cxv::abi;

namespace {

bool fork_protection = false;  // ibv_fork_init() was called

// A context's cmd_fd. rdma-core's is the uverbs device's, which commands go through; cxv's
// commands go through VFIO (or cxvd), so nothing is read or written here, but programs
// dup, poll, fcntl or close it (libfabric, fork checks): /dev/null behaves as the uverbs
// fd does to those (poll: always readable and writable, as uverbs' fd, which has no poll
// of its own). An eventfd if /dev/null cannot be opened.
int command_fd() {
    const int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    return fd >= 0 ? fd : ::eventfd(0, EFD_CLOEXEC);
}

}  // namespace

// ibv_get_device_list(3): NULL-terminated, *num_devices entries; NULL with errno set
// when the PCI bus cannot be read.
CXV_ABI_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
    std::lock_guard lock(list_mu);
    if (const int e = discover_locked(); e != 0) {
        errno = e;
        return nullptr;
    }
    auto** list = static_cast<ibv_device**>(std::calloc(entries.size() + 1, sizeof(ibv_device*)));
    if (list == nullptr) return fail_null<ibv_device*>(ENOMEM);
    for (std::size_t i = 0; i < entries.size(); ++i) list[i] = &entries[i]->dev;
    if (num_devices != nullptr) *num_devices = static_cast<int>(entries.size());
    return list;
}

CXV_ABI_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }

CXV_ABI_EXPORT const char* ibv_get_device_name(ibv_device* device) { return device->name; }

CXV_ABI_EXPORT int ibv_get_device_index(ibv_device* device) { return static_cast<int>(entry_of(device)->index); }

// The node GUID in network order. The firmware holds it, so a function not open in this
// process is brought up for the query and closed again (slow on a card: seconds).
CXV_ABI_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
    device_entry& e = *entry_of(device);
    if (!e.ids_known) {
        ibv_context* ctx = cxv_open_device(e.bdf);
        if (ctx == nullptr) {
            std::fprintf(stderr, "cxv libibverbs: %s: %s\n", e.bdf, cxv_last_error());
            return 0;
        }
        const int r = read_ids(ctx, e);
        cxv_close_device(ctx);
        if (r != 0) {
            errno = r;
            return 0;
        }
    }
    return htobe64(e.node_guid);
}

// Where `cxv exec` made the device a class directory (tools/cxv/exec.cc), the GID types
// of its ports as a kernel's has them, ports/<port>/gid_attrs/types/<index>: "RoCE v2" on
// an Ethernet port (the only kind cxv's driver programs), "IB/RoCE v1" on InfiniBand,
// for each entry that holds a GID among the first 32 (programs such as UCX read the type
// of the GID they use there; cxv programs a few). Written when a context opens, from what
// the function says then.
namespace {
void present_gid_types(ibv_context* ctx, const device_entry& e) {
    // The class directory make_entry() chose, if any (the function's own sysfs directory
    // is not one to write in).
    const std::string view = e.dev.ibdev_path;
    if (view.starts_with("/sys/bus/pci/")) return;
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) != 0) return;
    for (unsigned port = 1; port <= da.phys_port_cnt; ++port) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &pa) != 0) continue;
        const char* type = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE v2\n" : "IB/RoCE v1\n";
        std::string dir = view + "/ports";
        ::mkdir(dir.c_str(), 0755);
        dir += "/" + std::to_string(port);
        ::mkdir(dir.c_str(), 0755);
        dir += "/gid_attrs";
        ::mkdir(dir.c_str(), 0755);
        dir += "/types";
        ::mkdir(dir.c_str(), 0755);
        const int count = std::min(pa.gid_tbl_len, 32);
        for (int i = 0; i < count; ++i) {
            ibv_gid g{};
            static const ibv_gid zero{};
            if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), i, &g) != 0 || std::memcmp(&g, &zero, sizeof g) == 0) {
                continue;
            }
            const std::string file = dir + "/" + std::to_string(i);
            const cxv::unique_fd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444));
            if (!fd) continue;
            (void)!::write(fd.get(), type, std::strlen(type));
        }
    }
}
}  // namespace

// ibv_open_device(3): the function brought up through VFIO (cxv_open_device); NULL with
// errno set (and cxv's reason on stderr) when it cannot be, e.g. when another process
// has it open.
CXV_ABI_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
    device_entry& e = *entry_of(device);
    ibv_context* ctx = cxv_open_device(e.bdf);
    if (ctx == nullptr) {
        const int saved = errno;
        std::fprintf(stderr, "cxv libibverbs: %s: %s\n", e.bdf, cxv_last_error());
        errno = saved;
        return nullptr;
    }
    ctx->device = device;
    install_context_ops(ctx);
    if (!e.ids_known) {
        if (const int r = read_ids(ctx, e); r != 0) {
            const bool attached = cxv::verbs_device(ctx).hca().attached();
            std::fprintf(stderr, "cxv libibverbs: %s: reading the node GUID%s: %s\n", e.bdf,
                         attached ? " through cxvd" : "", std::strerror(r));
            cxv_close_device(ctx);
            return fail_null<ibv_context>(r);
        }
    }
    ctx->cmd_fd = command_fd();
    present_gid_types(ctx, e);
    return ctx;
}

// ibv_close_device(3): 0, as with rdma-core, also while objects of the context live: the
// context then stays until the last of them is destroyed (cxv_close_device_deferred),
// so that a program that closes first and destroys after, or never, neither crashes nor
// finds the objects gone under it; the function is torn down when the last context of
// it goes. cmd_fd is closed here, as rdma-core closes its uverbs fd.
CXV_ABI_EXPORT int ibv_close_device(ibv_context* context) {
    if (context->cmd_fd >= 0) ::close(context->cmd_fd);
    context->cmd_fd = -1;
    return cxv_close_device_deferred(context);
}

CXV_ABI_EXPORT ibv_context* ibv_import_device(int) { return fail_null<ibv_context>(EOPNOTSUPP); }

// --- For cxv's provider libraries (providers.h; libibverbs.map's CXV_PRIVATE_1) --------

CXV_ABI_EXPORT bool cxv_abi_owns_device(ibv_device* device) {
    std::lock_guard lock(list_mu);
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return &e->dev == device; });
}

CXV_ABI_EXPORT const void* cxv_abi_hca_caps(ibv_context* ctx) { return cxv::verbs_device(ctx).hca().caps().data(); }

// --- sysfs helpers: a VFIO function has no RDMA sysfs; plain file reads as rdma-core's --

CXV_ABI_EXPORT const char* ibv_get_sysfs_path(void) { return "/sys"; }

CXV_ABI_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
    char path[512];
    std::snprintf(path, sizeof(path), "%s/%s", dir, file);
    const cxv::unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd) return -1;
    const ssize_t n = ::read(fd.get(), buf, size);
    if (n <= 0) return -1;
    std::size_t len = static_cast<std::size_t>(n);
    if (len == size) --len;
    if (len > 0 && buf[len - 1] == '\n') --len;
    buf[len] = '\0';
    return static_cast<int>(len);
}

// --- fork: with ibv_fork_init(), registered memory is MADV_DONTFORK (ibv_fork_init(3)) --

CXV_ABI_EXPORT int ibv_fork_init(void) {
    fork_protection = true;
    return 0;
}
CXV_ABI_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) {
    return fork_protection ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

namespace {

// How many registrations hold each page, as a step function: a key starts a run of
// pages that many ranges hold, up to the next key (rdma-core counts the same way, so
// that ibv_dontfork_range and ibv_dofork_range nest). A page is advised MADV_DONTFORK
// when its count leaves 0 and MADV_DOFORK when it comes back to 0: deregistering one MR
// leaves the pages another MR shares protected.
std::mutex fork_mu;
std::map<std::uintptr_t, unsigned> fork_holds;

// A run boundary at `a` (its count carried from the run it splits).
std::map<std::uintptr_t, unsigned>::iterator boundary_at(std::uintptr_t a) {
    auto it = fork_holds.upper_bound(a);
    const unsigned count = it == fork_holds.begin() ? 0 : std::prev(it)->second;
    return fork_holds.try_emplace(a, count).first;
}

// Runs in [first, last] that repeat the count before them (or hold 0 at the start) go.
void merge_runs(std::uintptr_t first, std::uintptr_t last) {
    auto it = fork_holds.lower_bound(first);
    if (it != fork_holds.begin()) --it;
    while (it != fork_holds.end() && it->first <= last) {
        const bool repeats = it == fork_holds.begin() ? it->second == 0 : std::prev(it)->second == it->second;
        it = repeats ? fork_holds.erase(it) : std::next(it);
    }
}

int madvise_runs(const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& runs, int advice) {
    int err = 0;
    for (const auto& [from, to] : runs) {
        if (::madvise(reinterpret_cast<void*>(from), to - from, advice) != 0 && err == 0) err = errno;
    }
    return err;
}

int advise(void* base, size_t size, int advice) {
    if (!fork_protection || size == 0) return 0;
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<std::uintptr_t>(base) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(base) + size + page - 1) & ~(page - 1);
    if (start >= end) return 0;
    const bool hold = advice == MADV_DONTFORK;
    std::lock_guard lock(fork_mu);
    boundary_at(start);
    const auto stop = boundary_at(end);
    // The runs whose count crosses 0 (a release of pages nobody holds changes nothing).
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> edges;
    for (auto it = fork_holds.find(start); it != stop; ++it) {
        const std::uintptr_t to = std::next(it)->first;
        if (hold) {
            if (it->second++ == 0) edges.emplace_back(it->first, to);
        } else if (it->second > 0 && --it->second == 0) {
            edges.emplace_back(it->first, to);
        }
    }
    int err = madvise_runs(edges, advice);
    if (err != 0 && hold) {
        // Not protected after all: the counts and the advice go back as they were.
        madvise_runs(edges, MADV_DOFORK);
        for (auto it = fork_holds.find(start); it != fork_holds.end() && it->first < end; ++it) --it->second;
    }
    merge_runs(start, end);
    return err;
}

}  // namespace

CXV_ABI_EXPORT int ibv_dontfork_range(void* base, size_t size) { return advise(base, size, MADV_DONTFORK); }
CXV_ABI_EXPORT int ibv_dofork_range(void* base, size_t size) { return advise(base, size, MADV_DOFORK); }
