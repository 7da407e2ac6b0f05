// Placeholder: layouts are being added.
#pragma once

#include "hw/layout.h"

namespace cxv::hw::ifc {

#define CXV_IFC_LAYOUTS_RESOURCES(X)

}  // namespace cxv::hw::ifc
