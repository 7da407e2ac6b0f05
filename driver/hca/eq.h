// The event queues the driver consumes (PRM §"Event Queue", §"CREATE_EQ", §"Events"):
// the async EQ (command completions, page requests, port changes, queue errors, internal
// errors) on MSI-X vector 0, and a completion EQ for the CQs (vector 1 when the function
// has it), with the thread that waits on their interrupts and dispatches every EQE.
//
// dispatch_eqe() decodes one EQE into a call of its handler; it touches nothing but the
// EQE's bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "base/result.h"
#include "driver/cmd/cmd_queue.h"
#include "driver/hca/event.h"
#include "driver/vfio/vfio.h"

namespace cxv::driver {

// Where each kind of event goes; all called on the event thread. Empty ones are skipped.
struct eq_handlers {
    std::function<void(std::uint32_t cqn)> completion;    // COMP
    std::function<void(std::uint32_t vector)> command;    // CMD: the completed slots
    std::function<void(std::int32_t num_pages)> page_request;
    std::function<void(hca_event)> event;                 // port changes and queue errors
    std::function<void()> port_change;                    // after a port change's event
    std::function<void(const std::string& why)> fatal;    // INTERNAL_ERROR
    std::function<void()> tick;                           // each wake-up (at least every 50 ms)
};

void dispatch_eqe(const std::byte* eqe, const eq_handlers& h);

class event_queues {
public:
    static constexpr unsigned log_size = 8;  // 256 EQEs of 64 bytes

    // `uar` is the UAR page whose EQ doorbell arms them.
    event_queues(vfio::device& dev, cmd_queue& cmd, std::uint32_t uar) : dev_(dev), cmd_(cmd), uar_(uar) {}
    ~event_queues() { stop(); }
    event_queues(const event_queues&) = delete;
    event_queues& operator=(const event_queues&) = delete;

    // CREATE_EQ for both, armed.
    status create();
    // The event thread, until stop().
    void start(eq_handlers h);
    void stop();
    // DESTROY_EQ for those created (the completion EQ first); the first error, after
    // trying both.
    status destroy();

    std::uint8_t async_eqn() const noexcept { return async_.n; }
    std::uint8_t comp_eqn() const noexcept { return comp_.n; }

private:
    struct queue {
        vfio::dma_buffer buf;
        std::uint32_t ci = 0;
        std::uint8_t n = 0;
        int fd = -1;
        bool created = false;
    };
    status create_one(queue& eq, unsigned vector, std::uint64_t events);
    void arm(const queue& eq);
    bool process(queue& eq);
    void loop();

    vfio::device& dev_;
    cmd_queue& cmd_;
    std::uint32_t uar_;
    queue async_, comp_;
    eq_handlers handlers_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace cxv::driver
