// The transport engine's events on the Q counter sets (PRM "Q Counters"; the sets are the
// object tables', allocated by ALLOC_Q_COUNTER): each counts on the set the QP names in
// its qpc.counter_set_id, or on the default set 0 when that set is gone. The device's
// transport_hooks count here; the firmware only allocates, binds and queries the sets.
#pragma once

#include <cstdint>
#include <map>

#include "hw/cqe.h"
#include "sim/objects/objects.h"

namespace cxv::sim {

class q_counting {
public:
    explicit q_counting(std::map<std::uint32_t, q_counter_object>& sets) : sets_(sets) {}

    // One event on the QP's set.
    void count(const qp_object& qp, std::uint32_t q_counter_values::*what);
    // An error the requester completes a WQE with: the error CQE and its cause.
    void req_error(const qp_object& qp, hw::cqe_syndrome why);
    // An error the responder detects (`cqe`: and writes a receive CQE for).
    void resp_error(const qp_object& qp, hw::cqe_syndrome why, bool cqe);

private:
    std::map<std::uint32_t, q_counter_object>& sets_;
};

}  // namespace cxv::sim
