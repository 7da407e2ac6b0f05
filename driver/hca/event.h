// What the application hears about an HCA (from its event thread): cxv::event
// (base/values.h).
#pragma once

#include "base/values.h"

namespace cxv::driver {

using hca_event = cxv::event;

}  // namespace cxv::driver
