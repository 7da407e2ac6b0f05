#include "client/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace cxv::daemon {

std::string client::default_path() {
    const char* e = std::getenv("CXV_DAEMON");
    return e != nullptr && *e != '\0' ? e : "/run/cxv/cxvd.sock";
}

result<client> client::connect(const std::string& path) {
    sockaddr_un a{};
    if (path.size() >= sizeof a.sun_path) return error{ENAMETOOLONG, fmt::format("socket path {} is too long", path)};
    unique_fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!s) return error{errno, fmt::format("socket: {}", std::strerror(errno))};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        return error{e, fmt::format("cannot reach cxvd at {}: {} (is it running? set CXV_DAEMON or --socket)", path,
                                    std::strerror(e))};
    }
    return client(std::move(s));
}

void client::close(std::string why) {
    if (closed()) return;
    if (sock_) (void)::shutdown(sock_.get(), SHUT_RDWR);
    closed_why_ = std::move(why);
    closed_ = true;
}

result<client::answer> client::call(msg_type type, std::span<const std::byte> body, std::span<const int> fds,
                                    std::chrono::milliseconds timeout) {
    const auto msg = encode(type, seq_ + 1, body);
    bool sent = false;
    auto a = exchange(msg, fds, timeout, sent);
    if (sent) ++seq_;
    return a;
}

result<client::answer> client::call_raw(std::span<const std::byte> msg, std::span<const int> fds,
                                        std::chrono::milliseconds timeout) {
    bool sent = false;
    return exchange(msg, fds, timeout, sent);
}

result<client::answer> client::exchange(std::span<const std::byte> msg, std::span<const int> fds,
                                        std::chrono::milliseconds timeout, bool& sent_out) {
    if (!sock_ || closed()) return error{ENOTCONN, fmt::format("the connection to cxvd is closed ({})", closed_why_)};
    // The reply to this request carries its sequence. One with another sequence is the
    // late answer to an earlier request that timed out: dropped (its fds closed with it),
    // or every later answer would be taken for the one after. A reply of type 0 with
    // sequence 0 is the daemon's answer to a message it could not read at all (too long,
    // too many fds, no fds left): it is this request's. A message too short to hold a
    // header takes whatever comes.
    bool match = msg.size() >= header_bytes;
    header want{};
    if (match) std::memcpy(&want, msg.data(), header_bytes);
    // A refused peer is told so and closed at once: its reply may already be queued even
    // when the send fails, so the reply is looked for either way.
    const auto sent = send_message(sock_.get(), msg, fds);
    sent_out = sent.ok();
    if (!sent && sent.error().code != EPIPE && sent.error().code != ECONNRESET) {
        // Nothing went out (too large for the socket's buffer, a bad fd): no reply comes.
        return sent.error();
    }
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        pollfd p{sock_.get(), POLLIN, 0};
        const int n = left.count() <= 0 ? 0 : ::poll(&p, 1, static_cast<int>(left.count()));
        if (n == 0) return error{ETIMEDOUT, fmt::format("cxvd did not answer within {} ms", timeout.count())};
        if (n < 0) {
            if (errno == EINTR) continue;
            return error{errno, fmt::format("poll: {}", std::strerror(errno))};
        }
        auto r = receive(sock_.get(), MSG_DONTWAIT);
        if (!r) {
            const int e = r.error().code;
            if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) continue;
            if (e == ECONNRESET || e == EPIPE) close(r.error().message);
            return sent ? r.error() : sent.error();
        }
        reply rep;
        if (auto s = parse_reply(r->bytes, rep); !s) return s.error();
        const bool unreadable = rep.hdr.type == reply_bit && rep.hdr.seq == 0;
        if (match && rep.hdr.seq != want.seq && !unreadable) continue;  // r's fds close here
        answer a;
        a.err = rep.err;
        a.text = std::move(rep.text);
        a.payload = std::move(rep.payload);
        a.fds = std::move(r->fds);
        return a;
    }
}

result<hello_reply> client::hello() {
    auto a = call(msg_type::hello, body(hello_req{}));
    if (!a) return a.error();
    if (a->err != 0) return error{a->err, a->text};
    return parse_hello_reply(a->payload);
}

}  // namespace cxv::daemon
