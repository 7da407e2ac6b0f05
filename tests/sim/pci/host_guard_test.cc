// The model's guarded copies (sim/pci/host_guard.h): a device access to memory the program
// released faults, and the copy, not the process, ends there, when the SIGSEGV handler
// asks recover() first (here the test's own handler, as the presentation layer's does);
// every other fault is the program's. Copies that do not fault move every byte, small
// and large, reads and writes.
#include <signal.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "sim/pci/host_guard.h"

namespace guard = cxv::sim::host_guard;

namespace {

volatile sig_atomic_t g_recovered = 0;

void on_segv(int, siginfo_t*, void* context) {
    if (guard::recover(context)) {
        g_recovered = g_recovered + 1;
        return;
    }
    ::signal(SIGSEGV, SIG_DFL);  // not ours: the fault takes the process, as it should
}

struct handler {
    struct sigaction old {};
    handler() {
        struct sigaction a {};
        a.sa_sigaction = on_segv;
        a.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&a.sa_mask);
        REQUIRE(::sigaction(SIGSEGV, &a, &old) == 0);
    }
    ~handler() { ::sigaction(SIGSEGV, &old, nullptr); }
};

// Pages: [0] readable and writable, [1] no access (released memory's stand-in).
struct pages {
    std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::byte* base = nullptr;
    pages() {
        void* p = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(p != MAP_FAILED);
        base = static_cast<std::byte*>(p);
        REQUIRE(::mprotect(base + page, page, PROT_NONE) == 0);
    }
    ~pages() { ::munmap(base, 2 * page); }
};

}  // namespace

TEST_CASE("copies of every length from 0 to 600 bytes move exactly their bytes, reads and writes") {
    std::vector<std::byte> src(700), dst(700);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
    for (std::size_t len = 0; len <= 600; ++len) {
        for (const std::size_t off : {0, 1, 5}) {
            std::memset(dst.data(), 0xee, dst.size());
            REQUIRE(guard::write(dst.data() + off, src.data() + 3, len));
            REQUIRE(std::memcmp(dst.data() + off, src.data() + 3, len) == 0);
            REQUIRE(dst[off + len] == std::byte{0xee});  // nothing past the end
            if (off != 0) REQUIRE(dst[off - 1] == std::byte{0xee});
            std::memset(dst.data(), 0xee, dst.size());
            REQUIRE(guard::read(dst.data() + off, src.data() + 3, len));
            REQUIRE(std::memcmp(dst.data() + off, src.data() + 3, len) == 0);
            REQUIRE(dst[off + len] == std::byte{0xee});
        }
    }
}

TEST_CASE("a copy into or out of memory nobody may touch faults, returns false, and the process goes on") {
    const handler h;
    const pages p;
    std::vector<std::byte> buf(4096, std::byte{9});
    g_recovered = 0;
    // Writes: small (the 8/4/2/1 pieces), 16-byte stores, and one that starts in the good
    // page and runs into the bad one, whose good part lands.
    CHECK_FALSE(guard::write(p.base + p.page, buf.data(), 7));
    CHECK_FALSE(guard::write(p.base + p.page + 64, buf.data(), 100));
    CHECK_FALSE(guard::write(p.base + p.page - 32, buf.data(), 64));
    CHECK(p.base[p.page - 32] == std::byte{9});
    CHECK(p.base[p.page - 1] == std::byte{9});
    // Reads: small, 16-byte loads, and a long one (`rep movsb`).
    CHECK_FALSE(guard::read(buf.data(), p.base + p.page, 3));
    CHECK_FALSE(guard::read(buf.data(), p.base + p.page, 48));
    CHECK_FALSE(guard::read(buf.data(), p.base + p.page - 1024, 2048));
    CHECK(g_recovered == 6);
    // The guard is still good for the next copy.
    CHECK(guard::write(p.base, buf.data(), 4096 - 1));
    CHECK(guard::read(buf.data(), p.base, 4096));
    CHECK(g_recovered == 6);
}

TEST_CASE("a fault outside the guarded copies is not recovered") {
    // recover() with a context whose instruction pointer is elsewhere says no, so the
    // program's own handler runs: here checked without faulting, from a real context.
    ucontext_t uc;
    REQUIRE(::getcontext(&uc) == 0);
    CHECK_FALSE(guard::recover(&uc));
    CHECK_FALSE(guard::recover(nullptr));
}
