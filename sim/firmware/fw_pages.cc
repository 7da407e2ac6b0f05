// Firmware pages: QUERY_PAGES and MANAGE_PAGES (PRM "Firmware Pages"), and the slots the
// object commands take from them.
#include "sim/firmware/fw_pages.h"

#include <algorithm>
#include <array>

#include "hw/cmd_values.h"
#include "hw/endian.h"
#include "hw/ifc.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

using hw::manage_pages_op_mod;
using hw::query_pages_op_mod;

firmware_pages::firmware_pages(const device_config& cfg, iommu& mmu, trace& tr, event_queues& eqs,
                               const hca_state& state)
    : cfg_(cfg), mmu_(mmu), trace_(tr), events_(eqs), state_(state) {}

void firmware_pages::clear() {
    pages_.clear();
    boot_given_ = init_given_ = false;
    requested_ = 0;
    returning_ = 0;
    asking_ = 0;
}

cmd_reply firmware_pages::query_pages(cmd_ctx& c) {
    if (ifc::get<ifc::query_pages_in::function_id>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    std::uint32_t n = 0;
    switch (static_cast<query_pages_op_mod>(c.op_mod)) {
        case query_pages_op_mod::BOOT_PAGES:
            n = boot_given_ ? 0 : cfg_.boot_pages;
            break;
        case query_pages_op_mod::INIT_PAGES:
            n = init_given_ ? 0 : cfg_.init_pages;
            break;
        case query_pages_op_mod::REGULAR_PAGES:
            n = 0;  // run-time needs arrive as PAGE_REQUEST events
            break;
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    requested_ = n;
    ifc::set<ifc::query_pages_out::function_id>(c.out.data(), 0);
    ifc::set<ifc::query_pages_out::num_pages>(c.out.data(), n);
    return ok();
}

cmd_reply firmware_pages::manage_pages(cmd_ctx& c) {
    if (ifc::get<ifc::manage_pages_in::function_id>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    const std::uint32_t n = ifc::get<ifc::manage_pages_in::input_num_entries>(c.in.data());
    switch (static_cast<manage_pages_op_mod>(c.op_mod)) {
        case manage_pages_op_mod::ALLOCATION_FAIL:
            // The driver could not give what was asked: nothing changes, but a command
            // waiting for memory fails now.
            requested_ = 0;
            asking_ = 0;
            ++answers_;
            declined_ = true;
            return ok();
        case manage_pages_op_mod::ALLOCATION_SUCCESS: {
            const std::size_t need = ifc::manage_pages_in::size_bytes + std::size_t{n} * 8;
            // The input must hold the entries it announces.
            if (c.in.size() < need) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
            // Check the whole list before taking any page, so that a bad list changes
            // nothing: 4 KiB aligned, not given already, not listed twice. (IOVA 0 is
            // valid: VFIO's usable range starts there, and rdma-core hands it out.)
            std::vector<std::uint64_t> list(n);
            for (std::uint32_t i = 0; i < n; ++i) {
                list[i] = ifc::get<ifc::manage_pages_in::pas>(c.in.data(), i);
                if (list[i] % pages::page_size) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
                if (pages_.contains(list[i])) return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
            std::sort(list.begin(), list.end());
            if (std::adjacent_find(list.begin(), list.end()) != list.end()) {
                return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
            for (const auto pa : list) pages_.give(pa);
            if (!boot_given_) {
                boot_given_ = true;
            } else if (!init_given_ && state_ == hca_state::enabled) {
                init_given_ = true;
            }
            requested_ = requested_ > n ? requested_ - n : 0;
            asking_ = 0;  // answered (however many it gave: a held command runs again, and may ask again)
            ++answers_;
            declined_ = false;
            return ok();
        }
        case manage_pages_op_mod::HCA_RETURN_PAGES: {
            // Give back up to n pages that hold no object; the reply lists them.
            const std::size_t room = c.olen > ifc::manage_pages_out::size_bytes
                                         ? (c.olen - ifc::manage_pages_out::size_bytes) / 8
                                         : 0;
            const auto back = pages_.take(std::min<std::size_t>(n, room));
            if (c.out.size() < ifc::manage_pages_out::size_bytes + back.size() * 8) {
                return fail(cmd_status::BAD_OUTPUT_LEN, cmd_syndrome::OUTPUT_TOO_SHORT);
            }
            ifc::set<ifc::manage_pages_out::output_num_entries>(c.out.data(),
                                                                static_cast<std::uint32_t>(back.size()));
            for (std::size_t i = 0; i < back.size(); ++i) {
                ifc::set<ifc::manage_pages_out::pas>(c.out.data(), i, back[i]);
            }
            // Once its own request is answered in full, objects that went meanwhile may
            // have left more spare than it asked for. (A driver may take pages back
            // unasked, as at teardown; those count toward a request too.)
            if (returning_ != 0) {
                returning_ -= std::min(returning_, back.size());
                if (returning_ == 0) give_back_spare();
            }
            return ok();
        }
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
}

std::optional<pages::slot> firmware_pages::alloc() {
    auto s = pages_.alloc_slot();
    if (!s) ++shortages_;
    // Keep a reserve: below a quarter of a page's worth of free slots, ask for more.
    if (pages_.free_slots() < pages::slots_per_page / 4 && state_ == hca_state::initialized && asking_ == 0) {
        asking_ = std::max<std::uint32_t>(cfg_.page_request_batch, 1);
        events_.request_pages(static_cast<std::int32_t>(asking_));
    }
    return s;
}

bool firmware_pages::write(pages::slot s, const void* data, std::size_t len) {
    if (mmu_.write(s.iova, data, len)) return true;
    trace_.count(&counters::iommu_faults);
    return false;
}

bool firmware_pages::read(pages::slot s, void* data, std::size_t len) {
    if (mmu_.read(s.iova, data, len)) return true;
    trace_.count(&counters::iommu_faults);
    return false;
}

bool firmware_pages::store_list(const std::vector<std::uint64_t>& entries, std::vector<pages::slot>& out) {
    constexpr std::size_t per_slot = pages::slot_size / 8;
    std::array<std::uint64_t, per_slot> chunk;
    for (std::size_t i = 0; i < entries.size(); i += per_slot) {
        const auto slot = alloc();
        const std::size_t n = std::min(per_slot, entries.size() - i);
        for (std::size_t k = 0; k < n; ++k) chunk[k] = hw::to_be(entries[i + k]);
        if (!slot || !write(*slot, chunk.data(), n * 8)) {
            // Not objects going: the command fails or waits for pages, and then needs
            // these again, so nothing is offered back here.
            if (slot) pages_.free_slot(*slot);
            for (const auto s : out) pages_.free_slot(s);
            out.clear();
            return false;
        }
        out.push_back(*slot);
    }
    return true;
}

void firmware_pages::free(pages::slot s) {
    pages_.free_slot(s);
    give_back_spare();
}

void firmware_pages::free_list(std::vector<pages::slot>& slots) {
    for (const auto s : slots) pages_.free_slot(s);
    slots.clear();
    give_back_spare();
}

void firmware_pages::give_back_spare() {
    // Not while it asks for pages itself: a command waiting for memory frees what it
    // took on each try, and those pages are what it needs next.
    if (returning_ != 0 || asking_ != 0 || state_ != hca_state::initialized) return;
    const std::size_t batch = std::max<std::uint32_t>(cfg_.page_request_batch, 1);
    const std::size_t floor = std::size_t{cfg_.boot_pages} + cfg_.init_pages;
    if (pages_.owned() <= floor) return;
    const std::size_t spare = pages_.free_pages();
    if (spare <= 2 * batch) return;
    returning_ = std::min<std::size_t>(std::min(spare - batch, pages_.owned() - floor), std::size_t{1} << 20);
    events_.request_pages(-static_cast<std::int32_t>(returning_));
}

}  // namespace cxv::sim
