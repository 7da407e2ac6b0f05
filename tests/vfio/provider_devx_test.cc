// DevX through rdma-core's mlx5 VFIO provider (Debian's libmlx5.so.1, rdma-core 44,
// unmodified) against an emulated device: capability and vport queries, UMEMs, a CQ and
// an RC QP whose buffers and doorbell records live in UMEMs, taken RST -> INIT -> RTR ->
// RTS looped back to itself, a DevX EQ on its own MSI-X vector, and the refusals the PRM
// requires. Inputs are built with hw/ layouts; a failing command's message names the PRM
// status and syndrome from the output mailbox.
#include <set>

#include "tests/vfio/devx_common.h"

namespace cxv::test::vfio {
namespace {

// --- capabilities and ports -----------------------------------------------------------------

TEST_CASE("devx: QUERY_HCA_CAP general capabilities, current and maximum") {
    device d(kBdf[0]);
    const auto cur = query_general_caps(d.ctx(), true);
    const auto max = query_general_caps(d.ctx(), false);
    const std::byte* c = cur.data();
    CHECK(ifc::get<cap::umem_uid_0>(c) == 1);
    CHECK(ifc::get<cap::rc>(c) == 1);
    CHECK(ifc::get<cap::port_type>(c) == 0);
    CHECK(ifc::get<cap::num_ports>(c) == 1);
    // Limits a ConnectX reports in the millions; at least what this test creates.
    CHECK(ifc::get<cap::log_max_qp>(c) >= 10);
    CHECK(ifc::get<cap::log_max_cq>(c) >= 10);
    CHECK(ifc::get<cap::log_max_mkey>(c) >= 10);
    CHECK(ifc::get<cap::log_max_pd>(c) >= 10);
    CHECK(ifc::get<cap::log_max_eq>(c) >= 2);
    CHECK(ifc::get<cap::log_max_qp_sz>(c) >= 4);
    CHECK(ifc::get<cap::log_max_cq_sz>(c) >= 6);
    CHECK(ifc::get<cap::log_max_msg>(c) >= 12);
    CHECK(ifc::get<cap::max_wqe_sz_rq>(c) >= 64);
    // Maximum caps bound the current ones, field by field where both are limits.
    CHECK(ifc::get<cap::log_max_qp>(c) <= ifc::get<cap::log_max_qp>(max.data()));
    CHECK(ifc::get<cap::log_max_qp_sz>(c) <= ifc::get<cap::log_max_qp_sz>(max.data()));
    CHECK(ifc::get<cap::log_max_cq_sz>(c) <= ifc::get<cap::log_max_cq_sz>(max.data()));
    CHECK(ifc::get<cap::log_max_msg>(c) <= ifc::get<cap::log_max_msg>(max.data()));

    // A shorter output buffer (2048 capability bytes, as some DevX users ask): the same
    // first half, nothing written past olen.
    auto in = input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1);
    const result full = must(d.ctx(), in, ifc::query_hca_cap_out::size_bytes);
    const result half = must(d.ctx(), in, 16 + 2048);
    CHECK(std::memcmp(ifc::at<ifc::query_hca_cap_out::capability>(half.data()),
                      ifc::at<ifc::query_hca_cap_out::capability>(full.data()), 2048) == 0);
}

TEST_CASE("devx: QUERY_HCA_VPORT_CONTEXT of port 1 and an unknown opcode") {
    device d(kBdf[0]);
    REQUIRE(wait_port_active(d.ctx()));
    const auto v = query_vport(d.ctx());
    CHECK(ifc::get<ifc::hca_vport_context::port_state>(v.data()) == kPortActive);
    CHECK(ifc::get<ifc::hca_vport_context::lid>(v.data()) != 0);
    CHECK(ifc::get<ifc::hca_vport_context::node_guid>(v.data()) != 0);

    // Port 2 of a one-port device, and an opcode no ConnectX has: the device's status
    // comes back as EREMOTEIO with the output mailbox intact.
    auto in = input<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), 2);
    result r = general_cmd(d.ctx(), in, ifc::query_hca_vport_context_out::size_bytes);
    CHECK(r.err == EREMOTEIO);
    CHECK_MESSAGE(r.status() == cmd_status::BAD_PARAM, describe(cmd_opcode::QUERY_HCA_VPORT_CONTEXT, r));
    auto bogus = input<ifc::cmd_in>(static_cast<cmd_opcode>(0x0fff), 0, 8);  // 16 bytes
    r = general_cmd(d.ctx(), bogus, 16);
    CHECK(r.err == EREMOTEIO);
    CHECK_MESSAGE(r.status() == cmd_status::BAD_OP, describe(static_cast<cmd_opcode>(0x0fff), r));
}

TEST_CASE("devx: INIT_LINK_DOWN keeps the link down after INIT_HCA until PAOS raises it") {
    // The provider asks for it with SET_HCA_CAP disable_link_up_by_init_hca = 1
    // (rdma-core's name for cmd_hca_cap bit 0x1b4, Linux's disable_link_up).
    {
        device d(kBdf[1], MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN);
        CHECK(ifc::get<cap::disable_link_up>(query_general_caps(d.ctx(), true).data()) == 1);
        CHECK(port_state(d.ctx()) == kPortDown);
        const result down = paos(d.ctx(), false);
        CHECK(ifc::get<ifc::paos_reg::oper_status>(ifc::at<ifc::access_register_out::register_data>(down.data())) == 2);
        paos(d.ctx(), true, 1);
        CHECK(port_state(d.ctx()) == kPortDown);  // the link trains first
        CHECK(wait_port_active(d.ctx()));
        paos(d.ctx(), true, 2);
        CHECK(port_state(d.ctx()) == kPortDown);
    }
    // Without the flag the next open brings the link up again.
    device d(kBdf[1]);
    CHECK(ifc::get<cap::disable_link_up>(query_general_caps(d.ctx(), true).data()) == 0);
    CHECK(wait_port_active(d.ctx()));
}

// --- UMEMs -------------------------------------------------------------------------------------

TEST_CASE("devx: UMEM registration of several sizes and offsets") {
    device d(kBdf[0]);
    struct shape {
        std::size_t len, offset;
    };
    // Doorbell-record sized ones at 8-byte offsets (the provider's page_offset), pages,
    // and larger ones whose single MTT covers a power-of-two range.
    const shape shapes[] = {{8, 0x2b0},      {64, 0xfc0},   {4096, 0},       {4096, 0x960},
                            {16 << 10, 0},   {512 << 10, 0}, {(1 << 20) + 8, 0x6e0}, {4 << 20, 0}};
    std::set<std::uint32_t> ids;
    std::vector<std::unique_ptr<umem>> umems;
    for (const shape& s : shapes) {
        INFO(s.len, " bytes at +", s.offset);
        umems.push_back(std::make_unique<umem>(d.ctx(), s.len, s.offset));
        ids.insert(umems.back()->id());
    }
    CHECK(ids.size() == umems.size());
    // Read-only and remotely accessible ones too.
    umem ro(d.ctx(), 4096, 0, 0);
    umem rw(d.ctx(), 4096, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(ro.id() != rw.id());
    umems.clear();

    // The provider's own checks (no command sent): unsupported access, and remote write
    // without local write.
    aligned_buffer buf(4096, 4096);
    errno = 0;
    CHECK(mlx5dv_devx_umem_reg(d.ctx(), buf.get(), 4096, IBV_ACCESS_REMOTE_ATOMIC) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    errno = 0;
    CHECK(mlx5dv_devx_umem_reg(d.ctx(), buf.get(), 4096, IBV_ACCESS_REMOTE_WRITE) == nullptr);
    CHECK(errno == EINVAL);
}

// --- CQ and QP -----------------------------------------------------------------------------------

TEST_CASE("devx: CQ and RC QP in UMEMs, RST -> INIT -> RTR -> RTS looped back, then destroyed") {
    env e;
    CHECK(e.uar->page_id != 0);
    CHECK(static_cast<std::byte*>(e.uar->reg_addr) == static_cast<std::byte*>(e.uar->base_addr) + 0x800);
    CHECK(e.eqn != 0);
    REQUIRE(wait_port_active(e.ctx));  // the LID is the SM's, once the port is ACTIVE
    const std::uint32_t lid = ifc::get<ifc::hca_vport_context::lid>(query_vport(e.ctx).data());
    REQUIRE(lid != 0);

    // Doorbell records share one page, at the odd offsets small allocations get.
    umem cq_ring(e.ctx, 4096);
    umem cq_dbr(e.ctx, 64, 0x100);
    umem qp_wq(e.ctx, 8192);
    umem qp_dbr(e.ctx, 64, 0x340);

    created cq = obj_create(e.ctx, cq_input(e, e.eqn, cq_ring, cq_dbr), ifc::create_cq_out::size_bytes);
    REQUIRE_MESSAGE(cq.obj != nullptr, describe(cmd_opcode::CREATE_CQ, cq.r));
    const std::uint32_t cqn = ifc::get<ifc::create_cq_out::cqn>(cq.r.data());
    CHECK(cqn != 0);

    // QUERY_CQ shows what was created.
    auto qin = input<ifc::query_cq_in>(cmd_opcode::QUERY_CQ);
    ifc::set<ifc::query_cq_in::cqn>(qin.data(), cqn);
    const result qcq = obj_query(cq.obj, qin, ifc::query_cq_out::size_bytes);
    REQUIRE_MESSAGE(qcq.ok(), describe(cmd_opcode::QUERY_CQ, qcq));
    const std::byte* cqc = ifc::at<ifc::query_cq_out::cq_context>(qcq.data());
    CHECK(ifc::get<ifc::cqc::log_cq_size>(cqc) == 6);
    CHECK(ifc::get<ifc::cqc::c_eqn_or_apu_element>(cqc) == e.eqn);
    CHECK(ifc::get<ifc::cqc::uar_page>(cqc) == e.uar->page_id);
    CHECK(ifc::get<ifc::cqc::status>(cqc) == 0);

    created qp = obj_create(e.ctx, qp_input(e, cqn, qp_wq, qp_dbr), ifc::create_qp_out::size_bytes);
    REQUIRE_MESSAGE(qp.obj != nullptr, describe(cmd_opcode::CREATE_QP, qp.r));
    const std::uint32_t qpn = ifc::get<ifc::create_qp_out::qpn>(qp.r.data());
    CHECK(qpn != 0);
    CHECK(qp_state(qp.obj, qpn) == qp_rst);

    // RST2INIT: port 1, P_Key index 0, remote read/write/atomic allowed.
    auto init = transition<ifc::rst2init_qp_in>(cmd_opcode::RST2INIT_QP, qpn);
    std::byte* q = ifc::at<ifc::rst2init_qp_in::qpc>(init.data());
    ifc::set<ads::vhca_port_num>(ifc::at<qpc::primary_address_path>(q), 1);
    ifc::set<ads::pkey_index>(ifc::at<qpc::primary_address_path>(q), 0);
    ifc::set<qpc::rre>(q, 1);
    ifc::set<qpc::rwe>(q, 1);
    ifc::set<qpc::rae>(q, 1);
    step(qp.obj, init);
    CHECK(qp_state(qp.obj, qpn) == qp_init);

    // INIT2RTR: the peer is this QP on this port's LID; MTU 1024, PSN 0.
    const std::uint32_t log_msg = ifc::get<cap::log_max_msg>(e.caps.data());
    const std::uint32_t rra = std::min<std::uint32_t>(2, ifc::get<cap::log_max_ra_res_qp>(e.caps.data()));
    auto rtr = transition<ifc::init2rtr_qp_in>(cmd_opcode::INIT2RTR_QP, qpn);
    q = ifc::at<ifc::init2rtr_qp_in::qpc>(rtr.data());
    ifc::set<qpc::mtu>(q, 3);
    ifc::set<qpc::log_msg_max>(q, log_msg);
    ifc::set<qpc::remote_qpn>(q, qpn);
    ifc::set<qpc::next_rcv_psn>(q, 0);
    ifc::set<qpc::log_rra_max>(q, rra);
    ifc::set<qpc::min_rnr_nak>(q, 12);
    ifc::set<ads::rlid>(ifc::at<qpc::primary_address_path>(q), lid);
    ifc::set<ads::vhca_port_num>(ifc::at<qpc::primary_address_path>(q), 1);
    step(qp.obj, rtr);
    CHECK(qp_state(qp.obj, qpn) == qp_rtr);

    // RTR2RTS: retries, ACK timeout, outstanding reads.
    const std::uint32_t sra = std::min<std::uint32_t>(2, ifc::get<cap::log_max_ra_req_qp>(e.caps.data()));
    auto rts = transition<ifc::rtr2rts_qp_in>(cmd_opcode::RTR2RTS_QP, qpn);
    q = ifc::at<ifc::rtr2rts_qp_in::qpc>(rts.data());
    ifc::set<qpc::next_send_psn>(q, 0);
    ifc::set<qpc::retry_count>(q, 7);
    ifc::set<qpc::rnr_retry>(q, 7);
    ifc::set<qpc::log_sra_max>(q, sra);
    ifc::set<ads::ack_timeout>(ifc::at<qpc::primary_address_path>(q), 14);
    step(qp.obj, rts);

    // QUERY_QP: RTS, with what each transition set.
    const result r = query_qp(qp.obj, qpn);
    REQUIRE_MESSAGE(r.ok(), describe(cmd_opcode::QUERY_QP, r));
    const std::byte* qc = ifc::at<ifc::query_qp_out::qpc>(r.data());
    const std::byte* path = ifc::at<qpc::primary_address_path>(qc);
    CHECK(ifc::get<qpc::state>(qc) == qp_rts);
    CHECK(ifc::get<qpc::st>(qc) == 0);
    CHECK(ifc::get<qpc::pd>(qc) == e.pdn);
    CHECK(ifc::get<qpc::cqn_snd>(qc) == cqn);
    CHECK(ifc::get<qpc::cqn_rcv>(qc) == cqn);
    CHECK(ifc::get<qpc::remote_qpn>(qc) == qpn);
    CHECK(ifc::get<qpc::mtu>(qc) == 3);
    CHECK(ifc::get<qpc::rre>(qc) == 1);
    CHECK(ifc::get<qpc::rwe>(qc) == 1);
    CHECK(ifc::get<qpc::retry_count>(qc) == 7);
    CHECK(ifc::get<qpc::rnr_retry>(qc) == 7);
    CHECK(ifc::get<ads::rlid>(path) == lid);
    CHECK(ifc::get<ads::vhca_port_num>(path) == 1);
    CHECK(ifc::get<ads::ack_timeout>(path) == 14);

    // What the PRM refuses while the QP exists: a transition from the wrong state, and
    // destroying the CQ it completes to or the UMEMs it lives in.
    const result again = obj_modify(qp.obj, init, 16);
    CHECK(again.err == EREMOTEIO);
    CHECK_MESSAGE(again.status() == cmd_status::BAD_QP_STATE, describe(cmd_opcode::RST2INIT_QP, again));
    const result busy = general_cmd(e.ctx, destroy_cq_input(cqn), 16);
    CHECK(busy.err == EREMOTEIO);
    CHECK_MESSAGE(busy.status() == cmd_status::RESOURCE_BUSY, describe(cmd_opcode::DESTROY_CQ, busy));
    // The provider's own destroy maps the status to an errno (mlx5_cmd_status_to_err)
    // and keeps the object, so it can be destroyed later.
    CHECK(mlx5dv_devx_obj_destroy(cq.obj) == EBUSY);
    CHECK(mlx5dv_devx_umem_dereg(qp_wq.u) == EBUSY);
    CHECK(mlx5dv_devx_umem_dereg(cq_dbr.u) == EBUSY);
    CHECK(qp_state(qp.obj, qpn) == qp_rts);

    // Teardown in dependency order.
    CHECK(mlx5dv_devx_obj_destroy(qp.obj) == 0);
    const result gone = general_cmd(e.ctx, [&] {
        auto in = input<ifc::query_qp_in>(cmd_opcode::QUERY_QP);
        ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn);
        return in;
    }(), ifc::query_qp_out::size_bytes);
    CHECK(gone.err == EREMOTEIO);
    CHECK_MESSAGE(gone.status() == cmd_status::BAD_RESOURCE, describe(cmd_opcode::QUERY_QP, gone));
    CHECK(mlx5dv_devx_obj_destroy(cq.obj) == 0);
    // The UMEMs are free now: their destructors deregister them.
}

TEST_CASE("devx: CREATE_CQ refusals and the provider's own argument checks") {
    env e;
    umem ring(e.ctx, 4096);
    umem dbr(e.ctx, 64, 0x80);

    // An EQ that does not exist.
    created bad_eq = obj_create(e.ctx, cq_input(e, 0xfe, ring, dbr), ifc::create_cq_out::size_bytes);
    CHECK(bad_eq.obj == nullptr);
    CHECK(bad_eq.r.err == EREMOTEIO);
    CHECK_MESSAGE(bad_eq.r.status() == cmd_status::BAD_PARAM, describe(cmd_opcode::CREATE_CQ, bad_eq.r));
    // A ring larger than its UMEM (128 CQEs of 64 bytes in 4 KiB).
    created big = obj_create(e.ctx, cq_input(e, e.eqn, ring, dbr, 7), ifc::create_cq_out::size_bytes);
    CHECK(big.obj == nullptr);
    CHECK(big.r.err == EREMOTEIO);
    CHECK_MESSAGE(big.r.status() == cmd_status::BAD_PARAM, describe(cmd_opcode::CREATE_CQ, big.r));
    // DESTROY_CQ of a number that names no CQ.
    const result none = general_cmd(e.ctx, destroy_cq_input(0xabcdef), 16);
    CHECK(none.err == EREMOTEIO);
    CHECK_MESSAGE(none.status() == cmd_status::BAD_RESOURCE, describe(cmd_opcode::DESTROY_CQ, none));

    // The provider refuses before sending: a command that creates nothing, an EQ vector
    // other than 0, a UAR that is not NC.
    auto query = input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1);
    created notcreate = obj_create(e.ctx, query, ifc::query_hca_cap_out::size_bytes);
    CHECK(notcreate.obj == nullptr);
    CHECK(notcreate.r.err == EINVAL);
    std::uint32_t eqn = 0;
    CHECK(mlx5dv_devx_query_eqn(e.ctx, 1, &eqn) == EINVAL);
    errno = 0;
    CHECK(mlx5dv_devx_alloc_uar(e.ctx, MLX5DV_UAR_ALLOC_TYPE_BF) == nullptr);
    CHECK(errno == EOPNOTSUPP);

    // And a good CQ still works after all that.
    created ok = obj_create(e.ctx, cq_input(e, e.eqn, ring, dbr), ifc::create_cq_out::size_bytes);
    REQUIRE_MESSAGE(ok.obj != nullptr, describe(cmd_opcode::CREATE_CQ, ok.r));
    CHECK(mlx5dv_devx_obj_destroy(ok.obj) == 0);
}

// --- DevX EQ on its own vector ---------------------------------------------------------------

TEST_CASE("devx: an EQ on a DevX MSI-X vector, with a CQ reporting to it") {
    env e;
    mlx5dv_devx_msi_vector* msi = mlx5dv_devx_alloc_msi_vector(e.ctx);
    REQUIRE_MESSAGE(msi != nullptr, "mlx5dv_devx_alloc_msi_vector: ", std::strerror(errno));
    CHECK(msi->vector >= 1);  // vector 0 is the provider's own
    CHECK(msi->fd >= 0);

    auto in = input<ifc::create_eq_in>(cmd_opcode::CREATE_EQ);
    std::byte* eqc = ifc::at<ifc::create_eq_in::eq_context_entry>(in.data());
    ifc::set<ifc::eqc::log_eq_size>(eqc, 6);
    ifc::set<ifc::eqc::uar_page>(eqc, e.uar->page_id);
    ifc::set<ifc::eqc::intr>(eqc, static_cast<std::uint32_t>(msi->vector));
    std::vector<std::byte> out(ifc::create_eq_out::size_bytes);
    errno = 0;
    mlx5dv_devx_eq* eq = mlx5dv_devx_create_eq(e.ctx, in.data(), in.size(), out.data(), out.size());
    result er{eq ? 0 : errno, out};
    REQUIRE_MESSAGE(eq != nullptr, describe(cmd_opcode::CREATE_EQ, er));
    const std::uint32_t eqn = ifc::get<ifc::create_eq_out::eq_number>(out.data());
    CHECK(eqn != 0);
    CHECK(eqn != e.eqn);
    // The provider does not initialise the ring: ownership is the caller's to set.
    for (std::size_t i = 0; i < 64; ++i) static_cast<std::byte*>(eq->vaddr)[i * 64 + 63] = std::byte{1};

    // QUERY_EQ reports the vector and size it was created with.
    auto qin = input<ifc::query_eq_in>(cmd_opcode::QUERY_EQ);
    ifc::set<ifc::query_eq_in::eq_number>(qin.data(), eqn);
    const result q = must(e.ctx, qin, ifc::query_eq_out::size_bytes + 8);
    const std::byte* qc = ifc::at<ifc::query_eq_out::eq_context_entry>(q.data());
    CHECK(ifc::get<ifc::eqc::intr>(qc) == static_cast<std::uint32_t>(msi->vector));
    CHECK(ifc::get<ifc::eqc::log_eq_size>(qc) == 6);

    umem ring(e.ctx, 4096);
    umem dbr(e.ctx, 64, 0x200);
    created cq = obj_create(e.ctx, cq_input(e, eqn, ring, dbr), ifc::create_cq_out::size_bytes);
    REQUIRE_MESSAGE(cq.obj != nullptr, describe(cmd_opcode::CREATE_CQ, cq.r));
    CHECK(mlx5dv_devx_obj_destroy(cq.obj) == 0);

    // rdma-core 44 (and master as of this writing) frees the EQ's bookkeeping but not the
    // ring it posix_memalign'ed (vfio_devx_destroy_eq): the caller frees it, or leaks.
    void* ring_va = eq->vaddr;
    const int destroyed = mlx5dv_devx_destroy_eq(eq);
    CHECK(destroyed == 0);
    if (destroyed == 0) std::free(ring_va);
    CHECK(mlx5dv_devx_free_msi_vector(msi) == 0);
    // The provider's own check: vector 0 is reserved (no command sent).
    ifc::set<ifc::eqc::intr>(eqc, 0);
    errno = 0;
    CHECK(mlx5dv_devx_create_eq(e.ctx, in.data(), in.size(), out.data(), out.size()) == nullptr);
    CHECK(errno == EINVAL);
}

}  // namespace
}  // namespace cxv::test::vfio
