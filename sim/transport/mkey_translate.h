// Memory key translation (PRM "Memory Keys", "Memory Translation Table"): how the device
// turns an access through a key -- (key, virtual address, length, what the access does)
// -- into the IOVA ranges it then reads or writes through the IOMMU, with the checks a
// card applies on the way (key variant, state, protection domain, access rights,
// bounds, per-page enables). Pure logic over the objects firmware keeps; the transport
// engine looks the mkey up by key >> 8 and calls it for every SGE, remote address and
// atomic target.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <vector>

#include "sim/objects/objects.h"

namespace cxv::sim {

// What an access needs from a key, one bit per mkc permission (lr, lw, rr, rw, a).
enum mkey_access : unsigned {
    access_local_read = 1u << 0,     // gather: the device reads local memory for a send
    access_local_write = 1u << 1,    // scatter: the device writes local memory
    access_remote_read = 1u << 2,    // RDMA READ target
    access_remote_write = 1u << 3,   // RDMA WRITE target
    access_remote_atomic = 1u << 4,  // atomic target (reads and writes the memory)
};

// mkc access_mode (access_mode_4_2 << 2 | access_mode_1_0).
enum class mkey_mode : unsigned { pa = 0, mtt = 1, klms = 2, ksm = 3 };

enum class translate_status : std::uint8_t {
    ok,
    key_mismatch,    // key >> 8 is not this mkey, or the low byte is not its mkey_7_0
    free_key,        // the mkey is in the free state: no translation is valid
    pd_mismatch,     // the mkey belongs to another protection domain
    access_denied,   // the mkey's a/rw/rr/lw/lr do not grant the access
    out_of_bounds,   // [va, va + len) is not inside [start_addr, start_addr + len)
    page_fault,      // a page has no translation entry, or its rd_en/wr_en forbid the access
    unsupported,     // an access mode the model does not translate (KLM, KSM)
};

struct iova_range {
    std::uint64_t iova = 0;
    std::uint64_t len = 0;
    bool operator==(const iova_range&) const = default;
};

// The IOVA ranges of accesses, in order: the first few held in place (an access within
// a page or two is the common case), more on the heap, whose room is kept across clear()
// for a list that is reused.
class iova_list {
    static_assert(std::is_trivially_copyable_v<iova_range> && std::is_trivially_destructible_v<iova_range>);

public:
    static constexpr std::size_t inline_capacity = 8;

    iova_list() = default;
    iova_list(const iova_list&) = delete;
    iova_list& operator=(const iova_list&) = delete;

    void clear() noexcept {
        size_ = 0;
        heap_.clear();
    }
    void push_back(const iova_range& r) {
        if (heap_.empty() && size_ < inline_capacity) {
            new (inline_ + size_ * sizeof(iova_range)) iova_range(r);
            ++size_;
            return;
        }
        if (heap_.empty()) heap_.assign(inline_data(), inline_data() + size_);
        heap_.push_back(r);
        ++size_;
    }
    void append(const iova_list& o) {
        for (const iova_range& r : o) push_back(r);
    }
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    iova_range& back() noexcept { return data()[size_ - 1]; }
    const iova_range& operator[](std::size_t i) const noexcept { return data()[i]; }
    const iova_range* begin() const noexcept { return data(); }
    const iova_range* end() const noexcept { return data() + size_; }

private:
    iova_range* inline_data() noexcept { return reinterpret_cast<iova_range*>(inline_); }
    const iova_range* inline_data() const noexcept { return reinterpret_cast<const iova_range*>(inline_); }
    iova_range* data() noexcept { return heap_.empty() ? inline_data() : heap_.data(); }
    const iova_range* data() const noexcept { return heap_.empty() ? inline_data() : heap_.data(); }

    std::size_t size_ = 0;
    // Raw storage, not an array of ranges: one is made as it is pushed (a list is made
    // per packet, and zeroing the whole array each time showed in the profile).
    alignas(iova_range) std::byte inline_[inline_capacity * sizeof(iova_range)];
    std::vector<iova_range> heap_;  // all of them, once there are more than inline_capacity
};

// Translates [va, va + len) through `mk` for an access by a queue of protection domain
// `pd`. `umem` is the UMEM the mkey's translations come from (mk.umem_id != 0), else
// ignored. On ok, `out` holds the IOVA ranges in address order, adjacent pages merged;
// a zero-length access yields none. On any other status `out` is empty.
translate_status translate(const mkey_object& mk, const umem_object* umem, std::uint32_t key,
                           std::uint32_t pd, std::uint64_t va, std::uint64_t len,
                           unsigned access, iova_list& out);
translate_status translate(const mkey_object& mk, const umem_object* umem, std::uint32_t key,
                           std::uint32_t pd, std::uint64_t va, std::uint64_t len,
                           unsigned access, std::vector<iova_range>& out);

}  // namespace cxv::sim
