// Shared receive queues and XRC: CREATE_SRQ, DESTROY_SRQ, QUERY_SRQ, ARM_RQ (fw_srq.cc);
// ALLOC_XRCD, DEALLOC_XRCD, CREATE_XRC_SRQ, DESTROY_XRC_SRQ, CREATE_RMP, DESTROY_RMP,
// MODIFY_RMP, QUERY_RMP (fw_xrc.cc). All three SRQ kinds are one object kind (srq_object)
// for the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"

namespace cxv::sim {

class srq_commands {
public:
    srq_commands(const hca_caps& caps, firmware_pages& icm, object_tables& tables)
        : caps_(caps), icm_(icm), tables_(tables) {}

    cmd_reply create_srq(cmd_ctx& c);
    cmd_reply destroy_srq(cmd_ctx& c);
    cmd_reply query_srq(cmd_ctx& c);
    cmd_reply arm_rq(cmd_ctx& c);
    cmd_reply alloc_xrcd(cmd_ctx& c);
    cmd_reply dealloc_xrcd(cmd_ctx& c);
    cmd_reply create_xrc_srq(cmd_ctx& c);
    cmd_reply destroy_xrc_srq(cmd_ctx& c);
    cmd_reply create_rmp(cmd_ctx& c);
    cmd_reply destroy_rmp(cmd_ctx& c);
    cmd_reply modify_rmp(cmd_ctx& c);
    cmd_reply query_rmp(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: every SRQ and XRC domain goes, with its firmware
    // memory.
    void release_all();

private:
    // CREATE_SRQ's work for all three kinds: `srqc` in CREATE_SRQ's layout, the page list
    // `pas_at` bytes into the input; the number in `*srqn`.
    cmd_reply make_srq(cmd_ctx& c, const std::byte* srqc, std::size_t pas_at, std::uint32_t uid, srq_kind kind,
                       std::uint32_t* srqn);
    cmd_reply remove_srq(std::uint32_t srqn, std::uint32_t uid, srq_kind kind);

    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    std::map<std::uint32_t, srq_object>& srqs_ = tables_.srqs;
    std::map<std::uint32_t, xrcd_object>& xrcds_ = tables_.xrcds;
    std::map<std::uint32_t, pd_object>& pds_ = tables_.pds;
    std::map<std::uint32_t, cq_object>& cqs_ = tables_.cqs;
    std::uint32_t next_srqn_ = 1;
    std::uint32_t next_xrcd_ = 1;
};

}  // namespace cxv::sim
