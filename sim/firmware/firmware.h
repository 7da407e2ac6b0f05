// The model's firmware: executes commands as the PRM says a ConnectX does, with the PRM's
// status values and a distinct syndrome per cause (sim/syndromes.h), and owns the
// HCA state and every object the driver creates.
//
// It sees host memory only through the IOMMU, and the driver only through the command
// interface (cmd_engine). The rest of the function belongs to the device (sim/device.h),
// which gives the firmware its parts at construction: the object tables
// (sim/objects/tables.h) the commands fill, the event queues (sim/eqs.h) the EQ
// commands create, the port (sim/device_port.h) the port registers and vport queries
// read and set, and the transport engine (sim/transport/engine.h), which the firmware
// calls at a few named points (a QP created, modified, destroyed; reset). No packet and
// no doorbell passes through the firmware.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "sim/syndromes.h"
#include "hw/cqe.h"
#include "hw/opcodes.h"
#include "sim/pci/bar.h"
#include "sim/device_config.h"
#include "sim/device_port.h"
#include "sim/eqs.h"
#include "sim/faults.h"
#include "sim/firmware/fw_reg.h"
#include "sim/pci/iommu.h"
#include "sim/transport/mkey_translate.h"
#include "sim/pci/msix.h"
#include "sim/objects/objects.h"
#include "sim/objects/pages.h"
#include "sim/objects/tables.h"
#include "sim/transport/engine.h"
#include "sim/transport/port_stats.h"
#include "sim/trace.h"

namespace cxv::sim {

// The outcome of one command: written to the output's status and syndrome.
struct cmd_reply {
    hw::cmd_status status = hw::cmd_status::OK;
    sim::cmd_syndrome syndrome = sim::cmd_syndrome::OK;
};

inline cmd_reply ok() { return {}; }
inline cmd_reply fail(hw::cmd_status s, sim::cmd_syndrome syn) { return {s, syn}; }

// One command as the engine hands it over: the whole input (ilen bytes) and an output
// buffer of at least the command's output layout size (zeroed); only the first olen
// bytes reach the driver.
struct cmd_ctx {
    std::span<const std::byte> in;
    std::span<std::byte> out;
    std::size_t olen;
    hw::cmd_opcode opcode;
    std::uint16_t op_mod;
};

enum class hca_state : std::uint8_t {
    disabled,     // after reset or DISABLE_HCA
    enabled,      // after ENABLE_HCA, before INIT_HCA
    initialized,  // after INIT_HCA
    torn_down,    // after TEARDOWN_HCA, before DISABLE_HCA
};

class firmware {
public:
    firmware(const device_config& cfg, bar0& bar, iommu& mmu, msix_table& msix, trace& tr,
             fault_plan& faults, object_tables& tables, event_queues& eqs, device_port& port,
             transport_engine& engine);
    firmware(const firmware&) = delete;
    firmware& operator=(const firmware&) = delete;

    // Executes one command. Thread: the model thread only.
    cmd_reply execute(cmd_ctx& c);

    // The driver wrote nic_interface = DISABLED after TEARDOWN_HCA(PREPARE_FAST_TEARDOWN):
    // the teardown completes. False when no fast teardown was prepared.
    bool finish_fast_teardown();

    // Device reset (FLR / VFIO_DEVICE_RESET): the firmware's state, every object (the
    // EQs and the engine's state with them) and the port back to power-on.
    void reset();

    // The GID table's size: cmd_hca_cap.gid_table_size's encoding (8 << n entries) and
    // the entries it means, which roce_cap.roce_address_table_size reports too.
    static constexpr unsigned gid_table_size_code = 2;
    static constexpr std::uint32_t gid_table_entries = 8u << gid_table_size_code;
    hca_state state() const noexcept { return state_; }
    std::size_t pages_owned() const noexcept { return pages_.owned(); }

private:
    using handler = cmd_reply (firmware::*)(cmd_ctx&);
    handler lookup(hw::cmd_opcode op) const noexcept;
    cmd_reply check_state(hw::cmd_opcode op) const noexcept;

    // fw_hca.cc
    cmd_reply enable_hca(cmd_ctx& c);
    cmd_reply disable_hca(cmd_ctx& c);
    cmd_reply query_issi(cmd_ctx& c);
    cmd_reply set_issi(cmd_ctx& c);
    cmd_reply query_pages(cmd_ctx& c);
    cmd_reply manage_pages(cmd_ctx& c);
    cmd_reply query_hca_cap(cmd_ctx& c);
    cmd_reply set_hca_cap(cmd_ctx& c);
    cmd_reply init_hca(cmd_ctx& c);
    cmd_reply teardown_hca(cmd_ctx& c);
    cmd_reply set_driver_version(cmd_ctx& c);
    cmd_reply query_adapter(cmd_ctx& c);

    // fw_reg.cc: ACCESS_REG, one handler per register (PRM "Access Registers").
    cmd_reply access_reg(cmd_ctx& c);
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
    cmd_reply reg_pcam(reg_access& r);
    cmd_reply reg_mcam(reg_access& r);

    // fw_caps.cc
    void fill_general_caps(std::byte* cap, bool max) const;
    void fill_roce_caps(std::byte* cap) const;
    void fill_atomic_caps(std::byte* cap, bool max) const;

    // fw_mkey.cc
    cmd_reply create_mkey(cmd_ctx& c);
    cmd_reply destroy_mkey(cmd_ctx& c);
    cmd_reply query_mkey(cmd_ctx& c);
    cmd_reply create_umem(cmd_ctx& c);
    cmd_reply destroy_umem(cmd_ctx& c);

    // fw_cq.cc
    cmd_reply create_cq(cmd_ctx& c);
    cmd_reply destroy_cq(cmd_ctx& c);
    cmd_reply query_cq(cmd_ctx& c);
    cmd_reply modify_cq(cmd_ctx& c);

    // fw_qp.cc
    cmd_reply create_qp(cmd_ctx& c);
    cmd_reply destroy_qp(cmd_ctx& c);
    cmd_reply query_qp(cmd_ctx& c);
    cmd_reply modify_qp(cmd_ctx& c);  // every transition command; c.opcode says which

    // fw_srq.cc
    cmd_reply create_srq(cmd_ctx& c);
    cmd_reply destroy_srq(cmd_ctx& c);
    // CREATE_SRQ's work for all three kinds: `srqc` in CREATE_SRQ's layout, the page list
    // `pas_at` bytes into the input; the number in `*srqn`.
    cmd_reply make_srq(cmd_ctx& c, const std::byte* srqc, std::size_t pas_at, std::uint32_t uid, srq_kind kind,
                       std::uint32_t* srqn);
    cmd_reply remove_srq(std::uint32_t srqn, std::uint32_t uid, srq_kind kind);
    cmd_reply alloc_xrcd(cmd_ctx& c);
    cmd_reply dealloc_xrcd(cmd_ctx& c);
    cmd_reply create_xrc_srq(cmd_ctx& c);
    cmd_reply destroy_xrc_srq(cmd_ctx& c);
    cmd_reply create_rmp(cmd_ctx& c);
    cmd_reply destroy_rmp(cmd_ctx& c);
    cmd_reply query_srq(cmd_ctx& c);
    cmd_reply arm_rq(cmd_ctx& c);

    // fw_vport.cc
    cmd_reply query_vport_state(cmd_ctx& c);
    cmd_reply query_hca_vport_context(cmd_ctx& c);
    cmd_reply query_hca_vport_gid(cmd_ctx& c);
    cmd_reply query_hca_vport_pkey(cmd_ctx& c);
    cmd_reply query_nic_vport_context(cmd_ctx& c);
    cmd_reply modify_nic_vport_context(cmd_ctx& c);
    cmd_reply mad_ifc(cmd_ctx& c);

    // fw_roce.cc: the RoCE address (GID) table of an Ethernet port.
    cmd_reply set_roce_address(cmd_ctx& c);
    cmd_reply query_roce_address(cmd_ctx& c);

    // fw_counters.cc
    cmd_reply alloc_q_counter(cmd_ctx& c);
    cmd_reply dealloc_q_counter(cmd_ctx& c);
    cmd_reply query_q_counter(cmd_ctx& c);
    cmd_reply query_vport_counter(cmd_ctx& c);
    void reset_q_counters();
    // A QP's counter_set_id moves from `from` to `to` (RST2INIT, RTS2RTS, 2RST, destroy).
    void rebind_q_counter(std::uint32_t from, std::uint32_t to);

    // Firmware memory for an object's context: a slot in the pages the driver gave,
    // written through the IOMMU. When the pool runs low the firmware asks for more with
    // a PAGE_REQUEST event; with no slot at all the command fails with NO_RESOURCES.
    std::optional<pages::slot> icm_alloc();
    bool icm_write(pages::slot s, const void* data, std::size_t len);
    bool icm_read(pages::slot s, void* data, std::size_t len);
    void icm_free(pages::slot s);
    // A translation list (MTT entries) kept in firmware memory as a card keeps it, one
    // slot per 32 entries, so that the memory an object's list takes is memory the driver
    // gave. False (nothing kept) when the pages run out or the IOMMU faults.
    bool icm_store_list(const std::vector<std::uint64_t>& entries, std::vector<pages::slot>& out);
    void icm_free_list(std::vector<pages::slot>& slots);

    // fw_eq.cc
    cmd_reply alloc_uar(cmd_ctx& c);
    cmd_reply dealloc_uar(cmd_ctx& c);
    cmd_reply alloc_pd(cmd_ctx& c);
    cmd_reply dealloc_pd(cmd_ctx& c);
    cmd_reply create_eq(cmd_ctx& c);
    cmd_reply destroy_eq(cmd_ctx& c);
    cmd_reply query_eq(cmd_ctx& c);

    void release_all_objects();

    const device_config& cfg_;
    bar0& bar_;
    iommu& mmu_;
    msix_table& msix_;
    trace& trace_;
    fault_plan& faults_;

    hca_state state_ = hca_state::disabled;
    std::uint16_t current_issi_ = 0;
    bool boot_pages_given_ = false;
    bool init_pages_given_ = false;
    std::uint32_t pages_requested_ = 0;  // via QUERY_PAGES, not yet given
    pages pages_;
    bool host_endianness_set_ = false;
    bool host_big_endian_ = false;
    bool fast_teardown_prepared_ = false;
    std::uint32_t admin_mtu_ = 0;  // 0: the port's maximum
    register_state regs_{};
    // The NIC vport context fields MODIFY_NIC_VPORT_CONTEXT sets (roce_en, mtu, promisc_*;
    // fw_vport.cc); all zero at power-on and after release_all_objects().
    std::array<std::byte, hw::ifc::nic_vport_context::size_bytes> nic_vport_{};
    std::array<std::byte, 256> current_caps_{};  // cmd_hca_cap as set by SET_HCA_CAP
    std::uint8_t atomic_req_mode_ = 0;           // atomic_caps.atomic_req_8B_endianness_mode
    std::array<std::uint8_t, 64> driver_version_{};

    // The device's parts the handlers use. The object tables are shared with the
    // transport engine. Object numbers start at 1 (0 is never a valid handle). The
    // command handlers name each table as a member of their own (uars_, qps_, eqs_, ...):
    // references into tables_ and events_.
    object_tables& tables_;
    event_queues& events_;
    device_port& port_;
    transport_engine& engine_;
    std::map<std::uint32_t, uar_object>& uars_ = tables_.uars;
    std::uint32_t next_uar_ = 0;
    std::map<std::uint32_t, pd_object>& pds_ = tables_.pds;
    std::uint32_t next_pd_ = 1;
    std::map<std::uint32_t, xrcd_object>& xrcds_ = tables_.xrcds;
    std::uint32_t next_xrcd_ = 1;
    std::map<std::uint32_t, event_queue>& eqs_ = events_.by_eqn();
    std::map<std::uint32_t, mkey_object>& mkeys_ = tables_.mkeys;  // by mkey_index
    std::uint32_t next_mkey_ = 0x10;  // below: reserved (fw_mkey.cc)
    std::map<std::uint32_t, umem_object>& umems_ = tables_.umems;
    std::uint32_t next_umem_ = 1;
    std::map<std::uint32_t, cq_object>& cqs_ = tables_.cqs;
    std::uint32_t next_cqn_ = 1;
    std::map<std::uint32_t, qp_object>& qps_ = tables_.qps;
    std::uint32_t next_qpn_ = 0x100;  // below: reserved for special QPs (QP0/QP1)
    std::map<std::uint32_t, srq_object>& srqs_ = tables_.srqs;
    std::uint32_t next_srqn_ = 1;
    std::map<std::uint32_t, q_counter_object>& q_counters_ = tables_.q_counters;  // set 0 always present
    // The RoCE GID table by index (fw_roce.cc); empty on InfiniBand and after teardown.
    std::map<std::uint32_t, roce_address>& roce_addresses_ = tables_.roce_addresses;
    port_stats vport_cleared_{};  // the port's counters when QUERY_VPORT_COUNTER last cleared
};

}  // namespace cxv::sim
