#include "client/remote.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hw/ifc.h"
#include "hw/opcodes.h"

namespace cxv::daemon {

namespace {

// A firmware command runs to its end in the daemon before the next request (bounded by
// its command timeout); this waits well beyond it.
constexpr std::chrono::seconds kTimeout{60};

}  // namespace

result<std::shared_ptr<remote_function>> remote_function::connect(const std::string& path, const std::string& bdf) {
    auto c = client::connect(path);
    if (!c) return c.error();
    auto h = c->hello();
    if (!h) return error{h.error().code, fmt::format("cxvd at {}: HELLO: {}", path, h.error().message)};
    std::string names;
    // With no function named: the first that no other trust domain uses (the daemon
    // refuses those), else the first.
    std::size_t pick = 0;
    while (bdf.empty() && pick < h->devices.size() && h->devices[pick].other_domain) ++pick;
    if (pick == h->devices.size()) pick = 0;
    for (std::size_t i = 0; i < h->devices.size(); ++i) {
        const auto& d = h->devices[i];
        if (bdf.empty() ? i == pick : d.bdf == bdf) {
            if (d.bar_size == 0) {  // HELLO names a function being recovered, nothing more
                return error{EAGAIN, fmt::format("cxvd at {}: {} is being brought up again (try again)", path, d.bdf)};
            }
            std::shared_ptr<remote_function> f(new remote_function(std::move(c).value(), d,
                                                                   static_cast<std::uint16_t>(i)));
            return f;
        }
        names += (names.empty() ? "" : ", ") + d.bdf;
    }
    return error{ENODEV, fmt::format("cxvd at {} does not serve {} (it serves: {})", path,
                                     bdf.empty() ? std::string("any function") : bdf,
                                     names.empty() ? std::string("nothing") : names)};
}

result<client::answer> remote_function::call(msg_type t, std::span<const std::byte> body, std::span<const int> fds) {
    std::lock_guard lock(mu_);
    if (dead()) {
        std::lock_guard w(why_mu_);
        return error{ENODEV, fmt::format("{}: cxvd {}: the connection to cxvd is dead ({})", info_.bdf,
                                         type_name(static_cast<std::uint16_t>(t)), why_)};
    }
    auto a = c_.call(t, body, fds, kTimeout);
    if (!a) {
        // EPIPE (the send found the socket closed) is the same death as ECONNRESET.
        const int code = a.error().code == EPIPE ? ECONNRESET : a.error().code;
        auto e = error{code, fmt::format("{}: cxvd {}: {}", info_.bdf, type_name(static_cast<std::uint16_t>(t)),
                                         a.error().message)};
        // A transport failure: the daemon is gone (ECONNRESET, ENOTCONN), did not answer
        // in time or answered nonsense. The connection is not used again (a late reply
        // would be another request's), so every later request fails at once. A request
        // that never went out (EMSGSIZE, a bad fd) leaves the connection as it was.
        if (code == ECONNRESET || code == ENOTCONN || code == ETIMEDOUT || code == EPROTO) mark_dead(e.message);
        return e;
    }
    if (a->err != 0) return error{a->err, fmt::format("{}: cxvd refused: {}", info_.bdf, a->text)};
    return a;
}

result<std::uint64_t> remote_function::map_memory(int fd, std::uint64_t offset, std::uint64_t length,
                                                  bool device_writes, std::uint64_t align) {
    const int fds[] = {fd};
    auto a = call(msg_type::map_memory, body(map_memory_req{index_, device_writes, offset, length, align}), fds);
    if (!a) return a.error();
    auto r = parse_map_memory_reply(a->payload);
    if (!r) return r.error();
    return r->iova;
}

status remote_function::unmap_memory(std::uint64_t iova) {
    auto a = call(msg_type::unmap_memory, body(unmap_memory_req{index_, iova}));
    if (!a) return a.error();
    return ok_status();
}

result<driver::vfio::remote_backend::uar_grant> remote_function::alloc_uar() {
    auto a = call(msg_type::alloc_uar, body(alloc_uar_req{index_}));
    if (!a) return a.error();
    auto r = parse_alloc_uar_reply(a->payload);
    if (!r) {
        // The daemon allocated a UAR this client cannot name: return it by the index at
        // the payload's start when there is one, else close the connection (the daemon
        // then returns everything this client had) rather than leak it.
        if (a->payload.size() >= sizeof(std::uint32_t)) {
            std::uint32_t uar = 0;
            std::memcpy(&uar, a->payload.data(), sizeof uar);
            (void)dealloc_uar(uar);
        } else {
            std::lock_guard lock(mu_);
            c_.close("an ALLOC_UAR reply it could not read");
        }
        return error{EPROTO, fmt::format("{}: {}", info_.bdf, r.error().message)};
    }
    if (a->fds.size() != 1) {
        (void)dealloc_uar(r->uar);
        return error{EPROTO, fmt::format("{}: ALLOC_UAR came with {} fds, not the device fd", info_.bdf, a->fds.size())};
    }
    uar_grant g;
    g.uar = r->uar;
    g.fd = std::move(a->fds[0]);
    g.mmap_offset = r->mmap_offset;
    g.mmap_length = r->mmap_length;
    return g;
}

status remote_function::dealloc_uar(std::uint32_t uar) {
    auto a = call(msg_type::dealloc_uar, body(dealloc_uar_req{index_, uar}));
    if (!a) return a.error();
    return ok_status();
}

result<std::vector<std::byte>> remote_function::exec(std::span<const std::byte> in, std::size_t out_len) {
    auto out = in.size() > max_command_in_bytes || out_len > max_command_out_bytes ? exec_large(in, out_len)
                                                                                     : exec_inline(in, out_len);
    if (out) note_cq(in, *out);
    return out;
}

// The CQs this connection made, for an overflow event (read_events): CREATE_CQ's number
// from its output, DESTROY_CQ's from its input (PRM "CREATE_CQ", "DESTROY_CQ").
void remote_function::note_cq(std::span<const std::byte> in, std::span<const std::byte> out) {
    namespace ifc = hw::ifc;
    if (in.size() < ifc::destroy_cq_in::size_bytes) return;
    const auto op = static_cast<hw::cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()));
    std::lock_guard lock(cqs_mu_);
    if (op == hw::cmd_opcode::CREATE_CQ && out.size() >= ifc::create_cq_out::size_bytes) {
        cqs_.insert(ifc::get<ifc::create_cq_out::cqn>(out.data()));
    } else if (op == hw::cmd_opcode::DESTROY_CQ) {
        cqs_.erase(ifc::get<ifc::destroy_cq_in::cqn>(in.data()));
    }
}

result<std::vector<std::byte>> remote_function::exec_inline(std::span<const std::byte> in, std::size_t out_len) {
    command_req r;
    r.device = index_;
    r.out_len = static_cast<std::uint32_t>(out_len);
    r.in.assign(in.begin(), in.end());
    auto a = call(msg_type::command, body(r));
    if (!a) return a.error();
    if (a->payload.size() != out_len) {
        return error{EPROTO, fmt::format("{}: COMMAND answered {} bytes, not {}", info_.bdf, a->payload.size(), out_len)};
    }
    return std::move(a->payload);
}

remote_function::~remote_function() { stop_events(); }

void remote_function::mark_dead(const std::string& why) {
    {
        std::lock_guard w(why_mu_);
        if (dead()) return;
        why_ = why;
        dead_.store(true, std::memory_order_release);
    }
    // The device fd goes before anyone hears of the death (the API's flush follows the
    // fatal event): docs/daemon.md, "The daemon dies".
    drop_device_mappings();
    // Both sockets shut down: the daemon (if alive) sees this client go and cleans up,
    // and the event thread sees its channel end and reports the death.
    (void)::shutdown(c_.fd(), SHUT_RDWR);
    if (events_) (void)::shutdown(events_.get(), SHUT_RDWR);
}

status remote_function::open_events(std::function<void(const event_msg&)> on_event,
                                    std::function<void(const std::string&)> on_dead) {
    auto a = call(msg_type::events, body(events_req{index_}));
    if (!a) return a.error();
    if (a->fds.size() != 1) {
        return error{EPROTO, fmt::format("{}: EVENTS came with {} fds, not the channel", info_.bdf, a->fds.size())};
    }
    stop_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop_) return error{errno, fmt::format("eventfd: {}", std::strerror(errno))};
    events_ = std::move(a->fds[0]);
    reader_ = std::thread([self = shared_from_this(), fd = events_.get(), ev = std::move(on_event),
                           dead = std::move(on_dead)]() mutable {
        self->read_events(fd, std::move(ev), std::move(dead));
        // The callbacks go before `self`, which may be the last owner (then this object
        // is destroyed here, on this thread: stop_events() detaches it).
        ev = nullptr;
        dead = nullptr;
    });
    return ok_status();
}

void remote_function::read_events(int fd, std::function<void(const event_msg&)> on_event,
                                  std::function<void(const std::string&)> on_dead) {
    bool fatal_seen = false;
    std::array<std::byte, max_event_bytes> buf;  // one event at a time, nothing allocated
    for (;;) {
        pollfd p[2] = {{fd, POLLIN, 0}, {stop_.get(), POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        // stop_events(): no callback after it
        if (p[1].revents || stopped_.load(std::memory_order_acquire)) return;
        auto m = receive_into(fd, buf, MSG_DONTWAIT);
        if (!m) {
            const int e = m.error().code;
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) continue;
            if (e == EMSGSIZE) continue;  // not an EVENT (its rest is discarded): the channel goes on
            break;  // closed (ECONNRESET) or broken: the daemon is gone or dropped us
        }
        auto ev = parse_event(std::span<const std::byte>(buf.data(), *m));
        if (!ev) continue;  // not ours to act on; the channel goes on
        if (ev->what == event_msg::kind::async &&
            ev->async_kind == static_cast<std::uint8_t>(driver::hca_event::fatal)) {
            mark_dead(ev->detail);
            fatal_seen = true;
        }
        if (stopped_.load(std::memory_order_acquire)) return;
        if (ev->what == event_msg::kind::overflow && on_event) {
            // The daemon dropped events of this connection (its queue there was full): a
            // completion event among them would leave a waiter on an armed CQ asleep, so
            // every CQ of this connection gets one. A spurious one is harmless: a consumer
            // polls after each event and finds what there is, maybe nothing.
            std::vector<std::uint32_t> cqs;
            {
                std::lock_guard lock(cqs_mu_);
                cqs.assign(cqs_.begin(), cqs_.end());
            }
            for (const auto cqn : cqs) {
                event_msg c;
                c.device = index_;
                c.what = event_msg::kind::completion;
                c.object = cqn;
                on_event(c);
            }
        }
        if (on_event) on_event(*ev);
    }
    if (stopped_.load(std::memory_order_acquire)) return;  // stopped meanwhile
    std::string why;
    if (!dead()) {
        mark_dead(fmt::format("cxvd closed the event channel of {}: the daemon exited or dropped this client",
                              info_.bdf));
    }
    {
        std::lock_guard w(why_mu_);
        why = why_;
    }
    if (!fatal_seen && on_dead && !stopped_.load(std::memory_order_acquire)) on_dead(why);
}

void remote_function::stop_events() {
    stopped_.store(true, std::memory_order_release);
    if (!reader_.joinable()) return;
    if (reader_.get_id() == std::this_thread::get_id()) {  // from a callback: it ends on its own
        reader_.detach();
        return;
    }
    (void)::eventfd_write(stop_.get(), 1);
    reader_.join();
}

// A command too large for one message (a memory key's MTT for a large region): its input
// in a sealed memfd (COMMAND_FD), its output inline or, when large, in one.
result<std::vector<std::byte>> remote_function::exec_large(std::span<const std::byte> in, std::size_t out_len) {
    if (in.size() > max_large_command_bytes || out_len > max_large_command_bytes ||
        in.size() + out_len > max_large_command_total) {
        return error{EMSGSIZE, fmt::format("{}: a command of {} bytes in and {} out (cxvd takes at most {} each, {} "
                                           "together)",
                                           info_.bdf, in.size(), out_len, max_large_command_bytes,
                                           max_large_command_total)};
    }
    auto f = sealed_memfd(in);
    if (!f) return error{f.error().code, fmt::format("{}: COMMAND_FD: {}", info_.bdf, f.error().message)};
    const int fds[] = {f->get()};
    const command_fd_req r{index_, static_cast<std::uint32_t>(out_len), static_cast<std::uint32_t>(in.size())};
    auto a = call(msg_type::command_fd, body(r), fds);
    if (!a) return a.error();
    if (out_len <= max_command_out_bytes) {
        if (a->payload.size() != out_len) {
            return error{EPROTO, fmt::format("{}: COMMAND_FD answered {} bytes, not {}", info_.bdf, a->payload.size(),
                                             out_len)};
        }
        return std::move(a->payload);
    }
    if (a->fds.size() != 1) {
        return error{EPROTO, fmt::format("{}: COMMAND_FD's output came with {} fds, not 1", info_.bdf, a->fds.size())};
    }
    auto out = read_sealed(a->fds[0].get(), out_len);
    if (!out) return error{EPROTO, fmt::format("{}: COMMAND_FD's output: {}", info_.bdf, out.error().message)};
    return out;
}

result<std::unique_ptr<driver::hca>> attach(const std::string& path, const std::string& bdf,
                                            const driver::hca::options& o) {
    auto f = remote_function::connect(path, bdf);
    if (!f) return f.error();
    const device_info& d = (*f)->info();
    auto dev = driver::vfio::device::attach(d.bdf, *f, d.bar_size);
    if (!dev) return dev.error();
    driver::attach_info info;
    info.firmware = d.firmware;
    info.port_logical = d.port_logical;
    info.comp_eqn = d.comp_eqn;
    info.caps = d.caps;
    info.gids = d.gids;
    info.mac = d.mac;
    info.ipv4 = d.ipv4;
    info.max_mtu = d.max_mtu;
    info.ptys = d.ptys;
    auto h = driver::hca::attach(std::move(dev).value(), *f, std::move(info), o);
    if (!h) return h.error();
    // Events of this process's objects (docs/daemon.md, "Events"): completions to
    // on_completion, the rest to on_event, on the reader's thread as the hca's own
    // event thread would call them; the daemon's death is a fatal event.
    auto s = (*f)->open_events(
        [on_event = o.on_event, on_completion = o.on_completion](const event_msg& e) {
            if (e.what == event_msg::kind::completion) {
                if (on_completion) on_completion(e.object);
                return;
            }
            if (!on_event) return;
            if (e.what == event_msg::kind::overflow) {
                // Told as an event of no port (the verbs API passes such on to no one),
                // with the count in `object`; its CQs were woken just before.
                on_event(driver::hca_event{driver::hca_event::port_other, 0, e.object, e.detail, 0});
                return;
            }
            const auto kind = e.async_kind <= driver::hca_event::queue_error
                                  ? static_cast<driver::hca_event::kind>(e.async_kind)
                                  : driver::hca_event::port_other;  // a kind this client does not know
            driver::hca_event ev{kind, e.port, e.object, e.detail, e.event_type};
            // The daemon sends a fatal event only when it resets the function (and drops
            // this client): the device is dead for this process.
            ev.device_dead = kind == driver::hca_event::fatal;
            on_event(ev);
        },
        [on_event = o.on_event](const std::string& why) {
            if (!on_event) return;
            driver::hca_event ev{driver::hca_event::fatal, 0, 0, why};
            ev.device_dead = true;
            on_event(ev);
        });
    if (!s) return s.error();
    return h;
}

}  // namespace cxv::daemon
