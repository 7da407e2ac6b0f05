// Queue pairs: CREATE_QP, DESTROY_QP, QUERY_QP and the state transition commands
// (fw_qp.cc). A QP created, moved or destroyed is told to the transport engine through
// its named hooks (sim/transport/engine.h).
#pragma once

#include <cstdint>

#include "sim/device_config.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_counters.h"
#include "sim/firmware/fw_pages.h"
#include "sim/firmware/fw_reg.h"
#include "sim/objects/tables.h"
#include "sim/transport/engine.h"

namespace cxv::sim {

class qp_commands {
public:
    qp_commands(const device_config& cfg, const hca_caps& caps, const access_registers& regs, firmware_pages& icm,
                object_tables& tables, transport_engine& engine, counter_commands& counters)
        : cfg_(cfg), caps_(caps), regs_(regs), icm_(icm), tables_(tables), engine_(engine), counters_(counters) {}

    cmd_reply create_qp(cmd_ctx& c);
    cmd_reply destroy_qp(cmd_ctx& c);
    cmd_reply query_qp(cmd_ctx& c);
    cmd_reply modify_qp(cmd_ctx& c);  // every transition command; c.opcode says which
    cmd_reply multicast_group(cmd_ctx& c);  // ATTACH_TO_MCG, DETACH_FROM_MCG; c.opcode says which

    // Teardown, DISABLE_HCA and reset: every QP goes, with its firmware memory and the
    // engine's state.
    void release_all();

private:
    void detach_everywhere(std::uint32_t qpn);

    const device_config& cfg_;
    const hca_caps& caps_;
    const access_registers& regs_;  // the port's MTU (PMTU)
    firmware_pages& icm_;
    object_tables& tables_;
    transport_engine& engine_;
    counter_commands& counters_;
    std::map<std::uint32_t, qp_object>& qps_ = tables_.qps;
    std::map<std::uint32_t, pd_object>& pds_ = tables_.pds;
    std::map<std::uint32_t, uar_object>& uars_ = tables_.uars;
    std::map<std::uint32_t, cq_object>& cqs_ = tables_.cqs;
    std::map<std::uint32_t, srq_object>& srqs_ = tables_.srqs;
    std::map<std::uint32_t, umem_object>& umems_ = tables_.umems;
    const std::map<std::uint32_t, q_counter_object>& q_counters_ = tables_.q_counters;
    std::uint32_t next_qpn_ = 0x100;  // below: reserved for special QPs (QP0/QP1; fw_qp.cc)
};

}  // namespace cxv::sim
