// cxvd's server: the functions it brought up, the listening socket and its clients, in
// one thread that poll(2)s them all (control operations are not a fast path). A client
// is served one message at a time, every reply sent without blocking: a client whose
// socket is full is dropped, so a slow client cannot hold up the others. A client that
// goes (its socket closes: exit, crash, SIGKILL) has everything it owned destroyed at
// once, in dependency order.
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
#include "daemon/log_budget.h"
#include "daemon/metrics.h"
#include "daemon/owner.h"
#include "daemon/protocol.h"
#include "driver/hca/hca.h"

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
    server(server_options o, std::vector<std::unique_ptr<driver::hca>> devices);
    void accept_clients();
    void serve(peer& p);
    // Replies without blocking; false (and the peer marked for dropping) when it could not.
    bool send(peer& p, std::span<const std::byte> msg, std::span<const int> fds = {});
    bool refuse(peer& p, std::uint16_t type, std::uint32_t seq, const error& e);
    // `dead`: a function whose objects are forgotten rather than destroyed (its device
    // was reset: no command is sent), and whose memory is unmapped.
    void drop(peer& p, const std::string& why, long dead = -1);
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
    std::vector<device_info> devices_info(bool with_caps);

    // The request handlers: a payload, fds to pass beside it, or an error to reply with.
    struct answer {
        std::vector<std::byte> payload;
        std::vector<int> fds;
    };
    result<answer> on_status(const peer& p);
    result<answer> on_map(peer& p, const request& r);
    result<answer> on_unmap(peer& p, const request& r);
    result<answer> on_alloc_uar(peer& p, const request& r);
    result<answer> on_dealloc_uar(peer& p, const request& r);
    result<answer> on_command(peer& p, const request& r);
    result<answer> on_events(peer& p, const request& r);
    // Events: every one the inbox holds, each to the client that owns its object (port
    // changes and fatal errors to every client of the function).
    void route_events();
    void send_event(peer& p, const event_msg& e);
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
    // What is left of the quotas to `p`'s uid on device `d` after its other connections.
    quotas room(const peer& p, std::size_t d) const;
    std::uint64_t pinned_by_uid(uid_t uid) const;
    std::size_t mappings_by_uid(uid_t uid) const;
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
    std::uint64_t commands_ = 0, refused_ = 0, served_ = 0;
    // The same counts per allowed uid: what STATUS shows a client that is not the operator
    // (another tenant's activity is not its business). One entry per allowed uid that
    // has connected: the allow-list bounds them, not the clients.
    struct tally {
        std::uint64_t commands = 0, refused = 0, served = 0;
    };
    std::unordered_map<uid_t, tally> tallies_;
    // The log lines about refused connections, all together: each is a new peer, so a
    // client that reconnects in a loop has no budget of its own.
    log_budget refused_log_;
    bool failed_ = false;  // a function could not be recovered
    // Held by the metrics thread while it samples the functions' counters and by a recovery
    // while it closes and replaces a function's hca (devices_[i]->hca).
    mutable std::mutex hca_mu_;
    std::vector<std::chrono::steady_clock::time_point> recoveries_;  // recent ones, for the give-up rule
    std::uint64_t inbox_dropped_ = 0;  // the event inbox's drops logged so far

public:
    // False when run() returned because a function could not be brought up again.
    bool healthy() const noexcept { return !failed_; }
};

}  // namespace cxv::daemon
