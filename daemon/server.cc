#include "daemon/server.h"
#include "daemon/server_state.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"

namespace cxv::daemon {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

void log(level l, const std::string& text) {
    const std::string line = fmt::format("<{}>cxvd: {}\n", static_cast<int>(l), text);
    (void)!::write(2, line.data(), line.size());
}

server::server(server_options o, std::vector<std::unique_ptr<driver::hca>> devices) : opts_(std::move(o)) {
    for (auto& h : devices) {
        auto d = std::make_unique<device_state>();
        d->facts.comp_eqn = h->comp_eqn();
        d->bdf = h->device().bdf();
        d->info = describe(*h);
        d->hca = std::move(h);
        devices_.push_back(std::move(d));
    }
}

result<std::unique_ptr<server>> server::create(server_options o, std::vector<std::unique_ptr<driver::hca>> devices) {
    std::unique_ptr<server> s(new server(std::move(o), std::move(devices)));
    const std::string& path = s->opts_.socket_path;
    sockaddr_un a{};
    if (path.empty() || path.size() >= sizeof a.sun_path) {
        return error{ENAMETOOLONG, fmt::format("socket path '{}' is empty or longer than {} bytes", path,
                                               sizeof a.sun_path - 1)};
    }
    const auto dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) return error{ec.value(), fmt::format("cannot create {}: {}", dir.string(), ec.message())};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    // A socket file already there: another daemon's if it answers, else stale.
    if (auto c = claim_socket_path(path, SOCK_SEQPACKET); !c) {
        if (c.error().code == EADDRINUSE) return error{EADDRINUSE, fmt::format("another cxvd serves {}", path)};
        return c.error();
    }
    s->listen_ = unique_fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s->listen_) return error{errno, fmt::format("socket: {}", std::strerror(errno))};
    if (::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        return error{errno, fmt::format("bind {}: {}", path, std::strerror(errno))};
    }
    if (s->opts_.socket_gid >= 0 && ::chown(path.c_str(), static_cast<uid_t>(-1),
                                            static_cast<gid_t>(s->opts_.socket_gid)) != 0) {
        return error{errno, fmt::format("chown {} to group {}: {}", path, s->opts_.socket_gid, std::strerror(errno))};
    }
    if (::chmod(path.c_str(), s->opts_.socket_mode) != 0 || ::listen(s->listen_.get(), 64) != 0) {
        return error{errno, fmt::format("chmod/listen {}: {}", path, std::strerror(errno))};
    }
    s->wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s->wake_) return error{errno, fmt::format("eventfd: {}", std::strerror(errno))};
    s->spare_ = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!s->spare_) return error{errno, fmt::format("open /dev/null: {}", std::strerror(errno))};
    auto jobs = job_lanes::create();
    if (!jobs) return jobs.error();
    s->jobs_ = std::move(jobs).value();
    log(level::info, fmt::format("serving {} function(s) on {} (mode {:o})", s->devices_.size(), path,
                                 s->opts_.socket_mode));
    return s;
}

server::~server() {
    // The jobs in flight finish (their replies go out), then every client's teardown
    // runs to its end here, inline: nobody is served any more.
    if (jobs_) {
        quiescing_ = true;
        jobs_->drain();
    }
    quiescing_ = false;
    inline_ = true;
    for (auto& p : peers_) {
        if (!p->gone) drop(*p, "the daemon stops");
    }
    for (auto& p : peers_) {
        if (p->leaving && !p->leaving->done) pump(*p);
    }
    peers_.clear();
    if (listen_) ::unlink(opts_.socket_path.c_str());
}

void server::stop() noexcept {
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

void server::run() {
    std::vector<pollfd> fds;
    // What each of fds[4...] is: a peer's socket (POLLIN) or its event channel (POLLOUT).
    std::vector<std::pair<peer*, bool>> whose;
    for (;;) {
        fds.clear();
        whose.clear();
        fds.push_back({wake_.get(), POLLIN, 0});
        int timeout = -1;
        short listen_events = POLLIN;
        if (const auto now = std::chrono::steady_clock::now(); now < listen_paused_until_) {
            listen_events = 0;
            timeout = static_cast<int>(
                std::chrono::ceil<std::chrono::milliseconds>(listen_paused_until_ - now).count());
        }
        if (const int t = reopen_timeout(); t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
        if (const int t = log_timeout(); t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
        fds.push_back({listen_.get(), listen_events, 0});
        fds.push_back({opts_.events ? opts_.events->fd() : -1, POLLIN, 0});
        fds.push_back({jobs_->fd(), POLLIN, 0});
        for (const auto& p : peers_) {
            // A peer with a job in flight is not read from: its requests are served one
            // at a time, and its books change only in its job's done.
            if (!p->gone && !p->busy) {
                fds.push_back({p->sock.get(), POLLIN, 0});
                whose.emplace_back(p.get(), false);
            }
            if (!p->gone && p->events_blocked && p->events) {
                fds.push_back({p->events.get(), POLLOUT, 0});
                whose.emplace_back(p.get(), true);
            }
        }
        const int n = ::poll(fds.data(), fds.size(), timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            log(level::err, fmt::format("poll: {}", std::strerror(errno)));
            return;
        }
        if (fds[0].revents) {
            log(level::info, "stopping");
            return;
        }
        if (!reopen_due()) return;
        // Jobs done: their replies and books (a fatal event below may then drop the peer).
        if (fds[3].revents & POLLIN) jobs_->finish();
        // Events: a fatal one drops clients before their requests are served.
        if (fds[2].revents & POLLIN) {
            route_events();
            if (failed_) return;
        }
        for (std::size_t i = 0; i < whose.size(); ++i) {
            const short ev = fds[4 + i].revents;
            peer& p = *whose[i].first;
            if (p.gone) continue;  // dropped in this pass (a recovery, a failed send)
            if (whose[i].second) {
                if (ev & POLLOUT) flush_events(p);
                continue;
            }
            if (p.busy) continue;  // (a request of this pass)
            if (ev & POLLIN) serve(p);
            else if (ev & (POLLHUP | POLLERR | POLLNVAL)) drop(p, "its socket closed");
        }
        // Departed clients: each one's next teardown slice, then those done go.
        for (auto& p : peers_) {
            if (p->leaving && !p->leaving->done && !p->busy) pump(*p);
        }
        const std::size_t before = peers_.size();
        std::erase_if(peers_, [](const auto& p) { return p->gone && !p->busy && (!p->leaving || p->leaving->done); });
        if (peers_.size() != before) ++released_;
        retry_parked();
        for (std::size_t d = 0; d < devices_.size(); ++d) {
            if (devices_[d]->hand_over_due) hand_over(d);
        }
        if (failed_) return;
        if (fds[1].revents & POLLIN) accept_clients();
        log_held_back();
    }
}

// A departed client's books count until its teardown has released them, and a job's
// mapping or unmapping until it is done: what the trust domain holds, not what it asked
// for last.
std::uint64_t server::pinned_by_domain(const std::string& domain) const {
    std::uint64_t n = 0;
    for (const auto& q : peers_) {
        if (q->refused || q->domain != domain) continue;
        for (const auto& o : q->dev) n += o.pinned;
        n += q->pending.pinned;
    }
    return n;
}

std::size_t server::mappings_by_domain(const std::string& domain) const {
    std::size_t n = 0;
    for (const auto& q : peers_) {
        if (q->refused || q->domain != domain) continue;
        for (const auto& o : q->dev) n += o.maps.size();
        n += q->pending.maps;
    }
    return n;
}

quotas server::room(const peer& p, std::size_t d) const {
    std::uint64_t qps = 0, cqs = 0, mrs = 0, pds = 0, uars = 0, srqs = 0, translations = 0;
    using obj = command_effect::object;
    for (const auto& q : peers_) {
        if (q.get() == &p || q->refused || q->domain != p.domain) continue;
        const owned& o = q->dev[d];
        qps += o.qps.size();
        cqs += o.cqs.size();
        mrs += o.mkeys.size();
        pds += o.pds.size();
        uars += o.uars.size();
        srqs += o.srqs.size();
        translations += o.translations;
        if (q->busy && q->pending.device == d) {  // what its job in flight may create
            const obj c = q->pending.creates;
            qps += c == obj::qp;
            cqs += c == obj::cq;
            mrs += c == obj::mkey;
            pds += c == obj::pd;
            srqs += c == obj::srq;
            uars += q->pending.uar;
            translations += q->pending.translations;
        }
    }
    auto left = [](std::uint32_t limit, std::uint64_t used) {
        return static_cast<std::uint32_t>(used >= limit ? 0 : limit - used);
    };
    quotas r = opts_.limits;
    r.qps = left(r.qps, qps);
    r.cqs = left(r.cqs, cqs);
    r.mrs = left(r.mrs, mrs);
    r.pds = left(r.pds, pds);
    r.uars = left(r.uars, uars);
    r.srqs = left(r.srqs, srqs);
    r.translations = translations >= r.translations ? 0 : r.translations - translations;
    return r;
}

bool server::send(peer& p, std::span<const std::byte> msg, std::span<const int> fds) {
    auto s = send_message(p.sock.get(), msg, fds, MSG_DONTWAIT);
    if (s) return true;
    if (s.error().code == EAGAIN || s.error().code == EWOULDBLOCK) {
        drop(p, "its socket is full (it does not read its replies)");
    } else {
        drop(p, s.error().message);
    }
    return false;
}

bool server::refuse(peer& p, std::uint16_t type, std::uint32_t seq, const error& e) {
    ++refused_;
    if (p.allowed) ++tallies_[p.domain].refused;
    log_refusal(p, type, e);
    return send(p, encode_reply(type, seq, e.code, e.message));
}

void server::serve(peer& p) {
    std::vector<std::byte> cut;
    auto m = receive(p.sock.get(), MSG_DONTWAIT, &cut);
    if (!m) {
        const int e = m.error().code;
        if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) return;
        if (e == ECONNRESET || e == EPIPE) {
            drop(p, "its socket closed");
            return;
        }
        // Oversized or with too many fds: refused with the sender's sequence when its
        // header came through (the session moves past it, as the sender did), and the
        // connection goes on.
        request r;
        read_cut_header(cut, r);
        if (p.refused || !r.header_ok) {
            (void)refuse(p, 0, 0, m.error());
            return;
        }
        p.order.skip(r);
        record(p, type_name(r.hdr.type), true, {});
        (void)refuse(p, r.hdr.type, r.hdr.seq, m.error());
        return;
    }
    if (p.refused) {
        ++refused_;
        if (p.allowed) ++tallies_[p.domain].refused;
        header h{};
        if (m->bytes.size() >= header_bytes) std::memcpy(&h, m->bytes.data(), header_bytes);
        if (send(p, encode_reply(h.type, h.seq, p.refusal, p.refusal_text))) drop(p, "refused");
        return;
    }
    std::vector<int> raw;
    for (const auto& f : m->fds) raw.push_back(f.get());
    request r;
    const auto parsed = std::chrono::steady_clock::now();  // the histogram's start
    if (auto s = parse_request(m->bytes, raw, r); !s) {
        // The client counted this request: so does the session, when it can tell.
        p.order.skip(r);
        record(p, type_name(r.hdr.type), true, {});
        (void)refuse(p, r.hdr.type, r.hdr.seq, s.error());
        return;
    }
    if (auto s = p.order.accept(r); !s) {
        record(p, type_name(r.hdr.type), true, {});
        (void)refuse(p, r.hdr.type, r.hdr.seq, s.error());
        return;
    }
    handle(p, r, parsed);
}

// Once per bring-up, before anyone is served (or in a recovery's bring-up).
device_info server::describe(driver::hca& h) {
    device_info i;
    i.bdf = h.device().bdf();
    i.firmware = h.fw_version_string();
    i.ethernet = h.ethernet();
    i.comp_eqn = h.comp_eqn();
    if (auto st = h.query_port_state(1)) {
        i.port_up = st->active();
        i.port_logical = static_cast<std::uint8_t>(st->logical);
    }
    i.caps = h.caps();
    i.gids = h.roce_gids();
    i.mac = h.mac();
    i.ipv4 = h.ipv4();
    i.bar_size = h.device().bar0().size();
    if (auto p = h.query_port(1)) {
        i.max_mtu = static_cast<std::uint8_t>(p->max_mtu);
        if (i.gids.empty()) i.gids = p->gids;  // InfiniBand: GID 0
    }
    if (auto p = h.query_ptys(1)) i.ptys = std::move(p).value();
    return i;
}

std::vector<device_info> server::devices_info(bool with_caps) const {
    std::vector<device_info> out;
    for (const auto& d : devices_) {
        if (!d->hca) {  // being brought up again (a recovery): its name only
            device_info i;
            i.bdf = d->bdf;
            out.push_back(std::move(i));
            continue;
        }
        out.push_back(d->info);
        if (!with_caps) {
            device_info& i = out.back();
            i.caps.clear();
            i.gids.clear();
            i.mac = {};
            i.ipv4 = {};
            i.max_mtu = 0;
            i.bar_size = 0;
            i.ptys.clear();
        }
    }
    return out;
}

void server::refresh_port(std::size_t d) {
    device_state& ds = *devices_[d];
    if (!ds.hca) return;
    if (ds.refreshing) {
        ds.refresh_again = true;
        return;
    }
    ds.refreshing = true;
    auto st = std::make_shared<result<driver::hca::port_state>>(error{EAGAIN, "not read"});
    driver::hca* h = ds.hca.get();
    const std::uint64_t gen = ds.generation;
    jobs_->post(
        job_lanes::lane::small, [st, h] { *st = h->query_port_state(1); },
        [this, d, st, gen] {
            device_state& ds = *devices_[d];
            ds.refreshing = false;
            if (gen != ds.generation || !ds.hca) return;  // reset meanwhile: read at its bring-up
            if (*st) {
                ds.info.port_up = (*st)->active();
                ds.info.port_logical = static_cast<std::uint8_t>((*st)->logical);
            }
            if (ds.refresh_again) {
                ds.refresh_again = false;
                refresh_port(d);
            }
        });
}

void server::handle(peer& p, request& r, std::chrono::steady_clock::time_point start) {
    request_meta m;
    m.type = r.hdr.type;
    m.seq = r.hdr.seq;
    m.kind = r.type;
    m.start = start;
    // The metrics' name: COMMAND and COMMAND_FD by their PRM opcode (the input's first 16
    // bits, PRM "Command Input"; one without a name by its number), others by type.
    m.op = type_name(r.hdr.type);
    if ((r.type == msg_type::command || r.type == msg_type::command_fd) && r.command.in.size() >= 2) {
        const auto code = ifc::get<ifc::cmd_in::opcode>(r.command.in.data());
        m.op = std::string(hw::name(static_cast<cmd_opcode>(code)));
        if (m.op.empty()) m.op = fmt::format("0x{:04x}", code);
    }
    dispatch(p, m, r);
}

void server::dispatch(peer& p, const request_meta& m, request& r) {
    switch (r.type) {
    case msg_type::hello: {
        hello_reply h;
        h.devices = devices_info(true);
        for (std::size_t i = 0; i < h.devices.size() && i < devices_.size(); ++i) {
            const std::string& domain = devices_[i]->domain;
            h.devices[i].other_domain = !opts_.share_functions && !domain.empty() && domain != p.domain;
        }
        conclude(p, m, answer{payload(h), {}, {}});
        break;
    }
    case msg_type::status: conclude(p, m, on_status(p)); break;
    case msg_type::map_memory: on_map(p, m, r); break;
    case msg_type::unmap_memory: on_unmap(p, m, r); break;
    case msg_type::alloc_uar: on_alloc_uar(p, m, r); break;
    case msg_type::dealloc_uar: on_dealloc_uar(p, m, r); break;
    case msg_type::command:
    case msg_type::command_fd: on_command(p, m, r); break;
    case msg_type::events: conclude(p, m, on_events(p, r)); break;
    case msg_type::counters: on_counters(p, m, r); break;
    case msg_type::event: conclude(p, m, error{EOPNOTSUPP, "EVENT is not a request"}); break;
    }
}

void server::record(const peer& p, const std::string& op, bool refused, std::chrono::nanoseconds took) {
    if (opts_.stats) opts_.stats->request(reinterpret_cast<std::uintptr_t>(&p), op, refused, took);
}

void server::record_books(const peer& p) {
    std::vector<std::pair<std::string, client_counts>> per;
    for (std::size_t i = 0; i < p.dev.size() && i < devices_.size(); ++i) {
        const owned& o = p.dev[i];
        per.emplace_back(devices_[i]->bdf,  // (its hca is null while a recovery brings it up)
                         client_counts{o.pds.size(), o.cqs.size(), o.mkeys.size(), o.qps.size(), o.srqs.size(),
                                       o.uars.size(), o.maps.size(), o.pinned});
    }
    opts_.stats->client_seen(reinterpret_cast<std::uintptr_t>(&p), p.pid, p.uid, p.comm, std::move(per));
}

// The metrics thread's: under hca_mu_, which a recovery holds while it closes and
// replaces a function's hca; a function being brought up again is left out.
std::vector<port_sample> server::sample_ports() const {
    std::vector<port_sample> out;
    std::lock_guard lock(hca_mu_);
    for (const auto& d : devices_) {
        if (d->hca) out.push_back(sample_port(*d->hca));
    }
    return out;
}

result<std::uint16_t> server::device_index(std::uint16_t d) const {
    if (d >= devices_.size()) {
        return error{ENODEV, fmt::format("device {} (this daemon has {})", d, devices_.size())};
    }
    if (!devices_[d]->hca) {
        return error{EAGAIN, fmt::format("{}: being brought up again after a reset (try again)", devices_[d]->bdf)};
    }
    return d;
}

}  // namespace cxv::daemon
