#include "protocol/transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cxv::daemon {

namespace {

error bad(int code, std::string what) { return error{code, std::move(what)}; }

// What a large command's memfd must be sealed with: nothing can change it after the
// reader checked it (F_SEAL_WRITE also refuses a writable shared mapping made before).
constexpr int kLargeSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;

}  // namespace

status claim_socket_path(const std::string& path, int type) {
    sockaddr_un a{};
    if (path.empty() || path.size() >= sizeof a.sun_path) {
        return bad(ENAMETOOLONG, fmt::format("socket path '{}' is empty or longer than {} bytes", path,
                                             sizeof a.sun_path - 1));
    }
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return ok_status();
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    unique_fd probe(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
    if (!probe) return bad(errno, fmt::format("socket: {}", std::strerror(errno)));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        return bad(EADDRINUSE, fmt::format("{}: another process serves it", path));
    }
    // EPROTOTYPE: a live socket of another type, not ours to remove.
    if (errno != ECONNREFUSED) return bad(EADDRINUSE, fmt::format("{}: in use ({})", path, std::strerror(errno)));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return bad(errno, fmt::format("{}: removing a stale socket: {}", path, std::strerror(errno)));
    }
    return ok_status();
}

namespace {

// recvmsg(2) of one message into `buf`, with room for max_fds fds beside it. Every fd that
// came goes to `take`, whatever else is wrong, so none leaks. The message's length and
// msg_flags.
struct raw_message {
    std::size_t length = 0;
    int flags = 0;
    bool fds = false;
};
template <typename Take>
result<raw_message> receive_raw(int sock, std::span<std::byte> buf, int flags, Take take) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    iovec iov{buf.data(), buf.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags);
    if (n < 0) return error{errno, fmt::format("recvmsg: {}", std::strerror(errno))};
    raw_message r{static_cast<std::size_t>(n), m.msg_flags, false};
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < k; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            take(unique_fd(fd));
            r.fds = true;
        }
    }
    if (r.length == 0 && !r.fds) return error{ECONNRESET, "the peer closed the connection"};
    return r;
}

}  // namespace

result<received> receive(int sock, int flags, std::vector<std::byte>* cut) {
    received out;
    out.bytes.resize(max_message_bytes + 1);
    auto r = receive_raw(sock, out.bytes, flags, [&](unique_fd fd) { out.fds.push_back(std::move(fd)); });
    if (!r) return r.error();
    if ((r->flags & (MSG_TRUNC | MSG_CTRUNC)) && cut != nullptr) {
        out.bytes.resize(std::min(r->length, header_bytes));
        *cut = std::move(out.bytes);
    }
    if (r->flags & MSG_TRUNC) {
        return error{EMSGSIZE, fmt::format("a message longer than {} bytes", max_message_bytes)};
    }
    if (r->flags & MSG_CTRUNC) {
        return error{EBADMSG, fmt::format("more than {} file descriptors with one message", max_fds)};
    }
    out.bytes.resize(r->length);
    return out;
}

result<std::size_t> receive_into(int sock, std::span<std::byte> buf, int flags) {
    // Nothing here takes an fd: each closes as it comes.
    auto r = receive_raw(sock, buf, flags, [](unique_fd) {});
    if (!r) return r.error();
    if (r->flags & MSG_TRUNC) return error{EMSGSIZE, fmt::format("a message longer than {} bytes", buf.size())};
    return r->length;
}

status send_message(int sock, std::span<const std::byte> msg, std::span<const int> fds, int flags) {
    if (fds.size() > max_fds) return error{EINVAL, "too many fds for one message"};
    iovec iov{const_cast<std::byte*>(msg.data()), msg.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    if (!fds.empty()) {
        m.msg_control = control;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(sock, &m, MSG_NOSIGNAL | flags);
    if (n < 0) return error{errno, fmt::format("sendmsg: {}", std::strerror(errno))};
    if (static_cast<std::size_t>(n) != msg.size()) return error{EIO, "sendmsg: a short send"};
    return ok_status();
}

// ---- sealed memfds ---------------------------------------------------------------------

status check_map_fd(int fd, std::uint64_t offset, std::uint64_t length) {
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        return bad(EPERM, "MAP_MEMORY: the memfd must be sealed against shrinking (F_ADD_SEALS F_SEAL_SHRINK)");
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0) return bad(EBADF, fmt::format("MAP_MEMORY: fstat: {}", std::strerror(errno)));
    if (static_cast<std::uint64_t>(st.st_size) < offset + length) {
        return bad(EINVAL, fmt::format("MAP_MEMORY: [{}, {}) is beyond the file's {} bytes", offset, offset + length,
                                       st.st_size));
    }
    return ok_status();
}

result<unique_fd> sealed_memfd(std::span<const std::byte> bytes) {
    unique_fd fd(::memfd_create("cxvd-command", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd) return bad(errno, fmt::format("memfd_create: {}", std::strerror(errno)));
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::pwrite(fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return bad(n < 0 ? errno : EIO, fmt::format("writing a memfd: {}", std::strerror(errno)));
        done += static_cast<std::size_t>(n);
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, kLargeSeals | F_SEAL_SEAL) != 0) {
        return bad(errno, fmt::format("sealing a memfd: {}", std::strerror(errno)));
    }
    return fd;
}

result<std::vector<std::byte>> read_sealed(int fd, std::size_t len) {
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & kLargeSeals) != kLargeSeals) {
        return bad(EPERM, "the memfd must be sealed against writes and resizing (F_SEAL_WRITE, F_SEAL_SHRINK, "
                          "F_SEAL_GROW)");
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0) return bad(EBADF, fmt::format("fstat: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < len) {
        return bad(EINVAL, fmt::format("a file of {} bytes where {} were expected", st.st_size, len));
    }
    std::vector<std::byte> out(len);
    std::size_t done = 0;
    while (done < len) {
        const ssize_t n = ::pread(fd, out.data() + done, len - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return bad(n < 0 ? errno : EIO, fmt::format("reading a memfd: {}", std::strerror(errno)));
        done += static_cast<std::size_t>(n);
    }
    return out;
}

}  // namespace cxv::daemon
