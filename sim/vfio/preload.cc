// The preload library's interposed C library functions. Each one asks a cheap question
// first (is this a path under /sys or /dev, is this fd one of ours) and otherwise calls
// straight through to the C library, so programs that never touch VFIO run unchanged.
//
// Which symbols: those real binaries import for these operations — the plain and 64-bit
// variants, the FORTIFY ones (__open_2, __pread_chk), the pre-2.33 stat wrappers
// (__xstat and friends), and stdio's fopen, which does not go through open().
// The interposers define open() and friends themselves; FORTIFY's inline wrappers of the
// same names must not be in the way.
#undef _FORTIFY_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/vfio/host.h"
#include "sim/vfio/libc.h"

using cxv::sim::vfio::host;
using cxv::sim::vfio::libc;
using cxv::sim::vfio::lookup;
using cxv::sim::vfio::node;
using cxv::sim::vfio::node_kind;
using cxv::sim::vfio::sysfs;

extern "C" void __chk_fail(void) __attribute__((noreturn));

namespace cxv::sim::vfio {
void install_fault_handler();  // sim/vfio/fault_signals.cc
}

namespace {

// Set while the presentation layer itself runs, so that its own use of the C library
// (reading a config file, creating memfds) never comes back in.
thread_local bool in_layer = false;

struct layer_scope {
    bool outer;
    layer_scope() : outer(in_layer) { in_layer = true; }
    ~layer_scope() { in_layer = outer; }
};

// A path-based call: false when the path is not ours (call the C library with `path`,
// which a redirect through one of our links has replaced), true with the lookup.
bool ours(const char*& path, bool follow, lookup& out, std::string& storage) {
    if (in_layer || !sysfs::candidate(path)) return false;
    layer_scope scope;
    out = host::get().fs().resolve(path, follow);
    if (out.what == lookup::redirect) {
        storage = out.path;
        path = storage.c_str();
        return false;
    }
    return out.what != lookup::not_ours;
}

int fail(int e) {
    errno = e;
    return -1;
}

mode_t mode_arg(int flags, va_list ap) {
    return (flags & (O_CREAT | __O_TMPFILE)) ? static_cast<mode_t>(va_arg(ap, unsigned)) : 0;
}

int open_ours(const lookup& l, int flags) {
    if (l.what == lookup::error) return fail(l.err);
    if ((flags & O_CREAT) && (flags & O_EXCL)) return fail(EEXIST);
    layer_scope scope;
    if (l.n->kind == node_kind::directory && (flags & O_ACCMODE) == O_RDONLY) {
        // A directory the host may have too (/dev/vfio) is the host's if it exists.
        if (l.n->shared) {
            const int fd = libc().open(l.path.c_str(), flags);
            if (fd >= 0) return fd;
        }
        const int r = host::get().open_directory(l.path, flags);
        return r < 0 ? fail(-r) : r;
    }
    const int r = host::get().open_node(*l.n, flags);
    return r < 0 ? fail(-r) : r;
}

// Directory streams that list emulated entries after the real ones: the entries of an
// emulated directory (whose real stream is an empty directory), or those that appear in
// a host directory (the functions in /sys/bus/pci/devices).
struct dir_stream {
    const std::vector<cxv::sim::vfio::dir_entry>* extra;
    std::string dir;  // the emulated directory's path (its entries come and go with the binding)
    std::size_t next = 0;
    std::vector<std::string> seen;  // host entries, not to be listed twice
    struct dirent64 ent;
};
std::mutex dirs_mu;
std::unordered_map<DIR*, dir_stream> dirs;
std::atomic<int> dir_count{0};

DIR* with_entries(DIR* d, const std::string& path) {
    if (d == nullptr) return d;
    const auto* extra = host::get().fs().entries(path);
    if (extra == nullptr) return d;
    std::lock_guard lock(dirs_mu);
    dirs[d] = dir_stream{extra, path, 0, {}, {}};
    dir_count.store(static_cast<int>(dirs.size()), std::memory_order_release);
    return d;
}

struct dirent64* next_entry(DIR* d) {
    if (dir_count.load(std::memory_order_acquire) == 0) return libc().readdir64(d);
    std::lock_guard lock(dirs_mu);
    auto it = dirs.find(d);
    if (it == dirs.end()) return libc().readdir64(d);
    dir_stream& st = it->second;
    const int saved = errno;
    errno = 0;
    if (struct dirent64* r = libc().readdir64(d)) {
        errno = saved;
        st.seen.emplace_back(r->d_name);
        return r;
    }
    if (errno != 0) return nullptr;  // a real error, not the end of the real entries
    errno = saved;
    while (st.next < st.extra->size()) {
        const auto& e = (*st.extra)[st.next++];
        if (std::find(st.seen.begin(), st.seen.end(), e.name) != st.seen.end()) continue;
        if (!host::get().fs().present(st.dir + "/" + e.name)) continue;
        std::memset(&st.ent, 0, sizeof st.ent);
        st.ent.d_ino = 0x5d000000u + st.next;
        st.ent.d_off = static_cast<off64_t>(st.next);
        st.ent.d_reclen = sizeof st.ent;
        st.ent.d_type = e.type;
        std::snprintf(st.ent.d_name, sizeof st.ent.d_name, "%s", e.name.c_str());
        return &st.ent;
    }
    return nullptr;
}

int stat_ours(const lookup& l, struct stat* st) {
    if (l.what == lookup::error) return fail(l.err);
    layer_scope scope;
    host::get().fs().fill_stat(*l.n, *st);
    return 0;
}

ssize_t readlink_ours(const lookup& l, char* buf, size_t size) {
    if (l.what == lookup::error) return fail(l.err);
    if (l.n->kind != node_kind::symlink) return fail(EINVAL);
    const std::string text = host::get().fs().link_text(*l.n);
    const size_t n = std::min(size, text.size());
    std::memcpy(buf, text.data(), n);
    return static_cast<ssize_t>(n);
}

// readlink(2)'s answer `real` (n bytes, or -1) given back in `buf`: a /proc/PID/fd link to
// the layer's stand-in for a VFIO node as the node's path (kProcLinkPrefix), anything
// else as it is, cut to `size` bytes as readlink cuts.
ssize_t proc_link(ssize_t n, const char* real, char* buf, size_t size) {
    if (n < 0) return n;
    std::string_view t(real, static_cast<size_t>(n));
    constexpr std::string_view deleted = " (deleted)";
    if (!in_layer && t.starts_with(std::string("/memfd:") + cxv::sim::vfio::kProcLinkPrefix) && t.ends_with(deleted)) {
        layer_scope scope;
        const std::string run = "/memfd:" + host::get().proc_link_prefix();
        if (t.starts_with(run)) t = t.substr(run.size(), t.size() - run.size() - deleted.size());
    }
    const size_t len = std::min(size, t.size());
    std::memcpy(buf, t.data(), len);
    return static_cast<ssize_t>(len);
}

bool tracked(int fd) { return !in_layer && host::tracked(fd); }

// After a successful dup of any fd: a VFIO file gains a reference, and a directory fd
// that stands for an emulated directory keeps standing for it.
void after_dup(int oldfd, int newfd) {
    if (in_layer) return;
    if (host::tracked(oldfd)) {
        layer_scope scope;
        host::get().duplicated(oldfd, newfd);
    } else if (host::has_directories()) {
        layer_scope scope;
        host::get().duplicated_directory(oldfd, newfd);
    }
}

// A path relative to a directory fd that stands for an emulated directory, made
// absolute; any other path unchanged.
const char* at_path(int dirfd, const char* path, std::string& storage) {
    if (in_layer || path == nullptr || path[0] == '/' || dirfd == AT_FDCWD || !host::has_directories()) {
        return path;
    }
    layer_scope scope;
    const std::string dir = host::get().directory_of(dirfd);
    if (dir.empty()) return path;
    storage = dir + "/" + path;
    return storage.c_str();
}

// What every open interposer does, whatever its signature: a path to an emulated node
// (a relative one first made absolute against dirfd when that stands for an emulated
// directory; the variants without a dirfd pass AT_FDCWD, which leaves the path as it
// is) opens the model's node. Any other path, or the one a redirect through one of our
// links replaced it with, goes to the C library's own function through `real`.
template <typename Real>
int open_path(int dirfd, const char* path, int flags, Real real) {
    std::string rel;
    path = at_path(dirfd, path, rel);
    lookup l;
    std::string s;
    if (ours(path, !(flags & O_NOFOLLOW), l, s)) return open_ours(l, flags);
    return real(path);
}

}  // namespace

extern "C" {

// ---- open ----

int open(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_path(AT_FDCWD, path, flags, [&](const char* p) { return libc().open(p, flags, mode); });
}

int open64(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_path(AT_FDCWD, path, flags, [&](const char* p) { return libc().open64(p, flags, mode); });
}

int openat(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_path(dirfd, path, flags, [&](const char* p) { return libc().openat(dirfd, p, flags, mode); });
}

int openat64(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_path(dirfd, path, flags, [&](const char* p) { return libc().openat64(dirfd, p, flags, mode); });
}

int __open_2(const char* path, int flags) {
    return open_path(AT_FDCWD, path, flags, [&](const char* p) { return libc().open_2(p, flags); });
}

int __open64_2(const char* path, int flags) {
    return open_path(AT_FDCWD, path, flags, [&](const char* p) { return libc().open64_2(p, flags); });
}

int __openat_2(int dirfd, const char* path, int flags) {
    return open_path(dirfd, path, flags, [&](const char* p) { return libc().openat_2(dirfd, p, flags); });
}

int __openat64_2(int dirfd, const char* path, int flags) {
    return open_path(dirfd, path, flags, [&](const char* p) { return libc().openat64_2(dirfd, p, flags); });
}

// Streams opened on a VFIO node: fclose closes their fd inside the C library.
static std::mutex streams_mu;
static std::vector<FILE*> streams;
static std::atomic<bool> any_streams{false};

static FILE* fopen_ours(const lookup& l, const char* mode) {
    int flags = O_RDONLY;
    if (mode[0] == 'w' || mode[0] == 'a' || std::strchr(mode, '+')) flags = O_RDWR;
    if (std::strchr(mode, 'e')) flags |= O_CLOEXEC;
    const int fd = open_ours(l, flags);
    if (fd < 0) return nullptr;
    FILE* f = fdopen(fd, mode);
    if (f == nullptr) {
        const int e = errno;
        close(fd);
        errno = e;
    } else if (host::tracked(fd)) {
        std::lock_guard lock(streams_mu);
        streams.push_back(f);
        any_streams.store(true, std::memory_order_release);
    }
    return f;
}

int fclose(FILE* f) {
    if (any_streams.load(std::memory_order_acquire) && !in_layer) {
        std::unique_lock lock(streams_mu);
        if (auto it = std::find(streams.begin(), streams.end(), f); it != streams.end()) {
            streams.erase(it);
            lock.unlock();
            layer_scope scope;
            host::get().forget(fileno(f));
        }
    }
    return libc().fclose(f);
}

FILE* fopen(const char* path, const char* mode) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return fopen_ours(l, mode);
    return libc().fopen(path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return fopen_ours(l, mode);
    return libc().fopen64(path, mode);
}

// ---- stat, access, readlink ----

int stat(const char* path, struct stat* st) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return stat_ours(l, st);
    return libc().stat(path, st);
}

int stat64(const char* path, struct stat64* st) {
    return stat(path, reinterpret_cast<struct stat*>(st));
}

int lstat(const char* path, struct stat* st) {
    lookup l;
    std::string s;
    if (ours(path, false, l, s)) return stat_ours(l, st);
    return libc().lstat(path, st);
}

int lstat64(const char* path, struct stat64* st) {
    return lstat(path, reinterpret_cast<struct stat*>(st));
}

int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
    std::string rel;
    path = at_path(dirfd, path, rel);
    lookup l;
    std::string s;
    if (ours(path, !(flags & AT_SYMLINK_NOFOLLOW), l, s)) return stat_ours(l, st);
    return libc().fstatat(dirfd, path, st, flags);
}

int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
    return fstatat(dirfd, path, reinterpret_cast<struct stat*>(st), flags);
}

// fstat of an fd that stands for an emulated directory describes that directory.
int fstat(int fd, struct stat* st) {
    if (!in_layer && host::has_directories()) {
        layer_scope scope;
        const std::string dir = host::get().directory_of(fd);
        if (!dir.empty()) {
            const lookup l = host::get().fs().resolve(dir.c_str(), true);
            if (l.what == lookup::found) return stat_ours(l, st);
        }
    }
    return libc().fstat(fd, st);
}

int fstat64(int fd, struct stat64* st) { return fstat(fd, reinterpret_cast<struct stat*>(st)); }
int __fxstat(int, int fd, struct stat* st) { return fstat(fd, st); }
int __fxstat64(int, int fd, struct stat64* st) { return fstat64(fd, st); }

// glibc before 2.33 compiled stat() into these; x86-64 has one struct stat layout.
int __xstat(int, const char* path, struct stat* st) { return stat(path, st); }
int __xstat64(int, const char* path, struct stat64* st) { return stat64(path, st); }
int __lxstat(int, const char* path, struct stat* st) { return lstat(path, st); }
int __lxstat64(int, const char* path, struct stat64* st) { return lstat64(path, st); }
int __fxstatat(int, int dirfd, const char* path, struct stat* st, int flags) {
    return fstatat(dirfd, path, st, flags);
}
int __fxstatat64(int, int dirfd, const char* path, struct stat64* st, int flags) {
    return fstatat64(dirfd, path, st, flags);
}

int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* stx) {
    std::string rel;
    path = at_path(dirfd, path, rel);
    lookup l;
    std::string s;
    if (ours(path, !(flags & AT_SYMLINK_NOFOLLOW), l, s)) {
        struct stat st;
        if (stat_ours(l, &st) != 0) return -1;
        std::memset(stx, 0, sizeof *stx);
        stx->stx_mask = STATX_BASIC_STATS;
        stx->stx_blksize = static_cast<std::uint32_t>(st.st_blksize);
        stx->stx_nlink = static_cast<std::uint32_t>(st.st_nlink);
        stx->stx_mode = static_cast<std::uint16_t>(st.st_mode);
        stx->stx_ino = st.st_ino;
        stx->stx_size = static_cast<std::uint64_t>(st.st_size);
        stx->stx_rdev_major = major(st.st_rdev);
        stx->stx_rdev_minor = minor(st.st_rdev);
        stx->stx_dev_major = major(st.st_dev);
        stx->stx_dev_minor = minor(st.st_dev);
        return 0;
    }
    return libc().statx(dirfd, path, flags, mask, stx);
}

int access(const char* path, int mode) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return l.what == lookup::error ? fail(l.err) : 0;
    return libc().access(path, mode);
}

int faccessat(int dirfd, const char* path, int mode, int flags) {
    std::string rel;
    path = at_path(dirfd, path, rel);
    lookup l;
    std::string s;
    if (ours(path, !(flags & AT_SYMLINK_NOFOLLOW), l, s)) {
        return l.what == lookup::error ? fail(l.err) : 0;
    }
    return libc().faccessat(dirfd, path, mode, flags);
}

ssize_t readlink(const char* path, char* buf, size_t size) {
    lookup l;
    std::string s;
    if (ours(path, false, l, s)) return readlink_ours(l, buf, size);
    char real[PATH_MAX];
    return proc_link(libc().readlink(path, real, sizeof real), real, buf, size);
}

ssize_t readlinkat(int dirfd, const char* path, char* buf, size_t size) {
    std::string rel;
    path = at_path(dirfd, path, rel);
    lookup l;
    std::string s;
    if (ours(path, false, l, s)) return readlink_ours(l, buf, size);
    char real[PATH_MAX];
    return proc_link(libc().readlinkat(dirfd, path, real, sizeof real), real, buf, size);
}

// realpath: an emulated path resolves to its canonical place in the emulated tree (as
// the kernel's sysfs links resolve); a path that leaves it through one of our links
// continues on the host from where the link led; anything else is libc's.
char* realpath(const char* path, char* resolved) {
    lookup l;
    std::string s;
    const char* p = path;
    if (!ours(p, true, l, s)) return libc().realpath(p, resolved);
    if (l.what == lookup::error) {
        errno = l.err;
        return nullptr;
    }
    if (l.path.size() >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return nullptr;
    }
    if (resolved == nullptr) {
        resolved = static_cast<char*>(std::malloc(l.path.size() + 1));
        if (resolved == nullptr) {
            errno = ENOMEM;
            return nullptr;
        }
    }
    std::memcpy(resolved, l.path.c_str(), l.path.size() + 1);
    return resolved;
}

char* canonicalize_file_name(const char* path) { return realpath(path, nullptr); }

char* __realpath_chk(const char* path, char* resolved, size_t resolvedlen) {
    if (resolved != nullptr && resolvedlen < PATH_MAX) __chk_fail();
    return realpath(path, resolved);
}

// Extended attributes (ls -l asks for ACLs): emulated nodes have none.
static ssize_t xattr_ours(const lookup& l, bool list) {
    if (l.what == lookup::error) return fail(l.err);
    return list ? 0 : fail(ENODATA);
}

ssize_t getxattr(const char* path, const char* name, void* value, size_t size) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return xattr_ours(l, false);
    return libc().getxattr(path, name, value, size);
}

ssize_t lgetxattr(const char* path, const char* name, void* value, size_t size) {
    lookup l;
    std::string s;
    if (ours(path, false, l, s)) return xattr_ours(l, false);
    return libc().lgetxattr(path, name, value, size);
}

ssize_t listxattr(const char* path, char* list, size_t size) {
    lookup l;
    std::string s;
    if (ours(path, true, l, s)) return xattr_ours(l, true);
    return libc().listxattr(path, list, size);
}

ssize_t llistxattr(const char* path, char* list, size_t size) {
    lookup l;
    std::string s;
    if (ours(path, false, l, s)) return xattr_ours(l, true);
    return libc().llistxattr(path, list, size);
}

// ---- directories ----

DIR* opendir(const char* path) {
    if (in_layer || !sysfs::candidate(path)) return libc().opendir(path);
    layer_scope scope;
    const lookup l = host::get().fs().resolve(path, true);
    switch (l.what) {
    case lookup::error:
        errno = l.err;
        return nullptr;
    case lookup::found: {
        if (l.n->kind != node_kind::directory) {
            errno = ENOTDIR;
            return nullptr;
        }
        DIR* d = l.n->shared ? libc().opendir(l.path.c_str()) : nullptr;
        if (d == nullptr) {
            const int fd = host::get().open_directory(l.path, O_CLOEXEC);
            if (fd < 0) {
                errno = -fd;
                return nullptr;
            }
            d = libc().fdopendir(fd);
        }
        return with_entries(d, l.path);
    }
    case lookup::redirect:
    case lookup::not_ours:
        break;
    }
    return with_entries(libc().opendir(l.what == lookup::redirect ? l.path.c_str() : path), l.path);
}

DIR* fdopendir(int fd) {
    DIR* d = libc().fdopendir(fd);
    if (d == nullptr || in_layer) return d;
    layer_scope scope;
    const std::string path = host::get().directory_of(fd);
    return path.empty() ? d : with_entries(d, path);
}

struct dirent64* readdir64(DIR* d) { return next_entry(d); }

struct dirent* readdir(DIR* d) {
    static_assert(sizeof(struct dirent) == sizeof(struct dirent64));
    return reinterpret_cast<struct dirent*>(next_entry(d));
}

void rewinddir(DIR* d) {
    if (dir_count.load(std::memory_order_acquire) != 0) {
        std::lock_guard lock(dirs_mu);
        if (auto it = dirs.find(d); it != dirs.end()) {
            it->second.next = 0;
            it->second.seen.clear();
        }
    }
    libc().rewinddir(d);
}

int closedir(DIR* d) {
    if (dir_count.load(std::memory_order_acquire) != 0) {
        std::lock_guard lock(dirs_mu);
        dirs.erase(d);
        dir_count.store(static_cast<int>(dirs.size()), std::memory_order_release);
    }
    return libc().closedir(d);
}

// FORTIFY's checked readlink (the compiler picks it when it cannot prove the size).
ssize_t __readlink_chk(const char* path, char* buf, size_t size, size_t buflen) {
    if (size > buflen) __chk_fail();
    return readlink(path, buf, size);
}

ssize_t __readlinkat_chk(int dirfd, const char* path, char* buf, size_t size, size_t buflen) {
    if (size > buflen) __chk_fail();
    return readlinkat(dirfd, path, buf, size);
}

// ---- fds ----

int close(int fd) {
    if (tracked(fd)) {
        layer_scope scope;
        host::get().forget(fd);
    } else if (!in_layer && host::has_directories()) {
        layer_scope scope;
        host::get().forget_directory(fd);
    }
    return libc().close(fd);
}

int dup(int fd) {
    const int r = libc().dup(fd);
    if (r >= 0) after_dup(fd, r);
    return r;
}

// dup2/dup3 close fd2 first if it was open: a VFIO file it held is released then.
static void after_dup_over(int fd, int fd2) {
    if (!in_layer && !host::tracked(fd) && host::tracked(fd2)) {
        layer_scope scope;
        host::get().forget(fd2);
    }
    after_dup(fd, fd2);  // a tracked fd replaces whatever fd2 held
}

int dup2(int fd, int fd2) {
    const int r = libc().dup2(fd, fd2);
    if (r >= 0 && fd != fd2) after_dup_over(fd, r);
    return r;
}

int dup3(int fd, int fd2, int flags) {
    const int r = libc().dup3(fd, fd2, flags);
    if (r >= 0) after_dup_over(fd, r);
    return r;
}

// close_range(2) closes without close(): forget what it closes.
int close_range(unsigned first, unsigned last, int flags) {
    const int r = libc().close_range(first, last, flags);
    if (r == 0 && !in_layer && !(flags & CLOSE_RANGE_CLOEXEC)) {
        layer_scope scope;
        const unsigned top = std::min<unsigned>(last, 1u << 16);
        for (unsigned fd = first; fd <= top && fd >= first; ++fd) {
            if (host::tracked(static_cast<int>(fd))) host::get().forget(static_cast<int>(fd));
        }
    }
    return r;
}

static int fcntl_impl(int fd, int cmd, unsigned long arg) {
    const int r = libc().fcntl(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) after_dup(fd, r);
    return r;
}

int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    const unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return fcntl_impl(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    const unsigned long arg = va_arg(ap, unsigned long);
    va_end(ap);
    return fcntl_impl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    // FIOCLEX, FIONCLEX, FIONBIO and FIOASYNC are the VFS's own, for every file.
    const bool vfs = request == FIOCLEX || request == FIONCLEX || request == FIONBIO ||
                     request == FIOASYNC;
    if (!vfs && tracked(fd)) {
        layer_scope scope;
        const long r = host::get().ioctl(fd, request, arg);
        if (r != host::kPassThrough) return r < 0 ? fail(static_cast<int>(-r)) : static_cast<int>(r);
    }
    return libc().ioctl(fd, request, arg);
}

// ---- mmap, pread, pwrite ----

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
    if (!(flags & MAP_ANONYMOUS) && tracked(fd)) {
        layer_scope scope;
        const long long off = host::get().mmap_offset(fd, len, prot, flags, offset);
        if (off != host::kPassThrough) {
            if (off < 0) {
                errno = static_cast<int>(-off);
                return MAP_FAILED;
            }
            void* p = libc().mmap(addr, len, prot, flags, fd, static_cast<off_t>(off));
            if (p != MAP_FAILED) host::get().mapped(fd, p, len);
            return p;
        }
    }
    return libc().mmap(addr, len, prot, flags, fd, offset);
}

int munmap(void* addr, size_t len) {
    const int r = libc().munmap(addr, len);
    if (r == 0 && !in_layer && host::has_mappings()) {
        const int saved = errno;
        layer_scope scope;
        host::get().unmapped(addr, len);
        errno = saved;
    }
    return r;
}

void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off64_t offset) {
    return mmap(addr, len, prot, flags, fd, static_cast<off_t>(offset));
}

ssize_t pread(int fd, void* buf, size_t len, off_t offset) {
    if (tracked(fd)) {
        layer_scope scope;
        const long r = host::get().pread(fd, buf, len, offset);
        if (r != host::kPassThrough) return r < 0 ? fail(static_cast<int>(-r)) : r;
    }
    return libc().pread(fd, buf, len, offset);
}

ssize_t pread64(int fd, void* buf, size_t len, off64_t offset) {
    return pread(fd, buf, len, static_cast<off_t>(offset));
}

ssize_t __pread_chk(int fd, void* buf, size_t len, off_t offset, size_t buflen) {
    if (tracked(fd)) {
        if (len > buflen) __chk_fail();
        return pread(fd, buf, len, offset);
    }
    return libc().pread_chk(fd, buf, len, offset, buflen);
}

ssize_t __pread64_chk(int fd, void* buf, size_t len, off64_t offset, size_t buflen) {
    return __pread_chk(fd, buf, len, static_cast<off_t>(offset), buflen);
}

ssize_t pwrite(int fd, const void* buf, size_t len, off_t offset) {
    if (tracked(fd)) {
        layer_scope scope;
        const long r = host::get().pwrite(fd, buf, len, offset);
        if (r != host::kPassThrough) return r < 0 ? fail(static_cast<int>(-r)) : r;
    }
    return libc().pwrite(fd, buf, len, offset);
}

// read(2) and write(2) of a device fd are pread/pwrite at the file position, which
// they advance (vfio_device_fops_read); containers and groups have no read or write.
ssize_t read(int fd, void* buf, size_t len) {
    if (tracked(fd)) {
        layer_scope scope;
        const off_t pos = ::lseek(fd, 0, SEEK_CUR);
        const long r = host::get().pread(fd, buf, len, pos);
        if (r != host::kPassThrough) {
            if (r < 0) return fail(static_cast<int>(-r));
            ::lseek(fd, pos + r, SEEK_SET);
            return r;
        }
    }
    return libc().read(fd, buf, len);
}

ssize_t __read_chk(int fd, void* buf, size_t len, size_t buflen) {
    if (len > buflen) __chk_fail();
    return read(fd, buf, len);
}

ssize_t write(int fd, const void* buf, size_t len) {
    if (tracked(fd)) {
        layer_scope scope;
        if (const long c = host::get().control(fd, buf, len); c != host::kPassThrough) {
            return c < 0 ? fail(static_cast<int>(-c)) : c;
        }
        const off_t pos = ::lseek(fd, 0, SEEK_CUR);
        const long r = host::get().pwrite(fd, buf, len, pos);
        if (r != host::kPassThrough) {
            if (r < 0) return fail(static_cast<int>(-r));
            ::lseek(fd, pos + r, SEEK_SET);
            return r;
        }
    }
    return libc().write(fd, buf, len);
}

ssize_t pwrite64(int fd, const void* buf, size_t len, off64_t offset) {
    return pwrite(fd, buf, len, static_cast<off_t>(offset));
}

}  // extern "C"

namespace {

void fork_prepare() {
    dirs_mu.lock();
    if (host* h = host::existing()) h->fork_prepare();
}

void fork_parent() {
    if (host* h = host::existing()) h->fork_parent();
    dirs_mu.unlock();
}

void fork_child() {
    if (host* h = host::existing()) h->fork_child();
    dirs_mu.unlock();
}

// At load: resolve the C library's functions before anything can re-enter (an
// allocator that opens files while dlsym allocates), and follow fork().
__attribute__((constructor)) void load() {
    (void)libc();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    cxv::sim::vfio::install_fault_handler();  // sim/vfio/fault_signals.cc
}

// At unload (after atexit handlers and the program's static destructors): the leak
// report, when asked for.
__attribute__((destructor)) void unload() {
    if (host* h = host::existing()) h->leak_report();
}

}  // namespace
