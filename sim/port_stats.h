// What the port's MAC and PHY have seen: the frames the transport engine put on the
// wire and the frames the fabric delivered, counted as a card's port counts them (a
// message of n PSNs is n packets on the wire; bytes include the headers). Read by the
// port counter registers (PPCNT) and QUERY_VPORT_COUNTER; cleared at power-on.
#pragma once

#include <cstdint>

namespace cxv::sim {

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
};

}  // namespace cxv::sim
