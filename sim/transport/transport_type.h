// The transports the model carries, as the QPC's st field names them (PRM "QP Context":
// st).
#pragma once

#include <cstdint>

namespace cxv::sim {

enum class transport : std::uint8_t { rc = 0x0, uc = 0x1, ud = 0x2 };

}  // namespace cxv::sim
