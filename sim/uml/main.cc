// cxv-sim-uml: one emulated ConnectX function served to a User-Mode Linux kernel over
// vhost-user (sim/uml/function.h), so that Linux's own mlx5_core and mlx5_ib drive the
// model (docs/linux-oracle.md).
//
//   cxv-sim-uml --socket PATH [--set KEY=VALUE]... [--trace-commands] [--command-log FILE]
//
// The settings are cxv-sim's (docs/device-model.md; CXV_SIM_* variables too), so the
// function can share a fabric (fabric_dir, fabric_index) with `cxv-sim run` processes
// and other UML kernels. UML connects with `virtio_uml.device=PATH:ID` (ID: the kernel's
// CONFIG_UML_PCI_OVER_VIRTIO_DEVICE_ID). One session: the program ends when the kernel
// disconnects, or on SIGTERM/SIGINT. CXV_SIM_UML_DEBUG=1 prints each MSI and each BAR
// write above the initialization segment on stderr.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/device.h"
#include "sim/uml/function.h"
#include "sim/vfio/options.h"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
    using namespace cxv::sim;
    vfio::options opts;
    if (auto s = opts.load_environment(); !s) {
        std::fprintf(stderr, "cxv-sim-uml: %s\n", s.error().message.c_str());
        return 2;
    }
    CLI::App app{"cxv-sim-uml: one emulated ConnectX function served to a User-Mode Linux kernel over vhost-user"};
    app.footer("The settings are cxv-sim's (docs/device-model.md); CXV_SIM_* variables are read first.");
    std::string socket;
    std::vector<std::string> sets;
    bool trace = std::getenv("CXV_SIM_TRACE_COMMANDS") != nullptr;
    app.add_option("--socket", socket, "the vhost-user socket to listen on")->required()->type_name("PATH");
    app.add_option("--set", sets, "any setting, KEY=VALUE (repeatable; later wins)")->type_name("KEY=VALUE")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.add_flag("--trace-commands", trace, "print every firmware command on stderr");
    std::string command_log = std::getenv("CXV_SIM_COMMAND_LOG") ? std::getenv("CXV_SIM_COMMAND_LOG") : "";
    app.add_option("--command-log", command_log,
                   "append every firmware command, its input and output by field, to FILE")
        ->type_name("FILE");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    for (const std::string& kv : sets) {
        const auto eq = kv.find('=');
        const auto s = eq == std::string::npos ? cxv::status(cxv::error{EINVAL, "--set needs KEY=VALUE"})
                                               : opts.set(kv.substr(0, eq), kv.substr(eq + 1));
        if (!s) {
            std::fprintf(stderr, "cxv-sim-uml: %s\n", s.error().message.c_str());
            return 2;
        }
    }
    auto functions = opts.functions();
    if (!functions) {
        std::fprintf(stderr, "cxv-sim-uml: %s\n", functions.error().message.c_str());
        return 2;
    }
    const auto& spec = functions.value().front();
    auto dev = device::create(spec.model);
    if (!dev) {
        std::fprintf(stderr, "cxv-sim-uml: %s\n", dev.error().message.c_str());
        return 1;
    }
    if (trace) dev.value()->tracer().set_live(stderr, "cxv-sim-uml " + spec.address.str());
    if (!command_log.empty()) {
        std::FILE* log = std::fopen(command_log.c_str(), "ae");
        if (log == nullptr) {
            std::fprintf(stderr, "cxv-sim-uml: --command-log: cannot open %s: %s\n", command_log.c_str(),
                         std::strerror(errno));
            return 2;
        }
        std::setvbuf(log, nullptr, _IOLBF, 0);
        dev.value()->tracer().set_command_log(log, "cxv-sim-uml " + spec.address.str());
    }
    auto fn = uml::pci_function::create(*dev.value(), socket);
    if (!fn) {
        std::fprintf(stderr, "cxv-sim-uml: %s\n", fn.error().message.c_str());
        return 1;
    }
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::fprintf(stderr, "cxv-sim-uml: %s listening on %s\n", spec.address.str().c_str(), socket.c_str());
    const auto s = fn.value()->run(g_stop);
    const auto& c = fn.value()->stats();
    std::fprintf(stderr,
                 "cxv-sim-uml: done: %llu config reads, %llu config writes, %llu BAR reads, %llu BAR writes, %llu MSI "
                 "sent (%llu deferred while masked), %llu doorbell registers taken for the next write, %llu writes waited "
                 "for the one before (%llu in vain), %llu "
                 "messages refused\n",
                 static_cast<unsigned long long>(c.cfg_reads), static_cast<unsigned long long>(c.cfg_writes),
                 static_cast<unsigned long long>(c.mmio_reads), static_cast<unsigned long long>(c.mmio_writes),
                 static_cast<unsigned long long>(c.msi_sent), static_cast<unsigned long long>(c.msi_deferred),
                 static_cast<unsigned long long>(c.doorbells_taken), static_cast<unsigned long long>(c.doorbell_waits),
                 static_cast<unsigned long long>(c.doorbell_overwrites),
                 static_cast<unsigned long long>(c.refused));
    // The Ethernet pipeline's counts, when the function sent or delivered frames.
    const counters m = dev.value()->tracer().snapshot();
    if (m.frames_sent + m.frames_delivered != 0) {
        std::fprintf(stderr, "cxv-sim-uml: frames: %llu sent (%llu LSO WQEs cut into frames), %llu delivered, %llu dropped\n",
                     static_cast<unsigned long long>(m.frames_sent), static_cast<unsigned long long>(m.lso_wqes),
                     static_cast<unsigned long long>(m.frames_delivered),
                     static_cast<unsigned long long>(m.frames_dropped));
    }
    // The port on its wire, and the subnet administrator it hosts (the SM's LID on
    // InfiniBand).
    const auto l = dev.value()->link_counters();
    const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::fprintf(stderr,
                 "cxv-sim-uml: link: %llu frames sent, %llu received (%llu not for this port, %llu malformed, "
                 "%llu damaged), %llu to no station\n",
                 ull(l.frames_sent), ull(l.frames_received), ull(l.not_for_us), ull(l.malformed), ull(l.bad_crc),
                 ull(l.no_route));
    if (l.sa_answered != 0) std::fprintf(stderr, "cxv-sim-uml: subnet administrator: %llu MADs answered\n", ull(l.sa_answered));
    if (m.wqes != 0) {
        std::fprintf(stderr, "cxv-sim-uml: send WQEs: %llu executed, %llu UMRs changed a memory key, %llu CQEs\n",
                     static_cast<unsigned long long>(m.wqes), static_cast<unsigned long long>(m.umrs),
                     static_cast<unsigned long long>(m.cqes));
    }
    if (!s) {
        std::fprintf(stderr, "cxv-sim-uml: %s\n", s.error().message.c_str());
        return 1;
    }
    return 0;
}
