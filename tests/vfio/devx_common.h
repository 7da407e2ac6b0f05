// DevX objects through rdma-core's mlx5 VFIO provider, shared by the DevX tests: UMEMs,
// the provider's UAR/EQ/PD, CQ and RC QP inputs with their buffers in UMEMs (PRM
// CREATE_CQ/CREATE_QP with *_umem_valid), and QP transitions.
#pragma once

#include "tests/vfio/provider_common.h"

namespace cxv::test::vfio {

using cap = ifc::cmd_hca_cap;
using qpc = ifc::qpc;
using ads = ifc::ads;

// qpc.state (PRM "QP Context").
enum : std::uint32_t { qp_rst = 0, qp_init = 1, qp_rtr = 2, qp_rts = 3 };

// --- DevX objects ----------------------------------------------------------------------

struct created {
    mlx5dv_devx_obj* obj = nullptr;
    result r;
};

inline created obj_create(ibv_context* ctx, const std::vector<std::byte>& in, std::size_t outlen) {
    created c;
    c.r.out.assign(outlen, std::byte{0});
    errno = 0;
    c.obj = mlx5dv_devx_obj_create(ctx, in.data(), in.size(), c.r.out.data(), outlen);
    c.r.err = c.obj ? 0 : errno;
    return c;
}

inline result obj_modify(mlx5dv_devx_obj* obj, const std::vector<std::byte>& in, std::size_t outlen) {
    result r;
    r.out.assign(outlen, std::byte{0});
    r.err = mlx5dv_devx_obj_modify(obj, in.data(), in.size(), r.out.data(), outlen);
    return r;
}

inline result obj_query(mlx5dv_devx_obj* obj, const std::vector<std::byte>& in, std::size_t outlen) {
    result r;
    r.out.assign(outlen, std::byte{0});
    r.err = mlx5dv_devx_obj_query(obj, in.data(), in.size(), r.out.data(), outlen);
    return r;
}

// A buffer registered as a UMEM: `len` bytes at `offset` into a page-aligned allocation.
struct umem {
    aligned_buffer mem;
    std::byte* addr;
    mlx5dv_devx_umem* u = nullptr;

    umem(ibv_context* ctx, std::size_t len, std::size_t offset = 0, std::uint32_t access = IBV_ACCESS_LOCAL_WRITE)
        : mem(4096, ((offset + len + 4095) / 4096) * 4096), addr(mem.get() + offset) {
        errno = 0;
        u = mlx5dv_devx_umem_reg(ctx, addr, len, access);
        REQUIRE_MESSAGE(u != nullptr, "mlx5dv_devx_umem_reg(", len, " bytes at +", offset, "): ", std::strerror(errno));
        CHECK(u->umem_id != 0);
    }
    ~umem() {
        if (u) CHECK(mlx5dv_devx_umem_dereg(u) == 0);
    }
    umem(const umem&) = delete;
    umem& operator=(const umem&) = delete;
    std::uint32_t id() const { return u->umem_id; }
};

// What a CQ and a QP are created against: the provider's UAR and async EQ, and a PD.
struct env {
    explicit env(const char* bdf = kBdf[0]) : dev(bdf) { init(); }
    device dev;
    ibv_context* ctx = dev.ctx();
    mlx5dv_devx_uar* uar = nullptr;
    std::uint32_t eqn = 0;
    ibv_pd* pd = nullptr;
    std::uint32_t pdn = 0;
    std::vector<std::byte> caps = query_general_caps(ctx, true);

    void init() {
        uar = mlx5dv_devx_alloc_uar(ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
        REQUIRE_MESSAGE(uar != nullptr, "mlx5dv_devx_alloc_uar: ", std::strerror(errno));
        REQUIRE(mlx5dv_devx_query_eqn(ctx, 0, &eqn) == 0);
        pd = ibv_alloc_pd(ctx);
        REQUIRE(pd != nullptr);
        mlx5dv_pd dv{};
        mlx5dv_obj obj{};
        obj.pd.in = pd;
        obj.pd.out = &dv;
        REQUIRE(mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) == 0);
        pdn = dv.pdn;
    }
    ~env() {
        CHECK(ibv_dealloc_pd(pd) == 0);
        mlx5dv_devx_free_uar(uar);
    }
};

// A CQ of 2^log_size 64-byte CQEs with its ring in `ring` and doorbell record at the
// start of `dbr` (PRM CREATE_CQ with cq_umem_valid and cqc.dbr_umem_valid).
inline std::vector<std::byte> cq_input(const env& e, std::uint32_t eqn, const umem& ring, const umem& dbr,
                                unsigned log_size = 6) {
    auto in = input<ifc::create_cq_in>(cmd_opcode::CREATE_CQ);
    std::byte* c = ifc::at<ifc::create_cq_in::cq_context>(in.data());
    ifc::set<ifc::cqc::log_cq_size>(c, log_size);
    ifc::set<ifc::cqc::uar_page>(c, e.uar->page_id);
    ifc::set<ifc::cqc::c_eqn_or_apu_element>(c, eqn);
    ifc::set<ifc::cqc::cqe_sz>(c, 0);
    ifc::set<ifc::cqc::dbr_umem_valid>(c, 1);
    ifc::set<ifc::cqc::dbr_umem_id>(c, dbr.id());
    ifc::set<ifc::cqc::dbr_addr>(c, 0);
    ifc::set<ifc::create_cq_in::cq_umem_valid>(in.data(), 1);
    ifc::set<ifc::create_cq_in::cq_umem_id>(in.data(), ring.id());
    ifc::set<ifc::create_cq_in::cq_umem_offset>(in.data(), 0);
    // Every CQE software-owned and invalid (opcode 0xf, owner 1), as a driver leaves them.
    // (Only as far as the buffer goes: some tests ask for a ring larger than its UMEM.)
    const std::size_t room = ring.mem.size - static_cast<std::size_t>(ring.addr - ring.mem.get());
    for (std::size_t i = 0; i < std::min(std::size_t{64} << log_size, room); i += 64) ring.addr[i + 63] = std::byte{0xf1};
    return in;
}

// An RC QP of 16 receive WQEs of 64 bytes and 16 send WQEBBs in `wq`, doorbell record
// at the start of `dbr`, both work queues completing to cqn (PRM CREATE_QP with
// wq_umem_valid and qpc.dbr_umem_valid).
inline std::vector<std::byte> qp_input(const env& e, std::uint32_t cqn, const umem& wq, const umem& dbr) {
    auto in = input<ifc::create_qp_in>(cmd_opcode::CREATE_QP);
    std::byte* q = ifc::at<ifc::create_qp_in::qpc>(in.data());
    ifc::set<qpc::st>(q, 0);        // RC
    ifc::set<qpc::pm_state>(q, 3);  // MIGRATED
    ifc::set<qpc::pd>(q, e.pdn);
    ifc::set<qpc::uar_page>(q, e.uar->page_id);
    ifc::set<qpc::cqn_snd>(q, cqn);
    ifc::set<qpc::cqn_rcv>(q, cqn);
    ifc::set<qpc::log_rq_size>(q, 4);
    ifc::set<qpc::log_rq_stride>(q, 2);  // 16 << 2 = 64 bytes
    ifc::set<qpc::log_sq_size>(q, 4);
    ifc::set<qpc::rq_type>(q, 0);
    ifc::set<qpc::dbr_umem_valid>(q, 1);
    ifc::set<qpc::dbr_umem_id>(q, dbr.id());
    ifc::set<qpc::dbr_addr>(q, 0);
    ifc::set<ifc::create_qp_in::wq_umem_valid>(in.data(), 1);
    ifc::set<ifc::create_qp_in::wq_umem_id>(in.data(), wq.id());
    ifc::set<ifc::create_qp_in::wq_umem_offset>(in.data(), 0);
    return in;
}

// A QP transition input (RST2INIT_QP, INIT2RTR_QP, RTR2RTS_QP share In's shape).
template <typename In>
inline std::vector<std::byte> transition(cmd_opcode op, std::uint32_t qpn) {
    auto in = input<In>(op);
    ifc::set<typename In::qpn>(in.data(), qpn);
    ifc::set<typename In::opt_param_mask>(in.data(), 0);
    return in;
}

inline result query_qp(mlx5dv_devx_obj* qp, std::uint32_t qpn) {
    auto in = input<ifc::query_qp_in>(cmd_opcode::QUERY_QP);
    ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn);
    return obj_query(qp, in, ifc::query_qp_out::size_bytes);
}

inline std::uint32_t qp_state(mlx5dv_devx_obj* qp, std::uint32_t qpn) {
    const result r = query_qp(qp, qpn);
    REQUIRE_MESSAGE(r.ok(), describe(cmd_opcode::QUERY_QP, r));
    return ifc::get<qpc::state>(ifc::at<ifc::query_qp_out::qpc>(r.data()));
}

// Runs one transition, REQUIREd to succeed.
inline void step(mlx5dv_devx_obj* qp, const std::vector<std::byte>& in) {
    const result r = obj_modify(qp, in, 16);
    REQUIRE_MESSAGE(r.ok(), describe(opcode_of(in), r));
}

inline std::vector<std::byte> destroy_cq_input(std::uint32_t cqn) {
    auto in = input<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ);
    ifc::set<ifc::destroy_cq_in::cqn>(in.data(), cqn);
    return in;
}

}  // namespace cxv::test::vfio
