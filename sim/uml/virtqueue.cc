#include "sim/uml/virtqueue.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <utility>

namespace cxv::sim::uml {

namespace {

// VIRTIO 1.1, 2.6.5: a descriptor is 16 bytes (addr, len, flags, next); the available
// ring is flags, idx, ring[num]; the used ring is flags, idx, then {id, len} pairs.
constexpr std::uint16_t kDescNext = 1, kDescWrite = 2, kDescIndirect = 4;
constexpr std::uint16_t kAvailNoInterrupt = 1;

template <typename T>
T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

std::uint16_t load_idx(const std::byte* p) {
    return std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(const_cast<std::byte*>(p)))
        .load(std::memory_order_acquire);
}

}  // namespace

std::size_t virtqueue::chain::writable_size() const {
    std::size_t n = 0;
    for (const auto& w : writable) n += w.size();
    return n;
}

std::size_t virtqueue::chain::write(std::span<const std::byte> data) {
    std::size_t done = 0;
    for (const auto& w : writable) {
        if (done == data.size()) break;
        const std::size_t n = std::min(w.size(), data.size() - done);
        std::memcpy(w.data(), data.data() + done, n);
        done += n;
    }
    return done;
}

virtqueue::~virtqueue() {
    kick_.reset();  // kick, then call: the members alone would close them the other way round
    call_.reset();
}

void virtqueue::set_kick(unique_fd fd) { kick_ = std::move(fd); }

void virtqueue::set_call(unique_fd fd) { call_ = std::move(fd); }

void virtqueue::stop() {
    desc_ = avail_ = used_ = nullptr;
}

void virtqueue::take_kick() {
    std::uint64_t n;
    if (kick_) (void)!::read(kick_.get(), &n, sizeof n);
}

std::optional<virtqueue::chain> virtqueue::pop(const translate_fn& translate) {
    if (!ready()) return std::nullopt;
    const std::uint16_t avail_idx = load_idx(avail_ + 2);
    if (avail_idx == next_avail_) return std::nullopt;
    chain c;
    c.head = load<std::uint16_t>(avail_ + 4 + 2 * (next_avail_ % num_));
    ++next_avail_;
    std::uint16_t i = c.head;
    bool bad = false;
    for (unsigned steps = 0;; ++steps) {
        if (i >= num_ || steps >= num_) {
            bad = true;
            break;
        }
        const std::byte* d = desc_ + 16 * std::size_t{i};
        const auto addr = load<std::uint64_t>(d);
        const auto len = load<std::uint32_t>(d + 8);
        const auto flags = load<std::uint16_t>(d + 12);
        const auto next = load<std::uint16_t>(d + 14);
        std::byte* p = translate(addr, len);
        if ((flags & kDescIndirect) != 0 || (p == nullptr && len != 0)) {
            bad = true;  // indirect descriptors were not offered (VIRTIO_F_INDIRECT_DESC)
            break;
        }
        if ((flags & kDescWrite) != 0) {
            c.writable.emplace_back(p, len);
        } else if (!c.writable.empty()) {
            bad = true;  // 2.6.4.2: readable descriptors come before writable ones
            break;
        } else {
            c.readable.insert(c.readable.end(), p, p + len);
        }
        if ((flags & kDescNext) == 0) break;
        i = next;
    }
    if (bad) {
        ++malformed_;
        c.readable.clear();
        c.writable.clear();
        push(c, 0);
        notify();
        return pop(translate);
    }
    return c;
}

void virtqueue::push(const chain& c, std::uint32_t written) {
    std::byte* e = used_ + 4 + 8 * std::size_t{next_used_ % num_};
    const std::uint32_t id = c.head;
    std::memcpy(e, &id, 4);
    std::memcpy(e + 4, &written, 4);
    ++next_used_;
    std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(used_ + 2))
        .store(next_used_, std::memory_order_release);
}

void virtqueue::notify() {
    if (!call_ || !ready()) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if ((load_idx(avail_) & kAvailNoInterrupt) != 0) return;
    const std::uint64_t one = 1;
    (void)!::write(call_.get(), &one, sizeof one);
}

}  // namespace cxv::sim::uml
