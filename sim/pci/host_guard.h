// Device accesses to host memory the program released while a DMA mapping still named it.
//
// vfio pins the pages it maps (vaddr_get_pfns), so on a card a program that frees or
// unmaps memory still mapped for DMA (glibc's free() unmaps a large block with an
// internal call no preload sees; a program may exit with buffers still registered) only
// orphans the pages: the device keeps writing into them, harmlessly, until UNMAP_DMA.
// The model reaches host memory through the program's own addresses instead, so such an
// access faults (SIGSEGV, SIGBUS). A copy run through faulted() is cut short there
// instead of taking the process down, provided the process's handler for those signals
// calls recover() first (the presentation layer's does: sim/vfio/preload.cc). Without
// that handler, a fault stays a crash.
#pragma once

#include <csetjmp>

namespace cxv::sim::host_guard {

struct frame {
    sigjmp_buf env;
    frame* outer;
};
extern thread_local frame* t_frame;

// Runs `copy`, which touches host memory; true if it faulted (and was cut short there).
template <typename F>
bool faulted(F&& copy) noexcept {
    frame f;
    f.outer = t_frame;
    if (sigsetjmp(f.env, 0) != 0) {
        t_frame = f.outer;
        return true;
    }
    t_frame = &f;
    copy();
    t_frame = f.outer;
    return false;
}

// For a SIGSEGV or SIGBUS handler: inside faulted()'s copy on this thread, ends the copy
// there (does not return); anywhere else, returns.
void recover() noexcept;

}  // namespace cxv::sim::host_guard
