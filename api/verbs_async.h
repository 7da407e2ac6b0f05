// The asynchronous events of a context of cxv_open_device (ibv_get_async_event(3)): the
// device's events as struct ibv_async_event, queued by the driver's event thread, with
// an eventfd (one count per waiting event) as the context's async_fd.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>

#include "api/cxv.h"

namespace cxv::api {

class verbs_async {
public:
    // The eventfd, or -1 when it could not be made (no events then).
    verbs_async();
    verbs_async(const verbs_async&) = delete;
    verbs_async& operator=(const verbs_async&) = delete;

    int fd() const noexcept { return fd_.get(); }
    // Events before this are bring-up's, not the program's. `active_ports`: bit n set
    // when port n was ACTIVE as the context opened. A port event that says what the
    // context already knows (ACTIVE for a port it saw ACTIVE, or DOWN for one it saw
    // down) is bring-up's too, reported late by the event thread: dropped, as a port's
    // events are changes of its state (the kernel's uverbs file gets only those after
    // its open).
    void start(std::uint32_t active_ports);
    // From the driver's event thread.
    void push(const cxv::event& e);

    // The queues events name, by number; an event of a queue not (or no longer) here is
    // dropped.
    void add(std::uint32_t cqn, ibv_cq* cq);
    void add(std::uint32_t qpn, ibv_qp* qp);
    void add(std::uint32_t srqn, ibv_srq* srq);
    void remove_cq(std::uint32_t cqn);
    void remove_qp(std::uint32_t qpn);
    void remove_srq(std::uint32_t srqn);

    // ibv_get_async_event(3): 0, or -1 with errno (EAGAIN when async_fd is O_NONBLOCK and
    // nothing waits).
    int get(ibv_async_event* out);

private:
    std::mutex mu_;
    void drop_pending(const void* object);  // mu_ held
    std::deque<ibv_async_event> pending_;
    std::map<std::uint32_t, ibv_cq*> cqs_;
    std::map<std::uint32_t, ibv_qp*> qps_;
    std::map<std::uint32_t, ibv_srq*> srqs_;
    bool started_ = false;
    std::uint32_t active_ports_ = 0;  // as the program has been told: at start(), then by events
    unique_fd fd_;
};

}  // namespace cxv::api
