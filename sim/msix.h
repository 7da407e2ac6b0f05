// MSI-X vectors of the emulated function: each is an eventfd the driver registered with
// VFIO_DEVICE_SET_IRQS (or none). Signalling a vector without an eventfd is a lost
// interrupt, as on a card whose vector is masked; it is counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace cxv::sim {

class msix_table {
public:
    explicit msix_table(unsigned count);
    unsigned count() const noexcept { return count_; }
    // fd -1 detaches the vector. The table does not own the fds.
    bool set(unsigned vector, int fd) noexcept;
    int get(unsigned vector) const noexcept;
    void clear() noexcept;
    // Raises the interrupt: adds 1 to the vector's eventfd.
    bool signal(unsigned vector) noexcept;
    std::uint64_t signalled() const noexcept { return signalled_.load(); }
    std::uint64_t lost() const noexcept { return lost_.load(); }

private:
    unsigned count_;
    std::unique_ptr<std::atomic<int>[]> fds_;
    std::atomic<std::uint64_t> signalled_{0}, lost_{0};
};

}  // namespace cxv::sim
