// cxvd's metrics (`cxvd --metrics ADDR`, docs/daemon.md "Metrics"): the Prometheus text
// exposition format, version 0.0.4, over HTTP/1.1 `GET /metrics` on a UNIX socket or
// 127.0.0.1:PORT. The serving thread records into a `metrics` registry (a mutex, no
// I/O); the HTTP server has a thread of its own that renders the registry and asks each
// function for its port counters (QUERY_VPORT_COUNTER through the command queue, which
// takes commands from several threads), so a scrape never blocks the daemon's clients.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "driver/hca/hca.h"
#include "protocol/codec.h"

namespace cxv::daemon {

// What one client holds on one function, as the server's books have it.
struct client_counts {
    std::uint64_t pds = 0, cqs = 0, mkeys = 0, qps = 0, srqs = 0, uars = 0, maps = 0, pinned = 0;
};

// A function's port counters at one moment (QUERY_VPORT_COUNTER: the vport's traffic).
struct port_sample {
    std::string function;
    unsigned port = 1;
    bool ok = false;  // false: the query failed (then only an error counter is shown)
    std::uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0, rx_errors = 0, tx_errors = 0;
    std::uint64_t firmware_pages = 0;  // given to the function and not taken back
};
// The counters of function `h` (its vport, port 1).
port_sample sample_port(driver::hca& h);

class metrics {
public:
    // Latency buckets of the request histogram, in seconds (upper bounds; +Inf after).
    static constexpr std::array<double, 12> buckets{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                    1e-3, 2.5e-3, 5e-3, 1e-2, 1e-1, 1.0};

    // A client's identity (the kernel's, from SO_PEERCRED) and its books per function,
    // after each request; `key` names the connection while it lives.
    void client_seen(std::uintptr_t key, pid_t pid, uid_t uid, const std::string& comm,
                     std::vector<std::pair<std::string, client_counts>> per_function);
    void client_gone(std::uintptr_t key);
    // A request handled: `op` is the PRM opcode's name for COMMAND, else the request
    // type's; `refused` when the reply was an error.
    void request(std::uintptr_t key, const std::string& op, bool refused, std::chrono::nanoseconds took);

    // The exposition text: the registry and the given port samples.
    std::string render(const std::vector<port_sample>& ports) const;

private:
    struct client {
        pid_t pid = 0;
        uid_t uid = 0;
        std::string comm;
        std::vector<std::pair<std::string, client_counts>> per_function;
        std::uint64_t run = 0, refused = 0;
    };
    struct histogram {
        std::array<std::uint64_t, buckets.size()> counts{};  // per bucket, not cumulative
        std::uint64_t count = 0;
        double sum = 0;
    };
    mutable std::mutex mu_;
    std::map<std::uintptr_t, client> clients_;
    std::map<std::string, histogram> latency_;  // by op
    std::uint64_t run_ = 0, refused_ = 0, clients_gone_ = 0;
};

// The HTTP side: one thread polling the listener and up to 8 connections at once, each
// bounded in size (8 KiB of request) and time (500 ms to send its request, 2 s to take
// the response), one response per connection (Connection: close). On 127.0.0.1:PORT a
// request's Host must name the endpoint (127.0.0.1, localhost or [::1], this port or
// none): another name is 421, none or two Host fields 400 (DNS rebinding: a browser's
// page of a name pointed here says that name).
class metrics_server {
public:
    // `addr`: a UNIX socket path (absolute, or "unix:PATH") or "127.0.0.1:PORT" (PORT 0:
    // any; port() says which). Anything else is refused (EINVAL): the metrics name
    // every client's pid and command, for this host only. A scraper has `read_time` to
    // send its whole request before it is dropped.
    static result<std::unique_ptr<metrics_server>> create(const std::string& addr, std::shared_ptr<metrics> m,
                                                          std::function<std::vector<port_sample>()> ports,
                                                          std::chrono::milliseconds read_time = default_read_time);
    static constexpr std::chrono::milliseconds default_read_time{500};
    // What create() would refuse `addr` for that can be known before it is called (its
    // form; a UNIX path's length, directory and a live socket there; a port in use), so
    // cxvd refuses a bad --metrics before it brings any function up.
    static status check_address(const std::string& addr);
    ~metrics_server();  // the thread stopped and joined, a UNIX socket unlinked
    metrics_server(const metrics_server&) = delete;
    metrics_server& operator=(const metrics_server&) = delete;
    unsigned port() const noexcept { return port_; }

private:
    metrics_server() = default;
    void run();
    struct connection;
    void step(connection& c);  // reads or writes what the socket takes now
    std::string respond(const std::string& request);
    unique_fd listen_, wake_;
    std::string unix_path_;
    unsigned port_ = 0;
    std::chrono::milliseconds read_time_ = default_read_time;
    std::shared_ptr<metrics> m_;
    std::function<std::vector<port_sample>()> ports_;
    std::thread thread_;
};

}  // namespace cxv::daemon
