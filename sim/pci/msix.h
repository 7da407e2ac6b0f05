// MSI-X vectors of the emulated function: each is an eventfd the driver registered with
// VFIO_DEVICE_SET_IRQS (or none). Signalling a vector without an eventfd is a lost
// interrupt, as on a card whose vector is masked; it is counted.
//
// The table keeps its own duplicate of each registered eventfd, as the kernel keeps a
// reference to it: a driver may unregister a vector and close its fd while the device
// thread is about to signal it, and the signal must not land in whatever file reuses
// that number.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/unique_fd.h"

namespace cxv::sim {

class msix_table {
public:
    explicit msix_table(unsigned count);
    ~msix_table();
    msix_table(const msix_table&) = delete;
    msix_table& operator=(const msix_table&) = delete;

    unsigned count() const noexcept { return count_; }
    // Registers (a duplicate of) fd for the vector; -1 unregisters. False for a vector
    // out of range or an fd that cannot be duplicated.
    bool set(unsigned vector, int fd) noexcept;
    bool attached(unsigned vector) const noexcept;
    void clear() noexcept;
    // Raises the interrupt: adds 1 to the vector's eventfd.
    bool signal(unsigned vector) noexcept;
    std::uint64_t signalled() const noexcept { return signalled_.load(); }
    std::uint64_t lost() const noexcept { return lost_.load(); }

private:
    unsigned count_;
    mutable std::mutex mu_;
    std::vector<unique_fd> fds_;  // our duplicates, none when unregistered
    std::atomic<std::uint64_t> signalled_{0}, lost_{0};
};

}  // namespace cxv::sim
