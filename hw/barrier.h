// The one barrier vocabulary of cxv. Each barrier is named by what it orders; no raw
// fence or inline assembly appears anywhere else in driver/, queues/, api/ or daemon/.
//
// Host (driver) side, against a device that reads and writes host memory by DMA:
//
//   to_device()    host stores to DMA memory (WQEs, doorbell records, mailboxes) become
//                  visible before any later store that makes the device look at them (a
//                  doorbell record update, an MMIO doorbell, status_own = 1).
//                    write WQE; to_device(); dbrec = pi; to_device(); mmio doorbell
//   from_device()  a load of a device-written validity mark (CQE/EQE owner bit, command
//                  ownership bit) happens before loads of the rest of that entry.
//                    if (owner ok) { from_device(); read CQE body }
//   wc_start()     stores before it (the doorbell record) are ordered before the
//                  write-combined stores that follow (BlueFlame copy).
//   wc_flush()     write-combined stores before it leave the CPU's WC buffers before any
//                  later store (the next doorbell, or another thread's BlueFlame copy).
//                    dbrec = pi; wc_start(); 64-byte BlueFlame stores; wc_flush()
//
// The device side of these orderings is the device's own business (a card orders its DMA
// in hardware); the model, which is software on another CPU, keeps its barriers in
// sim/device_barrier.h.
//
// x86-64 is TSO for write-back memory: stores are not reordered with stores, loads not
// with loads, and uncached MMIO stores stay in order with earlier stores; so to_device()
// and from_device() only need to stop the compiler (Linux's dma_wmb()/dma_rmb() agree).
// Write-combined stores are weakly ordered and need SFENCE on both sides.
#pragma once

#include <atomic>

namespace cxv::hw {

inline void compiler_barrier() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

#if defined(__x86_64__)

inline void to_device() noexcept { compiler_barrier(); }
inline void from_device() noexcept { compiler_barrier(); }
inline void wc_start() noexcept { __asm__ __volatile__("sfence" ::: "memory"); }
inline void wc_flush() noexcept { __asm__ __volatile__("sfence" ::: "memory"); }

#elif defined(__aarch64__)

inline void to_device() noexcept { __asm__ __volatile__("dmb oshst" ::: "memory"); }
inline void from_device() noexcept { __asm__ __volatile__("dmb oshld" ::: "memory"); }
inline void wc_start() noexcept { __asm__ __volatile__("dmb oshst" ::: "memory"); }
inline void wc_flush() noexcept { __asm__ __volatile__("dsb st" ::: "memory"); }

#else

inline void to_device() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void from_device() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void wc_start() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void wc_flush() noexcept { std::atomic_thread_fence(std::memory_order_seq_cst); }

#endif

}  // namespace cxv::hw
