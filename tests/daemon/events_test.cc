// Events through cxvd (docs/daemon.md, "Events"): the daemon owns the EQs and sends each
// completion and asynchronous event to the client that owns its object, over the
// client's event channel. Two peer processes (event_peer.cc) started without cxv-sim,
// with CXV_DAEMON set, connect RC QPs through one daemon.
#include <infiniband/verbs.h>

#include <poll.h>

#include <sstream>

#include <doctest/doctest.h>

#include "daemon/events.h"
#include "tests/daemon/peer_proc.h"
#include "tests/daemon/rig.h"

using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

struct events_line {
    unsigned errors = 0, fatal = 0;
    std::string objects;
};
events_line events_of(peer_proc& p) {
    p.say("EVENTS");
    std::istringstream in(p.expect("EVENTS ").substr(7));
    events_line e;
    in >> e.errors >> e.fatal >> e.objects;
    return e;
}

}  // namespace

TEST_CASE("a completion event reaches its CQ's owner through cxvd; a QP error event reaches its owner only") {
    daemon_rig rig;
    daemon_env env(rig.sock);
    peer_proc a(rig.dir, 0), b(rig.dir, 1);
    const std::string ra = a.expect("READY "), rb = b.expect("READY ");
    a.say("PEER " + rb.substr(6));
    b.say("PEER " + ra.substr(6));
    a.expect("CONNECTED");
    b.expect("CONNECTED");
    const std::string qpn_a = ra.substr(6, ra.find(' ', 6) - 6), qpn_b = rb.substr(6, rb.find(' ', 6) - 6);

    // Armed and nothing sent: no event (a wait that cannot fail would prove nothing).
    a.say("ARM");
    a.expect("ARMED");
    a.say("WAIT 300");
    CHECK(a.hear() == "NOEVENT");

    // A waits in cq::wait_event while B sends: the completion event comes through the
    // daemon, and the receive is there to poll (its payload checked by the peer). Each
    // round arms again (the arm sequence number moves on with each event).
    for (int round = 0; round < 3; ++round) {
        if (round > 0) {
            a.say("ARM");
            a.expect("ARMED");
        }
        a.say("WAIT 10000");
        std::this_thread::sleep_for(50ms);  // A is in its wait before the send goes
        b.say("SEND 1");
        b.expect("SENT 1");
        const std::string ev = a.expect("EVENT ", 15s);
        CHECK_MESSAGE(std::stoul(ev.substr(6)) >= 1, ev);
    }
    // B was never armed: a send to it completes, and B (whose CQ got it) still has its
    // checked exchange working afterwards.
    a.say("GO 20");
    b.say("GO 20");
    a.expect("PASS 20");
    b.expect("PASS 20");

    // No queue error so far, on either side.
    CHECK(events_of(a).errors == 0);
    CHECK(events_of(b).errors == 0);

    // A's RDMA WRITE with a key B does not have: A's completion is a remote access error,
    // B's QP (the responder) gets the asynchronous error event -- B only, naming B's QP.
    a.say("BADWRITE");
    CHECK(a.expect("WC ") == "WC " + std::to_string(IBV_WC_REM_ACCESS_ERR));
    events_line eb;
    for (int i = 0; i < 200; ++i) {
        eb = events_of(b);
        if (eb.errors > 0) break;
        std::this_thread::sleep_for(10ms);
    }
    REQUIRE_MESSAGE(eb.errors >= 1, "no QP error event at the responder's owner; daemon log: ", rig.log());
    CHECK(eb.objects.find(qpn_b) != std::string::npos);
    for (std::size_t at = 0; at < eb.objects.size();) {  // every event B got names its own QP
        const auto comma = eb.objects.find(',', at);
        CHECK(eb.objects.substr(at, comma - at) == qpn_b);
        at = comma == std::string::npos ? eb.objects.size() : comma + 1;
    }
    const events_line ea = events_of(a);
    CHECK_MESSAGE(ea.objects.find(qpn_b) == std::string::npos, "A heard of B's QP: ", ea.objects);
    CHECK(ea.fatal == 0);
    CHECK(eb.fatal == 0);
    a.say("EXIT");
    b.say("EXIT");
    CHECK(a.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
    CHECK(b.proc->wait(std::chrono::steady_clock::now() + 10s) == 0);
}

TEST_CASE("the event inbox: what an hca's callbacks push comes out in order, tagged; past its capacity, dropped and counted") {
    auto in = d::event_inbox::create();
    REQUIRE(in);
    cxv::driver::hca::options o;
    int logged = 0;
    o.on_event = [&](const cxv::driver::hca_event&) { ++logged; };  // kept, called first
    d::event_inbox::wire(*in, o, 1, 7);
    o.on_completion(0x42);
    o.on_event(cxv::driver::hca_event{cxv::driver::hca_event::queue_error, 0, 0x99, "WQ_CATAS_ERROR", 0x10});
    CHECK(logged == 1);
    pollfd p{(*in)->fd(), POLLIN, 0};
    CHECK(::poll(&p, 1, 0) == 1);  // the server's loop wakes
    auto items = (*in)->take();
    REQUIRE(items.size() == 2);
    CHECK(items[0].completion);
    CHECK(items[0].cqn == 0x42);
    CHECK(items[0].device == 1);
    CHECK(items[0].generation == 7);
    CHECK(!items[1].completion);
    CHECK(items[1].event.object == 0x99);
    CHECK(items[1].event.event_type == 0x10);
    CHECK(::poll(&p, 1, 0) == 0);  // drained
    for (std::size_t i = 0; i < d::event_inbox::capacity + 5; ++i) o.on_completion(static_cast<std::uint32_t>(i));
    CHECK((*in)->dropped() == 5);
    items = (*in)->take();
    REQUIRE(items.size() == d::event_inbox::capacity);
    CHECK(items.back().cqn == d::event_inbox::capacity - 1);

    // A fatal event that finds the queue full is not dropped (the function's recovery
    // hangs on it): it comes out after the queue, once per function and generation.
    for (std::size_t i = 0; i < d::event_inbox::capacity; ++i) o.on_completion(static_cast<std::uint32_t>(i));
    cxv::driver::hca_event fatal{cxv::driver::hca_event::fatal, 0, 0, "health syndrome 0x5"};
    fatal.device_dead = true;
    o.on_completion(1);  // dropped
    o.on_event(fatal);
    o.on_event(fatal);  // the same function's same hca: once is enough
    CHECK((*in)->dropped() == 6);
    items = (*in)->take();
    REQUIRE(items.size() == d::event_inbox::capacity + 1);
    CHECK(!items.back().completion);
    CHECK(items.back().event.what == cxv::driver::hca_event::fatal);
    CHECK(items.back().event.detail == "health syndrome 0x5");
    CHECK(items.back().device == 1);
    CHECK(items.back().generation == 7);
}
