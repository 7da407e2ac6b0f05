// cxvd's server: the functions it brought up, the listening socket and its clients. One
// thread poll(2)s every socket and owns every client's books; what may wait long on a
// function (large commands and mappings, a departed client's teardown, anything behind
// those) runs as jobs on two worker lanes (daemon/jobs.h) and comes back to that thread
// to be booked and answered, so no client's request or departure holds up the others
// (docs/daemon.md, "No client stalls another"). A client is served one request at a time, every reply sent without
// blocking: a client whose socket is full is dropped, so a slow client cannot hold up
// the others. A client that goes (its socket closes: exit, crash, SIGKILL) has
// everything it owned destroyed, in dependency order, in bounded slices.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "daemon/events.h"
#include "daemon/jobs.h"
#include "daemon/log_budget.h"
#include "daemon/metrics.h"
#include "daemon/owner.h"
#include "driver/hca/hca.h"
#include "protocol/codec.h"

namespace cxv::daemon {

// sd-daemon(3) priorities, as journald reads them from a line's "<N>" prefix.
enum class level { err = 3, warning = 4, info = 6, debug = 7 };
void log(level l, const std::string& text);

struct server_options {
    std::string socket_path = "/run/cxv/cxvd.sock";
    unsigned socket_mode = 0660;
    long socket_gid = -1;           // the socket's group (chown), -1: the daemon's
    std::vector<uid_t> allow_uids;  // root and the daemon's own uid are always allowed
    std::vector<gid_t> allow_gids;  // a client's primary or supplementary group
    // The operator's groups (--admin-gid): a member is allowed and, like root and the
    // daemon's own uid, sees every client in STATUS; everyone else sees its own uid's.
    std::vector<gid_t> admin_gids;
    // Trust domains (docs/daemon.md, "Trust model"): a function serves one domain at a
    // time, since a client with its device fd (ALLOC_UAR) can write anywhere in its BAR.
    // A domain is a uid, or one of these groups (--domain-gid): its members, whatever their
    // uids, are one domain (the first group of the list a client is in). share_functions
    // (--share-functions): no domains, every allowed client may use every function, for
    // processes that trust each other.
    std::vector<gid_t> domain_gids;
    bool share_functions = false;
    // Quotas are per uid: every connection of one uid draws on the same limits, so N
    // connections do not get N quotas.
    quotas limits;
    unsigned max_clients_per_uid = 64;  // connections of one uid at a time
    // Connections at a time, all uids together (the operator has operator_reserve more, so
    // that `cxv status` still gets in when tenants have filled it): what bounds the
    // daemon's fds (two a client: its socket and its event channel) and its books.
    unsigned max_clients = 1024;
    static constexpr unsigned operator_reserve = 4;
    // Where the functions' events arrive (event_inbox::wire'd into each hca's options);
    // none: no events reach clients.
    std::shared_ptr<event_inbox> events;
    // Events each client connection's queue holds for it (beyond its channel's socket
    // buffer) before it drops them and is sent an overflow event (cxvd --event-queue).
    std::size_t event_queue = event_inbox::default_queue_limit;
    // Brings function `index` up again, as at start (open, reset by vfio-pci, bring-up,
    // its options wired to `events` with generation `gen`), after a fatal error: health
    // recovery. None: a dead function stays dead (its clients are still told and dropped).
    std::function<result<std::unique_ptr<driver::hca>>(std::size_t index, std::uint64_t gen)> reopen;
    // Where requests, clients and their books are recorded for `--metrics` (none: not).
    std::shared_ptr<metrics> stats;
};


class server {
public:
    // Creates the socket's directory, binds (replacing a stale socket, refusing when a
    // daemon answers there) with `socket_mode`, and listens.
    static result<std::unique_ptr<server>> create(server_options o,
                                                  std::vector<std::unique_ptr<driver::hca>> devices);
    ~server();  // every client's objects destroyed, the socket unlinked
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    // Serves until stop().
    void run();
    // Async-signal-safe: wakes run() and makes it return.
    void stop() noexcept;
    // Every function's port counters (QUERY_VPORT_COUNTER), for the metrics thread: the
    // command queue takes commands from several threads.
    std::vector<port_sample> sample_ports() const;

private:
    struct peer;
    struct device_state;
    struct teardown;
    // What a request's reply needs once its job is done.
    struct request_meta {
        std::uint16_t type = 0;  // the header's
        std::uint32_t seq = 0;
        msg_type kind = msg_type::hello;
        std::string op;  // the metrics' name: the PRM opcode's for COMMAND and COMMAND_FD
        std::chrono::steady_clock::time_point start;
    };
    server(server_options o, std::vector<std::unique_ptr<driver::hca>> devices);
    void accept_clients();
    void serve(peer& p);
    // Replies without blocking; false (and the peer dropped) when it could not.
    bool send(peer& p, std::span<const std::byte> msg, std::span<const int> fds = {});
    bool refuse(peer& p, std::uint16_t type, std::uint32_t seq, const error& e);
    // The client is dropped: its event queue closes and its teardown starts (pump()).
    void drop(peer& p, const std::string& why);
    bool allowed(const peer& p) const;
    // Root, the daemon's own uid or a member of an admin group: sees every client.
    bool is_operator(const peer& p) const;
    // The errno and text a newcomer is refused with (0: served).
    std::pair<int, std::string> admission(const peer& p) const;
    // A refused request in the log (rate-limited per client: log_budget), and the counts
    // of lines held back once their second is over; the poll timeout (ms, -1: none) until
    // the next such count is due.
    void log_refusal(peer& p, std::uint16_t type, const error& e);
    void log_held_back();
    void report_held_back(const peer& p, std::uint64_t lines) const;
    int log_timeout() const;
    // The metrics hooks: a request's outcome and time; the client's books after it.
    void record(const peer& p, const std::string& op, bool refused, std::chrono::nanoseconds took);
    void record_books(const peer& p);
    void handle(peer& p, request& r, std::chrono::steady_clock::time_point parsed);
    // The request's handler by its type: from handle(), or for a parked request again.
    void dispatch(peer& p, const request_meta& m, request& r);
    // A request refused for a quota (EDQUOT) while departed clients of its trust domain
    // are still being torn down: what they hold counts until it is released, so the
    // request is parked (its peer busy, not read from) and handled again after each of
    // their teardown slices (retry_parked): answered once it fits, refused once there is
    // nothing left to wait for. So a client that reconnects at once is not refused for
    // what its previous connection still held, and no quota is passed meanwhile. False
    // (refuse it now): another error, nothing to wait for, or the daemon stopping.
    bool wait_for_release(peer& p, const request_meta& m, request r, const error& e);
    void retry_parked();

    // The request handlers (server_requests.cc). Each checks what it can here, then
    // either concludes at once (a refusal) or posts a job whose `done` concludes.
    struct answer {
        std::vector<std::byte> payload;
        std::vector<int> fds;
        unique_fd made;  // an fd made for this reply only, closed once it is sent
    };
    // Runs `work` on lane `l` (the peer is busy until `done`), or at once when the daemon
    // is stopping (inline_).
    void post(peer& p, job_lanes::lane l, std::function<void()> work, std::function<void()> done);
    // The reply to the peer's request (or its refusal) and the metrics; the peer may
    // send its next request.
    void conclude(peer& p, const request_meta& m, result<answer> a);
    result<answer> on_status(const peer& p);
    void on_map(peer& p, const request_meta& m, const request& r);
    void on_unmap(peer& p, const request_meta& m, const request& r);
    void on_alloc_uar(peer& p, const request_meta& m, const request& r);
    void on_dealloc_uar(peer& p, const request_meta& m, const request& r);
    void on_command(peer& p, const request_meta& m, request& r);
    result<answer> on_events(peer& p, const request& r);
    // COUNTERS: the function's vport counters, read on the small lane. Claims nothing; the
    // trust domain using the function (all, with --share-functions) and the operator may ask.
    void on_counters(peer& p, const request_meta& m, const request& r);
    // The functions as HELLO (`with_caps`) and STATUS describe them, from what was read
    // at bring-up and, for the port's state, again at each port change (refresh_port, a
    // job): neither waits on a function's firmware, which may be busy with another
    // client's 4 MiB command.
    std::vector<device_info> devices_info(bool with_caps) const;
    static device_info describe(driver::hca& h);
    // STATUS's row for a client (server_teardown.cc): a live one's, or a departing one's
    // as it went.
    static client_info status_row(pid_t pid, uid_t uid, gid_t gid, const std::string& comm,
                                  const std::vector<owned>& dev);
    void refresh_port(std::size_t d);

    // A dropped client's teardown (server_teardown.cc), in slices of a bounded number of
    // commands or unmappings and time, each a job on the large lane: objects in
    // dependency order, UARs, memory, function by function; then the log line, and the
    // peer goes.
    void pump(peer& p);
    void post_object_slice(peer& p);
    void post_uar_slice(peer& p);
    void post_memory_slice(peer& p);
    void end_device(peer& p);
    void finish(peer& p);
    // Function `d` was reset: what `p` had there is forgotten (no command) and its memory
    // unmapped, here and now.
    void forget(peer& p, std::size_t d);

    // Events (server_events.cc): the fatal ones to recovery, every ready client queue
    // down its channel.
    void route_events();
    // A queue for `p`'s events, routed to from every CQ, QP and SRQ in its books.
    void open_queue(peer& p);
    // As much of `p`'s queue as its channel takes now (the rest waits for POLLOUT).
    void flush_events(peer& p);
    void log_overflow(const peer& p);
    void send_fatal(peer& p, const event_msg& e);
    // A function found dead (fatal event with the command interface dead): its clients
    // get the fatal event and are dropped without commands, the function is reset and
    // brought up again (options::reopen), at once and then, if that fails, by the poll
    // loop (reopen_due) without blocking it. False when the daemon gives up: run() stops.
    bool recover(std::size_t d, const std::string& why);
    // One bring-up attempt of a function being recovered, under a new generation.
    bool try_reopen(std::size_t d);
    // The attempts due now; the poll timeout (ms, -1: none) until the next one.
    bool reopen_due();
    int reopen_timeout() const;
    result<std::uint16_t> device_index(std::uint16_t d) const;
    // device_index, and the function claimed for `p`'s trust domain (server_access.cc):
    // EBUSY while another domain holds it. Every request on a function goes through it.
    result<std::uint16_t> device_for(peer& p, std::uint16_t d);
    std::string domain_of(const peer& p) const;
    // `p` (its teardown done) no longer holds its functions: one its domain held alone
    // is free again, or, where a device fd was given out, idle until another domain asks
    // for it and it is reset (hand_over).
    void release_functions(peer& p);
    // The function reset and brought up again before another domain may have it: the
    // reset takes every BAR mapping a client made of its device fd, and the bring-up
    // waits until no process holds the device any more (server_events.cc).
    void hand_over(std::size_t d);
    // What recover and hand_over share: every job ends, the function's threads stop, the
    // function is reset and closed; `reset` runs between the reset and the close.
    void reset_function(std::size_t d, const std::function<void()>& reset);
    // What is left of the quotas to `p`'s uid on device `d` after its other connections
    // (their books, what their jobs in flight may create, and what departed ones still hold).
    quotas room(const peer& p, std::size_t d) const;
    std::uint64_t pinned_by_domain(const std::string& domain) const;
    std::size_t mappings_by_domain(const std::string& domain) const;
    std::size_t connections_of(uid_t uid) const;
    // accept4 failing with EMFILE/ENFILE: the spare fd is closed, the newcomer accepted,
    // told and closed, the spare reopened, so the listener is not left readable forever.
    // False when none could be taken (the spare could not be reopened either).
    bool shed_one();

    server_options opts_;
    std::vector<std::unique_ptr<device_state>> devices_;
    unique_fd listen_, wake_, spare_;
    std::chrono::steady_clock::time_point listen_paused_until_{};
    std::vector<std::unique_ptr<peer>> peers_;
    std::unique_ptr<job_lanes> jobs_;
    // A recovery waits for every job (jobs_->drain()) and no teardown slice is posted
    // meanwhile; when the daemon stops, slices run inline.
    bool quiescing_ = false, inline_ = false;
    std::uint64_t commands_ = 0, refused_ = 0, served_ = 0;
    // Teardown slices done and departed clients gone: a parked request goes again when
    // this has moved since it was parked.
    std::uint64_t released_ = 0;
    // The same counts per allowed uid: what STATUS shows a client that is not the operator
    // (another tenant's activity is not its business). One entry per allowed uid that
    // has connected: the allow-list bounds them, not the clients.
    struct tally {
        std::uint64_t commands = 0, refused = 0, served = 0;
    };
    std::unordered_map<std::string, tally> tallies_;  // by trust domain (domain_of)
    // The log lines about refused connections, all together: each is a new peer, so a
    // client that reconnects in a loop has no budget of its own.
    log_budget refused_log_;
    bool failed_ = false;  // a function could not be recovered
    // Held by the metrics thread while it samples the functions' counters and by a recovery
    // while it closes and replaces a function's hca (devices_[i]->hca).
    mutable std::mutex hca_mu_;
    std::vector<std::chrono::steady_clock::time_point> recoveries_;  // recent ones, for the give-up rule

public:
    // False when run() returned because a function could not be brought up again.
    bool healthy() const noexcept { return !failed_; }
};

}  // namespace cxv::daemon
