// The write-combining self-test: whether 64-byte BlueFlame writes reach the device
// whole through the mapping BlueFlame uses (sysfs resource0_wc where the kernel offers
// it, else VFIO's BAR0 mapping, uncached on a card). Linux keeps the same test in its
// core driver (mlx5_wc_support_get); it runs once per device, below the API that asks.
#pragma once

#include "base/result.h"
#include "driver/hca/hca.h"

namespace cxv::driver::wc {

// Builds a UD QP of its own (and a PD and CQ), takes it to RTS and posts NOPs whose ring
// copy is unsignaled but whose BlueFlame copy asks for a completion; only the last NOP
// is signaled in the ring. The first completion says which copy the device executed:
// true when it is an earlier NOP's (BlueFlame copies arrive whole, BlueFlame may be
// used), false when it is the last one's (8-byte doorbells only). An error when no
// completion comes within two seconds or the NOPs complete in error.
result<bool> self_test(hca& h);

}  // namespace cxv::driver::wc
