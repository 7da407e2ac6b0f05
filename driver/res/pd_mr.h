// Protection domains and memory regions.
//
// A memory region is the caller's memory made reachable by the device (its pages mapped
// into the IOMMU, driver/vfio) and described to the firmware by an MKEY in MTT mode
// (PRM "Memory Key", "MTT"): addresses in WQEs are the caller's virtual addresses, the
// MTT list turns each 4 KiB page into its IOVA, and the access flags say who may read
// and write. lkey and rkey are the same key: index (31:8) and a variant byte (7:0) that
// changes from key to key so that a stale key does not name a new region.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/values.h"
#include "driver/res/object.h"
#include "driver/vfio/vfio.h"

namespace cxv::driver {

class pd : public hca_object {
public:
    // ALLOC_PD.
    static result<std::shared_ptr<pd>> create(hca& h);
    ~pd();
    // DEALLOC_PD now; EBUSY while MRs, QPs or SRQs use it (verbs' rule: the firmware
    // does not count a PD's users).
    status destroy();
    std::uint32_t pdn() const noexcept { return pdn_; }
    hca& device() const noexcept { return owner(); }

    // Objects made in this PD count themselves while they exist in the firmware.
    void hold() noexcept { users_.fetch_add(1); }
    void release() noexcept { users_.fetch_sub(1); }

private:
    explicit pd(hca& h) : hca_object(h) {}
    std::uint32_t pdn_ = 0;
    std::atomic<int> users_{0};
};

// Access rights of a memory region: mr_access (base/values.h).

class mr : public hca_object {
public:
    // Registers [addr, addr + length): maps its pages for DMA (writable by the device
    // when any write access is asked for) and creates the MKEY. Remote write or atomic
    // access needs local write (verbs' rule, EINVAL otherwise). The memory must stay
    // valid until the region is destroyed.
    static result<std::shared_ptr<mr>> create(std::shared_ptr<pd> pd, void* addr, std::size_t length,
                                              unsigned access);
    ~mr();
    status destroy();

    std::uint32_t lkey() const noexcept { return key_; }
    std::uint32_t rkey() const noexcept { return key_; }
    void* addr() const noexcept { return addr_; }
    std::size_t length() const noexcept { return length_; }
    unsigned access() const noexcept { return access_; }

private:
    mr(std::shared_ptr<pd> p) : hca_object(p->device()), pd_(std::move(p)) {}
    std::shared_ptr<pd> pd_;
    vfio::dma_buffer mapping_;
    std::uint32_t key_ = 0;
    void* addr_ = nullptr;
    std::size_t length_ = 0;
    unsigned access_ = 0;
};

}  // namespace cxv::driver
