// Helpers the firmware's command handlers share for their object tables: looking up a
// referenced object, counting users, and returning a page list in a QUERY output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/syndromes.h"
#include "hw/endian.h"
#include "hw/layout.h"
#include "sim/firmware/command.h"
#include "sim/objects/tables.h"

namespace cxv::sim {

// A referenced object (the PD of an MKEY, the CQs of a QP, ...) must exist and belong to
// the same uid. A missing PD, UAR, EQ or CQ is a bad parameter with its own syndrome; a
// missing object without one (SRQ, UMEM) is an unknown resource.
template <typename Map>
cmd_reply check_ref(const Map& m, std::uint32_t n, std::uint32_t uid, sim::cmd_syndrome missing) {
    const auto it = m.find(n);
    if (it == m.end()) {
        return fail(missing == sim::cmd_syndrome::UNKNOWN_RESOURCE ? hw::cmd_status::BAD_RESOURCE
                                                                  : hw::cmd_status::BAD_PARAM,
                    missing);
    }
    if (it->second.uid != uid) return fail(hw::cmd_status::BAD_RESOURCE, sim::cmd_syndrome::FOREIGN_RESOURCE);
    return ok();
}

template <typename Map>
void add_user(Map& m, std::uint32_t n) {
    if (auto it = m.find(n); it != m.end()) ++it->second.users;
}

template <typename Map>
void drop_user(Map& m, std::uint32_t n) {
    if (auto it = m.find(n); it != m.end() && it->second.users != 0) --it->second.users;
}

// Writes a page list of big-endian 64-bit entries from byte `at` of a QUERY output to
// its end, as many entries as the output holds.
inline void put_pas_at(cmd_ctx& c, std::size_t at, const std::vector<std::uint64_t>& pas) {
    const std::size_t room = c.out.size() > at ? (c.out.size() - at) / 8 : 0;
    for (std::size_t i = 0; i < pas.size() && i < room; ++i) {
        const std::uint64_t be = hw::to_be(pas[i]);
        std::memcpy(c.out.data() + at + 8 * i, &be, 8);
    }
}

// The same into the flexible `pas` array that ends a QUERY output's layout Out.
template <typename Out>
void put_pas(cmd_ctx& c, const std::vector<std::uint64_t>& pas) {
    static_assert(Out::pas::bit_offset == Out::size_bits, "the page list ends the layout");
    put_pas_at(c, Out::size_bytes, pas);
}

}  // namespace cxv::sim
