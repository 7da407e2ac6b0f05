// Placeholder: layouts are being added.
#pragma once

#include "hw/layout.h"

namespace cxv::hw::ifc {

#define CXV_IFC_LAYOUTS_HCA(X)

}  // namespace cxv::hw::ifc
