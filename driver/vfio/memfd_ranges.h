// Memory another process can map: page ranges of this process backed by a memfd whose
// descriptor this process holds. A function reached through its owner (device::attach,
// docs/daemon.md) can only be given memory the owner can map too, so map_dma looks the
// caller's pages up here:
//   - ranges registered by whoever allocated them (cxv::buffer: a sealed memfd mapped
//     MAP_SHARED), so no /proc/self/map_files (and no CAP_SYS_ADMIN) is needed;
//   - private memory (malloc, memalign, anonymous mmap, a private file mapping),
//     re-backed in place: a new memfd of the range's size gets the pages' contents and
//     is mapped MAP_SHARED | MAP_FIXED over the same addresses with the same protection,
//     so the program sees the same addresses and bytes. docs/daemon.md, "Memory of
//     unmodified programs", says what that changes (fork, concurrent stores, freeing).
// The registry is process-wide and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/result.h"

namespace cxv::driver::vfio {

// A memfd mapped MAP_SHARED at [base, base + len) (page-aligned) from file offset 0; the
// registry keeps a duplicate of `fd`. EINVAL for an unaligned or empty range, EBUSY when
// it overlaps a range registered before.
status add_memfd_range(void* base, std::size_t len, int fd);
// Forgets the range that starts at `base` (mappings the owner made of it stay valid: it
// holds its own).
void remove_memfd_range(void* base);

// The file behind the pages [lo, hi) (page-aligned) and where they start in it.
struct memfd_slice {
    int fd = -1;                 // valid while `hold` lives
    std::uint64_t offset = 0;    // of lo in the file
    std::shared_ptr<void> hold;  // counts the range as registered while it lives
    bool rebacked = false;       // the pages were private until this call
};
// [lo, hi) inside a registered range (checked against /proc/self/maps: still mapped from
// that file at the same offsets), or private memory re-backed now. A re-backed range is
// remembered while a slice holds it; after that its pages stay on the file (contents
// kept) and a later call copies them onto a new one. ENOENT when the
// pages are a shared mapping of some other file (the caller's own memfd: the caller
// finds it another way); EFAULT when a page of the range is not mapped or not readable,
// or (`writable`: the device may write it) not writable; EINVAL for private huge pages;
// A range that starts inside a re-backed one and goes past its end grows that file (the
// pages already on it stay where the owner mapped them). EBUSY when the range starts
// below a re-backed range an MR still holds and reaches into it, or overlaps a
// registered memfd range without lying inside it: the pages of one registration must be
// one file, and pages the device uses cannot move to another.
result<memfd_slice> memfd_behind(std::uintptr_t lo, std::uintptr_t hi, bool writable = false);

}  // namespace cxv::driver::vfio
