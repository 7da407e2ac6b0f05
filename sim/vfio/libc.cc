#include "sim/vfio/libc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include <sys/syscall.h>
#include <unistd.h>

namespace cxv::sim::vfio {

namespace {

template <typename F>
void resolve(F& slot, const char* name) {
    void* p = dlsym(RTLD_NEXT, name);
    if (p == nullptr) {
        // Neither stdio nor write(): they may be what is being resolved.
        const char* what = "cxv-sim preload: the C library has no ";
        syscall(SYS_write, 2, what, std::strlen(what));
        syscall(SYS_write, 2, name, std::strlen(name));
        syscall(SYS_write, 2, "\n", 1);
        std::abort();
    }
    slot = reinterpret_cast<F>(p);
}

libc_table load() {
    libc_table t{};
    resolve(t.open, "open");
    resolve(t.open64, "open64");
    resolve(t.openat, "openat");
    resolve(t.openat64, "openat64");
    resolve(t.open_2, "__open_2");
    resolve(t.open64_2, "__open64_2");
    resolve(t.openat_2, "__openat_2");
    resolve(t.openat64_2, "__openat64_2");
    resolve(t.fopen, "fopen");
    resolve(t.fopen64, "fopen64");
    resolve(t.stat, "stat");
    resolve(t.lstat, "lstat");
    resolve(t.fstat, "fstat");
    resolve(t.fstatat, "fstatat");
    resolve(t.statx, "statx");
    resolve(t.access, "access");
    resolve(t.faccessat, "faccessat");
    resolve(t.readlink, "readlink");
    resolve(t.readlinkat, "readlinkat");
    resolve(t.realpath, "realpath");
    resolve(t.close, "close");
    resolve(t.dup, "dup");
    resolve(t.dup2, "dup2");
    resolve(t.dup3, "dup3");
    resolve(t.fcntl, "fcntl");
    resolve(t.ioctl, "ioctl");
    resolve(t.mmap, "mmap");
    resolve(t.munmap, "munmap");
    resolve(t.read, "read");
    resolve(t.write, "write");
    resolve(t.close_range, "close_range");
    resolve(t.fclose, "fclose");
    resolve(t.pread, "pread");
    resolve(t.pread_chk, "__pread_chk");
    resolve(t.pwrite, "pwrite");
    resolve(t.getxattr, "getxattr");
    resolve(t.lgetxattr, "lgetxattr");
    resolve(t.listxattr, "listxattr");
    resolve(t.llistxattr, "llistxattr");
    resolve(t.opendir, "opendir");
    resolve(t.fdopendir, "fdopendir");
    resolve(t.readdir, "readdir");
    resolve(t.readdir64, "readdir64");
    resolve(t.closedir, "closedir");
    resolve(t.rewinddir, "rewinddir");
    return t;
}

}  // namespace

const libc_table& libc() {
    static const libc_table table = load();
    return table;
}

}  // namespace cxv::sim::vfio
