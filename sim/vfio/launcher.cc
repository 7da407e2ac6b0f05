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

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/unique_fd.h"
#include "sim/vfio/options.h"

namespace {

using cxv::sim::vfio::environment_name;
using cxv::sim::vfio::options;

constexpr const char* kLibrary = "libcxv-sim-preload.so";

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

// The options of `run` and `list`, each a setting (sim/vfio/options.h) by another name.
struct setting_option {
    const char* flag;
    const char* key;
    const char* type;
    const char* help;
};
constexpr setting_option kSettingOptions[] = {
    {"--devices", "devices", "N", "emulated functions (default 1)"},
    {"--port-type", "port_type", "ib|eth", "port type of every function: ib or eth (default ib)"},
    {"--link-up-ms", "link_up_ms", "N", "link training time after INIT_HCA or PAOS up (default 300)"},
    {"--fabric", "fabric_dir", "DIR",
     "cable the ports to the segment shared by every process started with DIR (created if missing); "
     "DIR/link.conf, if present, sets link_* faults for the whole fabric"},
    {"--pcap", "pcap", "FILE", "write every frame the ports send or receive to FILE"},
    {"--first-bdf", "first_bdf", "ADDR", "PCI address of the first function (default 0000:c5:00.0)"},
    {"--first-group", "first_group", "N", "IOMMU group of the first function (default 120)"},
};

// Every option may be given more than once; what counts is the order on the command line
// (a later --set or option overrides an earlier one), so each keeps all its values and
// the settings are read back in CLI11's parse order.
void add_setting_options(CLI::App& cmd) {
    for (const setting_option& o : kSettingOptions) {
        cmd.add_option(o.flag, o.help)->type_name(o.type)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
    cmd.add_option("--config", "settings file (key = value lines)")
        ->type_name("FILE")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    cmd.add_option("--set", "any setting, KEY=VALUE (see docs/device-model.md)")
        ->type_name("KEY=VALUE")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// The settings `cmd` was given, in command-line order; `config` is the last --config.
cxv::result<std::vector<std::pair<std::string, std::string>>> given_settings(const CLI::App& cmd,
                                                                            std::string& config) {
    std::vector<std::pair<std::string, std::string>> given;
    std::vector<std::pair<const CLI::Option*, std::size_t>> taken;  // values read per option
    for (const CLI::Option* opt : cmd.parse_order()) {
        auto at = std::find_if(taken.begin(), taken.end(), [&](const auto& t) { return t.first == opt; });
        if (at == taken.end()) at = taken.insert(taken.end(), {opt, 0});
        const std::string& v = opt->results().at(at->second++);
        const std::string name = opt->get_name();
        if (name == "--config") {
            config = v;
        } else if (name == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos) return cxv::error{EINVAL, "--set needs KEY=VALUE"};
            given.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        } else {
            for (const setting_option& o : kSettingOptions) {
                if (name == o.flag) given.emplace_back(o.key, v);
            }
        }
    }
    return given;
}

}  // namespace

int main(int argc, char** argv) {
    // What follows "--" is the command to run, never an option of ours.
    int dash = 1;
    while (dash < argc && std::strcmp(argv[dash], "--") != 0) ++dash;
    std::vector<const char*> ours(argv, argv + dash);
    if (ours.size() == 2 && std::strcmp(ours[1], "help") == 0) ours[1] = "--help";

    CLI::App app{"cxv-sim: runs a program with emulated ConnectX functions present as vfio-pci devices"};
    app.set_version_flag("--version", std::string("cxv-sim ") + CXV_VERSION);  // //:version.bzl
    app.require_subcommand(1);
    app.footer("Every setting can also come from the environment: CXV_SIM_<KEY>. Precedence, lowest first: "
               "defaults, the config file (--config, else CXV_SIM_CONFIG), the CXV_SIM_* variables, the "
               "options in command-line order.");
    CLI::App* run = app.add_subcommand("run", "exec a command with the preload library: cxv-sim run [options] -- "
                                              "COMMAND [ARGS...]");
    CLI::App* list = app.add_subcommand("list", "print the PCI addresses `run` presents");
    add_setting_options(*run);
    add_setting_options(*list);
    try {
        app.parse(static_cast<int>(ours.size()), ours.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    const CLI::App& cmd = *run ? *run : *list;
    std::string config;
    auto given = given_settings(cmd, config);
    if (!given) return die(given.error().message);

    options opts;
    if (config.empty()) {
        if (auto s = opts.load_environment(); !s) return die(s.error().message);
    } else {
        if (auto s = opts.load_file(config); !s) return die(s.error().message);
        if (auto s = opts.load_variables(); !s) return die(s.error().message);
    }
    for (auto& [k, v] : given.value()) {
        if (k == "fabric_dir" || k == "pcap") v = absolute(v);  // the program may change directory
        if (auto s = opts.set(k, v); !s) return die(s.error().message);
    }
    // A shared fabric's own link faults (DIR/link.conf, link_* settings), for every process
    // on it; this process's options still win.
    if (const std::string conf = opts.model.fabric_dir + "/link.conf";
        !opts.model.fabric_dir.empty() && access(conf.c_str(), R_OK) == 0) {
        if (auto s = opts.load_file(conf, "link_"); !s) return die(s.error().message);
        for (const auto& [k, v] : given.value()) {
            if (auto s = opts.set(k, v); !s) return die(s.error().message);
        }
    }
    // A shared fabric: this process takes the next place on it, unless one was given.
    const bool index_given = std::any_of(given->begin(), given->end(), [](const auto& kv) {
        return kv.first == "fabric_index";
    }) || std::getenv(environment_name("fabric_index").c_str()) != nullptr;
    if (*run && !opts.model.fabric_dir.empty()) {
        if (auto made = make_fabric_dir(opts.model.fabric_dir); !made) return die(made.error().message);
    }
    if (*run && !opts.model.fabric_dir.empty() && !index_given) {
        auto index = take_fabric_index(opts.model.fabric_dir);
        if (!index) return die(index.error().message);
        opts.fabric_index = index.value();
    }
    auto functions = opts.functions();
    if (!functions) return die(functions.error().message);

    const int i = dash + 1;  // the command, if any
    if (*list) {
        if (dash < argc) return die("list takes no command");
        for (const auto& f : functions.value()) std::printf("%s\n", f.address.str().c_str());
        return 0;
    }
    if (i >= argc) {
        return die("run needs a command after -- (cxv-sim --help)");
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
