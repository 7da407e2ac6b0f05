// The common part of every object made on an HCA: a share of the HCA's link (so the
// object knows whether the HCA still runs when it is destroyed) and the destroy
// command that releases it.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "driver/hca/hca.h"
#include "driver/vfio/vfio.h"
#include "base/result.h"

namespace cxv::driver {

// Memory of a work or completion queue: the ring and the queue's 64-byte doorbell record
// after it. The firmware is given the ring as a list of pages (the command's pas[]) of
// 4 KiB << log_page_size() bytes (PRM "CQ Context", "QP Context", "SRQ Context"): the
// largest power of two that divides the ring, up to 1 GiB, with the ring's IOVA aligned
// to it. The IOVA range is contiguous whatever backs it, so large rings take few entries:
// with 4 KiB pages a CQ of 2^20 64-byte CQEs would need 128 KiB of page list, more than
// the command queue's mailboxes hold (driver::cmd_queue), as Linux's mlx5_ib also picks
// the largest page size the buffer allows.
struct queue_memory {
    static result<queue_memory> alloc(vfio::device& dev, std::size_t ring_bytes);
    std::byte* ring() const noexcept { return buf.data(); }
    std::byte* doorbell_record() const noexcept { return buf.data() + ring_bytes; }
    std::uint64_t doorbell_record_iova() const noexcept { return buf.iova() + ring_bytes; }
    unsigned log_page_size() const noexcept { return page_shift - 12; }  // the contexts' field
    std::size_t pages() const noexcept { return ring_bytes >> page_shift; }
    std::uint64_t page_iova(std::size_t i) const noexcept { return buf.iova() + (std::uint64_t{i} << page_shift); }

    vfio::dma_buffer buf;
    std::size_t ring_bytes = 0;  // a multiple of the page size
    unsigned page_shift = 12;
};

class hca_object {
public:
    hca_object(const hca_object&) = delete;
    hca_object& operator=(const hca_object&) = delete;

    // Whether the HCA the object was made on has been torn down (its firmware state
    // went with TEARDOWN_HCA; only host memory is left to free).
    bool orphaned() const;

protected:
    explicit hca_object(hca& h);
    ~hca_object();
    hca& owner() const noexcept { return *hca_; }
    // The create command succeeded: from now on the object exists in the firmware (and
    // counts among the HCA's live objects) until destroy_with() succeeds.
    void created();
    // Runs the object's destroy command once, if the HCA still runs. A failure is
    // returned (the firmware keeps the object: e.g. RESOURCE_BUSY while in use).
    status destroy_with(std::vector<std::byte> in);
    // Calls f(hca&) while the HCA is sure to stay up; not at all once it is torn down.
    template <typename F>
    void with_live_owner(F&& f) {
        std::shared_lock lock(link_->mu);
        if (link_->owner != nullptr) f(*hca_);
    }
    bool destroyed_ = true;  // nothing in the firmware until created()

private:
    std::shared_ptr<hca_link> link_;
    hca* hca_;
};

}  // namespace cxv::driver
