// cxvd's transport: messages over a SOCK_SEQPACKET UNIX socket with file descriptors
// beside them (unix(7), cmsg(3)), the socket path a daemon claims, and the sealed memfds
// (memfd_create(2)) that carry memory and large commands. What the bytes mean is the
// codec's (protocol/codec.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace cxv::daemon {

// Every message starts with a header of this size (protocol/codec.h says what is in it).
constexpr std::size_t header_bytes = 16;
constexpr std::size_t max_message_bytes = 64 * 1024;
constexpr std::size_t max_fds = 2;  // per message; more is refused

// A UNIX socket path about to be bound (`type`: SOCK_SEQPACKET, SOCK_STREAM): a socket
// file there that answers connect(2) is another daemon's (EADDRINUSE); one that refuses
// (ECONNREFUSED) is stale and removed. Anything else there (a file that is not a socket)
// is left, and bind(2) fails on it.
status claim_socket_path(const std::string& path, int type);

// One message received: its bytes and the fds beside it (close-on-exec). Errors: EMSGSIZE
// (longer than max_message_bytes; truncated), EBADMSG (fds cut off: more than max_fds),
// ECONNRESET for an orderly close (0 bytes), or the recvmsg errno. For EMSGSIZE and
// EBADMSG `cut`, when given, gets the message's first bytes (the header, so the reply
// can carry the sender's sequence).
struct received {
    std::vector<std::byte> bytes;
    std::vector<unique_fd> fds;
};
result<received> receive(int sock, int flags = 0, std::vector<std::byte>* cut = nullptr);
// One message into `buf` (no allocation: the event reader's, per event): its length. Any
// fd that comes beside it is closed. Errors as receive(), EMSGSIZE past buf's size.
result<std::size_t> receive_into(int sock, std::span<std::byte> buf, int flags = 0);
// Sends one message with `fds` beside it (MSG_NOSIGNAL | `flags`).
status send_message(int sock, std::span<const std::byte> msg, std::span<const int> fds = {}, int flags = 0);

// ---- sealed memfds ---------------------------------------------------------------------

// MAP_MEMORY's fd at the point of mapping: sealed against shrinking (F_GET_SEALS,
// memfd_create(2)) first, then at least offset + length long (fstat(2)). In that order:
// once sealed the size can only grow, so a size read after the seal holds at mmap time.
// EPERM without the seal, EINVAL when too short.
status check_map_fd(int fd, std::uint64_t offset, std::uint64_t length);

// A large command's input or output as a memfd: written, then sealed against writes,
// shrinking and growing (memfd_create(2)), so what the reader checks is what it reads.
result<unique_fd> sealed_memfd(std::span<const std::byte> bytes);
// The first `len` bytes of such a file, after checking its seals (EPERM without them)
// and its size (EINVAL when shorter).
result<std::vector<std::byte>> read_sealed(int fd, std::size_t len);

}  // namespace cxv::daemon
