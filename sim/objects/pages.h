// Firmware pages (PRM MANAGE_PAGES): 4 KiB pages of host memory the driver gives the
// device. The model keeps object contexts in them, as a card keeps ICM: each object
// takes one 256-byte slot, read and written through the IOMMU, so a driver that unmaps
// or takes back pages still in use makes the device fault, as it would on a card.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace cxv::sim {

class pages {
public:
    static constexpr std::size_t page_size = 4096;
    static constexpr std::size_t slot_size = 256;
    static constexpr unsigned slots_per_page = page_size / slot_size;

    struct slot {
        std::uint64_t iova = 0;
        bool valid() const noexcept { return iova != 0; }
    };

    // False when the page is not 4 KiB aligned, is zero, or was already given.
    bool give(std::uint64_t iova);
    // Up to n pages with no slot in use, highest address first, removed from the pool.
    std::vector<std::uint64_t> take(std::size_t n);
    std::optional<slot> alloc_slot();
    void free_slot(slot s);
    void clear() { pages_.clear(); }

    bool contains(std::uint64_t iova) const { return pages_.count(iova) != 0; }
    std::size_t owned() const noexcept { return pages_.size(); }
    std::size_t free_slots() const noexcept;
    std::size_t used_slots() const noexcept;
    // Pages with no slot in use: what take() could give back.
    std::size_t free_pages() const noexcept;

private:
    std::map<std::uint64_t, std::uint16_t> pages_;  // page IOVA -> bitmask of used slots
};

}  // namespace cxv::sim
