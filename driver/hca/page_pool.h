// Firmware pages (PRM §"QUERY_PAGES", §"MANAGE_PAGES", §"Page Request Event"): host
// memory the device asks for at boot, before INIT_HCA and at run time, and gives back
// when asked or at teardown. Pages come from 2 MiB DMA blocks carved into 4 KiB pages.
//
// page_ledger is the accounting alone (which page IOVAs are free, which the firmware
// holds), with no device behind it; page_pool adds the DMA blocks, the MANAGE_PAGES
// commands, and the worker thread that serves PAGE_REQUEST events off the event thread
// (a command there would wait for its own completion event).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/result.h"
#include "driver/cmd/cmd_queue.h"
#include "driver/vfio/vfio.h"

namespace cxv::driver {

class page_ledger {
public:
    static constexpr std::size_t page_size = 4096;

    // A block of `bytes` (a multiple of page_size) at `iova` joins the free pages.
    void add_block(std::uint64_t iova, std::size_t bytes);
    // Up to `n` free pages, now counted as given to the firmware.
    std::vector<std::uint64_t> hand_out(std::size_t n);
    // Pages handed out that the firmware did not take after all: free again.
    void undo(const std::vector<std::uint64_t>& pages);
    // A page the firmware gave back; false if it was never given (or already back).
    bool give_back(std::uint64_t iova);
    // Every given page is free again (the device no longer touches any).
    void forget_given();
    // The blocks none of whose pages the firmware holds, out of the ledger: their IOVAs,
    // for the caller to free their memory.
    std::vector<std::uint64_t> release_empty();
    std::size_t given() const noexcept { return given_.size(); }
    std::size_t free() const noexcept;

private:
    struct block {
        std::uint64_t iova = 0;
        std::size_t pages = 0;
        std::vector<std::uint64_t> free;  // page IOVAs not given
    };
    std::vector<std::unique_ptr<block>> blocks_;
    std::map<std::uint64_t, block*> given_;  // by IOVA
};

class page_pool {
public:
    static constexpr std::size_t block_size = std::size_t{2} << 20;
    // More firmware memory than any ConnectX asks for (4 GiB): a larger request is a
    // reply gone wrong, not a reason to exhaust the host.
    static constexpr std::uint32_t max_pages = 1u << 20;

    page_pool(vfio::device& dev, cmd_queue& cmd) : dev_(dev), cmd_(cmd) {}
    ~page_pool() { stop(); }
    page_pool(const page_pool&) = delete;
    page_pool& operator=(const page_pool&) = delete;

    // The function the pages are for (QUERY_PAGES's function_id).
    void set_function_id(std::uint16_t id) noexcept { function_id_ = id; }
    // Gives `n` pages (MANAGE_PAGES ALLOCATION_SUCCESS, even for 0: the firmware expects
    // the answer), or takes -n back when n is negative.
    status give(std::int32_t n);
    // Asks for up to `n` pages back (HCA_RETURN_PAGES); `got` says how many came. Blocks
    // left with no page given are freed (DMA unmapped, the memory released): firmware
    // memory a departed workload needed goes back to the host.
    status take(std::uint32_t n, std::uint32_t* got);
    // Takes every given page back; EBUSY if the firmware keeps some.
    status reclaim_all();
    // After fast teardown: the device no longer touches its pages.
    void forget_given();
    std::size_t given() const;

    // Serves PAGE_REQUEST events on a thread of its own; a request that fails is passed
    // to `on_failure` (on that thread).
    void start(std::function<void(const error&)> on_failure);
    void request(std::int32_t n);  // a PAGE_REQUEST's num_pages
    void stop();

private:
    void worker();

    vfio::device& dev_;
    cmd_queue& cmd_;
    std::uint16_t function_id_ = 0;
    mutable std::mutex mu_;
    page_ledger ledger_;
    std::vector<vfio::dma_buffer> blocks_;
    std::function<void(const error&)> on_failure_;
    std::thread thread_;
    std::mutex work_mu_;
    std::condition_variable work_cv_;
    std::vector<std::int32_t> work_;
    bool stop_ = false;
};

}  // namespace cxv::driver
