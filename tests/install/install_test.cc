// cxv consumed as a user outside this source tree consumes it (docs/install.md): the
// installed tree (//tools/package:tree, what `tools/install PREFIX` unpacks) and the Debian
// package (//tools/package:deb), installed with dpkg into a root of its own. The examples
// of examples/ are built against each with nothing but the tree (pkg-config; CMake's
// find_package), shared and static, and run on the model through the installed cxv-sim;
// an unmodified verbs program runs through the installed `cxv exec`.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/exec/processes.h"
#include "tests/skip.h"

namespace {

using namespace cxv::test;
using namespace std::chrono_literals;

#ifdef CXV_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
const char* const kWhySanitized =
    "the installed tree is the release build's; the sanitizer build's objects need its runtimes in every program "
    "that links them";

std::string runfile(const std::string& path) { return env_path("TEST_SRCDIR") + "/cxv/" + path; }

// `script` run by /bin/sh in `dir`, with its output. The sbin directories are on its PATH
// as on root's (bazel test gives /bin:/usr/bin:/usr/local/bin): dpkg runs ldconfig.
ran sh(const std::string& dir, const std::string& script, std::chrono::seconds limit = 300s) {
    return run({"/bin/sh", "-c", "set -e; PATH=/usr/local/sbin:/usr/sbin:/sbin:$PATH; cd '" + dir + "'; " + script},
               dir + "/sh.log", limit);
}

#define CHECK_RAN(r)                 \
    do {                             \
        INFO((r).output);            \
        CHECK((r).status == 0);      \
    } while (0)

// The tree unpacked at a prefix of its own.
struct installed {
    scratch s;
    std::string prefix = s.dir + "/prefix";
    installed() {
        std::filesystem::create_directories(prefix);
        const ran r = sh(s.dir, "tar -C prefix -xf '" + runfile("tools/package/cxv-tree.tar") + "'");
        INFO(r.output);
        REQUIRE(r.status == 0);
    }
};

// What the two examples print when their transfers arrived intact (they exit 0 only then).
void check_examples_ran(const ran& cpp, const ran& c) {
    {
        INFO(cpp.output);
        CHECK(cpp.status == 0);
        CHECK(cpp.output.find("RECV wr 1: 15 bytes \"hello from cxv\"") != std::string::npos);
    }
    {
        INFO(c.output);
        CHECK(c.status == 0);
        CHECK(c.output.find("\"written by rdma_post_writev\"") != std::string::npos);
    }
}

// Both examples, run on two functions of the installed model, the loader pointed at `lib`.
std::pair<ran, ran> run_examples(const std::string& dir, const std::string& bin, const std::string& lib,
                                 const std::string& cpp, const std::string& c) {
    const std::string sim = "LD_LIBRARY_PATH='" + lib + "' '" + bin + "/cxv-sim' run --devices 2 -- ";
    return {sh(dir, sim + cpp, 120s), sh(dir, sim + c, 120s)};
}

std::string examples() { return runfile("examples"); }

const std::string kCmakeLists = R"(cmake_minimum_required(VERSION 3.13)
project(cxv_consumer C CXX)
find_package(cxv 0.1 REQUIRED)
add_executable(send_recv EXAMPLES/send_recv.cc)
target_link_libraries(send_recv cxv::cxv)
add_executable(rdma_write_c EXAMPLES/rdma_write_c.c)
target_link_libraries(rdma_write_c cxv::verbs)
add_executable(send_recv_static EXAMPLES/send_recv.cc)
target_link_libraries(send_recv_static cxv::cxv_static)
)";

// Builds the examples with CMake against `prefix` in `dir`/build.
ran cmake_build(const std::string& dir, const std::string& prefix) {
    std::string lists = kCmakeLists;
    for (auto at = lists.find("EXAMPLES"); at != std::string::npos; at = lists.find("EXAMPLES")) {
        lists.replace(at, 8, examples());
    }
    std::filesystem::create_directories(dir + "/src");
    std::ofstream(dir + "/src/CMakeLists.txt") << lists;
    return sh(dir, "cmake -S src -B build -DCMAKE_PREFIX_PATH='" + prefix +
                       "' -DCMAKE_BUILD_TYPE=Release >cmake.log 2>&1 || { cat cmake.log; exit 1; }; "
                       "cmake --build build -j 2");
}

TEST_CASE("the installed tree: programs, their versions, headers that stand alone, man pages" *
          skip_in_build(kSanitized, kWhySanitized)) {
    installed t;
    const std::string version = CXV_VERSION;
    for (const char* prog : {"cxv", "cxvd", "cxv-sim", "cxv-perf"}) {
        const ran r = sh(t.s.dir, "'" + t.prefix + "/bin/" + prog + "' --version");
        INFO(prog, ": ", r.output);
        CHECK(r.status == 0);
        CHECK(r.output == std::string(prog) + " " + version + "\n");
        const std::string man = slurp(t.prefix + "/share/man/man1/" + prog + ".1");
        CHECK(man.find(".TH " + [&] {
            std::string up;
            for (char ch : std::string(prog)) up += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            return up;
        }()) != std::string::npos);
        CHECK(man.find(version) != std::string::npos);
    }
    // --help everywhere; plain cxv is its help; an error names its subject once.
    for (const char* prog : {"cxv", "cxvd", "cxv-sim", "cxv-perf"}) {
        const ran r = sh(t.s.dir, "'" + t.prefix + "/bin/" + prog + "' --help");
        INFO(prog, ": ", r.output);
        CHECK(r.status == 0);
        CHECK(r.output.size() > 200);
    }
    const ran plain = sh(t.s.dir, "'" + t.prefix + "/bin/cxv'");
    CHECK(plain.status == 0);
    CHECK(plain.output.find("Subcommands:") != std::string::npos);
    const ran exec_help = sh(t.s.dir, "'" + t.prefix + "/bin/cxv' exec --help");
    for (const char* var : {"CXV_DEVICE", "CXV_DAEMON", "CXV_LIBDIR"}) CHECK(exec_help.output.find(var) != std::string::npos);
    const ran bad = sh(t.s.dir, "'" + t.prefix + "/bin/cxv-sim' run --devices 0 -- true || true");
    CHECK(bad.output == "cxv-sim: setting devices = '0': expected an integer in [1, 64]\n");
    for (const char* lib : {"libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1", "libefa.so.1",
                            "libcxv-sim-preload.so"}) {
        CHECK_MESSAGE(std::filesystem::exists(t.prefix + "/lib/cxv/" + lib), lib);
    }
    CHECK(std::filesystem::is_symlink(t.prefix + "/lib/libcxv.so"));
    // Every installed header compiles on its own with the prefix's include/cxv alone on the
    // include path (and the C API's also as C).
    std::vector<std::string> headers;
    for (const auto& e : std::filesystem::recursive_directory_iterator(t.prefix + "/include/cxv")) {
        if (e.is_regular_file()) headers.push_back(e.path().string());
    }
    CHECK(headers.size() >= 3);
    for (const auto& h : headers) {
        const ran r = sh(t.s.dir, "echo '#include \"" + h + "\"' | g++ -std=c++20 -fsyntax-only -Wall -Werror -I'" +
                                      t.prefix + "/include/cxv' -x c++ -");
        INFO(h, ": ", r.output);
        CHECK(r.status == 0);
    }
    const ran c = sh(t.s.dir, "echo '#include <api/cxv_verbs.h>' | gcc -std=c11 -fsyntax-only -Wall -Werror -I'" +
                                  t.prefix + "/include/cxv' -x c -");
    CHECK_RAN(c);
    // cxvd's unit names the installed cxvd once tools/install set its path; in the tree it
    // still carries the default.
    CHECK(slurp(t.prefix + "/lib/systemd/system/cxvd.service").find("ExecStart=") != std::string::npos);
}

TEST_CASE("pkg-config: the C++ and C examples, shared and static, built against the tree and run on the model" *
          skip_in_build(kSanitized, kWhySanitized)) {
    installed t;
    const std::string pc = "PKG_CONFIG_PATH='" + t.prefix + "/lib/pkgconfig' pkg-config ";
    const ran versions = sh(t.s.dir, pc + "--modversion cxv cxv-verbs");
    CHECK_RAN(versions);
    CHECK(versions.output == std::string(CXV_VERSION) + "\n" + CXV_VERSION + "\n");
    const ran built = sh(t.s.dir, "g++ -O2 -o send_recv '" + examples() + "/send_recv.cc' $(" + pc +
                                      "--cflags --libs cxv); gcc -O2 -o rdma_write_c '" + examples() +
                                      "/rdma_write_c.c' $(" + pc + "--cflags --libs cxv-verbs)");
    CHECK_RAN(built);
    // Static: libcxv.a named by path (beside libcxv.so, -lcxv takes the shared one), the
    // libraries it leaves open from pkg-config --static.
    const ran stat = sh(t.s.dir, "gcc -O2 -o rdma_write_c_static '" + examples() + "/rdma_write_c.c' $(" + pc +
                                     "--cflags cxv-verbs) '" + t.prefix + "/lib/libcxv.a' $(" + pc +
                                     "--static --libs-only-other --libs-only-l cxv-verbs | sed 's/-lcxv / /')");
    CHECK_RAN(stat);
    const ran needed = sh(t.s.dir, "objdump -p send_recv | grep NEEDED; objdump -p rdma_write_c_static | grep NEEDED");
    CHECK(needed.output.find("libcxv.so.0") != std::string::npos);
    CHECK(needed.output.find("libcxv.so.0") == needed.output.rfind("libcxv.so.0"));  // the static one has none
    const auto [cpp, c] = run_examples(t.s.dir, t.prefix + "/bin", t.prefix + "/lib", "./send_recv", "./rdma_write_c");
    check_examples_ran(cpp, c);
    const ran c_static = sh(t.s.dir, "'" + t.prefix + "/bin/cxv-sim' run --devices 2 -- ./rdma_write_c_static", 120s);
    CHECK_RAN(c_static);
}

TEST_CASE("CMake: find_package(cxv) builds the examples (shared and static) that run on the model" *
          skip_unless(on_path("cmake"), "cmake is not installed (tools/setup installs it)") *
          skip_in_build(kSanitized, kWhySanitized)) {
    installed t;
    const ran built = cmake_build(t.s.dir, t.prefix);
    CHECK_RAN(built);
    const auto [cpp, c] = run_examples(t.s.dir, t.prefix + "/bin", t.prefix + "/lib", "build/send_recv",
                                       "build/rdma_write_c");
    check_examples_ran(cpp, c);
    const ran s = sh(t.s.dir, "'" + t.prefix + "/bin/cxv-sim' run --devices 2 -- build/send_recv_static", 120s);
    CHECK_RAN(s);
    // A version the package does not offer is refused by its version file.
    std::ofstream(t.s.dir + "/src/CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.13)\nproject(p CXX)\nfind_package(cxv 1.0 REQUIRED)\n";
    const ran refused = sh(t.s.dir, "cmake -S src -B build2 -DCMAKE_PREFIX_PATH='" + t.prefix + "'");
    CHECK(refused.status != 0);
    CHECK(refused.output.find("requested version \"1.0\"") != std::string::npos);
    CHECK(refused.output.find("cxvConfig.cmake, version: " + std::string(CXV_VERSION)) != std::string::npos);
}

TEST_CASE("the Debian package: installed by dpkg into a root of its own, used, removed" *
          skip_in_build(kSanitized, kWhySanitized)) {
    scratch s;
    const std::string deb = runfile("tools/package/cxv_" + std::string(CXV_VERSION) + "_amd64.deb");
    const std::string root = s.dir + "/root";
    // Every package it depends on is installed here: dpkg -i on this machine would succeed.
    const ran depends = sh(s.dir, "dpkg-deb -f '" + deb + "' Depends");
    CHECK_RAN(depends);
    CHECK(depends.output.find("libc6") != std::string::npos);
    std::string list = depends.output;
    for (char& ch : list) ch = ch == ',' ? ' ' : ch;
    std::istringstream names(list);
    for (std::string pkg; names >> pkg;) {
        const ran st = sh(s.dir, "dpkg-query -W -f='${Status}' " + pkg);
        INFO(pkg);
        CHECK(st.output == "install ok installed");
    }
    // A dpkg database of its own: the machine's is not touched.
    const ran installed_ok =
        sh(s.dir, "mkdir -p root/var/lib/dpkg/info root/var/lib/dpkg/updates root/var/lib/dpkg/triggers; "
                  "touch root/var/lib/dpkg/status root/var/lib/dpkg/available; "
                  "dpkg --root=root --force-depends -i '" + deb + "' >dpkg.log 2>&1 || { cat dpkg.log; exit 1; }; "
                  "dpkg --root=root -s cxv | grep '^Status:'");
    CHECK_RAN(installed_ok);
    CHECK(installed_ok.output.find("Status: install ok installed") != std::string::npos);
    CHECK(slurp(root + "/usr/lib/systemd/system/cxvd.service").find("ExecStart=/usr/bin/cxvd ") != std::string::npos);
    const std::string usr = root + "/usr";
    // Built with the package's pkg-config files and run on its model.
    const std::string pc = "PKG_CONFIG_PATH='" + usr + "/lib/pkgconfig' pkg-config ";
    const ran built = sh(s.dir, "g++ -O2 -o send_recv '" + examples() + "/send_recv.cc' $(" + pc +
                                    "--cflags --libs cxv); gcc -O2 -o rdma_write_c '" + examples() +
                                    "/rdma_write_c.c' $(" + pc + "--cflags --libs cxv-verbs)");
    CHECK_RAN(built);
    const auto [cpp, c] = run_examples(s.dir, usr + "/bin", usr + "/lib", "./send_recv", "./rdma_write_c");
    check_examples_ran(cpp, c);
    // cxv exec finds its libraries in the package's /usr/lib/cxv: Debian's ibv_devinfo,
    // unmodified, sees the model's function.
    const ran devinfo = sh(s.dir, "'" + usr + "/bin/cxv-sim' run -- '" + usr + "/bin/cxv' exec -- ibv_devinfo", 60s);
    CHECK_RAN(devinfo);
    CHECK(devinfo.output.find("hca_id:\tmlx5_0") != std::string::npos);
    const ran removed = sh(s.dir, "dpkg --root=root --force-depends -r cxv >dpkg.log 2>&1 || { cat dpkg.log; exit 1; }; "
                                  "test ! -e root/usr/bin/cxv && test ! -e root/usr/lib/libcxv.so.0");
    CHECK_RAN(removed);
}

}  // namespace
