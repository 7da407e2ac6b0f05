// The server's events and recovery (docs/daemon.md, "Events", "Faults"): EVENTS and the
// event channel, each client's queue (event_inbox, which routes every event to its
// owner's queue on the event thread) sent down its channel as far as the socket takes
// it, and bringing a dead function up again.
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
    auto d = device_for(p, r.events.device);
    if (!d) return d.error();
    if (!opts_.events) return error{EOPNOTSUPP, "EVENTS: this daemon routes no events"};
    if (!p.queue) open_queue(p);  // its last channel was closed by the client
    answer a;
    if (!p.events) {
        // One channel per connection, for every function it subscribes to; the daemon's
        // end is written with MSG_DONTWAIT only (what the socket does not take waits in
        // the client's queue, and a client that does not read loses events: it never
        // holds up the daemon).
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
            return error{errno, fmt::format("EVENTS: socketpair: {}", std::strerror(errno))};
        }
        p.events = unique_fd(sv[0]);
        (void)::shutdown(sv[0], SHUT_RD);  // the client has nothing to say there
        a.made = unique_fd(sv[1]);  // closed once sent
        a.fds.push_back(sv[1]);
    }
    p.subscribed[*d] = true;
    opts_.events->subscribe(*p.queue, *d);
    return a;
}

void server::open_queue(peer& p) {
    auto& in = *opts_.events;
    p.queue = in.open(opts_.event_queue);
    p.queue->owner = &p;
    for (std::size_t i = 0; i < p.dev.size(); ++i) {
        for (const auto id : p.dev[i].cqs) in.route(i, event_inbox::object::cq, id, p.queue);
        for (const auto id : p.dev[i].qps) in.route(i, event_inbox::object::qp, id, p.queue);
        for (const auto id : p.dev[i].srqs) in.route(i, event_inbox::object::srq, id, p.queue);
    }
}

void server::flush_events(peer& p) {
    if (!p.queue || !p.events || p.gone) return;
    auto& in = *opts_.events;
    p.events_blocked = false;
    while (auto e = in.front(*p.queue)) {
        const event_msg& m = e->msg;
        // An event of an hca since replaced (a recovery) is not this function's any more.
        const bool stale = m.device >= devices_.size() || e->generation != devices_[m.device]->generation ||
                           !devices_[m.device]->hca;
        if (m.what != event_msg::kind::overflow && stale) {
            in.pop(*p.queue);
            continue;
        }
        auto s = send_message(p.events.get(), encode_event(p.event_seq + 1, m), {}, MSG_DONTWAIT);
        if (s) {
            ++p.event_seq;
            in.pop(*p.queue);
            continue;
        }
        if (s.error().code == EAGAIN || s.error().code == EWOULDBLOCK) {
            p.events_blocked = true;  // the rest when the channel has room (POLLOUT)
            break;
        }
        // The client closed its end: no events for it any more (until it asks for a new
        // channel: EVENTS, and a new queue).
        if (in.first_overflow(*p.queue)) log_overflow(p);
        p.events_dropped += in.dropped(*p.queue);
        in.close(*p.queue);
        p.queue.reset();
        p.events = unique_fd{};
        p.events_blocked = false;
        p.subscribed.assign(p.subscribed.size(), false);
        return;
    }
    if (in.first_overflow(*p.queue)) log_overflow(p);
}

void server::log_overflow(const peer& p) {
    log(level::warning, fmt::format("client pid {} ({}): its event queue is full (it does not read its events fast "
                                    "enough): events are dropped, and it is told how many",
                                    p.pid, p.comm));
}

void server::send_fatal(peer& p, const event_msg& e) {
    if (!p.events || p.gone || !p.subscribed[e.device]) return;
    flush_events(p);  // what was before it, as far as the channel takes it
    if (p.events) (void)send_message(p.events.get(), encode_event(++p.event_seq, e), {}, MSG_DONTWAIT);
}

void server::route_events() {
    auto& in = *opts_.events;
    for (auto& it : in.take_fatal()) {
        if (it.device >= devices_.size() || it.generation != devices_[it.device]->generation ||
            !devices_[it.device]->hca) {
            continue;  // a dead hca's (or a failed bring-up's) event
        }
        // The command interface dead (health, internal error): recovery. A fatal
        // report that left it alive (a page request not served) is logged only.
        if (devices_[it.device]->hca->dead() && !recover(it.device, it.event.detail)) return;
    }
    // A port changed: its state is read again (a job), for HELLO and STATUS.
    for (const auto& [d, gen] : in.take_port_changes()) {
        if (d < devices_.size() && gen == devices_[d]->generation) refresh_port(d);
    }
    for (const auto& q : in.ready()) {
        if (q->owner != nullptr) flush_events(*static_cast<peer*>(q->owner));
    }
}

bool server::recover(std::size_t d, const std::string& why) {
    device_state& ds = *devices_[d];
    const std::string bdf = ds.bdf;
    log(level::err, fmt::format("{}: the function is dead ({}): its clients get the fatal event and are dropped, "
                                "then it is reset and brought up again",
                                bdf, why));
    event_msg e;
    e.device = static_cast<std::uint16_t>(d);
    e.what = event_msg::kind::async;
    e.async_kind = static_cast<std::uint8_t>(driver::hca_event::fatal);
    e.detail = fmt::format("{}: device dead: {}", bdf, why);
    std::size_t clients = 0;
    reset_function(d, [&] {
        for (auto& p : peers_) {
            if (p->refused || (!p->subscribed[d] && p->dev[d].empty())) continue;
            if (!p->gone) {
                send_fatal(*p, e);
                drop(*p, fmt::format("its function {} was reset", bdf));
                ++clients;
            }
            // Its objects and UARs went with the reset, and the device writes no memory
            // any more: forgotten, and unmapped here (the function's container must be
            // free before it is opened again).
            forget(*p, d);
        }
    });
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
    ds.handing_over = false;
    ds.failures = 0;
    ds.busy_logged = false;
    ds.dropped_clients = clients;
    return try_reopen(d);
}

void server::reset_function(std::size_t d, const std::function<void()>& reset) {
    device_state& ds = *devices_[d];
    // Every job ends first (a command on the function fails at once once it is closed):
    // none may use an hca this closes, nor books this forgets. No teardown slice starts
    // meanwhile.
    quiescing_ = true;
    jobs_->drain();
    // The hca's threads stop (no teardown commands), and a function reset stops whatever
    // DMA the device still did, before any client memory goes; vfio-pci's reset also
    // takes every mapping of the BAR a process made of its device fd. The metrics thread
    // (sample_ports) stays off this hca from here until it is gone.
    std::unique_lock hca_lock(hca_mu_);
    (void)ds.hca->close();
    if (auto s = ds.hca->device().reset(); !s) {
        log(level::warning, fmt::format("{}: function reset: {}", ds.bdf, s.error().message));
    }
    reset();
    ds.leaked.clear();
    ds.hca.reset();  // the vfio device closes; reopen opens it anew
    hca_lock.unlock();
    quiescing_ = false;
    ++ds.generation;
    // No device fd given out before reaches the function now: an idle function is free.
    ds.fd_given_in.reset();
    if (ds.holders == 0) ds.domain.clear();
}

void server::hand_over(std::size_t d) {
    device_state& ds = *devices_[d];
    ds.hand_over_due = false;
    // A recovery reset it meanwhile, or its domain came back (device_for asks only with a
    // way to bring it up again).
    if (!ds.hca || ds.holders != 0 || !opts_.reopen) return;
    log(level::info, fmt::format("{}: reset and brought up again before another trust domain may use it ({}, "
                                 "gone, had the device fd)",
                                 ds.bdf, ds.domain));
    reset_function(d, [] {});  // (the domain and the fd's generation forgotten with it)
    ds.handing_over = true;
    ds.reopening = true;
    ds.failures = 0;
    ds.busy_logged = false;
    ds.dropped_clients = 0;
    (void)try_reopen(d);  // or again from the poll loop (reopen_due)
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
        ds.info = describe(*ds.hca);
        ds.reopening = false;
        if (ds.handing_over) {
            log(level::info, fmt::format("{}: handed over: reset and up again, firmware {}, free for any trust domain",
                                         ds.bdf, ds.hca->fw_version_string()));
        } else {
            log(level::info, fmt::format("{}: recovered: reset and up again, firmware {} ({} client(s) were dropped)",
                                         ds.bdf, ds.hca->fw_version_string(), ds.dropped_clients));
        }
        ds.handing_over = false;
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
