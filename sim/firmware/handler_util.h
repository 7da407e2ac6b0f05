// Small pieces every command handler of the model (sim/firmware/fw_*.cc) uses: the
// replies for the common failures, whether a range lies inside a UMEM, and the names
// they use unqualified. One definition here, so that a status or a bound means the same
// in every handler. (The width of object numbers, kMask24, is sim/objects/objects.h's.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hw/opcodes.h"
#include "sim/firmware/command.h"
#include "sim/objects/objects.h"
#include "sim/syndromes.h"

namespace cxv::sim {

// The names every handler uses unqualified.
namespace ifc = hw::ifc;
using hw::cmd_opcode;
using hw::cmd_status;

// A command whose input names a value the device does not accept (PRM "Command
// Interface": status BAD_PARAM), with the syndrome saying which check failed.
inline cmd_reply bad_param(sim::cmd_syndrome why = sim::cmd_syndrome::BAD_PARAMETER) {
    return fail(hw::cmd_status::BAD_PARAM, why);
}

// A command that names an object that does not exist or is not the caller's (status
// BAD_RESOURCE).
inline cmd_reply bad_resource(sim::cmd_syndrome why) { return fail(hw::cmd_status::BAD_RESOURCE, why); }

inline bool failed(const cmd_reply& r) { return r.status != hw::cmd_status::OK; }

// The lowest free object number of `table` at or after `from`, 24 bits and never 0. The
// handlers start from the number after the last one given, so numbers are handed out in
// turn and a freed one comes back only once the others have been.
template <typename Table>
std::uint32_t free_number(const Table& table, std::uint32_t from) {
    std::uint32_t n = from & kMask24;
    while (n == 0 || table.count(n) != 0) n = (n + 1) & kMask24;
    return n;
}

// ALLOC_PD and ALLOC_XRCD: an object that is a number and its uid only. At most
// 2^log_max of them (EXCEED_LIM / EXCEEDS_LIMIT); the number is free_number's from `next`
// on, and `next` moves past it. `*n` is written on success only.
template <typename Table>
cmd_reply alloc_plain(Table& table, std::uint32_t& next, unsigned log_max, std::uint32_t uid, std::uint32_t* n) {
    if (table.size() >= (std::size_t{1} << log_max)) {
        return fail(hw::cmd_status::EXCEED_LIM, sim::cmd_syndrome::EXCEEDS_LIMIT);
    }
    const std::uint32_t got = free_number(table, next);
    table[got].uid = uid;
    next = (got + 1) & kMask24;
    *n = got;
    return ok();
}

// DEALLOC_UAR, DEALLOC_PD and DEALLOC_XRCD: the object must exist (BAD_RESOURCE /
// UNKNOWN_RESOURCE), be the caller's (FOREIGN_RESOURCE) and be held by no other object
// (RESOURCE_BUSY / RESOURCE_IN_USE); then it goes.
template <typename Table>
cmd_reply dealloc_plain(Table& table, std::uint32_t n, std::uint32_t uid) {
    const auto it = table.find(n);
    if (it == table.end()) return bad_resource(sim::cmd_syndrome::UNKNOWN_RESOURCE);
    if (it->second.uid != uid) return bad_resource(sim::cmd_syndrome::FOREIGN_RESOURCE);
    if (it->second.users != 0) return fail(hw::cmd_status::RESOURCE_BUSY, sim::cmd_syndrome::RESOURCE_IN_USE);
    table.erase(it);
    return ok();
}

// The bytes a UMEM covers (PRM "User Memory Object"): its num_of_mtt pages of 4 KiB <<
// log_page_size, less the page_offset where it starts in the first. Saturates instead
// of wrapping; CREATE_UMEM makes page_offset smaller than one page.
inline std::uint64_t umem_bytes(const umem_object& u) {
    const unsigned shift = 12 + u.log_page_size;
    const std::uint64_t n = u.mtt.size();
    if (n > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::numeric_limits<std::uint64_t>::max();
    return (n << shift) - u.page_offset;
}

// Whether bytes [off, off + len) of a UMEM lie inside it.
inline bool umem_holds(const umem_object& u, std::uint64_t off, std::uint64_t len) {
    const std::uint64_t size = umem_bytes(u);
    return off <= size && len <= size - off;
}

}  // namespace cxv::sim
