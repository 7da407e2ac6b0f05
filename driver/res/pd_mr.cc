#include "driver/res/pd_mr.h"

#include <atomic>
#include <cerrno>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

namespace {
constexpr std::uint32_t kMttMode = 1;       // mkc access_mode: MTT (PRM "Memory Key")
constexpr std::uint32_t kNoQpn = 0xffffff;  // mkc.qpn: the key is not bound to a QP
constexpr unsigned kPageShift = 12;
std::atomic<std::uint8_t> next_variant{0x5a};
}  // namespace

// ---- PD ----

result<std::shared_ptr<pd>> pd::create(hca& h) {
    std::shared_ptr<pd> p(new pd(h));
    auto r = h.exec(command<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD), ifc::alloc_pd_out::size_bytes);
    if (!r) return r.error();
    p->pdn_ = ifc::get<ifc::alloc_pd_out::pd>(r->data());
    p->created();
    return p;
}

status pd::destroy() {
    if (const int n = users_.load(); n > 0 && !destroyed_) {
        return error{EBUSY, fmt::format("DEALLOC_PD of PD 0x{:x}: still used by {} MRs, QPs or SRQs", pdn_, n)};
    }
    auto in = command<ifc::dealloc_pd_in>(cmd_opcode::DEALLOC_PD);
    ifc::set<ifc::dealloc_pd_in::pd>(in.data(), pdn_);
    return destroy_with(std::move(in));
}

pd::~pd() { (void)destroy(); }

// ---- MR ----

result<std::shared_ptr<mr>> mr::create(std::shared_ptr<pd> domain, void* addr, std::size_t length,
                                       unsigned access) {
    if (!domain) return error{EINVAL, "mr::create: no protection domain"};
    if (addr == nullptr || length == 0) return error{EINVAL, "mr::create: empty region"};
    if (access & ~(access_local_write | access_remote_write | access_remote_read | access_remote_atomic)) {
        return error{EINVAL, fmt::format("mr::create: unknown access flags 0x{:x}", access)};
    }
    if ((access & (access_remote_write | access_remote_atomic)) && !(access & access_local_write)) {
        return error{EINVAL, "mr::create: remote write or atomic access needs local write"};
    }
    hca& h = domain->device();
    std::shared_ptr<mr> m(new mr(std::move(domain)));
    const bool writes = (access & (access_local_write | access_remote_write | access_remote_atomic)) != 0;
    auto mapping = h.device().map_dma(addr, length, writes);
    if (!mapping) return mapping.error();
    m->mapping_ = std::move(mapping).value();
    m->addr_ = addr;
    m->length_ = length;
    m->access_ = access;

    // One MTT entry per 4 KiB page the region touches; the mapping is contiguous in
    // IOVA space, so entry i is the mapping's IOVA plus i pages.
    const std::uint64_t va = reinterpret_cast<std::uintptr_t>(addr);
    const std::uint64_t first = va >> kPageShift, last = (va + length - 1) >> kPageShift;
    const std::uint64_t pages = last - first + 1;
    const std::uint64_t octwords = (pages + 1) / 2;
    auto in = command<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY, 0, octwords * 16);
    std::byte* mkc = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(in.data());
    ifc::set<ifc::mkc::access_mode_1_0>(mkc, kMttMode);
    ifc::set<ifc::mkc::lr>(mkc, 1);
    ifc::set<ifc::mkc::lw>(mkc, (access & access_local_write) ? 1 : 0);
    ifc::set<ifc::mkc::rr>(mkc, (access & access_remote_read) ? 1 : 0);
    ifc::set<ifc::mkc::rw>(mkc, (access & access_remote_write) ? 1 : 0);
    ifc::set<ifc::mkc::a>(mkc, (access & access_remote_atomic) ? 1 : 0);
    ifc::set<ifc::mkc::qpn>(mkc, kNoQpn);
    const std::uint8_t variant = next_variant.fetch_add(1);
    ifc::set<ifc::mkc::mkey_7_0>(mkc, variant);
    ifc::set<ifc::mkc::pd>(mkc, m->pd_->pdn());
    ifc::set<ifc::mkc::start_addr>(mkc, va);
    ifc::set<ifc::mkc::len>(mkc, length);
    ifc::set<ifc::mkc::translations_octword_size>(mkc, static_cast<std::uint32_t>(octwords));
    ifc::set<ifc::mkc::log_page_size>(mkc, kPageShift);
    ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(in.data(), static_cast<std::uint32_t>(octwords));
    for (std::uint64_t i = 0; i < pages; ++i) {
        const std::uint64_t iova = m->mapping_.iova() + (i << kPageShift);
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i, static_cast<std::uint32_t>(iova >> 32));
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i + 1, static_cast<std::uint32_t>(iova));
    }
    auto r = h.exec(in, ifc::create_mkey_out::size_bytes);
    if (!r) return r.error();
    m->key_ = (ifc::get<ifc::create_mkey_out::mkey_index>(r->data()) << 8) | variant;
    m->created();
    m->pd_->hold();
    return m;
}

status mr::destroy() {
    if (destroyed_) return ok_status();
    auto in = command<ifc::destroy_mkey_in>(cmd_opcode::DESTROY_MKEY);
    ifc::set<ifc::destroy_mkey_in::mkey_index>(in.data(), key_ >> 8);
    auto s = destroy_with(std::move(in));
    if (s) pd_->release();
    return s;
}

mr::~mr() { (void)destroy(); }

}  // namespace cxv::driver
