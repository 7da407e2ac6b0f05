#include "sim/firmware/cmd_engine.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "hw/cmd_layouts.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"
#include "sim/device_barrier.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
// Offsets in the initialization segment (PRM "Initialization Segment"), the driver's too.
namespace iseg = hw::init_seg_offset;

namespace {

constexpr std::size_t kEntry = ifc::cmd_queue_entry::size_bytes;  // 64
constexpr std::size_t kInline = 16;
constexpr std::size_t kBlock = ifc::cmd_if_box::size_bytes;  // 576
constexpr std::size_t kBlockData = 512;
constexpr std::size_t kStatusOwn = kEntry - 1;

// cmd_delivery_status values as bytes.
constexpr std::uint8_t ds(hw::cmd_delivery_status s) { return static_cast<std::uint8_t>(s); }

}  // namespace

cmd_engine::cmd_engine(bar0& bar, iommu& mmu, firmware& fw, event_queues& eqs, trace& tr, fault_plan& faults)
    : bar_(bar), mmu_(mmu), fw_(fw), eqs_(eqs), trace_(tr), faults_(faults) {}

void cmd_engine::reset() {
    cmdq_iova_ = 0;
    nic_interface_ = 0;
    busy_ = dropped_ = 0;
    delayed_.clear();
    held_.clear();
    // Read-only fields the driver reads before it writes the address (log size 5,
    // stride 6: 32 entries of 64 bytes).
    last_addr_dword_ = (log_cmdq_size << hw::log_cmdq_size_shift) | (log_cmdq_stride << hw::log_cmdq_stride_shift);
    bar_.store32(iseg::cmdq_addr_h, 0);
    bar_.store32(iseg::cmdq_addr_l_sz, last_addr_dword_);
    bar_.store32(iseg::command_doorbell_vector, 0);
}

bool cmd_engine::latch_queue_address() {
    const std::uint32_t lo = bar_.load32(iseg::cmdq_addr_l_sz);
    if (lo == last_addr_dword_) return false;
    // The driver wrote the dword: the address (bits 31:12) and nic_interface (10:8) are
    // its; the log sizes are read-only and come back.
    const std::uint64_t hi = bar_.load32(iseg::cmdq_addr_h);
    cmdq_iova_ = (hi << 32) | (lo & hw::cmdq_addr_l_mask);
    nic_interface_ = static_cast<std::uint8_t>((lo >> hw::nic_interface_shift) & hw::nic_interface_mask);
    constexpr std::uint32_t kKeep = hw::cmdq_addr_l_mask | (hw::nic_interface_mask << hw::nic_interface_shift);
    last_addr_dword_ = (lo & kKeep) | (log_cmdq_size << hw::log_cmdq_size_shift) |
                       (log_cmdq_stride << hw::log_cmdq_stride_shift);
    bar_.store32(iseg::cmdq_addr_l_sz, last_addr_dword_);
    busy_ = dropped_ = 0;
    held_.clear();
    return true;
}

bool cmd_engine::poll() {
    bool worked = latch_queue_address();

    // The clock only when a delayed completion waits (this runs on every round).
    const auto now = delayed_.empty() ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
    for (auto it = delayed_.begin(); it != delayed_.end();) {
        if (it->due > now) {
            ++it;
            continue;
        }
        std::array<std::byte, kEntry> entry{};
        const std::uint64_t entry_iova = cmdq_iova_ + it->slot * kEntry;
        std::uint8_t status = 0;
        if (mmu_.read(entry_iova, entry.data(), kEntry)) {
            status = write_output(entry.data(), entry_iova, it->out, it->olen);
        }
        it->record.delivery_status = status;
        trace_.record(it->record);
        complete(it->slot, status, it->event);
        it = delayed_.erase(it);
        worked = true;
    }

    // Commands waiting for memory, once the driver has answered a page request since, or
    // once the HCA is no longer initialized (TEARDOWN_HCA, DISABLE_HCA): no page request
    // goes out then, and they run again to fail as the state says.
    if (!held_.empty()) {
        const std::uint64_t answers = fw_.pages().answers();
        const bool up = fw_.state() == hca_state::initialized;
        std::vector<held_command> again;
        std::erase_if(held_, [&](const held_command& h) {
            if (h.answers == answers && up) return false;
            again.push_back(h);
            return true;
        });
        for (const held_command& h : again) {
            busy_ &= ~(1u << h.slot);
            execute(h.slot, !fw_.pages().declined());
            worked = true;
        }
    }

    if (cmdq_iova_ == 0) {
        if (bar_.load32(iseg::command_doorbell_vector) == 0) return worked;
        // A doorbell, and no queue latched above: the driver may have written the address
        // and rung since that look (it writes the address before it rings, so once the
        // doorbell is seen the address is too). Latch again before deciding.
        device_acquire();
        worked |= latch_queue_address();
        if (cmdq_iova_ == 0) {
            // No queue at all: the doorbell has nothing to ring; consume it so that it is
            // not taken for a later one.
            bar_.exchange32(iseg::command_doorbell_vector, 0);
            return worked;
        }
    }

    // The doorbell first, ownership second: the driver hands a slot over before it
    // rings, so every slot whose doorbell we consume is visibly owned by then.
    const std::uint32_t rung =
        bar_.load32(iseg::command_doorbell_vector) ? bar_.exchange32(iseg::command_doorbell_vector, 0) : 0;
    if (rung == 0) return worked;
    trace_.count(&counters::command_doorbells);
    device_acquire();
    std::array<std::byte, slots * kEntry> q;
    if (!mmu_.read(cmdq_iova_, q.data(), q.size())) {
        trace_.count(&counters::iommu_faults);
        return true;
    }
    std::uint32_t owned = 0;
    for (unsigned s = 0; s < slots; ++s) {
        if (std::to_integer<unsigned>(q[s * kEntry + kStatusOwn]) & 1) owned |= 1u << s;
    }
    // A doorbell rings every slot the driver has handed over: a store to the doorbell
    // may have replaced another slot's before the device read it. Where every write is
    // seen, the slots rung and no other (a slot handed over but not yet rung is the
    // driver's still: Linux's mlx5_core marks a command as awaiting its completion between
    // the two, and took one that came before for a late one).
    const std::uint32_t ring = (rung_only_ ? owned & rung : owned) & ~(busy_ | dropped_);
    for (unsigned s = 0; s < slots; ++s) {
        if (ring & (1u << s)) execute(s);
    }
    return true;
}

void cmd_engine::complete(unsigned slot, std::uint8_t delivery_status, bool event) {
    const std::uint64_t entry_iova = cmdq_iova_ + slot * kEntry;
    // The PRM hands the entry back by clearing ownership in its last byte, with the
    // delivery status above it; everything else was written before.
    device_release();
    const std::uint8_t status_own = static_cast<std::uint8_t>(delivery_status << 1);
    mmu_.write(entry_iova + kStatusOwn, &status_own, 1);
    busy_ &= ~(1u << slot);
    if (event) eqs_.command_completion(1u << slot);
}

// Walks a mailbox chain from `head` for the bytes past the 16 inline ones of a
// message of `len` bytes, checking each block's number and token (PRM "Command
// Mailbox"), and calls fn(block_iova, block, offset, bytes) for each; fn returns false
// when its own DMA failed. Returns a delivery status (0 when the chain is sound).
template <typename Fn>
std::uint8_t cmd_engine::walk_chain(std::uint64_t head, std::uint32_t token, std::size_t len,
                                    hw::cmd_delivery_status missing, Fn&& fn) {
    std::array<std::byte, kBlock> block;
    std::uint64_t next = head;
    for (std::size_t done = kInline, n = 0; done < len; done += kBlockData, ++n) {
        if (next == 0) return ds(missing);
        if (!mmu_.read(next, block.data(), kBlock)) {
            trace_.count(&counters::iommu_faults);
            return ds(hw::cmd_delivery_status::FW_ERR);
        }
        if (ifc::get<ifc::cmd_if_box::block_number>(block.data()) != n) {
            return ds(hw::cmd_delivery_status::BAD_BLOCK_NUMBER);
        }
        if (ifc::get<ifc::cmd_if_box::token>(block.data()) != token) {
            return ds(hw::cmd_delivery_status::TOKEN_ERR);
        }
        if (!fn(next, block.data(), done, std::min(kBlockData, len - done))) {
            trace_.count(&counters::iommu_faults);
            return ds(hw::cmd_delivery_status::FW_ERR);
        }
        next = (std::uint64_t{ifc::get<ifc::cmd_if_box::next_pointer_63_32>(block.data())} << 32) |
               (std::uint64_t{ifc::get<ifc::cmd_if_box::next_pointer_31_10>(block.data())} << 10);
    }
    return 0;
}

std::uint8_t cmd_engine::read_input(const std::byte* entry, std::vector<std::byte>& in) {
    const std::size_t ilen = ifc::get<ifc::cmd_queue_entry::input_length>(entry);
    if (ilen > max_message) return ds(hw::cmd_delivery_status::INPUT_LENGTH_ERR);
    in.assign(ilen, std::byte{0});
    if (ilen == 0) return 0;
    std::memcpy(in.data(), ifc::at<ifc::cmd_queue_entry::command_input_inline_data>(entry),
                std::min(ilen, kInline));
    const std::uint64_t head =
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::input_mailbox_pointer_63_32>(entry)} << 32) |
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::input_mailbox_pointer_31_9>(entry)} << 9);
    return walk_chain(head, ifc::get<ifc::cmd_queue_entry::token>(entry), ilen,
                      hw::cmd_delivery_status::INPUT_POINTER_ALIGN_ERR,
                      [&](std::uint64_t, const std::byte* block, std::size_t off, std::size_t n) {
                          std::memcpy(in.data() + off, block, n);
                          return true;
                      });
}

std::uint8_t cmd_engine::write_output(const std::byte* entry, std::uint64_t entry_iova,
                                      const std::vector<std::byte>& out, std::size_t olen) {
    const std::size_t inline_off = ifc::cmd_queue_entry::command_output_inline_data::bit_offset / 8;
    if (!mmu_.write(entry_iova + inline_off, out.data(), std::min(olen, kInline))) {
        return ds(hw::cmd_delivery_status::FW_ERR);
    }
    const std::uint64_t head =
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::output_mailbox_pointer_63_32>(entry)} << 32) |
        (std::uint64_t{ifc::get<ifc::cmd_queue_entry::output_mailbox_pointer_31_9>(entry)} << 9);
    return walk_chain(head, ifc::get<ifc::cmd_queue_entry::token>(entry), olen,
                      hw::cmd_delivery_status::OUTPUT_POINTER_ALIGN_ERR,
                      [&](std::uint64_t iova, const std::byte*, std::size_t off, std::size_t n) {
                          return mmu_.write(iova, out.data() + off, n);
                      });
}

void cmd_engine::execute(unsigned slot, bool may_hold) {
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t entry_iova = cmdq_iova_ + slot * kEntry;
    std::array<std::byte, kEntry> entry;
    if (!mmu_.read(entry_iova, entry.data(), kEntry)) {
        // The device cannot even read the entry: nothing it can report.
        trace_.count(&counters::iommu_faults);
        return;
    }
    busy_ |= 1u << slot;

    command_record rec{slot, hw::cmd_opcode{}, 0, 0, hw::cmd_status::OK, sim::cmd_syndrome::OK, {}};
    auto finish_delivery_error = [&](std::uint8_t status) {
        rec.delivery_status = status;
        rec.duration = std::chrono::steady_clock::now() - start;
        trace_.record(rec);
        complete(slot, status);
    };

    if (ifc::get<ifc::cmd_queue_entry::type>(entry.data()) != hw::cmd_queue_entry_type_pcie) {
        return finish_delivery_error(ds(hw::cmd_delivery_status::BAD_COMMAND_TYPE));
    }
    std::vector<std::byte> in;
    if (const auto st = read_input(entry.data(), in); st != 0) return finish_delivery_error(st);
    const std::size_t olen = ifc::get<ifc::cmd_queue_entry::output_length>(entry.data());
    if (olen > max_message) return finish_delivery_error(ds(hw::cmd_delivery_status::OUTPUT_LENGTH_ERR));

    // The firmware writes into a zeroed buffer at least as large as the command's output
    // layout (plus any list it returns); the driver receives its first olen bytes.
    cmd_ctx c{in, {}, olen, hw::cmd_opcode{}, 0};
    std::vector<std::byte> out(std::max<std::size_t>(olen, ifc::cmd_out::size_bytes));
    if (in.size() >= ifc::cmd_in::size_bytes) {
        c.opcode = static_cast<hw::cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()));
        c.op_mod = static_cast<std::uint16_t>(ifc::get<ifc::cmd_in::op_mod>(in.data()));
        out.resize(std::max(out.size(), hw::command_output_size(c.opcode)));
    }
    c.out = out;
    rec.opcode = c.opcode;
    rec.op_mod = c.op_mod;

    const auto fault = faults_.take(c.opcode);
    cmd_reply reply;
    if (fault.fail) {
        reply = {fault.fail->first, fault.fail->second};
    } else {
        const std::uint64_t shortages = fw_.pages().shortages();
        reply = fw_.execute(c);
        if (may_hold && reply.status == hw::cmd_status::NO_RESOURCES && fw_.pages().shortages() != shortages &&
            fw_.state() == hca_state::initialized) {
            // Short of firmware memory, and a page request is out: the slot stays the
            // device's until the driver answers (held_, above).
            held_.push_back({slot, fw_.pages().answers()});
            return;
        }
        // A refused command returns status and syndrome only, whatever its handler
        // wrote before the check that refused it (outputs are defined on success).
        if (reply.status != hw::cmd_status::OK) std::fill(out.begin(), out.end(), std::byte{0});
    }
    ifc::set<ifc::cmd_out::status>(out.data(), static_cast<std::uint32_t>(reply.status));
    ifc::set<ifc::cmd_out::syndrome>(out.data(), static_cast<std::uint32_t>(reply.syndrome));
    if (fault.garble) {
        // xorshift32 from the seed: the same seed garbles the same way.
        std::uint32_t x = *fault.garble | 1;
        const std::size_t from = (*fault.garble & 1) ? 0 : 8;  // status and syndrome are bytes 0-7
        for (std::size_t i = from; i < out.size(); ++i) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            out[i] = static_cast<std::byte>(x);
        }
    }
    rec.status = reply.status;
    rec.syndrome = reply.syndrome;
    if (trace_.logs_commands()) trace_.log_command(c.opcode, in, out);

    if (fault.drop) {
        // Ownership stays with the device: the driver's timeout is what is tested.
        rec.duration = std::chrono::steady_clock::now() - start;
        trace_.record(rec);
        busy_ &= ~(1u << slot);
        dropped_ |= 1u << slot;
        return;
    }
    if (fault.delay.count() > 0) {
        delayed_.push_back({slot, start + fault.delay, std::move(out), olen, rec, !fault.no_event});
        return;
    }
    const std::uint8_t status = write_output(entry.data(), entry_iova, out, olen);
    rec.delivery_status = status;
    rec.duration = std::chrono::steady_clock::now() - start;
    trace_.record(rec);
    complete(slot, status, !fault.no_event);
}

}  // namespace cxv::sim
