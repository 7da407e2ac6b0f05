#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "driver/res/q_counter.h"

namespace cxv::daemon {

namespace {

constexpr std::size_t kMaxRequest = 8 * 1024;
// Scrapes served at once, each with little time to send its request: a local user who
// connects and says nothing holds one slot for half a second, not the scrapes.
constexpr std::size_t kMaxConnections = 8;
constexpr std::chrono::seconds kWriteTime{2};

// A label value in the exposition format: backslash, double quote and newline escaped
// (the text must also be UTF-8: printable() first where the bytes come from outside).
std::string esc(std::string_view s) {
    std::string out;
    for (const char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// sample, e.g. "x{a=\"b\"} 3".
void sample(std::string& out, std::string_view name, const std::string& labels, double v) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += fmt::format(" {}\n", v);
}
void sample(std::string& out, std::string_view name, const std::string& labels, std::uint64_t v) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += fmt::format(" {}\n", v);
}

// The Host field of a request's head (RFC 9112, section 3.2): how many lines named it
// (the field name in any case) and the last one's value, without the whitespace around it.
struct host_field {
    std::size_t lines = 0;
    std::string value;
};
host_field find_host(std::string_view head) {
    host_field h;
    for (std::size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
        const std::size_t start = at + 2, end = std::min(head.find("\r\n", start), head.size());
        const std::string_view line = head.substr(start, end - start);
        at = end < head.size() ? end : std::string_view::npos;
        const auto colon = line.find(':');
        if (colon != 4) continue;
        std::string name(line.substr(0, 4));
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        if (name != "host") continue;
        std::string_view v = line.substr(5);
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        ++h.lines;
        h.value = v;
    }
    return h;
}

// Whether a Host value names this loopback endpoint: 127.0.0.1, localhost or [::1] (the
// names a local scraper or proxy uses; a DNS name that resolves here is someone else's,
// the shape of a rebinding attack), with this port or none (RFC 9110, section 7.2, says a
// missing port is the scheme's default, but scrapers write "localhost" too; what matters
// against rebinding is the name, which the attacker's page cannot choose).
bool names_loopback(std::string_view host, unsigned port) {
    std::string_view name = host, at_port;
    if (!host.empty() && host.front() == '[') {
        const auto close = host.find(']');
        if (close == std::string_view::npos) return false;
        name = host.substr(0, close + 1);
        at_port = host.substr(close + 1);
    } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
        name = host.substr(0, colon);
        at_port = host.substr(colon);
    }
    if (!at_port.empty() && at_port != ":" && at_port != ":" + std::to_string(port)) return false;
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    return lower == "127.0.0.1" || lower == "localhost" || lower == "[::1]";
}

}  // namespace

// The function's own vport counters (driver::query_vport_counters, PRM
// QUERY_VPORT_COUNTER): packets and octets per kind of traffic summed by direction, and
// the error counters.
port_sample sample_port(driver::hca& h) {
    port_sample s;
    s.function = h.device().bdf();
    s.firmware_pages = h.pages_given();
    auto v = driver::query_vport_counters(h);
    if (!v) return s;
    for (const hw::traffic& t : {v->received_ib_unicast, v->received_ib_multicast, v->received_eth_broadcast,
                                 v->received_eth_unicast, v->received_eth_multicast}) {
        s.rx_packets += t.packets;
        s.rx_bytes += t.octets;
    }
    for (const hw::traffic& t : {v->transmitted_ib_unicast, v->transmitted_ib_multicast, v->transmitted_eth_broadcast,
                                 v->transmitted_eth_unicast, v->transmitted_eth_multicast}) {
        s.tx_packets += t.packets;
        s.tx_bytes += t.octets;
    }
    s.rx_errors = v->received_errors.packets;
    s.tx_errors = v->transmit_errors.packets;
    s.ok = true;
    return s;
}

// ---- the registry ---------------------------------------------------------------------

void metrics::client_seen(std::uintptr_t key, pid_t pid, uid_t uid, const std::string& comm,
                          std::vector<std::pair<std::string, client_counts>> per_function) {
    std::lock_guard lock(mu_);
    client& c = clients_[key];
    c.pid = pid;
    c.uid = uid;
    c.comm = comm;
    c.per_function = std::move(per_function);
}

void metrics::client_gone(std::uintptr_t key) {
    std::lock_guard lock(mu_);
    if (clients_.erase(key) != 0) ++clients_gone_;
}

void metrics::request(std::uintptr_t key, const std::string& op, bool refused, std::chrono::nanoseconds took) {
    const double secs = std::chrono::duration<double>(took).count();
    std::lock_guard lock(mu_);
    ++(refused ? refused_ : run_);
    if (auto it = clients_.find(key); it != clients_.end()) ++(refused ? it->second.refused : it->second.run);
    histogram& h = latency_[op];
    std::size_t b = 0;
    while (b < buckets.size() && secs > buckets[b]) ++b;
    if (b < buckets.size()) ++h.counts[b];
    ++h.count;
    h.sum += secs;
}

std::string metrics::render(const std::vector<port_sample>& ports) const {
    // A copy under the lock, the text after it: the serving thread records every request
    // here, and must not wait while a page is formatted.
    std::map<std::uintptr_t, client> clients;
    std::map<std::string, histogram> latency;
    std::uint64_t run = 0, refused = 0, gone = 0;
    {
        std::lock_guard lock(mu_);
        clients = clients_;
        latency = latency_;
        run = run_;
        refused = refused_;
        gone = clients_gone_;
    }
    std::string out;
    auto who = [](const client& c) {
        // A comm is any bytes (prctl(2) PR_SET_NAME); the exposition is UTF-8, so bytes
        // outside printable ASCII go as \xNN text (one bad byte fails the whole page).
        return fmt::format("pid=\"{}\",uid=\"{}\",comm=\"{}\"", c.pid, c.uid, esc(printable(c.comm)));
    };
    family(out, "cxvd_clients", "gauge", "Client connections now.");
    sample(out, "cxvd_clients", "", static_cast<std::uint64_t>(clients.size()));
    family(out, "cxvd_clients_gone_total", "counter", "Client connections that have gone (closed or dropped).");
    sample(out, "cxvd_clients_gone_total", "", gone);
    family(out, "cxvd_requests_total", "counter", "Requests handled, by result (run, or refused with an errno).");
    sample(out, "cxvd_requests_total", "result=\"run\"", run);
    sample(out, "cxvd_requests_total", "result=\"refused\"", refused);

    family(out, "cxvd_client_requests_total", "counter", "A client's requests, by result.");
    for (const auto& [k, c] : clients) {
        sample(out, "cxvd_client_requests_total", who(c) + ",result=\"run\"", c.run);
        sample(out, "cxvd_client_requests_total", who(c) + ",result=\"refused\"", c.refused);
    }
    family(out, "cxvd_client_objects", "gauge", "Objects a client holds on a function, by kind.");
    for (const auto& [k, c] : clients) {
        for (const auto& [fn, n] : c.per_function) {
            const std::string l = fmt::format("function=\"{}\",{}", esc(fn), who(c));
            const std::pair<const char*, std::uint64_t> kinds[] = {{"pd", n.pds},   {"cq", n.cqs},   {"mkey", n.mkeys},
                                                                   {"qp", n.qps},   {"srq", n.srqs}, {"uar", n.uars},
                                                                   {"mapping", n.maps}};
            for (const auto& [kind, v] : kinds) sample(out, "cxvd_client_objects", l + fmt::format(",kind=\"{}\"", kind), v);
        }
    }
    family(out, "cxvd_client_pinned_bytes", "gauge", "Client memory mapped for the device (pinned), in bytes.");
    for (const auto& [k, c] : clients) {
        for (const auto& [fn, n] : c.per_function) {
            sample(out, "cxvd_client_pinned_bytes", fmt::format("function=\"{}\",{}", esc(fn), who(c)), n.pinned);
        }
    }

    family(out, "cxvd_firmware_pages", "gauge",
           "4 KiB pages of host memory the function's firmware holds (MANAGE_PAGES given, not yet taken back).");
    for (const auto& p : ports) {
        sample(out, "cxvd_firmware_pages", fmt::format("function=\"{}\"", esc(p.function)), p.firmware_pages);
    }
    family(out, "cxvd_port_counters_ok", "gauge", "1 when the port's counters could be read (QUERY_VPORT_COUNTER).");
    for (const auto& p : ports) {
        sample(out, "cxvd_port_counters_ok", fmt::format("function=\"{}\",port=\"{}\"", esc(p.function), p.port),
               std::uint64_t{p.ok ? 1u : 0u});
    }
    const std::pair<const char*, const char*> traffic[] = {
        {"cxvd_port_packets_total", "Packets through the function's vport, by direction."},
        {"cxvd_port_bytes_total", "Bytes through the function's vport, by direction."},
        {"cxvd_port_errors_total", "Packets the vport counted as errors, by direction."}};
    for (std::size_t t = 0; t < 3; ++t) {
        family(out, traffic[t].first, "counter", traffic[t].second);
        for (const auto& p : ports) {
            if (!p.ok) continue;
            const std::uint64_t rx[] = {p.rx_packets, p.rx_bytes, p.rx_errors};
            const std::uint64_t tx[] = {p.tx_packets, p.tx_bytes, p.tx_errors};
            const std::string l = fmt::format("function=\"{}\",port=\"{}\"", esc(p.function), p.port);
            sample(out, traffic[t].first, l + ",direction=\"rx\"", rx[t]);
            sample(out, traffic[t].first, l + ",direction=\"tx\"", tx[t]);
        }
    }

    family(out, "cxvd_request_duration_seconds", "histogram",
           "Time to handle a request, by PRM opcode (COMMAND) or request type.");
    for (const auto& [op, h] : latency) {
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < buckets.size(); ++b) {
            cumulative += h.counts[b];
            sample(out, "cxvd_request_duration_seconds_bucket", fmt::format("op=\"{}\",le=\"{}\"", esc(op), buckets[b]),
                   cumulative);
        }
        sample(out, "cxvd_request_duration_seconds_bucket", fmt::format("op=\"{}\",le=\"+Inf\"", esc(op)), h.count);
        sample(out, "cxvd_request_duration_seconds_sum", fmt::format("op=\"{}\"", esc(op)), h.sum);
        sample(out, "cxvd_request_duration_seconds_count", fmt::format("op=\"{}\"", esc(op)), h.count);
    }
    return out;
}

// ---- HTTP -----------------------------------------------------------------------------

namespace {

// "127.0.0.1:PORT" only: the metrics name every client's pid, uid and command. The port,
// or EINVAL for any other form.
result<unsigned> loopback_port(const std::string& addr) {
    const auto colon = addr.rfind(':');
    char* end = nullptr;
    const std::string host = colon == std::string::npos ? std::string() : addr.substr(0, colon);
    const unsigned long port = colon == std::string::npos ? 0 : std::strtoul(addr.c_str() + colon + 1, &end, 10);
    if (host != "127.0.0.1" || end == nullptr || *end != '\0' || end == addr.c_str() + colon + 1 || port > 65535) {
        return error{EINVAL, fmt::format("--metrics {}: give a UNIX socket path or 127.0.0.1:PORT (the metrics "
                                         "name every client, so they are not served beyond this host)", addr)};
    }
    return static_cast<unsigned>(port);
}

}  // namespace

status metrics_server::check_address(const std::string& addr) {
    const std::string path =
        addr.rfind("unix:", 0) == 0 ? addr.substr(5) : addr.rfind('/', 0) == 0 ? addr : std::string();
    if (!path.empty()) {
        if (auto c = claim_socket_path(path, SOCK_STREAM); !c) return error{c.error().code, "--metrics " + c.error().message};
        const std::string dir = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
        if (::access(dir.c_str(), W_OK | X_OK) != 0) {
            return error{errno, fmt::format("--metrics {}: directory {}: {}", path, dir, std::strerror(errno))};
        }
        return ok_status();
    }
    auto port = loopback_port(addr);
    if (!port) return port.error();
    if (*port == 0) return ok_status();
    unique_fd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return error{errno, fmt::format("--metrics: socket: {}", std::strerror(errno))};
    const int one = 1;
    ::setsockopt(probe.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(*port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        return error{errno, fmt::format("--metrics {}: bind: {}", addr, std::strerror(errno))};
    }
    return ok_status();
}

result<std::unique_ptr<metrics_server>> metrics_server::create(const std::string& addr, std::shared_ptr<metrics> m,
                                                               std::function<std::vector<port_sample>()> ports,
                                                               std::chrono::milliseconds read_time) {
    std::unique_ptr<metrics_server> s(new metrics_server);
    s->read_time_ = read_time;
    s->m_ = std::move(m);
    s->ports_ = std::move(ports);
    std::string path = addr.rfind("unix:", 0) == 0 ? addr.substr(5) : addr.rfind('/', 0) == 0 ? addr : std::string();
    if (!path.empty()) {
        sockaddr_un a{};
        if (path.size() >= sizeof a.sun_path) return error{ENAMETOOLONG, fmt::format("--metrics {}: too long", path)};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        s->listen_ = unique_fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!s->listen_) return error{errno, fmt::format("--metrics: socket: {}", std::strerror(errno))};
        // A live socket there is another process's: refused, not removed.
        if (auto c = claim_socket_path(path, SOCK_STREAM); !c) {
            return error{c.error().code, "--metrics " + c.error().message};
        }
        // bind(2) makes the file with the socket inode's mode less the umask (unix(7)):
        // 0600 from the start, so it is never more open than 0660 (the chmod below) on
        // its way there.
        if (::fchmod(s->listen_.get(), 0600) != 0) {
            return error{errno, fmt::format("--metrics {}: fchmod: {}", path, std::strerror(errno))};
        }
        if (::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            return error{errno, fmt::format("--metrics {}: bind: {}", path, std::strerror(errno))};
        }
        s->unix_path_ = path;  // unlinked by the destructor from here on
        if (::chmod(path.c_str(), 0660) != 0) {
            return error{errno, fmt::format("--metrics {}: chmod: {}", path, std::strerror(errno))};
        }
    } else {
        auto port = loopback_port(addr);
        if (!port) return port.error();
        s->listen_ = unique_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!s->listen_) return error{errno, fmt::format("--metrics: socket: {}", std::strerror(errno))};
        const int one = 1;
        ::setsockopt(s->listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(*port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            return error{errno, fmt::format("--metrics {}: bind: {}", addr, std::strerror(errno))};
        }
        socklen_t len = sizeof a;
        ::getsockname(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), &len);
        s->port_ = ntohs(a.sin_port);
    }
    if (::listen(s->listen_.get(), 16) != 0) return error{errno, fmt::format("--metrics: listen: {}", std::strerror(errno))};
    s->wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s->wake_) return error{errno, fmt::format("--metrics: eventfd: {}", std::strerror(errno))};
    s->thread_ = std::thread([p = s.get()] { p->run(); });
    return s;
}

metrics_server::~metrics_server() {
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    if (thread_.joinable()) thread_.join();
    if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

// One scrape in progress: its request read to the blank line (bounded in size and in
// time), then its response sent (bounded in time), one per connection.
struct metrics_server::connection {
    unique_fd fd;
    std::string in, out;
    std::size_t sent = 0;
    bool writing = false, done = false;
    std::chrono::steady_clock::time_point end;
};

void metrics_server::run() {
    std::vector<connection> conns;
    std::vector<pollfd> fds;
    for (;;) {
        const auto now = std::chrono::steady_clock::now();
        std::erase_if(conns, [&](const connection& c) { return c.done || c.end <= now; });
        fds.clear();
        fds.push_back({wake_.get(), POLLIN, 0});
        // A full table leaves the listener unpolled: newcomers wait in the backlog.
        fds.push_back({listen_.get(), static_cast<short>(conns.size() < kMaxConnections ? POLLIN : 0), 0});
        int timeout = -1;
        for (const auto& c : conns) {
            fds.push_back({c.fd.get(), static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(c.end - now).count();
            const int ms = static_cast<int>(std::max<long long>(left, 1));
            timeout = timeout < 0 ? ms : std::min(timeout, ms);
        }
        if (::poll(fds.data(), fds.size(), timeout) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[0].revents) return;
        for (std::size_t i = 0; i < conns.size(); ++i) {
            if (fds[i + 2].revents) step(conns[i]);
        }
        if (fds[1].revents & POLLIN) {
            while (conns.size() < kMaxConnections) {
                unique_fd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
                if (!c) {
                    // Out of fds: wait a little rather than spin on a listener that stays readable.
                    if (errno == EMFILE || errno == ENFILE) ::poll(fds.data(), 1, 100);
                    break;
                }
                connection n;
                n.fd = std::move(c);
                n.end = std::chrono::steady_clock::now() + read_time_;
                conns.push_back(std::move(n));
            }
        }
    }
}

void metrics_server::step(connection& c) {
    if (!c.writing) {
        for (;;) {
            char buf[1024];
            const ssize_t n = ::read(c.fd.get(), buf, std::min(sizeof buf, kMaxRequest - c.in.size()));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) return;  // more later, within the deadline
            if (n <= 0) {
                c.done = true;  // gone before its request was whole
                return;
            }
            c.in.append(buf, static_cast<std::size_t>(n));
            if (c.in.find("\r\n\r\n") != std::string::npos || c.in.size() >= kMaxRequest) break;
        }
        c.out = respond(c.in);
        c.writing = true;
        c.end = std::chrono::steady_clock::now() + kWriteTime;
    }
    while (c.sent < c.out.size()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            c.done = true;
            return;
        }
        c.sent += static_cast<std::size_t>(n);
    }
    ::shutdown(c.fd.get(), SHUT_WR);
    c.done = true;
}

std::string metrics_server::respond(const std::string& req) {
    // RFC 9112: request-line = method SP request-target SP HTTP-version CRLF.
    const auto eol = req.find("\r\n");
    const std::string line = req.substr(0, eol);
    const auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    std::string status = "200 OK", body, type = "text/plain; version=0.0.4; charset=utf-8";
    if (eol == std::string::npos || req.find("\r\n\r\n") == std::string::npos || sp1 == std::string::npos ||
        sp2 == sp1 || line.compare(sp2 + 1, 7, "HTTP/1.") != 0) {
        status = req.size() >= kMaxRequest ? "431 Request Header Fields Too Large" : "400 Bad Request";
        body = status + "\n";
        type = "text/plain; charset=utf-8";
    } else {
        const std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
        const std::string path = target.substr(0, target.find('?'));
        // On TCP, a browser on this host may be the one asking, for a page of a name that
        // someone's DNS points here (DNS rebinding): then the Host is that name, and the
        // request is refused before anything is rendered. A UNIX socket is out of a
        // browser's reach; whatever proxy sits in front sets its own Host there.
        const host_field host = unix_path_.empty() ? find_host(req.substr(0, req.find("\r\n\r\n")))
                                                   : host_field{1, "localhost"};
        if (host.lines != 1 || host.value.empty()) {
            status = "400 Bad Request";
        } else if (!names_loopback(host.value, port_)) {
            status = "421 Misdirected Request";
        } else if (method != "GET") {
            status = "405 Method Not Allowed";
        } else if (path != "/metrics") {
            status = "404 Not Found";
        }
        if (status.rfind("200", 0) == 0) {
            body = m_->render(ports_ ? ports_() : std::vector<port_sample>{});
        } else if (status.rfind("400", 0) == 0) {
            body = status + ": one Host field, naming this endpoint (RFC 9112, section 3.2)\n";
            type = "text/plain; charset=utf-8";
        } else if (status.rfind("421", 0) == 0) {
            body = fmt::format("{}: Host {} is not this endpoint (127.0.0.1:{} or localhost:{})\n", status,
                               printable(host.value), port_, port_);
            type = "text/plain; charset=utf-8";
        } else {
            body = status + " (GET /metrics)\n";
            type = "text/plain; charset=utf-8";
        }
    }
    std::string resp = fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
                                   status, type, body.size(), status.rfind("405", 0) == 0 ? "Allow: GET\r\n" : "");
    resp += body;
    return resp;
}

}  // namespace cxv::daemon
