// The short names the transport engine's units (xport_*.cc) give hw/ and wire/ types:
// the PRM's contexts and codes, the IBA opcodes and AETH syndromes. Private to this
// package (a source of :transport, not a header of it): only those units include it.
#pragma once

#include <chrono>

#include "hw/cqe.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "sim/wire/packet.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
namespace op = wire::opcode;
namespace syn = wire::aeth_syndrome;
using qpc = ifc::qpc;
using ads = ifc::ads;
using hw::cqe_syndrome;
using hw::wqe_opcode;
using clock_type = std::chrono::steady_clock;

}  // namespace cxv::sim
