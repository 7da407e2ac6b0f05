// The model's IOMMU: the table of IOVA ranges the driver mapped with VFIO_IOMMU_MAP_DMA,
// through which every device access to host memory goes.
//
// A device access outside the table is an IOMMU fault: it is refused (nothing is read
// or written), recorded, and reported to the caller, which turns it into the error a
// card would report (a failed command, an error CQE, a catastrophic event). Translations
// are looked up on every access and never cached, so an UNMAP takes effect at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace cxv::sim {

// VFIO's errno conventions for MAP/UNMAP (mirrors Linux's vfio_iommu_type1).
enum class map_error { none, invalid /*EINVAL*/, exists /*EEXIST*/, no_space /*ENOSPC*/ };

struct iommu_mapping {
    std::uint64_t iova;
    std::byte* vaddr;
    std::uint64_t size;
    bool readable, writable;
};

struct iommu_fault {
    std::uint64_t iova;
    std::size_t len;
    bool write;
};

class iommu {
public:
    static constexpr std::uint64_t page_size = 4096;
    static constexpr std::uint64_t iova_limit = std::uint64_t{1} << 48;  // usable IOVA bits

    // VFIO_IOMMU_MAP_DMA: iova, vaddr and size must be page aligned, size non-zero, the
    // range must not overlap an existing mapping.
    map_error map(std::uint64_t iova, void* vaddr, std::uint64_t size, bool readable,
                  bool writable);
    // VFIO_IOMMU_UNMAP_DMA: unmaps every mapping entirely inside [iova, iova+size); a
    // range that splits a mapping is refused (type1 v2 semantics). Returns the bytes
    // unmapped, or nullopt for EINVAL.
    std::optional<std::uint64_t> unmap(std::uint64_t iova, std::uint64_t size);
    void clear();
    // The current table, by IOVA (for a second IOMMU domain that must mirror this one).
    std::vector<iommu_mapping> mappings() const;

    // Device-side access: copy between host memory and the device. False (and a recorded
    // fault) when any byte of the range is unmapped or lacks the permission.
    bool read(std::uint64_t iova, void* dst, std::size_t len) const;
    bool write(std::uint64_t iova, const void* src, std::size_t len) const;

    std::size_t mapping_count() const;
    std::uint64_t mapped_bytes() const;
    std::vector<iommu_fault> faults() const;
    std::size_t fault_count() const;
    // Test hook: the next access to [iova, iova+len) faults as if unmapped.
    void inject_fault(std::uint64_t iova, std::uint64_t len);

private:
    struct mapping {
        std::uint64_t size;
        std::byte* vaddr;
        bool readable, writable;
    };
    bool copy(std::uint64_t iova, std::byte* buf, std::size_t len, bool write) const;
    void record_fault(std::uint64_t iova, std::size_t len, bool write) const;

    mutable std::shared_mutex mu_;
    std::map<std::uint64_t, mapping> maps_;  // by start IOVA
    mutable std::mutex fault_mu_;
    mutable std::vector<iommu_fault> faults_;
    mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> injected_;
};

}  // namespace cxv::sim
