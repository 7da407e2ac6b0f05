// XRC domains (ALLOC_XRCD, DEALLOC_XRCD), XRC SRQs (CREATE_XRC_SRQ, DESTROY_XRC_SRQ) and
// RMPs (CREATE_RMP, DESTROY_RMP): what Linux 6.1's mlx5_ib makes at probe (two XRC
// domains and an XRC SRQ; its basic SRQs as RMPs at ISSI 1; docs/linux-oracle.md).
//
// An XRC SRQ's context is the SRQ context's layout with its domain, CQ and user index
// used; an RMP's is a "wq" (type, geometry, PD, doorbell record) that the model
// translates to the SRQ context: both become SRQ objects (fw_srq.cc, make_srq), in the
// SRQ number space QPs name them by. MODIFY_RMP arms an RMP's limit as ARM_RQ does an
// SRQ's, QUERY_RMP reads it back (cxv's driver makes its SRQs as RMPs so, as Linux's
// mlx5_ib does at ISSI 1). Not modelled: QUERY_XRC_SRQ, ARM_XRC_SRQ (BAD_OP), cyclic
// RMPs, XRC QPs (so an XRC SRQ receives nothing).
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

namespace rv = ifc::rmpc_values;

// rmp_state names the RMP's state now and ctx.state the next one: a ready RMP stays
// ready or goes to error; there is no way back from error (an RMP has no reset state).
// With the bitmask's lwm, ctx.wq.lwm becomes the armed limit (as ARM_RQ's for an SRQ: the
// engine raises SRQ_RQ_LIMIT once fewer WQEs remain posted, then disarms; 0 disarms).
cmd_reply srq_commands::modify_rmp(cmd_ctx& c) {
    const std::byte* in = c.in.data();
    const auto it = srqs_.find(ifc::get<ifc::modify_rmp_in::rmpn>(in));
    if (it == srqs_.end() || it->second.kind != srq_kind::rmp) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    srq_object& rmp = it->second;
    if (rmp.uid != ifc::get<ifc::modify_rmp_in::uid>(in)) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    const std::byte* rmpc = ifc::at<ifc::modify_rmp_in::ctx>(in);
    const std::uint32_t now = rmp.error ? rv::state_err : rv::state_rdy;
    const std::uint32_t next = ifc::get<ifc::rmpc::state>(rmpc);
    if (ifc::get<ifc::modify_rmp_in::rmp_state>(in) != now || now != rv::state_rdy ||
        (next != rv::state_rdy && next != rv::state_err)) {
        return fail(cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    }
    const bool set_lwm = ifc::get<ifc::rmp_bitmask::lwm>(ifc::at<ifc::modify_rmp_in::bitmask>(in)) != 0;
    const std::uint32_t lwm = ifc::get<ifc::wq::lwm>(ifc::at<ifc::rmpc::wq>(rmpc));
    if (set_lwm && lwm >= (1u << ifc::get<ifc::srqc::log_srq_size>(rmp.srqc.data()))) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    if (set_lwm) rmp.lwm = lwm;
    if (next == rv::state_err) rmp.error = true;
    return ok();
}

// The context back in CREATE_RMP's terms, with the device's state: error or ready, the
// armed limit, the WQEs consumed (hw_counter); the page list after it.
cmd_reply srq_commands::query_rmp(cmd_ctx& c) {
    const auto it = srqs_.find(ifc::get<ifc::query_rmp_in::rmpn>(c.in.data()));
    if (it == srqs_.end() || it->second.kind != srq_kind::rmp) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const srq_object& rmp = it->second;
    std::array<std::byte, ifc::srqc::size_bytes> srqc{};
    if (!icm_.read(rmp.icm, srqc.data(), srqc.size())) return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    std::byte* rmpc = ifc::at<ifc::query_rmp_out::rmp_context>(c.out.data());
    std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    ifc::set<ifc::rmpc::state>(rmpc, rmp.error ? rv::state_err : rv::state_rdy);
    ifc::set<ifc::wq::wq_type>(wq, ifc::wq_values::type_linked_list);
    ifc::set<ifc::wq::wq_signature>(wq, ifc::get<ifc::srqc::wq_signature>(srqc.data()));
    ifc::set<ifc::wq::page_offset>(wq, ifc::get<ifc::srqc::page_offset>(srqc.data()));
    ifc::set<ifc::wq::lwm>(wq, rmp.lwm);
    ifc::set<ifc::wq::pd>(wq, rmp.pd);
    ifc::set<ifc::wq::dbr_addr>(wq, ifc::get<ifc::srqc::dbr_addr>(srqc.data()));
    ifc::set<ifc::wq::hw_counter>(wq, rmp.consumer);
    ifc::set<ifc::wq::log_wq_stride>(wq, ifc::get<ifc::srqc::log_rq_stride>(srqc.data()) + 4);
    ifc::set<ifc::wq::log_wq_pg_sz>(wq, ifc::get<ifc::srqc::log_page_size>(srqc.data()));
    ifc::set<ifc::wq::log_wq_sz>(wq, ifc::get<ifc::srqc::log_srq_size>(srqc.data()));
    put_pas_at(c, ifc::query_rmp_out::size_bytes, rmp.pas);  // the wq's page list ends the output
    return ok();
}

}  // namespace cxv::sim
