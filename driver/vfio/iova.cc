#include "driver/vfio/iova.h"

#include <algorithm>
#include <iterator>

namespace cxv::driver::vfio {

std::optional<std::uint64_t> iova_allocator::reserve(std::uint64_t size, std::uint64_t align) {
    std::lock_guard lock(mu_);
    for (const auto& r : ranges_) {
        std::uint64_t at = (std::max<std::uint64_t>(r.first, page_size) + align - 1) & ~(align - 1);
        for (;;) {
            if (at + size - 1 > r.last || at + size < at) break;
            auto next = used_.lower_bound(at);
            bool clash = false;
            if (next != used_.begin()) {
                auto prev = std::prev(next);
                if (prev->first + prev->second > at) {
                    at = (prev->first + prev->second + align - 1) & ~(align - 1);
                    clash = true;
                }
            }
            if (!clash && next != used_.end() && next->first < at + size) {
                at = (next->first + next->second + align - 1) & ~(align - 1);
                clash = true;
            }
            if (!clash) {
                used_[at] = size;
                return at;
            }
        }
    }
    return std::nullopt;
}

void iova_allocator::release(std::uint64_t iova) {
    std::lock_guard lock(mu_);
    used_.erase(iova);
}

}  // namespace cxv::driver::vfio
