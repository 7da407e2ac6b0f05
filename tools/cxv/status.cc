#include "tools/cxv/status.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "client/client.h"
#include "protocol/codec.h"
#include "tools/cxv/text.h"

namespace cxv::tool {

namespace {

std::string bytes(std::uint64_t b) {
    if (b >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1 << 30));
    if (b >= (1u << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
    if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
    return fmt::format("{} B", b);
}

}  // namespace

int print_status(const std::string& socket) {
    const std::string path = socket.empty() ? daemon::client::default_path() : socket;
    auto c = daemon::client::connect(path);
    if (!c) {
        fmt::print(stderr, "cxv status: {}\n", c.error().message);
        return EXIT_FAILURE;
    }
    if (auto h = c->hello(); !h) {
        fmt::print(stderr, "cxv status: {}: {}\n", path, h.error().message);
        return EXIT_FAILURE;
    }
    auto a = c->call(daemon::msg_type::status, {});
    if (!a || a->err != 0) {
        fmt::print(stderr, "cxv status: {}: {}\n", path, a ? a->text : a.error().message);
        return EXIT_FAILURE;
    }
    auto s = daemon::parse_status_reply(a->payload);
    if (!s) {
        fmt::print(stderr, "cxv status: {}\n", s.error().message);
        return EXIT_FAILURE;
    }
    fmt::print("cxvd at {}: {} function(s), {} client(s) now, {} served, {} commands run, {} refused\n\n", path,
               s->devices.size(), s->clients_total, s->clients_served, s->commands, s->refused);
    if (const uid_t me = ::getuid(); me != 0) {
        // cxvd shows a client its own trust domain (its uid) only, unless it is the operator
        // (the daemon's uid, or a member of its --admin-gid): the figures above may be uid
        // `me`'s alone. The reply does not say which, so this says both.
        fmt::print("(as uid {}: this uid's clients and counts only, unless it is cxvd's operator: --admin-gid)\n\n",
                   me);
    }
    fmt::print("{:<14} {:<12} {:<6} {:<8}\n", "function", "firmware", "link", "port 1");
    for (const auto& d : s->devices) {
        fmt::print("{:<14} {:<12} {:<6} {:<8}\n", d.bdf, d.firmware, d.ethernet ? "eth" : "ib",
                   port_state_name(d.port_logical));
    }
    fmt::print("\n{:>8} {:>6} {:<16} {:>4} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>10} {:>8}\n", "pid", "uid",
               "command", "pds", "cqs", "mkeys", "qps", "srqs", "uars", "maps", "pinned", "mtt/pas");
    for (const auto& k : s->clients) {
        fmt::print("{:>8} {:>6} {:<16} {:>4} {:>4} {:>5} {:>4} {:>4} {:>4} {:>4} {:>10} {:>8}\n", k.pid, k.uid,
                   daemon::printable(k.comm), k.pds, k.cqs, k.mkeys, k.qps, k.srqs, k.uars, k.maps, bytes(k.pinned),
                   k.translations);
    }
    if (s->clients.size() < s->clients_total) {
        fmt::print("({} more client(s) not listed: the reply holds one message)\n", s->clients_total - s->clients.size());
    }
    return EXIT_SUCCESS;
}

}  // namespace cxv::tool
