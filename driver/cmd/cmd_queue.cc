#include "driver/cmd/cmd_queue.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "hw/barrier.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using entry = ifc::cmd_queue_entry;
using box = ifc::cmd_if_box;

namespace {

namespace seg = hw::init_seg_offset;

constexpr std::size_t kEntry = entry::size_bytes;      // 64
// Bytes of input and output that travel in the entry itself, and data bytes per mailbox
// (PRM §"Command Queue Entry", §"Command Mailbox").
constexpr std::size_t kInline = entry::command_input_inline_data::bit_width / 8;
constexpr std::size_t kBoxData = box::mailbox_data::bit_width / 8;
static_assert(kInline == 16 && entry::command_output_inline_data::bit_width / 8 == kInline && kBoxData == 512);
constexpr std::size_t kBoxSlot = 1024;                 // mailboxes are 1 KiB aligned
constexpr std::size_t kOwnerByte = entry::ownership::bit_offset / 8;  // 0x3f
constexpr std::size_t kTraceDepth = 256;

std::size_t boxes_for(std::size_t len) { return len > kInline ? (len - kInline + kBoxData - 1) / kBoxData : 0; }

std::string describe(hw::cmd_opcode op, std::uint16_t op_mod) {
    return fmt::format("{}(0x{:x}) op_mod 0x{:x}", hw::name(op), static_cast<unsigned>(op), op_mod);
}

}  // namespace

int status_errno(hw::cmd_status s) noexcept {
    using S = hw::cmd_status;
    switch (s) {
    case S::OK: return 0;
    case S::BAD_OP:
    case S::BAD_PARAM:
    case S::BAD_RESOURCE:
    case S::BAD_RES_STATE:
    case S::BAD_INDEX:
    case S::BAD_QP_STATE:
    case S::BAD_PKT:
    case S::BAD_SIZE_OUTS_CQES: return EINVAL;
    case S::RESOURCE_BUSY: return EBUSY;
    case S::EXCEED_LIM: return ENOMEM;
    case S::NO_RESOURCES: return EAGAIN;
    default: return EIO;
    }
}

cmd_queue::cmd_queue(vfio::device& dev, const options& o) : dev_(dev), opts_(o) {}

cmd_queue::~cmd_queue() = default;

result<std::unique_ptr<cmd_queue>> cmd_queue::create(vfio::device& dev, const options& o) {
    const hw::mmio_window& bar = dev.bar0();
    const std::uint32_t rev = bar.read32_be(seg::cmd_interface_rev) >> hw::cmd_interface_rev_shift;
    if (rev != hw::cmd_interface_rev_supported) {
        return error{EPROTO, fmt::format("{}: command interface revision {}; cxv speaks revision 5 "
                                         "(update the firmware, or this is not an mlx5 function)",
                                         dev.bdf(), rev)};
    }
    // PRM §"Initialization Segment": cmdq_addr_l_sz holds log_cmdq_size (bits 7:4, the
    // number of entries) and log_cmdq_stride (bits 3:0) until the driver writes the address.
    const std::uint32_t geometry = bar.read32_be(seg::cmdq_addr_l_sz);
    const unsigned log_size = (geometry >> hw::log_cmdq_size_shift) & 0xf,
                   log_stride = (geometry >> hw::log_cmdq_stride_shift) & 0xf;
    if (log_size > 5 || log_stride < 6 || log_size + log_stride > 12) {
        return error{EPROTO, fmt::format("{}: unusable command queue geometry (2^{} entries of 2^{} bytes)",
                                         dev.bdf(), log_size, log_stride)};
    }
    std::unique_ptr<cmd_queue> q(new cmd_queue(dev, o));
    q->slots_ = 1u << log_size;
    q->stride_ = 1u << log_stride;
    auto page = dev.alloc_dma(4096);
    if (!page) return page.error();
    q->page_ = std::move(page).value();
    auto boxes = dev.alloc_dma(o.mailbox_blocks * kBoxSlot);
    if (!boxes) return boxes.error();
    q->mailboxes_ = std::move(boxes).value();
    for (std::size_t i = o.mailbox_blocks; i-- > 0;) q->free_blocks_.push_back(q->mailboxes_.iova() + i * kBoxSlot);
    // The queue's address (PRM §"Initialization Segment"): high dword first, then the low
    // one (which also sets nic_interface to 0 in bits 10:8).
    const std::uint64_t iova = q->page_.iova();
    bar.write32_be(seg::cmdq_addr_h, static_cast<std::uint32_t>(iova >> 32));
    bar.write32_be(seg::cmdq_addr_l_sz, static_cast<std::uint32_t>(iova) & hw::cmdq_addr_l_mask);
    return q;
}

std::byte* cmd_queue::block(std::uint64_t iova) const noexcept {
    return mailboxes_.data() + (iova - mailboxes_.iova());
}

result<unsigned> cmd_queue::take_slot(bool pages) {
    std::unique_lock lock(mu_);
    // The last slot carries MANAGE_PAGES only, the others everything else: a command the
    // firmware holds until it has pages (PRM "Page Request Event") must not keep the
    // answer from a slot. Linux's mlx5 reserves the same slot (its page queue).
    const std::uint32_t every = slots_ == 32 ? ~0u : (1u << slots_) - 1;
    const std::uint32_t last = 1u << (slots_ - 1);
    const std::uint32_t all = slots_ == 1 ? every : pages ? last : every & ~last;
    for (;;) {
        if (dead()) return error{ENODEV, dead_why_};
        const std::uint32_t free = all & ~busy_ & ~lost_;
        if (free != 0) {
            const unsigned s = static_cast<unsigned>(__builtin_ctz(free));
            busy_ |= 1u << s;
            events_ &= ~(1u << s);  // a late event of the slot's previous command
            return s;
        }
        if ((lost_ & all) == all) return error{EIO, fmt::format("{}: every command slot timed out", dev_.bdf())};
        slot_free_.wait(lock);
    }
}

void cmd_queue::give_slot(unsigned s) {
    {
        std::lock_guard lock(mu_);
        busy_ &= ~(1u << s);
        events_ &= ~(1u << s);
    }
    slot_free_.notify_all();  // waiters for the pages slot and for the others alike
}

result<std::vector<std::uint64_t>> cmd_queue::take_blocks(std::size_t n) {
    std::lock_guard lock(mu_);
    if (n > free_blocks_.size()) {
        return error{ENOMEM, fmt::format("{}: command needs {} mailboxes, {} free", dev_.bdf(), n,
                                         free_blocks_.size())};
    }
    std::vector<std::uint64_t> out(free_blocks_.end() - static_cast<std::ptrdiff_t>(n), free_blocks_.end());
    free_blocks_.resize(free_blocks_.size() - n);
    return out;
}

void cmd_queue::give_blocks(const std::vector<std::uint64_t>& blocks) {
    std::lock_guard lock(mu_);
    free_blocks_.insert(free_blocks_.end(), blocks.begin(), blocks.end());
}

bool cmd_queue::wait(unsigned s, std::chrono::steady_clock::time_point deadline) {
    const auto* owner = reinterpret_cast<const volatile std::uint8_t*>(page_.data() + s * stride_ + kOwnerByte);
    for (unsigned spins = 0;; ++spins) {
        if ((*owner & 1) == 0) {
            hw::from_device();  // ownership before the output it guards
            return true;
        }
        if (dead()) return false;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return false;
        if (use_events_.load(std::memory_order_acquire)) {
            // Sleep until the CMD event for this slot, re-checking ownership each
            // millisecond in case an event is lost.
            std::unique_lock lock(mu_);
            done_.wait_for(lock, std::chrono::milliseconds(1), [&] { return (events_ >> s) & 1 || dead(); });
        } else if (spins < 1000) {
            sched_yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(spins < 10000 ? 10 : 200));
        }
    }
}

result<std::vector<std::byte>> cmd_queue::exec(std::span<const std::byte> in, std::size_t out_len) {
    if (in.size() < 8 || out_len < 8) return error{EINVAL, "command input and output need at least 8 bytes"};
    const auto op = static_cast<hw::cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()));
    const auto op_mod = static_cast<std::uint16_t>(ifc::get<ifc::cmd_in::op_mod>(in.data()));
    const auto start = std::chrono::steady_clock::now();
    cmd_record rec{op, op_mod, hw::cmd_status::OK, 0, 0, {}, 0};
    auto fail = [&](error e) {
        rec.error = e.code;
        rec.duration = std::chrono::steady_clock::now() - start;
        record(rec);
        return e;
    };

    auto slot = take_slot(op == hw::cmd_opcode::MANAGE_PAGES);
    if (!slot) return fail(slot.error());
    const unsigned s = slot.value();
    const std::size_t n_in = boxes_for(in.size()), n_out = boxes_for(out_len);
    auto blocks = take_blocks(n_in + n_out);
    if (!blocks) {
        give_slot(s);
        return fail(blocks.error());
    }
    const auto& b = blocks.value();
    // Mailbox chains: input blocks carry the bytes after the first 16, in order.
    auto chain = [&](std::size_t first, std::size_t count, std::span<const std::byte> data) {
        for (std::size_t i = 0; i < count; ++i) {
            std::byte* m = block(b[first + i]);
            std::memset(m, 0, box::size_bytes);
            const std::size_t off = i * kBoxData;
            if (off < data.size()) std::memcpy(m, data.data() + off, std::min(kBoxData, data.size() - off));
            const std::uint64_t next = i + 1 < count ? b[first + i + 1] : 0;
            ifc::set<box::next_pointer_63_32>(m, static_cast<std::uint32_t>(next >> 32));
            ifc::set<box::next_pointer_31_10>(m, static_cast<std::uint32_t>(next) >> 10);
            ifc::set<box::block_number>(m, static_cast<std::uint32_t>(i));
        }
    };
    chain(0, n_in, in.size() > kInline ? in.subspan(kInline) : std::span<const std::byte>{});
    chain(n_in, n_out, {});

    std::byte* e = page_.data() + s * stride_;
    std::memset(e, 0, kEntry);
    ifc::set<entry::type>(e, hw::cmd_queue_entry_type_pcie);
    ifc::set<entry::input_length>(e, static_cast<std::uint32_t>(in.size()));
    ifc::set<entry::output_length>(e, static_cast<std::uint32_t>(out_len));
    const std::uint64_t iptr = n_in ? b[0] : 0, optr = n_out ? b[n_in] : 0;
    ifc::set<entry::input_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(iptr >> 32));
    ifc::set<entry::input_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(iptr) >> 9);
    ifc::set<entry::output_mailbox_pointer_63_32>(e, static_cast<std::uint32_t>(optr >> 32));
    ifc::set<entry::output_mailbox_pointer_31_9>(e, static_cast<std::uint32_t>(optr) >> 9);
    std::memcpy(ifc::at<entry::command_input_inline_data>(e), in.data(), std::min(kInline, in.size()));
    // PRM §"Command Interface": the entry and its mailboxes are complete before
    // ownership passes to the device, and ownership before the doorbell rings.
    hw::to_device();
    ifc::set<entry::ownership>(e, 1);
    hw::to_device();
    dev_.bar0().write32_be(seg::command_doorbell_vector, 1u << s);

    const bool done = wait(s, start + opts_.timeout);
    if (!done) {
        if (dead()) {
            give_slot(s);  // the device is gone: nobody writes there any more
            give_blocks(b);
            return fail(error{ENODEV, fmt::format("{} failed: {}", describe(op, op_mod), dead_why_)});
        }
        {
            std::lock_guard lock(mu_);
            lost_ |= 1u << s;  // the device may still complete it: neither slot nor mailboxes come back
            busy_ &= ~(1u << s);
        }
        return fail(error{ETIMEDOUT, fmt::format("{}: {} timed out after {} ms (slot {})", dev_.bdf(),
                                                 describe(op, op_mod), opts_.timeout.count(), s)});
    }
    rec.delivery = static_cast<std::uint8_t>(ifc::get<entry::status>(e));
    std::vector<std::byte> out(out_len);
    std::memcpy(out.data(), ifc::at<entry::command_output_inline_data>(e), std::min(kInline, out_len));
    for (std::size_t i = 0; i < n_out; ++i) {
        const std::size_t off = kInline + i * kBoxData;
        std::memcpy(out.data() + off, block(b[n_in + i]), std::min(kBoxData, out_len - off));
    }
    give_blocks(b);
    give_slot(s);
    if (rec.delivery != 0) {
        return fail(error{EIO, fmt::format("{}: {} was not delivered: {} (0x{:x})", dev_.bdf(), describe(op, op_mod),
                                           hw::name(static_cast<hw::cmd_delivery_status>(rec.delivery)),
                                           rec.delivery)});
    }
    rec.status = static_cast<hw::cmd_status>(ifc::get<ifc::cmd_out::status>(out.data()));
    rec.syndrome = ifc::get<ifc::cmd_out::syndrome>(out.data());
    if (rec.status != hw::cmd_status::OK) {
        return fail(error{status_errno(rec.status),
                          fmt::format("{}: {} failed: status {}(0x{:x}), syndrome 0x{:x}", dev_.bdf(),
                                      describe(op, op_mod), hw::name(rec.status),
                                      static_cast<unsigned>(rec.status), rec.syndrome)});
    }
    rec.duration = std::chrono::steady_clock::now() - start;
    record(rec);
    return out;
}

void cmd_queue::use_events(bool on) { use_events_.store(on, std::memory_order_release); }

void cmd_queue::complete(std::uint32_t vector) {
    {
        std::lock_guard lock(mu_);
        events_ |= vector;
    }
    done_.notify_all();
}

void cmd_queue::mark_dead(const std::string& why) {
    {
        std::lock_guard lock(mu_);
        if (dead()) return;
        dead_why_ = why;
        dead_.store(true, std::memory_order_release);
    }
    done_.notify_all();
    slot_free_.notify_all();
}

void cmd_queue::record(const cmd_record& r) {
    std::lock_guard lock(mu_);
    if (trace_.size() < kTraceDepth) {
        trace_.push_back(r);
    } else {
        trace_[trace_next_] = r;
    }
    trace_next_ = (trace_next_ + 1) % kTraceDepth;
}

std::vector<cmd_record> cmd_queue::trace() const {
    std::lock_guard lock(mu_);
    if (trace_.size() < kTraceDepth) return trace_;
    std::vector<cmd_record> out(trace_.begin() + static_cast<std::ptrdiff_t>(trace_next_), trace_.end());
    out.insert(out.end(), trace_.begin(), trace_.begin() + static_cast<std::ptrdiff_t>(trace_next_));
    return out;
}

}  // namespace cxv::driver
