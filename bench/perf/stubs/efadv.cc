// libefa.so.1's efadv_* entry points that Debian's perftest imports (efadv(3)): a cxv
// function is no EFA device, so each fails as for one that is not.
#include <cerrno>
#include <cstdint>

#define CXV_STUB extern "C" __attribute__((visibility("default")))

CXV_STUB int efadv_query_device(void*, void*, std::uint32_t) { return EOPNOTSUPP; }
CXV_STUB void* efadv_create_qp_ex(void*, void*, void*, std::uint32_t) { return errno = EOPNOTSUPP, nullptr; }
