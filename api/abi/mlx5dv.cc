// cxv's libmlx5.so.1: rdma-core's mlx5 direct-verbs library by name and symbol version
// (libmlx5.map: every name of rdma-core 44's, with its version), so that programs linked
// against rdma-core's libmlx5 (perftest, UCX's libuct_ib, libfabric's verbs provider)
// load under `cxv exec`. rdma-core's own libmlx5 cannot load there: it needs rdma-core's
// libibverbs (the private IBVERBS_PRIVATE_34 ibv_cmd_* calls), and cxv's answers
// libibverbs instead. This one is linked against cxv's libibverbs.so.1 by its soname.
//
// Answered here: mlx5dv_is_supported (cxv's devices), mlx5dv_open_device (the context
// of ibv_open_device; DevX is not offered), mlx5dv_query_device (what cxv's function
// does), mlx5dv_init_obj (the QP, CQ, SRQ, PD and AH layouts, from libibverbs.so.1:
// mlx5dv_objects.cc), mlx5dv_create_cq (64- or 128-byte CQEs), mlx5dv_create_qp (RC, UC, UD). Every other call fails as rdma-core documents for a missing
// feature (mlx5dv_unsupported.cc): cxv has no DevX, steering, crypto or DC. The list is
// in docs/exec.md.
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "api/abi/abi.h"
#include "api/abi/providers.h"
#include "hw/ifc.h"

using cxv::abi::fail_errno;
using cxv::abi::fail_null;

namespace {

namespace ifc = cxv::hw::ifc;

// A context of cxv's libibverbs, the only kind a program under `cxv exec` has; anything
// else gets what rdma-core's libmlx5 gives a context of another provider.
bool is_cxv_context(ibv_context* ctx) { return ctx != nullptr && cxv_abi_owns_device(ctx->device); }

// The comp_mask fields mlx5dv_query_device answers for every function, with the value
// of a device without the feature (zeros), as rdma-core reports them from a kernel that
// has none of them: CQE compression, software parsing, striding RQ, tunnel offloads,
// dynamic BlueFlame registers, flow actions, DC ODP, signature, DCI streams, memcpy
// WRs, crypto. The clock-info page, the HCA core clock and the LAG ports are reported
// only where the device has them, and a cxv function has none of them (none mapped).
constexpr std::uint64_t kZeroedCaps =
    MLX5DV_CONTEXT_MASK_CQE_COMPRESION | MLX5DV_CONTEXT_MASK_SWP | MLX5DV_CONTEXT_MASK_STRIDING_RQ |
    MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS | MLX5DV_CONTEXT_MASK_DYN_BFREGS | MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS |
    MLX5DV_CONTEXT_MASK_DC_ODP_CAPS | MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_DCI_STREAMS |
    MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;

// The context of the first object `obj_type` names, in mlx5dv_obj's order; NULL when it
// names none.
ibv_context* context_of(const mlx5dv_obj* obj, std::uint64_t obj_type) {
    if (obj_type & MLX5DV_OBJ_QP) return obj->qp.in->context;
    if (obj_type & MLX5DV_OBJ_CQ) return obj->cq.in->context;
    if (obj_type & MLX5DV_OBJ_SRQ) return obj->srq.in->context;
    if (obj_type & MLX5DV_OBJ_RWQ) return obj->rwq.in->context;
    if (obj_type & MLX5DV_OBJ_DM) return obj->dm.in->context;
    if (obj_type & MLX5DV_OBJ_AH) return obj->ah.in->context;
    if (obj_type & MLX5DV_OBJ_PD) return obj->pd.in->context;
    return nullptr;
}

// mlx5dv_init_obj(3): the QP, CQ, SRQ, PD and AH layouts a program drives itself. No
// object named: EINVAL; objects of another provider's context: EOPNOTSUPP (both as
// rdma-core answers).
int init_obj(mlx5dv_obj* obj, std::uint64_t obj_type) {
    ibv_context* ctx = context_of(obj, obj_type);
    if (ctx == nullptr) return fail_errno(EINVAL);
    if (!is_cxv_context(ctx)) return fail_errno(EOPNOTSUPP);
    const int err = cxv_abi_init_obj(obj, obj_type);
    return err != 0 ? fail_errno(err) : 0;
}

// MLX5_1.0's CQ answer: cq_uar is the address of a location that holds the UAR page's
// address (one per context, as long as the process lives), not the address itself.
void* const* uar_location(ibv_context* ctx, void* uar) {
    static std::mutex mu;
    static std::map<ibv_context*, std::unique_ptr<void*>> where;
    std::lock_guard lock(mu);
    auto& slot = where[ctx];
    if (!slot) slot = std::make_unique<void*>();
    *slot = uar;
    return slot.get();
}

}  // namespace

// mlx5dv_is_supported(3): true for the devices of cxv's libibverbs (every one is an mlx5
// function).
CXV_ABI_EXPORT bool mlx5dv_is_supported(ibv_device* device) { return device != nullptr && cxv_abi_owns_device(device); }

// mlx5dv_open_device(3): with no flags, the context ibv_open_device gives (rdma-core's
// opens the device as ibv_open_device does). MLX5DV_CONTEXT_FLAGS_DEVX: EOPNOTSUPP, as
// from a kernel without DevX (cxv's firmware commands are its own, not the program's);
// another flag or a comp_mask: EINVAL, as rdma-core refuses them.
CXV_ABI_EXPORT ibv_context* mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
    if (!mlx5dv_is_supported(device)) return fail_null<ibv_context>(EOPNOTSUPP);
    if (attr != nullptr) {
        if (attr->comp_mask != 0 || (attr->flags & ~std::uint32_t{MLX5DV_CONTEXT_FLAGS_DEVX}) != 0) {
            return fail_null<ibv_context>(EINVAL);
        }
        if (attr->flags & MLX5DV_CONTEXT_FLAGS_DEVX) return fail_null<ibv_context>(EOPNOTSUPP);
    }
    return ibv_open_device(device);
}

// mlx5dv_query_device(3): version 0 (mlx5dv.h's layouts); flags: CQE_V1 where the
// function writes version-1 CQEs (PRM cqe_version, which rdma-core's context takes as
// min(cap, 1)); no multi-packet WQEs (raw packet QPs only, which cxv lacks), no
// compressed or padded 128-byte CQEs, no packet-based credits, no real-time timestamps. comp_mask
// out: the fields asked for that are filled (kZeroedCaps).
CXV_ABI_EXPORT int mlx5dv_query_device(ibv_context* ctx, mlx5dv_context* attrs) {
    if (!is_cxv_context(ctx)) return fail_errno(EOPNOTSUPP);
    const std::uint64_t asked = attrs->comp_mask;
    const auto* caps = static_cast<const std::byte*>(cxv_abi_hca_caps(ctx));
    attrs->version = 0;
    attrs->flags = ifc::get<ifc::cmd_hca_cap::cqe_version>(caps) >= 1 ? MLX5DV_CONTEXT_FLAGS_CQE_V1 : 0;
    const std::uint64_t filled = asked & kZeroedCaps;
    if (filled & MLX5DV_CONTEXT_MASK_CQE_COMPRESION) attrs->cqe_comp_caps = {};
    if (filled & MLX5DV_CONTEXT_MASK_SWP) attrs->sw_parsing_caps = {};
    if (filled & MLX5DV_CONTEXT_MASK_STRIDING_RQ) attrs->striding_rq_caps = {};
    if (filled & MLX5DV_CONTEXT_MASK_TUNNEL_OFFLOADS) attrs->tunnel_offloads_caps = 0;
    if (filled & MLX5DV_CONTEXT_MASK_DYN_BFREGS) attrs->max_dynamic_bfregs = 0;
    if (filled & MLX5DV_CONTEXT_MASK_FLOW_ACTION_FLAGS) attrs->flow_action_flags = 0;
    if (filled & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS) attrs->dc_odp_caps = 0;
    if (filled & MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD) attrs->sig_caps = {};
    if (filled & MLX5DV_CONTEXT_MASK_DCI_STREAMS) attrs->dci_streams_caps = {};
    if (filled & MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH) attrs->max_wr_memcpy_length = 0;
    if (filled & MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD) attrs->crypto_caps = {};
    attrs->comp_mask = filled;
    return 0;
}

// mlx5dv_create_cq(3): ibv_create_cq_ex(3) with rdma-core's mlx5 checks, and a CQE size
// of 64 or 128 bytes (MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, else the MLX5_CQE_SIZE
// environment variable as rdma-core reads it, else 64): cqc.cqe_sz, a 128-byte entry
// holding its CQE in the second half (PRM "CQE Format"); mlx5dv_init_obj(3) then gives
// that cqe_size. EINVAL, as rdma-core answers: an unknown vendor comp_mask bit or flag,
// another CQE size, CQE compression (the function announces none) and 128-byte padding
// (cxv's driver does not ask for cqc.cqe_sz 2, so the feature is not offered). A context
// of another provider: EOPNOTSUPP.
CXV_ABI_EXPORT ibv_cq_ex* mlx5dv_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr, mlx5dv_cq_init_attr* dv) {
    if (!is_cxv_context(ctx)) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    unsigned size = 64;
    if (dv != nullptr) {
        constexpr std::uint64_t known =
            MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE | MLX5DV_CQ_INIT_ATTR_MASK_FLAGS | MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
        if ((dv->comp_mask & ~known) != 0) return fail_null<ibv_cq_ex>(EINVAL);
        if (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE) return fail_null<ibv_cq_ex>(EINVAL);
        if ((dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_FLAGS) && dv->flags != 0) return fail_null<ibv_cq_ex>(EINVAL);
    }
    if (dv != nullptr && (dv->comp_mask & MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE)) {
        size = dv->cqe_size;
    } else if (const char* env = std::getenv("MLX5_CQE_SIZE"); env != nullptr) {
        size = static_cast<unsigned>(std::atoi(env));
    }
    if (size != 64 && size != 128) return fail_null<ibv_cq_ex>(EINVAL);
    return cxv_abi_create_cq(ctx, attr, size);
}

// mlx5dv_create_qp(3): ibv_create_qp_ex(3) with rdma-core's checks of the mlx5
// attributes (EINVAL: an unknown comp_mask bit or create flag, DC attributes on a QP type
// other than IBV_QPT_DRIVER, a driver QP without them, both scatter-to-CQE flags). The
// scatter-to-CQE flags are taken and change nothing: ALLOW lets the driver have the
// device write small reads and receives into 128-byte CQEs, DISABLE forbids it, and
// cxv's driver never asks it (cqc and qpc cs_req/cs_res 0: the data goes to the
// buffers, which a program such as UCX handles either way, as it checks each CQE's
// inline-scatter bits). EOPNOTSUPP: DC QPs, tunnel offloads and self-loopback (raw
// packet and RSS QPs, which cxv lacks), packet-based credits, signature pipelining and
// mlx5 send operations (UMR, signature, memcpy), none of which the function offers.
CXV_ABI_EXPORT ibv_qp* mlx5dv_create_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr, mlx5dv_qp_init_attr* dv) {
    if (!is_cxv_context(ctx)) return fail_null<ibv_qp>(EOPNOTSUPP);
    if (attr == nullptr) return fail_null<ibv_qp>(EINVAL);
    if (dv == nullptr) {
        if (attr->qp_type == IBV_QPT_DRIVER) return fail_null<ibv_qp>(EINVAL);
        return ibv_create_qp_ex(ctx, attr);
    }
    constexpr std::uint64_t known = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_DC |
                                    MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
    if ((dv->comp_mask & ~known) != 0) return fail_null<ibv_qp>(EINVAL);
    if ((dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) && attr->qp_type != IBV_QPT_DRIVER) {
        return fail_null<ibv_qp>(EINVAL);
    }
    if (dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
        constexpr std::uint32_t scatter =
            MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE | MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
        constexpr std::uint32_t offered = MLX5DV_QP_CREATE_TUNNEL_OFFLOADS |
                                          MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC |
                                          MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC | scatter |
                                          MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE | MLX5DV_QP_CREATE_SIG_PIPELINING;
        if ((dv->create_flags & ~offered) != 0 || (dv->create_flags & scatter) == scatter) {
            return fail_null<ibv_qp>(EINVAL);
        }
        if ((dv->create_flags & ~scatter) != 0) return fail_null<ibv_qp>(EOPNOTSUPP);
    }
    if (attr->qp_type == IBV_QPT_DRIVER) {
        return fail_null<ibv_qp>((dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC) ? EOPNOTSUPP : EINVAL);
    }
    if ((dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) && dv->send_ops_flags != 0) {
        return fail_null<ibv_qp>(EOPNOTSUPP);
    }
    return ibv_create_qp_ex(ctx, attr);
}

// mlx5dv_init_obj has two versions, as in rdma-core: MLX5_1.2 (the default, what programs
// link today) and MLX5_1.0 (programs linked before 1.2, whose CQ answer differed).
extern "C" {
__attribute__((symver("mlx5dv_init_obj@@MLX5_1.2"))) int cxv_mlx5dv_init_obj_1_2(mlx5dv_obj* obj, std::uint64_t type) {
    return init_obj(obj, type);
}
__attribute__((symver("mlx5dv_init_obj@MLX5_1.0"))) int cxv_mlx5dv_init_obj_1_0(mlx5dv_obj* obj, std::uint64_t type) {
    const int err = init_obj(obj, type);
    if (err == 0 && (type & MLX5DV_OBJ_CQ)) {
        obj->cq.out->cq_uar = const_cast<void**>(uar_location(obj->cq.in->context, obj->cq.out->cq_uar));
    }
    return err;
}
}  // extern "C"

// mlx5dv_set_context_attr(3): rdma-core's one attribute is the program's own buffer
// allocators, which cxv's queues do not use (their rings are cxv's IOVA-mapped memory).
CXV_ABI_EXPORT int mlx5dv_set_context_attr(ibv_context*, mlx5dv_set_ctx_attr_type, void*) {
    return fail_errno(EOPNOTSUPP);
}

// mlx5dv_get_clock_info(3): no clock-info page is mapped (no timestamps either).
CXV_ABI_EXPORT int mlx5dv_get_clock_info(ibv_context*, mlx5dv_clock_info*) { return fail_errno(EOPNOTSUPP); }

// mlx5dv_query_port(3) (inline, through _mlx5dv_query_port): the e-switch vport fields
// are the kernel's; cxv has none to give.
CXV_ABI_EXPORT int _mlx5dv_query_port(ibv_context*, std::uint32_t, mlx5dv_port*, size_t) {
    return fail_errno(EOPNOTSUPP);
}
