// cxvd: the cxv driver daemon. Brings up the functions it is given (or every mlx5
// function bound to vfio-pci) and serves client processes on a UNIX socket until SIGTERM
// or SIGINT. Logs to stderr with sd-daemon(3) priority prefixes. docs/daemon.md.
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "daemon/server.h"
#include "daemon/sriov_pf.h"
#include "driver/hca/hca.h"
#include "driver/pci/pci.h"
#include "driver/vfio/vfio.h"

namespace {

// The server while it runs: signals and a PF's event thread (--vfs) stop it.
std::atomic<cxv::daemon::server*> g_server{nullptr};

void on_signal(int) {
    if (auto* s = g_server.load(); s != nullptr) s->stop();
}

// A group as a number or a name (getgrnam(3)), so a unit file can say --socket-group cxv.
bool to_gid(const std::string& s, gid_t& out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0 && v <= 0xfffffffful) {
        out = static_cast<gid_t>(v);
        return true;
    }
    const group* g = ::getgrnam(s.c_str());
    if (g == nullptr) return false;
    out = g->gr_gid;
    return true;
}

// Each of `names` (a repeatable option `flag`) as a gid, appended to `out`; false, with
// the first unknown one logged, if any is no group.
bool to_gids(const std::vector<std::string>& names, const char* flag, std::vector<gid_t>& out) {
    for (const auto& name : names) {
        gid_t g = 0;
        if (!to_gid(name, g)) {
            cxv::daemon::log(cxv::daemon::level::err, fmt::format("{} {}: no such group", flag, name));
            return false;
        }
        out.push_back(g);
    }
    return true;
}

// Enough fds for --max-clients: two a client (its socket and its event channel), the
// refused ones waiting for their reply, and a margin for the functions (VFIO container,
// group, device, eventfds), the metrics thread's connections and the fds that come with a
// request. The soft limit is raised to that: a process commonly starts at 1024 soft
// whatever its hard limit (systemd's default is LimitNOFILE=1024:524288, so that programs
// using select(2) keep working) and is expected to raise its own. Short of the hard
// limit, newcomers will be turned away with EMFILE first.
void raise_nofile(unsigned max_clients) {
    using cxv::daemon::level;
    const rlim_t want = 2 * (rlim_t{max_clients} + cxv::daemon::server_options::operator_reserve) + 64 + 256;
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= want) return;
    const rlim_t cur = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    if (lim.rlim_cur > cur) (void)::setrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur < want) {
        cxv::daemon::log(level::warning,
                         fmt::format("RLIMIT_NOFILE is {} (hard limit): --max-clients {} needs about {}; clients past "
                                     "what fits are turned away with EMFILE (LimitNOFILE= in the unit)",
                                     lim.rlim_cur, max_clients, want));
    }
}

}  // namespace

int main(int argc, char** argv) {
    using cxv::daemon::level;
    using cxv::daemon::log;
    CLI::App app{"cxvd: the cxv driver daemon: owns ConnectX functions and serves client processes"};
    app.set_version_flag("--version", std::string("cxvd ") + CXV_VERSION);  // //:version.bzl
    std::vector<std::string> bdfs;
    cxv::daemon::server_options o;
    unsigned port_timeout_ms = 15'000;
    // Enough 1 KiB mailbox slots for the largest COMMAND_FD (one per 512 bytes of data,
    // PRM "Command Interface", input and output together at most
    // max_large_command_total) and ~180 more for other threads' commands: 8.25 MiB of
    // DMA memory.
    std::string metrics_addr;
    long metrics_read_ms = cxv::daemon::metrics_server::default_read_time.count();
    std::size_t mailbox_blocks = cxv::daemon::max_large_command_bytes / 512 + 248;
    app.add_option("--device", bdfs, "a function DDDD:BB:DD.F bound to vfio-pci (repeatable; default: all)");
    unsigned vfs = 0;
    app.add_option("--vfs", vfs,
                   "drive each --device as an SR-IOV PF: enable this many VFs on it (vfio-pci with enable_sriov=1) "
                   "and serve those VFs, one trust domain each, never the PF itself");
    app.add_option("--socket", o.socket_path, "the UNIX socket to serve on")->capture_default_str();
    std::string socket_group;
    std::vector<std::string> allow_groups;
    app.add_option("--socket-group", socket_group,
                   "the socket's group (gid or name), whose members may connect (mode 0660)");
    app.add_option("--allow-uid", o.allow_uids, "a uid allowed besides root (repeatable)");
    app.add_option("--allow-gid", allow_groups, "a group (gid or name) whose members are allowed (repeatable)");
    std::vector<std::string> admin_groups;
    app.add_option("--admin-gid", admin_groups,
                   "a group (gid or name) whose members are the operator: allowed, and STATUS shows them every "
                   "client (others see their own uid's) (repeatable)");
    std::vector<std::string> domain_groups;
    app.add_option("--domain-gid", domain_groups,
                   "a group (gid or name) whose members are one trust domain, whatever their uids (repeatable); "
                   "a function serves one trust domain at a time, and a uid outside these groups is a domain of "
                   "its own");
    app.add_flag("--share-functions", o.share_functions,
                 "no trust domains: every allowed client may use every function (for processes that trust each "
                 "other: a client with a UAR can write anywhere in its function's BAR)");
    app.add_option("--quota-qps", o.limits.qps, "QPs per uid (over all its connections)")->capture_default_str();
    app.add_option("--quota-cqs", o.limits.cqs, "CQs per uid")->capture_default_str();
    app.add_option("--quota-mrs", o.limits.mrs, "memory keys per uid")->capture_default_str();
    app.add_option("--quota-pds", o.limits.pds, "PDs per uid")->capture_default_str();
    app.add_option("--quota-uars", o.limits.uars, "UAR pages per uid")->capture_default_str();
    app.add_option("--quota-srqs", o.limits.srqs, "SRQs per uid")->capture_default_str();
    app.add_option("--quota-translations", o.limits.translations,
                   "page-list entries (a key's MTT, a queue's PAS) per uid on a function: firmware memory")
        ->capture_default_str();
    app.add_option("--quota-pinned-bytes", o.limits.pinned_bytes, "bytes of memory a uid may map")
        ->capture_default_str();
    app.add_option("--quota-mappings", o.limits.mappings, "MAP_MEMORY mappings a uid may hold (over all functions)")
        ->capture_default_str();
    app.add_option("--max-clients-per-uid", o.max_clients_per_uid, "connections of one uid at a time")
        ->capture_default_str();
    app.add_option("--max-clients", o.max_clients,
                   "connections at a time, all uids together (the operator has 4 more)")
        ->check(CLI::Range(1u, 1u << 20))
        ->capture_default_str();
    app.add_option("--event-queue", o.event_queue,
                   "events a client connection's queue holds beyond its channel before it drops them (and is sent an "
                   "overflow event)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    app.add_option("--port-timeout-ms", port_timeout_ms, "wait this long for port 1 to be ACTIVE at bring-up")
        ->capture_default_str();
    app.add_option("--metrics", metrics_addr,
                   "serve Prometheus metrics (GET /metrics) on this UNIX socket path or 127.0.0.1:PORT");
    app.add_option("--metrics-read-ms", metrics_read_ms,
                   "a scraper that has not sent its whole request after this long is dropped")
        ->check(CLI::Range(1, 600000))
        ->capture_default_str();
    app.add_option("--mailbox-blocks", mailbox_blocks,
                   "1 KiB command mailbox slots per function (the largest command a client may send needs "
                   "one per 512 bytes)")
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    if (mailbox_blocks < cxv::daemon::max_large_command_total / 512 + 64) {
        log(level::warning, fmt::format("--mailbox-blocks {}: the largest commands clients may send need {} and a "
                                        "margin; they, and commands beside them, may fail ENOMEM",
                                        mailbox_blocks, cxv::daemon::max_large_command_total / 512 + 2));
    }
    if (!socket_group.empty()) {
        gid_t g = 0;
        if (!to_gid(socket_group, g)) {
            log(level::err, fmt::format("--socket-group {}: no such group", socket_group));
            return EXIT_FAILURE;
        }
        o.socket_gid = static_cast<long>(g);
    }
    if (!to_gids(allow_groups, "--allow-gid", o.allow_gids) || !to_gids(admin_groups, "--admin-gid", o.admin_gids) ||
        !to_gids(domain_groups, "--domain-gid", o.domain_gids)) {
        return EXIT_FAILURE;
    }
    if (o.share_functions && !o.domain_gids.empty()) {
        log(level::err, "--share-functions and --domain-gid: with shared functions there are no trust domains");
        return EXIT_FAILURE;
    }
    raise_nofile(o.max_clients);
    // What can be refused without the card is refused before any function comes up (a
    // bring-up takes seconds on a card; a typo should not).
    if (auto c = cxv::daemon::claim_socket_path(o.socket_path, SOCK_SEQPACKET); !c) {
        log(level::err, "--socket " + c.error().message);
        return EXIT_FAILURE;
    }
    if (const std::string dir = o.socket_path.substr(0, std::max<std::size_t>(o.socket_path.rfind('/'), 1));
        o.socket_path.find('/') != std::string::npos && ::access(dir.c_str(), W_OK | X_OK) != 0) {
        log(level::err, fmt::format("--socket {}: directory {}: {}", o.socket_path, dir, std::strerror(errno)));
        return EXIT_FAILURE;
    }
    if (!metrics_addr.empty()) {
        if (auto c = cxv::daemon::metrics_server::check_address(metrics_addr); !c) {
            log(level::err, c.error().message);
            return EXIT_FAILURE;
        }
    }

    if (vfs != 0 && bdfs.empty()) {
        log(level::err, "--vfs: name the PFs with --device");
        return EXIT_FAILURE;
    }
    if (vfs != 0 && o.share_functions) {
        log(level::err, "--vfs and --share-functions: VFs are there to keep trust domains apart");
        return EXIT_FAILURE;
    }
    if (bdfs.empty()) {
        auto found = cxv::driver::pci::discover();
        if (!found) {
            log(level::err, found.error().message);
            return EXIT_FAILURE;
        }
        for (const auto& f : *found) {
            if (f.usable()) bdfs.push_back(f.bdf);
        }
        if (bdfs.empty()) {
            log(level::err, "no mlx5 function is bound to vfio-pci (see `cxv list`); give --device BDF");
            return EXIT_FAILURE;
        }
    }
    // --vfs: cxvd is the PFs' driver; it serves their VFs, opened with the PF's VF token.
    // A PF's fatal error takes its VFs down too and is not recovered here: cxvd stops
    // (unhealthy), for its supervisor to start it again.
    std::vector<std::unique_ptr<cxv::daemon::sriov_pf>> pfs;
    std::vector<std::string> tokens(bdfs.size());
    std::atomic<bool> pf_failed{false};
    if (vfs != 0) {
        std::vector<std::string> served;
        tokens.clear();
        for (const auto& pf : bdfs) {
            cxv::driver::hca::options po;
            po.port_timeout = std::chrono::milliseconds(port_timeout_ms);
            po.on_event = [pf, &pf_failed](const cxv::driver::hca_event& e) {
                if (e.what != cxv::driver::hca_event::fatal) return;
                log(level::err, fmt::format("{}: PF fatal error: {}; its VFs are gone, cxvd stops", pf, e.detail));
                pf_failed = true;
                if (auto* s = g_server.load(); s != nullptr) s->stop();
            };
            auto p = cxv::daemon::sriov_pf::create(pf, vfs, po);
            if (!p) {
                log(level::err, p.error().message);
                return EXIT_FAILURE;
            }
            served.insert(served.end(), (*p)->vfs().begin(), (*p)->vfs().end());
            tokens.resize(served.size(), (*p)->token());  // one token per VF, its PF's
            pfs.push_back(std::move(p).value());
        }
        bdfs = std::move(served);
    }
    auto inbox = cxv::daemon::event_inbox::create();
    if (!inbox) {
        log(level::err, inbox.error().message);
        return EXIT_FAILURE;
    }
    o.events = *inbox;
    // Function `i` brought up: at start, and again after a fatal error (the server's
    // recovery). vfio-pci resets the function at open, so nothing a dead daemon or a
    // dead firmware left behind is relied on.
    auto bring_up = [&bdfs, &tokens, port_timeout_ms, mailbox_blocks, inbox = *inbox](
                        std::size_t i, std::uint64_t gen) -> cxv::result<std::unique_ptr<cxv::driver::hca>> {
        const std::string& bdf = bdfs[i];
        auto dev = cxv::driver::vfio::device::open(bdf, tokens[i]);
        if (!dev) return cxv::error{dev.error().code, fmt::format("{}: {}", bdf, dev.error().message)};
        cxv::driver::hca::options ho;
        ho.port_timeout = std::chrono::milliseconds(port_timeout_ms);
        ho.cmd.mailbox_blocks = mailbox_blocks;
        ho.on_event = [bdf](const cxv::driver::hca_event& e) {
            static const char* const kinds[] = {"port up", "port down", "port init", "port change", "fatal",
                                                "queue error"};
            // A queue event names a client's object (cxvd keeps no queues of its own past its
            // EQs): a client's business, and one re-arming its SRQ's limit in a loop would
            // flood an error-level log (SRQ_RQ_LIMIT, SRQ_LAST_WQE). Debug level; only a fatal event is an error.
            const level l = e.what == cxv::driver::hca_event::fatal         ? level::err
                            : e.what == cxv::driver::hca_event::queue_error ? level::debug
                                                                            : level::info;
            log(l,
                fmt::format("{}: {} (port {}, object 0x{:x}) {}", bdf, kinds[e.what], e.port, e.object, e.detail));
        };
        cxv::daemon::event_inbox::wire(inbox, ho, i, gen);
        auto h = cxv::driver::hca::create(std::move(dev).value(), ho);
        if (!h) return cxv::error{h.error().code, fmt::format("{}: bring-up failed: {}", bdf, h.error().message)};
        log(level::info, fmt::format("{}: up, firmware {}", bdf, (*h)->fw_version_string()));
        return h;
    };
    std::vector<std::unique_ptr<cxv::driver::hca>> hcas;
    for (std::size_t i = 0; i < bdfs.size(); ++i) {
        auto h = bring_up(i, 0);
        if (!h) {
            log(level::err, h.error().message);
            return EXIT_FAILURE;
        }
        hcas.push_back(std::move(h).value());
    }
    o.reopen = bring_up;
    if (!metrics_addr.empty()) o.stats = std::make_shared<cxv::daemon::metrics>();
    auto s = cxv::daemon::server::create(o, std::move(hcas));
    if (!s) {
        log(level::err, s.error().message);
        return EXIT_FAILURE;
    }
    std::unique_ptr<cxv::daemon::metrics_server> ms;
    if (!metrics_addr.empty()) {
        auto* srv = s->get();
        auto m = cxv::daemon::metrics_server::create(metrics_addr, o.stats, [srv] { return srv->sample_ports(); },
                                                     std::chrono::milliseconds(metrics_read_ms));
        if (!m) {
            log(level::err, m.error().message);
            return EXIT_FAILURE;
        }
        ms = std::move(m).value();
        log(level::info, ms->port() ? fmt::format("metrics on http://127.0.0.1:{}/metrics", ms->port())
                                    : fmt::format("metrics on {} (GET /metrics)", metrics_addr));
    }
    g_server = s->get();
    if (pf_failed) (*s)->stop();  // a PF failed while its VFs were being brought up
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    (*s)->run();
    g_server = nullptr;
    const bool healthy = (*s)->healthy() && !pf_failed;
    ms.reset();  // its thread asks the functions for counters: stopped before they go
    s->reset();  // every client's objects destroyed, then the functions torn down
    pfs.clear();  // the VFs closed: each PF disables them and is torn down
    log(healthy ? level::info : level::err,
        healthy      ? "stopped"
        : pf_failed ? "stopped: a PF failed (--vfs), and its VFs with it"
                     : "stopped: a function could not be recovered");
    return healthy ? EXIT_SUCCESS : EXIT_FAILURE;
}
