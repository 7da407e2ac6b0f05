// ACCESS_REG and the registers behind it (PRM "Access Registers"): one table entry per
// register with its size, whether local_port indexes it and whether it may be written,
// and one handler that applies a write and fills the register as it then stands. The
// output carries the register in both directions: Linux's mlx5_core_access_reg() copies
// register_data back after a write as after a read. The port's state and counters are
// the device's (sim/device_port.h).
#include <array>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "hw/ifc.h"
#include "hw/registers.h"
#include "sim/firmware/fw_reg.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

using hw::reg_id;

struct access_registers::reg_access {
    const std::byte* in;  // the input's register_data
    std::byte* out;       // the output's register_data, zeroed
    bool write;
};

struct access_registers::reg_entry {
    reg_id id;
    std::size_t bytes;
    bool port_indexed;  // local_port (bits 0x08-0x0f, as in every port register) must be 1
    bool writable;      // PRM access RW; the others refuse writes
    cmd_reply (access_registers::*handle)(reg_access&);
};

namespace {


constexpr std::uint32_t u(auto e) { return static_cast<std::uint32_t>(e); }

// The one speed the model's port has: 100GBASE-CR4 (PTYS eth_proto bit 20, Linux
// MLX5E_100GBASE_CR4) on Ethernet; 4x EDR on InfiniBand (ib_proto bit 5 = EDR, Linux's
// IB_SPEED_EDR; ib_link_width bit 2 = 4x, Linux's MLX5_PTYS_WIDTH_4X). data_rate_oper
// counts 100 Mb/s.
constexpr std::uint32_t eth_100gbase_cr4 = 1u << 20;
constexpr std::uint16_t ib_proto_edr = 1u << 5;
constexpr std::uint16_t ib_width_4x = 1u << 2;
constexpr std::uint32_t data_rate_100g = 1000;
// PTYS proto_mask bits.
constexpr std::uint32_t proto_ib = 1u << 0, proto_eth = 1u << 2;
constexpr unsigned port_lanes = 4;  // PMLP width: a 4-lane port on module 0

// Sets bit k of a PRM capability mask of `bytes` bytes (bit 0 is the last byte's least
// significant bit: PCAM/MCAM number registers from the end of the mask).
void set_mask_bit(std::byte* mask, std::size_t bytes, unsigned k) {
    mask[bytes - 1 - k / 8] |= std::byte{static_cast<unsigned char>(1u << (k % 8))};
}

port_stats since(const port_stats& now, const port_stats& base) {
    port_stats d;
    d.tx_packets = now.tx_packets - base.tx_packets;
    d.tx_bytes = now.tx_bytes - base.tx_bytes;
    d.tx_unicast = now.tx_unicast - base.tx_unicast;
    d.tx_multicast = now.tx_multicast - base.tx_multicast;
    d.tx_discards = now.tx_discards - base.tx_discards;
    d.rx_packets = now.rx_packets - base.rx_packets;
    d.rx_bytes = now.rx_bytes - base.rx_bytes;
    d.rx_unicast = now.rx_unicast - base.rx_unicast;
    d.rx_multicast = now.rx_multicast - base.rx_multicast;
    d.rx_discards = now.rx_discards - base.rx_discards;
    d.rx_errors = now.rx_errors - base.rx_errors;
    d.link_down_events = now.link_down_events - base.link_down_events;
    return d;
}

// A 64-bit PPCNT counter: its _high and _low dwords.
#define CXV_COUNTER(G, name, p, v)                                      \
    do {                                                                \
        const std::uint64_t cxv_v = (v);                                \
        ifc::set<G::name##_high>(p, static_cast<std::uint32_t>(cxv_v >> 32)); \
        ifc::set<G::name##_low>(p, static_cast<std::uint32_t>(cxv_v));  \
    } while (0)

}  // namespace

const access_registers::reg_entry* access_registers::find_register(std::uint16_t id) noexcept {
    // Sizes are the PRM layouts'; access as the PRM gives it, except PMLP, whose lane
    // mapping the model does not let a driver change.
    static constexpr reg_entry table[] = {
        {reg_id::PCAP, ifc::pcap_reg::size_bytes, true, true, &access_registers::reg_pcap},
        {reg_id::PMLP, ifc::pmlp_reg::size_bytes, true, false, &access_registers::reg_pmlp},
        {reg_id::PMTU, ifc::pmtu_reg::size_bytes, true, true, &access_registers::reg_pmtu},
        {reg_id::PTYS, ifc::ptys_reg::size_bytes, true, true, &access_registers::reg_ptys},
        {reg_id::PAOS, ifc::paos_reg::size_bytes, true, true, &access_registers::reg_paos},
        // A PPCNT write is how clr clears a group without reading it.
        {reg_id::PPCNT, ifc::ppcnt_reg::size_bytes, true, true, &access_registers::reg_ppcnt},
        {reg_id::PMAOS, ifc::pmaos_reg::size_bytes, false, true, &access_registers::reg_pmaos},
        {reg_id::PCMR, ifc::pcmr_reg::size_bytes, true, true, &access_registers::reg_pcmr},
        {reg_id::PCAM, ifc::pcam_reg::size_bytes, false, false, &access_registers::reg_pcam},
        {reg_id::HOST_ENDIANNESS, ifc::register_host_endianness::size_bytes, false, true,
         &access_registers::reg_host_endianness},
        {reg_id::MCAM, ifc::mcam_reg::size_bytes, false, false, &access_registers::reg_mcam},
        {reg_id::NODE_DESC, ifc::set_node_in::size_bytes, false, true, &access_registers::reg_node_desc},
    };
    for (const reg_entry& e : table) {
        if (u(e.id) == id) return &e;
    }
    return nullptr;
}

cmd_reply access_registers::access_reg(cmd_ctx& c) {
    using hw::access_reg_op_mod;
    if (c.op_mod != u(access_reg_op_mod::WRITE) && c.op_mod != u(access_reg_op_mod::READ)) {
        return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    const bool write = c.op_mod == u(access_reg_op_mod::WRITE);
    const reg_entry* reg = find_register(ifc::get<ifc::access_register_in::register_id>(c.in.data()));
    if (reg == nullptr) return bad_param(cmd_syndrome::BAD_REGISTER);
    // The register travels whole in both directions: in the input, and back in the output.
    if (c.in.size() - ifc::access_register_in::size_bytes < reg->bytes) {
        return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::INPUT_TOO_SHORT);
    }
    if (c.out.size() - ifc::access_register_out::size_bytes < reg->bytes) {
        return fail(cmd_status::BAD_OUTPUT_LEN, cmd_syndrome::OUTPUT_TOO_SHORT);
    }
    if (write && !reg->writable) return bad_param(cmd_syndrome::READ_ONLY_REGISTER);
    reg_access r{ifc::at<ifc::access_register_in::register_data>(c.in.data()),
                 ifc::at<ifc::access_register_out::register_data>(c.out.data()), write};
    if (reg->port_indexed) {
        using p = ifc::paos_reg;  // local_port sits at the same bits in every port register
        if (ifc::get<p::local_port>(r.in) != 1) return bad_param(cmd_syndrome::BAD_PORT);
        ifc::set<p::local_port>(r.out, 1);
    }
    return (this->*reg->handle)(r);
}

cmd_reply access_registers::reg_host_endianness(reg_access& r) {
    using R = ifc::register_host_endianness;
    if (r.write) {
        regs_.host_endianness_set = true;
        regs_.host_big_endian = ifc::get<R::he>(r.in) != 0;
    }
    ifc::set<R::he>(r.out, regs_.host_big_endian ? 1 : 0);
    return ok();
}

// PAOS: admin_status written only with ase, e only with ee (PRM PAOS); both checked
// before either is applied. The port's state is the device's (sim/device_port.h):
// oper_status may still be down right after an admin up while the link trains.
cmd_reply access_registers::reg_paos(reg_access& r) {
    using R = ifc::paos_reg;
    if (r.write) {
        const bool ase = ifc::get<R::ase>(r.in) != 0, ee = ifc::get<R::ee>(r.in) != 0;
        const auto admin = ifc::get<R::admin_status>(r.in);
        const auto e = ifc::get<R::e>(r.in);
        if (ase && admin != u(hw::port_status::UP) && admin != u(hw::port_status::DOWN)) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if (ee && e > 2) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (ee) regs_.paos_e = static_cast<std::uint8_t>(e);
        if (ase) port_.set_admin(admin == u(hw::port_status::UP));
    }
    ifc::set<R::admin_status>(r.out, port_.admin_status());
    ifc::set<R::oper_status>(r.out, port_.oper_status());
    ifc::set<R::e>(r.out, regs_.paos_e);
    return ok();
}

// PTYS: the port's protocol only (proto_mask); a write sets the admin speeds, which
// must be some of the capability. No autonegotiation control (an_disable_cap 0), no
// extended Ethernet speeds (PCAM ptys_extended_ethernet 0): those fields are ignored.
cmd_reply access_registers::reg_ptys(reg_access& r) {
    using R = ifc::ptys_reg;
    const bool eth = cfg_.port == port_type::ETHERNET;
    const std::uint32_t mine = eth ? proto_eth : proto_ib;
    if (r.write) {
        if ((ifc::get<R::proto_mask>(r.in) & mine) == 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (eth) {
            const auto admin = ifc::get<R::eth_proto_admin>(r.in);
            if (admin == 0 || (admin & ~eth_100gbase_cr4) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
            regs_.ptys_eth_admin = admin;
        } else {
            const auto proto = ifc::get<R::ib_proto_admin>(r.in);
            const auto width = ifc::get<R::ib_link_width_admin>(r.in);
            if (proto == 0 || (proto & ~ib_proto_edr) != 0 || width == 0 || (width & ~ib_width_4x) != 0) {
                return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
            regs_.ptys_ib_proto_admin = static_cast<std::uint16_t>(proto);
            regs_.ptys_ib_width_admin = static_cast<std::uint16_t>(width);
        }
    }
    const bool up = port_.oper_status() == u(hw::port_status::UP);
    ifc::set<R::proto_mask>(r.out, mine);
    ifc::set<R::data_rate_oper>(r.out, up ? data_rate_100g : 0);
    if (eth) {
        const std::uint32_t admin = regs_.ptys_eth_admin ? regs_.ptys_eth_admin : eth_100gbase_cr4;
        ifc::set<R::eth_proto_capability>(r.out, eth_100gbase_cr4);
        ifc::set<R::eth_proto_admin>(r.out, admin);
        ifc::set<R::eth_proto_oper>(r.out, up ? admin : 0);
    } else {
        const std::uint16_t proto = regs_.ptys_ib_proto_admin ? regs_.ptys_ib_proto_admin : ib_proto_edr;
        const std::uint16_t width = regs_.ptys_ib_width_admin ? regs_.ptys_ib_width_admin : ib_width_4x;
        ifc::set<R::ib_link_width_capability>(r.out, ib_width_4x);
        ifc::set<R::ib_proto_capability>(r.out, ib_proto_edr);
        ifc::set<R::ib_link_width_admin>(r.out, width);
        ifc::set<R::ib_proto_admin>(r.out, proto);
        ifc::set<R::ib_link_width_oper>(r.out, up ? width : 0);
        ifc::set<R::ib_proto_oper>(r.out, up ? proto : 0);
    }
    return ok();
}

// PMTU: MTUs in bytes, headers included; admin_mtu between 1 and max_mtu.
cmd_reply access_registers::reg_pmtu(reg_access& r) {
    using R = ifc::pmtu_reg;
    const std::uint32_t max_mtu = cfg_.port == port_type::ETHERNET ? 9216 : 4096;
    if (r.write) {
        const auto mtu = ifc::get<R::admin_mtu>(r.in);
        if (mtu == 0 || mtu > max_mtu) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
        regs_.admin_mtu = mtu;
    }
    ifc::set<R::max_mtu>(r.out, max_mtu);
    ifc::set<R::admin_mtu>(r.out, regs_.admin_mtu ? regs_.admin_mtu : max_mtu);
    ifc::set<R::oper_mtu>(r.out, regs_.admin_mtu ? regs_.admin_mtu : max_mtu);
    return ok();
}

// PMLP: port 1 is lanes 0-3 of module 0, lane for lane.
cmd_reply access_registers::reg_pmlp(reg_access& r) {
    using R = ifc::pmlp_reg;
    using L = ifc::lane_2_module_mapping;
    ifc::set<R::width>(r.out, port_lanes);
    std::byte* lane = r.out + R::lane0_module_mapping::bit_offset / 8;
    for (unsigned i = 0; i < port_lanes; ++i, lane += L::size_bytes) {
        ifc::set<L::module>(lane, 0);
        ifc::set<L::tx_lane>(lane, i);
        ifc::set<L::rx_lane>(lane, i);
    }
    return ok();
}

// PMAOS: the one module (0), always plugged; admin_status (with ase) 1 enabled, 2
// disabled, 3 enabled once; e (with ee) as PAOS's.
cmd_reply access_registers::reg_pmaos(reg_access& r) {
    using R = ifc::pmaos_reg;
    using hw::module_admin_status;
    if (ifc::get<R::module>(r.in) != 0) return bad_param(cmd_syndrome::BAD_PARAMETER);
    if (r.write) {
        const bool ase = ifc::get<R::ase>(r.in) != 0, ee = ifc::get<R::ee>(r.in) != 0;
        const auto admin = ifc::get<R::admin_status>(r.in);
        const auto e = ifc::get<R::e>(r.in);
        if (ase && (admin < u(module_admin_status::ENABLED) || admin > u(module_admin_status::ENABLED_ONCE))) {
            return bad_param(cmd_syndrome::BAD_PARAMETER);
        }
        if (ee && e > 2) return bad_param(cmd_syndrome::BAD_PARAMETER);
        if (ase) regs_.pmaos_admin = static_cast<std::uint8_t>(admin);
        if (ee) regs_.pmaos_e = static_cast<std::uint8_t>(e);
    }
    const bool disabled = regs_.pmaos_admin == u(module_admin_status::DISABLED);
    ifc::set<R::admin_status>(r.out, regs_.pmaos_admin);
    ifc::set<R::oper_status>(r.out, u(disabled ? hw::module_oper_status::PLUGGED_DISABLED
                                               : hw::module_oper_status::PLUGGED_ENABLED));
    ifc::set<R::e>(r.out, regs_.pmaos_e);
    return ok();
}

// PPCNT: the groups of a RoCE/IB port (IEEE 802.3, RFC 2863, RFC 2819, per priority,
// physical layer, InfiniBand port) without pause frames, FEC errors or priorities (all
// traffic is untagged: priority 0). A write with clr clears the group and returns it
// cleared; a read with clr returns the counts, then clears them.
cmd_reply access_registers::reg_ppcnt(reg_access& r) {
    using R = ifc::ppcnt_reg;
    using hw::ppcnt_group;
    const auto grp = ifc::get<R::grp>(r.in);
    const auto prio = ifc::get<R::prio_tc>(r.in);
    const bool clr = ifc::get<R::clr>(r.in) != 0;
    port_stats* base = nullptr;
    switch (static_cast<ppcnt_group>(grp)) {
        case ppcnt_group::IEEE_802_3_COUNTERS_GROUP: base = &regs_.ppcnt_802_3; break;
        case ppcnt_group::RFC_2863_COUNTERS_GROUP: base = &regs_.ppcnt_2863; break;
        case ppcnt_group::RFC_2819_COUNTERS_GROUP: base = &regs_.ppcnt_2819; break;
        case ppcnt_group::PER_PRIORITY_COUNTERS_GROUP: base = &regs_.ppcnt_prio[prio]; break;
        case ppcnt_group::PHYSICAL_LAYER_COUNTERS_GROUP: base = &regs_.ppcnt_phys; break;
        case ppcnt_group::INFINIBAND_PORT_COUNTERS_GROUP: base = &regs_.ppcnt_ib; break;
        default: return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    const auto now = std::chrono::steady_clock::now();
    const auto clear = [&] {
        *base = port_.counters();
        if (base == &regs_.ppcnt_phys) regs_.phys_cleared = now;
    };
    if (r.write && clr) clear();
    ifc::set<R::grp>(r.out, grp);
    ifc::set<R::prio_tc>(r.out, prio);
    const port_stats s = since(port_.counters(), *base);
    std::byte* set = ifc::at<R::counter_set>(r.out);
    switch (static_cast<ppcnt_group>(grp)) {
        case ppcnt_group::IEEE_802_3_COUNTERS_GROUP: {
            using G = ifc::eth_802_3_cntrs_grp_data_layout;
            CXV_COUNTER(G, a_frames_transmitted_ok, set, s.tx_packets);
            CXV_COUNTER(G, a_frames_received_ok, set, s.rx_packets);
            CXV_COUNTER(G, a_frame_check_sequence_errors, set, s.rx_errors);
            CXV_COUNTER(G, a_octets_transmitted_ok, set, s.tx_bytes);
            CXV_COUNTER(G, a_octets_received_ok, set, s.rx_bytes);
            CXV_COUNTER(G, a_multicast_frames_xmitted_ok, set, s.tx_multicast);
            CXV_COUNTER(G, a_multicast_frames_received_ok, set, s.rx_multicast);
            break;
        }
        case ppcnt_group::RFC_2863_COUNTERS_GROUP: {
            using G = ifc::eth_2863_cntrs_grp_data_layout;
            CXV_COUNTER(G, if_in_octets, set, s.rx_bytes);
            CXV_COUNTER(G, if_in_ucast_pkts, set, s.rx_unicast);
            CXV_COUNTER(G, if_in_discards, set, s.rx_discards);
            CXV_COUNTER(G, if_in_errors, set, s.rx_errors);
            CXV_COUNTER(G, if_out_octets, set, s.tx_bytes);
            CXV_COUNTER(G, if_out_ucast_pkts, set, s.tx_unicast);
            CXV_COUNTER(G, if_out_discards, set, s.tx_discards);
            CXV_COUNTER(G, if_in_multicast_pkts, set, s.rx_multicast);
            CXV_COUNTER(G, if_out_multicast_pkts, set, s.tx_multicast);
            break;
        }
        case ppcnt_group::RFC_2819_COUNTERS_GROUP: {
            // RMON's receive statistics; the size histogram and the collision counts are
            // not kept (0), as no frame is damaged in transit on the model's wire.
            using G = ifc::eth_2819_cntrs_grp_data_layout;
            CXV_COUNTER(G, ether_stats_drop_events, set, s.rx_discards);
            CXV_COUNTER(G, ether_stats_octets, set, s.rx_bytes);
            CXV_COUNTER(G, ether_stats_pkts, set, s.rx_packets);
            CXV_COUNTER(G, ether_stats_multicast_pkts, set, s.rx_multicast);
            CXV_COUNTER(G, ether_stats_crc_align_errors, set, s.rx_errors);
            break;
        }
        case ppcnt_group::INFINIBAND_PORT_COUNTERS_GROUP: {
            // IBA 16.1.3.5 PortCounters: each counter stops at its largest value.
            using G = ifc::ib_port_cntrs_grp_data_layout;
            const auto sat = [](std::uint64_t v, unsigned bits) {
                return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, (std::uint64_t{1} << bits) - 1));
            };
            ifc::set<G::link_downed_counter>(set, sat(s.link_down_events, 8));
            ifc::set<G::port_rcv_errors>(set, sat(s.rx_errors, 16));
            ifc::set<G::port_xmit_discards>(set, sat(s.tx_discards, 16));
            break;
        }
        case ppcnt_group::PER_PRIORITY_COUNTERS_GROUP: {
            if (prio != 0) break;  // nothing is sent or received on another priority
            using G = ifc::eth_per_prio_grp_data_layout;
            CXV_COUNTER(G, rx_octets, set, s.rx_bytes);
            CXV_COUNTER(G, rx_frames, set, s.rx_packets);
            CXV_COUNTER(G, tx_octets, set, s.tx_bytes);
            CXV_COUNTER(G, tx_frames, set, s.tx_packets);
            CXV_COUNTER(G, rx_discards, set, s.rx_discards);
            break;
        }
        case ppcnt_group::PHYSICAL_LAYER_COUNTERS_GROUP: {
            // No symbol, FEC or BIP errors on the model's wire; the link's downs count.
            using G = ifc::phys_layer_cntrs;
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - regs_.phys_cleared);
            CXV_COUNTER(G, time_since_last_clear, set, static_cast<std::uint64_t>(ms.count()));
            ifc::set<G::link_down_events>(set, static_cast<std::uint32_t>(s.link_down_events));
            break;
        }
    }
    if (!r.write && clr) clear();
    return ok();
}

// PCAM: bit k of the mask is register 0x5000 + k; the table above is the list. None of
// the enhanced features (extended PTYS speeds, discard and statistical PPCNT groups,
// per-lane counters) is implemented.
// PCMR: FCS checking, which a driver may turn off (Linux's rx-fcs feature: frames with
// their FCS, bad ones too); no entropy control, no timestamp over the CRC. The model's
// wire carries frames without an FCS, so fcs_chk is kept and read back, and changes
// nothing else (a limit: docs/device-model.md).
cmd_reply access_registers::reg_pcmr(reg_access& r) {
    using R = ifc::pcmr_reg;
    if (r.write) regs_.pcmr_fcs_chk = ifc::get<R::fcs_chk>(r.in) != 0;
    ifc::set<R::fcs_cap>(r.out, 1);
    ifc::set<R::fcs_chk>(r.out, regs_.pcmr_fcs_chk ? 1 : 0);
    return ok();
}

// PCAP: the PortInfo:CapabilityMask the port reports (MAD_IFC's PortInfo, the HCA vport
// context's cap_mask1), which Linux's mlx5_ib writes whole; the other three words are
// reserved for later masks and read back 0.
cmd_reply access_registers::reg_pcap(reg_access& r) {
    using R = ifc::pcap_reg;
    if (r.write) {
        regs_.pcap_mask = ifc::get<R::port_capability_mask>(r.in, 0);
        regs_.pcap_set = true;
    }
    ifc::set<R::port_capability_mask>(r.out, 0, port_capability_mask());
    return ok();
}

cmd_reply access_registers::reg_pcam(reg_access& r) {
    using R = ifc::pcam_reg;
    if (ifc::get<R::feature_group>(r.in) != 0 || ifc::get<R::access_reg_group>(r.in) != 0) {
        return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
    std::byte* mask = ifc::at<R::port_access_reg_cap_mask>(r.out);
    for (unsigned k = 0; k < 128; ++k) {
        if (find_register(static_cast<std::uint16_t>(0x5000 + k))) {
            set_mask_bit(mask, ifc::pcam_regs_5000_to_507f::size_bytes, k);
        }
    }
    return ok();
}

// MCAM: access_reg_group g covers registers 0x9000 + 128 g + k (Linux reads groups 0 to
// 2); no management features.
cmd_reply access_registers::reg_mcam(reg_access& r) {
    using R = ifc::mcam_reg;
    const auto group = ifc::get<R::access_reg_group>(r.in);
    if (ifc::get<R::feature_group>(r.in) != 0 || group > 2) return bad_param(cmd_syndrome::BAD_PARAMETER);
    ifc::set<R::access_reg_group>(r.out, group);
    std::byte* mask = ifc::at<R::mng_access_reg_cap_mask>(r.out);
    for (unsigned k = 0; k < 128; ++k) {
        if (find_register(static_cast<std::uint16_t>(0x9000 + 128 * group + k))) {
            set_mask_bit(mask, ifc::mcam_access_reg::size_bytes, k);
        }
    }
    return ok();
}

// NODE_DESC: the node description a driver last wrote, else the model's own ("MT" and the
// PCI device ID in decimal, as ConnectX firmware begins its own). Not a port register.
cmd_reply access_registers::reg_node_desc(reg_access& r) {
    if (r.write) {
        std::memcpy(regs_.node_description.data(), ifc::at<ifc::set_node_in::node_description>(r.in),
                    regs_.node_description.size());
    }
    node_description(ifc::at<ifc::set_node_in::node_description>(r.out));
    return ok();
}

void access_registers::node_description(std::byte* out) const {
    if (regs_.node_description[0] != std::byte{0}) {
        std::memcpy(out, regs_.node_description.data(), regs_.node_description.size());
    } else {
        std::memset(out, 0, regs_.node_description.size());
        std::snprintf(reinterpret_cast<char*>(out), regs_.node_description.size(), "MT%u cxv ConnectX model",
                      static_cast<unsigned>(cfg_.device_id));
    }
}

}  // namespace cxv::sim
