#include "sim/link/subnet_admin.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "sim/wire/bytes.h"

namespace cxv::sim::link {

namespace {

using wire::get16;
using wire::get32;
using wire::get64;
using wire::get8;
using wire::put16;
using wire::put32;
using wire::put64;
using wire::put8;
using gid = subnet_admin::gid;

constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }

// MCMemberRecord (IBA 15.2.5.17): byte offsets in the record, component mask bits.
namespace mcr {
constexpr std::size_t mgid = 0, port_gid = 16, qkey = 32, mlid = 36, mtu = 38, tclass = 39, pkey = 40, rate = 42,
                      life = 43, sl_flow_hop = 44, scope_join = 48, proxy = 49, bytes = 52;
constexpr std::uint64_t c_mgid = bit(0), c_port_gid = bit(1), c_qkey = bit(2), c_mlid = bit(3), c_mtu_sel = bit(4),
                        c_mtu = bit(5), c_tclass = bit(6), c_pkey = bit(7), c_rate_sel = bit(8), c_rate = bit(9),
                        c_life_sel = bit(10), c_life = bit(11), c_sl = bit(12), c_flow = bit(13), c_hop = bit(14),
                        c_scope = bit(15), c_join = bit(16);
// What a join that creates a group must give besides PortGID and JoinState (IBA o15-0.2.4).
constexpr std::uint64_t create = c_qkey | c_pkey | c_sl | c_flow | c_tclass;
}  // namespace mcr

// PathRecord (IBA 15.2.5.16).
namespace pr {
constexpr std::size_t dgid = 8, sgid = 24, dlid = 40, slid = 42, flow_hop = 44, tclass = 48, reversible_numb = 49,
                      pkey = 50, qos_sl = 52, mtu = 54, rate = 55, life = 56, bytes = 64;
constexpr std::uint64_t c_dgid = bit(2), c_sgid = bit(3), c_dlid = bit(4), c_slid = bit(5), c_raw = bit(6),
                        c_flow = bit(8), c_hop = bit(9), c_tclass = bit(10), c_pkey = bit(13), c_sl = bit(15),
                        c_mtu_sel = bit(16), c_mtu = bit(17), c_rate_sel = bit(18), c_rate = bit(19),
                        c_life_sel = bit(20), c_life = bit(21);
}  // namespace pr

// JoinState bits (IBA 15.2.5.17): FullMember, NonMember, SendOnlyNonMember, SendOnlyFullMember.
constexpr std::uint8_t kFullMember = 0x1, kJoinStates = 0xf;
// The ports' MTU (5: 4096) and rate (16: 100 Gb/s, 4x EDR), as PortInfo reports them
// (sim/firmware/fw_vport.cc); the subnet's packet lifetime (OpenSM's default, 0x12).
constexpr std::uint8_t kMaxMtu = 5, kMaxRate = 16, kSlowestRate = 2, kPacketLife = 18;
// The IPoIB broadcast group of the default partition (RFC 4391 4.1: ff12:401b:<P_Key>::
// ffff:ffff) as OpenSM makes it: Q_Key 0x0B1B, MTU 2048 (4), 10 Gb/s (3).
constexpr gid kIpoibBroadcast{0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
constexpr std::uint16_t kFirstMlid = 0xc000, kLastMlid = 0xfffe;
constexpr std::uint64_t kGidPrefix = 0xfe80000000000000ull;

gid read_gid(const std::byte* p) {
    gid g;
    std::memcpy(g.data(), p, g.size());
    return g;
}
void write_gid(std::byte* p, const gid& g) { std::memcpy(p, g.data(), g.size()); }

// IBA Table 214's rate codes, as tenths of Gb/s; 0 for a code it does not define.
unsigned rate_speed(std::uint8_t r) {
    static constexpr unsigned speeds[] = {0,    0,   25,   100,  300, 50,   200,  400,  600,  800, 1200, 140,
                                          560, 1120, 1680, 250, 1000, 2000, 3000, 280, 500, 4000, 6000};
    return r < std::size(speeds) ? speeds[r] : 0;
}

// What a component with a selector (IBA 15.2.5.16: 0 greater than, 1 less than, 2
// exactly, 3 the largest available, or for a lifetime the smallest) asks of a value
// that is there (`have`), in an order given by `rank`.
template <typename Rank>
bool satisfies(std::uint8_t sel, std::uint8_t asked, std::uint8_t have, Rank rank) {
    switch (sel) {
    case 0: return rank(have) > rank(asked);
    case 1: return rank(have) < rank(asked);
    case 2: return have == asked;
    default: return true;
    }
}
unsigned same(std::uint8_t v) { return v; }

// The MTU, rate and lifetime a new path or group gets: the largest the subnet has that
// the selector allows (any lower MTU or rate is there too).
std::optional<std::uint8_t> offer_mtu(std::uint8_t sel, std::uint8_t asked) {
    if (sel == 3) return kMaxMtu;
    if (sel == 0) return asked < kMaxMtu ? std::optional<std::uint8_t>(kMaxMtu) : std::nullopt;
    if (sel == 1) return asked > 1 ? std::optional<std::uint8_t>(std::min<std::uint8_t>(asked - 1, kMaxMtu)) : std::nullopt;
    return asked >= 1 && asked <= kMaxMtu ? std::optional<std::uint8_t>(asked) : std::nullopt;
}
std::optional<std::uint8_t> offer_rate(std::uint8_t sel, std::uint8_t asked) {
    const unsigned want = rate_speed(asked), max = rate_speed(kMaxRate);
    if (sel == 3) return kMaxRate;
    if (sel == 0) return want < max ? std::optional<std::uint8_t>(kMaxRate) : std::nullopt;
    if (sel == 1) return want > rate_speed(kSlowestRate) ? std::optional<std::uint8_t>(kSlowestRate) : std::nullopt;
    return want != 0 && want <= max ? std::optional<std::uint8_t>(asked) : std::nullopt;
}
std::optional<std::uint8_t> offer_life(std::uint8_t sel, std::uint8_t asked) {
    if (sel == 0) return asked < 63 ? std::optional<std::uint8_t>(std::max<std::uint8_t>(kPacketLife, asked + 1)) : std::nullopt;
    if (sel == 1) return asked > 0 ? std::optional<std::uint8_t>(std::min<std::uint8_t>(kPacketLife, asked - 1)) : std::nullopt;
    if (sel == 2) return asked;
    return kPacketLife;
}
// A component with its selector: the value offered. Without the component, `dflt`;
// without the selector, the value asked exactly (IBA: a selector not in the mask is
// not compared).
template <typename Offer>
std::optional<std::uint8_t> resolve(std::uint64_t mask, std::uint64_t c_sel, std::uint64_t c_val, std::uint8_t byte,
                                    std::uint8_t dflt, Offer offer) {
    if (!(mask & c_val)) return dflt;
    return offer((mask & c_sel) ? byte >> 6 : 2, byte & 0x3f);
}

}  // namespace

subnet_admin::subnet_admin(const device_config& cfg) : next_mlid_(kFirstMlid + 1) {
    gid own{};
    put64(reinterpret_cast<std::byte*>(own.data()), kGidPrefix);
    put64(reinterpret_cast<std::byte*>(own.data()) + 8, cfg.node_guid + 1);  // the port GUID
    lids_[own] = cfg.lid;
    group b;
    b.qkey = 0x0b1b;
    b.mlid = kFirstMlid;
    b.mtu = 4;
    b.rate = 3;
    b.life = kPacketLife;
    b.scope = 2;  // link-local, as the MGID's scope nibble
    b.permanent = true;
    groups_[kIpoibBroadcast] = b;
}

bool subnet_admin::answer(const wire::packet& in, wire::packet& out) {
    namespace m = sa_mad;
    if (in.bth.opcode != (wire::opcode::UD | wire::opcode::SEND_ONLY) || in.bth.dest_qp != 1 ||
        in.deth.q_key != m::gsi_qkey || in.payload.size() < m::bytes) {
        return false;
    }
    const std::byte* req = in.payload.data();
    if (get8(req + m::mgmt_class) != m::class_subn_adm || (get8(req + m::method) & 0x80) != 0) return false;
    ++counters_.requests;

    out = wire::packet{};
    out.net = in.net;
    out.net.dlid = in.net.slid;
    out.net.slid = in.net.dlid;
    out.net.vl = 0;
    std::swap(out.net.sgid, out.net.dgid);
    out.bth.opcode = wire::opcode::UD | wire::opcode::SEND_ONLY;
    out.bth.pkey = in.bth.pkey;
    out.bth.dest_qp = in.deth.src_qp;
    out.bth.psn = psn_++ & 0xffffff;
    out.deth.q_key = m::gsi_qkey;
    out.deth.src_qp = 1;
    out.payload.assign(req, req + m::bytes);
    std::byte* resp = out.payload.data();
    // No RMPP, SM_Key 0 (AttributeOffset set below); the ComponentMask and the record stay
    // the request's, answered in place.
    std::memset(resp + m::rmpp, 0, m::component_mask - m::rmpp);

    const std::uint8_t method = get8(req + m::method);
    const std::uint16_t attr = get16(req + m::attribute_id);
    const std::uint64_t mask = get64(req + m::component_mask);
    std::uint16_t status = 0;
    std::size_t record = 0;
    if (get8(req + m::base_version) != 1 || get8(req + m::class_version) != m::sa_class_version) {
        status = m::status_bad_version;
    } else if (method != m::get && method != m::set && method != m::remove && method != m::get_table) {
        status = m::status_unsupported_method;
    } else if (attr == m::attr_class_port_info && method == m::get) {
        std::memset(resp + m::data, 0, m::bytes - m::data);
        class_port_info(resp + m::data);
        record = 72;
    } else if (attr == m::attr_mc_member_record && method != m::get_table) {
        status = mc_member(method, mask, resp + m::data, in.net.slid);
        record = mcr::bytes;
    } else if (attr == m::attr_path_record && method == m::get) {
        status = path_record(mask, resp + m::data, in.net.slid);
        record = pr::bytes;
    } else {
        status = m::status_unsupported_method_attr;
    }
    if (status != 0) {
        ++counters_.errors;
        if (record == 0) std::memset(resp + m::data, 0, m::bytes - m::data);
    }
    // Get and Set are answered with GetResp, the others with their own response method.
    put8(resp + m::method, method == m::get || method == m::set ? m::get_resp : method | 0x80);
    put16(resp + m::status, status);
    put16(resp + m::attribute_offset, static_cast<std::uint16_t>((record + 7) / 8));
    return true;
}

// IBA 13.4.8.1 with the SA's CapabilityMask (15.2.1.1): bit 9 IsUDMulticastSupported;
// CapabilityMask2 bit 12 IsSendOnlyFullMemberSupported (Linux's ib_sa.h
// IB_SA_CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT) above RespTimeValue (5 bits).
void subnet_admin::class_port_info(std::byte* rec) {
    put8(rec + 0, 1);                    // BaseVersion
    put8(rec + 1, sa_mad::sa_class_version);  // ClassVersion
    put16(rec + 2, 1u << 9);
    put32(rec + 4, (1u << 12) << 5 | kPacketLife);
}

void subnet_admin::write_group(const gid& mgid, const group& g, std::byte* rec) {
    write_gid(rec + mcr::mgid, mgid);
    put32(rec + mcr::qkey, g.qkey);
    put16(rec + mcr::mlid, g.mlid);
    put8(rec + mcr::mtu, 2u << 6 | g.mtu);  // selectors: exactly
    put8(rec + mcr::tclass, g.tclass);
    put16(rec + mcr::pkey, g.pkey);
    put8(rec + mcr::rate, 2u << 6 | g.rate);
    put8(rec + mcr::life, 2u << 6 | g.life);
    put32(rec + mcr::sl_flow_hop, std::uint32_t{g.sl} << 28 | g.flow_label << 8 | g.hop_limit);
}

std::uint16_t subnet_admin::mc_member(std::uint8_t method, std::uint64_t mask, std::byte* rec, std::uint16_t slid) {
    namespace m = sa_mad;
    gid mgid = read_gid(rec + mcr::mgid);
    const gid port = read_gid(rec + mcr::port_gid);
    const std::uint8_t join = get8(rec + mcr::scope_join) & kJoinStates;
    const bool given_mgid = (mask & mcr::c_mgid) && mgid != gid{};
    if (given_mgid && mgid[0] != 0xff) return m::err_req_invalid;  // not a multicast GID
    if (mask & mcr::c_port_gid) lids_[port] = slid;

    if (method == m::get) {
        const auto it = given_mgid ? groups_.find(mgid) : groups_.end();
        if (it == groups_.end()) return m::err_no_records;
        write_group(it->first, it->second, rec);
        const auto mem = it->second.members.find(port);
        put8(rec + mcr::scope_join, it->second.scope << 4 | (mem == it->second.members.end() ? 0 : mem->second));
        return 0;
    }
    if (!(mask & mcr::c_port_gid) || !(mask & mcr::c_join)) return m::err_req_insufficient_components;
    if (join == 0) return m::err_req_invalid;  // a JoinState that joins (or leaves) nothing

    if (method == m::remove) {
        const auto it = given_mgid ? groups_.find(mgid) : groups_.end();
        if (it == groups_.end()) return m::err_req_invalid;
        const auto mem = it->second.members.find(port);
        if (mem == it->second.members.end() || (mem->second & join) == 0) return m::err_req_invalid;
        write_group(it->first, it->second, rec);
        put8(rec + mcr::scope_join, it->second.scope << 4 | (mem->second & join));
        mem->second &= static_cast<std::uint8_t>(~join);
        if (mem->second == 0) it->second.members.erase(mem);
        if (it->second.members.empty() && !it->second.permanent) groups_.erase(it);
        return 0;
    }

    // Set: join, making the group if it is not there.
    auto it = given_mgid ? groups_.find(mgid) : groups_.end();
    if (it == groups_.end()) {
        if ((mask & mcr::create) != mcr::create) return m::err_req_insufficient_components;
        if (!(join & kFullMember)) return m::err_req_invalid;  // only a full member creates (IBA 15.4.2)
        if ((mask & mcr::c_mlid) && get16(rec + mcr::mlid) != 0) return m::err_req_invalid;  // MLIDs are the SA's
        group g;
        const auto mtu = resolve(mask, mcr::c_mtu_sel, mcr::c_mtu, get8(rec + mcr::mtu), kMaxMtu, offer_mtu);
        const auto rate = resolve(mask, mcr::c_rate_sel, mcr::c_rate, get8(rec + mcr::rate), kMaxRate, offer_rate);
        const auto life = resolve(mask, mcr::c_life_sel, mcr::c_life, get8(rec + mcr::life), kPacketLife, offer_life);
        if (!mtu || !rate || !life) return m::err_req_invalid;
        if (next_mlid_ > kLastMlid) return m::err_no_resources;
        g.mtu = *mtu;
        g.rate = *rate;
        g.life = *life;
        g.qkey = get32(rec + mcr::qkey);
        g.pkey = get16(rec + mcr::pkey);
        g.tclass = get8(rec + mcr::tclass);
        const std::uint32_t sfh = get32(rec + mcr::sl_flow_hop);
        g.sl = static_cast<std::uint8_t>(sfh >> 28);
        g.flow_label = sfh >> 8 & 0xfffff;
        g.hop_limit = (mask & mcr::c_hop) ? static_cast<std::uint8_t>(sfh) : 0;
        if (!given_mgid) {
            // An MGID of the SA's (IBA 15.4.2: the SA assigns one when the request has none):
            // ff12:a01b:<P_Key>:: with a number of its own, link-local unless a scope is given.
            mgid = {0xff, 0x12, 0xa0, 0x1b};
            mgid[4] = static_cast<std::uint8_t>(g.pkey >> 8);
            mgid[5] = static_cast<std::uint8_t>(g.pkey);
            put32(reinterpret_cast<std::byte*>(mgid.data()) + 12, next_mgid_++);
        }
        if (mask & mcr::c_scope) mgid[1] = static_cast<std::uint8_t>(0x10 | (get8(rec + mcr::scope_join) >> 4));
        g.scope = mgid[1] & 0xf;
        g.mlid = next_mlid_++;
        it = groups_.emplace(mgid, g).first;
    } else {
        // Joining a group: what the request gives must be what the group has.
        const group& g = it->second;
        const std::uint32_t sfh = get32(rec + mcr::sl_flow_hop);
        const auto with_sel = [&](std::uint64_t c_sel, std::uint64_t c_val, std::size_t off, std::uint8_t have,
                                  auto rank) {
            if (!(mask & c_val)) return true;
            const std::uint8_t b = get8(rec + off);
            return satisfies((mask & c_sel) ? b >> 6 : 2, b & 0x3f, have, rank);
        };
        if (((mask & mcr::c_qkey) && get32(rec + mcr::qkey) != g.qkey) ||
            ((mask & mcr::c_mlid) && get16(rec + mcr::mlid) != g.mlid) ||
            ((mask & mcr::c_pkey) && (get16(rec + mcr::pkey) & 0x7fff) != (g.pkey & 0x7fff)) ||
            ((mask & mcr::c_tclass) && get8(rec + mcr::tclass) != g.tclass) ||
            ((mask & mcr::c_sl) && (sfh >> 28) != g.sl) || ((mask & mcr::c_flow) && (sfh >> 8 & 0xfffff) != g.flow_label) ||
            ((mask & mcr::c_hop) && (sfh & 0xff) != g.hop_limit) ||
            !with_sel(mcr::c_mtu_sel, mcr::c_mtu, mcr::mtu, g.mtu, same) ||
            !with_sel(mcr::c_rate_sel, mcr::c_rate, mcr::rate, g.rate, rate_speed) ||
            !with_sel(mcr::c_life_sel, mcr::c_life, mcr::life, g.life, same)) {
            return m::err_req_invalid;
        }
    }
    std::uint8_t& state = it->second.members[port];
    state |= join;
    write_group(it->first, it->second, rec);
    put8(rec + mcr::scope_join, it->second.scope << 4 | state);
    put8(rec + mcr::proxy, 0);
    return 0;
}

std::uint16_t subnet_admin::path_record(std::uint64_t mask, std::byte* rec, std::uint16_t slid) {
    namespace m = sa_mad;
    const auto gid_of = [&](std::uint16_t lid) -> std::optional<gid> {
        for (const auto& [g, l] : lids_) {
            if (l == lid) return g;
        }
        return std::nullopt;
    };
    // The source: SGID, SLID, or else the port that asks.
    std::optional<gid> sgid;
    if (mask & pr::c_sgid) {
        sgid = read_gid(rec + pr::sgid);
        lids_[*sgid] = slid;
    } else {
        sgid = gid_of((mask & pr::c_slid) ? get16(rec + pr::slid) : slid);
    }
    std::optional<gid> dgid;
    if (mask & pr::c_dgid) {
        dgid = read_gid(rec + pr::dgid);
    } else if (mask & pr::c_dlid) {
        dgid = gid_of(get16(rec + pr::dlid));
    } else {
        return m::err_req_insufficient_components;
    }
    if (!sgid || !dgid) return m::err_no_records;
    const auto src = lids_.find(*sgid), dst = lids_.find(*dgid);
    if (src == lids_.end() || dst == lids_.end()) return m::err_no_records;
    if ((mask & pr::c_dlid) && get16(rec + pr::dlid) != dst->second) return m::err_no_records;
    if ((mask & pr::c_slid) && get16(rec + pr::slid) != src->second) return m::err_no_records;
    // Every port is a member of the default partition only.
    const std::uint16_t pkey = (mask & pr::c_pkey) ? get16(rec + pr::pkey) : 0xffff;
    if ((pkey & 0x7fff) != 0x7fff) return m::err_no_records;
    if ((mask & pr::c_raw) && (get8(rec + pr::flow_hop) & 0x80)) return m::err_no_records;  // raw packets: no
    const auto mtu = resolve(mask, pr::c_mtu_sel, pr::c_mtu, get8(rec + pr::mtu), kMaxMtu, offer_mtu);
    const auto rate = resolve(mask, pr::c_rate_sel, pr::c_rate, get8(rec + pr::rate), kMaxRate, offer_rate);
    const auto life = resolve(mask, pr::c_life_sel, pr::c_life, get8(rec + pr::life), kPacketLife, offer_life);
    if (!mtu || !rate || !life) return m::err_no_records;

    const std::uint32_t fh = get32(rec + pr::flow_hop);
    const std::uint8_t tclass = (mask & pr::c_tclass) ? get8(rec + pr::tclass) : 0;
    const std::uint16_t sl = (mask & pr::c_sl) ? get16(rec + pr::qos_sl) & 0xf : 0;
    std::memset(rec + pr::dgid, 0, pr::bytes - pr::dgid);  // the ServiceID stays as asked
    write_gid(rec + pr::dgid, *dgid);
    write_gid(rec + pr::sgid, *sgid);
    put16(rec + pr::dlid, dst->second);
    put16(rec + pr::slid, src->second);
    // Within one subnet: HopLimit 0, so no GRH (IBA 8.3.1); the flow label as asked.
    put32(rec + pr::flow_hop, ((mask & pr::c_flow) ? fh & 0x0fffff00 : 0) | ((mask & pr::c_hop) ? fh & 0xff : 0));
    put8(rec + pr::tclass, tclass);
    put8(rec + pr::reversible_numb, 0x80);  // reversible
    put16(rec + pr::pkey, pkey);
    put16(rec + pr::qos_sl, sl);
    put8(rec + pr::mtu, 2u << 6 | *mtu);
    put8(rec + pr::rate, 2u << 6 | *rate);
    put8(rec + pr::life, 2u << 6 | *life);
    return 0;
}

}  // namespace cxv::sim::link
