// cxv-sim: runs a program with emulated ConnectX functions present as vfio-pci devices.
//
//   cxv-sim run  [options] -- COMMAND [ARGS...]   exec COMMAND with the preload library
//   cxv-sim list [options]                        the PCI addresses `run` presents
//
// The launcher settles every setting (defaults, config file, inherited CXV_SIM_*
// environment, its own options, in that order) and hands the complete set to the
// library through the environment, so that what `list` prints is what `run` presents,
// and a nested cxv-sim starts from what its parent chose.
#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/unique_fd.h"
#include "sim/vfio/options.h"

namespace {

using cxv::sim::vfio::environment_name;
using cxv::sim::vfio::options;

constexpr const char* kLibrary = "libcxv-sim-preload.so";

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: cxv-sim run [options] -- COMMAND [ARGS...]\n"
                 "       cxv-sim list [options]\n"
                 "options:\n"
                 "  --devices N            emulated functions (default 1)\n"
                 "  --port-type ib|eth     port type of every function (default ib)\n"
                 "  --link-up-ms N         link training time after INIT_HCA or PAOS up (default 300)\n"
                 "  --fabric DIR           cable the ports to the segment shared by every process\n"
                 "                         started with DIR (created if missing); DIR/link.conf,\n"
                 "                         if present, sets link_* faults for the whole fabric\n"
                 "  --pcap FILE            write every frame the ports send or receive to FILE\n"
                 "  --config FILE          settings file (key = value lines)\n"
                 "  --first-bdf ADDR       PCI address of the first function (default 0000:c5:00.0)\n"
                 "  --first-group N        IOMMU group of the first function (default 120)\n"
                 "  --set KEY=VALUE        any setting (see docs/device-model.md)\n"
                 "Every setting can also come from the environment: CXV_SIM_<KEY>.\n");
}

int die(const std::string& message) {
    std::fprintf(stderr, "cxv-sim: %s\n", message.c_str());
    return 2;
}

std::string library_path() {
    if (const char* p = std::getenv("CXV_SIM_PRELOAD"); p && *p) return p;
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return kLibrary;
    exe[n] = '\0';
    std::string dir(exe);
    dir.resize(dir.rfind('/') + 1);
    // Beside the launcher (the build tree), else in an installed tree's lib/cxv/
    // (PREFIX/bin/cxv-sim, PREFIX/lib/cxv/: docs/install.md).
    const std::string beside = dir + kLibrary;
    const std::string installed = dir + "../lib/cxv/" + kLibrary;
    return ::access(beside.c_str(), R_OK) != 0 && ::access(installed.c_str(), R_OK) == 0 ? installed : beside;
}

// The sanitizer runtime this launcher (and so the library next to it) was built with, if
// any: an ASan-built library needs that runtime loaded first, also into programs that
// were not built with it.
std::string asan_runtime() {
#if defined(__SANITIZE_ADDRESS__)
    std::string found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libasan.so") != nullptr) {
                *static_cast<std::string*>(out) = info->dlpi_name;
                return 1;
            }
            return 0;
        },
        &found);
    return found;
#else
    return {};
#endif
}

void prepend_list(const char* var, const std::string& item, char sep) {
    const char* cur = std::getenv(var);
    std::string value = cur ? cur : "";
    if (value.find(item) != std::string::npos) return;
    setenv(var, (value.empty() ? item : item + sep + value).c_str(), 1);
}

void append_list(const char* var, const std::string& item, char sep) {
    const char* cur = std::getenv(var);
    std::string value = cur ? cur : "";
    if (value.find(item) != std::string::npos) return;
    if (!value.empty()) value += sep;
    value += item;
    setenv(var, value.c_str(), 1);
}

std::string absolute(const std::string& path) {
    if (path.empty() || path[0] == '/') return path;
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == nullptr) return path;
    return std::string(cwd) + "/" + path;
}

// The fabric's directory, made if missing (by every process that starts on it: several
// may start together, each with its place given).
cxv::status make_fabric_dir(const std::string& dir) {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return cxv::error{errno, fmt::format("fabric {}: {}", dir, std::strerror(errno))};
    }
    return cxv::ok_status();
}

// The next place on the fabric of `dir`: a counter in DIR/.fabric-index, taken under a
// lock so that processes starting together get distinct places.
cxv::result<unsigned> take_fabric_index(const std::string& dir) {
    const std::string path = dir + "/.fabric-index";
    const cxv::unique_fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) return cxv::error{errno, fmt::format("fabric {}: {}: {}", dir, path, std::strerror(errno))};
    flock(fd.get(), LOCK_EX);
    char buf[32] = {};
    const ssize_t n = pread(fd.get(), buf, sizeof buf - 1, 0);
    const unsigned index = n > 0 ? static_cast<unsigned>(std::strtoul(buf, nullptr, 10)) : 0;
    const std::string next = std::to_string((index + 1) % (cxv::sim::vfio::kMaxFabricIndex + 1)) + "\n";
    const bool written = ftruncate(fd.get(), 0) == 0 && pwrite(fd.get(), next.data(), next.size(), 0) == static_cast<ssize_t>(next.size());
    flock(fd.get(), LOCK_UN);
    if (!written) return cxv::error{EIO, fmt::format("fabric {}: cannot update {}", dir, path)};
    return index;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const std::string verb = argv[1];
    if (verb == "-h" || verb == "--help" || verb == "help") {
        usage(stdout);
        return 0;
    }
    if (verb == "--version") {
        std::printf("cxv-sim %s\n", CXV_VERSION);  // //:version.bzl
        return 0;
    }
    if (verb != "run" && verb != "list") {
        usage(stderr);
        return 2;
    }
    // Precedence, lowest first: defaults, the config file (--config, else
    // CXV_SIM_CONFIG), the CXV_SIM_* variables, the other options in order.
    options opts;
    const char* config = nullptr;
    for (int j = 2; j + 1 < argc && std::strcmp(argv[j], "--") != 0; ++j) {
        if (std::strcmp(argv[j], "--config") == 0) config = argv[j + 1];
    }
    if (config == nullptr) {
        if (auto s = opts.load_environment(); !s) return die(s.error().message);
    } else {
        if (auto s = opts.load_file(config); !s) return die(s.error().message);
        if (auto s = opts.load_variables(); !s) return die(s.error().message);
    }
    std::vector<std::pair<std::string, std::string>> given;
    int i = 2;
    for (; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        auto value = [&](const char* name) -> const char* {
            if (i + 1 >= argc) return nullptr;
            (void)name;
            return argv[++i];
        };
        std::string key;
        if (a == "--devices") {
            key = "devices";
        } else if (a == "--port-type") {
            key = "port_type";
        } else if (a == "--link-up-ms") {
            key = "link_up_ms";
        } else if (a == "--fabric") {
            key = "fabric_dir";
        } else if (a == "--pcap") {
            key = "pcap";
        } else if (a == "--first-bdf") {
            key = "first_bdf";
        } else if (a == "--first-group") {
            key = "first_group";
        } else if (a == "--config") {
            if (value("--config") == nullptr) return die("--config needs a file");
            continue;  // read above
        } else if (a == "--set") {
            const char* v = value("--set");
            const char* eq = v ? std::strchr(v, '=') : nullptr;
            if (eq == nullptr) return die("--set needs KEY=VALUE");
            given.emplace_back(std::string(v, eq), std::string(eq + 1));
            continue;
        } else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return die(fmt::format("unknown option '{}'", a));
        }
        const char* v = value(a.c_str());
        if (v == nullptr) return die(fmt::format("{} needs a value", a));
        given.emplace_back(key, v);
    }
    for (auto& [k, v] : given) {
        if (k == "fabric_dir" || k == "pcap") v = absolute(v);  // the program may change directory
        if (auto s = opts.set(k, v); !s) return die(s.error().message);
    }
    // A shared fabric's own link faults (DIR/link.conf, link_* settings), for every process
    // on it; this process's options still win.
    if (const std::string conf = opts.model.fabric_dir + "/link.conf";
        !opts.model.fabric_dir.empty() && access(conf.c_str(), R_OK) == 0) {
        if (auto s = opts.load_file(conf, "link_"); !s) return die(s.error().message);
        for (const auto& [k, v] : given) {
            if (auto s = opts.set(k, v); !s) return die(s.error().message);
        }
    }
    // A shared fabric: this process takes the next place on it, unless one was given.
    const bool index_given = std::any_of(given.begin(), given.end(), [](const auto& kv) {
        return kv.first == "fabric_index";
    }) || std::getenv(environment_name("fabric_index").c_str()) != nullptr;
    if (verb == "run" && !opts.model.fabric_dir.empty()) {
        if (auto made = make_fabric_dir(opts.model.fabric_dir); !made) return die(made.error().message);
    }
    if (verb == "run" && !opts.model.fabric_dir.empty() && !index_given) {
        auto index = take_fabric_index(opts.model.fabric_dir);
        if (!index) return die(index.error().message);
        opts.fabric_index = index.value();
    }
    auto functions = opts.functions();
    if (!functions) return die(functions.error().message);

    if (verb == "list") {
        if (i < argc) return die("list takes no command");
        for (const auto& f : functions.value()) std::printf("%s\n", f.address.str().c_str());
        return 0;
    }
    if (i >= argc) {
        usage(stderr);
        return die("run needs a command after --");
    }
    const std::string lib = library_path();
    if (access(lib.c_str(), R_OK) != 0) {
        return die(fmt::format("cannot find the preload library {} (set CXV_SIM_PRELOAD)", lib));
    }
    // One binding (driver, driver_override) for every process of this run, as on a host.
    if (const int b = ::memfd_create(cxv::sim::vfio::kBindingName, 0); b >= 0) {
        setenv(cxv::sim::vfio::kBindingVariable, std::to_string(b).c_str(), 1);
    }
    unsetenv("CXV_SIM_CONFIG");  // already folded into the settings below
    for (const auto& [k, v] : opts.settings()) setenv(environment_name(k).c_str(), v.c_str(), 1);
    append_list("LD_PRELOAD", lib, ':');
    if (const std::string rt = asan_runtime(); !rt.empty()) prepend_list("LD_PRELOAD", rt, ':');
    // An ASan-built program checks that its runtime is the first library loaded; the
    // preload library legitimately comes before it.
    append_list("ASAN_OPTIONS", "verify_asan_link_order=0", ':');
    execvp(argv[i], argv + i);
    const int e = errno;
    std::fprintf(stderr, "cxv-sim: cannot run %s: %s\n", argv[i], std::strerror(e));
    return e == ENOENT ? 127 : 126;
}
