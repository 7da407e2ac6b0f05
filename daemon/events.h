// Events of the daemon's functions on their way to clients (docs/daemon.md, "Events").
//
// Each hca reports on its own event thread (driver/hca/eq.h); the server serves clients
// on one thread of its own. The inbox sits between them: an hca's callbacks queue an
// event and wake the server through an eventfd; the server takes the queue and sends
// each event to the client that owns its object. The queue is bounded: an event that
// finds it full is dropped and counted, so an event thread never waits on the server.
// A fatal event is never dropped: one that finds the queue full is kept aside (one per
// function and hca generation, so still bounded) and comes out after the queue, since
// the function's recovery hangs on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/result.h"
#include "daemon/protocol.h"
#include "driver/hca/hca.h"

namespace cxv::daemon {

class event_inbox {
public:
    static constexpr std::size_t capacity = 65536;

    struct item {
        std::size_t device = 0;
        std::uint64_t generation = 0;  // of the hca that reported it (recovery makes a new one)
        bool completion = false;
        std::uint32_t cqn = 0;        // completion
        driver::hca_event event{};    // otherwise
    };

    static result<std::shared_ptr<event_inbox>> create();

    // Routes `o`'s on_completion and on_event (keeping an on_event already there, which
    // is called first) to this inbox as events of function `device`, generation `gen`.
    static void wire(const std::shared_ptr<event_inbox>& in, driver::hca::options& o, std::size_t device,
                     std::uint64_t gen);

    // Any thread.
    void push(item it);
    // The server's thread: everything queued, in order, and the eventfd drained.
    std::vector<item> take();
    int fd() const noexcept { return wake_.get(); }
    std::uint64_t dropped() const;

private:
    event_inbox() = default;
    mutable std::mutex mu_;
    std::vector<item> queue_;
    std::vector<item> fatal_;  // fatal events that found the queue full
    std::uint64_t dropped_ = 0;
    unique_fd wake_;
};

}  // namespace cxv::daemon
