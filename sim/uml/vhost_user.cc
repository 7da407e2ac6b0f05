#include "sim/uml/vhost_user.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace cxv::sim::uml {

namespace {

// vhost-user's requests (frontend to backend) that this backend answers.
enum request : std::uint32_t {
    GET_FEATURES = 1,
    SET_FEATURES = 2,
    SET_OWNER = 3,
    RESET_OWNER = 4,
    SET_MEM_TABLE = 5,
    SET_LOG_BASE = 6,
    SET_LOG_FD = 7,
    SET_VRING_NUM = 8,
    SET_VRING_ADDR = 9,
    SET_VRING_BASE = 10,
    GET_VRING_BASE = 11,
    SET_VRING_KICK = 12,
    SET_VRING_CALL = 13,
    SET_VRING_ERR = 14,
    GET_PROTOCOL_FEATURES = 15,
    SET_PROTOCOL_FEATURES = 16,
    SET_VRING_ENABLE = 18,
    SET_SLAVE_REQ_FD = 21,
};

constexpr std::uint32_t kVersion = 1, kReplyFlag = 1u << 2;
constexpr std::uint64_t kVringIndexMask = 0xff, kVringNoFd = 1u << 8;
// VIRTIO_F_VERSION_1 (bit 32): little-endian rings, as UML's driver expects; and
// VHOST_USER_F_PROTOCOL_FEATURES (bit 30), for one protocol feature: SLAVE_REQ (bit 5).
// UML 6.1's virtio_uml allocates the interrupt its queues' call files signal only when it
// sets up the backend-to-frontend channel (vhost_user_init_slave_req); without it the
// queues ask for IRQ 0, the timer's, and the device fails to probe (EBUSY). Nothing is
// ever sent on that channel. Not REPLY_ACK (no request then wants an acknowledgement),
// not INBAND_NOTIFICATIONS (kicks and calls stay files), not CONFIG.
constexpr std::uint64_t kFeatures = (std::uint64_t{1} << 32) | (std::uint64_t{1} << 30);
constexpr std::uint64_t kProtocolFeatures = std::uint64_t{1} << 5;
constexpr std::size_t kHeader = 12, kMaxPayload = 4096;
constexpr int kMaxFds = 8;

template <typename T>
T get(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

result<std::unique_ptr<vhost_user_backend>> vhost_user_backend::listen(const std::string& socket_path,
                                                                       unsigned queues,
                                                                       memory_changed on_memory) {
    std::unique_ptr<vhost_user_backend> b(new vhost_user_backend());
    b->on_memory_ = std::move(on_memory);
    for (unsigned i = 0; i < queues; ++i) b->queues_.push_back(std::make_unique<virtqueue>());
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof a.sun_path) return error{ENAMETOOLONG, socket_path + ": path too long"};
    std::memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
    b->listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!b->listener_) return error{errno, "socket"};
    ::unlink(socket_path.c_str());
    if (::bind(b->listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(b->listener_.get(), 1) != 0) {
        return error{errno, fmt::format("{}: {}", socket_path, std::strerror(errno))};
    }
    b->path_ = socket_path;
    return b;
}

vhost_user_backend::~vhost_user_backend() {
    unmap_memory();
    // In this order, and before the socket's name goes and the queues' files close.
    slave_.reset();
    conn_.reset();
    listener_.reset();
    if (!path_.empty()) ::unlink(path_.c_str());
}

void vhost_user_backend::unmap_memory() {
    if (regions_.empty()) return;
    if (on_memory_) on_memory_({});
    for (auto& r : regions_) ::munmap(r.map_base, r.map_len);
    regions_.clear();
}

std::byte* vhost_user_backend::find(const std::vector<memory_region>& regions,
                                    std::uint64_t memory_region::*space, std::uint64_t addr, std::size_t len) {
    for (const auto& r : regions) {
        const std::uint64_t start = r.*space;
        if (addr >= start && addr - start <= r.size && len <= r.size - (addr - start)) return r.base + (addr - start);
    }
    return nullptr;
}

std::byte* vhost_user_backend::from_user(std::uint64_t addr, std::size_t len) const {
    return find(regions_, &memory_region::user_addr, addr, len);
}

std::byte* vhost_user_backend::from_guest(std::uint64_t addr, std::size_t len) const {
    return find(regions_, &memory_region::guest_addr, addr, len);
}

status vhost_user_backend::handle() {
    if (!conn_) {
        conn_.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!conn_) return error{errno, "accept"};
        return done{};
    }
    std::byte header[kHeader];
    std::byte payload[kMaxPayload];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    iovec iov{header, kHeader};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(conn_.get(), &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    std::vector<unique_fd> fds;  // what on_message does not keep closes on the way out
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < n; ++i) fds.emplace_back(get<int>(reinterpret_cast<std::byte*>(CMSG_DATA(c)) + i * sizeof(int)));
    }
    if (got != static_cast<ssize_t>(kHeader)) {
        return error{got == 0 ? ECONNRESET : EPROTO, "the frontend closed the connection"};
    }
    const auto req = get<std::uint32_t>(header), flags = get<std::uint32_t>(header + 4),
               size = get<std::uint32_t>(header + 8);
    if (size > kMaxPayload) {
        return error{EPROTO, fmt::format("vhost-user request {}: payload of {} bytes", req, size)};
    }
    if (size != 0 && ::recv(conn_.get(), payload, size, MSG_WAITALL) != static_cast<ssize_t>(size)) {
        return error{EPROTO, "a short vhost-user payload"};
    }
    return on_message(req, flags, payload, size, fds);
}

status vhost_user_backend::reply(std::uint32_t request, const void* payload, std::uint32_t size) {
    std::byte buf[kHeader + 64];
    const std::uint32_t flags = kVersion | kReplyFlag;
    std::memcpy(buf, &request, 4);
    std::memcpy(buf + 4, &flags, 4);
    std::memcpy(buf + 8, &size, 4);
    std::memcpy(buf + kHeader, payload, size);
    if (::send(conn_.get(), buf, kHeader + size, MSG_NOSIGNAL) != static_cast<ssize_t>(kHeader + size)) {
        return error{errno, "sending a vhost-user reply"};
    }
    return done{};
}

status vhost_user_backend::on_message(std::uint32_t request, std::uint32_t flags, const std::byte* p,
                                      std::size_t size, std::vector<unique_fd>& fds) {
    (void)flags;
    auto need = [&](std::size_t n) -> status {
        if (size < n) return error{EPROTO, fmt::format("vhost-user request {}: {} bytes, {} needed", request, size, n)};
        return done{};
    };
    auto ring = [&](std::uint32_t index) -> virtqueue* {
        return index < queues_.size() ? queues_[index].get() : nullptr;
    };
    switch (request) {
    case GET_FEATURES:
        return reply(request, &kFeatures, 8);
    case SET_FEATURES:
        if (auto s = need(8); !s) return s;
        features_ = get<std::uint64_t>(p);
        return done{};
    case GET_PROTOCOL_FEATURES:
        return reply(request, &kProtocolFeatures, 8);
    case SET_PROTOCOL_FEATURES:
        if (auto s = need(8); !s) return s;
        if ((get<std::uint64_t>(p) & ~kProtocolFeatures) != 0) return error{EPROTO, "protocol features not offered"};
        return done{};
    case SET_SLAVE_REQ_FD:
        if (fds.size() != 1) return error{EPROTO, "SET_SLAVE_REQ_FD without a file"};
        slave_ = std::move(fds[0]);
        fds.clear();  // kept, unused, until the session ends
        return done{};
    case SET_OWNER:
    case SET_VRING_ENABLE:  // a ring is served once it is set up; disabling it is not modelled
        return done{};
    case RESET_OWNER:
        for (auto& q : queues_) q->stop();
        return done{};
    case SET_MEM_TABLE: {
        if (auto s = need(8); !s) return s;
        const auto num = get<std::uint32_t>(p);
        if (num == 0 || num > 8 || size < 8 + 32 * std::size_t{num} || fds.size() != num) {
            return error{EPROTO, fmt::format("SET_MEM_TABLE: {} regions, {} files", num, fds.size())};
        }
        unmap_memory();
        for (std::uint32_t i = 0; i < num; ++i) {
            const std::byte* r = p + 8 + 32 * i;
            memory_region m;
            m.guest_addr = get<std::uint64_t>(r);
            m.size = get<std::uint64_t>(r + 8);
            m.user_addr = get<std::uint64_t>(r + 16);
            const auto offset = get<std::uint64_t>(r + 24);
            m.map_len = offset + m.size;
            m.map_base = ::mmap(nullptr, m.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i].get(), 0);
            if (m.map_base == MAP_FAILED) {
                const int e = errno;
                unmap_memory();
                return error{e, fmt::format("SET_MEM_TABLE: mapping region {}: {}", i, std::strerror(e))};
            }
            m.base = static_cast<std::byte*>(m.map_base) + offset;
            regions_.push_back(m);
        }
        if (on_memory_) on_memory_(regions_);
        return done{};
    }
    case SET_LOG_BASE:
    case SET_LOG_FD:
        return error{ENOTSUP, "vhost-user logging was not offered"};
    case SET_VRING_NUM:
    case SET_VRING_BASE: {
        if (auto s = need(8); !s) return s;
        virtqueue* q = ring(get<std::uint32_t>(p));
        const auto num = get<std::uint32_t>(p + 4);
        if (q == nullptr) return error{EPROTO, "a virtqueue index out of range"};
        if (request == SET_VRING_NUM) {
            if (num == 0 || num > 32768 || (num & (num - 1)) != 0) return error{EPROTO, "a bad virtqueue size"};
            q->set_size(num);
        } else {
            q->set_base(static_cast<std::uint16_t>(num));
        }
        return done{};
    }
    case SET_VRING_ADDR: {
        if (auto s = need(40); !s) return s;
        virtqueue* q = ring(get<std::uint32_t>(p));
        if (q == nullptr) return error{EPROTO, "a virtqueue index out of range"};
        // The sizes of the three parts for the size set before (VIRTIO 1.1, 2.6).
        // SET_VRING_NUM comes first; without it nothing is translated.
        std::byte* desc = from_user(get<std::uint64_t>(p + 8), 16);
        std::byte* used = from_user(get<std::uint64_t>(p + 16), 4);
        std::byte* avail = from_user(get<std::uint64_t>(p + 24), 4);
        if (desc == nullptr || used == nullptr || avail == nullptr) {
            return error{EPROTO, "SET_VRING_ADDR: a ring outside the shared memory"};
        }
        q->set_rings(desc, avail, used);
        return done{};
    }
    case GET_VRING_BASE: {
        if (auto s = need(8); !s) return s;
        virtqueue* q = ring(get<std::uint32_t>(p));
        if (q == nullptr) return error{EPROTO, "a virtqueue index out of range"};
        q->stop();
        const std::uint32_t state[2] = {get<std::uint32_t>(p), q->base()};
        return reply(request, state, sizeof state);
    }
    case SET_VRING_KICK:
    case SET_VRING_CALL:
    case SET_VRING_ERR: {
        if (auto s = need(8); !s) return s;
        const auto v = get<std::uint64_t>(p);
        virtqueue* q = ring(static_cast<std::uint32_t>(v & kVringIndexMask));
        if (q == nullptr) return error{EPROTO, "a virtqueue index out of range"};
        unique_fd fd;
        if ((v & kVringNoFd) == 0) {
            if (fds.size() != 1) return error{EPROTO, "a vring file expected"};
            fd = std::move(fds[0]);
            fds.clear();  // kept
        }
        if (request == SET_VRING_KICK) {
            if (fd) ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
            q->set_kick(std::move(fd));
        } else if (request == SET_VRING_CALL) {
            q->set_call(std::move(fd));
        } else {
            fd.reset();  // errors are not reported through it
        }
        return done{};
    }
    default:
        return error{ENOTSUP, fmt::format("vhost-user request {} is not served", request)};
    }
}

}  // namespace cxv::sim::uml
