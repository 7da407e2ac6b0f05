// Loads and stores to a device BAR: the one window type through which cxv touches MMIO.
//
// Every access is a single volatile access of the stated width (the PCIe transaction
// size matters: an 8-byte doorbell must not be split into two 4-byte writes, which a
// device may see as two doorbells or a torn one). Values are big-endian on the bus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hw/endian.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace cxv::hw {

class mmio_window {
public:
    mmio_window() noexcept = default;
    mmio_window(void* base, std::size_t size) noexcept
        : base_(static_cast<std::byte*>(base)), size_(size) {}

    std::byte* base() const noexcept { return base_; }
    std::size_t size() const noexcept { return size_; }
    bool contains(std::size_t offset, std::size_t len) const noexcept {
        return offset <= size_ && len <= size_ - offset;
    }
    mmio_window sub(std::size_t offset, std::size_t len) const noexcept {
        return mmio_window(base_ + offset, len);
    }

    std::uint32_t read32_be(std::size_t off) const noexcept {
        return from_be(*reinterpret_cast<const volatile std::uint32_t*>(base_ + off));
    }
    void write32_be(std::size_t off, std::uint32_t v) const noexcept {
        *reinterpret_cast<volatile std::uint32_t*>(base_ + off) = to_be(v);
    }
    // One 8-byte store of a value given in host order, written big-endian.
    void write64_be(std::size_t off, std::uint64_t v) const noexcept {
        *reinterpret_cast<volatile std::uint64_t*>(base_ + off) = to_be(v);
    }
    // One 8-byte store of a value whose bytes are already in device order (a WQE's
    // first 8 bytes as a register holds them after a load from the WQE).
    void write64_bytes(std::size_t off, std::uint64_t v) const noexcept {
        *reinterpret_cast<volatile std::uint64_t*>(base_ + off) = v;
    }
    // One 8-byte store of bytes already in device order (e.g. a WQE's first 8 bytes).
    void write64_raw(std::size_t off, const void* src) const noexcept {
        *reinterpret_cast<volatile std::uint64_t*>(base_ + off) =
            *static_cast<const std::uint64_t*>(src);
    }
    // The same 8-byte store when several threads may make it at once (a multi-producer
    // send queue's doorbell): an atomic store, so the language sees no data race; on
    // x86-64 the same single mov to the register.
    void write64_raw_shared(std::size_t off, const void* src) const noexcept {
        std::uint64_t v;
        std::memcpy(&v, src, sizeof(v));
        __atomic_store_n(reinterpret_cast<volatile std::uint64_t*>(base_ + off), v, __ATOMIC_RELAXED);
    }
    // 64 bytes to a write-combining mapping, between wc_start() and wc_flush() (the CPU
    // may merge them into one 64-byte burst): four 16-byte SSE stores on x86-64, eight
    // 8-byte stores elsewhere, in ascending address order (volatile: the compiler keeps
    // their order), as rdma-core's mmio_memcpy_x64 writes, so that a burst the CPU
    // flushes before it is whole still reaches the device in order. `src` and `off`
    // 16-byte aligned.
    void copy64(std::size_t off, const void* src) const noexcept {
#if defined(__x86_64__)
        auto* d = reinterpret_cast<volatile __m128i*>(base_ + off);
        const auto* s = static_cast<const __m128i*>(src);
        const __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1), c = _mm_load_si128(s + 2),
                      e = _mm_load_si128(s + 3);
        d[0] = a;
        d[1] = b;
        d[2] = c;
        d[3] = e;
#else
        auto* d = reinterpret_cast<volatile std::uint64_t*>(base_ + off);
        const auto* s = static_cast<const std::uint64_t*>(src);
        for (int i = 0; i < 8; ++i) d[i] = s[i];
#endif
    }
    // One 64-byte direct store (MOVDIR64B): always a single write-combined burst, even
    // to an uncached mapping. Only where cpu_has_movdir64b(); off 64-byte aligned.
    void movdir64b(std::size_t off, const void* src) const noexcept;

private:
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
};

// CPUID.(EAX=7,ECX=0):ECX[28].
bool cpu_has_movdir64b() noexcept;

}  // namespace cxv::hw
