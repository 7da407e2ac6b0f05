// The wire between emulated ports. Each device's port has an address on a named fabric
// (its LID on InfiniBand, its IPv4 address on Ethernet) and an inbox; a device sends a
// packet by handing it to the fabric, which puts it in the inbox of the port with the
// destination address (its own for loopback), and the receiving device's thread takes
// it from there in its next round. Nothing is shared between devices but packets, so
// two devices never lock each other's state.
//
// A packet is one message of the InfiniBand transport, whole: the model does not cut
// messages into path-MTU packets on the wire, but numbers them as if it did (a message
// takes as many PSNs as it would packets), so PSN arithmetic and the limits that depend
// on the MTU behave as on a card.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hw/opcodes.h"

namespace cxv::sim {

// qpc.st values of the transports the model carries.
enum class transport : std::uint8_t { rc = 0x0, uc = 0x1, ud = 0x2 };

enum class pkt_kind : std::uint8_t {
    request,          // SEND, WRITE, READ request, atomic request (BTH opcode class)
    ack,              // RC: the request with this PSN (and all before it) was carried out
    nak,              // RC: it was not (AETH syndrome in `nak`)
    read_response,    // RC: the data an RDMA READ asked for
    atomic_response,  // RC: the original value at the atomic's target
};

// AETH NAK codes (IBA 9.7.5.2.8) and the RNR NAK.
enum class nak_code : std::uint8_t {
    none,
    rnr,               // receiver not ready: no receive WQE
    invalid_request,   // e.g. a message longer than the receive buffer
    remote_access,     // R_Key, bounds or access rights
    remote_operation,  // the responder could not write the receive buffer
};

struct packet {
    pkt_kind kind = pkt_kind::request;
    transport tp = transport::rc;
    std::uint32_t src_addr = 0, dst_addr = 0;  // LID, or IPv4 address (host order)
    std::uint32_t src_qpn = 0, dst_qpn = 0;
    std::uint32_t psn = 0;   // first PSN of the message (24 bits)
    std::uint32_t npsn = 1;  // PSNs the message takes
    hw::wqe_opcode op = hw::wqe_opcode::SEND;
    bool solicited = false;
    bool has_imm = false;
    std::uint32_t imm_raw = 0;  // immediate data, bytes as in the WQE (network order)
    std::uint64_t raddr = 0;
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;   // RDMA READ and atomics: bytes asked for
    std::uint64_t swap_add = 0, compare = 0;
    std::uint32_t qkey = 0;     // UD: DETH Q_Key
    std::uint8_t sl = 0;
    bool grh = false;           // UD: a GRH (or IP header) travels with the message
    std::array<std::byte, 40> grh_bytes{};  // what the receive buffer's first 40 bytes get
    nak_code nak = nak_code::none;
    std::uint8_t rnr_timer = 0;  // RNR NAK: the responder's min_rnr_timer code
    std::vector<std::byte> payload;
};

class inbox {
public:
    void push(packet&& p) {
        std::lock_guard lock(mu_);
        q_.push_back(std::move(p));
        size_.store(q_.size(), std::memory_order_release);
    }
    // Moves every waiting packet to `out` (in arrival order).
    void take(std::deque<packet>& out) {
        if (size_.load(std::memory_order_acquire) == 0) return;
        std::lock_guard lock(mu_);
        for (auto& p : q_) out.push_back(std::move(p));
        q_.clear();
        size_.store(0, std::memory_order_release);
    }

private:
    std::mutex mu_;
    std::deque<packet> q_;
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
    bool deliver(const std::string& net, bool ethernet, std::uint32_t addr, packet&& p);

private:
    using key = std::tuple<std::string, bool, std::uint32_t>;
    std::mutex mu_;
    std::map<key, std::shared_ptr<inbox>> ports_;
};

}  // namespace cxv::sim
