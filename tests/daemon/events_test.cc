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

TEST_CASE("the event inbox: each client's own bounded queue; a storm overflows its own only, then an overflow event") {
    auto in = d::event_inbox::create();
    REQUIRE(in);
    auto& box = **in;
    cxv::driver::hca::options o;
    int logged = 0;
    o.on_event = [&](const cxv::driver::hca_event&) { ++logged; };  // kept, called first
    d::event_inbox::wire(*in, o, 1, 7);
    using obj = d::event_inbox::object;
    auto a = box.open(4), b = box.open(4);
    box.subscribe(*a, 1);
    box.subscribe(*b, 1);
    box.route(1, obj::cq, 0x42, a);
    box.route(1, obj::cq, 0x43, b);
    box.route(1, obj::qp, 0x99, b);
    auto drain = [&](d::event_inbox::queue& q) {
        std::vector<d::event_inbox::queued> out;
        for (int i = 0; i < 100; ++i) {  // bounded: a queue holds at most its limit and one overflow
            auto e = box.front(q);
            if (!e) break;
            out.push_back(*e);
            box.pop(q);
        }
        return out;
    };

    // Routed by the owner's books: a completion by its CQ, a queue error by its object.
    o.on_completion(0x42);
    o.on_event(cxv::driver::hca_event{cxv::driver::hca_event::queue_error, 0, 0x99, "WQ_CATAS_ERROR", 0x10});
    CHECK(logged == 1);
    pollfd p{box.fd(), POLLIN, 0};
    CHECK(::poll(&p, 1, 0) == 1);  // the server's loop wakes
    CHECK(box.ready().size() == 2);
    CHECK(::poll(&p, 1, 0) == 0);
    auto ea = drain(*a), eb = drain(*b);
    REQUIRE(ea.size() == 1);
    CHECK(ea[0].msg.what == d::event_msg::kind::completion);
    CHECK(ea[0].msg.object == 0x42);
    CHECK(ea[0].msg.device == 1);
    CHECK(ea[0].generation == 7);
    REQUIRE(eb.size() == 1);
    CHECK(eb[0].msg.what == d::event_msg::kind::async);
    CHECK(eb[0].msg.object == 0x99);
    CHECK(eb[0].msg.event_type == 0x10);
    // No owner, or an owner not subscribed to the function: nowhere, and not a drop.
    o.on_completion(0x77);
    cxv::driver::hca::options o2;
    d::event_inbox::wire(*in, o2, 2, 1);
    box.route(2, obj::cq, 0x42, a);
    o2.on_completion(0x42);
    CHECK(drain(*a).empty());
    CHECK(box.dropped(*a) == 0);

    // A storm on A's CQ: A keeps 4, drops 6; B's events all come through.
    for (int i = 0; i < 10; ++i) o.on_completion(0x42);
    for (int i = 0; i < 3; ++i) o.on_completion(0x43);
    CHECK(box.dropped(*a) == 6);
    CHECK(box.dropped(*b) == 0);
    CHECK(box.first_overflow(*a));
    CHECK(!box.first_overflow(*a));  // once
    CHECK(!box.first_overflow(*b));
    eb = drain(*b);
    CHECK(eb.size() == 3);
    // A: the four before the loss, then the overflow event with the count; after it the
    // queue takes events again.
    auto first = box.front(*a);
    REQUIRE(first);
    box.pop(*a);
    o.on_completion(0x42);  // still behind the loss: dropped too
    ea = drain(*a);
    REQUIRE(ea.size() == 4);
    CHECK(ea[2].msg.what == d::event_msg::kind::completion);
    CHECK(ea[3].msg.what == d::event_msg::kind::overflow);
    CHECK(ea[3].msg.object == 7);
    CHECK(ea[3].msg.device == d::event_msg::any_device);
    CHECK(ea[3].msg.detail.find("7 event(s)") != std::string::npos);
    o.on_completion(0x42);
    ea = drain(*a);
    REQUIRE(ea.size() == 1);
    CHECK(ea[0].msg.what == d::event_msg::kind::completion);

    // A port change: every subscriber of the function.
    o.on_event(cxv::driver::hca_event{cxv::driver::hca_event::port_down, 1, 0, "down"});
    CHECK(drain(*a).size() == 1);
    CHECK(drain(*b).size() == 1);
    // Routes are per owner: A's stale removal does not undo B's newer route.
    box.route(1, obj::cq, 0x50, b);
    box.unroute(1, obj::cq, 0x50, *a);
    o.on_completion(0x50);
    CHECK(drain(*b).size() == 1);
    // A closed queue takes nothing.
    box.close(*a);
    o.on_completion(0x42);
    CHECK(!box.front(*a));

    // A fatal event is the server's, never a client's and never dropped: once per
    // function and generation.
    cxv::driver::hca_event fatal{cxv::driver::hca_event::fatal, 0, 0, "health syndrome 0x5"};
    fatal.device_dead = true;
    for (int i = 0; i < 10; ++i) o.on_completion(0x43);  // B full
    o.on_event(fatal);
    o.on_event(fatal);
    auto f = box.take_fatal();
    REQUIRE(f.size() == 1);
    CHECK(f[0].event.what == cxv::driver::hca_event::fatal);
    CHECK(f[0].event.detail == "health syndrome 0x5");
    CHECK(f[0].device == 1);
    CHECK(f[0].generation == 7);
    CHECK(box.take_fatal().empty());
}
