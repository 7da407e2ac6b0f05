// What server.cc and server_events.cc share of the server's state: a function it serves
// and a client connection (private to the server library).
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/log_budget.h"
#include "daemon/owner.h"
#include "daemon/protocol.h"
#include "daemon/server.h"
#include "driver/hca/hca.h"

namespace cxv::daemon {

struct server::device_state {
    // Memory whose object could not be destroyed when its client went (the device may
    // still write there): kept mapped until the function is torn down or reset. Declared
    // before hca so that it is released after it.
    std::vector<mapping> leaked;
    std::unique_ptr<driver::hca> hca;
    device_facts facts;
    std::uint64_t generation = 0;  // of `hca`: 0 at start, one more per bring-up attempt
    std::string bdf;
    // A recovery between the reset and the function up again (hca null meanwhile): the
    // next bring-up attempt is due at retry_at (the server's poll timeout), `failures`
    // counts those that failed (EBUSY, the device still held by a process, is not one).
    bool reopening = false;
    std::chrono::steady_clock::time_point retry_at{};
    unsigned failures = 0;
    bool busy_logged = false;
    std::size_t dropped_clients = 0;
    // Whose each CQ is (the owned::cqs of every peer, inverted), for routing completion
    // events without a scan: on_command keeps it with apply(), drop() takes a peer out.
    std::unordered_map<std::uint32_t, peer*> cq_owner;
};

struct server::peer {
    unique_fd sock;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    std::string comm;
    session order;
    std::vector<owned> dev;  // per device
    // The event channel (EVENTS): the daemon's end of the socketpair, non-blocking, and
    // the functions whose events go there.
    unique_fd events;
    std::vector<bool> subscribed;
    std::uint32_t event_seq = 0;
    std::uint64_t events_dropped = 0;
    bool gone = false;
    bool allowed = false;   // on the allow-list (or the operator): its uid's counts are kept
    bool sees_all = false;  // the operator (server::is_operator): STATUS lists every client
    bool refused = false;   // not served: its first request is answered with this, then it goes
    int refusal = EACCES;
    std::string refusal_text;
    log_budget refusals;  // its refused requests' lines in the log
};

}  // namespace cxv::daemon
