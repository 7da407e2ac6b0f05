// The out-of-band exchange between cxv-perf's server and client: a TCP connection (-p,
// default 18515, as perftest), with --loopback a socketpair between two threads, or with
// -R an RDMA connection of its own made through the connection manager (cm_connect.h). It
// carries the run's parameters, each side's QP addresses and the barriers between sizes;
// never anything inside a timed loop. Every wait is bounded.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "base/result.h"
#include "base/unique_fd.h"

namespace cxv::perf {

// One message at a time each way, each received whole and as sent (`recv`'s `n` is the
// size the peer sent).
class link {
public:
    virtual ~link() = default;
    // Exactly `n` bytes, within `timeout`.
    virtual status send(const void* p, std::size_t n) = 0;
    virtual status recv(void* p, std::size_t n, std::chrono::milliseconds timeout) = 0;
    // Whether a message is waiting (no wait; for a server polling between empty polls).
    virtual bool readable() = 0;
};

class channel final : public link {
public:
    channel() = default;
    explicit channel(int fd) : fd_(fd) {}

    // Client: connects to host:port, retrying a refused connection for `retry_for` (the
    // server may still be opening its device); the error names HOST:PORT and the reason.
    static result<channel> connect(const std::string& host, unsigned port, std::chrono::milliseconds retry_for);
    // Two connected ends (--loopback).
    static std::pair<channel, channel> pair();

    status send(const void* p, std::size_t n) override;
    status recv(void* p, std::size_t n, std::chrono::milliseconds timeout) override;
    bool readable() override;

private:
    unique_fd fd_;
};

// Server: a listening socket, made before the device opens so a client finds it early.
class listener {
public:
    static result<listener> create(unsigned port);
    result<channel> accept(std::chrono::milliseconds timeout);

private:
    listener() = default;
    unique_fd fd_;
    unsigned port_ = 0;
};

// What both sides must agree on (the client sends its own; the server compares).
struct wire_params {
    char magic[8] = {'c', 'x', 'v', 'p', 'e', 'r', 'f', '1'};
    std::uint32_t op = 0, latency = 0, conn = 0, all_sizes = 0;
    std::uint64_t size = 0, max_size = 0, iters = 0;
    std::uint32_t duration = 0, qps = 0, tx_depth = 0, rx_depth = 0, verify = 0, mtu = 0, bidirectional = 0;
};

// One QP's address as the peer needs it (perftest's "remote address" line).
struct wire_qp {
    std::uint32_t qpn = 0, psn = 0, lid = 0, rkey = 0;
    std::uint64_t vaddr = 0;  // the QP's receive area (the target of WRITE, READ, atomics)
    std::uint64_t length = 0;
    std::uint8_t gid[16] = {};
};

// A barrier message: its kind and one value (a count, a status).
struct wire_sync {
    std::uint32_t kind = 0;  // what the sender reached (below)
    std::uint32_t ok = 1;
    std::uint64_t value = 0;
    // -b: the sender's own direction (bandwidth_sample_set's iterations, ticks, peak).
    std::uint64_t iterations = 0, ticks = 0;
    double min_ticks = 0;  // ticks per iteration at the peak
    std::uint64_t per_qp = 0;  // -b: the sender's iterations per QP (-D: what the peer expects)
    char message[112] = {};
};
enum sync_kind : std::uint32_t { sync_params = 1, sync_ready, sync_done, sync_stop, sync_error };

}  // namespace cxv::perf
