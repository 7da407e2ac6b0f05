// A function's port on the wire: what sits between the transport engine's packets
// (sim/wire/packet.h) and the segment's frames (segment.h), as a card's port logic and
// MAC do.
//
//   out   the engine's packet gets its link addresses (Ethernet: the destination MAC
//         from the QP's path or address vector, else from the neighbour table, asking
//         with ARP or IPv6 neighbour solicitation and holding the packet until the
//         answer comes), becomes a frame (sim/wire/frame.h: RoCEv2 or LRH-routed IB,
//         with the ICRC and VCRC), passes the link faults, the pcap, then the segment;
//   in    a frame from the segment goes to the pcap, then: ARP and neighbour
//         discovery are answered for the function's own addresses (the RoCE GID table
//         the driver programmed) and teach the neighbour table; a RoCEv2 or IB packet
//         whose ICRC (and VCRC) checks is decoded and handed to the engine; a damaged one
//         is dropped and counted, as a card drops it; on InfiniBand, the port with the
//         subnet manager's LID hands the subnet administrator's MADs to the SA the
//         model plays (subnet_admin.h) and sends its answers; any other Ethernet frame the
//         vport's filter takes (its MAC, broadcast, its address lists, its promiscuous
//         modes) goes to the receive flow tables.
//
// Model thread only (the pcap writer is shared by the process's ports and locks).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "sim/device_config.h"
#include "sim/link/segment.h"
#include "sim/link/subnet_admin.h"
#include "sim/objects/tables.h"
#include "sim/wire/packet.h"

namespace cxv::sim::wire {
class pcap_writer;
}

namespace cxv::sim::link {

// What the port saw, beyond the traffic counters the device's port keeps (sim/device_port.h).
struct port_counters {
    std::uint64_t frames_sent = 0, frames_received = 0;
    std::uint64_t bad_crc = 0;           // damaged: a bad ICRC, VCRC, IPv4 or UDP checksum: dropped
    std::uint64_t malformed = 0;         // frames that are not a packet the port can parse
    std::uint64_t not_for_us = 0;        // another station's unicast, foreign protocols
    std::uint64_t raw_frames = 0;        // Ethernet frames handed to the receive flow tables
    std::uint64_t no_route = 0;          // sent to an address no station has
    std::uint64_t arp_sent = 0, arp_answered = 0, nd_sent = 0, nd_answered = 0;
    std::uint64_t unresolved = 0;        // packets dropped: the neighbour never answered
    std::uint64_t sa_answered = 0;       // MADs the subnet administrator hosted here answered
    std::uint64_t fault_dropped = 0, fault_duplicated = 0, fault_reordered = 0, fault_corrupted = 0,
                  fault_delayed = 0;
};

class port {
public:
    using clock_type = std::chrono::steady_clock;

    // The port of a function configured by `cfg`, whose own addresses are the RoCE
    // address table of `tables` (read at each use: the driver may change it).
    static result<std::unique_ptr<port>> create(const device_config& cfg, const object_tables& tables);
    ~port();
    port(const port&) = delete;
    port& operator=(const port&) = delete;

    // A packet from the engine: put on the wire (whether or not a station has its
    // destination: the wire cannot tell), held until its neighbour answers, or
    // discarded (the frame could not be built, or the cable is out).
    enum class sent { wire, held, discarded };
    sent transmit(wire::packet&& p, clock_type::time_point now);
    // A whole Ethernet frame (an SQ's: its own addresses), padded to the minimum, through
    // the link faults and the pcap to the segment, with the checksums the device computed
    // in it. False when the cable is out or the port is no Ethernet port.
    // The segment may keep the frame's buffer (an in-process one does), leaving another.
    bool transmit_frame(std::vector<std::byte>& frame, clock_type::time_point now, wire::ip_checksums computed = {});
    // Frames that arrived (and held frames that are due): each packet for the engine to
    // `deliver`. True when anything happened.
    // An Ethernet port's other frames -- no RoCE packet; ARP and neighbour discovery after
    // the port's own answer -- that the vport's filter takes go to `deliver_frame` as they
    // are (the NIC's receive flow tables; none: dropped), with the checksums its sender in
    // this process computed and vouched for (frame_crcs).
    using frame_sink = std::function<void(std::span<const std::byte>, wire::ip_checksums)>;
    bool poll(clock_type::time_point now, const std::function<void(wire::packet&, std::size_t bytes)>& deliver,
              const frame_sink& deliver_frame = {});
    // A descriptor readable when a frame arrives (a socket of a directory fabric), or -1.
    int wake_fd() const { return seg_->wake_fd(); }
    // The model thread is about to sleep on wake_fd() (segment_port::arm_wake): false
    // when a frame already waits.
    bool arm_wake() { return seg_->arm_wake(); }
    // The faults on what this port sends, changed while it runs (tests).
    void set_faults(const device_config::link_faults& f);
    // A directory segment's cable: false while the file DIR/down-<station> exists (so a
    // test or a person can pull it from outside the process). Always true otherwise.
    bool cable_in(clock_type::time_point now);

    const port_counters& counters() const noexcept { return counters_; }

private:
    port(const device_config& cfg, const object_tables& tables, std::unique_ptr<segment_port> seg);

    struct held {
        clock_type::time_point due;
        std::vector<std::byte> frame;
    };
    struct waiting {  // packets for one unresolved address
        std::deque<wire::packet> packets;
        clock_type::time_point next_try;
        unsigned tries = 0;
    };
    using gid = std::array<std::uint8_t, 16>;

    sent send_packet(wire::packet& p, clock_type::time_point now);
    // `owned`: the frame's buffer, which the segment may keep (null: it copies the frame).
    void emit(std::span<const std::byte> frame, clock_type::time_point now, frame_crcs crcs,
              std::vector<std::byte>* owned = nullptr);
    bool put_on_segment(std::span<const std::byte> frame, frame_crcs crcs, std::vector<std::byte>* owned = nullptr);
    void solicit(const gid& target, clock_type::time_point now);
    void handle_frame(std::span<const std::byte> f, frame_crcs crcs, clock_type::time_point now,
                      const std::function<void(wire::packet&, std::size_t)>& deliver,
                      const frame_sink& deliver_frame);
    bool handle_neighbour(std::span<const std::byte> f, clock_type::time_point now);
    bool vport_takes(std::span<const std::byte> f) const;
    void learn(const gid& ip, const std::array<std::uint8_t, 6>& mac, clock_type::time_point now);
    bool own_address(const gid& ip) const;
    gid source_ipv4() const;
    void retry_neighbours(clock_type::time_point now);

    const device_config& cfg_;
    const object_tables& tables_;
    std::unique_ptr<segment_port> seg_;
    bool in_process_;  // seg_->in_process(), asked once
    std::shared_ptr<wire::pcap_writer> pcap_;
    device_config::link_faults faults_;
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> coin_{0.0, 1.0};
    std::deque<held> delayed_;           // frames waiting for their delay
    std::vector<std::byte> reordered_;   // a frame held back until the next one is sent
    bool has_reordered_ = false;
    std::map<gid, std::array<std::uint8_t, 6>> neighbours_;
    std::map<gid, waiting> unresolved_;
    std::vector<std::byte> out_, in_;    // frame buffers, reused
    std::string down_file_;              // directory segments: the cable-pull file
    clock_type::time_point next_cable_check_{};
    bool cable_ = true;
    std::unique_ptr<subnet_admin> sa_;   // the port with the SM's LID: the SA
    port_counters counters_;
};

}  // namespace cxv::sim::link
