// The model's firmware: executes commands as the PRM says a ConnectX does, with the PRM's
// status values and a distinct syndrome per cause (sim/syndromes.h), and owns the
// HCA state and every object the driver creates.
//
// It sees host memory only through the IOMMU, and the driver only through what a card
// has: the command interface (cmd_engine), doorbells in BAR0 (polled by the device
// thread), EQEs it writes and MSI-X vectors it signals.
//
// The objects live in the object tables (sim/objects/tables.h), which the firmware
// shares with its transport engine (sim/transport/engine.h): the engine executes the
// work the driver posts and calls back only through transport_hooks (the port, events,
// Q counters); the firmware calls the engine at a few named points (a QP created,
// modified, destroyed; reset).
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
#include "sim/faults.h"
#include "sim/firmware/fw_reg.h"
#include "sim/pci/iommu.h"
#include "sim/transport/mkey_translate.h"
#include "sim/pci/msix.h"
#include "sim/objects/objects.h"
#include "sim/objects/pages.h"
#include "sim/objects/tables.h"
#include "sim/transport/engine.h"
#include "sim/transport/hooks.h"
#include "sim/link/port.h"
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

// An event queue (PRM "Event Queue"): its context as created, and the device's
// producer state. EQEs are written to host memory through the IOMMU.
struct event_queue {
    std::uint32_t eqn = 0;
    std::uint32_t uid = 0;
    unsigned log_eq_size = 0;
    unsigned log_page_size = 0;  // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::uint32_t uar_page = 0;
    unsigned intr = 0;
    std::array<std::uint64_t, 4> event_bitmask{};
    std::vector<std::uint64_t> pas;
    std::uint32_t producer = 0;   // next EQE index the device writes
    std::uint32_t consumer = 0;   // last consumer index the driver reported
    bool armed = false;
    bool overrun = false;
    bool oi = false;              // overrun ignore
    pages::slot icm{};            // where its context lives in firmware pages

    bool subscribed(hw::event_type t) const noexcept {
        const unsigned bit = static_cast<unsigned>(t);
        return (event_bitmask[bit / 64] >> (bit % 64)) & 1;
    }
};

// The port's link (fw_port.cc); the logical states are IBTA PortInfo:PortState's.
enum class port_phase : std::uint8_t {
    down,      // no link: before INIT_HCA, after teardown, admin down or no cable
    training,  // admin up with a cable: the link trains (oper_status still down)
    init,      // InfiniBand: physical LinkUp, logical Init until the SM configures it
    active,    // logical Active: Ethernet once trained, InfiniBand after the SM's sweep
};

enum class hca_state : std::uint8_t {
    disabled,     // after reset or DISABLE_HCA
    enabled,      // after ENABLE_HCA, before INIT_HCA
    initialized,  // after INIT_HCA
    torn_down,    // after TEARDOWN_HCA, before DISABLE_HCA
};

class firmware : private transport_hooks {
public:
    firmware(const device_config& cfg, bar0& bar, iommu& mmu, msix_table& msix, trace& tr,
             fault_plan& faults);
    firmware(const firmware&) = delete;
    firmware& operator=(const firmware&) = delete;

    // Executes one command. Thread: the model thread only.
    cmd_reply execute(cmd_ctx& c);

    // The engine's completion hook: a CMD EQE for the slots in `slots` on each EQ that
    // subscribed to command completions and existed when the command was issued (the
    // CREATE_EQ of a command EQ completes without an EQE, as does its DESTROY_EQ).
    void post_command_completion(std::uint32_t slots);

    // An EQ doorbell the model thread found in a UAR page (0x40 arm, 0x48 no arm).
    void eq_doorbell(std::uint32_t value, bool arm);
    // Every UAR page an EQ, CQ or QP is bound to: the model thread polls their doorbells.
    std::vector<std::uint32_t> watched_uar_pages() const;

    // The transport engine, for the model thread's send and CQ doorbells and its ticks.
    transport_engine& engine() noexcept { return engine_; }
    // A packet from the wire for this port: counted by the port, then the engine's.
    void deliver(wire::packet&& p);
    // The port on the wire the engine's packets leave through (sim/link/port.h), owned
    // by the device; and the object tables, whose RoCE address table it answers for.
    void attach_port(link::port* p) noexcept { port_ = p; }
    // Frames that arrived damaged (a bad ICRC, VCRC or checksum): the port dropped them.
    void count_rx_errors(std::uint64_t n) noexcept { port_stats_.rx_errors += n; }
    const object_tables& tables() const noexcept { return tables_; }

    // A PAGE_REQUEST event for num_pages (negative: pages the firmware can return).
    void request_pages(std::int32_t num_pages);
    // The physical link is up (PAOS oper_status up; on InfiniBand also in logical Init).
    bool port_up() const noexcept { return port_up_; }

    // --- the port (fw_port.cc) ---
    // A PAOS write with ase = 1: admin_status up or down. The operational state follows
    // as the port's link does: down at once, up after the link has trained.
    void port_set_admin(bool up);
    // PAOS admin_status and oper_status as the register reports them: 1 up, 2 down.
    unsigned port_admin_status() const noexcept;
    unsigned port_oper_status() const noexcept;
    // The cable, as if plugged in or pulled (device::set_link).
    void port_set_cable(bool in);
    // Link training and the subnet manager's sweep: the step due by `now`. True when the
    // port changed state. Thread: the model thread.
    bool port_tick(std::chrono::steady_clock::time_point now);
    // The time of the model thread's round in progress, which the packets it sends use
    // (a clock read per packet showed in the profile); time_point{} outside a round,
    // where each packet reads the clock.
    void set_round_time(std::chrono::steady_clock::time_point now) noexcept { round_time_ = now; }
    // Frames the port sent and received (the transport engine counts them).
    const port_stats& port_counters() const noexcept { return port_stats_; }

    // The driver wrote nic_interface = DISABLED after TEARDOWN_HCA(PREPARE_FAST_TEARDOWN):
    // the teardown completes. False when no fast teardown was prepared.
    bool finish_fast_teardown();

    // Device reset (FLR / VFIO_DEVICE_RESET): everything back to power-on.
    void reset();

    // The GID table's size: cmd_hca_cap.gid_table_size's encoding (8 << n entries) and
    // the entries it means, which roce_cap.roce_address_table_size reports too.
    static constexpr unsigned gid_table_size_code = 2;
    static constexpr std::uint32_t gid_table_entries = 8u << gid_table_size_code;
    hca_state state() const noexcept { return state_; }
    std::size_t pages_owned() const noexcept { return pages_.owned(); }
    std::size_t eq_count() const noexcept { return eqs_.size(); }

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
    // The bytes on the wire of a packet this port sends or receives, for
    // the port counters (port_stats_).
    wire_frames wire_frames_of(const wire::packet& p) const;

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
    // transport_hooks: counts one event on the set the QP counts to (its
    // qpc.counter_set_id); an error CQE's counters and the one for its cause.
    void count(const qp_object& qp, std::uint32_t q_counter_values::*what) override;
    void count_req_error(const qp_object& qp, hw::cqe_syndrome why) override;
    void count_resp_error(const qp_object& qp, hw::cqe_syndrome why, bool cqe) override;

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
    bool post_eqe(event_queue& eq, hw::event_type type, std::uint8_t sub_type,
                  std::span<const std::byte> data);
    void post_event(hw::event_type type, std::uint8_t sub_type, std::span<const std::byte> data);

    void release_all_objects();

    // fw_port.cc
    // INIT_HCA: the link starts training, unless disable_link_up is set (then the port
    // stays administratively down until PAOS brings it up).
    void port_on_init_hca(bool link_up_disabled);
    // TEARDOWN_HCA, DISABLE_HCA, reset: the port goes down (the EQs are gone: no event).
    void port_stop();
    bool port_active() const noexcept { return port_phase_ == port_phase::active; }
    // IBTA PortInfo:PortState (1 Down, 2 Init, 4 Active) and PortPhysicalState (2
    // Polling, 3 Disabled, 5 LinkUp), also the PRM's hca_vport_context encodings.
    unsigned port_logical_state() const noexcept;
    unsigned port_physical_state() const noexcept;
    // The subnet manager has configured the port (LID, SM LID): InfiniBand, once ACTIVE.
    bool port_configured() const noexcept { return port_configured_; }
    void port_enter(port_phase next, std::chrono::steady_clock::time_point now);

    // --- the transport engine's side (firmware.cc) ---
    // transport_hooks: the port puts the engine's messages on the fabric (nothing when
    // not ACTIVE), and events go to the EQs.
    void transmit(wire::packet&& p) override;
    void async_event(hw::event_type type, std::span<const std::byte> data) override;
    void completion_event(std::uint32_t eqn, std::span<const std::byte> data) override;
    // The engine's entry points the QP commands use (fw_qp.cc).
    void write_bf_sentinel(std::uint32_t uar) { engine_.watch_bf_page(uar); }
    void on_qp_transition(qp_object& qp, qp_state from) { engine_.on_qp_transition(qp, from); }

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
    // The port (fw_port.cc). port_up_ mirrors the phase: init or active.
    port_phase port_phase_ = port_phase::down;
    bool port_up_ = false;
    bool port_admin_up_ = true;
    bool port_cable_ = true;         // the cable is physical: a reset leaves it as it is
    bool port_configured_ = false;   // the SM assigned the LID (kept across link loss)
    std::chrono::steady_clock::time_point port_step_at_{};  // when training or the sweep ends
    std::chrono::steady_clock::time_point round_time_{};    // set_round_time
    std::uint32_t admin_mtu_ = 0;  // 0: the port's maximum
    port_stats port_stats_{};
    register_state regs_{};
    // The NIC vport context fields MODIFY_NIC_VPORT_CONTEXT sets (roce_en, mtu, promisc_*;
    // fw_vport.cc); all zero at power-on and after release_all_objects().
    std::array<std::byte, hw::ifc::nic_vport_context::size_bytes> nic_vport_{};
    std::array<std::byte, 256> current_caps_{};  // cmd_hca_cap as set by SET_HCA_CAP
    std::uint8_t atomic_req_mode_ = 0;           // atomic_caps.atomic_req_8B_endianness_mode
    std::array<std::uint8_t, 64> driver_version_{};

    // The object tables, shared with the transport engine. Object numbers start at 1 (0
    // is never a valid handle). The command handlers name each table as a member of
    // their own (uars_, qps_, ...): references into tables_.
    object_tables tables_;
    link::port* port_ = nullptr;
    std::map<std::uint32_t, uar_object>& uars_ = tables_.uars;
    std::uint32_t next_uar_ = 0;
    std::map<std::uint32_t, pd_object>& pds_ = tables_.pds;
    std::uint32_t next_pd_ = 1;
    std::map<std::uint32_t, event_queue> eqs_;
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
    port_stats vport_cleared_{};  // port_stats_ when QUERY_VPORT_COUNTER last cleared
    std::uint32_t created_by_current_command_ = 0;  // eqn, or 0
    transport_engine engine_;
};

}  // namespace cxv::sim
