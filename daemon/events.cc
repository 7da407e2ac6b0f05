#include "daemon/events.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "hw/opcodes.h"

namespace cxv::daemon {

result<std::shared_ptr<event_inbox>> event_inbox::create() {
    std::shared_ptr<event_inbox> in(new event_inbox());
    in->wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!in->wake_) return error{errno, fmt::format("eventfd: {}", std::strerror(errno))};
    return in;
}

void event_inbox::wire(const std::shared_ptr<event_inbox>& in, driver::hca::options& o, std::size_t device,
                       std::uint64_t gen) {
    o.on_completion = [in, device, gen](std::uint32_t cqn) {
        item it;
        it.device = device;
        it.generation = gen;
        it.completion = true;
        it.cqn = cqn;
        in->push(std::move(it));
    };
    o.on_event = [in, device, gen, before = std::move(o.on_event)](const driver::hca_event& e) {
        if (before) before(e);
        item it;
        it.device = device;
        it.generation = gen;
        it.event = e;
        in->push(std::move(it));
    };
}

void event_inbox::add(const std::shared_ptr<queue>& q, const queued& e, bool& wake) {
    if (!q || q->closed_ || e.msg.device >= q->subscribed_.size() || !q->subscribed_[e.msg.device]) return;
    // Full, or still behind a loss the client has not been told of: dropped, counted.
    if (q->lost_ > 0 || q->items_.size() >= q->limit_) {
        ++q->lost_;
        ++q->dropped_;
    } else {
        q->items_.push_back(e);
    }
    if (!q->ready_) {  // the server sends what it holds, or the overflow event
        q->ready_ = true;
        ready_.push_back(q);
        wake = true;
    }
}

void event_inbox::push(item it) {
    bool wake = false;
    {
        std::lock_guard lock(mu_);
        if (!it.completion && it.event.what == driver::hca_event::fatal) {
            // The server's, never dropped: one per function and generation is enough.
            const bool kept = std::any_of(fatal_.begin(), fatal_.end(), [&](const item& f) {
                return f.device == it.device && f.generation == it.generation;
            });
            if (!kept) {
                fatal_.push_back(std::move(it));
                wake = true;
            }
        } else {
            queued e;
            e.generation = it.generation;
            e.msg.device = static_cast<std::uint16_t>(it.device);
            if (it.completion) {
                e.msg.what = event_msg::kind::completion;
                e.msg.object = it.cqn;
                if (auto r = routes_[static_cast<int>(object::cq)].find({it.device, it.cqn});
                    r != routes_[static_cast<int>(object::cq)].end()) {
                    add(r->second, e, wake);
                }
            } else {
                const driver::hca_event& ev = it.event;
                e.msg.what = event_msg::kind::async;
                e.msg.async_kind = static_cast<std::uint8_t>(ev.what);
                e.msg.port = static_cast<std::uint8_t>(ev.port);
                e.msg.event_type = ev.event_type;
                e.msg.object = ev.object;
                e.msg.detail = ev.detail.substr(0, max_text_bytes);
                if (ev.what == driver::hca_event::queue_error) {
                    // The object by the EQE's type (PRM "Events"): CQ_ERROR a CQ;
                    // SRQ_CATAS_ERROR, SRQ_RQ_LIMIT an SRQ; every other a QP.
                    const auto on = hw::affiliated_object(static_cast<hw::event_type>(ev.event_type));
                    const object o = on == hw::event_object::cq    ? object::cq
                                     : on == hw::event_object::srq ? object::srq
                                                                   : object::qp;
                    if (on == hw::event_object::cq || on == hw::event_object::srq || on == hw::event_object::qp) {
                        auto& table = routes_[static_cast<int>(o)];
                        if (auto r = table.find({it.device, ev.object}); r != table.end()) add(r->second, e, wake);
                    }
                } else {  // port changes: every client of the function, and the server
                    for (const auto& q : open_) add(q, e, wake);
                    const std::pair<std::size_t, std::uint64_t> at{it.device, it.generation};
                    if (std::find(port_changes_.begin(), port_changes_.end(), at) == port_changes_.end()) {
                        port_changes_.push_back(at);
                        wake = true;
                    }
                }
            }
        }
    }
    if (wake) {
        const std::uint64_t one = 1;
        (void)!::write(wake_.get(), &one, sizeof one);
    }
}

std::shared_ptr<event_inbox::queue> event_inbox::open(std::size_t limit) {
    std::shared_ptr<queue> q(new queue(std::max<std::size_t>(limit, 1)));
    std::lock_guard lock(mu_);
    open_.push_back(q);
    return q;
}

void event_inbox::subscribe(queue& q, std::size_t device) {
    std::lock_guard lock(mu_);
    if (q.subscribed_.size() <= device) q.subscribed_.resize(device + 1, false);
    q.subscribed_[device] = true;
}

void event_inbox::route(std::size_t device, object what, std::uint32_t id, const std::shared_ptr<queue>& q) {
    std::lock_guard lock(mu_);
    routes_[static_cast<int>(what)][{device, id}] = q;
}

void event_inbox::unroute(std::size_t device, object what, std::uint32_t id, const queue& owner) {
    std::lock_guard lock(mu_);
    auto& table = routes_[static_cast<int>(what)];
    if (auto r = table.find({device, id}); r != table.end() && r->second.get() == &owner) table.erase(r);
}

void event_inbox::close(queue& q) {
    std::lock_guard lock(mu_);
    q.closed_ = true;
    q.items_.clear();
    q.lost_ = 0;
    std::erase_if(open_, [&](const auto& o) { return o.get() == &q; });
    std::erase_if(ready_, [&](const auto& o) { return o.get() == &q; });
    q.ready_ = false;
}

std::vector<std::shared_ptr<event_inbox::queue>> event_inbox::ready() {
    std::uint64_t n = 0;
    (void)!::read(wake_.get(), &n, sizeof n);
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<queue>> out;
    out.swap(ready_);
    for (const auto& q : out) q->ready_ = false;
    return out;
}

std::optional<event_inbox::queued> event_inbox::front(queue& q) {
    std::lock_guard lock(mu_);
    if (q.closed_) return std::nullopt;
    if (q.items_.empty() && q.lost_ > 0) {
        // Everything before the loss is taken: the overflow event, and the queue takes
        // events again behind it.
        queued o;
        o.msg.device = event_msg::any_device;
        o.msg.what = event_msg::kind::overflow;
        o.msg.object =
            static_cast<std::uint32_t>(std::min<std::uint64_t>(q.lost_, std::numeric_limits<std::uint32_t>::max()));
        o.msg.detail = fmt::format("cxvd dropped {} event(s) of this connection: its event queue ({} events) was "
                                   "full",
                                   q.lost_, q.limit_);
        q.items_.push_back(std::move(o));
        q.lost_ = 0;
    }
    if (q.items_.empty()) return std::nullopt;
    return q.items_.front();
}

void event_inbox::pop(queue& q) {
    std::lock_guard lock(mu_);
    if (!q.items_.empty()) q.items_.pop_front();
}

std::uint64_t event_inbox::dropped(const queue& q) const {
    std::lock_guard lock(mu_);
    return q.dropped_;
}

bool event_inbox::first_overflow(queue& q) {
    std::lock_guard lock(mu_);
    if (q.dropped_ == 0 || q.warned_) return false;
    q.warned_ = true;
    return true;
}

std::vector<std::pair<std::size_t, std::uint64_t>> event_inbox::take_port_changes() {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::size_t, std::uint64_t>> out;
    out.swap(port_changes_);
    return out;
}

std::vector<event_inbox::item> event_inbox::take_fatal() {
    std::lock_guard lock(mu_);
    std::vector<item> out;
    out.swap(fatal_);
    return out;
}

}  // namespace cxv::daemon
