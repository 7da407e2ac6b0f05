// cxv exec: an unmodified, dynamically linked libibverbs or librdmacm program on cxv.
// The dynamic loader finds cxv's libibverbs.so.1 and librdmacm.so.1, and its provider
// libraries libmlx5.so.1 and libefa.so.1 that programs such as perftest link directly
// (api/abi, one directory), before rdma-core's because that directory comes first on
// LD_LIBRARY_PATH; LD_PRELOAD is left as it is (cxv-sim run presents its functions
// through it). With CXV_DAEMON set (or --socket), the library lists and opens the
// functions of that cxvd instead. Each device listed gets its /dev/infiniband node
// (device_nodes below).
#include "tools/cxv/exec.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <link.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"

namespace cxv::tool {

namespace {

constexpr const char* kLibrary = "libibverbs.so.1";

bool has_library(const std::string& dir) {
    struct stat st{};
    return !dir.empty() && ::stat((dir + "/" + kLibrary).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string self_path() {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return {};
    exe[n] = '\0';
    return exe;
}

// Where the library is: $CXV_LIBDIR; else, for cxv at PREFIX/bin/cxv, PREFIX/lib/cxv
// (the install layout) or the cxv binary's own directory; else the Bazel runfiles of
// cxv (cxv.runfiles/cxv/api/abi). Empty when none has it.
std::string library_dir() {
    if (const char* d = std::getenv("CXV_LIBDIR"); d != nullptr && *d != '\0') return has_library(d) ? d : "";
    const std::string exe = self_path();
    if (exe.empty()) return {};
    const std::string bin = exe.substr(0, exe.rfind('/'));
    std::vector<std::string> candidates = {bin + "/../lib/cxv", bin};
    if (const char* r = std::getenv("RUNFILES_DIR"); r != nullptr && *r != '\0') {
        candidates.push_back(std::string(r) + "/cxv/api/abi");
    }
    candidates.push_back(exe + ".runfiles/cxv/api/abi");
    for (const auto& c : candidates) {
        if (!has_library(c)) continue;
        char real[PATH_MAX];
        return ::realpath(c.c_str(), real) != nullptr ? std::string(real) : c;
    }
    return {};
}

// A sanitizer build of cxv: its libibverbs.so.1 needs the ASan runtime loaded first,
// also into a program built without it (cxv-sim run does the same for its preload
// library; through a cxvd there is no cxv-sim in between). The runtime's path is the one
// this process loaded; empty in an ordinary build.
std::string asan_runtime() {
#if defined(__SANITIZE_ADDRESS__)
    std::string path;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            const char* name = info->dlpi_name;
            if (name == nullptr || std::strstr(name, "libasan.so") == nullptr) return 0;
            *static_cast<std::string*>(out) = name;
            return 1;
        },
        &path);
    return path;
#else
    return {};
#endif
}

void add_to_list(const char* var, const std::string& item, char sep, bool first) {
    const char* cur = std::getenv(var);
    const std::string value = cur != nullptr ? cur : "";
    if (value.find(item) != std::string::npos) return;
    const std::string joined = value.empty() ? item : first ? item + sep + value : value + sep + item;
    ::setenv(var, joined.c_str(), 1);
}

// rdma-core lists a device only where its character device /dev/infiniband/<dev_name>
// exists, and programs rely on that: UCX opens a memory domain only on a device whose
// node it may read and write (uct_ib_device_is_accessible). A function on VFIO has no
// kernel uverbs node, so for the program's sake cxv exec gives it, in a mount namespace
// of its own, a tmpfs on /dev/infiniband with one node per device of cxv's libibverbs,
// named by its dev_name: the device cxv's contexts open as their cmd_fd (/dev/null, as
// docs/exec.md says), read-write for everyone, as the list holds only functions this
// process may open. The host's kernel nodes, if any, are hidden from the program, which
// sees cxv's devices only. Without the privilege to make a mount namespace
// (CAP_SYS_ADMIN) nothing is presented, and such programs see no device.
//
// Beside the nodes, under /dev/infiniband/sysfs, each device gets what a kernel's RDMA
// class directory gives programs that look at the PCI function behind a device: a
// directory per PCI address with the function's identity attributes, copied from its
// sysfs directory (vendor, device, subsystem IDs, NUMA node, link speed and width), and
// in it infiniband/<device name>, which cxv's libibverbs then gives as the device's
// ibdev_path (devices.cc), as rdma-core's resolves to .../<PCI address>/infiniband/<name>
// on a kernel. UCX takes the PCI IDs from there (the directory two levels up from
// ibdev_path) to know an mlx5 device and open its mlx5 transports; a function on VFIO
// has no RDMA class directory of its own.
void present_function(const std::string& bdf, const std::string& name) {
    if (bdf.empty() || bdf.find('/') != std::string::npos || name.find('/') != std::string::npos) return;
    const std::string root = "/dev/infiniband/sysfs";
    const std::string fn = root + "/" + bdf;
    ::mkdir(root.c_str(), 0755);
    if (::mkdir(fn.c_str(), 0755) != 0 && errno != EEXIST) return;
    for (const char* attr : {"vendor", "device", "subsystem_vendor", "subsystem_device", "class", "numa_node",
                             "local_cpulist", "current_link_speed", "current_link_width", "max_link_speed",
                             "max_link_width"}) {
        const unique_fd in(::open(("/sys/bus/pci/devices/" + bdf + "/" + attr).c_str(), O_RDONLY | O_CLOEXEC));
        if (!in) continue;
        char buf[256];
        const ssize_t n = ::read(in.get(), buf, sizeof(buf));
        if (n <= 0) continue;
        const unique_fd out(::open((fn + "/" + attr).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444));
        if (!out) continue;
        (void)!::write(out.get(), buf, static_cast<std::size_t>(n));
    }
    ::mkdir((fn + "/infiniband").c_str(), 0755);
    ::mkdir((fn + "/infiniband/" + name).c_str(), 0755);
    // /sys/class/infiniband/<name>, as the kernel names the class directory (the overlay
    // of present_class() shows it): a link to the directory above.
    ::mkdir("/dev/infiniband/class", 0755);
    ::mkdir("/dev/infiniband/class/infiniband", 0755);
    (void)!::symlink((fn + "/infiniband/" + name).c_str(), ("/dev/infiniband/class/infiniband/" + name).c_str());
}

// /sys/class with the links above in an infiniband/ directory of its own, in the
// program's mount namespace: a read-only overlay of /dev/infiniband/class over the real
// /sys/class, whose other classes (net, ...) stay as they are. Programs read RDMA class
// files at those absolute paths (UCX: /sys/class/infiniband/<dev>/ports/<p>/gid_attrs/
// types/<i>, the RoCE version of a GID, which cxv's libibverbs writes there when a context
// opens). Nothing is shown where the host has an RDMA class of its own (its kernel
// devices stay visible as they are) or where overlayfs cannot stack on sysfs.
void present_class() {
    struct stat st{};
    if (::stat("/sys/class/infiniband", &st) == 0) return;
    if (::stat("/dev/infiniband/class/infiniband", &st) != 0) return;
    (void)::mount("cxv", "/sys/class", "overlay", MS_RDONLY,
                  "lowerdir=/dev/infiniband/class:/sys/class");
}

void present_device_nodes(const std::string& dir) {
    // First, while this process has one thread (unshare refuses CLONE_NEWNS to a process
    // whose threads share its filesystem context, and the listing may start some).
    if (::unshare(CLONE_NEWNS) != 0) return;
    void* lib = ::dlopen((dir + "/" + kLibrary).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    using list_fn = ibv_device** (*)(int*);
    using free_fn = void (*)(ibv_device**);
    const auto get = reinterpret_cast<list_fn>(::dlsym(lib, "ibv_get_device_list"));
    const auto put = reinterpret_cast<free_fn>(::dlsym(lib, "ibv_free_device_list"));
    std::vector<std::string> names;
    std::vector<std::pair<std::string, std::string>> functions;  // PCI address, device name
    if (get != nullptr && put != nullptr) {
        // The program lists the devices again and says what went wrong, once: not here.
        const unique_fd saved(::dup(2));
        if (const unique_fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC)); null) ::dup2(null.get(), 2);
        int n = 0;
        if (ibv_device** list = get(&n); list != nullptr) {
            for (int k = 0; k < n; ++k) {
                names.emplace_back(list[k]->dev_name);
                // dev_path is the function's sysfs directory, /sys/bus/pci/devices/<address>.
                const std::string path = list[k]->dev_path;
                functions.emplace_back(path.substr(path.rfind('/') + 1), list[k]->name);
            }
            put(list);
        }
        if (saved) ::dup2(saved.get(), 2);
    }
    // The library stays loaded until execvp: its device entries live as long as the process.
    if (names.empty()) return;
    // Nothing mounted here reaches the host's namespace.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return;
    // The mount point (an empty directory where the host has no RDMA devices).
    if (::mkdir("/dev/infiniband", 0755) != 0 && errno != EEXIST) return;
    if (::mount("cxv", "/dev/infiniband", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0) return;
    struct stat null_dev{};
    if (::stat("/dev/null", &null_dev) != 0 || !S_ISCHR(null_dev.st_mode)) return;
    for (const auto& name : names) {
        const std::string node = "/dev/infiniband/" + name;
        if (::mknod(node.c_str(), S_IFCHR | 0666, null_dev.st_rdev) == 0) ::chmod(node.c_str(), 0666);
    }
    for (const auto& [bdf, name] : functions) present_function(bdf, name);
    present_class();
}

void print_usage(FILE* out) {
    std::fprintf(out,
                 "usage: cxv exec [--device BDF] [--socket PATH] [--] PROGRAM [ARGS...]\n"
                 "Runs an unmodified libibverbs/librdmacm program on cxv (docs/exec.md).\n"
                 "  --device BDF     show the program this function alone (as CXV_DEVICE=BDF)\n"
                 "  --socket PATH    be a client of the cxvd at PATH (as CXV_DAEMON=PATH)\n"
                 "environment:\n"
                 "  CXV_DEVICE       the function to show, DDDD:BB:DD.F (default: every mlx5 function on vfio-pci)\n"
                 "  CXV_DAEMON       a cxvd's UNIX socket: list and open its functions instead of VFIO's\n"
                 "  CXV_LIBDIR       where cxv's libibverbs.so.1 is (default: BIN/../lib/cxv, then beside cxv)\n");
}

int usage() {
    print_usage(stderr);
    return 2;
}

}  // namespace

int exec_program(int argc, char** argv) {
    // argv[0] "cxv", argv[1] "exec".
    int i = 2;
    std::string device, socket;
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a == "--device" && i + 1 < argc) {
            device = argv[++i];
        } else if (a == "--socket" && i + 1 < argc) {
            socket = argv[++i];
        } else if (a.rfind("--socket=", 0) == 0) {
            socket = a.substr(9);
        } else if (a.rfind("--device=", 0) == 0) {
            device = a.substr(9);
        } else if (a == "-h" || a == "--help") {
            print_usage(stdout);
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            return usage();
        } else {
            break;
        }
    }
    if (i >= argc) return usage();
    const std::string dir = library_dir();
    if (dir.empty()) {
        std::fprintf(stderr, "cxv exec: cannot find cxv's %s (set CXV_LIBDIR to its directory)\n", kLibrary);
        return 2;
    }
    const char* old = std::getenv("LD_LIBRARY_PATH");
    const std::string path = old != nullptr && *old != '\0' ? dir + ":" + old : dir;
    ::setenv("LD_LIBRARY_PATH", path.c_str(), 1);
    if (!device.empty()) ::setenv("CXV_DEVICE", device.c_str(), 1);
    // Through a cxvd: the program is one of its clients, opening its functions through the
    // socket (no VFIO group, no cxv-sim needed on the model).
    if (!socket.empty()) ::setenv("CXV_DAEMON", socket.c_str(), 1);
    if (const std::string rt = asan_runtime(); !rt.empty()) {
        add_to_list("LD_PRELOAD", rt, ':', true);
        add_to_list("ASAN_OPTIONS", "verify_asan_link_order=0", ':', false);
    }
    present_device_nodes(dir);
    ::execvp(argv[i], argv + i);
    std::fprintf(stderr, "cxv exec: %s: %s\n", argv[i], std::strerror(errno));
    return 127;
}

}  // namespace cxv::tool
