// The C library's own entry points for every function the preload library interposes,
// found with dlsym(RTLD_NEXT) on first use. The presentation layer calls these for
// everything that is not an emulated file, and for the real fds behind emulated ones.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>

#include <cstdio>

struct statx;

namespace cxv::sim::vfio {

struct libc_table {
    int (*open)(const char*, int, ...);
    int (*open64)(const char*, int, ...);
    int (*openat)(int, const char*, int, ...);
    int (*openat64)(int, const char*, int, ...);
    int (*open_2)(const char*, int);
    int (*open64_2)(const char*, int);
    int (*openat_2)(int, const char*, int);
    int (*openat64_2)(int, const char*, int);
    FILE* (*fopen)(const char*, const char*);
    FILE* (*fopen64)(const char*, const char*);
    int (*stat)(const char*, struct stat*);
    int (*lstat)(const char*, struct stat*);
    int (*fstat)(int, struct stat*);
    int (*fstatat)(int, const char*, struct stat*, int);
    int (*statx)(int, const char*, int, unsigned, struct ::statx*);
    int (*access)(const char*, int);
    int (*faccessat)(int, const char*, int, int);
    ssize_t (*readlink)(const char*, char*, size_t);
    ssize_t (*readlinkat)(int, const char*, char*, size_t);
    char* (*realpath)(const char*, char*);
    int (*close)(int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    void* (*mmap)(void*, size_t, int, int, int, off_t);
    int (*munmap)(void*, size_t);
    ssize_t (*read)(int, void*, size_t);
    ssize_t (*write)(int, const void*, size_t);
    int (*close_range)(unsigned, unsigned, int);
    int (*fclose)(FILE*);
    ssize_t (*pread)(int, void*, size_t, off_t);
    ssize_t (*pread_chk)(int, void*, size_t, off_t, size_t);
    ssize_t (*pwrite)(int, const void*, size_t, off_t);
    ssize_t (*getxattr)(const char*, const char*, void*, size_t);
    ssize_t (*lgetxattr)(const char*, const char*, void*, size_t);
    ssize_t (*listxattr)(const char*, char*, size_t);
    ssize_t (*llistxattr)(const char*, char*, size_t);
    DIR* (*opendir)(const char*);
    DIR* (*fdopendir)(int);
    struct dirent* (*readdir)(DIR*);
    struct dirent64* (*readdir64)(DIR*);
    int (*closedir)(DIR*);
    void (*rewinddir)(DIR*);
};

// Resolved once, thread-safely; aborts with a message if the C library lacks one.
const libc_table& libc();

}  // namespace cxv::sim::vfio
