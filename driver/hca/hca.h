// An HCA brought up for use: the PRM bring-up sequence (as Linux's mlx5_core does it),
// firmware pages given and taken back on request, the async EQ (command completions,
// page requests, port changes, queue errors), and the health watch.
//
//   wait for `initializing` → command queue → wait again → ENABLE_HCA → QUERY_ISSI /
//   SET_ISSI → QUERY_PAGES(boot) + MANAGE_PAGES → ACCESS_REG(HOST_ENDIANNESS) →
//   QUERY_HCA_CAP / SET_HCA_CAP → QUERY_PAGES(init) + MANAGE_PAGES → INIT_HCA →
//   SET_DRIVER_VERSION → ALLOC_UAR → CREATE_EQ (async) + arm
//
// Destruction reverses it: DESTROY_EQ, DEALLOC_UAR, TEARDOWN_HCA, every firmware page
// reclaimed, DISABLE_HCA; every DMA mapping goes with the objects that own it. A fatal
// health state (stalled counter, health syndrome, the function gone) marks the device
// dead: commands fail with ENODEV and the event is reported, the process goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "driver/cmd/cmd_queue.h"
#include "driver/vfio/vfio.h"
#include "hw/result.h"

namespace cxv::driver {

// What the application hears about (from the event thread).
struct hca_event {
    enum kind { port_up, port_down, port_other, fatal, queue_error } what;
    unsigned port = 0;
    std::uint32_t object = 0;  // CQ or QP number for queue errors
    std::string detail;
};

class hca {
public:
    struct options {
        std::chrono::milliseconds init_timeout{120'000};  // `initializing` (Linux: FW_INIT_TIMEOUT)
        std::chrono::milliseconds health_period{1'000};
        unsigned health_misses = 3;  // consecutive stale health counters that are fatal
        cmd_queue::options cmd{};
        std::function<void(const hca_event&)> on_event;  // called on the event thread
    };

    static result<std::unique_ptr<hca>> create(std::unique_ptr<vfio::device> dev, const options& o);
    static result<std::unique_ptr<hca>> create(std::unique_ptr<vfio::device> dev) {
        return create(std::move(dev), options{});
    }
    ~hca();
    hca(const hca&) = delete;
    hca& operator=(const hca&) = delete;

    vfio::device& device() noexcept { return *dev_; }
    cmd_queue& cmd() noexcept { return *cmd_; }
    // Runs a command (see cmd_queue::exec).
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len) {
        return cmd_->exec(in, out_len);
    }

    // Capabilities as QUERY_HCA_CAP returned them after SET_HCA_CAP (cmd_hca_cap).
    const std::vector<std::byte>& caps() const noexcept { return caps_cur_; }
    const std::vector<std::byte>& caps_max() const noexcept { return caps_max_; }
    std::uint32_t fw_version() const noexcept;  // major.minor packed as the health buffer has it
    std::string fw_version_string() const;
    std::uint32_t uar() const noexcept { return uar_; }
    std::uint8_t async_eqn() const noexcept { return eqn_; }
    std::size_t pages_given() const;
    bool dead() const noexcept { return cmd_->dead(); }

    // Tears the function down now (the destructor does it otherwise) and says whether
    // everything came back: every firmware page reclaimed, no command failed.
    status close();

private:
    struct page_block;
    explicit hca(std::unique_ptr<vfio::device> dev, const options& o);
    status bring_up();
    status give_pages(std::int32_t n);
    status take_pages(std::uint32_t n, std::uint32_t* got);
    status reclaim_all_pages();
    status create_async_eq();
    void arm_eq();
    void event_loop();
    void page_worker();
    bool process_eq();
    void check_health(std::chrono::steady_clock::time_point now);
    void fatal(const std::string& why);
    void report(hca_event e);
    status teardown();
    bool closed_ = false;
    bool eq_created_ = false;

    std::unique_ptr<vfio::device> dev_;
    options opts_;
    std::unique_ptr<cmd_queue> cmd_;
    std::vector<std::byte> caps_cur_, caps_max_;
    std::uint16_t function_id_ = 0;

    // Firmware pages: 2 MiB DMA blocks carved into 4 KiB pages.
    mutable std::mutex pages_mu_;
    std::vector<std::unique_ptr<page_block>> blocks_;
    std::map<std::uint64_t, page_block*> given_;  // by IOVA

    std::uint32_t uar_ = 0;
    bool uar_allocated_ = false;
    std::uint8_t eqn_ = 0;
    vfio::dma_buffer eq_buf_;
    std::uint32_t eq_ci_ = 0;
    int eq_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread events_;
    std::thread pages_;
    std::mutex work_mu_;
    std::condition_variable work_cv_;
    std::vector<std::int32_t> page_work_;
    std::uint32_t last_health_ = 0;
    unsigned health_misses_ = 0;
    std::chrono::steady_clock::time_point next_health_{};
};

}  // namespace cxv::driver
