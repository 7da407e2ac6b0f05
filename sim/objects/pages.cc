#include "sim/objects/pages.h"

#include <bit>

namespace cxv::sim {

bool pages::give(std::uint64_t iova) {
    if (iova % page_size) return false;  // IOVA 0 is an address like any other
    return pages_.emplace(iova, 0).second;
}

std::vector<std::uint64_t> pages::take(std::size_t n) {
    // Highest addresses first: slots are taken lowest first (alloc_slot), so the pages
    // that go back are the ones least likely to be needed again, and a driver that gives
    // pages lowest first from blocks it adds as it needs them gets whole blocks back.
    std::vector<std::uint64_t> out;
    for (auto it = pages_.end(); it != pages_.begin() && out.size() < n;) {
        --it;
        if (it->second == 0) {
            out.push_back(it->first);
            it = pages_.erase(it);
        }
    }
    return out;
}

std::optional<pages::slot> pages::alloc_slot() {
    for (auto& [iova, used] : pages_) {
        if (used == 0xffff) continue;
        const unsigned i = static_cast<unsigned>(std::countr_one(used));
        used = static_cast<std::uint16_t>(used | (1u << i));
        return slot{iova + i * slot_size};
    }
    return std::nullopt;
}

void pages::free_slot(slot s) {
    auto it = pages_.find(s.iova & ~std::uint64_t{page_size - 1});
    if (it == pages_.end()) return;
    const unsigned i = static_cast<unsigned>((s.iova % page_size) / slot_size);
    it->second = static_cast<std::uint16_t>(it->second & ~(1u << i));
}

std::size_t pages::free_slots() const noexcept {
    return pages_.size() * slots_per_page - used_slots();
}

std::size_t pages::free_pages() const noexcept {
    std::size_t n = 0;
    for (const auto& [iova, used] : pages_) n += used == 0;
    return n;
}

std::size_t pages::used_slots() const noexcept {
    std::size_t n = 0;
    for (const auto& [iova, used] : pages_) n += static_cast<std::size_t>(std::popcount(used));
    return n;
}

}  // namespace cxv::sim
