// Completion queues: CREATE_CQ, DESTROY_CQ, QUERY_CQ, MODIFY_CQ (fw_cq.cc). What the
// device does with a CQ afterwards is the transport engine's (sim/transport/cq_engine.h).
#pragma once

#include <cstdint>

#include "sim/eqs.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"

namespace cxv::sim {

class cq_commands {
public:
    cq_commands(const hca_caps& caps, firmware_pages& icm, object_tables& tables, event_queues& events, iommu& mmu,
                trace& tr)
        : caps_(caps), icm_(icm), tables_(tables), events_(events), mmu_(mmu), trace_(tr) {}

    cmd_reply create_cq(cmd_ctx& c);
    cmd_reply destroy_cq(cmd_ctx& c);
    cmd_reply query_cq(cmd_ctx& c);
    cmd_reply modify_cq(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: every CQ goes, with its firmware memory.
    void release_all();

private:
    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    event_queues& events_;  // a resize's completion event
    iommu& mmu_;            // the RESIZE_CQ CQE, the consumer index
    trace& trace_;
    std::map<std::uint32_t, cq_object>& cqs_ = tables_.cqs;
    std::map<std::uint32_t, uar_object>& uars_ = tables_.uars;
    std::map<std::uint32_t, umem_object>& umems_ = tables_.umems;
    std::map<std::uint32_t, event_queue>& eqs_ = events_.by_eqn();
    std::uint32_t next_cqn_ = 1;
};

}  // namespace cxv::sim
