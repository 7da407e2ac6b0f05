// Firmware pages (PRM "Firmware Pages": QUERY_PAGES, MANAGE_PAGES): the pages the driver
// gives the function, and the firmware memory (ICM) the object commands keep their
// contexts and translation lists in, one 256-byte slot each (sim/objects/pages.h),
// written and read through the IOMMU as a card's firmware reaches ICM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "sim/device_config.h"
#include "sim/eqs.h"
#include "sim/firmware/command.h"
#include "sim/objects/pages.h"
#include "sim/pci/iommu.h"
#include "sim/trace.h"

namespace cxv::sim {

class firmware_pages {
public:
    // `state` is the firmware's HCA state: which pages MANAGE_PAGES is given (boot or
    // init), and whether a low pool asks for more.
    firmware_pages(const device_config& cfg, iommu& mmu, trace& tr, event_queues& eqs, const hca_state& state);

    cmd_reply query_pages(cmd_ctx& c);
    cmd_reply manage_pages(cmd_ctx& c);

    // INIT_HCA's condition: the boot and init pages given, and no request outstanding.
    bool all_given() const noexcept { return boot_given_ && init_given_ && requested_ == 0; }
    std::size_t owned() const noexcept { return pages_.owned(); }
    // DISABLE_HCA and reset: every page back to the driver, none given or asked for.
    void clear();

    // A slot for an object's context. When the pool runs low the firmware asks for more
    // with a PAGE_REQUEST event, one at a time (the next once the driver has answered). With no slot at all the handler fails with NO_RESOURCES
    // and counts a shortage: the command engine then holds the command until the driver
    // answers the request (cmd_engine.h).
    std::optional<pages::slot> alloc();
    // What a command waiting for memory watches: alloc() calls that found the pool empty,
    // the driver's answers to page requests (MANAGE_PAGES ALLOCATION_SUCCESS or _FAIL),
    // and whether the last answer was a refusal.
    std::uint64_t shortages() const noexcept { return shortages_; }
    std::uint64_t answers() const noexcept { return answers_; }
    bool declined() const noexcept { return declined_; }
    bool write(pages::slot s, const void* data, std::size_t len);
    bool read(pages::slot s, void* data, std::size_t len);
    // A slot back; pages the objects no longer use may then go back to the driver
    // (give_back_spare).
    void free(pages::slot s);
    // A translation list (MTT entries) kept as a card keeps it, one slot per 32 entries,
    // so that the memory an object's list takes is memory the driver gave. False
    // (nothing kept) when the pages run out or the IOMMU faults.
    bool store_list(const std::vector<std::uint64_t>& entries, std::vector<pages::slot>& out);
    void free_list(std::vector<pages::slot>& slots);

private:
    // PRM "Page Request Event": a negative num_pages asks the driver to take pages back
    // (MANAGE_PAGES HCA_RETURN_PAGES). The firmware does so once objects have gone and
    // more than two batches of pages hold nothing, keeping one batch and never going
    // below what it asked for at boot and init, one request at a time: the next only
    // once the driver has taken all that one asked for, and none while it is asking for
    // pages itself.
    void give_back_spare();
    const device_config& cfg_;
    iommu& mmu_;
    trace& trace_;
    event_queues& events_;
    const hca_state& state_;
    pages pages_;
    bool boot_given_ = false;
    bool init_given_ = false;
    std::uint32_t requested_ = 0;  // via QUERY_PAGES, not yet given
    std::uint64_t shortages_ = 0;
    std::uint64_t answers_ = 0;
    bool declined_ = false;
    std::size_t returning_ = 0;  // pages a negative page request asked back, not yet returned
    std::uint32_t asking_ = 0;   // pages a PAGE_REQUEST asked for, not yet answered (one request at a time)
};

}  // namespace cxv::sim
