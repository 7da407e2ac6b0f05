#include "sim/trace.h"

#include <fmt/format.h>

#include "hw/cmd_layouts.h"
#include "hw/printers.h"

namespace cxv::sim {

namespace {

std::string format_record(const command_record& r) {
    return fmt::format("slot {:2} {} op_mod={:#x} delivery={:#x} status={} syndrome={} {}us", r.slot,
                       r.opcode, r.op_mod, r.delivery_status, r.status, r.syndrome,
                       std::chrono::duration_cast<std::chrono::microseconds>(r.duration).count());
}

}  // namespace

void trace::record(const command_record& r) {
    std::lock_guard lock(mu_);
    if (live_ != nullptr) fmt::print(live_, "{}: {}\n", live_prefix_, format_record(r));
    ring_[next_] = r;
    next_ = (next_ + 1) % depth;
    if (size_ < depth) ++size_;
    count(&counters::commands);
    if (r.status != hw::cmd_status::OK || r.delivery_status != 0) count(&counters::commands_failed);
}

std::vector<command_record> trace::commands() const {
    std::lock_guard lock(mu_);
    std::vector<command_record> out;
    out.reserve(size_);
    for (std::size_t i = 0; i < size_; ++i) out.push_back(ring_[(next_ + depth - size_ + i) % depth]);
    return out;
}

counters trace::snapshot() const {
    counters out;
    for (const auto c : all_counters) {
        out.*c = std::atomic_ref<std::uint64_t>(counters_.*c).load(std::memory_order_relaxed);
    }
    return out;
}

void trace::set_live(std::FILE* out, std::string prefix) {
    std::lock_guard lock(mu_);
    live_ = out;
    live_prefix_ = std::move(prefix);
}

void trace::set_command_log(std::FILE* out, std::string prefix) {
    std::lock_guard lock(mu_);
    log_ = out;
    log_prefix_ = std::move(prefix);
}

void trace::log_command(hw::cmd_opcode op, const std::vector<std::byte>& in, const std::vector<std::byte>& out) {
    const std::string fields = fmt::format("in={} unnamed={{{}}} out={}\n", hw::format_command_input(in.data(), in.size()),
                                           hw::command_input_unnamed_bits(in.data(), in.size()),
                                           hw::format_command_output(op, out.data(), out.size()));
    std::lock_guard lock(mu_);
    if (std::FILE* f = log_.load(std::memory_order_relaxed); f != nullptr) {
        std::fprintf(f, "%s: %s", log_prefix_.c_str(), fields.c_str());
    }
}

void trace::clear() {
    std::lock_guard lock(mu_);
    for (const auto c : all_counters) std::atomic_ref<std::uint64_t>(counters_.*c).store(0, std::memory_order_relaxed);
    next_ = size_ = 0;
}

std::string trace::dump() const {
    const auto c = snapshot();
    std::string out = fmt::format(
        "commands={} failed={} command_doorbells={} eq_doorbells={} eqes={} eq_overruns={} "
        "page_requests={} iommu_faults={}\n",
        c.commands, c.commands_failed, c.command_doorbells, c.eq_doorbells, c.eqes,
        c.eq_overruns, c.page_requests, c.iommu_faults);
    for (const auto& r : commands()) {
        out += format_record(r);
        out += '\n';
    }
    return out;
}

}  // namespace cxv::sim
