// cxv info's counters: the vport's traffic and a Q counter set.
#pragma once

#include "driver/hca/hca.h"

namespace cxv::tool {

// Prints QUERY_VPORT_COUNTER of the function's vport and QUERY_Q_COUNTER of a set
// allocated for the purpose (and released), with how many sets the device offers.
void print_counters(driver::hca& hca);

}  // namespace cxv::tool
