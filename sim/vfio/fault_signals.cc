// SIGSEGV and SIGBUS under the presentation layer: a device access to memory the program
// released while a DMA mapping still named it is cut short (sim/pci/host_guard.h) instead
// of killing the process, as a card's pinned pages would absorb it; every other fault
// goes to what the program installed, as if nothing stood between.
//
// The layer's handler is installed when the library loads and stays installed: the
// program's sigaction(2) and signal(2) for those two signals only record its disposition,
// and report the one recorded before (at first, what was installed before the layer: the
// default, or a sanitizer's handler). UCX, doctest and the sanitizers install their own.
#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <mutex>

#include "sim/pci/host_guard.h"

namespace {

using sigaction_fn = int (*)(int, const struct sigaction*, struct sigaction*);

sigaction_fn next_sigaction() {
    static const auto f = reinterpret_cast<sigaction_fn>(::dlsym(RTLD_NEXT, "sigaction"));
    return f;
}

// The program's dispositions: [0] SIGSEGV, [1] SIGBUS.
struct sigaction g_program[2];
std::atomic<bool> g_installed{false};
std::mutex g_mu;  // the program's sigaction calls, among themselves

int slot(int sig) { return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : -1; }

void on_fault(int sig, siginfo_t* info, void* context) {
    if (cxv::sim::host_guard::recover(context)) return;  // a device access, cut short
    struct sigaction& a = g_program[slot(sig)];
    if ((a.sa_flags & SA_SIGINFO) != 0 && a.sa_sigaction != nullptr) {
        const auto handler = a.sa_sigaction;
        if ((a.sa_flags & SA_RESETHAND) != 0) a.sa_handler = SIG_DFL;
        handler(sig, info, context);
        return;
    }
    if (a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN) {
        const auto handler = a.sa_handler;
        if ((a.sa_flags & SA_RESETHAND) != 0) a.sa_handler = SIG_DFL;
        handler(sig);
        return;
    }
    // The default action (a fault cannot be ignored): the layer steps aside, and the
    // access runs again, or the signal someone sent is sent again.
    struct sigaction d{};
    d.sa_handler = SIG_DFL;
    sigemptyset(&d.sa_mask);
    g_installed.store(false);
    next_sigaction()(sig, &d, nullptr);
    if (info != nullptr && info->si_code <= 0) ::raise(sig);
}

}  // namespace

namespace cxv::sim::vfio {

void install_fault_handler() {
    struct sigaction ours{};
    ours.sa_sigaction = on_fault;
    ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    std::lock_guard lock(g_mu);
    if (next_sigaction() == nullptr) return;
    if (next_sigaction()(SIGSEGV, &ours, &g_program[0]) != 0) return;
    if (next_sigaction()(SIGBUS, &ours, &g_program[1]) != 0) {
        next_sigaction()(SIGSEGV, &g_program[0], nullptr);
        return;
    }
    g_installed.store(true);
}

}  // namespace cxv::sim::vfio

extern "C" {

int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
    const int s = slot(sig);
    if (s < 0 || !g_installed.load()) {
        if (next_sigaction() == nullptr) return -1;
        return next_sigaction()(sig, act, old);
    }
    std::lock_guard lock(g_mu);
    if (old != nullptr) *old = g_program[s];
    if (act != nullptr) g_program[s] = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    if (slot(sig) < 0 || !g_installed.load()) {  // the C library's own, untouched
        using signal_fn = sighandler_t (*)(int, sighandler_t);
        static const auto next = reinterpret_cast<signal_fn>(::dlsym(RTLD_NEXT, "signal"));
        return next != nullptr ? next(sig, handler) : SIG_ERR;
    }
    struct sigaction a{}, old{};
    a.sa_handler = handler;
    a.sa_flags = SA_RESTART;
    sigemptyset(&a.sa_mask);
    if (sigaction(sig, &a, &old) != 0) return SIG_ERR;
    if ((old.sa_flags & SA_SIGINFO) != 0) return reinterpret_cast<sighandler_t>(reinterpret_cast<void*>(old.sa_sigaction));
    return old.sa_handler;
}

}  // extern "C"
