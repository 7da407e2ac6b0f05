// The MACs of RoCE peers (docs/linux-oracle.md, finding 19). A ConnectX sends a RoCE QP's
// packets to the MAC in its path (INIT2RTR's rmac) and a UD WQE's to the address
// vector's; it resolves nothing itself, and under VFIO no netdev does it either. So cxv
// does what Linux's neighbour table does for mlx5_ib: a link-local EUI-64 GID names its
// MAC (RFC 4291 appendix A), a multicast GID maps to its group MAC (RFC 1112, RFC 2464),
// and an IPv4-mapped GID's MAC is asked for with ARP (RFC 826) on a raw queue of the
// function's own: a request to the broadcast MAC from the port's MAC and the IPv4
// address of the source GID, the answer steered to that queue by a rule for ARP's
// ethertype. Answers are kept (and so is every sender an ARP frame names, as RFC 826's
// "merge" step has it) for the device's lifetime.
//
// Not yet: IPv6 GIDs that are neither link-local EUI-64 nor multicast (neighbour
// discovery), and answering other hosts' ARP requests for this function's addresses.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "api/cxv_eth.h"
#include "base/result.h"

namespace cxv::eth {

class neighbours {
public:
    using gid = std::array<std::uint8_t, 16>;

    // The queue is made at the first ARP (a RoCE peer's MAC is found without one where
    // its GID names it).
    explicit neighbours(device& d) noexcept : dev_(&d) {}
    ~neighbours();
    neighbours(const neighbours&) = delete;
    neighbours& operator=(const neighbours&) = delete;

    // The MAC of the peer at `dgid`, from the port's GID `sgid_index`. Without asking:
    // link-local EUI-64 and multicast GIDs, the function's own GIDs (its own MAC), and
    // peers already known. An IPv4-mapped GID is asked for with ARP, three times 300 ms
    // at most: EHOSTUNREACH when nobody answers.
    // ENOTSUP for another IPv6 GID (no neighbour discovery yet). Other errors: the raw
    // queue or its rule could not be made (through a cxvd, whose clients may not steer).
    result<mac> resolve(unsigned sgid_index, const gid& dgid);

    // What was sent and learned (for tests and the docs): ARP requests sent, and the
    // peers known by ARP.
    std::uint64_t requests_sent() const noexcept { return requests_.load(); }
    std::size_t known() const;

    static std::optional<mac> mac_of_link_local(const gid& g) noexcept;
    static std::optional<mac> mac_of_multicast(const gid& g) noexcept;
    static bool ipv4_mapped(const gid& g) noexcept;
    // An ARP request (oper 1) from (sha, spa) for tpa, broadcast: 60 bytes (padded to
    // Ethernet's minimum frame without its FCS).
    static std::array<std::byte, 60> arp_request(const mac& sha, const ipv4& spa, const ipv4& tpa) noexcept;
    // The sender of an Ethernet/IPv4 ARP frame (request or reply): false for any other
    // frame.
    static bool arp_sender(const std::byte* frame, std::size_t len, ipv4& spa, mac& sha) noexcept;

private:
    status ensure_queue();
    void take_answers();

    device* dev_;
    mutable std::mutex mu_;
    std::shared_ptr<queue> q_;
    std::shared_ptr<steering> steer_;  // the device's (steering::of) when the rule was made
    std::unique_ptr<rule> rule_;
    std::map<ipv4, mac> known_;
    std::atomic<std::uint64_t> requests_{0};
    // Why the queue or its rule could not be made, kept: not tried again at every QP.
    std::optional<error> broken_;
};

}  // namespace cxv::eth
