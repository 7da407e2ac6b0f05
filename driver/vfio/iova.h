// The IOVA space of a VFIO container: where in the IOMMU's usable ranges each DMA mapping
// goes. First fit, aligned, never at IOVA 0 (a null bus address is too easily a bug), and
// thread-safe. It only does the bookkeeping; MAP_DMA and UNMAP_DMA are the caller's.
// The free gaps are kept by address, so a reservation costs a step per gap it passes
// (few: freed space merges back), not one per reservation below it -- cxvd holds tens of
// thousands of mappings for its clients.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "driver/vfio/vfio.h"

namespace cxv::driver::vfio {

class iova_allocator {
public:
    static constexpr std::uint64_t page_size = 4096;

    explicit iova_allocator(std::vector<iommu_info::range> ranges);

    // `size` bytes at an IOVA aligned to `align` (a power of two) inside one usable range
    // and clear of every reservation; nothing when no range has room.
    std::optional<std::uint64_t> reserve(std::uint64_t size, std::uint64_t align);
    // Gives back the reservation that starts at `iova`.
    void release(std::uint64_t iova);

private:
    bool range_start(std::uint64_t iova) const;

    std::vector<std::uint64_t> range_starts_;     // where each usable range starts (sorted)
    std::mutex mu_;
    std::map<std::uint64_t, std::uint64_t> free_;  // first -> last byte of each free gap
    std::map<std::uint64_t, std::uint64_t> used_;  // iova -> size
};

}  // namespace cxv::driver::vfio
