// Allocations through operator new on a thread that sets t_counting are counted (and
// served): loop_rules_test's measuring thread. A file of its own, so that no call the
// compiler inlines pairs these with the library's delete.
#include <atomic>
#include <cstdlib>
#include <new>

thread_local bool t_counting = false;
std::atomic<int> g_allocations{0};

void* operator new(std::size_t n) {
    if (t_counting) g_allocations.fetch_add(1);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
