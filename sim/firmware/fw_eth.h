// The Ethernet transport objects (PRM "Transport Interface"): ALLOC/DEALLOC_TRANSPORT_
// DOMAIN, CREATE/DESTROY/QUERY_TIS, CREATE/MODIFY/DESTROY/QUERY_SQ and _RQ,
// CREATE/MODIFY/DESTROY_RQT, CREATE/MODIFY/DESTROY/QUERY_TIR (fw_eth.cc).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_pages.h"
#include "sim/objects/tables.h"

namespace cxv::sim {

class eth_commands {
public:
    eth_commands(const hca_caps& caps, firmware_pages& icm, object_tables& tables)
        : caps_(caps), icm_(icm), tables_(tables) {}

    cmd_reply alloc_transport_domain(cmd_ctx& c);
    cmd_reply dealloc_transport_domain(cmd_ctx& c);
    cmd_reply create_tis(cmd_ctx& c);
    cmd_reply destroy_tis(cmd_ctx& c);
    cmd_reply query_tis(cmd_ctx& c);
    cmd_reply create_sq(cmd_ctx& c);
    cmd_reply modify_sq(cmd_ctx& c);
    cmd_reply destroy_sq(cmd_ctx& c);
    cmd_reply query_sq(cmd_ctx& c);
    cmd_reply create_rq(cmd_ctx& c);
    cmd_reply modify_rq(cmd_ctx& c);
    cmd_reply destroy_rq(cmd_ctx& c);
    cmd_reply query_rq(cmd_ctx& c);
    cmd_reply create_rqt(cmd_ctx& c);
    cmd_reply modify_rqt(cmd_ctx& c);
    cmd_reply destroy_rqt(cmd_ctx& c);
    cmd_reply create_tir(cmd_ctx& c);
    cmd_reply modify_tir(cmd_ctx& c);
    cmd_reply destroy_tir(cmd_ctx& c);
    cmd_reply query_tir(cmd_ctx& c);

    // Teardown, DISABLE_HCA and reset: every Ethernet object goes, with its firmware
    // memory (the flow tables first: flow_commands::release_all).
    void release_all();

private:
    // CREATE_SQ and CREATE_RQ: the wq's checks and page list (`is_sq` picks the rules).
    cmd_reply make_wq(cmd_ctx& c, bool is_sq, std::uint32_t* n);
    // MODIFY_SQ and MODIFY_RQ: the state change the PRM allows from `from` to `to`.
    cmd_reply change_state(wq_object& wq, std::uint32_t from, std::uint32_t to);
    // The context as it now is, into its firmware memory.
    cmd_reply save(const wq_object& wq);
    // CREATE_RQT and MODIFY_RQT: the RQ list after `rqtc` (`size` entries) checked.
    cmd_reply check_rq_list(const cmd_ctx& c, const std::byte* rqtc, std::uint32_t size, std::uint32_t uid,
                            std::vector<std::uint32_t>* rqns) const;
    // CREATE_TIR and MODIFY_TIR: the dispatch (RQ or RQT) and hash of `tirc`.
    cmd_reply check_tir(const std::byte* tirc, std::uint32_t uid, bool dispatch, bool hash) const;
    std::uint32_t next_qpn_space();

    const hca_caps& caps_;
    firmware_pages& icm_;
    object_tables& tables_;
    eth_tables& eth_ = tables_.eth;
    std::uint32_t next_td_ = 1, next_tisn_ = 1, next_wqn_ = 0x100, next_rqtn_ = 1, next_tirn_ = 1;
};

}  // namespace cxv::sim
