// cxv exec: an unmodified, dynamically linked libibverbs or librdmacm program on cxv.
// The dynamic loader finds cxv's libibverbs.so.1 and librdmacm.so.1, and its provider
// libraries libmlx5.so.1 and libefa.so.1 that programs such as perftest link directly
// (api/abi, one directory), before rdma-core's because that directory comes first on
// LD_LIBRARY_PATH; LD_PRELOAD is left as it is (cxv-sim run presents its functions
// through it). With CXV_DAEMON set (or --socket), the library lists and opens the
// functions of that cxvd instead.
#include "tools/cxv/exec.h"

#include <limits.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

int usage() {
    std::fprintf(stderr, "usage: cxv exec [--device BDF] [--socket PATH] [--] PROGRAM [ARGS...]\n");
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
            usage();
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
    ::execvp(argv[i], argv + i);
    std::fprintf(stderr, "cxv exec: %s: %s\n", argv[i], std::strerror(errno));
    return 127;
}

}  // namespace cxv::tool
