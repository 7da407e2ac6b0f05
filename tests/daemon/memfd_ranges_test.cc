// The registry behind map_dma through cxvd (driver/vfio/memfd_ranges.h), on its own:
// private pages re-backed by a memfd in place (contents kept, the file and the memory the
// same bytes both ways), a range inside one reusing its file, a range from inside one past
// its end growing it, one from below into a held range refused, released ranges
// re-backed again, stale records noticed, unreadable pages refused, registered memfds
// (cxv::buffer's) found by their fd, and the fork behaviour docs/daemon.md describes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "driver/vfio/memfd_ranges.h"

namespace {

using cxv::driver::vfio::memfd_behind;
constexpr std::size_t P = 4096;

std::uintptr_t at(const std::byte* p) { return reinterpret_cast<std::uintptr_t>(p); }

void fill(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(seed + i * 7 + (i >> 9));
}
bool same(const std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) {
        if (p[i] != static_cast<std::byte>(seed + i * 7 + (i >> 9))) return false;
    }
    return true;
}

// The /proc/self/maps line holding `p`.
std::string mapping_of(const void* p) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    while (std::getline(maps, line)) {
        const auto lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        const auto hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
        if (a >= lo && a < hi) return line;
    }
    return {};
}

// The file's bytes at `offset` equal the memory at `p` (the same pages, not a copy).
bool file_is(int fd, std::uint64_t offset, const std::byte* p, std::size_t n) {
    std::vector<std::byte> buf(n);
    return ::pread(fd, buf.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n) &&
           std::memcmp(buf.data(), p, n) == 0;
}

struct anon {
    std::byte* base = nullptr;
    std::size_t size = 0;
    explicit anon(std::size_t pages) : size(pages * P) {
        void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(m != MAP_FAILED);
        base = static_cast<std::byte*>(m);
    }
    ~anon() { ::munmap(base, size); }
};

}  // namespace

TEST_CASE("private pages re-backed in place, shared with the file both ways") {
    anon m(8);
    fill(m.base, m.size, 3);
    auto s = memfd_behind(at(m.base + 2 * P), at(m.base + 4 * P));
    REQUIRE_MESSAGE(s, s.error().message);
    CHECK(s->rebacked);
    CHECK(s->offset == 0);
    CHECK(same(m.base, m.size, 3));
    CHECK(mapping_of(m.base + 2 * P).find("/memfd:cxv-reback") != std::string::npos);
    CHECK(mapping_of(m.base + P).find("memfd") == std::string::npos);  // only the pages asked for
    CHECK(file_is(s->fd, 0, m.base + 2 * P, 2 * P));
    m.base[2 * P + 5] = std::byte{0xee};  // the program's store is the file's
    CHECK(file_is(s->fd, 0, m.base + 2 * P, 2 * P));
    const std::byte b{0x11};
    REQUIRE(::pwrite(s->fd, &b, 1, 7) == 1);  // and the file's (the device's) is the program's
    CHECK(m.base[2 * P + 7] == b);
    int seals = ::fcntl(s->fd, F_GET_SEALS);
    CHECK((seals & F_SEAL_SHRINK) != 0);
    const auto ino_of = [](int fd) {
        struct stat st{};
        REQUIRE(::fstat(fd, &st) == 0);
        return st.st_ino;
    };
    const auto first_file = ino_of(s->fd);

    SUBCASE("inside a range: its file, no copy") {
        auto in = memfd_behind(at(m.base + 3 * P), at(m.base + 4 * P));
        REQUIRE_MESSAGE(in, in.error().message);
        CHECK_FALSE(in->rebacked);
        CHECK(in->fd == s->fd);
        CHECK(in->offset == P);
    }
    SUBCASE("from inside a held range past its end: the file grows") {
        auto grown = memfd_behind(at(m.base + 3 * P), at(m.base + 6 * P));
        REQUIRE_MESSAGE(grown, grown.error().message);
        CHECK(grown->fd == s->fd);
        CHECK(grown->offset == P);
        struct stat st{};
        REQUIRE(::fstat(s->fd, &st) == 0);
        CHECK(st.st_size == static_cast<off_t>(4 * P));
        CHECK(file_is(s->fd, 0, m.base + 2 * P, 4 * P));
        std::vector<std::byte> want(m.size);
        fill(want.data(), m.size, 3);
        CHECK(std::memcmp(m.base + 4 * P, want.data() + 4 * P, 2 * P) == 0);
    }
    SUBCASE("from below into a held range: EBUSY, then fine once released") {
        auto below = memfd_behind(at(m.base + P), at(m.base + 3 * P));
        REQUIRE_FALSE(below);
        CHECK(below.error().code == EBUSY);
        s->hold.reset();
        auto again = memfd_behind(at(m.base + P), at(m.base + 3 * P));
        REQUIRE_MESSAGE(again, again.error().message);
        CHECK(again->rebacked);
        CHECK(ino_of(again->fd) != first_file);
        CHECK(file_is(again->fd, 0, m.base + P, 2 * P));
        CHECK(m.base[2 * P + 7] == b);  // what was on the old file came along
    }
    SUBCASE("a record whose pages were mapped over is forgotten") {
        s->hold.reset();
        void* fresh = ::mmap(m.base + 2 * P, 2 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                             -1, 0);
        REQUIRE(fresh != MAP_FAILED);
        auto again = memfd_behind(at(m.base + 2 * P), at(m.base + 4 * P));
        REQUIRE_MESSAGE(again, again.error().message);
        CHECK(again->rebacked);
        CHECK(ino_of(again->fd) != first_file);
    }
    SUBCASE("fork: the child shares the re-backed pages (no copy-on-write) unless MADV_DONTFORK") {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            m.base[2 * P + 9] = std::byte{0x42};
            ::_exit(0);
        }
        int st = 0;
        REQUIRE(::waitpid(pid, &st, 0) == pid);
        CHECK(m.base[2 * P + 9] == std::byte{0x42});
    }
}

TEST_CASE("what cannot be re-backed") {
    anon m(4);
    SUBCASE("unreadable pages: EFAULT") {
        REQUIRE(::mprotect(m.base + P, P, PROT_NONE) == 0);
        auto s = memfd_behind(at(m.base), at(m.base + 2 * P));
        REQUIRE_FALSE(s);
        CHECK(s.error().code == EFAULT);
    }
    SUBCASE("read-only pages the device would write: EFAULT; read-only registration of them re-backs") {
        REQUIRE(::mprotect(m.base + P, P, PROT_READ) == 0);
        auto s = memfd_behind(at(m.base), at(m.base + 2 * P), true);
        REQUIRE_FALSE(s);
        CHECK(s.error().code == EFAULT);
        auto ro = memfd_behind(at(m.base), at(m.base + 2 * P), false);
        CHECK(ro);
    }
    SUBCASE("unmapped pages: EFAULT") {
        REQUIRE(::munmap(m.base + 3 * P, P) == 0);
        auto s = memfd_behind(at(m.base + 2 * P), at(m.base + 4 * P));
        REQUIRE_FALSE(s);
        CHECK(s.error().code == EFAULT);
    }
    SUBCASE("a shared mapping of the caller's own file: ENOENT (found another way)") {
        const int fd = ::memfd_create("mine", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, 2 * P) == 0);
        void* sh = ::mmap(nullptr, 2 * P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(sh != MAP_FAILED);
        auto s = memfd_behind(reinterpret_cast<std::uintptr_t>(sh), reinterpret_cast<std::uintptr_t>(sh) + 2 * P);
        REQUIRE_FALSE(s);
        CHECK(s.error().code == ENOENT);
        ::munmap(sh, 2 * P);
        ::close(fd);
    }
}

TEST_CASE("a registered memfd range is found by its fd") {
    const int fd = ::memfd_create("registered", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 4 * P) == 0);
    auto* sh = static_cast<std::byte*>(::mmap(nullptr, 4 * P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE(sh != MAP_FAILED);
    REQUIRE(cxv::driver::vfio::add_memfd_range(sh, 4 * P, fd));
    CHECK(cxv::driver::vfio::add_memfd_range(sh + P, P, fd).error().code == EBUSY);
    CHECK(cxv::driver::vfio::add_memfd_range(sh + 1, P, fd).error().code == EINVAL);
    auto s = memfd_behind(at(sh + P), at(sh + 3 * P));
    REQUIRE_MESSAGE(s, s.error().message);
    CHECK_FALSE(s->rebacked);
    CHECK(s->offset == P);
    struct stat a{}, b{};
    REQUIRE(::fstat(fd, &a) == 0);
    REQUIRE(::fstat(s->fd, &b) == 0);
    CHECK(a.st_ino == b.st_ino);
    CHECK(mapping_of(sh).find("/memfd:registered") != std::string::npos);
    s->hold.reset();
    cxv::driver::vfio::remove_memfd_range(sh);
    // Forgotten: now just the caller's own shared mapping.
    CHECK(memfd_behind(at(sh), at(sh + P)).error().code == ENOENT);
    ::munmap(sh, 4 * P);
    ::close(fd);
}
