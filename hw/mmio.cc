#include "hw/mmio.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace cxv::hw {

#if defined(__x86_64__)

__attribute__((target("movdir64b"))) void mmio_window::movdir64b(std::size_t off,
                                                                  const void* src) const noexcept {
    _movdir64b(const_cast<std::byte*>(base_) + off, src);
}

bool cpu_has_movdir64b() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx >> 28) & 1;
}

#else

void mmio_window::movdir64b(std::size_t off, const void* src) const noexcept { copy64(off, src); }
bool cpu_has_movdir64b() noexcept { return false; }

#endif

}  // namespace cxv::hw
