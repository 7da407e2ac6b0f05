#include "driver/vfio/iova.h"

#include <algorithm>
#include <iterator>

namespace cxv::driver::vfio {

iova_allocator::iova_allocator(std::vector<iommu_info::range> ranges) {
    for (const auto& r : ranges) {
        const std::uint64_t first = std::max<std::uint64_t>(r.first, page_size);
        if (first > r.last) continue;
        free_[first] = r.last;
        range_starts_.push_back(first);
    }
    std::sort(range_starts_.begin(), range_starts_.end());
}

bool iova_allocator::range_start(std::uint64_t iova) const {
    return std::binary_search(range_starts_.begin(), range_starts_.end(), iova);
}

std::optional<std::uint64_t> iova_allocator::reserve(std::uint64_t size, std::uint64_t align) {
    if (size == 0) return std::nullopt;
    std::lock_guard lock(mu_);
    // First fit over the free gaps in address order: as many steps as there are gaps
    // before the one that fits, not as many as there are reservations.
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const std::uint64_t first = it->first, last = it->second;
        const std::uint64_t at = (first + align - 1) & ~(align - 1);
        if (at < first) continue;  // aligning wrapped past the top
        // What would end on the address space's last byte wraps its end to 0: refused.
        if (at + size < at || at + size - 1 > last) continue;
        free_.erase(it);
        if (at > first) free_[first] = at - 1;
        if (at + size - 1 < last) free_[at + size] = last;
        used_[at] = size;
        return at;
    }
    return std::nullopt;
}

void iova_allocator::release(std::uint64_t iova) {
    std::lock_guard lock(mu_);
    const auto u = used_.find(iova);
    if (u == used_.end()) return;
    std::uint64_t first = iova, last = iova + u->second - 1;
    used_.erase(u);
    // Merged with the gaps on either side, never across two usable ranges.
    if (const auto next = free_.find(last + 1); next != free_.end() && !range_start(next->first)) {
        last = next->second;
        free_.erase(next);
    }
    if (auto next = free_.lower_bound(first); next != free_.begin() && !range_start(first)) {
        const auto prev = std::prev(next);
        if (prev->second + 1 == first) {
            first = prev->first;
            free_.erase(prev);
        }
    }
    free_[first] = last;
}

}  // namespace cxv::driver::vfio
