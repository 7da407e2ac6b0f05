// Multicast groups of UD QPs (cxv::qp::attach_multicast; IBA 10.5 "Multicast"): the
// verbs' checks (ib_core's ib_attach_mcast), ATTACH_TO_MCG and DETACH_FROM_MCG, and on
// an Ethernet port the group's MAC in the vport's filter, which a card needs for the
// group's RoCE packets to reach the function (a netdev's join puts it there; cxv has
// none, so the attach does).
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "api/neighbours.h"
#include "driver/hca/hca.h"
#include "driver/res/qp.h"

namespace cxv {

namespace {

// ff00::/8, or an IPv4 group as an IPv4-mapped address (::ffff:224.0.0.0/4): what
// ib_core's rdma_is_multicast_addr takes.
bool multicast_gid(const qp::gid& g) {
    return g[0] == 0xff || (eth::neighbours::ipv4_mapped(g) && (g[12] & 0xf0) == 0xe0);
}

std::string gid_text(const qp::gid& g) {
    std::string s;
    for (std::size_t i = 0; i < g.size(); i += 2) s += fmt::format("{}{:02x}{:02x}", i ? ":" : "", g[i], g[i + 1]);
    return s;
}

}  // namespace

status qp::check_multicast(const char* call, const gid& mgid, std::uint16_t mlid) const {
    if (!multicast_gid(mgid)) return error{EINVAL, fmt::format("{}: {} is not a multicast GID", call, gid_text(mgid))};
    if (type_ != qp_type::ud || !qp_) {
        return error{EINVAL, fmt::format("{}: QP 0x{:x} is not a UD QP", call, qpn_)};
    }
    if (!dev_->hca().ethernet() && (mlid < 0xc000 || mlid == 0xffff)) {
        return error{EINVAL, fmt::format("{}: LID 0x{:x} is not a multicast LID (0xC000-0xFFFE)", call, mlid)};
    }
    return ok_status();
}

status qp::attach_multicast(const gid& mgid, std::uint16_t mlid) {
    if (auto s = check_multicast("cxv::qp::attach_multicast", mgid, mlid); !s) return s;
    std::lock_guard lock(groups_mu_);
    if (std::find(groups_.begin(), groups_.end(), mgid) != groups_.end()) return ok_status();
    if (dev_->hca().ethernet()) {
        if (!group_filter_) {
            auto s = eth::steering::of(*dev_);
            if (!s) return s.error();
            group_filter_ = std::move(s).value();
        }
        if (auto j = group_filter_->join(*eth::neighbours::mac_of_multicast(mgid)); !j) return j;
    }
    if (auto s = qp_->attach_mcg(mgid); !s) {
        if (dev_->hca().ethernet()) (void)group_filter_->leave(*eth::neighbours::mac_of_multicast(mgid));
        return s;
    }
    groups_.push_back(mgid);
    return ok_status();
}

status qp::detach_multicast(const gid& mgid, std::uint16_t mlid) {
    if (auto s = check_multicast("cxv::qp::detach_multicast", mgid, mlid); !s) return s;
    std::lock_guard lock(groups_mu_);
    const auto it = std::find(groups_.begin(), groups_.end(), mgid);
    if (it == groups_.end()) {
        return error{EINVAL, fmt::format("cxv::qp::detach_multicast: QP 0x{:x} is not in group {}", qpn_,
                                         gid_text(mgid))};
    }
    if (auto s = qp_->detach_mcg(mgid); !s) return s;
    groups_.erase(it);
    if (dev_->hca().ethernet()) return group_filter_->leave(*eth::neighbours::mac_of_multicast(mgid));
    return ok_status();
}

std::size_t qp::multicast_groups() const {
    std::lock_guard lock(groups_mu_);
    return groups_.size();
}

}  // namespace cxv
