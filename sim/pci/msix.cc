#include "sim/pci/msix.h"

#include <fcntl.h>
#include <unistd.h>

namespace cxv::sim {

msix_table::msix_table(unsigned count) : count_(count), fds_(count) {}

msix_table::~msix_table() { clear(); }

bool msix_table::set(unsigned vector, int fd) noexcept {
    if (vector >= count_) return false;
    int dup_fd = -1;
    if (fd >= 0) {
        dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (dup_fd < 0) return false;
    }
    std::lock_guard lock(mu_);
    fds_[vector].reset(dup_fd);
    return true;
}

bool msix_table::attached(unsigned vector) const noexcept {
    std::lock_guard lock(mu_);
    return vector < count_ && fds_[vector];
}

void msix_table::clear() noexcept {
    std::lock_guard lock(mu_);
    for (unique_fd& fd : fds_) fd.reset();
}

bool msix_table::signal(unsigned vector) noexcept {
    std::lock_guard lock(mu_);
    const int fd = vector < count_ ? fds_[vector].get() : -1;
    const std::uint64_t one = 1;
    if (fd < 0 || ::write(fd, &one, sizeof(one)) != sizeof(one)) {
        lost_.fetch_add(1);
        return false;
    }
    signalled_.fetch_add(1);
    return true;
}

}  // namespace cxv::sim
