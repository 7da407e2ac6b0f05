// A verbs context's asynchronous events (api/verbs_async.h): what reaches async_fd and
// ibv_get_async_event(3), against the events the driver's event thread reports.
#include "api/verbs_async.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <vector>

#include "doctest/doctest.h"

namespace {

using cxv::api::verbs_async;

cxv::event port_event(cxv::event::kind what, unsigned port) {
    cxv::event e;
    e.what = what;
    e.port = port;
    return e;
}

// Every event waiting on the context, in order: (event type, port number).
std::vector<std::pair<ibv_event_type, int>> take_all(verbs_async& a) {
    std::vector<std::pair<ibv_event_type, int>> out;
    for (;;) {
        pollfd p{a.fd(), POLLIN, 0};
        if (::poll(&p, 1, 0) != 1) return out;
        ibv_async_event ev{};
        REQUIRE(a.get(&ev) == 0);
        out.emplace_back(ev.event_type, ev.element.port_num);
    }
}

using events = std::vector<std::pair<ibv_event_type, int>>;

}  // namespace

TEST_CASE("async events: a port's events are its changes as the context has seen them since its open") {
    verbs_async a;
    REQUIRE(a.fd() >= 0);
    REQUIRE(::fcntl(a.fd(), F_SETFL, ::fcntl(a.fd(), F_GETFL) | O_NONBLOCK) == 0);

    // Before the context is open: bring-up's, none reaches it.
    a.push(port_event(cxv::event::port_down, 1));
    a.push(port_event(cxv::event::port_up, 1));
    CHECK(take_all(a).empty());

    // Open with port 1 ACTIVE. The event thread's late report of the same ACTIVE (bring-up's
    // PORT_CHANGE, reported after the open returned) says nothing new: nothing waits.
    a.start(1u << 1);
    a.push(port_event(cxv::event::port_up, 1));
    CHECK(take_all(a).empty());
    ibv_async_event ev{};
    errno = 0;
    CHECK(a.get(&ev) == -1);
    CHECK(errno == EAGAIN);

    // The link goes down and comes back: both changes, once each, in order.
    a.push(port_event(cxv::event::port_down, 1));
    a.push(port_event(cxv::event::port_down, 1));
    a.push(port_event(cxv::event::port_up, 1));
    a.push(port_event(cxv::event::port_up, 1));
    CHECK(take_all(a) == events{{IBV_EVENT_PORT_ERR, 1}, {IBV_EVENT_PORT_ACTIVE, 1}});

    // Another port is its own: port 2 was not ACTIVE at the open, so its ACTIVE is news.
    a.push(port_event(cxv::event::port_up, 2));
    a.push(port_event(cxv::event::port_down, 1));
    CHECK(take_all(a) == events{{IBV_EVENT_PORT_ACTIVE, 2}, {IBV_EVENT_PORT_ERR, 1}});

    // A device-wide event is never a repeat.
    cxv::event fatal;
    fatal.what = cxv::event::fatal;
    a.push(fatal);
    a.push(fatal);
    CHECK(take_all(a) == events{{IBV_EVENT_DEVICE_FATAL, 0}, {IBV_EVENT_DEVICE_FATAL, 0}});
}

TEST_CASE("async events: a context opened with its port down is told when it comes up") {
    verbs_async a;
    REQUIRE(::fcntl(a.fd(), F_SETFL, ::fcntl(a.fd(), F_GETFL) | O_NONBLOCK) == 0);
    a.start(0);
    a.push(port_event(cxv::event::port_down, 1));  // late, says nothing new
    a.push(port_event(cxv::event::port_up, 1));
    CHECK(take_all(a) == events{{IBV_EVENT_PORT_ACTIVE, 1}});
}
