// The segment a port is cabled to: an Ethernet segment (RoCE ports) or an InfiniBand
// subnet (IB ports), as if every port on it hung off one switch. A port hands the
// segment whole frames -- Ethernet frames without the FCS, or InfiniBand packets from
// the LRH to the VCRC -- and the segment delivers each to the station with its
// destination address (the destination MAC; the LRH's DLID), or, for an Ethernet
// broadcast or multicast frame, to every station but the sender. Nothing else is shared
// between ports: not memory, not locks, not objects.
//
// Two kinds of segment:
//   in-process   stations of one process, found by the segment's name (the `fabric`
//                setting): a frame is a buffer moved to the receiver's queue;
//   directory    stations of every process started with the same directory (the
//                `fabric_dir` setting): each station is a UNIX datagram socket in the
//                directory, DIR/eth-<MAC as 12 hex digits> or DIR/ib-<LID as 4 hex
//                digits>, one datagram per frame. A station that is not there (its
//                process exited or crashed) receives nothing: a pulled cable. QEMU's
//                `-netdev dgram` speaks the same: a guest's NIC joins by binding one of
//                these names and sending to another. Between cxv processes a frame
//                goes through the receiving station's ring instead (ring.h, shared
//                memory in DIR/.bell-<name>), with no system call per frame; the socket
//                remains its address, its liveness and its wake-up.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace cxv::sim::link {

// Where a port is on its segment.
struct station {
    bool ethernet = true;
    std::array<std::uint8_t, 6> mac{};  // Ethernet
    std::uint16_t lid = 0;              // InfiniBand
};

// The name of a station's socket in a directory segment: "eth-02c500000001", "ib-0001".
std::string station_name(const station& s);

// Whether a frame's receiver must check its CRCs and checksums. `known_good`: a port of
// this process encoded the frame and nothing changed it since (no fault touched it), and
// it never left the process; its receiver may then take them as correct, as Linux's
// loopback device marks its packets CHECKSUM_UNNECESSARY. `absent`: the same, and the
// sender left them out (wire::crc_fill::later), so a receiver that shows the frame to
// anyone (a capture) computes them first (wire::seal). Only an in-process segment
// carries either; every frame that crosses a process boundary (directory segments)
// arrives `unverified`. A raw Ethernet frame's may be `known_good` with its IPv4 header
// checksum, its UDP or TCP checksum, or both, computed by the sending device (its
// checksum offload): `known_good_l3`, `_l4`, `_l3_l4` (a frame the application built
// whole, checksums included, is only `known_good`: its receiver checks them).
enum class frame_crcs : std::uint8_t { unverified, known_good, absent, known_good_l3, known_good_l4, known_good_l3_l4 };

inline constexpr frame_crcs known_good_with(bool l3, bool l4) noexcept {
    return l3 ? (l4 ? frame_crcs::known_good_l3_l4 : frame_crcs::known_good_l3)
              : (l4 ? frame_crcs::known_good_l4 : frame_crcs::known_good);
}
inline constexpr bool l3_known_good(frame_crcs c) noexcept {
    return c == frame_crcs::known_good_l3 || c == frame_crcs::known_good_l3_l4;
}
inline constexpr bool l4_known_good(frame_crcs c) noexcept {
    return c == frame_crcs::known_good_l4 || c == frame_crcs::known_good_l3_l4;
}

class segment_port {
public:
    virtual ~segment_port() = default;
    // Puts one frame on the segment. False when it reached no station (no station has
    // the destination address). On a directory segment a frame for a receiver whose
    // queue is full waits in the sender's backlog (flush) as in a switch's buffer, and
    // is lost only when that is full too.
    virtual bool send(std::span<const std::byte> frame, frame_crcs crcs) = 0;
    // The same, for a frame whose buffer the segment may keep, leaving another in its
    // place (of any size and contents): an in-process segment hands it to the receiver
    // without a copy.
    virtual bool send_owned(std::vector<std::byte>& frame, frame_crcs crcs) { return send(frame, crcs); }
    // The next frame that arrived for this station, into `frame` (its capacity is
    // reused), and what its sender vouched for; false when none is waiting. `now`: the
    // model round's time.
    virtual bool receive(std::vector<std::byte>& frame, frame_crcs& crcs,
                         std::chrono::steady_clock::time_point now) = 0;
    // Sends what a full receiver made wait (directory segments). True while anything
    // moved or still waits.
    virtual bool flush() { return false; }
    // A descriptor readable when a frame may have arrived, which an idle model thread
    // sleeps on (-1: none), so that a frame from another process wakes it at once.
    virtual int wake_fd() const { return -1; }
    // The model thread is about to sleep on wake_fd(): from now on any frame for this
    // station makes it readable (a frame put in the station's ring too). False when a
    // frame is already waiting: the thread must not sleep. The next receive() ends it.
    virtual bool arm_wake() { return true; }
    // Whether every station is in this process (a sender may then leave CRCs absent).
    virtual bool in_process() const noexcept { return false; }
};

// Attaches `s` to the in-process segment `name`. A station already attached with the
// same address is replaced (its frames are then lost, as with a duplicate address).
std::unique_ptr<segment_port> attach_in_process(const std::string& name, const station& s);

// Attaches `s` to the segment of directory `dir` (which must exist). Fails when a live
// station of another port already has the address, or the path is too long for a UNIX
// socket; a socket left by a process that died is taken over.
result<std::unique_ptr<segment_port>> attach_directory(const std::string& dir, const station& s);

}  // namespace cxv::sim::link
