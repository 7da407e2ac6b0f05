// BAR0 of the emulated function: shared memory (a memfd) holding the initialization
// segment and the UAR pages, mapped by the driver exactly as it would map a card's BAR.
//
// The driver writes with plain stores; the model reads and writes dwords atomically
// (std::atomic_ref), which on x86-64 compiles to the same plain loads and stores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hw/endian.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include <memory>

namespace cxv::sim {

class bar0 {
public:
    static result<std::unique_ptr<bar0>> create(std::size_t size);
    ~bar0();
    bar0(const bar0&) = delete;
    bar0& operator=(const bar0&) = delete;

    int fd() const noexcept { return fd_.get(); }  // the memfd, for the presentation layer
    std::byte* base() const noexcept { return base_; }
    std::size_t size() const noexcept { return size_; }

    // Big-endian dword/qword at a byte offset, as the driver's stores left it.
    std::uint32_t load32(std::size_t off) const noexcept {
        return hw::from_be(ref32(off).load(std::memory_order_relaxed));
    }
    void store32(std::size_t off, std::uint32_t v) noexcept {
        ref32(off).store(hw::to_be(v), std::memory_order_relaxed);
    }
    std::uint32_t exchange32(std::size_t off, std::uint32_t v) noexcept {
        return hw::from_be(ref32(off).exchange(hw::to_be(v), std::memory_order_acq_rel));
    }
    std::uint64_t load64(std::size_t off) const noexcept {
        return hw::from_be(std::atomic_ref<std::uint64_t>(
                               *reinterpret_cast<std::uint64_t*>(base_ + off))
                               .load(std::memory_order_relaxed));
    }
    void store64(std::size_t off, std::uint64_t v) noexcept {
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base_ + off))
            .store(hw::to_be(v), std::memory_order_relaxed);
    }
    std::uint64_t exchange64(std::size_t off, std::uint64_t v) noexcept {
        return hw::from_be(std::atomic_ref<std::uint64_t>(
                               *reinterpret_cast<std::uint64_t*>(base_ + off))
                               .exchange(hw::to_be(v), std::memory_order_acq_rel));
    }
    void zero();

private:
    bar0() = default;
    std::atomic_ref<std::uint32_t> ref32(std::size_t off) const noexcept {
        return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(base_ + off));
    }

    unique_fd fd_;
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace cxv::sim
