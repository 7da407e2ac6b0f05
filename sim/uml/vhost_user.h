// The backend side of vhost-user (QEMU's docs/interop/vhost-user.rst), as much of it as
// User-Mode Linux's virtio_uml driver uses when the backend offers only the protocol feature
// it needs (SLAVE_REQ, vhost_user.cc): the frontend connects to our UNIX socket, shares its memory (SET_MEM_TABLE, one file
// per region), and describes each virtqueue (size, addresses, an eventfd it kicks and a
// file we write to when we have used buffers). The virtqueues themselves are split rings
// in the shared memory (virtqueue.h).
//
// One thread: the caller polls fd() and the kick files, and calls handle() when the
// socket is readable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "sim/uml/virtqueue.h"

namespace cxv::sim::uml {

// One region of the frontend's memory, mapped here.
struct memory_region {
    std::uint64_t guest_addr = 0;  // the address the frontend's devices see (UML: physical)
    std::uint64_t user_addr = 0;   // the address vring addresses are given in
    std::uint64_t size = 0;
    std::byte* base = nullptr;     // our mapping of guest_addr
    std::size_t map_len = 0;       // what munmap takes, from map_base
    void* map_base = nullptr;
};

class vhost_user_backend {
public:
    // What the owner hears: the frontend's memory appeared (or went: an empty list).
    using memory_changed = std::function<void(const std::vector<memory_region>&)>;

    static result<std::unique_ptr<vhost_user_backend>> listen(const std::string& socket_path,
                                                              unsigned queues, memory_changed on_memory);
    ~vhost_user_backend();
    vhost_user_backend(const vhost_user_backend&) = delete;
    vhost_user_backend& operator=(const vhost_user_backend&) = delete;

    // The listening socket until a frontend connects, then the connection.
    int fd() const noexcept { return conn_ ? conn_.get() : listener_.get(); }
    bool connected() const noexcept { return static_cast<bool>(conn_); }
    // Accepts the frontend or handles one message from it. An error ends the session
    // (the frontend went away or broke the protocol).
    status handle();

    virtqueue& queue(unsigned i) { return *queues_.at(i); }
    unsigned queue_count() const noexcept { return static_cast<unsigned>(queues_.size()); }
    const std::vector<memory_region>& memory() const noexcept { return regions_; }
    // A range of the frontend's device addresses (what its descriptors hold) as a pointer
    // here, or null when any of it is outside the shared memory.
    std::byte* from_guest(std::uint64_t addr, std::size_t len) const;

private:
    vhost_user_backend() = default;
    status on_message(std::uint32_t request, std::uint32_t flags, const std::byte* payload, std::size_t size,
                      std::vector<unique_fd>& fds);
    status reply(std::uint32_t request, const void* payload, std::uint32_t size);
    void unmap_memory();
    // A ring address (in the frontend's user addresses) as a pointer here, or null.
    std::byte* from_user(std::uint64_t addr, std::size_t len) const;
    static std::byte* find(const std::vector<memory_region>& regions, std::uint64_t memory_region::*space,
                           std::uint64_t addr, std::size_t len);

    unique_fd listener_;
    unique_fd conn_;
    unique_fd slave_;  // the backend-to-frontend channel UML insists on; never written
    std::string path_;
    std::uint64_t features_ = 0;
    std::vector<memory_region> regions_;
    std::vector<std::unique_ptr<virtqueue>> queues_;
    memory_changed on_memory_;
};

}  // namespace cxv::sim::uml
