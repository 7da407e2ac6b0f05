// XRC domains (ALLOC_XRCD, DEALLOC_XRCD), XRC SRQs (CREATE_XRC_SRQ, DESTROY_XRC_SRQ) and
// RMPs (CREATE_RMP, DESTROY_RMP): what Linux 6.1's mlx5_ib makes at probe (two XRC
// domains and an XRC SRQ; its basic SRQs as RMPs at ISSI 1; docs/linux-oracle.md).
//
// An XRC SRQ's context is the SRQ context's layout with its domain, CQ and user index
// used; an RMP's is a "wq" (type, geometry, PD, doorbell record) that the model
// translates to the SRQ context: both become SRQ objects (fw_srq.cc, make_srq), in the
// SRQ number space QPs name them by. Not modelled: QUERY_XRC_SRQ, ARM_XRC_SRQ,
// QUERY_RMP, MODIFY_RMP (BAD_OP), cyclic RMPs, XRC QPs (so an XRC SRQ receives
// nothing).
#include <array>

#include "hw/ifc.h"
#include "sim/firmware/fw_srq.h"
#include "sim/firmware/fw_tables.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

cmd_reply srq_commands::alloc_xrcd(cmd_ctx& c) {
    std::uint32_t n = 0;
    const auto r = alloc_plain(xrcds_, next_xrcd_, ifc::get<ifc::cmd_hca_cap::log_max_xrcd>(caps_.current()),
                               ifc::get<ifc::alloc_xrcd_in::uid>(c.in.data()), &n);
    if (!failed(r)) ifc::set<ifc::alloc_xrcd_out::xrcd>(c.out.data(), n);
    return r;
}

// XRC SRQs of the domain hold it.
cmd_reply srq_commands::dealloc_xrcd(cmd_ctx& c) {
    return dealloc_plain(xrcds_, ifc::get<ifc::dealloc_xrcd_in::xrcd>(c.in.data()),
                         ifc::get<ifc::dealloc_xrcd_in::uid>(c.in.data()));
}

cmd_reply srq_commands::create_xrc_srq(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::byte* x = ifc::at<ifc::create_xrc_srq_in::xrc_srq_context_entry>(in);
    // Umem-backed buffers and records are not modelled for XRC SRQs.
    if (ifc::get<ifc::create_xrc_srq_in::xrc_srq_umem_valid>(in) != 0 ||
        ifc::get<ifc::xrc_srqc::dbr_umem_valid>(x) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    // The same bits as the SRQ context, the doorbell record's low 2 bits reserved.
    std::array<std::byte, ifc::srqc::size_bytes> srqc{};
    std::copy_n(x, srqc.size(), srqc.begin());
    ifc::set<ifc::srqc::dbr_addr>(srqc.data(),
                                  (std::uint64_t{ifc::get<ifc::xrc_srqc::db_record_addr_h>(x)} << 32) |
                                      (std::uint64_t{ifc::get<ifc::xrc_srqc::db_record_addr_l>(x)} << 2));
    std::uint32_t srqn = 0;
    const auto r = make_srq(c, srqc.data(), ifc::create_xrc_srq_in::size_bytes,
                            ifc::get<ifc::create_xrc_srq_in::uid>(in), srq_kind::xrc, &srqn);
    if (r.status == cmd_status::OK) ifc::set<ifc::create_xrc_srq_out::xrc_srqn>(c.out.data(), srqn);
    return r;
}

cmd_reply srq_commands::destroy_xrc_srq(cmd_ctx& c) {
    return remove_srq(ifc::get<ifc::destroy_xrc_srq_in::xrc_srqn>(c.in.data()),
                      ifc::get<ifc::destroy_xrc_srq_in::uid>(c.in.data()), srq_kind::xrc);
}

cmd_reply srq_commands::create_rmp(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const std::byte* rmpc = ifc::at<ifc::create_rmp_in::ctx>(in);
    const std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    // An RMP is created ready; its WQEs are a linked list (next segments), as an SRQ's.
    if (ifc::get<ifc::rmpc::state>(rmpc) != ifc::rmpc_values::state_rdy) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (ifc::get<ifc::wq::wq_type>(wq) != ifc::wq_values::type_linked_list) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (ifc::get<ifc::wq::dbr_umem_valid>(wq) != 0 || ifc::get<ifc::wq::wq_umem_valid>(wq) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    // A receive WQE is at least 16 bytes: log_wq_stride 4 is SRQ's log_rq_stride 0.
    const unsigned log_stride = ifc::get<ifc::wq::log_wq_stride>(wq);
    if (log_stride < 4) return bad_param(cmd_syndrome::BAD_PARAMETER);
    std::array<std::byte, ifc::srqc::size_bytes> srqc{};
    ifc::set<ifc::srqc::log_srq_size>(srqc.data(), ifc::get<ifc::wq::log_wq_sz>(wq));
    ifc::set<ifc::srqc::log_rq_stride>(srqc.data(), log_stride - 4);
    ifc::set<ifc::srqc::wq_signature>(srqc.data(), ifc::get<ifc::wq::wq_signature>(wq));
    ifc::set<ifc::srqc::page_offset>(srqc.data(), ifc::get<ifc::wq::page_offset>(wq));
    ifc::set<ifc::srqc::log_page_size>(srqc.data(), ifc::get<ifc::wq::log_wq_pg_sz>(wq));
    ifc::set<ifc::srqc::pd>(srqc.data(), ifc::get<ifc::wq::pd>(wq));
    ifc::set<ifc::srqc::lwm>(srqc.data(), ifc::get<ifc::wq::lwm>(wq));
    ifc::set<ifc::srqc::dbr_addr>(srqc.data(), ifc::get<ifc::wq::dbr_addr>(wq));
    // The page list follows the wq.
    const std::size_t pas_at = ifc::create_rmp_in::size_bytes;
    std::uint32_t rmpn = 0;
    const auto r = make_srq(c, srqc.data(), pas_at, ifc::get<ifc::create_rmp_in::uid>(in), srq_kind::rmp, &rmpn);
    if (r.status == cmd_status::OK) ifc::set<ifc::create_rmp_out::rmpn>(c.out.data(), rmpn);
    return r;
}

cmd_reply srq_commands::destroy_rmp(cmd_ctx& c) {
    return remove_srq(ifc::get<ifc::destroy_rmp_in::rmpn>(c.in.data()), ifc::get<ifc::destroy_rmp_in::uid>(c.in.data()),
                      srq_kind::rmp);
}

}  // namespace cxv::sim
