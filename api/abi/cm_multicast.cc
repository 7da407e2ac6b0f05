// cxv's librdmacm.so.1: multicast (rdma_join_multicast(3), rdma_leave_multicast(3)) on
// RoCE v2, as Linux's RDMA CM does it for an Ethernet port (cma_iboe_join_multicast): no
// subnet administrator is asked, the group's MGID is its IPv4 address mapped
// (::ffff:a.b.c.d), and the join completes at once with RDMA_CM_EVENT_MULTICAST_JOIN,
// whose UD parameters address the group: QP 0xFFFFFF, the Q_Key RDMA_UDP_QKEY, an
// address vector to the MGID from the port's IPv4-mapped GID with hop limit 64. The
// id's QP, when it has one, is attached (ibv_attach_mcast, which also puts the group's
// MAC in the vport's filter, as Linux's IGMP join does for the netdev), except for a
// send-only join, as librdmacm leaves it.
//
// Not here: InfiniBand ports (a join is a question to the subnet administrator, which
// cxv has no client for: ENOSYS), and IPv6 groups on RoCE v2, which Linux's RDMA CM
// refuses too (EOPNOTSUPP).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "api/abi/cm.h"

using namespace cxv::cm;

namespace {

bool same_address(const sockaddr* a, const sockaddr_storage& b) {
    const auto* s = reinterpret_cast<const sockaddr*>(&b);
    if (a->sa_family != s->sa_family) return false;
    if (a->sa_family == AF_INET) {
        return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in*>(s)->sin_addr.s_addr;
    }
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(s)->sin6_addr, sizeof(in6_addr)) == 0;
}

// The port's first IPv4-mapped GID (RoCE v2 over IPv4), which a group's packets come
// from: -1 when it has none.
int ipv4_gid_index(ibv_context* ctx, std::uint8_t port) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, port, &pa) != 0) return -1;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid g{};
        if (ibv_query_gid(ctx, port, i, &g) != 0) continue;
        static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(g.raw, mapped, sizeof mapped) == 0) return i;
    }
    return -1;
}

int join(rdma_cm_id* id, const sockaddr* addr, std::uint32_t join_flags, void* context) {
    cm_id* c = of(id);
    if (addr == nullptr || join_flags >= RDMA_MC_JOIN_FLAG_RESERVED) return fail(EINVAL);
    if (c->id.verbs == nullptr) return fail(EINVAL);  // neither bound nor resolved
    ibv_port_attr pa{};
    if (ibv_query_port(c->id.verbs, c->id.port_num, &pa) != 0) return -1;
    if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) return fail(ENOSYS);
    if (addr->sa_family == AF_INET6) return fail(EOPNOTSUPP);
    if (addr->sa_family != AF_INET) return fail(EAFNOSUPPORT);
    const std::uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr);
    if ((ip >> 28) != 0xe) return fail(EINVAL);  // not an IPv4 group (224.0.0.0/4)
    const int sgid = ipv4_gid_index(c->id.verbs, c->id.port_num);
    if (sgid < 0) return fail(EADDRNOTAVAIL);

    cm_id::group g;
    std::memcpy(&g.addr, addr, sizeof(sockaddr_in));
    g.mgid.raw[10] = g.mgid.raw[11] = 0xff;
    std::memcpy(g.mgid.raw + 12, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
    {
        std::lock_guard lock(mu);
        if (std::any_of(c->groups.begin(), c->groups.end(), [&](const auto& j) { return same_address(addr, j.addr); })) {
            return fail(EADDRINUSE);
        }
    }
    if (c->id.qp != nullptr && join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
        if (const int e = ibv_attach_mcast(c->id.qp, &g.mgid, 0); e != 0) return fail(e);
        g.attached = true;
    }
    {
        std::lock_guard lock(mu);
        c->groups.push_back(g);
        queue_event(c, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
        auto* ch = reinterpret_cast<channel*>(c->id.channel);
        auto& ud = ch->queue.back()->ev.param.ud;
        ud.private_data = context;
        ud.private_data_len = 0;
        ud.qp_num = 0xffffff;
        ud.qkey = RDMA_UDP_QKEY;
        ud.ah_attr.is_global = 1;
        ud.ah_attr.grh.dgid = g.mgid;
        ud.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(sgid);
        ud.ah_attr.grh.hop_limit = 64;
        ud.ah_attr.port_num = c->id.port_num;
    }
    return wait_sync(c);
}

}  // namespace

CXV_CM_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
    return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

CXV_CM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
    // librdmacm's checks: the address and the join flags are both required.
    if (attr == nullptr || (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) == 0 ||
        (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) == 0) {
        return fail(EINVAL);
    }
    return join(id, attr->addr, attr->join_flags, context);
}

CXV_CM_EXPORT int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
    cm_id* c = of(id);
    if (addr == nullptr) return fail(EINVAL);
    cm_id::group g;
    {
        std::lock_guard lock(mu);
        const auto it = std::find_if(c->groups.begin(), c->groups.end(),
                                     [&](const auto& j) { return same_address(addr, j.addr); });
        if (it == c->groups.end()) return fail(EADDRNOTAVAIL);
        g = *it;
        c->groups.erase(it);
    }
    if (g.attached && c->id.qp != nullptr) {
        if (const int e = ibv_detach_mcast(c->id.qp, &g.mgid, 0); e != 0) return fail(e);
    }
    return 0;
}
