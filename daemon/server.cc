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
    log(level::info, fmt::format("serving {} function(s) on {} (mode {:o})", s->devices_.size(), path,
                                 s->opts_.socket_mode));
    return s;
}

server::~server() {
    for (auto& p : peers_) {
        if (!p->gone) drop(*p, "the daemon stops");
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
    for (;;) {
        fds.clear();
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
        for (const auto& p : peers_) fds.push_back({p->sock.get(), POLLIN, 0});
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
        // Events first: a fatal one drops clients before their requests are served.
        if (fds[2].revents & POLLIN) {
            route_events();
            if (failed_) return;
        }
        // Peers (their slots in fds match peers_ as it was), then new ones.
        const std::size_t count = peers_.size();
        for (std::size_t i = 0; i < count; ++i) {
            const short ev = fds[3 + i].revents;
            peer& p = *peers_[i];
            if (p.gone) continue;  // dropped by route_events (a recovery) in this pass
            if (ev & POLLIN) serve(p);
            else if (ev & (POLLHUP | POLLERR | POLLNVAL)) drop(p, "its socket closed");
        }
        std::erase_if(peers_, [](const auto& p) { return p->gone; });
        if (fds[1].revents & POLLIN) accept_clients();
        log_held_back();
    }
}

std::uint64_t server::pinned_by_uid(uid_t uid) const {
    std::uint64_t n = 0;
    for (const auto& q : peers_) {
        if (q->gone || q->refused || q->uid != uid) continue;
        for (const auto& o : q->dev) n += o.pinned;
    }
    return n;
}

std::size_t server::mappings_by_uid(uid_t uid) const {
    std::size_t n = 0;
    for (const auto& q : peers_) {
        if (q->gone || q->refused || q->uid != uid) continue;
        for (const auto& o : q->dev) n += o.maps.size();
    }
    return n;
}

quotas server::room(const peer& p, std::size_t d) const {
    std::uint64_t qps = 0, cqs = 0, mrs = 0, pds = 0, uars = 0, srqs = 0;
    for (const auto& q : peers_) {
        if (q.get() == &p || q->gone || q->refused || q->uid != p.uid) continue;
        const owned& o = q->dev[d];
        qps += o.qps.size();
        cqs += o.cqs.size();
        mrs += o.mkeys.size();
        pds += o.pds.size();
        uars += o.uars.size();
        srqs += o.srqs.size();
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
    if (p.allowed) ++tallies_[p.uid].refused;
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
        if (p.allowed) ++tallies_[p.uid].refused;
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

std::vector<device_info> server::devices_info(bool with_caps) {
    std::vector<device_info> out;
    for (const auto& d : devices_) {
        device_info i;
        i.bdf = d->bdf;
        if (!d->hca) {  // being brought up again (a recovery): its name only
            out.push_back(std::move(i));
            continue;
        }
        i.firmware = d->hca->fw_version_string();
        i.ethernet = d->hca->ethernet();
        i.comp_eqn = d->facts.comp_eqn;
        if (auto st = d->hca->query_port_state(1)) {
            i.port_up = st->active();
            i.port_logical = static_cast<std::uint8_t>(st->logical);
        }
        if (with_caps) {
            i.caps = d->hca->caps();
            i.gids = d->hca->roce_gids();
            i.mac = d->hca->mac();
            i.ipv4 = d->hca->ipv4();
            i.bar_size = d->hca->device().bar0().size();
            if (auto p = d->hca->query_port(1)) {
                i.max_mtu = static_cast<std::uint8_t>(p->max_mtu);
                if (i.gids.empty()) i.gids = p->gids;  // InfiniBand: GID 0
            }
        }
        out.push_back(std::move(i));
    }
    return out;
}

void server::handle(peer& p, request& r, std::chrono::steady_clock::time_point start) {
    result<answer> a = answer{};
    unique_fd made;
    switch (r.type) {
    case msg_type::hello: {
        hello_reply h;
        h.devices = devices_info(true);
        a = answer{payload(h), {}};
        break;
    }
    case msg_type::status: a = on_status(p); break;
    case msg_type::map_memory: a = on_map(p, r); break;
    case msg_type::unmap_memory: a = on_unmap(p, r); break;
    case msg_type::alloc_uar: a = on_alloc_uar(p, r); break;
    case msg_type::dealloc_uar: a = on_dealloc_uar(p, r); break;
    case msg_type::command: a = on_command(p, r); break;
    case msg_type::events: a = on_events(p, r); break;
    case msg_type::event: a = error{EOPNOTSUPP, "EVENT is not a request"}; break;
    case msg_type::command_fd:
        a = on_command(p, r);
        // An output too large for the reply comes in a sealed memfd beside it.
        if (a && r.command.out_len > max_command_out_bytes) {
            auto f = sealed_memfd(a->payload);
            if (!f) {
                a = f.error();
                break;
            }
            a->payload.clear();
            made = std::move(f).value();  // closed once the reply is sent
            a->fds.push_back(made.get());
        }
        break;
    }
    if (opts_.stats) {
        // From the parse to the reply, ready to go (recorded before it is sent, so a
        // client that has its reply finds its request counted). COMMAND and COMMAND_FD
        // by their PRM opcode (the input's first 16 bits, PRM "Command Input"; one
        // without a name by its number), other requests by type.
        const auto took = std::chrono::steady_clock::now() - start;
        const bool cmd = r.type == msg_type::command || r.type == msg_type::command_fd;
        std::string op = type_name(r.hdr.type);
        if (cmd && r.command.in.size() >= 2) {
            const auto code = ifc::get<ifc::cmd_in::opcode>(r.command.in.data());
            op = std::string(hw::name(static_cast<cmd_opcode>(code)));
            if (op.empty()) op = fmt::format("0x{:04x}", code);
        }
        record_books(p);  // first: a new client's first request counts as its own
        record(p, op, !a, took);
    }
    if (!a) {
        (void)refuse(p, r.hdr.type, r.hdr.seq, a.error());
        return;
    }
    (void)send(p, encode_reply(r.hdr.type, r.hdr.seq, 0, "", a->payload), a->fds);
    // A passed fd that was made for this reply only (EVENTS' end of the pair) goes here.
    if (r.type == msg_type::events) {
        for (const int fd : a->fds) ::close(fd);
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

result<server::answer> server::on_map(peer& p, const request& r) {
    auto d = device_index(r.map.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    if (const std::size_t n = mappings_by_uid(p.uid); n >= opts_.limits.mappings) {
        return error{EDQUOT, fmt::format("MAP_MEMORY: uid {} has {} mappings over all its connections and functions, "
                                         "its quota (--quota-mappings {}): unmap some, or map fewer, larger buffers",
                                         p.uid, n, opts_.limits.mappings)};
    }
    const std::uint64_t total = pinned_by_uid(p.uid);
    if (total + r.map.length > opts_.limits.pinned_bytes) {
        return error{EDQUOT, fmt::format("MAP_MEMORY: {} more bytes would pin {} (the quota of uid {}, over all its "
                                         "connections, is {})",
                                         r.map.length, total + r.map.length, p.uid, opts_.limits.pinned_bytes)};
    }
    // The file must not shrink under the mapping (memfd_create(2), F_SEAL_SHRINK): a
    // truncated page would fault in the daemon, and in the model's IOMMU walk. The seal
    // first, then the size, here where the mapping is made.
    if (auto s = check_map_fd(r.fd, r.map.offset, r.map.length); !s) return s.error();
    // Memory the device only reads may come read-only (an MR without write access: the
    // client opens its file O_RDONLY).
    const int prot = PROT_READ | (r.map.device_writes ? PROT_WRITE : 0);
    void* addr = ::mmap(nullptr, r.map.length, prot, MAP_SHARED, r.fd,
                        static_cast<off_t>(r.map.offset));
    if (addr == MAP_FAILED) return error{errno, fmt::format("MAP_MEMORY: mmap: {}", std::strerror(errno))};
    mapping m;
    m.addr = addr;
    m.length = r.map.length;
    m.device_writes = r.map.device_writes;
    auto dma = devices_[*d]->hca->device().map_dma(addr, r.map.length, r.map.device_writes, r.map.align);
    if (!dma) return dma.error();  // m's destructor unmaps
    m.dma = std::move(dma).value();
    const std::uint64_t iova = m.dma.iova();
    o.pinned += m.length;
    o.maps.emplace(iova, std::move(m));
    return answer{payload(map_memory_reply{iova}), {}};
}

result<server::answer> server::on_unmap(peer& p, const request& r) {
    auto d = device_index(r.unmap.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    auto it = o.maps.find(r.unmap.iova);
    if (it == o.maps.end()) {
        return error{EPERM, fmt::format("UNMAP_MEMORY: IOVA 0x{:x} is not the start of the client's memory", r.unmap.iova)};
    }
    if (it->second.users > 0) {
        return error{EBUSY, fmt::format("UNMAP_MEMORY: {} of the client's objects still use IOVA 0x{:x}",
                                        it->second.users, r.unmap.iova)};
    }
    o.pinned -= it->second.length;
    o.maps.erase(it);
    return answer{};
}

result<server::answer> server::on_alloc_uar(peer& p, const request& r) {
    auto d = device_index(r.alloc_uar.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    if (o.uars.size() >= room(p, *d).uars) {
        return error{EDQUOT, fmt::format("ALLOC_UAR: the quota of {} UARs is reached (it counts every connection of "
                                         "uid {})", opts_.limits.uars, p.uid)};
    }
    auto& h = *devices_[*d]->hca;
    auto out = h.exec(driver::command<ifc::alloc_uar_in>(cmd_opcode::ALLOC_UAR), ifc::alloc_uar_out::size_bytes);
    if (!out) return out.error();
    const std::uint32_t uar = ifc::get<ifc::alloc_uar_out::uar>(out->data());
    o.uars.insert(uar);
    // PRM "UAR": UAR page u is BAR0 + u * 4 KiB; BAR0 is region 0 of the device fd
    // (vfio-pci: VFIO_PCI_BAR0_REGION_INDEX at offset 0).
    std::uint64_t base = 0;
    if (auto reg = h.device().region(0)) base = reg->offset;
    alloc_uar_reply a{uar, base + std::uint64_t{uar} * hw::uar_page_size, hw::uar_page_size};
    return answer{payload(a), {h.device().fd()}};
}

result<server::answer> server::on_dealloc_uar(peer& p, const request& r) {
    auto d = device_index(r.dealloc_uar.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    const std::uint32_t uar = r.dealloc_uar.uar;
    if (!o.uars.contains(uar)) return error{EPERM, fmt::format("DEALLOC_UAR: UAR {} is not the client's", uar)};
    for (const auto& [cq, u] : o.cq_uar) {
        if (u == uar) return error{EBUSY, fmt::format("DEALLOC_UAR: CQ 0x{:x} still uses UAR {}", cq, uar)};
    }
    for (const auto& [qpn, u] : o.qp_info) {
        if (u.uar == uar) return error{EBUSY, fmt::format("DEALLOC_UAR: QP 0x{:x} still uses UAR {}", qpn, uar)};
    }
    auto in = driver::command<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR);
    ifc::set<ifc::dealloc_uar_in::uar>(in.data(), uar);
    auto out = devices_[*d]->hca->exec(in, ifc::dealloc_uar_out::size_bytes);
    if (!out) return out.error();
    o.uars.erase(uar);
    return answer{};
}

result<server::answer> server::on_command(peer& p, const request& r) {
    auto d = device_index(r.command.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    auto e = check_command(r.command.in, r.command.out_len, o, devices_[*d]->facts, room(p, *d));
    if (!e) return e.error();
    ++commands_;
    ++tallies_[p.uid].commands;
    auto out = devices_[*d]->hca->exec(r.command.in, std::max<std::size_t>(r.command.out_len, e->min_out));
    if (!out) return out.error();
    apply(*e, *out, o);
    if (e->obj == command_effect::object::cq) {
        auto& owners = devices_[*d]->cq_owner;
        if (e->what == command_effect::kind::create) owners[ifc::get<ifc::create_cq_out::cqn>(out->data())] = &p;
        if (e->what == command_effect::kind::destroy) owners.erase(e->id);
    }
    out->resize(r.command.out_len);
    return answer{std::move(out).value(), {}};
}

void server::drop(peer& p, const std::string& why, long dead) {
    if (p.gone) return;
    p.gone = true;
    p.events = unique_fd{};
    report_held_back(p, p.refusals.take());
    if (opts_.stats) opts_.stats->client_gone(reinterpret_cast<std::uintptr_t>(&p));
    std::size_t objects = 0, uars = 0, failed = 0, forgotten = 0;
    std::uint64_t bytes = 0, kept = 0;
    for (std::size_t i = 0; i < p.dev.size(); ++i) {
        owned& o = p.dev[i];
        for (const std::uint32_t cqn : o.cqs) {
            if (auto it = devices_[i]->cq_owner.find(cqn); it != devices_[i]->cq_owner.end() && it->second == &p) {
                devices_[i]->cq_owner.erase(it);
            }
        }
        if (static_cast<long>(i) == dead) {
            // The function was reset: its objects and UARs are gone with it, and the
            // device writes no memory any more.
            forgotten += teardown_commands(o).size() + o.uars.size();
            bytes += o.pinned;
            o = owned{};
            continue;
        }
        if (!devices_[i]->hca) continue;  // a function that could not be brought up again
        auto& h = *devices_[i]->hca;
        std::set<std::uint64_t> keep;  // mappings an object that would not go still uses
        for (const auto& step : teardown_commands(o)) {
            ++objects;
            auto s = h.exec(step.in, 16);
            if (s) continue;
            log(level::warning, fmt::format("pid {}: {}", p.pid, s.error().message));
            // A QP that will not go: back to RST (or ERR), then destroyed again.
            bool gone = false;
            if (step.obj == command_effect::object::qp) {
                for (const auto& move : qp_reset_commands(step.id)) {
                    (void)h.exec(move, 16);
                    if ((gone = h.exec(step.in, 16).ok())) break;
                }
            } else {
                gone = h.exec(step.in, 16).ok();
            }
            if (gone) continue;
            ++failed;
            keep.insert(step.maps.begin(), step.maps.end());
            log(level::err, fmt::format("pid {}: object 0x{:x} could not be destroyed: its memory stays mapped",
                                        p.pid, step.id));
        }
        for (const auto uar : o.uars) {
            auto in = driver::command<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR);
            ifc::set<ifc::dealloc_uar_in::uar>(in.data(), uar);
            ++uars;
            if (auto s = h.exec(in, ifc::dealloc_uar_out::size_bytes); !s) {
                ++failed;
                log(level::err, fmt::format("pid {}: {}", p.pid, s.error().message));
            }
        }
        // The IOVA of memory the device may still write is not given back: it stays in
        // the IOMMU (and mapped here) until the function is torn down.
        for (auto it = o.maps.begin(); it != o.maps.end();) {
            if (!keep.contains(it->first)) {
                ++it;
                continue;
            }
            log(level::err, fmt::format("pid {}: IOVA 0x{:x} ({} bytes) kept mapped until cxvd stops", p.pid,
                                        it->first, it->second.length));
            kept += it->second.length;
            devices_[i]->leaked.push_back(std::move(it->second));
            it = o.maps.erase(it);
        }
        bytes += o.pinned - std::min(o.pinned, kept);
        o = owned{};  // DMA unmapped, then munmapped
    }
    log(failed ? level::warning : level::info,
        fmt::format("client pid {} ({}) gone ({}): {} objects destroyed, {} UARs returned, {} bytes unmapped{}{}{}",
                    p.pid, p.comm, why, objects - std::min(objects, failed), uars, bytes,
                    forgotten ? fmt::format(", {} objects and UARs forgotten with the reset function", forgotten)
                              : std::string(),
                    p.events_dropped ? fmt::format(", {} events dropped (its event channel was full)",
                                                   p.events_dropped)
                                     : std::string(),
                    failed ? fmt::format(", {} commands failed", failed) : std::string()));
    p.sock = unique_fd{};  // after the log line, so a client that sees the close finds it there
}

}  // namespace cxv::daemon
