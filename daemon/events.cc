#include "daemon/events.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cxv::daemon {

result<std::shared_ptr<event_inbox>> event_inbox::create() {
    std::shared_ptr<event_inbox> in(new event_inbox());
    in->wake_ = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!in->wake_) return error{errno, fmt::format("eventfd: {}", std::strerror(errno))};
    return in;
}

void event_inbox::wire(const std::shared_ptr<event_inbox>& in, driver::hca::options& o, std::size_t device,
                       std::uint64_t gen) {
    o.on_completion = [in, device, gen](std::uint32_t cqn) {
        item it;
        it.device = device;
        it.generation = gen;
        it.completion = true;
        it.cqn = cqn;
        in->push(std::move(it));
    };
    o.on_event = [in, device, gen, before = std::move(o.on_event)](const driver::hca_event& e) {
        if (before) before(e);
        item it;
        it.device = device;
        it.generation = gen;
        it.event = e;
        in->push(std::move(it));
    };
}

void event_inbox::push(item it) {
    {
        std::lock_guard lock(mu_);
        if (queue_.size() >= capacity) {
            if (it.completion || it.event.what != driver::hca_event::fatal) {
                ++dropped_;
                return;
            }
            const bool kept = std::any_of(fatal_.begin(), fatal_.end(), [&](const item& f) {
                return f.device == it.device && f.generation == it.generation;
            });
            if (!kept) fatal_.push_back(std::move(it));  // one per function and generation
        } else {
            queue_.push_back(std::move(it));
        }
    }
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

std::vector<event_inbox::item> event_inbox::take() {
    std::uint64_t n = 0;
    (void)!::read(wake_.get(), &n, sizeof n);
    std::lock_guard lock(mu_);
    std::vector<item> out;
    out.swap(queue_);
    for (auto& f : fatal_) out.push_back(std::move(f));
    fatal_.clear();
    return out;
}

std::uint64_t event_inbox::dropped() const {
    std::lock_guard lock(mu_);
    return dropped_;
}

}  // namespace cxv::daemon
