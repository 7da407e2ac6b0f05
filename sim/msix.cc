#include "sim/msix.h"

#include <unistd.h>

namespace cxv::sim {

msix_table::msix_table(unsigned count) : count_(count), fds_(new std::atomic<int>[count]) {
    clear();
}

bool msix_table::set(unsigned vector, int fd) noexcept {
    if (vector >= count_) return false;
    fds_[vector].store(fd);
    return true;
}

int msix_table::get(unsigned vector) const noexcept {
    return vector < count_ ? fds_[vector].load() : -1;
}

void msix_table::clear() noexcept {
    for (unsigned i = 0; i < count_; ++i) fds_[i].store(-1);
}

bool msix_table::signal(unsigned vector) noexcept {
    const int fd = get(vector);
    if (fd < 0) {
        lost_.fetch_add(1);
        return false;
    }
    const std::uint64_t one = 1;
    if (::write(fd, &one, sizeof(one)) != sizeof(one)) {
        lost_.fetch_add(1);
        return false;
    }
    signalled_.fetch_add(1);
    return true;
}

}  // namespace cxv::sim
