// A split virtqueue (VIRTIO 1.1, 2.6) as its device side uses it: take the chains the
// driver made available, read what they carry, write into their device-writable part,
// and give them back as used, then tell the driver (unless it asked not to be told).
//
// The ring lives in memory the driver shares (vhost_user.h maps it); addresses in the
// descriptors are the driver's, translated through `translate`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "base/unique_fd.h"

namespace cxv::sim::uml {

class virtqueue {
public:
    // A guest address range as a pointer here (null: outside the shared memory).
    using translate_fn = std::function<std::byte*(std::uint64_t addr, std::size_t len)>;

    // One chain taken from the available ring: what the driver gave to read, and where
    // the device may write.
    struct chain {
        std::uint16_t head = 0;
        std::vector<std::byte> readable;                  // gathered
        std::vector<std::span<std::byte>> writable;       // in order
        std::size_t writable_size() const;
        // Writes `data` across the writable part; the bytes written.
        std::size_t write(std::span<const std::byte> data);
    };

    // Ring setup (vhost-user SET_VRING_*).
    void set_size(unsigned num) { num_ = num; }
    void set_rings(std::byte* desc, std::byte* avail, std::byte* used) {
        desc_ = desc;
        avail_ = avail;
        used_ = used;
    }
    void set_base(std::uint16_t next_avail) { next_avail_ = next_used_ = next_avail; }
    std::uint16_t base() const noexcept { return next_avail_; }
    void set_kick(unique_fd fd);
    void set_call(unique_fd fd);
    int kick_fd() const noexcept { return kick_.get(); }
    bool ready() const noexcept { return desc_ != nullptr && num_ != 0; }
    void stop();  // GET_VRING_BASE: no more processing until set up again

    // Clears the kick (the eventfd's count).
    void take_kick();
    // The next available chain, if any. A malformed chain (a loop, an address outside
    // shared memory) is given back used with nothing written, and counted.
    std::optional<chain> pop(const translate_fn& translate);
    // Gives `c` back, `written` bytes in it.
    void push(const chain& c, std::uint32_t written);
    // Tells the driver about used chains, unless it suppressed notifications.
    void notify();

    std::uint64_t malformed() const noexcept { return malformed_; }
    ~virtqueue();

private:
    unsigned num_ = 0;
    std::byte* desc_ = nullptr;
    std::byte* avail_ = nullptr;
    std::byte* used_ = nullptr;
    std::uint16_t next_avail_ = 0;
    std::uint16_t next_used_ = 0;
    unique_fd kick_, call_;
    std::uint64_t malformed_ = 0;
};

}  // namespace cxv::sim::uml
