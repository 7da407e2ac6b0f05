// Events of the daemon's functions on their way to clients (docs/daemon.md, "Events").
//
// Each hca reports on its own event thread (driver/hca/eq.h); the server serves clients
// on one thread of its own. The inbox sits between them, and routes on the event thread
// itself: every client connection has a queue of its own here, and a table the server
// keeps (a CQ, QP or SRQ number of a function -> its owner's queue; the queues subscribed
// to a function) says where each event goes: a completion to its CQ's owner, a queue
// error to its object's owner, a port change to every subscriber of the function. The
// server is woken through an eventfd and sends each ready queue's events down its
// client's event channel, as far as the channel's socket takes them.
//
// Each queue is bounded (`limit` events): an event that finds its queue full is dropped
// and counted against that queue alone, so one client's completion storm fills its own
// queue and no other's. From the first drop on, the queue takes nothing more until the
// server has sent everything before it; then the client gets one overflow event saying
// how many were dropped, and its queue takes events again. (So what it receives is
// in order: the events before the loss, the overflow, the events after.)
//
// A fatal event is not a client's: it goes aside (one per function and hca generation,
// so bounded) for the server, since the function's recovery hangs on it. An event whose
// object no client owns goes nowhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/result.h"
#include "driver/hca/hca.h"
#include "protocol/codec.h"

namespace cxv::daemon {

class event_inbox {
public:
    // Per client connection, by default (cxvd --event-queue): a client whose consumer
    // falls behind by more than this (beyond what its channel's socket buffer holds)
    // loses events. About 64 bytes an event.
    static constexpr std::size_t default_queue_limit = 1024;

    // What an hca's callbacks report.
    struct item {
        std::size_t device = 0;
        std::uint64_t generation = 0;  // of the hca that reported it (recovery makes a new one)
        bool completion = false;
        std::uint32_t cqn = 0;        // completion
        driver::hca_event event{};    // otherwise
    };
    // One event waiting in a client's queue: the message and the generation of the hca
    // it came from (the server drops those of an hca since replaced).
    struct queued {
        std::uint64_t generation = 0;
        event_msg msg;
    };

    // One client's queue. Opaque to the server but for `owner`.
    class queue {
    public:
        void* owner = nullptr;  // the server's client; set before the queue is routed to

    private:
        friend class event_inbox;
        explicit queue(std::size_t limit) : limit_(limit) {}
        std::size_t limit_;
        std::deque<queued> items_;   // under the inbox's mutex, as the rest
        std::uint64_t lost_ = 0;     // dropped since the last overflow event
        std::uint64_t dropped_ = 0;  // dropped in all
        std::vector<bool> subscribed_;
        bool ready_ = false;  // listed in ready_
        bool closed_ = false;
        bool warned_ = false;  // the server logged its first overflow
    };

    enum class object { cq, qp, srq };

    static result<std::shared_ptr<event_inbox>> create();

    // Routes `o`'s on_completion and on_event (keeping an on_event already there, which
    // is called first) to this inbox as events of function `device`, generation `gen`.
    static void wire(const std::shared_ptr<event_inbox>& in, driver::hca::options& o, std::size_t device,
                     std::uint64_t gen);

    // Any thread (the hcas' event threads): routes `it` to its owner's queue, or aside
    // when fatal.
    void push(item it);

    // ---- the server's thread ----
    // A client's queue, holding at most `limit` events (at least 1).
    std::shared_ptr<queue> open(std::size_t limit);
    // From now on the queue takes the events of function `device` (EVENTS).
    void subscribe(queue& q, std::size_t device);
    // Object `id` of function `device` is `q`'s (created), or no one's (q null: destroyed;
    // only when it was `owner`'s, so a stale removal does not undo a newer owner).
    void route(std::size_t device, object what, std::uint32_t id, const std::shared_ptr<queue>& q);
    void unroute(std::size_t device, object what, std::uint32_t id, const queue& owner);
    // The queue takes nothing more; what it held is gone, and it is no longer ready.
    void close(queue& q);
    // The queues that got something since the last call (open ones only).
    std::vector<std::shared_ptr<queue>> ready();
    // The next event of `q` without taking it (the overflow event first, once everything
    // before the loss is taken), and taking it.
    std::optional<queued> front(queue& q);
    void pop(queue& q);
    // Events `q` dropped since it was opened (the server's log line when its client goes).
    std::uint64_t dropped(const queue& q) const;
    // True once, at `q`'s first drop (the server logs it then).
    bool first_overflow(queue& q);
    // Fatal events since the last call.
    std::vector<item> take_fatal();
    // The functions (and hca generations) whose port changed since the last call: the
    // server reads their state again.
    std::vector<std::pair<std::size_t, std::uint64_t>> take_port_changes();
    int fd() const noexcept { return wake_.get(); }

private:
    event_inbox() = default;
    void add(const std::shared_ptr<queue>& q, const queued& e, bool& wake);  // under mu_
    mutable std::mutex mu_;
    std::map<std::pair<std::size_t, std::uint32_t>, std::shared_ptr<queue>> routes_[3];  // by object
    std::vector<std::shared_ptr<queue>> open_;
    std::vector<std::shared_ptr<queue>> ready_;
    std::vector<item> fatal_;
    std::vector<std::pair<std::size_t, std::uint64_t>> port_changes_;
    unique_fd wake_;
};

}  // namespace cxv::daemon
