// The model's firmware: executes commands as the PRM says a ConnectX does, with the PRM's
// status values and a distinct syndrome per cause (sim/syndromes.h).
//
// It sees host memory only through the IOMMU, and the driver only through the command
// interface (cmd_engine). The rest of the function belongs to the device (sim/device.h),
// which gives the firmware its parts at construction: the object tables
// (sim/objects/tables.h) the commands fill, the event queues (sim/eqs.h) the EQ
// commands create, the port (sim/device_port.h) the port registers and vport queries
// read and set, and the transport engine (sim/transport/engine.h), which the QP commands
// call at a few named points (a QP created, modified, destroyed; reset). No packet and
// no doorbell passes through the firmware.
//
// The firmware itself keeps the dispatch (which unit handles an opcode, in which HCA
// state), the HCA's life cycle (ENABLE/DISABLE_HCA, ISSI, INIT/TEARDOWN_HCA; fw_hca.cc)
// and the state every unit shares. The commands are the units', each given by
// reference exactly the parts it works on:
//
//   firmware ── dispatch (firmware.cc), HCA life cycle (fw_hca.cc)
//    ├─ hca_caps          fw_caps      QUERY/SET_HCA_CAP; the current cmd_hca_cap
//    ├─ firmware_pages    fw_pages     QUERY/MANAGE_PAGES; firmware memory (ICM slots)
//    ├─ access_registers  fw_reg       ACCESS_REG: PAOS, PTYS, PMTU, PPCNT, ...   → port
//    ├─ eq_commands       fw_eq        UAR, EQ                                    → EQs
//    ├─ mkey_commands     fw_mkey      PD, MKEY, UMEM
//    ├─ cq_commands       fw_cq        CQ                                         → EQs
//    ├─ srq_commands      fw_srq/xrc   SRQ, XRCD, XRC SRQ, RMP, ARM_RQ
//    ├─ counter_commands  fw_counters  Q counters, vport counters                → port
//    ├─ qp_commands       fw_qp        QP and its transitions                     → engine
//    ├─ vport_commands    fw_vport/roce  vport queries, MAD_IFC, RoCE addresses  → port
//    ├─ eth_commands      fw_eth       transport domain, TIS, SQ, RQ, RQT, TIR
//    └─ flow_commands     fw_flow      NIC receive flow tables, groups, entries, counters
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "hw/opcodes.h"
#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/eqs.h"
#include "sim/firmware/command.h"
#include "sim/firmware/fw_caps.h"
#include "sim/firmware/fw_counters.h"
#include "sim/firmware/fw_cq.h"
#include "sim/firmware/fw_eq.h"
#include "sim/firmware/fw_eth.h"
#include "sim/firmware/fw_flow.h"
#include "sim/firmware/fw_mkey.h"
#include "sim/firmware/fw_pages.h"
#include "sim/firmware/fw_qp.h"
#include "sim/firmware/fw_reg.h"
#include "sim/firmware/fw_srq.h"
#include "sim/firmware/fw_vport.h"
#include "sim/objects/tables.h"
#include "sim/pci/bar.h"
#include "sim/pci/iommu.h"
#include "sim/pci/msix.h"
#include "sim/trace.h"
#include "sim/transport/engine.h"

namespace cxv::sim {

class firmware {
public:
    firmware(const device_config& cfg, const bar0& bar, iommu& mmu, const msix_table& msix, trace& tr,
             object_tables& tables, event_queues& eqs, device_port& port, transport_engine& engine);
    firmware(const firmware&) = delete;
    firmware& operator=(const firmware&) = delete;

    // Executes one command. Thread: the model thread only.
    cmd_reply execute(cmd_ctx& c);

    // The driver wrote nic_interface = DISABLED after TEARDOWN_HCA(PREPARE_FAST_TEARDOWN):
    // the teardown completes. False when no fast teardown was prepared.
    bool finish_fast_teardown();

    // A UMR rewrote memory key `mk`: its copy in firmware memory follows.
    void mkey_changed(const mkey_object& mk) { mkeys_.write_back(mk); }

    // Device reset (FLR / VFIO_DEVICE_RESET): the firmware's state, every object (the
    // EQs and the engine's state with them) and the port back to power-on.
    void reset();

    static constexpr unsigned gid_table_size_code = hca_caps::gid_table_size_code;
    static constexpr std::uint32_t gid_table_entries = hca_caps::gid_table_entries;
    hca_state state() const noexcept { return state_; }
    std::size_t pages_owned() const noexcept { return icm_.owned(); }
    const firmware_pages& pages() const noexcept { return icm_; }

private:
    using handler = std::function<cmd_reply(cmd_ctx&)>;
    // Adds `op` to the dispatch table: `unit`'s handler `h` executes it.
    template <typename Unit>
    void route(hw::cmd_opcode op, Unit& unit, cmd_reply (Unit::*h)(cmd_ctx&));
    cmd_reply check_state(hw::cmd_opcode op) const noexcept;

    // fw_hca.cc: the HCA's life cycle.
    cmd_reply enable_hca(cmd_ctx& c);
    cmd_reply disable_hca(cmd_ctx& c);
    cmd_reply query_issi(cmd_ctx& c);
    cmd_reply set_issi(cmd_ctx& c);
    cmd_reply init_hca(cmd_ctx& c);
    cmd_reply teardown_hca(cmd_ctx& c);
    cmd_reply set_driver_version(cmd_ctx& c);
    cmd_reply query_adapter(cmd_ctx& c);
    // Teardown, DISABLE_HCA and reset: every object goes, and its firmware memory.
    void release_all_objects();

    const device_config& cfg_;
    device_port& port_;
    object_tables& tables_;  // its generation: bumped by every command (eth_tables)

    hca_state state_ = hca_state::disabled;
    std::uint16_t current_issi_ = 0;
    bool fast_teardown_prepared_ = false;
    std::array<std::uint8_t, 64> driver_version_{};

    hca_caps caps_;
    firmware_pages icm_;
    access_registers regs_;
    eq_commands eqs_;
    mkey_commands mkeys_;
    cq_commands cqs_;
    srq_commands srqs_;
    counter_commands counters_;
    qp_commands qps_;
    vport_commands vports_;
    eth_commands eth_;
    flow_commands flows_;
    std::map<hw::cmd_opcode, handler> handlers_;
};

}  // namespace cxv::sim
