// A card's link is not up when INIT_HCA returns: it trains first. Ethernet goes
// DOWN -> ACTIVE when trained. InfiniBand goes DOWN -> INITIALIZED (physical LinkUp,
// logical Init) when trained, then ACTIVE once the subnet manager has swept the port and
// assigned its LID; the model plays the SM. Only traffic of an ACTIVE port reaches the
// wire (IBA 7.2: a port in Init passes subnet management packets only). PORT_CHANGE
// subtypes as Linux's MLX5_PORT_CHANGE_SUBTYPE_*.
#include "sim/device_port.h"

#include <algorithm>
#include <array>
#include <optional>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/wire/frame.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using clock_type = std::chrono::steady_clock;

namespace {

// IBTA PortInfo:PortPhysicalState (PortState is hw::ib_port_state).
enum : unsigned { phys_polling = 2, phys_disabled = 3, phys_link_up = 5 };

// Headers every wire packet carries, besides its extended headers, payload and pad
// (frames_of adds those): RoCE v2: Ethernet 14, IPv4 20 (IPv6 40), UDP 8, BTH 12,
// ICRC 4, FCS 4. InfiniBand: LRH 8, BTH 12, ICRC 4, VCRC 2, and a GRH of 40 when present.
constexpr std::uint64_t roce_v2_packet_overhead = 14 + 20 + 8 + 12 + 4 + 4;
constexpr std::uint64_t ib_packet_overhead = 8 + 12 + 4 + 2;
constexpr std::uint64_t ib_grh_bytes = 40;

// Bytes of the extended headers each opcode carries, looked up once per packet.
constexpr std::array<std::uint8_t, 256> extended_bytes_table = [] {
    std::array<std::uint8_t, 256> t{};
    for (unsigned op = 0; op < 256; ++op) {
        t[op] = static_cast<std::uint8_t>(wire::extended_header_bytes(wire::headers_of(static_cast<std::uint8_t>(op))));
    }
    return t;
}();

}  // namespace

// --- packets -------------------------------------------------------------------------

wire_frames device_port::frames_of(const wire::packet& p) const {
    wire_frames f;
    f.packets = 1;
    const std::size_t payload = p.payload.size();
    // What the frame holds: the link and network headers, BTH, ICRC (and FCS or VCRC),
    // the extended headers of its opcode, the payload and its pad.
    f.bytes = extended_bytes_table[p.bth.opcode] + payload + wire::pad_of(payload);
    if (cfg_.port == port_type::ETHERNET) {
        f.bytes += roce_v2_packet_overhead + (p.net.link == wire::link_kind::roce_v6 ? 20 : 0);
        // IPv4 224.0.0.0/4 or IPv6 ff00::/8.
        f.multicast = wire::is_ipv4_mapped(p.net.dgid) ? (p.net.dgid[12] >> 4) == 0xe : p.net.dgid[0] == 0xff;
    } else {
        f.bytes += ib_packet_overhead + (p.net.grh ? ib_grh_bytes : 0);
        f.multicast = p.net.dlid >= 0xc000 && p.net.dlid < 0xffff;  // multicast LIDs 0xc000-0xfffe
    }
    return f;
}

void device_port::transmit(wire::packet&& p) {
    trace_.count(&counters::packets_sent);
    const wire_frames frames = frames_of(p);  // before p is moved away
    // A port that is not ACTIVE puts nothing on the wire: RC requests then time out and
    // are retried, UD and UC messages are lost.
    const auto now = round_time_ != clock_type::time_point{} ? round_time_ : clock_type::now();
    const bool sent = active() && link_ != nullptr && link_->transmit(std::move(p), now) != link::port::sent::discarded;
    stats_.count_tx(frames, sent);
    if (!sent) trace_.count(&counters::packets_dropped);
}

namespace {

// A raw frame as the port counters count it: padded to Ethernet's minimum, with its FCS.
wire_frames raw_frame(std::span<const std::byte> f) noexcept {
    return {1, std::max<std::uint64_t>(f.size(), wire::ethernet_min_frame_bytes) + 4,
            !f.empty() && (std::to_integer<unsigned>(f[0]) & 1) != 0};
}

}  // namespace

void device_port::transmit_frame(std::vector<std::byte>& frame, wire::ip_checksums computed) {
    const auto now = round_time_ != clock_type::time_point{} ? round_time_ : clock_type::now();
    const wire_frames counted = raw_frame(frame);  // before the port takes the buffer
    const bool sent = active() && link_ != nullptr && link_->transmit_frame(frame, now, computed);
    stats_.count_tx(counted, sent);
    trace_.count(sent ? &counters::frames_sent : &counters::frames_dropped);
}

void device_port::count_frame_rx(std::span<const std::byte> frame, bool kept) noexcept {
    stats_.count_rx(raw_frame(frame), kept);
}

void device_port::deliver(wire::packet&& p) {
    if (!active()) {  // a port that is not ACTIVE receives nothing
        trace_.count(&counters::packets_dropped);
        return;
    }
    // Counted by the QP the engine finds (one lookup per packet), for the frame as it
    // arrived (before the engine takes its payload).
    const wire_frames f = frames_of(p);
    stats_.count_rx(f, engine_.receive(p));
}

// --- state ---------------------------------------------------------------------------

void device_port::enter(port_phase next, clock_type::time_point now) {
    const port_phase prev = phase_;
    if (next == prev) return;
    phase_ = next;
    up_ = next == port_phase::init || next == port_phase::active;
    if (next == port_phase::training) step_at_ = now + cfg_.link_up_time;
    if (next == port_phase::init) step_at_ = now + cfg_.sm_sweep_time;
    if (next == port_phase::active && cfg_.port == port_type::IB) configured_ = true;

    // One event per change of the state a driver sees: training is still down.
    std::optional<hw::port_change_subtype> sub;
    switch (next) {
    case port_phase::down:
    case port_phase::training:
        if (prev == port_phase::init || prev == port_phase::active) {
            sub = hw::port_change_subtype::DOWN;
            ++stats_.link_down_events;  // PPCNT physical layer group
        }
        break;
    case port_phase::init: sub = hw::port_change_subtype::INITIALIZED; break;
    case port_phase::active: sub = hw::port_change_subtype::ACTIVE; break;
    }
    if (!sub) return;
    std::array<std::byte, ifc::port_state_change_event::size_bytes> d{};
    ifc::set<ifc::port_state_change_event::port_num>(d.data(), 1);
    eqs_.post_event(hw::event_type::PORT_CHANGE, static_cast<std::uint8_t>(*sub), d);
}

// The link trains when the function is initialized, PAOS says up and a cable is in.
void device_port::set_admin(bool up) {
    admin_up_ = up;
    const auto now = clock_type::now();
    if (!up) {
        enter(port_phase::down, now);
    } else if (phase_ == port_phase::down && cable_ && hca_initialized_) {
        enter(port_phase::training, now);
    }
}

void device_port::set_cable(bool in) {
    cable_ = in;
    const auto now = clock_type::now();
    if (!in) {
        enter(port_phase::down, now);
    } else if (phase_ == port_phase::down && admin_up_ && hca_initialized_) {
        enter(port_phase::training, now);
    }
}

void device_port::on_init_hca(bool link_up_disabled) {
    hca_initialized_ = true;
    // disable_link_up: rdma-core's disable_link_up_by_init_hca, which its VFIO provider
    // sets for MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN ("link should stay down").
    if (link_up_disabled) {
        admin_up_ = false;
        return;
    }
    admin_up_ = true;
    if (cable_) enter(port_phase::training, clock_type::now());
}

void device_port::stop() {
    phase_ = port_phase::down;
    up_ = false;
    configured_ = false;
    hca_initialized_ = false;
}

void device_port::reset() {
    stop();
    admin_up_ = true;
    stats_ = {};
}

bool device_port::tick(clock_type::time_point now) {
    if (now < step_at_) return false;
    switch (phase_) {
    case port_phase::training:
        enter(cfg_.port == port_type::IB ? port_phase::init : port_phase::active, now);
        return true;
    case port_phase::init:
        enter(port_phase::active, now);  // the SM's sweep: LID assigned, port ACTIVE
        return true;
    default:
        return false;
    }
}

unsigned device_port::logical_state() const noexcept {
    switch (phase_) {
    case port_phase::init: return static_cast<unsigned>(hw::ib_port_state::INIT);
    case port_phase::active: return static_cast<unsigned>(hw::ib_port_state::ACTIVE);
    default: return static_cast<unsigned>(hw::ib_port_state::DOWN);
    }
}

unsigned device_port::physical_state() const noexcept {
    if (up_) return phys_link_up;
    return admin_up_ ? phys_polling : phys_disabled;
}

}  // namespace cxv::sim
