// A double-ended queue for the transport's per-QP lists (the send requests a requester
// keeps until they are answered): a ring of elements that stay constructed when popped,
// so that a steady stream of messages reuses them, and the buffers they own, without
// allocating. Pushes at the back, pops at the front; iterates oldest first.
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace cxv::sim {

template <typename T>
class ring_deque {
    template <typename Q, typename V>
    class iter {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = V*;
        using reference = V&;
        iter() = default;
        iter(Q* q, std::size_t i) : q_(q), i_(i) {}
        V& operator*() const { return q_->at_offset(i_); }
        V* operator->() const { return &q_->at_offset(i_); }
        iter& operator++() {
            ++i_;
            return *this;
        }
        iter operator++(int) {
            iter t = *this;
            ++i_;
            return t;
        }
        bool operator==(const iter& o) const { return i_ == o.i_; }

    private:
        Q* q_ = nullptr;
        std::size_t i_ = 0;
    };

public:
    using iterator = iter<ring_deque, T>;
    using const_iterator = iter<const ring_deque, const T>;

    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    T& front() { return at_offset(0); }
    T& back() { return at_offset(size_ - 1); }
    const T& front() const { return at_offset(0); }
    const T& back() const { return at_offset(size_ - 1); }

    // Moves `v` into the slot after the last (the slot's old contents are assigned over).
    void push_back(T&& v) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(v);
        ++size_;
    }
    // The front element stays in its slot, for a later push_back to assign over.
    void pop_front() {
        head_ = (head_ + 1) & (slots_.size() - 1);
        --size_;
    }
    void clear() noexcept {
        head_ = 0;
        size_ = 0;
    }

    iterator begin() { return {this, 0}; }
    iterator end() { return {this, size_}; }
    const_iterator begin() const { return {this, 0}; }
    const_iterator end() const { return {this, size_}; }

private:
    T& at_offset(std::size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
    const T& at_offset(std::size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
    void grow() {
        std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
        for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(at_offset(i));
        slots_.swap(bigger);
        head_ = 0;
    }

    std::vector<T> slots_;  // a power of two of them
    std::size_t head_ = 0, size_ = 0;
};

}  // namespace cxv::sim
