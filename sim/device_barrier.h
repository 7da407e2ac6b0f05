// The device model's side of the host/device orderings of hw/barrier.h. The model is
// software running on another CPU than the driver, so where a card's DMA engine orders
// its reads and writes in hardware, the model needs CPU fences:
//
//   device_acquire()  after the device has seen a doorbell or ownership bit, before it
//                     reads what the host wrote ahead of it (pairs with the host's
//                     to_device() before the doorbell).
//   device_release()  after the device has written an entry's body, before it writes the
//                     owner bit or ownership change that hands the entry to the host
//                     (pairs with the host's from_device() after it sees the bit).
#pragma once

#include <atomic>

namespace cxv::sim {

inline void device_acquire() noexcept { std::atomic_thread_fence(std::memory_order_acquire); }
inline void device_release() noexcept { std::atomic_thread_fence(std::memory_order_release); }

}  // namespace cxv::sim
