#include "sim/pci/iommu.h"

#include <algorithm>
#include <cstring>

namespace cxv::sim {

map_error iommu::map(std::uint64_t iova, void* vaddr, std::uint64_t size, bool readable,
                     bool writable) {
    const auto va = reinterpret_cast<std::uintptr_t>(vaddr);
    if (size == 0 || iova % page_size || va % page_size || size % page_size ||
        iova + size < iova || iova + size > iova_limit || (!readable && !writable)) {
        return map_error::invalid;
    }
    std::unique_lock lock(mu_);
    auto next = maps_.lower_bound(iova);
    if (next != maps_.end() && next->first < iova + size) return map_error::exists;
    if (next != maps_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second.size > iova) return map_error::exists;
    }
    maps_.emplace(iova, mapping{size, static_cast<std::byte*>(vaddr), readable, writable});
    return map_error::none;
}

std::optional<std::uint64_t> iommu::unmap(std::uint64_t iova, std::uint64_t size) {
    if (size == 0 || iova % page_size || size % page_size || iova + size < iova) return std::nullopt;
    std::unique_lock lock(mu_);
    const std::uint64_t end = iova + size;
    // A mapping that straddles either end of the range cannot be split; then nothing
    // is unmapped at all (type1 v2 checks both ends before it changes anything).
    auto straddles = [&](std::uint64_t at) {
        auto it = maps_.upper_bound(at);
        if (it == maps_.begin()) return false;
        --it;
        return it->first < at && it->first + it->second.size > at;
    };
    if (straddles(iova) || straddles(end)) return std::nullopt;
    std::uint64_t unmapped = 0;
    for (auto it = maps_.lower_bound(iova); it != maps_.end() && it->first < end;) {
        unmapped += it->second.size;
        it = maps_.erase(it);
    }
    return unmapped;
}

std::vector<iommu_mapping> iommu::mappings() const {
    std::shared_lock lock(mu_);
    std::vector<iommu_mapping> out;
    out.reserve(maps_.size());
    for (const auto& [iova, m] : maps_) out.push_back({iova, m.vaddr, m.size, m.readable, m.writable});
    return out;
}

void iommu::clear() {
    std::unique_lock lock(mu_);
    maps_.clear();
}

bool iommu::copy(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const {
    if (len == 0) return true;
    {
        std::lock_guard lock(fault_mu_);
        for (auto it = injected_.begin(); it != injected_.end(); ++it) {
            if (iova < it->first + it->second && it->first < iova + len) {
                injected_.erase(it);
                faults_.push_back({iova, len, write});
                return false;
            }
        }
    }
    std::shared_lock lock(mu_);
    // Walks the range piece by piece; the first pass only checks, so that a faulting
    // access changes nothing, the second copies.
    auto walk = [&](bool do_copy) {
        std::size_t done = 0;
        while (done < len) {
            const std::uint64_t a = iova + done;
            auto it = maps_.upper_bound(a);
            if (it == maps_.begin()) return false;
            --it;
            const auto& m = it->second;
            if (a >= it->first + m.size || (write ? !m.writable : !m.readable)) return false;
            const std::size_t n = std::min<std::uint64_t>(len - done, it->first + m.size - a);
            if (do_copy) {
                std::byte* host = m.vaddr + (a - it->first);
                if (write) {
                    std::memcpy(host, buf + done, n);
                } else {
                    std::memcpy(buf + done, host, n);
                }
            }
            done += n;
        }
        return true;
    };
    if (!walk(false)) {
        lock.unlock();
        record_fault(iova, len, write);
        return false;
    }
    walk(true);
    return true;
}

bool iommu::read(std::uint64_t iova, void* dst, std::size_t len) const {
    return copy(iova, static_cast<std::byte*>(dst), len, false);
}

bool iommu::write(std::uint64_t iova, const void* src, std::size_t len) const {
    return copy(iova, const_cast<std::byte*>(static_cast<const std::byte*>(src)), len, true);
}

void iommu::record_fault(std::uint64_t iova, std::size_t len, bool write) const {
    std::lock_guard lock(fault_mu_);
    if (faults_.size() < 4096) faults_.push_back({iova, len, write});
}

std::size_t iommu::mapping_count() const {
    std::shared_lock lock(mu_);
    return maps_.size();
}

std::uint64_t iommu::mapped_bytes() const {
    std::shared_lock lock(mu_);
    std::uint64_t n = 0;
    for (const auto& [iova, m] : maps_) n += m.size;
    return n;
}

std::vector<iommu_fault> iommu::faults() const {
    std::lock_guard lock(fault_mu_);
    return faults_;
}

std::size_t iommu::fault_count() const {
    std::lock_guard lock(fault_mu_);
    return faults_.size();
}

void iommu::inject_fault(std::uint64_t iova, std::uint64_t len) {
    std::lock_guard lock(fault_mu_);
    injected_.push_back({iova, len});
}

}  // namespace cxv::sim
