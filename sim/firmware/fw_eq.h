// UAR pages and event queues: ALLOC_UAR, DEALLOC_UAR, CREATE_EQ, DESTROY_EQ, QUERY_EQ
// (fw_eq.cc). The EQs themselves are the device's (sim/eqs.h).
#pragma once

#include <cstdint>

#include "sim/device_config.h"
#include "sim/eqs.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"
#include "sim/pci/bar.h"
#include "sim/pci/msix.h"

namespace cxv::sim {

class eq_commands {
public:
    eq_commands(const device_config& cfg, const bar0& bar, const msix_table& msix, const hca_caps& caps,
                firmware_pages& icm, object_tables& tables, event_queues& events)
        : cfg_(cfg), bar_(bar), msix_(msix), caps_(caps), icm_(icm), tables_(tables), events_(events) {}

    cmd_reply alloc_uar(cmd_ctx& c);
    cmd_reply dealloc_uar(cmd_ctx& c);
    cmd_reply create_eq(cmd_ctx& c);
    cmd_reply destroy_eq(cmd_ctx& c);
    cmd_reply query_eq(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: every EQ and UAR goes, its firmware memory too.
    void release_all();

private:
    const device_config& cfg_;
    const bar0& bar_;
    const msix_table& msix_;
    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    event_queues& events_;
    std::map<std::uint32_t, uar_object>& uars_ = tables_.uars;
    std::map<std::uint32_t, event_queue>& eqs_ = events_.by_eqn();
    const std::map<std::uint32_t, cq_object>& cqs_ = tables_.cqs;
    std::uint32_t next_uar_ = cfg_.first_uar;
};

}  // namespace cxv::sim
