// The server's events and recovery (docs/daemon.md, "Events", "Faults"): EVENTS and the
// event channel, routing each event to the client that owns its object, and bringing a
// dead function up again.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "daemon/server.h"
#include "daemon/server_state.h"
#include "hw/opcodes.h"

namespace cxv::daemon {

// ---- events -----------------------------------------------------------------------------

result<server::answer> server::on_events(peer& p, const request& r) {
    auto d = device_index(r.events.device);
    if (!d) return d.error();
    if (!opts_.events) return error{EOPNOTSUPP, "EVENTS: this daemon routes no events"};
    answer a;
    if (!p.events) {
        // One channel per connection, for every function it subscribes to; the daemon's
        // end is written with MSG_DONTWAIT only (a client that does not read loses events,
        // it never holds up the daemon).
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
            return error{errno, fmt::format("EVENTS: socketpair: {}", std::strerror(errno))};
        }
        p.events = unique_fd(sv[0]);
        (void)::shutdown(sv[0], SHUT_RD);  // the client has nothing to say there
        a.fds.push_back(sv[1]);            // handle() closes it once sent
    }
    p.subscribed[*d] = true;
    return a;
}

void server::send_event(peer& p, const event_msg& e) {
    if (!p.events || p.gone || !p.subscribed[e.device]) return;
    auto s = send_message(p.events.get(), encode_event(++p.event_seq, e), {}, MSG_DONTWAIT);
    if (s) return;
    if (s.error().code == EAGAIN || s.error().code == EWOULDBLOCK) {
        if (p.events_dropped++ == 0) {
            log(level::warning, fmt::format("client pid {} ({}): its event channel is full (it does not read its "
                                            "events): events are dropped",
                                            p.pid, p.comm));
        }
        return;
    }
    p.events = unique_fd{};  // the client closed its end: no events for it any more
}

void server::route_events() {
    using hw::event_type;
    if (const std::uint64_t n = opts_.events->dropped(); n != inbox_dropped_) {
        log(level::warning, fmt::format("{} event(s) dropped in the daemon's event queue since the last report ({} in "
                                        "all): the server loop fell behind its functions' events",
                                        n - inbox_dropped_, n));
        inbox_dropped_ = n;
    }
    for (auto& it : opts_.events->take()) {
        if (it.device >= devices_.size() || it.generation != devices_[it.device]->generation ||
            !devices_[it.device]->hca) {
            continue;  // a dead hca's (or a failed bring-up's) event
        }
        const std::size_t d = it.device;
        event_msg e;
        e.device = static_cast<std::uint16_t>(d);
        if (it.completion) {
            e.what = event_msg::kind::completion;
            e.object = it.cqn;
            const auto& owners = devices_[d]->cq_owner;
            if (auto o = owners.find(it.cqn); o != owners.end()) send_event(*o->second, e);
            continue;
        }
        const driver::hca_event& ev = it.event;
        e.what = event_msg::kind::async;
        e.async_kind = static_cast<std::uint8_t>(ev.what);
        e.port = static_cast<std::uint8_t>(ev.port);
        e.event_type = ev.event_type;
        e.object = ev.object;
        e.detail = ev.detail;
        switch (ev.what) {
        case driver::hca_event::fatal:
            // The command interface dead (health, internal error): recovery. A fatal
            // report that left it alive (a page request not served) is logged only.
            if (devices_[d]->hca->dead() && !recover(d, ev.detail)) return;
            break;
        case driver::hca_event::queue_error: {
            const hw::event_object on = hw::affiliated_object(static_cast<event_type>(ev.event_type));
            if (on == hw::event_object::cq) {
                const auto& owners = devices_[d]->cq_owner;
                if (auto o = owners.find(ev.object); o != owners.end()) send_event(*o->second, e);
                break;
            }
            for (auto& p : peers_) {
                const owned& o = p->dev[d];
                const bool mine = on == hw::event_object::srq ? o.srqs.contains(ev.object)
                                  : on == hw::event_object::qp ? o.qps.contains(ev.object)
                                                               : false;
                if (mine) {
                    send_event(*p, e);
                    break;
                }
            }
            break;
        }
        default:  // port changes: every client of the function
            for (auto& p : peers_) send_event(*p, e);
            break;
        }
    }
}

bool server::recover(std::size_t d, const std::string& why) {
    device_state& ds = *devices_[d];
    const std::string bdf = ds.bdf;
    log(level::err, fmt::format("{}: the function is dead ({}): its clients get the fatal event and are dropped, "
                                "then it is reset and brought up again",
                                bdf, why));
    // The hca's threads stop (no teardown commands: the device is dead), and a function
    // reset stops whatever DMA the device still did, before any client memory goes.
    // The metrics thread (sample_ports) stays off this hca from here until it is gone.
    std::unique_lock hca_lock(hca_mu_);
    (void)ds.hca->close();
    if (auto s = ds.hca->device().reset(); !s) {
        log(level::warning, fmt::format("{}: function reset: {}", bdf, s.error().message));
    }
    event_msg e;
    e.device = static_cast<std::uint16_t>(d);
    e.what = event_msg::kind::async;
    e.async_kind = static_cast<std::uint8_t>(driver::hca_event::fatal);
    e.detail = fmt::format("{}: device dead: {}", bdf, why);
    std::size_t clients = 0;
    for (auto& p : peers_) {
        if (p->gone || p->refused || (!p->subscribed[d] && p->dev[d].empty() && p->dev[d].maps.empty())) continue;
        send_event(*p, e);
        drop(*p, fmt::format("its function {} was reset", bdf), static_cast<long>(d));
        ++clients;
    }
    ds.leaked.clear();
    ds.hca.reset();  // the vfio device closes; reopen opens it anew
    hca_lock.unlock();
    ++ds.generation;
    // A function that keeps dying is not brought up forever: three recoveries within a
    // minute and the daemon gives up (exits with failure, for its service manager).
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(recoveries_, [&](auto t) { return now - t > std::chrono::minutes(1); });
    recoveries_.push_back(now);
    if (!opts_.reopen || recoveries_.size() > 3) {
        log(level::err, fmt::format("{}: not brought up again ({}): cxvd stops", bdf,
                                    opts_.reopen ? "the fourth recovery within a minute" : "no way to reopen it"));
        failed_ = true;
        return false;
    }
    ds.reopening = true;
    ds.failures = 0;
    ds.busy_logged = false;
    ds.dropped_clients = clients;
    return try_reopen(d);
}

bool server::try_reopen(std::size_t d) {
    device_state& ds = *devices_[d];
    // Each attempt is a generation of its own: events of an attempt that failed after
    // its EQs were up are not routed as the next one's.
    auto h = opts_.reopen(d, ++ds.generation);
    const auto now = std::chrono::steady_clock::now();
    if (h) {
        {
            std::lock_guard lock(hca_mu_);
            ds.hca = std::move(h).value();
        }
        ds.facts.comp_eqn = ds.hca->comp_eqn();
        ds.reopening = false;
        log(level::info, fmt::format("{}: recovered: reset and up again, firmware {} ({} client(s) were dropped)",
                                     ds.bdf, ds.hca->fw_version_string(), ds.dropped_clients));
        return true;
    }
    if (h.error().code == EBUSY) {
        // On a card: a process still holds the VFIO device (a dropped client that has not
        // yet let its device fd go; it does when it hears of the death). Not a failure:
        // tried again every 0.2 s for as long as it takes.
        if (!ds.busy_logged) {
            log(level::warning, fmt::format("{}: still held open by another process ({}): waiting for it to let go",
                                            ds.bdf, h.error().message));
            ds.busy_logged = true;
        }
        ds.retry_at = now + std::chrono::milliseconds(200);
        return true;
    }
    log(level::warning, fmt::format("{}: bring-up after the reset failed: {}", ds.bdf, h.error().message));
    if (++ds.failures >= 5) {
        log(level::err, fmt::format("{}: could not be brought up again: cxvd stops", ds.bdf));
        failed_ = true;
        return false;
    }
    // 0.2 s, 0.4 s, 0.8 s, 1.6 s apart, through the poll loop's timeout (clients of the
    // other functions are served meanwhile).
    ds.retry_at = now + std::chrono::milliseconds(200) * (1u << (ds.failures - 1));
    return true;
}

bool server::reopen_due() {
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t d = 0; d < devices_.size(); ++d) {
        if (devices_[d]->reopening && devices_[d]->retry_at <= now && !try_reopen(d)) return false;
    }
    return true;
}

int server::reopen_timeout() const {
    int t = -1;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& ds : devices_) {
        if (!ds->reopening) continue;
        const auto ms = std::max<std::int64_t>(
            0, std::chrono::ceil<std::chrono::milliseconds>(ds->retry_at - now).count());
        if (t < 0 || ms < t) t = static_cast<int>(ms);
    }
    return t;
}

}  // namespace cxv::daemon
