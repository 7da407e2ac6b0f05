// cxv's librdmacm.so.1: the rest of rdma-core's names (librdmacm.map), so that a program
// linked against rdma-core's librdmacm loads whatever it imports. The ports of an id are
// answered; what cxv does not offer fails as rdma-core's own calls fail, -1 with errno:
// ECE options and extended SRQs
// (EOPNOTSUPP), and rsockets -- rsocket() is ENOSYS, so no descriptor is ever an rsocket,
// and every call on one gets rdma-core's answer for a descriptor that is not: EBADF.
// rselect, like rpoll (cm_api.cc), is select(2) on ordinary descriptors.
#include <netinet/in.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <rdma/rdma_verbs.h>

#include <cerrno>

#include "api/abi/cm.h"

using cxv::cm::fail;

namespace {

// ucma_get_port's answer: the port of an IPv4 or IPv6 address, in network order; 0 for
// any other family (cxv's ids have no AF_IB addresses).
__be16 port_of(const sockaddr& a) {
    if (a.sa_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(a).sin_port;
    if (a.sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6&>(a).sin6_port;
    return 0;
}

}  // namespace

// rdma_get_src_port(3) and rdma_get_dst_port(3): the ports of the id's bound (or given)
// source and resolved destination addresses.
CXV_CM_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) { return port_of(id->route.addr.src_addr); }
CXV_CM_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) { return port_of(id->route.addr.dst_addr); }

// ECE (rdma_set_local_ece(3), rdma_get_remote_ece(3)): the arguments rdma-core checks
// (EINVAL), then EOPNOTSUPP: cxv's connection messages carry no ECE options.
CXV_CM_EXPORT int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
    if (id == nullptr || id->qp != nullptr || ece == nullptr || ece->vendor_id == 0 || ece->comp_mask != 0) {
        return fail(EINVAL);
    }
    return fail(EOPNOTSUPP);
}
CXV_CM_EXPORT int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
    if (id == nullptr || id->qp != nullptr || ece == nullptr) return fail(EINVAL);
    return fail(EOPNOTSUPP);
}

// As rdma_create_srq: cxv's librdmacm makes no SRQs.
CXV_CM_EXPORT int rdma_create_srq_ex(rdma_cm_id*, ibv_srq_init_attr_ex*) { return fail(EOPNOTSUPP); }

// --- rsockets (rsocket(7)) -----------------------------------------------------------------

CXV_CM_EXPORT int rsocket(int, int, int) { return fail(ENOSYS); }
CXV_CM_EXPORT int rbind(int, const sockaddr*, socklen_t) { return fail(EBADF); }
CXV_CM_EXPORT int rlisten(int, int) { return fail(EBADF); }
CXV_CM_EXPORT int raccept(int, sockaddr*, socklen_t*) { return fail(EBADF); }
CXV_CM_EXPORT int rconnect(int, const sockaddr*, socklen_t) { return fail(EBADF); }
CXV_CM_EXPORT int rshutdown(int, int) { return fail(EBADF); }
CXV_CM_EXPORT int rclose(int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rrecv(int, void*, size_t, int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rrecvmsg(int, msghdr*, int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rsend(int, const void*, size_t, int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rsendmsg(int, const msghdr*, int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rread(int, void*, size_t) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rreadv(int, const iovec*, int) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rwrite(int, const void*, size_t) { return fail(EBADF); }
CXV_CM_EXPORT ssize_t rwritev(int, const iovec*, int) { return fail(EBADF); }
CXV_CM_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) { return fail(EBADF); }
CXV_CM_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) { return fail(EBADF); }
CXV_CM_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) { return fail(EBADF); }
CXV_CM_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) { return fail(EBADF); }
CXV_CM_EXPORT int rfcntl(int, int, ...) { return fail(EBADF); }
CXV_CM_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) { return fail(EBADF); }
CXV_CM_EXPORT int riounmap(int, void*, size_t) { return fail(EBADF); }
CXV_CM_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
    errno = EBADF;
    return static_cast<size_t>(-1);
}
CXV_CM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
    return ::select(nfds, readfds, writefds, exceptfds, timeout);
}
