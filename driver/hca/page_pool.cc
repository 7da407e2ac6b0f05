#include "driver/hca/page_pool.h"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "hw/cmd_values.h"
#include "hw/ifc.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {

// Page addresses one MANAGE_PAGES carries: what keeps its mailbox chain short.
constexpr unsigned kMaxPasPerCommand = 512;

constexpr std::uint16_t op_mod(hw::manage_pages_op_mod m) { return static_cast<std::uint16_t>(m); }

}  // namespace

// ---- page_ledger ----

void page_ledger::add_block(std::uint64_t iova, std::size_t bytes) {
    auto b = std::make_unique<block>();
    b->iova = iova;
    b->pages = bytes / page_size;
    // Handed out from the back: the block's pages go in lowest IOVA first.
    for (std::size_t off = bytes; off > 0; off -= page_size) b->free.push_back(iova + off - page_size);
    blocks_.push_back(std::move(b));
}

std::vector<std::uint64_t> page_ledger::hand_out(std::size_t n) {
    std::vector<std::uint64_t> list;
    for (auto& b : blocks_) {
        while (list.size() < n && !b->free.empty()) {
            list.push_back(b->free.back());
            b->free.pop_back();
            given_[list.back()] = b.get();
        }
    }
    return list;
}

void page_ledger::undo(const std::vector<std::uint64_t>& pages) {
    for (auto iova : pages) {
        given_.at(iova)->free.push_back(iova);
        given_.erase(iova);
    }
}

bool page_ledger::give_back(std::uint64_t iova) {
    auto it = given_.find(iova);
    if (it == given_.end()) return false;
    it->second->free.push_back(iova);
    given_.erase(it);
    return true;
}

void page_ledger::forget_given() {
    for (auto& [iova, b] : given_) b->free.push_back(iova);
    given_.clear();
}

std::vector<std::uint64_t> page_ledger::release_empty() {
    std::vector<std::uint64_t> out;
    std::erase_if(blocks_, [&](const std::unique_ptr<block>& b) {
        if (b->free.size() != b->pages) return false;
        out.push_back(b->iova);
        return true;
    });
    return out;
}

std::size_t page_ledger::free() const noexcept {
    std::size_t n = 0;
    for (const auto& b : blocks_) n += b->free.size();
    return n;
}

// ---- page_pool ----

status page_pool::give(std::int32_t n) {
    if (n < 0) return take(static_cast<std::uint32_t>(-static_cast<std::int64_t>(n)), nullptr);
    if (static_cast<std::uint32_t>(n) > max_pages) {
        return error{EPROTO, fmt::format("{}: the firmware asks for {} pages ({} MiB): not believed", dev_.bdf(), n,
                                         static_cast<std::uint64_t>(n) * page_ledger::page_size >> 20)};
    }
    // MANAGE_PAGES(ALLOCATION_SUCCESS) is sent even for 0 pages: the firmware expects the answer.
    std::uint32_t left = static_cast<std::uint32_t>(n);
    do {
        const std::uint32_t batch = std::min(left, kMaxPasPerCommand);
        std::vector<std::uint64_t> list;
        {
            std::lock_guard lock(mu_);
            list = ledger_.hand_out(batch);
        }
        while (list.size() < batch) {
            auto mem = dev_.alloc_dma(block_size, block_size);
            if (!mem) return mem.error();
            std::lock_guard lock(mu_);
            ledger_.add_block(mem->iova(), block_size);
            blocks_.push_back(std::move(mem).value());
            auto more = ledger_.hand_out(batch - list.size());
            list.insert(list.end(), more.begin(), more.end());
        }
        auto in = command<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, op_mod(hw::manage_pages_op_mod::ALLOCATION_SUCCESS),
                                                list.size() * 8);
        ifc::set<ifc::manage_pages_in::function_id>(in.data(), function_id_);
        ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), static_cast<std::uint32_t>(list.size()));
        for (std::size_t i = 0; i < list.size(); ++i) ifc::set<ifc::manage_pages_in::pas>(in.data(), i, list[i]);
        if (auto r = cmd_.exec(in, 16); !r) {
            std::lock_guard lock(mu_);
            ledger_.undo(list);
            return r.error();
        }
        left -= batch;
    } while (left > 0);
    return ok_status();
}

status page_pool::take(std::uint32_t n, std::uint32_t* got) {
    std::uint32_t total = 0;
    while (n > 0) {
        const std::uint32_t batch = std::min(n, kMaxPasPerCommand);
        auto in = command<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES, op_mod(hw::manage_pages_op_mod::HCA_RETURN_PAGES));
        ifc::set<ifc::manage_pages_in::function_id>(in.data(), function_id_);
        ifc::set<ifc::manage_pages_in::input_num_entries>(in.data(), batch);
        auto r = cmd_.exec(in, ifc::manage_pages_out::size_bytes + std::size_t{batch} * 8);
        if (!r) return r.error();
        const std::uint32_t back = ifc::get<ifc::manage_pages_out::output_num_entries>(r->data());
        if (back > batch) {
            return error{EPROTO, fmt::format("{}: MANAGE_PAGES returned {} pages for {}", dev_.bdf(), back, batch)};
        }
        std::lock_guard lock(mu_);
        for (std::uint32_t i = 0; i < back; ++i) {
            const std::uint64_t iova = ifc::get<ifc::manage_pages_out::pas>(r->data(), i);
            if (!ledger_.give_back(iova)) {
                return error{EPROTO, fmt::format("{}: firmware returned page 0x{:x} it was never given",
                                                 dev_.bdf(), iova)};
            }
        }
        total += back;
        if (back < batch) break;  // the firmware has no more to give back
        n -= batch;
    }
    if (got) *got = total;
    // The blocks the firmware no longer holds any page of go back to the host; their
    // buffers are unmapped and released after the lock.
    std::vector<vfio::dma_buffer> gone;
    {
        std::lock_guard lock(mu_);
        for (const std::uint64_t iova : ledger_.release_empty()) {
            const auto it = std::find_if(blocks_.begin(), blocks_.end(),
                                         [&](const vfio::dma_buffer& b) { return b.iova() == iova; });
            if (it == blocks_.end()) continue;
            gone.push_back(std::move(*it));
            blocks_.erase(it);
        }
    }
    return ok_status();
}

status page_pool::reclaim_all() {
    for (;;) {
        const std::size_t left = given();
        if (left == 0) return ok_status();
        std::uint32_t got = 0;
        if (auto s = take(static_cast<std::uint32_t>(left), &got); !s) return s;
        if (got == 0) {
            return error{EBUSY, fmt::format("{}: firmware keeps {} pages after teardown", dev_.bdf(), left)};
        }
    }
}

void page_pool::forget_given() {
    std::lock_guard lock(mu_);
    ledger_.forget_given();
}

std::size_t page_pool::given() const {
    std::lock_guard lock(mu_);
    return ledger_.given();
}


void page_pool::start(std::function<void(const error&)> on_failure) {
    on_failure_ = std::move(on_failure);
    thread_ = std::thread([this] { worker(); });
}

void page_pool::request(std::int32_t n) {
    std::lock_guard lock(work_mu_);
    work_.push_back(n);
    work_cv_.notify_one();
}

void page_pool::stop() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard lock(work_mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
}

void page_pool::worker() {
    for (;;) {
        std::int32_t n = 0;
        {
            std::unique_lock lock(work_mu_);
            work_cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
            if (stop_) return;
            n = work_.front();
            work_.erase(work_.begin());
        }
        if (auto s = give(n); !s && on_failure_) on_failure_(s.error());
    }
}

}  // namespace cxv::driver
