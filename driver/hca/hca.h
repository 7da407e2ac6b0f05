// An HCA brought up for use: the PRM bring-up sequence (as Linux's mlx5_core does it),
// firmware pages given and taken back on request, the async EQ (command completions,
// page requests, port changes, queue errors), and the health watch.
//
//   wait for `initializing` → command queue → wait again → ENABLE_HCA → QUERY_ISSI /
//   SET_ISSI → QUERY_PAGES(boot) + MANAGE_PAGES → ACCESS_REG(HOST_ENDIANNESS) →
//   QUERY_HCA_CAP / SET_HCA_CAP → QUERY_PAGES(init) + MANAGE_PAGES → INIT_HCA →
//   SET_DRIVER_VERSION → ALLOC_UAR → CREATE_EQ (async) + arm
//
// plus a completion EQ (on MSI-X vector 1 when the function has it) for the CQs; then
// it waits for port 1 to be ACTIVE: a card's link trains after INIT_HCA (seconds), and
// an InfiniBand port then waits in Init for the subnet manager.
//
// Destruction reverses it: DESTROY_EQ, DEALLOC_UAR, TEARDOWN_HCA, every firmware page
// reclaimed, DISABLE_HCA; every DMA mapping goes with the objects that own it. Objects
// made on the HCA (driver/res) may outlive it: TEARDOWN_HCA releases their firmware
// state, and their destructors then only unmap their memory. Fast teardown (the PRM's
// PREPARE_FAST_TEARDOWN + NIC interface disable) skips the per-object work. A fatal
// health state (stalled counter, health syndrome, the function gone) marks the device
// dead: commands fail with ENODEV and the event is reported, the process goes on.
//
// The hca does the bring-up, the teardown and the port queries itself; its parts are
// their own classes: the firmware page pool and its worker thread (page_pool.h), the EQs
// and the event thread (eq.h), the BlueFlame register allocator (bf_alloc.h) and the
// health watch (health.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "driver/cmd/cmd_queue.h"
#include "driver/hca/bf_alloc.h"
#include "driver/hca/eq.h"
#include "driver/hca/event.h"
#include "driver/hca/health.h"
#include "driver/hca/page_pool.h"
#include "driver/vfio/vfio.h"
#include "hw/cmd_values.h"
#include "hw/registers.h"
#include "base/result.h"

namespace cxv::driver {

class hca;

// What objects made on an HCA share with it: whether it still runs (their destructors
// send commands only then), and how many of them exist. Objects hold it by shared_ptr,
// so it outlives the HCA.
struct hca_link {
    std::shared_mutex mu;  // shared: an object's destroy command; exclusive: teardown
    hca* owner = nullptr;  // null once the HCA is torn down
    std::atomic<int> objects{0};  // made and not yet destroyed in the firmware
};

// Where the commands of an HCA attached to the process that owns its function go (cxvd,
// docs/daemon.md): each one is run there, after that process's checks.
class command_channel {
public:
    virtual ~command_channel() = default;
    virtual result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len) = 0;
    // The owner's events for this process stop being delivered (the hca's teardown: no
    // options::on_event or on_completion call after it returns).
    virtual void stop_events() {}
};

// What the owner of a function tells about it to a process that attaches (its HELLO).
struct attach_info {
    std::string firmware;                  // "major.minor.subminor"
    unsigned port_logical = 1;             // port 1, IBTA PortState
    std::uint32_t comp_eqn = 0;            // the EQ this process's CQs report to
    std::vector<std::byte> caps;           // cmd_hca_cap as the owner set it
    std::vector<std::array<std::uint8_t, 16>> gids;  // port 1's GID table (RoCE)
    std::array<std::uint8_t, 6> mac{};
    std::array<std::uint8_t, 4> ipv4{};
    std::uint32_t max_mtu = 0;             // qpc.mtu encoding
    std::vector<std::byte> ptys;           // port 1's PTYS register, as the owner read it
};

class hca {
public:
    enum class teardown_mode {
        graceful,  // destroy own objects, TEARDOWN_HCA, reclaim every page, DISABLE_HCA
        fast,      // PREPARE_FAST_TEARDOWN + NIC interface disabled, when the device offers it
    };

    struct options {
        std::chrono::milliseconds init_timeout{120'000};  // `initializing` (Linux: FW_INIT_TIMEOUT)
        // Linux's: polls 2 s apart (MLX5_TO_HEALTH_POLL_INTERVAL_MS), MAX_MISSES 3. A counter
        // is dead only after ~6 s without a tick: a model thread or a firmware busy for a
        // few seconds on a loaded machine is not.
        std::chrono::milliseconds health_period{2'000};
        unsigned health_misses = 3;  // consecutive stale health counters that are fatal
        cmd_queue::options cmd{};
        std::function<void(const hca_event&)> on_event;  // called on the event thread
        // A completion event for CQ `cqn` (from the completion EQ; event thread).
        std::function<void(std::uint32_t cqn)> on_completion;
        // After bring-up, create() waits this long for port 1 to be ACTIVE and fails with
        // ETIMEDOUT if it is not (a cable out, no subnet manager). 0: do not wait.
        std::chrono::milliseconds port_timeout{15'000};
        // Ethernet (RoCE) ports: the function's IPv4 address, which the driver programs
        // as GID index 1 (::ffff:a.b.c.d). Unset: a link-local address derived from the
        // port's MAC, 169.254.(1 + mac[4] % 254).mac[5] (RFC 3927's 169.254.1.0 -
        // 169.254.254.255). Ignored on InfiniBand.
        std::optional<std::array<std::uint8_t, 4>> ipv4;
    };

    static result<std::unique_ptr<hca>> create(std::unique_ptr<vfio::device> dev, const options& o);
    static result<std::unique_ptr<hca>> create(std::unique_ptr<vfio::device> dev) {
        return create(std::move(dev), options{});
    }
    // An HCA another process brought up and owns (`dev` from vfio::device::attach):
    // no bring-up, no EQs or firmware pages here. Commands go through `ch`; the caps, the
    // port and the completion EQ are as `info` says; the UAR and BlueFlame pages are
    // granted by the owner (vfio::device::alloc_uar). The port state is the owner's at
    // attach: with options::port_timeout set, a port not ACTIVE then fails (ENETDOWN).
    // Teardown sends nothing: the owner destroys what this process left.
    static result<std::unique_ptr<hca>> attach(std::unique_ptr<vfio::device> dev, std::shared_ptr<command_channel> ch,
                                               attach_info info, const options& o);
    bool attached() const noexcept { return channel_ != nullptr; }
    ~hca();
    hca(const hca&) = delete;
    hca& operator=(const hca&) = delete;

    vfio::device& device() noexcept { return *dev_; }
    // The command queue (not when attached(): the owner has it; use exec()).
    cmd_queue& cmd() noexcept { return *cmd_; }
    // Runs a command (see cmd_queue::exec).
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_len) {
        if (channel_) return channel_->exec(in, out_len);
        return cmd_->exec(in, out_len);
    }

    // Capabilities as QUERY_HCA_CAP returned them after SET_HCA_CAP (cmd_hca_cap).
    const std::vector<std::byte>& caps() const noexcept { return caps_cur_; }
    const std::vector<std::byte>& caps_max() const noexcept { return caps_max_; }
    // major.minor packed as the health buffer has it (0 when attached: that buffer is the owner's)
    std::uint32_t fw_version() const noexcept;
    std::string fw_version_string() const;
    std::uint32_t uar() const noexcept { return uar_; }
    std::uint8_t async_eqn() const noexcept { return eqs_ ? eqs_->async_eqn() : 0; }
    std::uint8_t comp_eqn() const noexcept {
        return eqs_ ? eqs_->comp_eqn() : static_cast<std::uint8_t>(attached_.comp_eqn);
    }
    bool ethernet() const noexcept;  // the port type (RoCE) rather than InfiniBand
    // Port `port`'s state as the NIC vport context reports it and, for InfiniBand, the
    // HCA vport context (LID, MTU).
    using port_info = cxv::port_info;  // base/values.h
    result<port_info> query_port(unsigned port);
    // Port `port`'s state: PAOS (admin, operational) and the logical state (InfiniBand:
    // the HCA vport context's port_state; Ethernet: QUERY_VPORT_STATE, up = active).
    struct port_state {
        bool admin_up = false;
        bool oper_up = false;   // the physical link
        // IBTA PortState (hw::ib_port_state): 1 Down, 2 Init, 3 Armed, 4 Active.
        unsigned logical = static_cast<unsigned>(hw::ib_port_state::DOWN);
        bool active() const noexcept { return logical == static_cast<unsigned>(hw::ib_port_state::ACTIVE); }
    };
    result<port_state> query_port_state(unsigned port);
    // Port `port`'s link as PTYS (PRM "Port Type and Speed Register") tells it, decoded
    // with hw/port_speeds.h. All zero and empty while the link is down. An attached
    // function reads the PTYS its owner read at attach.
    struct port_speed {
        std::string mode;        // "4X EDR", "100GBASE-CR4"
        std::uint64_t mbps = 0;  // the port's data rate, all lanes
        unsigned lanes = 0;
        // ibv_port_attr's view, as mlx5_ib reports it: InfiniBand, ib_proto_oper and the
        // lowest ib_link_width_oper bit; RoCE, Linux's equivalent of the Ethernet mode
        // (4X QDR for a mode it does not know). PTYS bits (hw::ib_link_speeds/widths).
        std::uint16_t ib_speed = 0;
        std::uint16_t ib_width = 0;
    };
    result<port_speed> query_port_speed(unsigned port);
    // The PTYS register of `port` for the port's protocol, as read (ACCESS_REG).
    result<std::vector<std::byte>> query_ptys(unsigned port);
    // The decoding, on its own (for the register bytes of a PTYS read).
    static port_speed decode_ptys(std::span<const std::byte> ptys, bool ethernet);
    // Waits until port `port` is ACTIVE: the state is read again at each PORT_CHANGE event
    // and every 100 ms. ETIMEDOUT, naming the state last seen, after `timeout`.
    status wait_port_active(unsigned port, std::chrono::milliseconds timeout);
    const std::shared_ptr<hca_link>& link() const noexcept { return link_; }

    // RoCE (Ethernet ports; empty on InfiniBand), driver/hca/roce.cc. At bring-up the
    // driver programs port 1's GID table as Linux does for a netdev's addresses, RoCE v2
    // entries only (the version the device offers):
    //   index 0: fe80::/64 with the modified EUI-64 interface id of the port's MAC
    //            (RFC 4291 appendix A), roce_l3_type IPv6;
    //   index 1: ::ffff:a.b.c.d of the function's IPv4 address (options::ipv4, else the
    //            link-local default), roce_l3_type IPv4;
    // each with the MAC as source_mac. A RoCE QP names one by sgid_index.
    using gid = std::array<std::uint8_t, 16>;
    const std::vector<gid>& roce_gids() const noexcept { return roce_gids_; }
    const std::array<std::uint8_t, 4>& ipv4() const noexcept { return ipv4_; }
    const std::array<std::uint8_t, 6>& mac() const noexcept { return mac_; }
    // The default IPv4 address of a port with MAC `mac`, and the GIDs for a MAC and an
    // IPv4 address (pure functions, for tests and tools).
    static std::array<std::uint8_t, 4> link_local_ipv4(const std::array<std::uint8_t, 6>& mac) noexcept;
    static gid link_local_gid(const std::array<std::uint8_t, 6>& mac) noexcept;
    static gid ipv4_mapped_gid(const std::array<std::uint8_t, 4>& ip) noexcept;

    // The NIC receive root table this process last set (SET_FLOW_TABLE_ROOT), 0 for none:
    // a table that was root unsets the root when it goes only while it still is.
    std::atomic<std::uint32_t> nic_rx_root{0};

    // A BlueFlame register (driver/hca/bf_alloc.h).
    using bf_reg = driver::bf_reg;
    // A register no other QP uses: from a UAR page already in hand, or a new one
    // (ALLOC_UAR). Freed registers are reused; the pages go at teardown.
    result<bf_reg> alloc_bf();
    // A register's address in BAR0 (PRM "BlueFlame"): through the write-combining mapping
    // when `write_combining` is set and the device has one (BlueFlame copies), else
    // through the uncached mapping (8-byte doorbells, whose store must not wait in the
    // CPU's write-combining buffers).
    std::byte* bf_address(const bf_reg& r, bool write_combining) noexcept;
    void free_bf(const bf_reg& r);
    std::size_t pages_given() const;
    bool dead() const noexcept { return cmd_ && cmd_->dead(); }
    // `f` runs on the event thread at each of its ticks (every 50 ms or so, after the health
    // check): periodic upkeep such as the device clock's sync(). One at a time; nullptr
    // removes it, and once this returns the old one runs no more.
    void on_tick(std::function<void()> f);

    // Tears the function down now (the destructor does it gracefully otherwise) and says
    // whether everything came back: every firmware page reclaimed, no command failed.
    // Objects still alive are released by the firmware (TEARDOWN_HCA); their count at
    // the time is in objects_at_close().
    status close(teardown_mode mode = teardown_mode::graceful);
    int objects_at_close() const noexcept { return objects_at_close_; }
    // The command trace as it was when the HCA was closed (the queue is gone then).
    const std::vector<cmd_record>& trace_at_close() const noexcept { return trace_at_close_; }

private:
    // An InfiniBand port's LID, state (attached) and GID 0 from the vport queries, into pi.
    result<port_info> query_ib_port(unsigned port, port_info pi);
    // Port register `id` of `port` (ACCESS_REG read; every port register has local_port
    // at the same place): the register's bytes.
    // `proto_mask`: PTYS's, which protocol's fields to read.
    result<std::vector<std::byte>> read_port_reg(unsigned port, hw::reg_id id, std::size_t size,
                                                 std::uint32_t proto_mask = 0);
    explicit hca(std::unique_ptr<vfio::device> dev, const options& o);
    status bring_up();
    status wait_initializing(const char* when);
    status query_caps(std::uint16_t op_mod, std::vector<std::byte>& into);
    status start_events();
    // RoCE: the port's MAC (QUERY_NIC_VPORT_CONTEXT), then SET_ROCE_ADDRESS for each GID.
    status program_roce_gids();
    result<std::vector<gid>> read_roce_gids(unsigned port);
    void fatal(const std::string& why);
    void report(hca_event e);
    status teardown(teardown_mode mode);
    status fast_teardown();
    bool closed_ = false;
    int objects_at_close_ = 0;
    std::vector<cmd_record> trace_at_close_;
    std::shared_ptr<hca_link> link_ = std::make_shared<hca_link>();

    std::unique_ptr<vfio::device> dev_;
    options opts_;
    std::shared_ptr<command_channel> channel_;  // attached: where commands go
    attach_info attached_;
    std::unique_ptr<cmd_queue> cmd_;
    std::vector<std::byte> caps_cur_, caps_max_;
    std::array<std::uint8_t, 6> mac_{};
    std::array<std::uint8_t, 4> ipv4_{};
    std::vector<gid> roce_gids_;

    std::unique_ptr<page_pool> pages_;   // firmware pages and their worker thread
    std::uint32_t uar_ = 0;
    bool uar_allocated_ = false;
    std::unique_ptr<bf_allocator> bf_;   // BlueFlame registers
    std::unique_ptr<event_queues> eqs_;  // the EQs and the event thread
    health_monitor health_;              // on the event thread
    std::mutex tick_mu_;                 // held while the tick hook runs or changes
    std::function<void()> tick_hook_;
    std::atomic<bool> stop_{false};
    std::mutex port_mu_;
    std::condition_variable port_cv_;
    std::uint64_t port_events_ = 0;  // PORT_CHANGE events seen (wakes wait_port_active)
};

}  // namespace cxv::driver
