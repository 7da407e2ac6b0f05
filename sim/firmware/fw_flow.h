// NIC receive flow steering (PRM "Flow Table"): CREATE/MODIFY/DESTROY_FLOW_TABLE,
// CREATE/DESTROY_FLOW_GROUP, SET/DELETE_FLOW_TABLE_ENTRY, SET_FLOW_TABLE_ROOT and
// ALLOC/DEALLOC/QUERY_FLOW_COUNTER (fw_flow.cc).
#pragma once

#include <cstdint>

#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"

namespace cxv::sim {

class flow_commands {
public:
    flow_commands(const hca_caps& caps, firmware_pages& icm, object_tables& tables)
        : caps_(caps), icm_(icm), tables_(tables) {}

    cmd_reply create_flow_table(cmd_ctx& c);
    cmd_reply modify_flow_table(cmd_ctx& c);
    cmd_reply destroy_flow_table(cmd_ctx& c);
    cmd_reply create_flow_group(cmd_ctx& c);
    cmd_reply destroy_flow_group(cmd_ctx& c);
    cmd_reply set_flow_table_entry(cmd_ctx& c);
    cmd_reply delete_flow_table_entry(cmd_ctx& c);
    cmd_reply set_flow_table_root(cmd_ctx& c);
    cmd_reply alloc_flow_counter(cmd_ctx& c);
    cmd_reply dealloc_flow_counter(cmd_ctx& c);
    cmd_reply query_flow_counter(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: every table, group, entry and counter goes (before
    // the TIRs they name: eth_commands::release_all).
    void release_all();

private:
    bool miss_of(const std::byte* ctx, unsigned level, std::uint32_t& to) const;
    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    eth_tables& eth_ = tables_.eth;
    std::uint32_t next_table_ = 1, next_counter_ = 1;
};

}  // namespace cxv::sim
