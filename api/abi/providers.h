// What cxv's provider libraries (libmlx5.so.1, mlx5dv.cc) ask of cxv's libibverbs.so.1
// beyond rdma-core's ibv_* calls: the device list and the function's state live in
// libibverbs.so.1, once per process, so a provider library must not link a copy of them.
// Exported by libibverbs.so.1 under the version CXV_PRIVATE_1 (libibverbs.map), which no
// rdma-core library defines: cxv's libmlx5.so.1 does not load beside rdma-core's
// libibverbs, and nothing linked against rdma-core binds these names.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

extern "C" {

// Whether `device` is one of libibverbs.so.1's devices (an mlx5 function cxv drives):
// mlx5dv_is_supported(3).
bool cxv_abi_owns_device(ibv_device* device);

// The function's current general capabilities, the QUERY_HCA_CAP page bring-up read
// (hw::ifc::cmd_hca_cap), of a context of libibverbs.so.1's ibv_open_device.
const void* cxv_abi_hca_caps(ibv_context* ctx);

// mlx5dv_init_obj(3) of objects of libibverbs.so.1's contexts (mlx5dv_objects.cc): 0 or
// an errno value.
struct mlx5dv_obj;
int cxv_abi_init_obj(mlx5dv_obj* obj, std::uint64_t obj_type);

// ibv_create_cq_ex(3) of a context of libibverbs.so.1 with CQEs of `cqe_size` bytes (64
// or 128), for mlx5dv_create_cq(3) (objects.cc). NULL with errno set on failure.
ibv_cq_ex* cxv_abi_create_cq(ibv_context* ctx, ibv_cq_init_attr_ex* attr, unsigned cqe_size);

}  // extern "C"
