// The wire between emulated ports. Each device's port has an address on a named fabric
// (its LID on InfiniBand, its IPv4 address on Ethernet) and an inbox; a device sends a
// packet by handing it to the fabric, which puts it in the inbox of the port with the
// destination address (its own for loopback), and the receiving device's thread takes
// it from there in its next round. Nothing is shared between devices but packets, so
// two devices never lock each other's state.
//
// What travels is one InfiniBand transport packet (sim/wire/packet.h), by value: the
// engine cuts messages into path-MTU packets itself. Until the ports encode frames, the
// fabric routes by the packet's destination as a port would resolve it (the IPv4 address
// of an IPv4-mapped destination GID, the low 32 bits of another; the DLID on InfiniBand).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "sim/wire/packet.h"

namespace cxv::sim {

// qpc.st values of the transports the model carries.
enum class transport : std::uint8_t { rc = 0x0, uc = 0x1, ud = 0x2 };

// The fabric address a packet goes to: the DLID on InfiniBand, the IPv4 address of the
// destination GID (its last 32 bits) on Ethernet.
inline std::uint32_t fabric_destination(const wire::route& r) {
    if (r.link == wire::link_kind::ib) return r.dlid;
    return (std::uint32_t{r.dgid[12]} << 24) | (std::uint32_t{r.dgid[13]} << 16) | (std::uint32_t{r.dgid[14]} << 8) |
           r.dgid[15];
}

class inbox {
public:
    void push(wire::packet&& p) {
        std::lock_guard lock(mu_);
        q_.push_back(std::move(p));
        size_.store(q_.size(), std::memory_order_release);
    }
    // Moves every waiting packet to `out` (in arrival order).
    void take(std::deque<wire::packet>& out) {
        if (size_.load(std::memory_order_acquire) == 0) return;
        std::lock_guard lock(mu_);
        for (auto& p : q_) out.push_back(std::move(p));
        q_.clear();
        size_.store(0, std::memory_order_release);
    }

private:
    std::mutex mu_;
    std::deque<wire::packet> q_;
    std::atomic<std::size_t> size_{0};
};

// The fabrics of this process, by name and port type. Addresses are unique per fabric:
// a port attaching with an address already taken replaces the earlier one (whose
// packets are then lost, as with a duplicate LID on a subnet).
class fabric {
public:
    static fabric& instance();
    void attach(const std::string& net, bool ethernet, std::uint32_t addr, std::shared_ptr<inbox> box);
    void detach(const std::string& net, bool ethernet, std::uint32_t addr, const inbox* box);
    // False when no port has the address (the packet is dropped).
    bool deliver(const std::string& net, bool ethernet, std::uint32_t addr, wire::packet&& p);

private:
    using key = std::tuple<std::string, bool, std::uint32_t>;
    std::mutex mu_;
    std::map<key, std::shared_ptr<inbox>> ports_;
};

}  // namespace cxv::sim
