// BlueFlame registers (PRM §"UAR Page Format", §"BlueFlame"): the second half of a UAR
// page holds registers of 2^log_bf_reg_size bytes each (64 bytes at least, the half page
// at most), two halves of which a QP alternates between. Each QP gets a register no other
// QP uses; UAR pages are allocated (ALLOC_UAR, through the function given) as needed, and
// kept until teardown, when the HCA deallocates every page in uars().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"

namespace cxv::driver {

// A BlueFlame register: in UAR page `uar`, at `offset` from the page's start, `size` bytes.
struct bf_reg {
    std::uint32_t uar = 0;
    std::size_t offset = 0;
    std::size_t size = 0;
};

class bf_allocator {
public:
    // `alloc_uar` runs ALLOC_UAR; `bar_size` bounds the UAR pages the firmware may give
    // (a page beyond BAR0 is a reply gone wrong); `log_bf_reg_size` is the capability.
    bf_allocator(std::function<result<std::uint32_t>()> alloc_uar, std::size_t bar_size, unsigned log_bf_reg_size,
                 std::string who)
        : alloc_uar_(std::move(alloc_uar)), bar_size_(bar_size), log_size_(log_bf_reg_size), who_(std::move(who)) {}

    // A register no other QP uses: a freed one, or one of a new UAR page.
    result<bf_reg> alloc();
    void free(const bf_reg& r);
    // The UAR pages allocated for registers (to deallocate at teardown).
    std::vector<std::uint32_t> uars() const;

    // EPROTO unless UAR page `uar` lies inside a BAR0 of `bar_size` bytes.
    static status check_uar(std::uint32_t uar, std::size_t bar_size, const std::string& who);

private:
    std::function<result<std::uint32_t>()> alloc_uar_;
    std::size_t bar_size_;
    unsigned log_size_;
    std::string who_;
    mutable std::mutex mu_;
    std::vector<std::uint32_t> uars_;
    std::vector<bf_reg> free_;
};

}  // namespace cxv::driver
