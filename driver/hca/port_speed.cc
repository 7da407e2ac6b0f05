// A port's link speed and width, from PRM PTYS (Port Type and Speed Register, 0x5004):
// InfiniBand ib_proto_oper and ib_link_width_oper; Ethernet eth_proto_oper, or
// ext_eth_proto_oper when the port reports extended speeds (its extended capability
// field is non-zero, as Linux decides). The meaning of each bit is in hw/port_speeds.h.
#include <bit>

#include <fmt/format.h>

#include "driver/hca/hca.h"
#include "hw/ifc.h"
#include "hw/port_speeds.h"

namespace cxv::driver {

namespace ifc = hw::ifc;

hca::port_speed hca::decode_ptys(std::span<const std::byte> ptys, bool ethernet) {
    using R = ifc::ptys_reg;
    port_speed s;
    if (ptys.size() < R::size_bytes) return s;
    const std::byte* r = ptys.data();
    if (!ethernet) {
        const auto speed = static_cast<std::uint16_t>(ifc::get<R::ib_proto_oper>(r));
        const auto width = static_cast<std::uint16_t>(ifc::get<R::ib_link_width_oper>(r));
        if (speed == 0) return s;  // the link is down
        s.ib_speed = speed;
        const hw::ib_link_width* w = hw::ib_link_width_of(width);
        // A width PTYS does not name: 4X, as mlx5_ib assumes.
        if (w == nullptr) w = hw::ib_link_width_named("4X");
        s.ib_width = w->bit;
        s.lanes = w->lanes;
        if (const hw::ib_link_speed* sp = hw::ib_link_speed_of(speed)) {
            s.mode = fmt::format("{} {}", w->name, sp->name);
            s.mbps = std::uint64_t{sp->lane_mbps} * w->lanes;
        } else {
            s.mode = fmt::format("{} (ib_proto_oper {:#x})", w->name, speed);
        }
        return s;
    }
    const bool extended = ifc::get<R::ext_eth_proto_capability>(r) != 0;
    const std::uint32_t oper = extended ? ifc::get<R::ext_eth_proto_oper>(r) : ifc::get<R::eth_proto_oper>(r);
    if (oper == 0) return s;  // the link is down
    const hw::eth_link_mode* m = hw::eth_link_mode_of(oper, extended);
    // mlx5_ib's equivalent holds for exactly one mode; 4X QDR otherwise.
    const bool one = std::has_single_bit(oper) && m != nullptr;
    const auto* sp = hw::ib_link_speed_named(one ? m->ib_speed : hw::eth_unknown_ib_speed);
    const auto* w = hw::ib_link_width_named(one ? m->ib_width : hw::eth_unknown_ib_width);
    s.ib_speed = sp->bit;
    s.ib_width = w->bit;
    if (m == nullptr) {
        s.mode = fmt::format("{}eth_proto_oper {:#x}", extended ? "ext_" : "", oper);
        return s;
    }
    s.mode = std::string(m->display);
    s.mbps = m->mbps;
    s.lanes = m->lanes;
    return s;
}

result<std::vector<std::byte>> hca::query_ptys(unsigned port) {
    if (attached()) {
        if (port != 1) return error{EINVAL, fmt::format("{}: port {} (an attached function has port 1)", dev_->bdf(), port)};
        if (attached_.ptys.size() < ifc::ptys_reg::size_bytes) {
            return error{ENOTSUP, fmt::format("{}: the owner did not tell the port's speed", dev_->bdf())};
        }
        return attached_.ptys;
    }
    return read_port_reg(port, hw::reg_id::PTYS, ifc::ptys_reg::size_bytes,
                         ethernet() ? hw::ptys_proto_en : hw::ptys_proto_ib);
}

result<hca::port_speed> hca::query_port_speed(unsigned port) {
    auto r = query_ptys(port);
    if (!r) return r.error();
    return decode_ptys(*r, ethernet());
}

}  // namespace cxv::driver
