// Counters: a Q counter set (PRM ALLOC_Q_COUNTER, QUERY_Q_COUNTER, DEALLOC_Q_COUNTER),
// which the QPs that name it in their context count their transport events to, and the
// vport's traffic counters (PRM QUERY_VPORT_COUNTER).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "driver/res/object.h"
#include "hw/ifc.h"

namespace cxv::driver {

// One read of a Q counter set (hw/ifc_counters.h).
using hw::q_counter_values;

class q_counter : public hca_object {
public:
    // ALLOC_Q_COUNTER. ENOSPC-like errors (the firmware's EXCEED_LIM) when the device's
    // max_qp_cnt sets are taken.
    static result<std::shared_ptr<q_counter>> create(hca& h);
    ~q_counter();
    // DEALLOC_Q_COUNTER now; the firmware refuses while a QP counts to the set.
    status destroy();
    std::uint32_t id() const noexcept { return id_; }
    // QUERY_Q_COUNTER; with clear the set restarts from 0 after this read.
    result<q_counter_values> query(bool clear = false);

private:
    explicit q_counter(hca& h) : hca_object(h) {}
    std::uint32_t id_ = 0;
};

// QUERY_VPORT_COUNTER of the function's own vport (hw/ifc_counters.h).
using hw::traffic;
using hw::vport_counters;
result<vport_counters> query_vport_counters(hca& h, bool clear = false);
// The counters a port of this type counts, one name each ("rx_unicast_packets", ...,
// "tx_errors_packets"), in the order tools print them: what `cxv info` shows of a
// function it brought up and what cxvd reports of one it holds (COUNTERS).
std::vector<std::pair<std::string, std::uint64_t>> named_counters(const vport_counters& v, bool ethernet);

}  // namespace cxv::driver
