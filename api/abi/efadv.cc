// cxv's libefa.so.1: rdma-core's EFA direct-verbs library by name and symbol version
// (libefa.map: every name of rdma-core 44's), so that programs linked against it
// (perftest, libfabric's efa provider) load under `cxv exec`, where rdma-core's own
// copy cannot: it needs rdma-core's libibverbs. Every device of cxv's libibverbs is an
// mlx5 function, not an EFA device, so each call answers as rdma-core's libefa answers
// for a device that is not EFA, before it looks at anything else: EOPNOTSUPP, returned
// (the queries) or in errno with NULL (the creates).
#include <infiniband/efadv.h>

#include <cerrno>
#include <cstdint>

#include "api/abi/abi.h"

using cxv::abi::fail_errno;
using cxv::abi::fail_null;

CXV_ABI_EXPORT int efadv_query_device(ibv_context*, efadv_device_attr*, std::uint32_t) {
    return fail_errno(EOPNOTSUPP);
}

CXV_ABI_EXPORT int efadv_query_ah(ibv_ah*, efadv_ah_attr*, std::uint32_t) { return fail_errno(EOPNOTSUPP); }

CXV_ABI_EXPORT ibv_qp* efadv_create_driver_qp(ibv_pd*, ibv_qp_init_attr*, std::uint32_t) {
    return fail_null<ibv_qp>(EOPNOTSUPP);
}

CXV_ABI_EXPORT ibv_qp* efadv_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*, efadv_qp_init_attr*, std::uint32_t) {
    return fail_null<ibv_qp>(EOPNOTSUPP);
}

CXV_ABI_EXPORT ibv_cq_ex* efadv_create_cq(ibv_context*, ibv_cq_init_attr_ex*, efadv_cq_init_attr*, std::uint32_t) {
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
}

// Only ever meant for a CQ of efadv_create_cq, which never makes one here. rdma-core's
// computes the answer from its own CQ layout without a check; for a CQ of cxv's that
// would point into something else, so NULL (errno EOPNOTSUPP) instead.
CXV_ABI_EXPORT efadv_cq* efadv_cq_from_ibv_cq_ex(ibv_cq_ex*) { return fail_null<efadv_cq>(EOPNOTSUPP); }
