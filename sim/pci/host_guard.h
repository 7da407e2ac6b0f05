// Device accesses to host memory the program released while a DMA mapping still named it.
//
// vfio pins the pages it maps (vaddr_get_pfns), so on a card a program that frees or
// unmaps memory still mapped for DMA (glibc's free() unmaps a large block with an
// internal call no preload sees; a program may exit with buffers still registered) only
// orphans the pages: the device keeps writing into them, harmlessly, until UNMAP_DMA.
// The model reaches host memory through the program's own addresses instead, so such an
// access faults (SIGSEGV, SIGBUS). A copy made by read() or write() is cut short there
// instead of taking the process down, provided the process's handler for those signals
// calls recover() first (the presentation layer's does: sim/vfio/fault_signals.cc).
// Without that handler, a fault stays a crash.
//
// On x86-64 the copies are one routine whose instructions recover() knows, as a kernel's
// exception table knows its user-copy instructions: a fault there resumes at the
// routine's exit saying "faulted", and a copy costs no more than the copy (no setjmp, no
// thread-local frame). Elsewhere each copy runs under sigsetjmp.
#pragma once

#include <cstddef>

namespace cxv::sim::host_guard {

// A device write: `len` bytes from `src` to host memory at `host`, in ascending addresses
// (16-byte stores, the rest as one store ending at the last byte; under 16 bytes, 8, 4,
// 2 and 1): the order of a card's posted writes (iommu.cc). False if it faulted.
bool write(std::byte* host, const std::byte* src, std::size_t len) noexcept;

// A device read: `len` bytes of host memory at `host` into `dst`. False if it faulted.
bool read(std::byte* dst, const std::byte* host, std::size_t len) noexcept;

// For a SIGSEGV or SIGBUS handler, with its ucontext_t: true if the fault is in a copy
// above, which then returns false when the handler returns (on x86-64; elsewhere the
// copy is ended there, and this does not return); false anywhere else.
bool recover(void* ucontext) noexcept;

}  // namespace cxv::sim::host_guard
