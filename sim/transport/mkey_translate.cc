// Memory key translation (PRM "Memory Keys", "Memory Translation Table"): the checks a
// card applies to an access through a key and the IOVA ranges it then touches (see
// mkey_translate.h). Pure logic over the objects in the tables.
#include "sim/transport/mkey_translate.h"

#include <algorithm>
#include <limits>

#include "hw/ifc.h"

namespace cxv::sim {

namespace ifc = hw::ifc;

namespace {

constexpr unsigned kMinLogPage = 12;         // the device translates no page below 4 KiB
constexpr std::uint64_t kMttRead = 0x1;      // MTT entry bit 0: rd_en
constexpr std::uint64_t kMttWrite = 0x2;     // MTT entry bit 1: wr_en

// One body for both kinds of output list.
template <class Ranges>
translate_status translate_into(const mkey_object& mk, const umem_object* umem, std::uint32_t key,
                                std::uint32_t pd, std::uint64_t va, std::uint64_t len,
                                unsigned access, Ranges& out) {
    using m = ifc::mkc;
    out.clear();
    const std::byte* c = mk.mkc.data();
    if ((key >> 8) != mk.index || (key & 0xff) != ifc::get<m::mkey_7_0>(c)) {
        return translate_status::key_mismatch;
    }
    if (ifc::get<m::free>(c)) return translate_status::free_key;
    if (ifc::get<m::pd>(c) != pd) return translate_status::pd_mismatch;
    const unsigned granted = (ifc::get<m::lr>(c) ? access_local_read : 0u) |
                             (ifc::get<m::lw>(c) ? access_local_write : 0u) |
                             (ifc::get<m::rr>(c) ? access_remote_read : 0u) |
                             (ifc::get<m::rw>(c) ? access_remote_write : 0u) |
                             (ifc::get<m::a>(c) ? access_remote_atomic : 0u);
    if ((access & ~granted) != 0) return translate_status::access_denied;

    const std::uint64_t start = ifc::get<m::start_addr>(c);
    if (ifc::get<m::length64>(c)) {
        // 2^64 bytes from start_addr: only a wrap past the top of the address space is out.
        if (len != 0 && len - 1 > std::numeric_limits<std::uint64_t>::max() - va) {
            return translate_status::out_of_bounds;
        }
    } else {
        const std::uint64_t klen = ifc::get<m::len>(c);
        if (va < start || len > klen || va - start > klen - len) return translate_status::out_of_bounds;
    }
    if (len == 0) return translate_status::ok;

    const auto mode = static_cast<mkey_mode>(ifc::get<m::access_mode_1_0>(c) |
                                             (ifc::get<m::access_mode_4_2>(c) << 2));
    if (mode == mkey_mode::pa) {
        out.push_back({va, len});  // physical (here: bus, i.e. IOVA) addresses as they are
        return translate_status::ok;
    }
    if (mode != mkey_mode::mtt) return translate_status::unsupported;

    // Where the access starts in the page list, and which list.
    const std::vector<std::uint64_t>* entries = &mk.translations;
    unsigned shift = ifc::get<m::log_page_size>(c);
    std::uint64_t pos = (start & ((std::uint64_t{1} << shift) - 1)) + (va - start);
    bool enables_apply = mk.pg_access;
    if (mk.umem_id != 0) {
        if (umem == nullptr || umem->id != mk.umem_id) return translate_status::page_fault;
        entries = &umem->mtt;
        shift = kMinLogPage + umem->log_page_size;
        pos = umem->page_offset + mk.umem_offset + (va - start);
        enables_apply = true;  // a UMEM's entries always carry rd_en/wr_en
    }
    const std::uint64_t page = std::uint64_t{1} << shift;
    const bool reads = (access & (access_local_read | access_remote_read | access_remote_atomic)) != 0;
    const bool writes = (access & (access_local_write | access_remote_write | access_remote_atomic)) != 0;

    while (len != 0) {
        const std::uint64_t idx = pos >> shift;
        const std::uint64_t off = pos & (page - 1);
        if (idx >= entries->size()) {
            out.clear();
            return translate_status::page_fault;
        }
        const std::uint64_t e = (*entries)[idx];
        if (enables_apply && ((reads && !(e & kMttRead)) || (writes && !(e & kMttWrite)))) {
            out.clear();
            return translate_status::page_fault;
        }
        const std::uint64_t chunk = std::min(len, page - off);
        const std::uint64_t iova = (e & ~(page - 1)) + off;
        if (!out.empty() && out.back().iova + out.back().len == iova) {
            out.back().len += chunk;
        } else {
            out.push_back({iova, chunk});
        }
        pos += chunk;
        len -= chunk;
    }
    return translate_status::ok;
}

}  // namespace

translate_status translate(const mkey_object& mk, const umem_object* umem, std::uint32_t key,
                           std::uint32_t pd, std::uint64_t va, std::uint64_t len,
                           unsigned access, iova_list& out) {
    return translate_into(mk, umem, key, pd, va, len, access, out);
}

translate_status translate(const mkey_object& mk, const umem_object* umem, std::uint32_t key,
                           std::uint32_t pd, std::uint64_t va, std::uint64_t len,
                           unsigned access, std::vector<iova_range>& out) {
    return translate_into(mk, umem, key, pd, va, len, access, out);
}

}  // namespace cxv::sim
