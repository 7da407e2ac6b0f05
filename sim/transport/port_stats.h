// What the port's MAC and PHY have seen: the frames the transport engine put on the
// wire and the frames the fabric delivered, counted as a card's port counts them (one
// frame per transport packet; bytes include the link, network and base transport headers). Read by the
// port counter registers (PPCNT) and QUERY_VPORT_COUNTER; cleared at power-on.
#pragma once

#include <cstdint>

namespace cxv::sim {

// What the wire carries of one transport packet: its frames and their bytes, headers included.
struct wire_frames {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    bool multicast = false;
};

struct port_stats {
    std::uint64_t tx_packets = 0;
    std::uint64_t tx_bytes = 0;
    std::uint64_t tx_unicast = 0;
    std::uint64_t tx_multicast = 0;
    std::uint64_t tx_discards = 0;  // could not be sent (port down, no route)
    std::uint64_t rx_packets = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t rx_unicast = 0;
    std::uint64_t rx_multicast = 0;
    std::uint64_t rx_discards = 0;  // arrived, then dropped (no QP, wrong state, Q_Key)
    std::uint64_t rx_errors = 0;    // arrived damaged (bad ICRC/VCRC)
    std::uint64_t link_down_events = 0;  // the link went down from up (PAOS, cable)

    // A message the port put on the wire (sent) or could not (discarded).
    void count_tx(const wire_frames& f, bool sent) noexcept {
        if (!sent) {
            tx_discards += f.packets;
            return;
        }
        tx_packets += f.packets;
        tx_bytes += f.bytes;
        (f.multicast ? tx_multicast : tx_unicast) += f.packets;
    }
    // A message that arrived intact; `kept` false when it was dropped after arriving.
    void count_rx(const wire_frames& f, bool kept) noexcept {
        rx_packets += f.packets;
        rx_bytes += f.bytes;
        (f.multicast ? rx_multicast : rx_unicast) += f.packets;
        if (!kept) rx_discards += f.packets;
    }
};

}  // namespace cxv::sim
