// What the transport engine needs from the rest of the function, and nothing more: the
// wire (the function's port, sim/device_port.h), events on EQs (sim/eqs.h), and the Q
// counters of a QP's counter set (sim/q_counting.h). The device (sim/device.h)
// implements it by handing each to its owner; a test can implement it to watch the
// engine alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hw/cqe.h"
#include "hw/opcodes.h"
#include "sim/objects/objects.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

class transport_hooks {
public:
    // A packet leaves the engine (a request, or the answer to one) for the port, which
    // adds the link's framing.
    virtual void transmit(wire::packet&& p) = 0;
    // An Ethernet frame an SQ built, as it goes on the wire (the port pads it), with the
    // checksums the device computed in it. The port may keep the frame's buffer and leave
    // another in its place, of any size and contents.
    virtual void transmit_frame(std::vector<std::byte>& frame, wire::ip_checksums computed) = 0;
    // An event (PRM "Events": affiliated QP and SRQ events, CQ errors) with its data, to
    // every EQ that subscribed to its type.
    virtual void async_event(hw::event_type type, std::span<const std::byte> data) = 0;
    // A completion event (comp_event data) on EQ `eqn`, the one the CQ reports to.
    virtual void completion_event(std::uint32_t eqn, std::span<const std::byte> data) = 0;
    // One event on the Q counter set the QP counts to (qpc.counter_set_id); an error
    // the requester completes a WQE with, or the responder detects (`cqe`: and writes a
    // receive CQE for).
    virtual void count(const qp_object& qp, std::uint32_t q_counter_values::*what) = 0;
    virtual void count_req_error(const qp_object& qp, hw::cqe_syndrome why) = 0;
    virtual void count_resp_error(const qp_object& qp, hw::cqe_syndrome why, bool cqe) = 0;
    // The device's internal timer (PRM "Initialization Segment"): a CQE's timestamp; for a
    // frame received, when the device took it off the wire.
    virtual std::uint64_t timestamp() = 0;
    // A UMR rewrote memory key `mk` (its context and translation entries): the firmware's
    // copy in its memory follows (QUERY_MKEY reads that). A rig without firmware keeps none.
    virtual void mkey_changed(const mkey_object& mk) { (void)mk; }

protected:
    ~transport_hooks() = default;
};

}  // namespace cxv::sim
