// An emulated ConnectX function: BAR0, config space, MSI-X vectors, the IOMMU table, the
// firmware, and the rounds a model thread (model_thread.h) runs to make it act.
//
// A round polls what a card would be told through: the initialization
// segment (command queue address, nic_interface), the command doorbell and ownership
// bits, and the doorbells of UAR pages (EQ, CQ arm, and send doorbells in BlueFlame
// registers); it takes the frames that reached its port on the wire (sim/link/port.h)
// and runs the transport engine's timers, in rounds, one function after the other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/result.h"
#include "sim/pci/bar.h"
#include "sim/firmware/cmd_engine.h"
#include "sim/pci/config_space.h"
#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/eqs.h"
#include "sim/faults.h"
#include "sim/firmware/firmware.h"
#include "sim/objects/tables.h"
#include "sim/q_counting.h"
#include "sim/pci/iommu.h"
#include "sim/pci/msix.h"
#include "sim/model_thread.h"
#include "sim/spin_lock.h"
#include "sim/trace.h"
#include "sim/transport/engine.h"
#include "sim/transport/hooks.h"

namespace cxv::sim {

// One function: its PCI face, and the parts a ConnectX has behind it, each owned here
// and meeting the others only through narrow interfaces: the object tables, the event
// queues (eqs.h), the transport engine (sim/transport/engine.h), the port
// (device_port.h) and its wire (sim/link/port.h), and the firmware with its command
// interface, which answers commands and nothing else. A packet goes engine -> port ->
// wire and back; the engine reaches the port, the EQs and the Q counters through this
// class's transport_hooks.
class device : private transport_hooks {
public:
    static result<std::unique_ptr<device>> create(const device_config& cfg);
    ~device();
    device(const device&) = delete;
    device& operator=(const device&) = delete;

    const device_config& config() const noexcept { return cfg_; }
    bar0& bar() noexcept { return *bar_; }
    iommu& mmu() noexcept { return mmu_; }
    msix_table& msix() noexcept { return msix_; }
    config_space& pci_config() noexcept { return pci_; }
    trace& tracer() noexcept { return trace_; }
    fault_plan& faults() noexcept { return faults_; }

    // Function level reset (VFIO_DEVICE_RESET): firmware state, BAR0 and config space
    // return to power-on; `initializing` is set again for the boot time. DMA mappings
    // belong to the IOMMU (the container), not the device, and stay.
    void reset();

    // Snapshots for tests and tools (taken between rounds).
    hca_state state();
    std::size_t pages_owned();
    std::size_t eq_count();
    std::uint32_t health_counter() const;

    // The cable, as if pulled (the link goes down at once) or plugged in (the link
    // trains for link_up_time); PORT_CHANGE events as the port's state changes.
    void set_link(bool up);
    // Takes the doorbell registers' values now, on the caller's thread, as the model
    // thread's next round would (under the same lock). For a transport that delivers
    // each posted write as a message (sim/uml): a write that finds its register still
    // holding an untaken value has it taken first, rather than waiting for the model
    // thread to be scheduled. False when nothing was taken.
    bool take_doorbells();
    // The transport delivers every BAR write as an event and accumulates command doorbell
    // writes in the doorbell word (sim/uml): the command interface then executes exactly
    // the slots rung (cmd_engine::set_rung_only).
    void set_writes_seen(bool on);
    // The faults on the frames this function's port sends, from now on (the `link_*`
    // settings set them at creation).
    void set_link_faults(const device_config::link_faults& f);
    // What the port saw on the wire (frames, damaged ones, ARP, faults applied).
    link::port_counters link_counters();
    // A PAGE_REQUEST event asking for `num_pages` more (negative: offering that many
    // back), as firmware sends when its memory needs change at run time.
    void request_pages(std::int32_t num_pages);

private:
    friend class model_thread;
    explicit device(const device_config& cfg, std::unique_ptr<bar0> bar);
    void power_on();
    // One round (the model thread's call): true when something happened.
    bool round(std::chrono::steady_clock::time_point now);
    // Whether the transport has work in flight: the model thread then keeps polling
    // rather than sleeping (the doorbells that follow are memory writes).
    bool busy() { return engine_.busy(); }
    // A descriptor that becomes readable when a frame reaches the port (-1: none).
    int wake_fd() const;
    // About to sleep on wake_fd(): false when a frame already waits (link::port::arm_wake).
    bool arm_wake();
    bool poll_doorbells();
    bool receive_packets(std::chrono::steady_clock::time_point now);
    void tick_health(std::chrono::steady_clock::time_point now);
    // The internal timer at `now` (PRM "Initialization Segment"): free-running from the
    // model's making, at clock_khz off by clock_ppm. Each round stores it in the
    // initialization segment, so a driver's read finds it as of the model thread's last
    // sweep (at most a millisecond old while the thread sleeps, none while it works).
    std::uint64_t timer_at(std::chrono::steady_clock::time_point now) const noexcept;
    // Every UAR page an EQ, CQ or QP is bound to: the doorbells to poll.
    std::vector<std::uint32_t> watched_uar_pages() const;

    // transport_hooks: packets to the port, events to the EQs, Q counter events to the
    // sets the firmware allocated.
    void transmit(wire::packet&& p) override { port_.transmit(std::move(p)); }
    void transmit_frame(std::vector<std::byte>& frame, wire::ip_checksums computed) override {
        port_.transmit_frame(frame, computed);
    }
    void async_event(hw::event_type type, std::span<const std::byte> data) override {
        eqs_.post_event(type, 0, data);
    }
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) override {
        eqs_.completion_event(eqn, data);
    }
    void count(const qp_object& qp, std::uint32_t q_counter_values::*what) override { q_counts_.count(qp, what); }
    void count_req_error(const qp_object& qp, hw::cqe_syndrome why) override { q_counts_.req_error(qp, why); }
    std::uint64_t timestamp() override {
        if (!taking_) return timer_at(std::chrono::steady_clock::now());
        taken_at_ = taken_at_ ? *taken_at_ + 1 : timer_at(std::chrono::steady_clock::now());
        return *taken_at_;
    }
    void mkey_changed(const mkey_object& mk) override { fw_.mkey_changed(mk); }
    void count_resp_error(const qp_object& qp, hw::cqe_syndrome why, bool cqe) override {
        q_counts_.resp_error(qp, why, cqe);
    }

    device_config cfg_;
    std::unique_ptr<bar0> bar_;
    iommu mmu_;
    msix_table msix_;
    config_space pci_;
    trace trace_;
    fault_plan faults_;
    object_tables tables_;
    q_counting q_counts_{tables_.q_counters};
    event_queues eqs_;
    transport_engine engine_;
    device_port port_;
    firmware fw_;
    cmd_engine cmd_;

    std::mutex mu_;  // held by the model thread for each round, and by snapshots
    std::chrono::steady_clock::time_point boot_done_;
    bool booting_ = true;
    std::chrono::steady_clock::time_point next_health_;
    std::chrono::steady_clock::time_point timer_epoch_ = std::chrono::steady_clock::now();
    std::uint32_t health_counter_ = 0;
    std::uint8_t last_nic_interface_ = 0;
    std::unique_ptr<link::port> link_;  // the port's wire
    bool cable_set_ = true;   // set_link's cable
    // While receive_packets takes frames off the wire (taking_), the last receive
    // timestamp given: the first frame of a pass gets the timer read then, each next one
    // a tick more. Frames come a frame time apart on a wire, so a card's stamps rise
    // with each; these do too, and never pass the timer (a frame takes the model far
    // longer than a tick).
    bool taking_ = false;
    std::optional<std::uint64_t> taken_at_;
    bool cable_seen_ = true;  // what the firmware was last told: set_link's and the wire's
    std::vector<std::uint32_t> watched_;  // UAR pages with doorbells to poll
    bool watched_stale_ = true;           // objects changed: recompute watched_
    std::unique_ptr<model_thread> own_thread_;  // model_thread=own
    model_thread* thread_ = nullptr;            // the thread that runs the rounds
};

}  // namespace cxv::sim
