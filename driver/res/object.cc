#include "driver/res/object.h"

#include <algorithm>
#include <bit>
#include <shared_mutex>

namespace cxv::driver {

result<queue_memory> queue_memory::alloc(vfio::device& dev, std::size_t ring_bytes) {
    queue_memory m;
    m.ring_bytes = (ring_bytes + 4095) / 4096 * 4096;
    m.page_shift = m.ring_bytes == 0 ? 12 : std::min(static_cast<unsigned>(std::countr_zero(m.ring_bytes)), 30u);
    auto b = dev.alloc_dma(m.ring_bytes + 64, std::size_t{1} << m.page_shift);
    if (!b) return b.error();
    m.buf = std::move(b).value();
    return m;
}

hca_object::hca_object(hca& h) : link_(h.link()), hca_(&h) {}

hca_object::~hca_object() = default;

void hca_object::created() {
    destroyed_ = false;
    link_->objects.fetch_add(1);
}

bool hca_object::orphaned() const {
    std::shared_lock lock(link_->mu);
    return link_->owner == nullptr;
}

status hca_object::destroy_with(std::vector<std::byte> in) {
    if (destroyed_) return ok_status();
    // Shared with other objects' destroys; teardown waits for it and then orphans us.
    std::shared_lock lock(link_->mu);
    if (link_->owner != nullptr) {
        auto r = hca_->exec(in, 16);
        if (!r) return r.error();
    }  // else TEARDOWN_HCA released it with everything else
    destroyed_ = true;
    link_->objects.fetch_sub(1);
    return ok_status();
}

}  // namespace cxv::driver
