// libmlx5.so.1's mlx5dv_* entry points that Debian's perftest imports (mlx5dv(3)), none
// of which a cxv function offers through rdma-core's direct-verbs ABI: each fails as the
// man pages say a missing feature does (NULL with errno, or an errno value), so a program
// that asks takes its plain-verbs path.
#include <cerrno>
#include <cstddef>

#define CXV_STUB extern "C" __attribute__((visibility("default")))

CXV_STUB void* mlx5dv_open_device(void*, void*) { return errno = EOPNOTSUPP, nullptr; }
CXV_STUB void* mlx5dv_create_qp(void*, void*, void*) { return errno = EOPNOTSUPP, nullptr; }
CXV_STUB void* mlx5dv_qp_ex_from_ibv_qp_ex(void*) { return errno = EOPNOTSUPP, nullptr; }
CXV_STUB void* mlx5dv_create_mkey(void*) { return errno = EOPNOTSUPP, nullptr; }
CXV_STUB int mlx5dv_destroy_mkey(void*) { return EOPNOTSUPP; }
CXV_STUB int mlx5dv_devx_general_cmd(void*, const void*, std::size_t, void*, std::size_t) { return EOPNOTSUPP; }
CXV_STUB int mlx5dv_crypto_login(void*, void*) { return EOPNOTSUPP; }
CXV_STUB void* mlx5dv_dek_create(void*, void*) { return errno = EOPNOTSUPP, nullptr; }
CXV_STUB int mlx5dv_dek_destroy(void*) { return EOPNOTSUPP; }
