// Counters and a trace of commands and doorbells, printable with fmt.
#pragma once

#include <array>
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
};

class trace {
public:
    static constexpr std::size_t depth = 256;  // command records kept

    void record(const command_record& r);
    std::vector<command_record> commands() const;  // oldest first
    counters snapshot() const;
    template <typename Fn>
    void update(Fn&& fn) {
        std::lock_guard lock(mu_);
        fn(counters_);
    }
    void clear();
    std::string dump() const;  // the counters and the command trace, one line each
    // Also print each command as it completes ("<prefix>: <record>"); nullptr stops.
    void set_live(std::FILE* out, std::string prefix);

private:
    mutable spin_lock mu_;  // updated on every packet
    counters counters_;
    std::array<command_record, depth> ring_{};
    std::size_t next_ = 0, size_ = 0;
    std::FILE* live_ = nullptr;
    std::string live_prefix_;
};

}  // namespace cxv::sim
