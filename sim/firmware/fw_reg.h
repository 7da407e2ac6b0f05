// ACCESS_REG and the registers behind it (PRM "Access Registers"): the port's registers
// (PAOS, PTYS, PMTU, PMLP, PMAOS, PPCNT, PCMR, PCAM), the module's and management's (MCAM),
// HOST_ENDIANNESS and NODE_DESC. The port's own state and counters are the device's
// (sim/device_port.h); the registers keep what they add to it: event enables, the
// module's admin state, PTYS admin masks, the admin MTU and the PPCNT clear points.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/firmware/command.h"
#include "sim/transport/port_stats.h"

namespace cxv::sim {

// What the registers keep; back to these values on reset.
struct register_state {
    bool host_endianness_set = false;
    bool host_big_endian = false;
    std::uint32_t admin_mtu = 0;       // PMTU admin_mtu; 0: the port's maximum
    std::uint8_t paos_e = 0;           // PAOS e: 0 no events, 1 events, 2 a single event
    std::uint8_t pmaos_admin = 1;      // PMAOS admin_status: the module is enabled
    std::uint8_t pmaos_e = 0;
    bool pcmr_fcs_chk = true;          // PCMR fcs_chk: frames with a wrong FCS are dropped
    bool pcap_set = false;             // PCAP written: port_capability_mask[0] below
    std::uint32_t pcap_mask = 0;
    std::array<std::byte, 64> node_description{};  // NODE_DESC as last written; empty: the default
    std::uint32_t ptys_eth_admin = 0;  // 0: every speed the port can do
    std::uint16_t ptys_ib_proto_admin = 0;
    std::uint16_t ptys_ib_width_admin = 0;
    // PPCNT: each group reports the port's counts since its last clr, so one group's
    // clear leaves the others (and QUERY_VPORT_COUNTER) alone. Per priority: one each.
    port_stats ppcnt_802_3{}, ppcnt_2863{}, ppcnt_2819{}, ppcnt_phys{}, ppcnt_ib{};
    std::array<port_stats, 8> ppcnt_prio{};
    std::chrono::steady_clock::time_point phys_cleared = std::chrono::steady_clock::now();
};

class access_registers {
public:
    access_registers(const device_config& cfg, device_port& port) : cfg_(cfg), port_(port) {}

    cmd_reply access_reg(cmd_ctx& c);

    // PMTU admin_mtu as a driver set it; 0: the port's maximum.
    std::uint32_t admin_mtu() const noexcept { return regs_.admin_mtu; }
    // PortInfo:CapabilityMask (IBA 14.2.5.6) as the driver set it with PCAP, else as a
    // ConnectX-5/6 port without an SM reports it: traps, SL mapping, system image GUID,
    // extended speeds, CapabilityMask2, CM, vendor class, capability-mask notices, client
    // reregistration, other local changes, multicast P_Key trap suppression.
    std::uint32_t port_capability_mask() const noexcept { return regs_.pcap_set ? regs_.pcap_mask : 0x2651e848; }
    // The node description (64 bytes): NODE_DESC as a driver last wrote it, else the
    // model's own. The SMA's NodeDescription answers the same (MAD_IFC, fw_vport.cc).
    void node_description(std::byte* out) const;
    // Power-on values.
    void reset() { regs_ = {}; }

private:
    struct reg_access;
    struct reg_entry;
    static const reg_entry* find_register(std::uint16_t id) noexcept;
    cmd_reply reg_host_endianness(reg_access& r);
    cmd_reply reg_paos(reg_access& r);
    cmd_reply reg_ptys(reg_access& r);
    cmd_reply reg_pmtu(reg_access& r);
    cmd_reply reg_pmlp(reg_access& r);
    cmd_reply reg_pmaos(reg_access& r);
    cmd_reply reg_ppcnt(reg_access& r);
    cmd_reply reg_pcmr(reg_access& r);
    cmd_reply reg_pcap(reg_access& r);
    cmd_reply reg_pcam(reg_access& r);
    cmd_reply reg_mcam(reg_access& r);
    cmd_reply reg_node_desc(reg_access& r);

    const device_config& cfg_;
    device_port& port_;
    register_state regs_{};
};

}  // namespace cxv::sim
