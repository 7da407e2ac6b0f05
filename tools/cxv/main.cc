// cxv: the command-line tool: what this build supports, discovery (cxv list) and
// bring-up of a function (cxv info <bdf>).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "hw/pci_ids.h"
#include "hw/selfcheck.h"
#include "tools/cxv/daemon_view.h"
#include "tools/cxv/exec.h"
#include "tools/cxv/info.h"
#include "tools/cxv/list.h"
#include "tools/cxv/setup.h"
#include "tools/cxv/status.h"

namespace {

constexpr const char* kVersion = CXV_VERSION;  // //:version.bzl

int print_devices() {
    fmt::print("{:<6} {:<6} {:<4} {}\n", "vendor", "device", "vf", "name");
    for (const auto& d : cxv::hw::mlx5_device_ids) {
        fmt::print("{:04x}   {:04x}   {:<4} {}\n", cxv::hw::mellanox_vendor_id, d.device,
                   d.virtual_function ? "yes" : "no", d.name);
    }
    return EXIT_SUCCESS;
}

int print_selfcheck() {
    const auto r = cxv::hw::run_layout_selfcheck();
    fmt::print("hw layout self-check: {} layouts, {} fields, {} scalar fields checked bit by bit, "
               "{} failures\n",
               r.layouts, r.fields, r.scalars_checked, r.failures.size());
    for (const auto& f : r.failures) fmt::print("  FAILED {}\n", f);
    return r.failures.empty() ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace

int main(int argc, char** argv) {
    // cxv exec takes the rest of the command line as the program's: parsed by hand.
    if (argc >= 2 && std::string(argv[1]) == "exec") return cxv::tool::exec_program(argc, argv);
    CLI::App app{"cxv: a user-space ConnectX (mlx5) driver over VFIO"};
    app.set_version_flag("--version", fmt::format("cxv {}", kVersion));
    app.require_subcommand(0, 1);
    auto* devices = app.add_subcommand("devices", "list the PCI device IDs cxv supports");
    auto* selfcheck = app.add_subcommand("selfcheck", "check every hardware layout bit by bit");
    std::string bdf;
    std::string view_socket;
    auto* info = app.add_subcommand("info", "bring a function up, describe it, tear it down (one a cxvd holds, or "
                                            "through --socket or CXV_DAEMON: as that cxvd describes it, counters "
                                            "included; nothing brought up)");
    info->add_option("bdf", bdf, "PCI address DDDD:BB:DD.F of a function bound to vfio-pci (through a cxvd: "
                                 "one of its functions; default its first)");
    info->add_option("--socket", view_socket, "a cxvd's UNIX socket (else CXV_DAEMON)");
    bool json = false;
    info->add_flag("--json", json, "one JSON object");
    unsigned port_timeout_ms = 15'000;
    info->add_option("--port-timeout-ms", port_timeout_ms, "wait this long for each port to be ACTIVE")
        ->capture_default_str();
    auto* list = app.add_subcommand("list", "find every mlx5 function (libpci): driver, IOMMU group, NUMA node "
                                            "(through a cxvd: --socket or CXV_DAEMON, the functions it serves)");
    list->add_flag("--json", json, "one JSON array");
    list->add_option("--socket", view_socket, "a cxvd's UNIX socket (else CXV_DAEMON)");
    app.add_subcommand("exec", "cxv exec [--device BDF] [--socket PATH] -- PROGRAM [ARGS]: run an unmodified libibverbs or "
                               "librdmacm program on cxv (its own libibverbs.so.1 and librdmacm.so.1 "
                               "first on LD_LIBRARY_PATH)");
    std::string daemon_socket;
    auto* status = app.add_subcommand("status", "what a running cxvd serves: functions, firmware, ports, clients "
                                                "(its socket: --socket, else CXV_DAEMON, else /run/cxv/cxvd.sock)");
    status->add_option("--socket", daemon_socket, "the daemon's UNIX socket");
    cxv::tool::setup_request setup_req;
    auto* setup = app.add_subcommand("setup", "what stands between each ConnectX function and cxv (--status, the "
                                              "default), and binding it to vfio-pci or back (docs/hardware.md)");
    bool do_bind = false, do_unbind = false, do_status = false;
    setup->add_flag("--status", do_status, "report the functions and the machine (the default)");
    auto* bind_flag = setup->add_flag("--bind", do_bind, "bind the functions to vfio-pci (driver_override)");
    setup->add_flag("--unbind", do_unbind, "give the functions back to the kernel's driver (mlx5_core)")
        ->excludes(bind_flag);
    setup->add_flag("--force", setup_req.force, "bind even though a netdev is up; unbind even though a process holds it");
    setup->add_option("--sysfs", setup_req.sysfs, "where sysfs is mounted")->capture_default_str();
    setup->add_option("bdf", setup_req.bdfs, "PCI addresses DDDD:BB:DD.F (--status: default every mlx5 function)");
    CLI11_PARSE(app, argc, argv);

    const std::string via = cxv::tool::daemon_socket(view_socket);
    if (*info && !via.empty()) return cxv::tool::print_daemon_info(via, bdf, json);
    if (*info && bdf.empty()) {
        std::fprintf(stderr, "cxv info: which function? (cxv info DDDD:BB:DD.F; cxv list shows them)\n");
        return 2;
    }
    if (*info) return cxv::tool::print_info(bdf, json, std::chrono::milliseconds(port_timeout_ms));
    if (*list && !via.empty()) return cxv::tool::print_daemon_list(via, json);
    if (*list) return cxv::tool::print_list(json);
    if (*status) return cxv::tool::print_status(daemon_socket);
    if (*setup) {
        setup_req.action = do_bind     ? cxv::tool::setup_action::bind
                           : do_unbind ? cxv::tool::setup_action::unbind
                                       : cxv::tool::setup_action::status;
        return cxv::tool::run_setup(setup_req);
    }
    if (*devices) return print_devices();
    if (*selfcheck) return print_selfcheck();
    // No subcommand: what there is to do.
    std::fputs(app.help().c_str(), stdout);
    return 0;
}
