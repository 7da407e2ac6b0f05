// Counters and a trace of commands and doorbells, printable with fmt.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "sim/spin_lock.h"
#include "sim/syndromes.h"
#include "hw/opcodes.h"

namespace cxv::sim {

struct command_record {
    unsigned slot;
    hw::cmd_opcode opcode;
    std::uint16_t op_mod;
    std::uint8_t delivery_status;  // cmd_queue_entry.status
    hw::cmd_status status;
    sim::cmd_syndrome syndrome;
    std::chrono::nanoseconds duration;
};

struct counters {
    std::uint64_t commands = 0;
    std::uint64_t commands_failed = 0;
    std::uint64_t command_doorbells = 0;
    std::uint64_t eq_doorbells = 0;
    std::uint64_t eqes = 0;
    std::uint64_t eq_overruns = 0;
    std::uint64_t page_requests = 0;
    std::uint64_t iommu_faults = 0;
    // The transport engine.
    std::uint64_t send_doorbells = 0;
    std::uint64_t stray_doorbells = 0;   // for no QP, or on a UAR page not the QP's
    std::uint64_t bf_copies_used = 0;    // WQEs executed from their BlueFlame copy
    std::uint64_t bf_copies_torn = 0;    // copies carrying an earlier WQE's control bytes (ring used)
    std::uint64_t wqes = 0;
    std::uint64_t packets_sent = 0;
    std::uint64_t packets_received = 0;
    std::uint64_t packets_dropped = 0;   // no port, no QP, wrong state, Q_Key, PSN
    std::uint64_t rnr_naks = 0;          // received
    std::uint64_t naks_sent = 0;         // PSN sequence error and error NAKs
    std::uint64_t acks_coalesced = 0;    // ACKs owed that a later one replaced (not sent)
    std::uint64_t duplicates = 0;        // requests seen again by the responder
    std::uint64_t retransmits = 0;       // packets sent again
    std::uint64_t cqes = 0;
    // The Ethernet pipeline (sim/transport/xport_eth_rx.cc, xport_eth_tx.cc).
    std::uint64_t frames_sent = 0;       // frames SQs put on the wire
    std::uint64_t frames_received = 0;   // frames that met the flow tables
    std::uint64_t frames_delivered = 0;  // copies written to an RQ
    std::uint64_t frames_dropped = 0;    // dropped by a rule or a miss, or not scattered
    std::uint64_t frames_no_wqe = 0;     // steered to an RQ with no WQE posted (out of buffer)
    std::uint64_t lso_wqes = 0;          // LSO WQEs executed (each cut into frames_sent)
    std::uint64_t umrs = 0;              // UMR WQEs that changed a memory key
};

// Every field of counters, for the copies that read them one at a time.
inline constexpr std::uint64_t counters::*all_counters[] = {
    &counters::commands,       &counters::commands_failed, &counters::command_doorbells, &counters::eq_doorbells,
    &counters::eqes,           &counters::eq_overruns,     &counters::page_requests,     &counters::iommu_faults,
    &counters::send_doorbells, &counters::stray_doorbells, &counters::bf_copies_used,    &counters::bf_copies_torn,
    &counters::wqes,           &counters::packets_sent,    &counters::packets_received,  &counters::packets_dropped,
    &counters::rnr_naks,       &counters::naks_sent,       &counters::acks_coalesced,    &counters::duplicates,
    &counters::retransmits,    &counters::cqes,            &counters::frames_received,   &counters::frames_delivered,
    &counters::frames_dropped, &counters::frames_no_wqe,      &counters::frames_sent,       &counters::lso_wqes,
    &counters::umrs,
};
static_assert(sizeof(counters) == sizeof(all_counters) / sizeof(all_counters[0]) * sizeof(std::uint64_t),
              "a counter missing from all_counters");

class trace {
public:
    static constexpr std::size_t depth = 256;  // command records kept

    void record(const command_record& r);
    std::vector<command_record> commands() const;  // oldest first
    counters snapshot() const;
    // One more of `c`. The model counts from one thread at a time (the device's lock
    // orders its work), so a count is a load and a store, with no locked instruction:
    // counted on every packet, a lock made the model wait out each packet's stores.
    void count(std::uint64_t counters::*c) noexcept {
        std::atomic_ref<std::uint64_t> v(counters_.*c);
        v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    void clear();
    std::string dump() const;  // the counters and the command trace, one line each
    // Also print each command as it completes ("<prefix>: <record>"); nullptr stops.
    void set_live(std::FILE* out, std::string prefix);
    // Also write every command, as it completes, to `out`: one line "<prefix>: in=<its
    // input with the PRM's field names> unnamed=<bits no field names> out=<its output>"
    // (hw/cmd_layouts.h), from which a driver's commands can be compared with another's
    // (tests/uml/differential.py). nullptr stops.
    void set_command_log(std::FILE* out, std::string prefix);
    bool logs_commands() const noexcept { return log_.load(std::memory_order_relaxed) != nullptr; }
    void log_command(hw::cmd_opcode op, const std::vector<std::byte>& in, const std::vector<std::byte>& out);

private:
    mutable spin_lock mu_;  // the command records
    mutable counters counters_;  // read and written only through std::atomic_ref
    std::array<command_record, depth> ring_{};
    std::size_t next_ = 0, size_ = 0;
    std::FILE* live_ = nullptr;
    std::string live_prefix_;
    std::atomic<std::FILE*> log_{nullptr};  // set under mu_; read without it to skip the work
    std::string log_prefix_;
};

}  // namespace cxv::sim
