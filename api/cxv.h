// cxv's C++ API: a device, and the verbs objects on it -- protection domains, memory
// regions, completion queues, queue pairs and shared receive queues -- with the fast
// path of api/verbs_post.h on each.
//
//   auto dev = cxv::device::open("0000:3b:00.0");          // VFIO, bring-up
//   auto pd  = (*dev)->alloc_pd();
//   auto mr  = cxv::mr::create(*pd, buf, len, cxv::access_local_write);
//   auto cq  = cxv::cq::create(**dev, 256);
//   auto qp  = cxv::qp::create(**dev, {.type = cxv::qp_type::rc, .domain = *pd,
//                               .send_cq = *cq, .recv_cq = *cq});
//   (*qp)->modify(cxv::qp_state::init, attr); ... rtr, rts
//   (*qp)->post_send(&wr, &bad);  (*cq)->poll(16, wcs);
//
// Objects are shared_ptr-owned and keep what they use alive (a QP its CQs, PD and SRQ),
// so any destruction order is one the firmware accepts. Control calls return result or
// status (an errno value and a message naming the firmware command, status and
// syndrome when the device refused); fast-path calls return errno values as the verbs
// man pages say, and never allocate, lock, make a system call or log.
//
// Threads: one thread per QP's send side (any number with qp::attr::multi_producer)
// and one per CQ poller. QPs are attached to their CQs at
// create(): create every QP of a CQ before another thread polls it. A QP may be
// destroyed while another thread polls its CQs: the poller lets go of its rings at its
// next poll() (completions of it still in the CQ then carry wr_id 0), with no lock on
// the poll path, and the rings are freed after that. An SRQ's ring goes with the SRQ:
// destroy an SRQ the caller holds once the pollers of its QPs' CQs have polled since
// those QPs went (one the QP held last is kept with its rings).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/verbs_post.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "base/values.h"
#include "hw/ifc_counters.h"
#include "queues/completion_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"

namespace cxv {

// The control path's objects (driver/), opaque here: a user of this header needs no
// driver/ header. object() and device::hca() hand them out to code that includes
// driver/ itself (tests and tools that look underneath).
namespace driver {
class cq;
class device_clock;
class hca;
class mr;
class pd;
class q_counter;
class qp;
class rq;
class rqt;
class sq;
class srq;
class tir;
class tis;
struct rx_hash;
}  // namespace driver

namespace eth {
class neighbours;
class steering;
}  // namespace eth

using queues::doorbell_mode;

// qp_type, qp_state, mr_access, port_info, event, qp_path, qp_modify_attr and srq_attr:
// base/values.h, the values the driver takes as they are.

// The vport's traffic counters (frames and bytes each), as the device reports them.
using hw::traffic;
using hw::vport_counters;
// A Q counter set's values, by their PRM names (hw/ifc_counters.h lists them).
using hw::q_counter_values;

class device;

// A protection domain (ibv_alloc_pd(3)): device::alloc_pd().
class pd {
public:
    std::uint32_t pdn() const noexcept { return pdn_; }
    const std::shared_ptr<driver::pd>& object() const noexcept { return pd_; }

private:
    friend class device;
    pd() = default;
    std::shared_ptr<driver::pd> pd_;
    std::uint32_t pdn_ = 0;
};

// Memory for MRs that a cxvd can map as it is (docs/daemon.md, "The client side"): a
// sealed memfd (memfd_create(2) with F_SEAL_SHRINK | F_SEAL_GROW) mapped MAP_SHARED here,
// zeroed, whose fd the process keeps. mr::create over it through a daemon hands the
// daemon this file: no re-backing of the pages and no /proc/self/map_files (which needs
// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). Without a daemon it is ordinary memory.
// Unmapped when the object goes (an MR still using it keeps the daemon's own mapping, so
// the device never writes into freed pages; the process no longer sees them).
class buffer {
public:
    // `size` rounded up to whole 4 KiB pages (huge: 2 MiB pages, MFD_HUGETLB).
    static result<std::unique_ptr<buffer>> create(std::size_t size, bool huge = false);
    ~buffer();
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    int fd() const noexcept { return fd_.get(); }

private:
    buffer() = default;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    unique_fd fd_;
};

// The cxvd this process's devices attach through: $CXV_DAEMON, or empty (VFIO).
std::string daemon_path();
// The functions (PCI addresses) the cxvd at `path` serves, in its order (its HELLO), those
// another trust domain uses last.
// ENOENT / ECONNREFUSED, naming the path, when none listens there.
result<std::vector<std::string>> daemon_functions(const std::string& path);

// A memory region (ibv_reg_mr(3)): [addr, addr + length) mapped for the device's DMA,
// with its key. The memory must stay allocated while the MR exists. Keeps its PD alive.
// Through a cxvd, private memory (malloc, anonymous mmap) is re-backed in place by a
// memfd the daemon can map (docs/daemon.md, "Memory of unmodified programs"); a
// cxv::buffer is handed over as it is.
class mr {
public:
    static result<std::shared_ptr<mr>> create(std::shared_ptr<pd> domain, void* addr, std::size_t length,
                                              unsigned access);
    std::uint32_t lkey() const noexcept { return key_; }
    std::uint32_t rkey() const noexcept { return key_; }
    void* addr() const noexcept { return addr_; }
    std::size_t length() const noexcept { return length_; }
    unsigned access() const noexcept { return access_; }
    const std::shared_ptr<driver::mr>& object() const noexcept { return mr_; }

private:
    mr() = default;
    std::shared_ptr<pd> pd_;
    std::shared_ptr<driver::mr> mr_;
    std::uint32_t key_ = 0;
    void* addr_ = nullptr;
    std::size_t length_ = 0;
    unsigned access_ = 0;
};

namespace detail {
// Completion events by CQ number, for the HCA's event thread to signal; and whether the
// device is dead (its fatal event came), which the CQs' pollers read.
struct cq_events {
    std::mutex mu;
    std::map<std::uint32_t, int> fds;  // cqn -> eventfd
    std::atomic<bool> dead{false};
    void signal(std::uint32_t cqn);
    void signal_all();  // the fatal event: every waiter wakes and polls (its flushes)
};
}  // namespace detail

// What device::counters() reads: the vport's traffic and the device's Q counter set.
struct device_counters {
    // QUERY_VPORT_COUNTER: frames and bytes the function sent and received, by cast, on
    // the port's link layer (the InfiniBand fields on an InfiniBand port, the Ethernet
    // ones on RoCE; the others read 0). received_errors counts damaged frames that
    // arrived, transmit_errors frames that could not be sent.
    vport_counters vport;
    // QUERY_Q_COUNTER of the set every QP without its own counts to (qp::attr::
    // own_counters): requests executed as responder, receive-buffer shortages (RNR),
    // sequence errors and duplicates, retries, and error and flush completions by
    // side. Empty when the device gave no set at open.
    std::optional<q_counter_values> q;
};

class device {
public:
    struct options {
        // Asynchronous events (port changes, fatal errors, queue errors), and completion
        // events of CQ `cqn`; both called on the device's event thread.
        std::function<void(const event&)> on_event;
        std::function<void(std::uint32_t cqn)> on_completion;
        // After bring-up, open() waits this long for port 1 to be ACTIVE and fails with
        // ETIMEDOUT if it is not (a cable out, no subnet manager). 0: do not wait.
        std::chrono::milliseconds port_timeout{15'000};
        // RoCE ports: the function's IPv4 address, programmed as GID index 1 (::ffff:
        // a.b.c.d). Unset: the link-local 169.254.(1 + mac[4] % 254).mac[5] of the port's
        // MAC (RFC 3927). Ignored on InfiniBand ports.
        std::optional<std::array<std::uint8_t, 4>> ipv4;
    };
    // Opens the function through VFIO and brings the HCA up. With CXV_DAEMON=PATH set,
    // attaches instead to the function `bdf` (empty: the first) of the cxvd listening at
    // PATH (docs/daemon.md): commands, memory mappings and UAR pages go through it, the
    // fast path is the same. ENOENT / ECONNREFUSED, with the path, when none listens.
    // Through the daemon: completion and asynchronous events come through its event
    // channel (docs/daemon.md, "Events"), and the daemon's death is a fatal event; no
    // device counters (not on the daemon's allow-list); memory registered (mr::create)
    // is a memfd's the daemon maps too (see buffer and mr).
    //
    // After a fatal event (the device or the daemon dead) control calls fail (ENODEV,
    // ECONNRESET) and cq::poll, where it finds no CQE, completes every WR still posted on
    // the CQ's QPs with IBV_WC_WR_FLUSH_ERR (their receive queues', not an SRQ's); every
    // CQ's event_fd() is signalled once. Open a new device to go on.
    static result<std::unique_ptr<device>> open(const std::string& bdf, const options& o);
    static result<std::unique_ptr<device>> open(const std::string& bdf) { return open(bdf, options{}); }
    ~device();
    device(const device&) = delete;
    device& operator=(const device&) = delete;

    result<std::shared_ptr<pd>> alloc_pd();
    result<port_info> port(unsigned n = 1);
    // GID `index` of port `n` (ibv_query_gid(3)), read from the device: on RoCE the
    // entries of port_info::gids that open() programmed, on InfiniBand GID 0. EINVAL for
    // an index that holds no GID.
    result<std::array<std::uint8_t, 16>> gid(unsigned index, unsigned n = 1);
    // RoCE: the IPv4 address GID 1 carries (options::ipv4 or the link-local default);
    // nullopt on InfiniBand.
    std::optional<std::array<std::uint8_t, 4>> ipv4() const;
    // The HCA underneath (driver/hca/hca.h), for code that looks below the API.
    driver::hca& hca() noexcept { return *hca_; }
    // The device's counters (two firmware commands; not for the fast path). With clear,
    // both start again from 0 after this read. The Q counter set is allocated at open
    // and named by every QP created without own_counters.
    result<device_counters> counters(bool clear = false);
    // The device's Q counter set (null when the device had none to give at open).
    const std::shared_ptr<driver::q_counter>& q_counter() const noexcept { return counter_; }
    // Whether 64-byte BlueFlame writes reach the device whole through the mapping
    // BlueFlame uses -- sysfs resource0_wc where the kernel offers it, else VFIO's BAR0
    // mapping (uncached on a card) -- (driver/wc's self-test, run once).
    result<bool> write_combining();
    // Where BlueFlame registers are written: the write-combining mapping if there is one.
    std::byte* bf_base() noexcept;
    // How a send ring rings: `asked`, or else BlueFlame copies (MOVDIR64B where the CPU
    // has it) when write_combining() holds, 8-byte doorbells when it does not.
    result<doorbell_mode> send_doorbell(std::optional<doorbell_mode> asked);
    // The device clock (driver/hca/clock.h: the free-running timer, and its ticks in
    // CLOCK_REALTIME nanoseconds), made at the first call and kept; ENOTSUP through cxvd,
    // whose clients cannot read the initialization segment.
    result<driver::device_clock*> clock();
    // RoCE: the MAC of the peer at GID `dgid`, as port GID `sgid_index` reaches it, which a
    // card's QP path and UD address vector must carry (api/neighbours.h: from the GID
    // where it names one, else asked with ARP on a raw queue of this device's; cached).
    // EHOSTUNREACH when an ARP request goes unanswered.
    result<std::array<std::uint8_t, 6>> peer_mac(unsigned sgid_index, const std::array<std::uint8_t, 16>& dgid);
    // The resolver peer_mac() uses, made at the first call (its counts, for tests).
    eth::neighbours& neighbours();

private:
    friend class cq;
    device(std::unique_ptr<driver::hca> h, std::shared_ptr<detail::cq_events> ev);
    std::shared_ptr<detail::cq_events> events_;
    std::unique_ptr<driver::hca> hca_;
    std::shared_ptr<driver::q_counter> counter_;  // released before the HCA
    std::mutex wc_mu_;  // contexts sharing the device may ask at once
    bool wc_known_ = false, wc_ = false;
    std::mutex clock_mu_;
    std::unique_ptr<driver::device_clock> clock_;
    std::mutex neighbours_mu_;
    std::unique_ptr<eth::neighbours> neighbours_;  // last: its queue goes before the HCA
};

class cq {
public:
    struct options {
        unsigned cqe_size = 64;       // the entry stride: 64 or 128 (mlx5dv_create_cq's cqe_size)
        bool ignore_overrun = false;  // IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN (cqc.oi)
    };
    // At least `entries` CQEs (a power of two).
    static result<std::shared_ptr<cq>> create(device& d, unsigned entries, const options& o);
    static result<std::shared_ptr<cq>> create(device& d, unsigned entries) { return create(d, entries, options{}); }

    // ibv_poll_cq(3): up to n completions; the number taken (never an error). Once the
    // device is dead (device::options), an empty poll returns the posted WRs flushed.
    int poll(int n, ibv_wc* wc) noexcept { return api::poll_cq(ring_, n, wc); }
    int poll(std::span<ibv_wc> wc) noexcept { return poll(static_cast<int>(wc.size()), wc.data()); }

    const std::shared_ptr<driver::cq>& object() const noexcept { return cq_; }
    static constexpr unsigned max_qps = 256;  // QPs completing to one CQ

    // Keep each completion's device timestamp, flow tag and stripped C-VLAN tag
    // (ibv_create_cq_ex's IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, _FLOW_TAG and _CVLAN):
    // last_timestamp(), last_flow_tag() and last_cvlan() then give those of the last
    // completion poll() returned. Every poll takes the general path from then on. Before
    // the first poll.
    void keep_cqe_fields() noexcept { ring_.keep_cqe_fields(); }
    std::uint64_t last_timestamp() const noexcept { return ring_.last_timestamp(); }
    std::uint32_t last_flow_tag() const noexcept { return ring_.last_flow_tag(); }
    std::uint16_t last_cvlan() const noexcept { return ring_.last_cvlan(); }

    // Interrupt mode (ibv_req_notify_cq(3), ibv_get_cq_event(3)): arm the CQ for the next
    // completion (or the next solicited or error one), then wait on event_fd() (readable
    // when the completion event arrived) or with wait_event(). Arm again after each
    // event; completions that arrived before the arm raise the event at once.
    void request_notify(bool solicited_only) noexcept;
    int event_fd() const noexcept { return event_fd_.get(); }
    // True when an event came within `timeout` (and is consumed), false otherwise. Once
    // the device is dead (its fatal event), true at once: poll for the flushed WRs.
    bool wait_event(std::chrono::milliseconds timeout) noexcept;
    ~cq();

private:
    friend class qp;
    friend class srq;
    cq() = default;
    bool attach(const queues::qp_rings& r) { return qps_.attach(ring_, r); }
    // `rings`: what the poller may still touch of the QP, kept until it lets go.
    void detach(std::uint32_t qpn, std::shared_ptr<const void> rings) { qps_.detach(ring_, qpn, std::move(rings)); }

    std::shared_ptr<driver::cq> cq_;
    queues::completion_queue ring_;
    queues::qp_table qps_;  // capacity max_qps
    std::shared_ptr<detail::cq_events> events_;
    unique_fd event_fd_;
};

class srq {
public:
    using attr = srq_attr;  // base/values.h
    static result<std::shared_ptr<srq>> create(std::shared_ptr<pd> domain, const attr& a);

    // ibv_post_srq_recv(3).
    int post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept { return api::post_srq_recv(ring_, wr, bad_wr); }
    // MODIFY_RMP: an SRQ_RQ_LIMIT event when fewer than `limit` WQEs remain.
    status arm(unsigned limit);
    std::uint32_t srqn() const noexcept { return srqn_; }
    const std::shared_ptr<driver::srq>& object() const noexcept { return srq_; }
    // The free list of its WQEs (linked by their next segments, PRM "SRQ"): the first
    // free WQE, where the next receive goes, and the last.
    std::uint32_t free_head() const noexcept { return ring_.head(); }
    std::uint32_t free_tail() const noexcept { return ring_.tail(); }

private:
    friend class qp;
    srq() = default;
    std::shared_ptr<pd> pd_;
    std::shared_ptr<driver::srq> srq_;
    std::uint32_t srqn_ = 0;
    std::vector<std::uint64_t> wr_ids_;
    queues::srq_ring ring_;
};

class qp {
public:
    // Sizes asked for at create (base/values.h); with max_send_wr 0 every send is ENOMEM.
    using caps = qp_caps;
    // type raw_packet (IBV_QPT_RAW_PACKET, on an Ethernet port): an SQ and an RQ of the
    // Ethernet transport under one QP, as Linux's mlx5_ib makes one (PRM "Transport
    // Interface"): a TIS the SQ sends through, the RQ's direct TIR, which steering rules
    // name (raw_tir()). Its number is the SQ's (the RQ's without sends). A send is a whole
    // frame: the first 18 bytes go inline in the WQE's Ethernet segment, IBV_SEND_IP_CSUM
    // asks for the IPv4 and L4 checksums; a receive is a frame. RST→INIT readies the RQ,
    // RTR→RTS the SQ (as mlx5_ib). No SRQ, multi-producer ring or own counters.
    struct attr {
        qp_type type = qp_type::rc;
        std::shared_ptr<pd> domain;
        std::shared_ptr<cq> send_cq, recv_cq;
        std::shared_ptr<srq> shared;  // receives come from this SRQ
        caps cap;
        // How the send queue tells the device: 8-byte doorbells (always works), or
        // BlueFlame copies of single WQEs (64-byte stores, or MOVDIR64B). Unset: chosen
        // once per device by the write-combining self-test (MOVDIR64B where the CPU has
        // it), 8-byte doorbells when it fails.
        std::optional<doorbell_mode> doorbell;
        // Several threads may post sends at once, with no lock (queues/mp_send_queue.h:
        // fixed slots of the largest WQE, 8-byte doorbells). Receives and polling stay
        // one thread each.
        bool multi_producer = false;
        // Every send WQE asks for a completion, whatever its WR's IBV_SEND_SIGNALED
        // (ibv_qp_init_attr's sq_sig_all). The WRs are copied with the flag set, 16 at
        // a time (a doorbell per 16 WRs of a list rather than one per list).
        bool signal_all = false;
        // The QP counts its transport events to a Q counter set of its own (ALLOC_Q_COUNTER
        // at create, read with counters()) instead of the device's.
        bool own_counters = false;
        // A raw packet QP's receives lose their C-VLAN tag, which their CQEs carry instead
        // (rqc.vsd 0; IBV_QP_CREATE_CVLAN_STRIPPING). EINVAL for other types.
        bool strip_vlan = false;
    };
    static result<std::shared_ptr<qp>> create(device& d, const attr& a);
    ~qp();
    doorbell_mode doorbell() const noexcept { return mode_; }
    qp(const qp&) = delete;
    qp& operator=(const qp&) = delete;

    // The peer's address (INIT2RTR of a connected QP, or a UD address handle) and a
    // transition's attributes (base/values.h).
    using path = qp_path;
    using modify_attr = qp_modify_attr;
    // One transition to `to` from the current state (RST→INIT, INIT→INIT/RTR, RTR→RTS,
    // RTS→RTS, SQERR→RTS, SQD→RTS, any→ERR, any→RST); the firmware checks the attributes
    // and refuses with its status and syndrome. EINVAL for a pair with no command.
    status modify(qp_state to, const modify_attr& a);
    result<qp_state> query();

    // ibv_post_send(3) and ibv_post_recv(3).
    int post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
        if (other_send_) [[unlikely]] return post_send_other(wr, bad_wr);
        return api::post_send(send_, wr, bad_wr);
    }
    int post_recv(ibv_recv_wr* wr, ibv_recv_wr** bad_wr) noexcept { return api::post_recv(*rq_, wr, bad_wr); }
    // Batch forms: the WRs of the span in order (their `next` links are set here);
    // *bad_wr as for the list forms.
    int post_send(std::span<ibv_send_wr> wrs, ibv_send_wr** bad_wr) noexcept;
    int post_recv(std::span<ibv_recv_wr> wrs, ibv_recv_wr** bad_wr) noexcept;

    // Whether post_send would find room for every WR of the valid list `wr` now (the
    // send ring's own tests, run ahead: api::send_fits): what an all-or-nothing batch
    // (ibv_wr_complete(3)) checks before it posts. A multi-producer ring is shared with
    // other threads: always true (its post says).
    bool send_fits(const ibv_send_wr* wr) const noexcept {
        if (send_.sq == nullptr || mp_send_.sq != nullptr) return true;
        return api::send_fits(send_, wr, signal_all_ ? kSignalAllChunk : 0);
    }

    std::uint32_t qpn() const noexcept { return qpn_; }
    qp_type type() const noexcept { return type_; }
    // The QP object (null for a raw packet QP, which has none).
    const std::shared_ptr<driver::qp>& object() const noexcept { return qp_; }
    // The sizes granted at create, at least those asked (ibv_create_qp(3) writes them back).
    caps capabilities() const noexcept;
    // The device's objects destroyed now (ibv_destroy_qp(3)), with the firmware's status;
    // the rest goes with this object.
    status destroy();
    // A raw packet QP's TIR, which steering rules send packets to (null for other types
    // and for a raw packet QP without receives).
    std::shared_ptr<driver::tir> raw_tir() const noexcept;
    // A raw packet QP's RQ (null without receives): what an RQ table for RSS lists.
    std::shared_ptr<driver::rq> raw_rq() const noexcept;
    // A raw packet QP's SQ and TIS (null without sends): mlx5dv_init_obj's rings and
    // numbers. Its SQ and RQ share one doorbell record, as the QP's.
    std::shared_ptr<driver::sq> raw_sq() const noexcept;
    std::shared_ptr<driver::tis> raw_tis() const noexcept;
    // An RSS QP (ibv_create_qp_ex(3) with rx_hash_conf and an indirection table): an
    // indirect TIR that spreads what steering sends it over `table`'s RQs by `hash`, as
    // mlx5_ib makes one. It has no queue of its own: sends are ENOMEM, receives EINVAL,
    // and modify() ENOSYS (mlx5_ib's answer). Its number is the TIR's.
    static result<std::shared_ptr<qp>> create_rss(device& d, std::shared_ptr<driver::rqt> table,
                                                  const driver::rx_hash& hash);
    // QUERY_Q_COUNTER of the QP's own set (attr::own_counters; ENOENT without one: its
    // events count in device::counters()). With clear, the set restarts from 0.
    result<q_counter_values> counters(bool clear = false);

    // Multicast (ibv_attach_mcast(3), IBA 10.5): the UD QP joins the group `mgid`
    // (ATTACH_TO_MCG) and receives what is sent to QP 0xFFFFFF at that DGID. On an
    // Ethernet port the group's MAC (RFC 1112, RFC 2464) joins the vport's filter too,
    // through the device's steering (eth::steering::of), as a netdev's join puts it
    // there. `mlid` is InfiniBand's multicast LID, which the sender's address vector
    // carries; the device does not keep it. EINVAL, as ib_core's checks: not a multicast
    // GID (ff00::/8, ::ffff:224.0.0.0/4), not a UD QP, or on InfiniBand a LID outside
    // 0xC000-0xFFFE; detaching a group not attached. A QP in a group is not destroyed
    // (EBUSY, as ib_core's use count).
    using gid = std::array<std::uint8_t, 16>;
    status attach_multicast(const gid& mgid, std::uint16_t mlid);
    status detach_multicast(const gid& mgid, std::uint16_t mlid);
    std::size_t multicast_groups() const;

private:
    qp() = default;
    status check_multicast(const char* call, const gid& mgid, std::uint16_t mlid) const;
    mutable std::mutex groups_mu_;
    std::vector<gid> groups_;                       // attached, under groups_mu_
    std::shared_ptr<eth::steering> group_filter_;   // Ethernet: where the MACs joined
    // A raw packet QP's objects and state (cxv.cc).
    struct raw_objects;
    static result<std::shared_ptr<qp>> create_raw(device& d, const attr& a, doorbell_mode mode);
    status modify_raw(qp_state to);
    result<qp_state> raw_state() const;
    void reset_rings();
    std::shared_ptr<raw_objects> raw_;
    qp_type type_ = qp_type::rc;
    // The rings and what their retire() touches (cxv.cc): on the heap, shared with the
    // CQs, which keep them past the QP until their pollers have let go.
    struct rings;
    std::shared_ptr<rings> rings_;
    queues::recv_queue* rq_ = nullptr;  // in rings_
    std::shared_ptr<driver::qp> qp_;
    std::uint32_t qpn_ = 0;
    device* dev_ = nullptr;
    std::shared_ptr<pd> pd_;
    std::shared_ptr<cq> scq_, rcq_;
    std::shared_ptr<srq> srq_;
    doorbell_mode mode_ = doorbell_mode::doorbell;
    // Sends not on the single-producer path as they are: a multi-producer ring, or
    // signal_all (the one test post_send makes for both).
    bool other_send_ = false;
    bool signal_all_ = false;
    static constexpr unsigned kSignalAllChunk = 16;  // post_send_other's WRs per list
    bool own_counters_ = false;
    int post_send_other(ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept;
    int post_send_ring(ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
        return mp_send_.sq != nullptr ? api::post_send_mp(mp_send_, wr, bad_wr) : api::post_send(send_, wr, bad_wr);
    }
    api::send_side send_{};
    api::mp_send_side mp_send_{};
};

// ibv_wc_status_str(3) without linking libibverbs.
const char* wc_status_str(int status) noexcept;

// A UD address handle (what ibv_create_ah(3) returns): the address vector a UD send
// WQE carries. The caller keeps it alive while WRs that name it are posted. On RoCE its
// MAC is p.rmac, else the one the GID names (a link-local EUI-64 or multicast GID), else
// 0; with `d`, else the one d.peer_mac() finds (an error when it finds none).
api::address_handle make_address_handle(const qp::path& p, bool ethernet);
result<api::address_handle> make_address_handle(device& d, const qp::path& p);

}  // namespace cxv
