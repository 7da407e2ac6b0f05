// A blocking client of cxvd: one connection, one request at a time, every wait bounded.
// Used by `cxv status` and the tests; the driver's remote mode (CXV_DAEMON) builds on it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "protocol/codec.h"

namespace cxv::daemon {

class client {
public:
    struct answer {
        int err = 0;  // the daemon's errno (0 = done)
        std::string text;
        std::vector<std::byte> payload;
        std::vector<unique_fd> fds;
    };

    // Connects to the daemon's socket (no HELLO yet).
    static result<client> connect(const std::string& path);
    // The socket the daemon listens on: CXV_DAEMON, else the default.
    static std::string default_path();

    // Sends a request and waits (up to `timeout`) for its reply. A transport failure
    // (the daemon gone: ECONNRESET, EPIPE; ETIMEDOUT) is an error; a refusal by the
    // daemon is an answer with err set. The sequence moves on only when the request went
    // out: a send the kernel refused (EMSGSIZE: larger than the socket's buffer) leaves
    // it where it was, so the next request is still the one the daemon expects. Once the
    // daemon has closed the connection every call fails with ENOTCONN.
    result<answer> call(msg_type type, std::span<const std::byte> body, std::span<const int> fds = {},
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));
    // Sends raw bytes as one message (tests of malformed requests) and waits for a reply.
    result<answer> call_raw(std::span<const std::byte> msg, std::span<const int> fds = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(10));
    // HELLO with this client's version.
    result<hello_reply> hello();

    std::uint32_t next_seq() const noexcept { return seq_ + 1; }
    int fd() const noexcept { return sock_.get(); }
    // Closes the connection (the daemon then releases everything this client had): for
    // a client that can no longer trust its books, e.g. a reply it could not read.
    void close(std::string why);
    bool closed() const noexcept { return closed_; }

private:
    explicit client(unique_fd s) : sock_(std::move(s)) {}
    // One exchange; `sent` says whether the message went out.
    result<answer> exchange(std::span<const std::byte> msg, std::span<const int> fds,
                            std::chrono::milliseconds timeout, bool& sent);
    unique_fd sock_;
    std::uint32_t seq_ = 0;
    std::string closed_why_;
    // Set by close(), which shuts the socket down and leaves the fd open until the client
    // goes: another thread may still name the fd (shutdown in remote_function::mark_dead),
    // and a closed number could be reused by then.
    bool closed_ = false;
};

}  // namespace cxv::daemon
