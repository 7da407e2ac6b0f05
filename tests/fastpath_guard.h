// The fast path's rules as tests check them (tests/e2e/fastpath_rules_test,
// tests/perf/loop_rules_test): a thread that installs forbid_syscalls() on itself alone
// turns every system call but those a thread needs to end (exit, futex, munmap, madvise,
// rt_sigprocmask, rt_sigreturn) into SIGSYS, which the handler install_sigsys_handler()
// sets counts with the first call's number; operator new, replaced by the library,
// counts the allocations of a thread while its t_counting is set.
#pragma once

#include <atomic>

namespace cxv::test {

extern std::atomic<int> g_syscalls;
extern std::atomic<long> g_first_syscall;
extern std::atomic<int> g_allocations;
extern thread_local bool t_counting;

// The process's SIGSYS handler: counts refused system calls. False if it cannot be set.
bool install_sigsys_handler();
// Installs the filter on the calling thread only. False where seccomp is not available.
bool forbid_syscalls();
// Zeroes the counts.
void reset_guard_counts();

}  // namespace cxv::test
