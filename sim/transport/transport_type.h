// The transports the model carries, as the QPC's st field names them (PRM "QP Context":
// st).
#pragma once

#include <cstdint>

#include "hw/ifc_qp.h"

namespace cxv::sim {

// `none`: a QP that carries nothing on the wire (REG_UMR): its packets' transport
// matches no opcode, and its send queue executes NOPs only.
enum class transport : std::uint8_t { rc = 0x0, uc = 0x1, ud = 0x2, none = 0xff };

// The transport of a QP of service type `st`: QP0 and QP1 (the special QPs) are
// datagram QPs, with UD's send WQEs (an address vector), receives (the GRH first) and
// completions.
constexpr transport transport_of_st(std::uint32_t st) {
    namespace qv = hw::ifc::qpc_values;
    if (st == qv::st_qp0 || st == qv::st_qp1) return transport::ud;
    return st <= qv::st_ud ? static_cast<transport>(st) : transport::none;
}

// The QPN a QP of service type `st` numbered `qpn` has on the wire: 0 or 1 for the
// special QPs (a packet's DETH source QP, and the destination QP that reaches them).
constexpr std::uint32_t wire_qpn(std::uint32_t st, std::uint32_t qpn) {
    namespace qv = hw::ifc::qpc_values;
    return st == qv::st_qp0 ? 0 : st == qv::st_qp1 ? 1 : qpn;
}

}  // namespace cxv::sim
