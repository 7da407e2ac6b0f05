// Protection domains, memory keys and user memory: ALLOC_PD, DEALLOC_PD, CREATE_MKEY,
// DESTROY_MKEY, QUERY_MKEY, CREATE_UMEM, DESTROY_UMEM (fw_mkey.cc).
#pragma once

#include <cstdint>

#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"

namespace cxv::sim {

class mkey_commands {
public:
    mkey_commands(const hca_caps& caps, firmware_pages& icm, object_tables& tables)
        : caps_(caps), icm_(icm), tables_(tables) {}

    cmd_reply alloc_pd(cmd_ctx& c);
    cmd_reply dealloc_pd(cmd_ctx& c);
    cmd_reply create_mkey(cmd_ctx& c);
    cmd_reply destroy_mkey(cmd_ctx& c);
    cmd_reply query_mkey(cmd_ctx& c);
    cmd_reply create_umem(cmd_ctx& c);
    cmd_reply destroy_umem(cmd_ctx& c);

    // A key a UMR rewrote (the transport engine checks and applies UMRs): its context and
    // translation list written again to firmware memory, where QUERY_MKEY reads them.
    void write_back(const mkey_object& mk);

    // Teardown, DISABLE_HCA and reset: every key, UMEM and PD goes, with its firmware
    // memory.
    void release_all();

private:
    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    std::map<std::uint32_t, pd_object>& pds_ = tables_.pds;
    std::map<std::uint32_t, mkey_object>& mkeys_ = tables_.mkeys;  // by mkey_index
    std::map<std::uint32_t, umem_object>& umems_ = tables_.umems;
    std::uint32_t next_pd_ = 1;
    std::uint32_t next_mkey_ = 1;  // from 0x10 on: the ones below are reserved (fw_mkey.cc)
    std::uint32_t next_umem_ = 1;
};

}  // namespace cxv::sim
