#include "driver/vfio/memfd_ranges.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/errno_text.h"
#include "base/unique_fd.h"

namespace cxv::driver::vfio {

namespace {

constexpr std::uintptr_t kPage = 4096;
constexpr const char* kRebackName = "cxv-reback";  // memfd_create(2) name: "/memfd:cxv-reback (deleted)"

struct range_rec {
    std::uintptr_t base = 0, end = 0;
    unique_fd fd;
    ino_t ino = 0;
    bool rebacked = false;
    unsigned holds = 0;  // live slices (one per DMA mapping made of it)
};

// Never destroyed: a mapping released during exit still finds it.
struct registry {
    std::mutex mu;
    std::map<std::uintptr_t, std::shared_ptr<range_rec>> ranges;  // by base
};
registry& reg() {
    static auto* r = new registry;
    return *r;
}

// One line of /proc/self/maps (proc(5)).
struct vma {
    std::uintptr_t start = 0, end = 0;
    std::uint64_t offset = 0, inode = 0;
    std::string perms, path;
    bool shared() const { return perms.size() >= 4 && perms[3] == 's'; }
    bool readable() const { return !perms.empty() && perms[0] == 'r'; }
    int prot() const {
        return (perms.size() >= 1 && perms[0] == 'r' ? PROT_READ : 0) |
               (perms.size() >= 2 && perms[1] == 'w' ? PROT_WRITE : 0) |
               (perms.size() >= 3 && perms[2] == 'x' ? PROT_EXEC : 0);
    }
};

// The mappings that meet [lo, hi), in address order.
std::vector<vma> mappings(std::uintptr_t lo, std::uintptr_t hi) {
    std::vector<vma> out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        vma m;
        char perms[8] = {};
        std::uint64_t inode = 0;
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %" SCNx64 " %*s %" SCNu64 " %n", &m.start, &m.end,
                        perms, &m.offset, &inode, &path_at) < 5) {
            continue;
        }
        if (m.end <= lo || m.start >= hi) continue;
        m.perms = perms;
        m.inode = inode;
        if (path_at > 0 && static_cast<std::size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
        out.push_back(std::move(m));
    }
    return out;
}

// Every page of [lo, hi) is still the file of `r` at offset (address - base).
bool still_mapped(const range_rec& r, const std::vector<vma>& vs, std::uintptr_t lo, std::uintptr_t hi) {
    std::uintptr_t at = lo;
    for (const auto& v : vs) {
        if (v.end <= lo || v.start >= hi) continue;
        if (v.start > at) return false;
        if (!v.shared() || v.inode != r.ino || v.offset != v.start - r.base) return false;
        at = v.end;
    }
    return at >= hi;
}

std::shared_ptr<void> hold_of(const std::shared_ptr<range_rec>& r) {
    ++r->holds;  // under the registry's lock
    return std::shared_ptr<void>(r.get(), [keep = r](void*) {
        registry& g = reg();
        std::lock_guard lock(g.mu);
        // A re-backed range nobody holds is forgotten (its fd closed with the record): its
        // pages stay mapped from the file, and a later registration copies them onto a
        // new one. Keeping it would keep an fd per range the program ever registered.
        if (--keep->holds == 0 && keep->rebacked) {
            const auto it = g.ranges.find(keep->base);
            if (it != g.ranges.end() && it->second == keep) g.ranges.erase(it);
        }
    });
}


// The private pages [r.end, to) (their mappings among `vs`) moved onto r's file, which
// grows to hold them at offset (address - r.base): contents copied, then the file mapped
// over each mapping with its protection. The owner's mappings of the file's first part
// are untouched (a memfd sealed F_SEAL_SHRINK may still grow).
status extend(range_rec& r, std::uintptr_t to, const std::vector<vma>& vs) {
    const std::uintptr_t from = r.end;
    const std::size_t size = to - from;
    const off_t at = static_cast<off_t>(from - r.base);
    if (::ftruncate(r.fd.get(), at + static_cast<off_t>(size)) != 0) {
        return sys_error(errno, "ftruncate of a re-backing memfd");
    }
    // The kernel copies the pages (pwrite(2) as a raw system call): whole pages, so bytes
    // around the caller's buffer that belong to no object of its own too, which an
    // AddressSanitizer build would report if this process read them itself.
    for (std::size_t done = 0; done < size;) {
        const long n = ::syscall(SYS_pwrite64, r.fd.get(), reinterpret_cast<const void*>(from + done), size - done,
                                 at + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return sys_error(n < 0 ? errno : EIO, "copying pages onto a re-backing memfd");
        done += static_cast<std::size_t>(n);
    }
    for (const auto& v : vs) {
        const std::uintptr_t a = std::max(v.start, from), b = std::min(v.end, to);
        if (a >= b) continue;
        // The same bytes either way: a failure part-way leaves some pages on the file.
        if (::mmap(reinterpret_cast<void*>(a), b - a, v.prot(), MAP_SHARED | MAP_FIXED, r.fd.get(),
                   static_cast<off_t>(a - r.base)) == MAP_FAILED) {
            return sys_error(errno, fmt::format("mmap(MAP_FIXED) of a memfd over [{:#x}, {:#x})", a, b));
        }
    }
    r.end = to;
    return ok_status();
}

// A new re-backing file for pages from `lo` on (empty until extend()), sealed against
// shrinking as the owner requires.
result<std::shared_ptr<range_rec>> new_file(std::uintptr_t lo) {
    auto r = std::make_shared<range_rec>();
    r->fd.reset(::memfd_create(kRebackName, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!r->fd) return sys_error(errno, "memfd_create to re-back registered memory");
    r->base = r->end = lo;
    r->rebacked = true;
    if (::fcntl(r->fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) return sys_error(errno, "sealing a re-backing memfd");
    struct stat st{};
    if (::fstat(r->fd.get(), &st) != 0) return sys_error(errno, "fstat of a re-backing memfd");
    r->ino = st.st_ino;
    return r;
}

}  // namespace

status add_memfd_range(void* base, std::size_t len, int fd) {
    const auto lo = reinterpret_cast<std::uintptr_t>(base);
    if (len == 0 || lo % kPage != 0 || len % kPage != 0) {
        return error{EINVAL, fmt::format("add_memfd_range: [{}, +{}) is not whole pages", base, len)};
    }
    struct stat st{};
    if (::fstat(fd, &st) != 0) return sys_error(errno, "add_memfd_range: fstat");
    auto r = std::make_shared<range_rec>();
    r->base = lo;
    r->end = lo + len;
    r->ino = st.st_ino;
    r->fd.reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!r->fd) return sys_error(errno, "add_memfd_range: dup");
    registry& g = reg();
    std::lock_guard lock(g.mu);
    const auto vs = mappings(lo, r->end);
    // Records of pages since unmapped or mapped over (this new mapping among them) go.
    auto it = g.ranges.lower_bound(r->end);
    while (it != g.ranges.begin()) {
        --it;
        const auto& old = it->second;
        if (old->end <= lo) break;
        const std::uintptr_t a = std::max(old->base, lo), b = std::min(old->end, r->end);
        if (still_mapped(*old, vs, a, b)) {
            return error{EBUSY, fmt::format("add_memfd_range: [{}, +{}) overlaps a registered range", base, len)};
        }
        it = g.ranges.erase(it);
    }
    g.ranges.emplace(lo, std::move(r));
    return ok_status();
}

void remove_memfd_range(void* base) {
    registry& g = reg();
    std::lock_guard lock(g.mu);
    g.ranges.erase(reinterpret_cast<std::uintptr_t>(base));
}

result<memfd_slice> memfd_behind(std::uintptr_t lo, std::uintptr_t hi, bool writable) {
    // The maps are read under the lock: another thread's re-backing cannot come between.
    registry& g = reg();
    std::lock_guard lock(g.mu);
    const auto vs = mappings(lo, hi);
    std::uintptr_t covered = lo;
    for (const auto& v : vs) {
        if (v.start > covered) break;
        covered = v.end;
    }
    if (covered < hi) {
        return error{EFAULT, fmt::format("[{:#x}, {:#x}) is not mapped from {:#x} on", lo, hi, covered)};
    }
    for (const auto& v : vs) {
        // Memory the device may write must be writable here too (ibv_reg_mr(3) with
        // local write on read-only pages: EFAULT, as the kernel's pinning refuses it).
        if (writable && (v.perms.size() < 2 || v.perms[1] != 'w')) {
            return error{EFAULT, fmt::format("[{:#x}, {:#x}) is not writable ({}), but the registration lets the "
                                             "device write it", v.start, v.end, v.perms)};
        }
        // Private huge pages cannot be moved onto a 4 KiB-page file in place.
        if (v.path.rfind("/anon_hugepage", 0) == 0) {
            return error{EINVAL, fmt::format("[{:#x}, {:#x}) is private huge-page memory (MAP_HUGETLB), which "
                                             "cannot be re-backed: use cxv::buffer or a MFD_HUGETLB memfd mapped "
                                             "MAP_SHARED", v.start, v.end)};
        }
    }
    // Ranges that meet [lo, hi): one holding it whole answers; stale ones (unmapped or
    // mapped over since) are forgotten; one holding `lo` and re-backed here grows to
    // `hi`; any other that something still holds makes it EBUSY, and the rest are
    // forgotten (their pages are copied like private ones).
    auto it = g.ranges.lower_bound(hi);
    std::vector<std::uintptr_t> drop;
    std::shared_ptr<range_rec> grow;
    while (it != g.ranges.begin()) {
        --it;
        const auto& r = it->second;
        if (r->end <= lo) break;
        const std::uintptr_t a = std::max(r->base, lo), b = std::min(r->end, hi);
        std::vector<vma> part;
        for (const auto& v : vs) {
            if (v.end > a && v.start < b) part.push_back(v);
        }
        if (!still_mapped(*r, part, a, b)) {
            drop.push_back(r->base);
            continue;
        }
        if (r->base <= lo && hi <= r->end) {
            memfd_slice s;
            s.fd = r->fd.get();
            s.offset = lo - r->base;
            s.hold = hold_of(r);
            return s;
        }
        if (r->base <= lo && r->rebacked) {
            grow = r;
            continue;
        }
        if (r->holds > 0 || !r->rebacked) {
            return error{EBUSY, fmt::format("[{:#x}, {:#x}) overlaps [{:#x}, {:#x}) without lying inside it, {}; "
                                            "the pages of one registration must be one file: register the lower "
                                            "range first, or both within one", lo, hi, r->base, r->end,
                                            r->rebacked ? "re-backed for an MR that still holds it"
                                                        : "a registered memfd range")};
        }
        drop.push_back(r->base);
    }
    const std::uintptr_t from = grow ? grow->end : lo;
    bool ours = true;
    for (const auto& v : vs) {
        if (v.end <= from) continue;
        if (!v.readable()) {
            return error{EFAULT, fmt::format("[{:#x}, {:#x}) is not readable ({}), so cannot be registered", v.start,
                                             v.end, v.perms)};
        }
        if (v.shared() && v.path.rfind(std::string("/memfd:") + kRebackName, 0) != 0) ours = false;
    }
    if (!ours) return error{ENOENT, fmt::format("[{:#x}, {:#x}) is a shared mapping", from, hi)};
    for (const auto d : drop) g.ranges.erase(d);
    std::shared_ptr<range_rec> r = grow;
    if (!r) {
        auto made = new_file(lo);
        if (!made) return made.error();
        r = std::move(made).value();
    }
    if (auto e = extend(*r, hi, vs); !e) return e.error();
    if (!grow) g.ranges.emplace(lo, r);
    memfd_slice s;
    s.fd = r->fd.get();
    s.offset = lo - r->base;
    s.hold = hold_of(r);
    s.rebacked = true;
    return s;
}

}  // namespace cxv::driver::vfio
