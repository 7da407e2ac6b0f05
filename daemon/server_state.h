// What the server's files share of its state: a function it serves, a client connection
// and, once it went, what is left of its teardown (private to the server library).
//
// Every member here is the serving thread's. A job (daemon/jobs.h) may read its own
// peer's books (`dev`) while it runs, so they change only while the peer has none in
// flight (`busy` false) or in its job's `done`.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/log_budget.h"
#include "daemon/owner.h"
#include "daemon/server.h"
#include "driver/hca/hca.h"
#include "protocol/codec.h"

namespace cxv::daemon {

struct server::device_state {
    // Memory whose object could not be destroyed when its client went (the device may
    // still write there): kept mapped until the function is torn down or reset. Declared
    // before hca so that it is released after it.
    std::vector<mapping> leaked;
    std::unique_ptr<driver::hca> hca;
    device_facts facts;
    // HELLO's description of it (server::describe), read at bring-up; the port's state
    // read again at each port change, by one job at a time (`refreshing`; `refresh_again`
    // when another change came meanwhile).
    device_info info;
    bool refreshing = false, refresh_again = false;
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
    // The trust domain using it (server::domain_of; empty: none), how many connections of
    // that domain have claimed it, and the generation in which a device fd last went to
    // one of them: then it is reset before another domain may have it (hand_over_due,
    // set when another asks once none of them is left, done by the poll loop).
    std::string domain;
    std::size_t holders = 0;
    std::optional<std::uint64_t> fd_given_in;
    bool hand_over_due = false;
    bool handing_over = false;  // the bring-up under way is a hand-over's, not a recovery's
};

// A dropped client's teardown, function by function: its objects (teardown_commands, in
// dependency order), its UARs, then its memory but for what an object that would not go
// still uses (kept mapped in device_state::leaked). Each step's slice runs as a job.
struct server::teardown {
    explicit teardown(std::string w) : why(std::move(w)) {}
    std::string why;
    std::size_t device = 0;  // the function being released
    enum class phase { start, objects, uars, memory } step = phase::start;
    std::vector<teardown_step> steps;  // this function's objects
    std::vector<std::uint32_t> uars;   // and UARs
    std::size_t next = 0;              // into steps or uars
    std::set<std::uint64_t> keep;      // IOVAs an object that would not go still uses
    std::size_t objects = 0, uars_returned = 0, failed = 0, forgotten = 0;
    std::uint64_t bytes = 0;  // unmapped
    std::uint64_t events_dropped = 0;
    bool done = false;  // logged and closed: the peer goes at the end of this turn
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
    std::string domain;          // server::domain_of, at accept
    std::vector<bool> claimed;   // per device: counted in its holders
    // The event channel (EVENTS): the daemon's end of the socketpair, non-blocking, and
    // the functions whose events go there; the queue its events wait in (event_inbox),
    // routed to from its CQs, QPs and SRQs; whether its channel was full (POLLOUT).
    unique_fd events;
    std::vector<bool> subscribed;
    std::uint32_t event_seq = 0;
    std::shared_ptr<event_inbox::queue> queue;
    bool events_blocked = false;
    std::uint64_t events_dropped = 0;  // by its queues that closed (a channel it closed; at drop)
    // A job of its runs: it is not read from (nor its books changed) until its done.
    bool busy = false;
    // What that job may add, counted against the uid's quotas meanwhile (room()).
    struct in_flight {
        std::size_t device = 0;
        command_effect::object creates = command_effect::object::none;
        bool uar = false;
        std::uint64_t pinned = 0;
        std::size_t maps = 0;
        std::uint64_t translations = 0;  // declared_translations of its command
    } pending;
    // A request waiting for departed clients' teardowns (server::wait_for_release): the
    // peer is busy meanwhile, with no job. `fd` is MAP_MEMORY's file (a dup of the one
    // its message carried, which is closed once served); `released` is server::released_
    // when it was parked.
    struct parked_request {
        request_meta m;
        request r;
        unique_fd fd;
        std::uint64_t released = 0;
    };
    std::optional<parked_request> parked;
    // Dropped: no request is read any more; `leaving` is its teardown, and STATUS shows
    // it as it was when it went (`as_it_went`) until that is done.
    bool gone = false;
    std::unique_ptr<teardown> leaving;
    client_info as_it_went;
    bool allowed = false;   // on the allow-list (or the operator): its uid's counts are kept
    bool sees_all = false;  // the operator (server::is_operator): STATUS lists every client
    bool refused = false;   // not served: its first request is answered with this, then it goes
    int refusal = EACCES;
    std::string refusal_text;
    log_budget refusals;  // its refused requests' lines in the log
};

}  // namespace cxv::daemon
