// The function's port as its firmware runs it: administrative and operational state
// (PRM PAOS), link training and the cable, the subnet manager's configuration of an
// InfiniBand port, the PORT_CHANGE event of each transition (PRM "Port State Change
// Event"), the packets between the transport engine and the wire (sim/link/port.h),
// and what the port counts of them (PPCNT, QUERY_VPORT_COUNTER).
//
// Owned by the device. The engine's packets leave through transmit() (the device's
// transport_hooks); packets from the wire enter through deliver(), which hands them to
// the engine. The command handlers (PAOS, vport queries, INIT_HCA, teardown) call it.
#pragma once

#include <chrono>
#include <cstdint>

#include "sim/device_config.h"
#include "sim/eqs.h"
#include "sim/link/port.h"
#include "sim/trace.h"
#include "sim/transport/engine.h"
#include "sim/transport/port_stats.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

// The port's link; the logical states are IBTA PortInfo:PortState's.
enum class port_phase : std::uint8_t {
    down,      // no link: before INIT_HCA, after teardown, admin down or no cable
    training,  // admin up with a cable: the link trains (oper_status still down)
    init,      // InfiniBand: physical LinkUp, logical Init until the SM configures it
    active,    // logical Active: Ethernet once trained, InfiniBand after the SM's sweep
};

class device_port {
public:
    device_port(const device_config& cfg, trace& tr, event_queues& eqs, transport_engine& engine)
        : cfg_(cfg), trace_(tr), eqs_(eqs), engine_(engine) {}
    device_port(const device_port&) = delete;
    device_port& operator=(const device_port&) = delete;

    // The port on the wire (owned by the device; nullptr: none).
    void attach(link::port* p) noexcept { link_ = p; }

    // --- packets ---
    // A packet the engine sends: counted, and put on the wire when the port is ACTIVE.
    void transmit(wire::packet&& p);
    // An Ethernet frame an SQ built: counted, then to the wire (nothing unless ACTIVE).
    void transmit_frame(std::vector<std::byte>& frame, wire::ip_checksums computed);
    // A raw frame from the wire that the pipeline took (`kept`) or dropped: counted.
    void count_frame_rx(std::span<const std::byte> frame, bool kept) noexcept;
    // A packet from the wire: counted, then the engine's (nothing unless ACTIVE).
    void deliver(wire::packet&& p);
    // Frames that arrived damaged (a bad ICRC, VCRC or checksum): the link dropped them.
    void count_rx_errors(std::uint64_t n) noexcept { stats_.rx_errors += n; }
    // Frames the port sent and received.
    const port_stats& counters() const noexcept { return stats_; }
    // The time of the model thread's round in progress, which the packets it sends use
    // (a clock read per packet showed in the profile); time_point{} outside a round,
    // where each packet reads the clock.
    void set_round_time(std::chrono::steady_clock::time_point now) noexcept { round_time_ = now; }

    // --- state ---
    // INIT_HCA: the link starts training, unless disable_link_up is set (then the port
    // stays administratively down until PAOS brings it up).
    void on_init_hca(bool link_up_disabled);
    // TEARDOWN_HCA, DISABLE_HCA, reset: the port goes down (the EQs are gone: no event).
    void stop();
    // Power-on: stopped, admin up, counters cleared; the cable stays as it is.
    void reset();
    // A PAOS write with ase = 1: admin_status up or down. The operational state follows
    // as the port's link does: down at once, up after the link has trained.
    void set_admin(bool up);
    // The cable, as if plugged in or pulled (device::set_link).
    void set_cable(bool in);
    // Link training and the subnet manager's sweep: the step due by `now`. True when the
    // port changed state. Thread: the model thread.
    bool tick(std::chrono::steady_clock::time_point now);

    // PAOS admin_status and oper_status as the register reports them: 1 up, 2 down.
    unsigned admin_status() const noexcept { return admin_up_ ? 1 : 2; }
    unsigned oper_status() const noexcept { return up_ ? 1 : 2; }
    // The physical link is up (PAOS oper_status up; on InfiniBand also in logical Init).
    bool up() const noexcept { return up_; }
    bool active() const noexcept { return phase_ == port_phase::active; }
    // IBTA PortInfo:PortState (1 Down, 2 Init, 4 Active) and PortPhysicalState (2
    // Polling, 3 Disabled, 5 LinkUp), also the PRM's hca_vport_context encodings.
    unsigned logical_state() const noexcept;
    unsigned physical_state() const noexcept;
    // The subnet manager has configured the port (LID, SM LID): InfiniBand, once ACTIVE.
    bool configured() const noexcept { return configured_; }

private:
    void enter(port_phase next, std::chrono::steady_clock::time_point now);
    // The bytes on the wire of a packet this port sends or receives.
    wire_frames frames_of(const wire::packet& p) const;

    const device_config& cfg_;
    trace& trace_;
    event_queues& eqs_;
    transport_engine& engine_;
    link::port* link_ = nullptr;

    // up_ mirrors the phase: init or active.
    port_phase phase_ = port_phase::down;
    bool up_ = false;
    bool admin_up_ = true;
    bool cable_ = true;           // the cable is physical: a reset leaves it as it is
    bool configured_ = false;     // the SM assigned the LID (kept across link loss)
    bool hca_initialized_ = false;  // between INIT_HCA and teardown: the link may train
    std::chrono::steady_clock::time_point step_at_{};     // when training or the sweep ends
    std::chrono::steady_clock::time_point round_time_{};  // set_round_time
    port_stats stats_{};
};

}  // namespace cxv::sim
