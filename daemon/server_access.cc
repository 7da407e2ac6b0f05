// Who the server lets in and what each may see (docs/daemon.md, "Running it" and "Trust
// model"): the allow-list and the operator, the per-uid and global connection caps, a
// newcomer turned away when fds run out, STATUS scoped to the caller's trust domain, and
// refused requests in the log at a bounded rate per client.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "base/errno_text.h"
#include "daemon/server.h"
#include "daemon/server_state.h"

namespace cxv::daemon {

namespace {

// Connections refused but not yet told (each waits for its first request): at most this
// many, the oldest dropped first.
constexpr std::size_t kMaxRefused = 64;

std::string read_comm(pid_t pid) {
    std::ifstream f(fmt::format("/proc/{}/comm", pid));
    std::string s;
    std::getline(f, s);
    return printable(s);
}

// The peer's supplementary groups as the kernel took them at connect (SO_PEERGROUPS,
// socket(7), Linux 4.13): no /proc lookup by a pid that may have been reused since.
std::vector<gid_t> peer_groups(int sock) {
    std::vector<gid_t> g(64);
    for (int tries = 0; tries < 4; ++tries) {
        socklen_t len = static_cast<socklen_t>(g.size() * sizeof(gid_t));
        if (::getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, g.data(), &len) == 0) {
            g.resize(len / sizeof(gid_t));
            return g;
        }
        if (errno != ERANGE) break;
        g.resize(len / sizeof(gid_t) + 1);  // the kernel said how much it needs
    }
    return {};
}

bool in_groups(const std::vector<gid_t>& wanted, gid_t gid, const std::vector<gid_t>& groups) {
    for (const gid_t g : wanted) {
        if (g == gid || std::find(groups.begin(), groups.end(), g) != groups.end()) return true;
    }
    return false;
}


}  // namespace

bool server::is_operator(const peer& p) const {
    // The daemon's own uid: a process of that uid can ptrace or signal the daemon anyway.
    return p.uid == 0 || p.uid == ::geteuid() || in_groups(opts_.admin_gids, p.gid, p.groups);
}

std::string server::domain_of(const peer& p) const {
    for (const gid_t g : opts_.domain_gids) {
        if (in_groups({g}, p.gid, p.groups)) return fmt::format("group {}", g);
    }
    return fmt::format("uid {}", p.uid);
}

result<std::uint16_t> server::device_for(peer& p, std::uint16_t index) {
    auto d = device_index(index);
    if (!d || opts_.share_functions || p.claimed[*d]) return d;
    device_state& ds = *devices_[*d];
    if (!ds.domain.empty() && ds.domain != p.domain && ds.holders == 0 && opts_.reopen) {
        // Idle, but its last domain had the device fd: reset and brought up again first
        // (hand_over, from the poll loop), and meanwhile "try again". (A daemon that
        // cannot bring a function up again leaves it to that domain: EBUSY below.)
        ds.hand_over_due = true;
        return error{EAGAIN, fmt::format("{}: being reset and brought up again for another trust domain (try again)",
                                         ds.bdf)};
    }
    if (!ds.domain.empty() && ds.domain != p.domain) {
        // Not which domain: another tenant's identity is not this client's business.
        return error{EBUSY, fmt::format("{}: in use by another trust domain. cxvd gives a function to one trust "
                                        "domain at a time (a uid, or a --domain-gid group): give each its own "
                                        "function (an SR-IOV VF bound to vfio-pci), or put users who trust each "
                                        "other in one --domain-gid (docs/daemon.md, \"Trust model\")",
                                        ds.bdf)};
    }
    if (ds.domain.empty()) log(level::info, fmt::format("{}: now used by {}", ds.bdf, p.domain));
    ds.domain = p.domain;
    ++ds.holders;
    p.claimed[*d] = true;
    return d;
}

void server::release_functions(peer& p) {
    for (std::size_t d = 0; d < p.claimed.size(); ++d) {
        if (!p.claimed[d]) continue;
        p.claimed[d] = false;
        device_state& ds = *devices_[d];
        if (ds.holders == 0 || --ds.holders != 0) continue;
        // Its last client gone. Where one had the device fd (ALLOC_UAR) and the function
        // has not been reset since, that process may still hold the fd and its BAR
        // mapping: another domain gets the function only after a reset takes them, done
        // when one asks for it (device_for); the same domain coming back needs none.
        if (ds.fd_given_in == ds.generation && ds.hca) {
            log(level::info, fmt::format("{}: idle (the last client of {} is gone); reset before another trust "
                                         "domain uses it",
                                         ds.bdf, ds.domain));
        } else {
            log(level::info, fmt::format("{}: free (the last client of {} is gone)", ds.bdf, ds.domain));
            ds.domain.clear();
        }
    }
}

bool server::allowed(const peer& p) const {
    if (is_operator(p)) return true;
    if (std::find(opts_.allow_uids.begin(), opts_.allow_uids.end(), p.uid) != opts_.allow_uids.end()) return true;
    return in_groups(opts_.allow_gids, p.gid, p.groups);
}

std::size_t server::connections_of(uid_t uid) const {
    std::size_t n = 0;
    for (const auto& q : peers_) n += !q->gone && !q->refused && q->uid == uid;
    return n;
}

std::pair<int, std::string> server::admission(const peer& p) const {
    if (!p.allowed) {
        return {EACCES, fmt::format("uid {} (gid {}) is not allowed to use this cxvd: ask its administrator for "
                                    "--allow-uid or --allow-gid",
                                    p.uid, p.gid)};
    }
    if (const std::size_t mine = connections_of(p.uid); mine >= opts_.max_clients_per_uid) {
        return {EUSERS, fmt::format("uid {} has {} connections to this cxvd, its limit (--max-clients-per-uid)",
                                    p.uid, mine)};
    }
    // EAGAIN, not EUSERS: the daemon is full for everyone, which clears as others go,
    // while EUSERS tells a uid that it is its own connections it must close.
    std::size_t live = 0;
    for (const auto& q : peers_) live += !q->gone && !q->refused;
    const std::size_t cap = opts_.max_clients + (p.sees_all ? server_options::operator_reserve : 0);
    if (live >= cap) {
        const std::string reserve =
            p.sees_all ? fmt::format(" and {} for its operator", server_options::operator_reserve) : std::string();
        return {EAGAIN, fmt::format("cxvd serves {} connections, its limit (--max-clients {}{}): try again later",
                                    live, opts_.max_clients, reserve)};
    }
    return {0, {}};
}

void server::accept_clients() {
    for (;;) {
        unique_fd s(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!s) {
            if (errno == EMFILE || errno == ENFILE) {
                if (shed_one()) continue;
                // Not even the spare fd: the listener is left out of poll for a moment.
                listen_paused_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
                return;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                log(level::warning, fmt::format("accept: {}", std::strerror(errno)));
            }
            return;
        }
        auto p = std::make_unique<peer>();
        ucred c{};
        socklen_t len = sizeof c;
        if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) {
            log(level::warning, fmt::format("SO_PEERCRED: {}", std::strerror(errno)));
            continue;
        }
        p->sock = std::move(s);
        p->pid = c.pid;
        p->uid = c.uid;
        p->gid = c.gid;
        p->groups = peer_groups(p->sock.get());
        p->comm = read_comm(c.pid);
        p->dev.resize(devices_.size());
        p->subscribed.assign(devices_.size(), false);
        p->claimed.assign(devices_.size(), false);
        p->domain = domain_of(*p);
        p->sees_all = is_operator(*p);
        p->allowed = allowed(*p);
        if (auto [err, why] = admission(*p); err != 0) {
            // Answered at its first request and closed then: closing a UNIX socket with
            // the peer's message unread resets the connection, and the reply would be
            // lost. At most kMaxRefused wait; the oldest goes first.
            p->refusal = err;
            p->refusal_text = std::move(why);
            std::uint64_t missed = 0;
            const bool say = refused_log_.admit(std::chrono::steady_clock::now(), missed);
            if (missed != 0) {
                log(level::warning, fmt::format("{} more refused connections not logged (at most {} a second)", missed,
                                                log_budget::default_per_second));
            }
            if (say) {
                log(level::warning, fmt::format("refused pid {} uid {} ({}): {}", p->pid, p->uid, p->comm,
                                                p->allowed ? p->refusal_text : "not on the allow-list"));
            }
            p->refused = true;
            std::size_t waiting = 0;
            for (auto& q : peers_) waiting += q->refused && !q->gone;
            if (waiting >= kMaxRefused) {
                for (auto& q : peers_) {
                    if (q->refused && !q->gone) {
                        drop(*q, "refused, and others are waiting");
                        break;
                    }
                }
            }
            peers_.push_back(std::move(p));
            continue;
        }
        ++served_;
        ++tallies_[p->domain].served;
        if (opts_.events) open_queue(*p);  // whether or not it subscribes (EVENTS)
        log(level::info, fmt::format("client pid {} uid {} ({}) connected", p->pid, p->uid, p->comm));
        peers_.push_back(std::move(p));
    }
}

bool server::shed_one() {
    // accept(2): EMFILE leaves the connection queued and the listener readable, so poll
    // would return at once forever. One fd is kept in reserve for exactly this.
    spare_ = unique_fd{};
    unique_fd s(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (s) {
        (void)send_message(s.get(), encode_reply(0, 0, EMFILE, "cxvd has no file descriptors left; try later"), {},
                           MSG_DONTWAIT);
    }
    const bool took = static_cast<bool>(s);
    s = unique_fd{};
    spare_ = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (took) log(level::err, "accept: out of file descriptors: a new client was turned away");
    return took;
}

// A client sees its own trust domain (its uid: the unit quotas and the connection cap
// count in too) and the functions; the operator sees everyone. Other tenants' pids,
// commands and books would tell a client what else runs on the host and when, and the
// global counts how busy the others are: neither is its business. A client that went is
// listed, as it was when it went, until its teardown has released everything it held.
result<server::answer> server::on_status(const peer& asker) {
    status_reply s;
    s.devices = devices_info(false);
    if (asker.sees_all) {
        s.commands = commands_;
        s.refused = refused_;
        s.clients_served = served_;
    } else if (auto t = tallies_.find(asker.domain); t != tallies_.end()) {
        s.commands = t->second.commands;
        s.refused = t->second.refused;
        s.clients_served = t->second.served;
    }
    // The reply must fit one message (64 KiB): clients past what fits are counted, not
    // listed (a row is at most 56 bytes and a comm; the head and functions are small).
    std::size_t bytes = 1024 + s.devices.size() * 512;
    for (const auto& p : peers_) {
        if (p->refused || (p->leaving && p->leaving->done) || (!asker.sees_all && p->domain != asker.domain)) continue;
        ++s.clients_total;
        const std::size_t row = 56 + p->comm.size();
        if (bytes + row > max_message_bytes - 1024) continue;
        bytes += row;
        if (p->gone) {
            s.clients.push_back(p->as_it_went);
            continue;
        }
        s.clients.push_back(status_row(p->pid, p->uid, p->gid, p->comm, p->dev));
    }
    return answer{payload(s), {}, {}};
}

// ---- refused requests in the log ------------------------------------------------------

void server::log_refusal(peer& p, std::uint16_t type, const error& e) {
    std::uint64_t missed = 0;
    const bool say = p.refusals.admit(std::chrono::steady_clock::now(), missed);
    report_held_back(p, missed);
    if (!say) return;
    // The daemon's policy said no (not the client's, off the allow-list, over a quota): an
    // operator may have to act, a warning. The rest (malformed, busy, the firmware's own
    // status) are the client's business: info.
    const bool policy = e.code == EPERM || e.code == EACCES || e.code == EDQUOT;
    // The request's type unless the text starts with it already ("UNMAP_MEMORY: IOVA ...";
    // a COMMAND's names its PRM opcode instead).
    const std::string_view name = type_name(type);
    const bool named = e.message.compare(0, name.size(), name) == 0;
    log(policy ? level::warning : level::info,
        fmt::format("pid {} uid {} ({}): {}{}refused ({}): {}", p.pid, p.uid, p.comm, named ? "" : name,
                    named ? "" : " ", errno_name(e.code), printable(e.message)));
}

void server::report_held_back(const peer& p, std::uint64_t n) const {
    if (n == 0) return;
    log(level::warning, fmt::format("pid {} uid {} ({}): {} more refused requests not logged (at most {} a second per "
                                    "client)",
                                    p.pid, p.uid, p.comm, n, log_budget::default_per_second));
}

void server::log_held_back() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& p : peers_) {
        if (p->gone) continue;
        report_held_back(*p, p->refusals.expired(now));
    }
    if (const std::uint64_t n = refused_log_.expired(now); n != 0) {
        log(level::warning, fmt::format("{} more refused connections not logged (at most {} a second)", n,
                                        log_budget::default_per_second));
    }
}

int server::log_timeout() const {
    std::optional<std::chrono::steady_clock::time_point> next = refused_log_.due();
    for (const auto& p : peers_) {
        if (auto d = p->refusals.due(); d && !p->gone && (!next || *d < *next)) next = d;
    }
    if (!next) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - std::chrono::steady_clock::now()).count();
    return static_cast<int>(std::max<long long>(left, 0));
}

}  // namespace cxv::daemon
