#include "sim/pci/bar.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <cerrno>
#include <string>

namespace cxv::sim {

result<std::unique_ptr<bar0>> bar0::create(std::size_t size) {
    std::unique_ptr<bar0> b(new bar0());
    b->size_ = size;
    b->fd_.reset(memfd_create("cxv-sim-bar0", MFD_CLOEXEC));
    if (!b->fd_) return error{errno, std::string("BAR0: memfd_create: ") + std::strerror(errno)};
    if (ftruncate(b->fd_.get(), static_cast<off_t>(size)) != 0) {
        return error{errno, std::string("BAR0: ftruncate: ") + std::strerror(errno)};
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd_.get(), 0);
    if (p == MAP_FAILED) return error{errno, std::string("BAR0: mmap: ") + std::strerror(errno)};
    b->base_ = static_cast<std::byte*>(p);
    return b;
}
bar0::~bar0() {
    if (base_) munmap(base_, size_);
    // fd_ closes after this body: the mapping goes first.
}

void bar0::zero() { std::memset(base_, 0, size_); }

}  // namespace cxv::sim
