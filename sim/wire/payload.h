// The payload of a wire::packet: bytes with the part of std::vector<std::byte>'s interface
// the model uses, that keeps up to `inline_capacity` bytes inside the object. A 64-byte
// message, and every ACK, is built, decoded, copied and moved without touching the heap;
// a longer payload (up to a 4 KiB MTU per packet, or a whole message on the requester)
// lives on the heap as in a vector. Copies and moves of an inline payload copy only its
// used bytes; a move of a heap payload takes the pointer and leaves the source empty.
// Iterators are plain pointers, so a payload converts to std::span<const std::byte>.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>

namespace cxv::sim::wire {

class payload_buffer {
public:
    using value_type = std::byte;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using reference = std::byte&;
    using const_reference = const std::byte&;
    using pointer = std::byte*;
    using const_pointer = const std::byte*;
    using iterator = std::byte*;
    using const_iterator = const std::byte*;

    // 256 bytes: a short message and the headers' worth of an atomic or READ fit; the
    // packet stays under 512 bytes.
    static constexpr std::size_t inline_capacity = 256;

    payload_buffer() noexcept = default;
    payload_buffer(const payload_buffer& o) { assign(o.begin(), o.end()); }
    payload_buffer(payload_buffer&& o) noexcept { take(o); }
    payload_buffer& operator=(const payload_buffer& o) {
        if (this != &o) assign(o.begin(), o.end());
        return *this;
    }
    payload_buffer& operator=(payload_buffer&& o) noexcept {
        if (this != &o) {
            release();
            take(o);
        }
        return *this;
    }
    ~payload_buffer() { release(); }

    std::size_t size() const noexcept { return size_; }
    std::size_t capacity() const noexcept { return cap_; }
    bool empty() const noexcept { return size_ == 0; }
    std::byte* data() noexcept { return data_; }
    const std::byte* data() const noexcept { return data_; }
    iterator begin() noexcept { return data_; }
    iterator end() noexcept { return data_ + size_; }
    const_iterator begin() const noexcept { return data_; }
    const_iterator end() const noexcept { return data_ + size_; }
    const_iterator cbegin() const noexcept { return data_; }
    const_iterator cend() const noexcept { return data_ + size_; }
    std::byte& operator[](std::size_t i) noexcept { return data_[i]; }
    const std::byte& operator[](std::size_t i) const noexcept { return data_[i]; }
    std::byte& front() noexcept { return data_[0]; }
    std::byte& back() noexcept { return data_[size_ - 1]; }

    void clear() noexcept { size_ = 0; }
    void reserve(std::size_t n) {
        if (n > cap_) grow_to(n);
    }
    // New bytes are zero, as in a vector.
    void resize(std::size_t n) { resize(n, std::byte{0}); }
    void resize(std::size_t n, std::byte v) {
        if (n > cap_) grow_to(std::max(n, 2 * cap_));
        if (n > size_) std::memset(data_ + size_, static_cast<int>(v), n - size_);
        size_ = n;
    }
    void push_back(std::byte b) {
        if (size_ == cap_) grow_to(2 * cap_);
        data_[size_++] = b;
    }
    void assign(std::size_t n, std::byte v) {
        size_ = 0;
        resize(n, v);
    }
    template <std::forward_iterator It>
    void assign(It first, It last) {
        const auto n = static_cast<std::size_t>(std::distance(first, last));
        size_ = 0;
        if (n > cap_) grow_to(n);
        copy_in(data_, first, last, n);
        size_ = n;
    }
    // Inserts [first, last) before pos; the range must not come from this buffer.
    template <std::forward_iterator It>
    iterator insert(const_iterator pos, It first, It last) {
        const auto at = static_cast<std::size_t>(pos - data_);
        const auto n = static_cast<std::size_t>(std::distance(first, last));
        if (size_ + n > cap_) grow_to(std::max(size_ + n, 2 * cap_));
        if (at < size_) std::memmove(data_ + at + n, data_ + at, size_ - at);
        copy_in(data_ + at, first, last, n);
        size_ += n;
        return data_ + at;
    }

    friend bool operator==(const payload_buffer& a, const payload_buffer& b) noexcept {
        return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data_, b.data_, a.size_) == 0);
    }

private:
    bool on_heap() const noexcept { return data_ != inline_; }
    template <typename It>
    static void copy_in(std::byte* to, It first, It last, std::size_t n) {
        if constexpr (std::contiguous_iterator<It> && std::is_same_v<std::iter_value_t<It>, std::byte>) {
            if (n != 0) std::memmove(to, std::to_address(first), n);
        } else {
            std::copy(first, last, to);
        }
    }
    void grow_to(std::size_t n) {
        auto* p = static_cast<std::byte*>(std::malloc(n));
        if (p == nullptr) throw std::bad_alloc();
        if (size_ != 0) std::memcpy(p, data_, size_);
        release();
        data_ = p;
        cap_ = n;
    }
    void release() noexcept {
        if (on_heap()) std::free(data_);
        data_ = inline_;
        cap_ = inline_capacity;
    }
    // Leaves o empty, inline.
    void take(payload_buffer& o) noexcept {
        if (o.on_heap()) {
            data_ = o.data_;
            cap_ = o.cap_;
            o.data_ = o.inline_;
            o.cap_ = inline_capacity;
        } else if (o.size_ != 0) {
            std::memcpy(inline_, o.inline_, o.size_);
        }
        size_ = o.size_;
        o.size_ = 0;
    }

    std::byte* data_ = inline_;
    std::size_t size_ = 0;
    std::size_t cap_ = inline_capacity;
    alignas(16) std::byte inline_[inline_capacity];
};

}  // namespace cxv::sim::wire
