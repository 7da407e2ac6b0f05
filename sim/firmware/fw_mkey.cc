// Protection domains, memory keys and user memory (PRM ALLOC_PD, DEALLOC_PD; CREATE_MKEY,
// DESTROY_MKEY, QUERY_MKEY, "Memory Key Context"; CREATE_UMEM, DESTROY_UMEM). The translation through a key that the transport
// engine applies is in sim/transport/mkey_translate.cc.
//
// An MTT mkey maps [start_addr, start_addr + len) onto pages of 2^log_page_size bytes:
// entry i translates the i-th page the range touches, counted from the page holding
// start_addr, whose low bits are the offset into the first page (Linux mlx5_ib
// get_octo_len and rdma-core's VFIO provider compute the entries the same way). With
// mkey_umem_valid the pages are a UMEM's instead: byte X of the key is byte
// mkey_umem_offset + X of the UMEM.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "hw/endian.h"
#include "hw/ifc.h"
#include "sim/firmware/fw_mkey.h"
#include "sim/firmware/handler_util.h"
#include "sim/firmware/fw_tables.h"
#include "sim/transport/mkey_translate.h"

namespace cxv::sim {

namespace {

constexpr std::uint32_t kNoQpn = 0xffffff;   // mkc.qpn of a key bound to no QP
constexpr unsigned kMinLogPage = 12;         // the device translates no page below 4 KiB
constexpr std::uint64_t kMttEnables = 0x3;   // MTT entry bits 1:0: wr_en, rd_en


// Pages of 2^log_page bytes that [start, start + len) touches (start + len does not wrap).
std::uint64_t pages_spanned(std::uint64_t start, std::uint64_t len, unsigned log_page) {
    if (len == 0) return 0;
    return ((start + len - 1) >> log_page) - (start >> log_page) + 1;
}

// Memory key indices below this one are the firmware's: index 1 with variant 0 is the
// reserved L_Key 0x100 that ends a short scatter list (PRM "Receive WQE"), so a key the
// driver gets can never be mistaken for it.
constexpr std::uint32_t kFirstMkeyIndex = 0x10;

// Entry i of an MTT list given as 32-bit big-endian dwords (create_mkey_in.klm_pas_mtt).
std::uint64_t mtt_entry(const std::byte* in, std::size_t i) {
    const std::uint64_t hi = ifc::get<ifc::create_mkey_in::klm_pas_mtt>(in, 2 * i);
    return (hi << 32) | ifc::get<ifc::create_mkey_in::klm_pas_mtt>(in, 2 * i + 1);
}

// An MTT entry's address part is aligned to the page (bits 7:2 are reserved, so a
// 4 KiB page already covers them).
bool mtt_aligned(std::uint64_t e, std::uint64_t page) { return ((e & ~kMttEnables) & (page - 1)) == 0; }

}  // namespace

// --- PD ----------------------------------------------------------------------------

cmd_reply mkey_commands::alloc_pd(cmd_ctx& c) {
    std::uint32_t pd = 0;
    const auto r = alloc_plain(pds_, next_pd_, ifc::get<ifc::cmd_hca_cap::log_max_pd>(caps_.current()),
                               ifc::get<ifc::alloc_pd_in::uid>(c.in.data()), &pd);
    if (!failed(r)) ifc::set<ifc::alloc_pd_out::pd>(c.out.data(), pd);
    return r;
}

cmd_reply mkey_commands::dealloc_pd(cmd_ctx& c) {
    return dealloc_plain(pds_, ifc::get<ifc::dealloc_pd_in::pd>(c.in.data()),
                         ifc::get<ifc::dealloc_pd_in::uid>(c.in.data()));
}

// --- MKEY --------------------------------------------------------------------------

cmd_reply mkey_commands::create_mkey(cmd_ctx& c) {
    using m = ifc::mkc;
    using cin = ifc::create_mkey_in;
    const std::byte* in = c.in.data();
    const std::byte* mkc = ifc::at<cin::memory_key_mkey_entry>(in);
    const std::byte* caps = caps_.current();
    const std::uint32_t uid = ifc::get<cin::uid>(in);
    const bool umem_valid = ifc::get<cin::mkey_umem_valid>(in);
    const bool is_free = ifc::get<m::free>(mkc);
    const std::uint64_t start = ifc::get<m::start_addr>(mkc);
    const std::uint64_t len = ifc::get<m::len>(mkc);
    const bool length64 = ifc::get<m::length64>(mkc);
    const unsigned log_page = ifc::get<m::log_page_size>(mkc);
    const auto mode = static_cast<mkey_mode>(ifc::get<m::access_mode_1_0>(mkc) |
                                             (ifc::get<m::access_mode_4_2>(mkc) << 2));

    const unsigned log_max_mkey = ifc::get<ifc::cmd_hca_cap::log_max_mkey>(caps);
    if (log_max_mkey < 32 && mkeys_.size() >= (std::size_t{1} << log_max_mkey)) {
        return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    }
    // Access modes: MTT, and PA for the function's own driver (Linux's mlx5e and
    // mlx5_ib_get_dma_mr create PA keys with uid 0; DevX users never get one: the kernel
    // sets mkey_umem_valid on theirs). KLM and KSM keys are not modelled yet.
    switch (mode) {
        case mkey_mode::mtt:
            break;
        case mkey_mode::pa:
            if (uid != 0 || umem_valid) return bad_param();
            break;
        default:
            return bad_param();
    }
    // A key created by command is bound to no QP (memory window binding is a UMR's).
    if (ifc::get<m::qpn>(mkc) != kNoQpn) return bad_param();
    // No signature offload, ATS or relaxed ordering unless the capabilities offer them.
    if (ifc::get<m::bsf_en>(mkc) || ifc::get<m::bsf_octword_size>(mkc) != 0) return bad_param();
    if (ifc::get<m::ma_translation_mode>(mkc) != 0 && !ifc::get<ifc::cmd_hca_cap::ats>(caps)) {
        return bad_param();
    }
    if (ifc::get<m::relaxed_ordering_write>(mkc) &&
        !ifc::get<ifc::cmd_hca_cap::relaxed_ordering_write>(caps)) {
        return bad_param();
    }
    if (ifc::get<m::relaxed_ordering_read>(mkc) &&
        !ifc::get<ifc::cmd_hca_cap::relaxed_ordering_read>(caps)) {
        return bad_param();
    }
    // The range: 2^64 bytes with length64 (len then 0; only a PA key can translate it),
    // else [start_addr, start_addr + len) inside the address space and at most
    // 2^log_max_mrw_sz bytes.
    const unsigned log_max_mrw = ifc::get<ifc::cmd_hca_cap::log_max_mrw_sz>(caps);
    if (length64) {
        if (len != 0 || mode != mkey_mode::pa) return bad_param();
        if (log_max_mrw < 64) return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    } else {
        if (len > std::numeric_limits<std::uint64_t>::max() - start) return bad_param();
        if (log_max_mrw < 64 && len > (std::uint64_t{1} << log_max_mrw)) {
            return fail(cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
        }
    }
    // The protection domain: a live PD of the same user.
    const std::uint32_t pd = ifc::get<m::pd>(mkc);
    const auto pd_it = pds_.find(pd);
    if (pd_it == pds_.end()) return bad_param(cmd_syndrome::BAD_PD);
    if (pd_it->second.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);

    mkey_object mk;
    mk.uid = uid;
    mk.pg_access = ifc::get<cin::pg_access>(in);
    std::memcpy(mk.mkc.data(), mkc, m::size_bytes);
    umem_object* umem = nullptr;
    if (mode == mkey_mode::mtt && umem_valid) {
        // The UMEM's pages translate the key: log_page_size and the translation sizes of
        // the command are not used (real cards take such keys with log_page_size 0).
        const auto u = umems_.find(ifc::get<cin::mkey_umem_id>(in));
        if (u == umems_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
        if (u->second.uid != uid) return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
        const std::uint64_t offset = ifc::get<cin::mkey_umem_offset>(in);
        const std::uint64_t avail = umem_bytes(u->second);
        if (offset > avail || len > avail - offset) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        umem = &u->second;
        mk.umem_id = u->first;
        mk.umem_offset = offset;
    } else if (mode == mkey_mode::mtt) {
        if (log_page < kMinLogPage) return bad_param(cmd_syndrome::LOG_SIZE_TOO_SMALL);
        const std::uint64_t page = std::uint64_t{1} << log_page;
        // Two 8-byte MTT entries per 16-byte octword.
        const std::uint64_t needed = (pages_spanned(start, len, log_page) + 1) / 2;
        const std::uint64_t table = ifc::get<m::translations_octword_size>(mkc);
        const std::uint64_t given = ifc::get<cin::translations_octword_actual_size>(in);
        if (given > table) return bad_param();
        if (table < needed) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        // The command must hold the octwords it announces.
        if ((c.in.size() - cin::size_bytes) / 16 < given) {
            return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
        }
        // A key in the free state waits for a UMR to fill its table; any other key
        // must come with a translation for every page of its range.
        if (!is_free && given < needed) return bad_param(cmd_syndrome::PAS_TOO_SHORT);
        mk.translations.reserve(given * 2);
        for (std::size_t i = 0; i < given * 2; ++i) {
            const std::uint64_t e = mtt_entry(in, i);
            if (!mtt_aligned(e, page)) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
            mk.translations.push_back(e);
        }
    }

    if (mkeys_.size() >= kMask24) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    const std::uint32_t index = free_number(mkeys_, std::max(next_mkey_, kFirstMkeyIndex));
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm_.write(*slot, mkc, m::size_bytes)) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    if (!icm_.store_list(mk.translations, mk.list_icm)) {
        icm_.free(*slot);
        return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    }
    ++pd_it->second.users;
    if (umem != nullptr) ++umem->users;
    mk.index = index;
    mk.icm = *slot;
    mkeys_.emplace(index, std::move(mk));
    next_mkey_ = std::max((index + 1) & kMask24, kFirstMkeyIndex);
    ifc::set<ifc::create_mkey_out::mkey_index>(c.out.data(), index);
    return ok();
}

cmd_reply mkey_commands::destroy_mkey(cmd_ctx& c) {
    const auto it = mkeys_.find(ifc::get<ifc::destroy_mkey_in::mkey_index>(c.in.data()));
    if (it == mkeys_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::destroy_mkey_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    const mkey_object& mk = it->second;
    drop_user(pds_, ifc::get<ifc::mkc::pd>(mk.mkc.data()));
    if (mk.umem_id != 0) drop_user(umems_, mk.umem_id);
    icm_.free(mk.icm);
    icm_.free_list(it->second.list_icm);
    mkeys_.erase(it);
    return ok();
}

cmd_reply mkey_commands::query_mkey(cmd_ctx& c) {
    const auto it = mkeys_.find(ifc::get<ifc::query_mkey_in::mkey_index>(c.in.data()));
    if (it == mkeys_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    const mkey_object& mk = it->second;
    std::byte* mkc = ifc::at<ifc::query_mkey_out::memory_key_mkey_entry>(c.out.data());
    if (!icm_.read(mk.icm, mkc, ifc::mkc::size_bytes)) {
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    // The translation entries follow from bsf0_klm0_pas_mtt0_1 on, as many as the output
    // holds (the layout names the first four; a longer output carries the rest).
    constexpr std::size_t first = ifc::query_mkey_out::bsf0_klm0_pas_mtt0_1::bit_offset / 8;
    const std::size_t room = (c.out.size() - first) / 8;
    for (std::size_t i = 0; i < mk.translations.size() && i < room; ++i) {
        const std::uint64_t be = hw::to_be(mk.translations[i]);
        std::memcpy(c.out.data() + first + i * 8, &be, 8);
    }
    return ok();
}

void mkey_commands::write_back(const mkey_object& mk) {
    const auto it = mkeys_.find(mk.index);
    if (it == mkeys_.end() || &it->second != &mk) return;
    mkey_object& kept = it->second;
    // The object stays what the engine translates with; a write the pages refuse (the
    // driver took them back) leaves only QUERY_MKEY's view behind.
    (void)icm_.write(kept.icm, kept.mkc.data(), ifc::mkc::size_bytes);
    icm_.free_list(kept.list_icm);
    (void)icm_.store_list(kept.translations, kept.list_icm);
}

// --- UMEM --------------------------------------------------------------------------

cmd_reply mkey_commands::create_umem(cmd_ctx& c) {
    using u = ifc::umem;
    const std::byte* in = c.in.data();
    const std::byte* um = ifc::at<ifc::create_umem_in::umem>(in);
    const std::byte* caps = caps_.current();
    const std::uint32_t uid = ifc::get<ifc::create_umem_in::uid>(in);
    const unsigned log_page = ifc::get<u::log_page_size>(um);  // relative to 4 KiB
    const std::uint32_t page_offset = ifc::get<u::page_offset>(um);
    const std::uint64_t num = ifc::get<u::num_of_mtt>(um);

    // A UMEM of uid 0 (the function's own driver) only where the device allows it.
    if (uid == 0 && !ifc::get<ifc::cmd_hca_cap::umem_uid_0>(caps)) return bad_param();
    if (ifc::get<u::ats>(um) && !ifc::get<ifc::cmd_hca_cap::ats>(caps)) return bad_param();
    if (num == 0) return bad_param();
    const std::uint64_t page = std::uint64_t{4096} << log_page;
    if (page_offset >= page) return bad_param();
    // The command must hold the num_of_mtt entries it announces.
    if ((c.in.size() - ifc::create_umem_in::size_bytes) / ifc::mtt::size_bytes < num) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
    }
    umem_object obj;
    obj.uid = uid;
    obj.log_page_size = log_page;
    obj.page_offset = page_offset;
    obj.mtt.reserve(num);
    const std::byte* list = ifc::at<u::mtt>(um);
    for (std::uint64_t i = 0; i < num; ++i) {
        std::uint64_t be;
        std::memcpy(&be, list + i * ifc::mtt::size_bytes, 8);
        const std::uint64_t e = hw::from_be(be);
        if (!mtt_aligned(e, page)) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
        obj.mtt.push_back(e);
    }

    if (umems_.size() >= kMask24) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    const std::uint32_t id = free_number(umems_, next_umem_);
    const auto slot = icm_.alloc();
    if (!slot) return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    if (!icm_.write(*slot, um, u::size_bytes)) {
        icm_.free(*slot);
        return fail(cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    }
    if (!icm_.store_list(obj.mtt, obj.list_icm)) {
        icm_.free(*slot);
        return fail(cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    }
    obj.id = id;
    obj.icm = *slot;
    umems_.emplace(id, std::move(obj));
    next_umem_ = (id + 1) & kMask24;
    ifc::set<ifc::create_umem_out::umem_id>(c.out.data(), id);
    return ok();
}

cmd_reply mkey_commands::destroy_umem(cmd_ctx& c) {
    // rdma-core sends this with the 48-byte create_umem_in length: extra input is fine.
    const auto it = umems_.find(ifc::get<ifc::destroy_umem_in::umem_id>(c.in.data()));
    if (it == umems_.end()) return bad_resource(cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != ifc::get<ifc::destroy_umem_in::uid>(c.in.data())) {
        return bad_resource(cmd_syndrome::FOREIGN_RESOURCE);
    }
    if (it->second.users != 0) return fail(cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    icm_.free(it->second.icm);
    icm_.free_list(it->second.list_icm);
    umems_.erase(it);
    return ok();
}

void mkey_commands::release_all() {
    for (auto& [n, o] : mkeys_) {
        icm_.free(o.icm);
        icm_.free_list(o.list_icm);
    }
    for (auto& [n, o] : umems_) {
        icm_.free(o.icm);
        icm_.free_list(o.list_icm);
    }
    mkeys_.clear();
    umems_.clear();
    pds_.clear();
    next_pd_ = next_mkey_ = next_umem_ = 1;
}

}  // namespace cxv::sim
