#include "daemon/server.h"

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
#include <fstream>
#include <sstream>

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

struct server::device_state {
    std::unique_ptr<driver::hca> hca;
    device_facts facts;
};

struct server::peer {
    unique_fd sock;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    std::string comm;
    session order;
    std::vector<owned> dev;  // per device
    bool gone = false;
    bool refused = false;  // not allowed: its first request is answered EACCES, then it goes
};

namespace {

constexpr std::size_t kMaxRefused = 64;

std::string read_comm(pid_t pid) {
    std::ifstream f(fmt::format("/proc/{}/comm", pid));
    std::string s;
    std::getline(f, s);
    return s;
}

// Supplementary groups from /proc/PID/status ("Groups:"), read at connect time.
std::vector<gid_t> read_groups(pid_t pid) {
    std::ifstream f(fmt::format("/proc/{}/status", pid));
    std::string line;
    std::vector<gid_t> g;
    while (std::getline(f, line)) {
        if (line.rfind("Groups:", 0) != 0) continue;
        std::istringstream s(line.substr(7));
        unsigned long v;
        while (s >> v) g.push_back(static_cast<gid_t>(v));
    }
    return g;
}

}  // namespace

server::server(server_options o, std::vector<std::unique_ptr<driver::hca>> devices) : opts_(std::move(o)) {
    for (auto& h : devices) {
        auto d = std::make_unique<device_state>();
        d->facts.comp_eqn = h->comp_eqn();
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
    {
        unique_fd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            return error{EADDRINUSE, fmt::format("another cxvd serves {}", path)};
        }
        if (errno == ECONNREFUSED) ::unlink(path.c_str());
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
        fds.push_back({listen_.get(), POLLIN, 0});
        for (const auto& p : peers_) fds.push_back({p->sock.get(), POLLIN, 0});
        const int n = ::poll(fds.data(), fds.size(), -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            log(level::err, fmt::format("poll: {}", std::strerror(errno)));
            return;
        }
        if (fds[0].revents) {
            log(level::info, "stopping");
            return;
        }
        // Peers first (their slots in fds match peers_ as it was), then new ones.
        const std::size_t count = peers_.size();
        for (std::size_t i = 0; i < count; ++i) {
            const short ev = fds[2 + i].revents;
            peer& p = *peers_[i];
            if (ev & POLLIN) serve(p);
            else if (ev & (POLLHUP | POLLERR | POLLNVAL)) drop(p, "its socket closed");
        }
        std::erase_if(peers_, [](const auto& p) { return p->gone; });
        if (fds[1].revents & POLLIN) accept_clients();
    }
}

void server::accept_clients() {
    for (;;) {
        unique_fd s(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!s) {
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
        p->groups = read_groups(c.pid);
        p->comm = read_comm(c.pid);
        p->dev.resize(devices_.size());
        if (!allowed(*p)) {
            // Answered at its first request and closed then: closing a UNIX socket with
            // the peer's message unread resets the connection, and the reply would be
            // lost. At most kMaxRefused wait; the oldest goes first.
            log(level::warning, fmt::format("refused pid {} uid {} ({}): not on the allow-list", p->pid, p->uid,
                                            p->comm));
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
        log(level::info, fmt::format("client pid {} uid {} ({}) connected", p->pid, p->uid, p->comm));
        peers_.push_back(std::move(p));
    }
}

bool server::allowed(const peer& p) const {
    if (p.uid == 0 || p.uid == ::geteuid()) return true;
    if (std::find(opts_.allow_uids.begin(), opts_.allow_uids.end(), p.uid) != opts_.allow_uids.end()) return true;
    for (const gid_t g : opts_.allow_gids) {
        if (g == p.gid || std::find(p.groups.begin(), p.groups.end(), g) != p.groups.end()) return true;
    }
    return false;
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
    return send(p, encode_reply(type, seq, e.code, e.message));
}

void server::serve(peer& p) {
    auto m = receive(p.sock.get(), MSG_DONTWAIT);
    if (!m) {
        const int e = m.error().code;
        if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) return;
        if (e == ECONNRESET || e == EPIPE) {
            drop(p, "its socket closed");
            return;
        }
        // Oversized or with too many fds: refused, and the connection goes on.
        (void)refuse(p, 0, 0, m.error());
        return;
    }
    if (p.refused) {
        ++refused_;
        header h{};
        if (m->bytes.size() >= header_bytes) std::memcpy(&h, m->bytes.data(), header_bytes);
        const std::string why = fmt::format("uid {} (gid {}) is not allowed to use this cxvd: ask its "
                                            "administrator for --allow-uid or --allow-gid",
                                            p.uid, p.gid);
        if (send(p, encode_reply(h.type, h.seq, EACCES, why))) drop(p, "refused");
        return;
    }
    std::vector<int> raw;
    for (const auto& f : m->fds) raw.push_back(f.get());
    request r;
    if (auto s = parse_request(m->bytes, raw, r); !s) {
        (void)refuse(p, r.hdr.type, r.hdr.seq, s.error());
        return;
    }
    if (auto s = p.order.accept(r); !s) {
        (void)refuse(p, r.hdr.type, r.hdr.seq, s.error());
        return;
    }
    handle(p, r);
}

std::vector<device_info> server::devices_info(bool with_caps) {
    std::vector<device_info> out;
    for (const auto& d : devices_) {
        device_info i;
        i.bdf = d->hca->device().bdf();
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

void server::handle(peer& p, request& r) {
    result<answer> a = answer{};
    switch (r.type) {
    case msg_type::hello: {
        hello_reply h;
        h.devices = devices_info(true);
        a = answer{payload(h), {}};
        break;
    }
    case msg_type::status: a = on_status(); break;
    case msg_type::map_memory: a = on_map(p, r); break;
    case msg_type::unmap_memory: a = on_unmap(p, r); break;
    case msg_type::alloc_uar: a = on_alloc_uar(p, r); break;
    case msg_type::dealloc_uar: a = on_dealloc_uar(p, r); break;
    case msg_type::command: a = on_command(p, r); break;
    }
    if (!a) {
        (void)refuse(p, r.hdr.type, r.hdr.seq, a.error());
        return;
    }
    (void)send(p, encode_reply(r.hdr.type, r.hdr.seq, 0, "", a->payload), a->fds);
}

result<std::uint16_t> server::device_index(std::uint16_t d) const {
    if (d >= devices_.size()) {
        return error{ENODEV, fmt::format("device {} (this daemon has {})", d, devices_.size())};
    }
    return d;
}

result<server::answer> server::on_status() {
    status_reply s;
    s.devices = devices_info(false);
    s.commands = commands_;
    s.refused = refused_;
    s.clients_served = served_;
    for (const auto& p : peers_) {
        if (p->gone || p->refused) continue;
        client_info c;
        c.pid = p->pid;
        c.uid = p->uid;
        c.gid = p->gid;
        c.comm = p->comm;
        for (const auto& o : p->dev) {
            c.pds += static_cast<std::uint32_t>(o.pds.size());
            c.cqs += static_cast<std::uint32_t>(o.cqs.size());
            c.mkeys += static_cast<std::uint32_t>(o.mkeys.size());
            c.qps += static_cast<std::uint32_t>(o.qps.size());
            c.srqs += static_cast<std::uint32_t>(o.srqs.size());
            c.uars += static_cast<std::uint32_t>(o.uars.size());
            c.maps += static_cast<std::uint32_t>(o.maps.size());
            c.pinned += o.pinned;
        }
        s.clients.push_back(std::move(c));
    }
    return answer{payload(s), {}};
}

result<server::answer> server::on_map(peer& p, const request& r) {
    auto d = device_index(r.map.device);
    if (!d) return d.error();
    owned& o = p.dev[*d];
    std::uint64_t total = 0;
    for (const auto& x : p.dev) total += x.pinned;
    if (total + r.map.length > opts_.limits.pinned_bytes) {
        return error{EDQUOT, fmt::format("MAP_MEMORY: {} more bytes would pin {} (the client's quota is {})",
                                         r.map.length, total + r.map.length, opts_.limits.pinned_bytes)};
    }
    // The file must not shrink under the mapping (memfd_create(2), F_SEAL_SHRINK): a
    // truncated page would fault in the daemon, and in the model's IOMMU walk.
    const int seals = ::fcntl(r.fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        return error{EPERM, "MAP_MEMORY: the memfd must be sealed against shrinking (F_ADD_SEALS F_SEAL_SHRINK)"};
    }
    void* addr = ::mmap(nullptr, r.map.length, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd,
                        static_cast<off_t>(r.map.offset));
    if (addr == MAP_FAILED) return error{errno, fmt::format("MAP_MEMORY: mmap: {}", std::strerror(errno))};
    mapping m;
    m.addr = addr;
    m.length = r.map.length;
    auto dma = devices_[*d]->hca->device().map_dma(addr, r.map.length, r.map.device_writes);
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
    if (o.uars.size() >= opts_.limits.uars) {
        return error{EDQUOT, fmt::format("ALLOC_UAR: the client has {} UARs, its quota", opts_.limits.uars)};
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
    auto e = check_command(r.command.in, r.command.out_len, o, devices_[*d]->facts, opts_.limits);
    if (!e) return e.error();
    ++commands_;
    auto out = devices_[*d]->hca->exec(r.command.in, std::max<std::size_t>(r.command.out_len, e->min_out));
    if (!out) return out.error();
    apply(*e, *out, o);
    out->resize(r.command.out_len);
    return answer{std::move(out).value(), {}};
}

void server::drop(peer& p, const std::string& why) {
    if (p.gone) return;
    p.gone = true;
    std::size_t objects = 0, uars = 0, failed = 0;
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < p.dev.size(); ++i) {
        owned& o = p.dev[i];
        auto& h = *devices_[i]->hca;
        for (const auto& in : teardown_commands(o)) {
            ++objects;
            if (auto s = h.exec(in, 16); !s) {
                ++failed;
                log(level::err, fmt::format("pid {}: {}", p.pid, s.error().message));
            }
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
        bytes += o.pinned;
        o = owned{};  // DMA unmapped, then munmapped
    }
    // Logged before the socket closes: a peer that sees the close finds the line there.
    log(failed ? level::warning : level::info,
        fmt::format("client pid {} ({}) gone ({}): {} objects destroyed, {} UARs returned, {} bytes unmapped{}",
                    p.pid, p.comm, why, objects, uars, bytes,
                    failed ? fmt::format(", {} commands failed", failed) : std::string()));
    p.sock = unique_fd{};
}

}  // namespace cxv::daemon
