#include "driver/hca/bf_alloc.h"

#include <cerrno>

#include <fmt/format.h>

#include "hw/doorbell.h"

namespace cxv::driver {

status bf_allocator::check_uar(std::uint32_t uar, std::size_t bar_size, const std::string& who) {
    if ((std::uint64_t{uar} + 1) * hw::uar_page_size > bar_size) {
        return error{EPROTO, fmt::format("{}: the firmware gave UAR {}, beyond BAR0 ({} bytes)", who, uar, bar_size)};
    }
    return ok_status();
}

result<bf_reg> bf_allocator::alloc() {
    std::lock_guard lock(mu_);
    if (free_.empty()) {
        auto r = alloc_uar_();
        if (!r) return r.error();
        const std::uint32_t uar = r.value();
        uars_.push_back(uar);  // deallocated at teardown even if it turns out unusable
        if (auto s = check_uar(uar, bar_size_, who_); !s) return s.error();
        // The registers fill the second half of the UAR page (PRM §"UAR Page Format"),
        // 2^log_bf_reg_size bytes each: 64 bytes at least, the half page at most.
        if (log_size_ < 6 || log_size_ > 11) {
            return error{EPROTO, fmt::format("{}: BlueFlame registers of 2^{} bytes do not fit a UAR page", who_,
                                             log_size_)};
        }
        const std::size_t size = std::size_t{1} << log_size_;
        for (std::size_t off = hw::uar_page_size - size; off >= hw::uar_bf_offset; off -= size) {
            free_.push_back({uar, off, size});
        }
    }
    const bf_reg r = free_.back();
    free_.pop_back();
    return r;
}

void bf_allocator::free(const bf_reg& r) {
    std::lock_guard lock(mu_);
    free_.push_back(r);
}

std::vector<std::uint32_t> bf_allocator::uars() const {
    std::lock_guard lock(mu_);
    return uars_;
}

}  // namespace cxv::driver
