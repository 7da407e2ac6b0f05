// Counters: ALLOC_Q_COUNTER, DEALLOC_Q_COUNTER, QUERY_Q_COUNTER, QUERY_VPORT_COUNTER
// (fw_counters.cc), and which Q counter set each QP counts to. The counting itself is
// the device's (sim/q_counting.h).
#pragma once

#include <cstdint>

#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/objects/tables.h"
#include "sim/transport/port_stats.h"

namespace cxv::sim {

class counter_commands {
public:
    counter_commands(const device_config& cfg, const hca_caps& caps, object_tables& tables, const device_port& port)
        : cfg_(cfg), caps_(caps), q_counters_(tables.q_counters), port_(port) {}

    cmd_reply alloc_q_counter(cmd_ctx& c);
    cmd_reply dealloc_q_counter(cmd_ctx& c);
    cmd_reply query_q_counter(cmd_ctx& c);
    cmd_reply query_vport_counter(cmd_ctx& c);

    // A QP's counter_set_id moves from `from` to `to` (RST2INIT, RTS2RTS, 2RST, destroy).
    void rebind_q_counter(std::uint32_t from, std::uint32_t to);
    // Teardown, DISABLE_HCA and reset: only the default set 0 is left.
    void release_all();
    // Power-on: besides, the vport counters count from 0 again.
    void reset();

private:
    const device_config& cfg_;
    const hca_caps& caps_;
    std::map<std::uint32_t, q_counter_object>& q_counters_;  // set 0 always present
    const device_port& port_;
    port_stats vport_cleared_{};  // the port's counters when QUERY_VPORT_COUNTER last cleared
};

}  // namespace cxv::sim
