#include "sim/pci/host_guard.h"

namespace cxv::sim::host_guard {

thread_local frame* t_frame = nullptr;

void recover() noexcept {
    frame* f = t_frame;
    if (f != nullptr) siglongjmp(f->env, 1);
}

}  // namespace cxv::sim::host_guard
