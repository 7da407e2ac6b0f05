#include "api/cxv.h"
#include "api/cxv_eth.h"
#include "api/neighbours.h"
#include "api/qp_rings.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "client/remote.h"
#include "driver/hca/clock.h"
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/q_counter.h"
#include "driver/res/qp.h"
#include "driver/res/srq.h"
#include "driver/vfio/vfio.h"
#include "driver/wc/wc_selftest.h"
#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mac.h"
#include "hw/mmio.h"

namespace cxv {

void detail::cq_events::signal(std::uint32_t cqn) {
    std::lock_guard lock(mu);
    const auto it = fds.find(cqn);
    if (it == fds.end()) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(it->second, &one, sizeof(one));
}

void detail::cq_events::signal_all() {
    std::lock_guard lock(mu);
    const std::uint64_t one = 1;
    for (const auto& [cqn, fd] : fds) [[maybe_unused]] const auto n = ::write(fd, &one, sizeof(one));
}

device::device(std::unique_ptr<driver::hca> h, std::shared_ptr<detail::cq_events> ev)
    : events_(std::move(ev)), hca_(std::move(h)) {}

device::~device() {
    // The clock's upkeep stops before the clock goes.
    if (hca_ && clock_) hca_->on_tick(nullptr);
}

eth::neighbours& device::neighbours() {
    std::lock_guard lock(neighbours_mu_);
    if (!neighbours_) neighbours_ = std::make_unique<eth::neighbours>(*this);
    return *neighbours_;
}

result<std::array<std::uint8_t, 6>> device::peer_mac(unsigned sgid_index, const std::array<std::uint8_t, 16>& dgid) {
    return neighbours().resolve(sgid_index, dgid);
}

result<driver::device_clock*> device::clock() {
    std::lock_guard lock(clock_mu_);
    if (!clock_) {
        auto c = driver::device_clock::create(*hca_);
        if (!c) return c.error();
        clock_ = std::move(c).value();
        // A new base pair and rate at each tick of the event thread: timestamps follow the
        // crystal's drift (sync() itself waits 100 ms between rates).
        hca_->on_tick([c = clock_.get()] { (void)c->sync(); });
    }
    return clock_.get();
}

result<std::unique_ptr<device>> device::open(const std::string& bdf, const options& o) {
    auto events = std::make_shared<detail::cq_events>();
    driver::hca::options opts;
    opts.port_timeout = o.port_timeout;
    opts.ipv4 = o.ipv4;
    opts.on_event = [events, user = o.on_event](const event& e) {
        // A dead device: the CQs flush from their next empty poll, and their waiters wake.
        // Not at a fatal report the device lives through (a page request not served):
        // flushing WRs a live device still runs would report them twice.
        if (e.what == event::fatal && e.device_dead && !events->dead.exchange(true)) events->signal_all();
        if (user) user(e);
    };
    opts.on_completion = [events, user = o.on_completion](std::uint32_t cqn) {
        events->signal(cqn);
        if (user) user(cqn);
    };
    // CXV_DAEMON: the function is the daemon's; this process attaches to it (docs/daemon.md).
    const char* daemon = std::getenv("CXV_DAEMON");
    auto h = [&]() -> result<std::unique_ptr<driver::hca>> {
        if (daemon != nullptr && *daemon != '\0') return cxv::daemon::attach(daemon, bdf, opts);
        auto dev = driver::vfio::device::open(bdf);
        if (!dev) return dev.error();
        return driver::hca::create(std::move(dev).value(), opts);
    }();
    if (!h) return h.error();
    std::unique_ptr<device> d(new device(std::move(h).value(), std::move(events)));
    // The device's Q counter set; without one (every set taken) QPs count to set 0,
    // which no command reads back here.
    if (auto c = driver::q_counter::create(*d->hca_)) d->counter_ = std::move(c).value();
    return d;
}

result<bool> device::write_combining() {
    std::lock_guard lock(wc_mu_);
    if (wc_known_) return wc_;
    // Through cxvd the UAR pages come from the VFIO device fd, mapped uncached: 8-byte
    // doorbells, without spending a QP on the self-test.
    if (hca_->attached()) {
        wc_known_ = true;
        wc_ = false;
        return wc_;
    }
    auto wc = driver::wc::self_test(*hca_);
    if (!wc) return wc.error();
    wc_ = *wc;
    wc_known_ = true;
    return wc_;
}

result<doorbell_mode> device::send_doorbell(std::optional<doorbell_mode> asked) {
    if (asked) return *asked;
    auto wc = write_combining();
    if (!wc) return wc.error();
    if (!*wc) return doorbell_mode::doorbell;
    return hw::cpu_has_movdir64b() ? doorbell_mode::movdir64b : doorbell_mode::blueflame;
}

result<device_counters> device::counters(bool clear) {
    device_counters c;
    auto v = driver::query_vport_counters(*hca_, clear);
    if (!v) return v.error();
    c.vport = *v;
    if (counter_) {
        auto q = counter_->query(clear);
        if (!q) return q.error();
        c.q = *q;
    }
    return c;
}

result<std::shared_ptr<pd>> device::alloc_pd() {
    auto p = driver::pd::create(*hca_);
    if (!p) return p.error();
    std::shared_ptr<pd> out(new pd());
    out->pd_ = std::move(p).value();
    out->pdn_ = out->pd_->pdn();
    return out;
}

result<port_info> device::port(unsigned n) { return hca_->query_port(n); }

result<std::array<std::uint8_t, 16>> device::gid(unsigned index, unsigned n) {
    auto p = hca_->query_port(n);
    if (!p) return p.error();
    if (index >= p->gids.size()) {
        return error{EINVAL, "cxv::device::gid: port " + std::to_string(n) + " has no GID at index " +
                                 std::to_string(index) + " (" + std::to_string(p->gids.size()) + " populated)"};
    }
    return p->gids[index];
}

std::optional<std::array<std::uint8_t, 4>> device::ipv4() const {
    if (hca_->roce_gids().empty()) return std::nullopt;
    return hca_->ipv4();
}

std::byte* device::bf_base() noexcept {
    const auto* wc = hca_->device().bar0_wc();
    return wc ? wc->base() : hca_->device().bar0().base();
}

// --- MR ----------------------------------------------------------------------------------

result<std::shared_ptr<mr>> mr::create(std::shared_ptr<pd> domain, void* addr, std::size_t length, unsigned access) {
    if (!domain) return error{EINVAL, "cxv::mr::create: no PD"};
    auto m = driver::mr::create(domain->object(), addr, length, access);
    if (!m) return m.error();
    std::shared_ptr<mr> out(new mr());
    out->pd_ = std::move(domain);
    out->mr_ = std::move(m).value();
    out->key_ = out->mr_->lkey();
    out->addr_ = out->mr_->addr();
    out->length_ = out->mr_->length();
    out->access_ = out->mr_->access();
    return out;
}

// --- CQ ----------------------------------------------------------------------------------

result<std::shared_ptr<cq>> cq::create(device& d, unsigned entries, const options& o) {
    driver::cq::attr a;
    a.entries = entries;
    a.cqe_size = o.cqe_size;
    a.overrun_ignore = o.ignore_overrun;
    auto c = driver::cq::create(d.hca(), a);
    if (!c) return c.error();
    std::shared_ptr<cq> out(new cq());
    out->cq_ = std::move(c).value();
    unsigned log = 0;
    while ((1u << log) < out->cq_->entries()) ++log;
    // The CQ arm doorbell is on the HCA's own UAR page (PRM "UAR").
    std::byte* uar = d.hca().device().bar0().base() + std::size_t{d.hca().uar()} * hw::uar_page_size;
    out->ring_ = queues::completion_queue(out->cq_->cqes(), log,
                                          reinterpret_cast<hw::cq_doorbell_record*>(out->cq_->doorbell_record()),
                                          uar, out->cq_->cqn(), out->cq_->cqe_size());
    out->qps_.init(max_qps);
    out->ring_.set_dead_flag(&d.events_->dead);
    out->event_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!out->event_fd_) return error{errno, std::string("cxv::cq::create: eventfd: ") + std::strerror(errno)};
    out->events_ = d.events_;
    {
        std::lock_guard lock(out->events_->mu);
        out->events_->fds[out->cq_->cqn()] = out->event_fd_.get();
    }
    return out;
}

cq::~cq() {
    if (events_) {
        std::lock_guard lock(events_->mu);
        events_->fds.erase(cq_->cqn());
    }
}

void cq::request_notify(bool solicited_only) noexcept { ring_.arm(solicited_only); }

bool cq::wait_event(std::chrono::milliseconds timeout) noexcept {
    // A dead device signals each CQ once; every later wait returns at once, for the
    // caller to poll its flushes (nothing else will come).
    if (events_ && events_->dead.load(std::memory_order_acquire)) return true;
    pollfd p{event_fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    std::uint64_t n = 0;
    if (::read(event_fd_.get(), &n, sizeof(n)) != sizeof(n) || n == 0) return false;
    ring_.on_event(static_cast<std::uint32_t>(n));  // one arm sequence step per event
    return true;
}

// --- SRQ ---------------------------------------------------------------------------------

result<std::shared_ptr<srq>> srq::create(std::shared_ptr<pd> domain, const attr& a) {
    if (!domain) return error{EINVAL, "cxv::srq::create: no PD"};
    auto s = driver::srq::create(domain->object(), a);
    if (!s) return s.error();
    std::shared_ptr<srq> out(new srq());
    out->pd_ = std::move(domain);
    out->srq_ = std::move(s).value();
    out->srqn_ = out->srq_->srqn();
    const auto& o = *out->srq_;
    unsigned log = 0;
    while ((1u << log) < o.wqe_count()) ++log;
    out->wr_ids_.assign(o.wqe_count(), 0);
    out->ring_ = queues::srq_ring(o.wqes(), log, o.wqe_shift(), out->wr_ids_.data(),
                                  reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record()));
    return out;
}

status srq::arm(unsigned limit) { return srq_->arm(limit); }

// --- QP ----------------------------------------------------------------------------------

namespace {

// A RoCE path with the peer's MAC device::peer_mac() finds (a QP's INIT2RTR, a UD address
// vector); EHOSTUNREACH when nobody answers ARP. Where it cannot be found for want of a
// raw queue (through a cxvd, whose clients do not steer) or of neighbour discovery (IPv6
// GIDs), the path as it is: the driver's own choice then stands (0 unless the GID names
// the MAC).
result<qp::path> with_peer_mac(device& d, const qp::path& p) {
    auto mac = d.peer_mac(p.sgid_index, p.dgid);
    if (!mac && mac.error().code == EHOSTUNREACH) return mac.error();
    qp::path with = p;
    if (mac) with.rmac = *mac;
    return with;
}

}  // namespace

result<std::shared_ptr<qp>> qp::create(device& d, const attr& a) {
    if (!a.send_cq || !a.recv_cq || !a.domain) return error{EINVAL, "cxv::qp::create: a PD and both CQs are needed"};
    auto chosen = d.send_doorbell(a.doorbell);
    if (!chosen) return chosen.error();
    const doorbell_mode mode = *chosen;
    if (a.type == qp_type::raw_packet) return create_raw(d, a, mode);
    if (a.strip_vlan) return error{EINVAL, "cxv::qp::create: only a raw packet QP strips VLAN tags"};
    driver::qp::attr da;
    da.type = a.type;
    da.domain = a.domain->object();
    da.send_cq = a.send_cq->object();
    da.recv_cq = a.recv_cq->object();
    if (a.shared) da.shared = a.shared->object();
    da.cap = a.cap;
    if (a.own_counters) {
        auto c = driver::q_counter::create(d.hca());
        if (!c) return c.error();
        da.counter = std::move(c).value();
    } else {
        da.counter = d.q_counter();
    }
    auto q = driver::qp::create(da);
    if (!q) return q.error();
    std::shared_ptr<qp> out(new qp());
    out->qp_ = std::move(q).value();
    out->qpn_ = out->qp_->qpn();
    out->type_ = a.type;
    out->dev_ = &d;
    out->pd_ = a.domain;
    out->scq_ = a.send_cq;
    out->rcq_ = a.recv_cq;
    out->srq_ = a.shared;
    driver::qp& o = *out->qp_;
    out->rings_ = std::make_shared<rings>();
    rings& rg = *out->rings_;
    out->mode_ = a.multi_producer ? doorbell_mode::doorbell : mode;
    auto* dbrec = reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record());
    rg.dbrecs[0] = o.doorbell_record();

    const unsigned log_sq = o.log_sq_size();
    rg.sq_wr_ids.assign(o.sq_wqebb_count(), 0);
    rg.sq_ends.assign(o.sq_wqebb_count(), 0);
    const auto& bf = o.bf();
    // BlueFlame copies through the write-combining mapping; 8-byte doorbells through the
    // uncached one (a store to a WC mapping would wait in the CPU's buffers).
    std::byte* reg = o.bf_register(mode != doorbell_mode::doorbell && !a.multi_producer);
    if (o.has_sq()) {
        rg.sq = queues::send_queue(o.sq(), log_sq, o.qpn(), a.type == qp_type::ud, rg.sq_wr_ids.data(),
                                   rg.sq_ends.data(), dbrec, reg, bf.size / 2, mode, o.max_send_wqebbs());
    } else {
        rg.sq = queues::send_queue::none(o.qpn());  // max_send_wr 0: every send is ENOMEM
    }
    const auto& cap = o.capabilities();
    const ibv_qp_type type = a.type == qp_type::rc ? IBV_QPT_RC : a.type == qp_type::uc ? IBV_QPT_UC : IBV_QPT_UD;
    // Without a send queue no limit is checked before the room (there is none: ENOMEM),
    // the order of rdma-core's mlx5 provider, whose room check comes first.
    out->send_ = o.has_sq() ? api::send_side{&rg.sq, cap.max_send_sge, cap.max_inline_data, type}
                            : api::send_side{&rg.sq, ~0u, ~0u, type};
    if (a.multi_producer) {
        if (!o.has_sq()) return error{EINVAL, "cxv::qp::create: a multi-producer QP needs a send queue"};
        unsigned slot = 1;
        while (slot < o.max_send_wqebbs()) slot <<= 1;
        if (slot > 8) return error{EINVAL, "cxv::qp::create: a multi-producer QP's WQEs must fit 8 basic blocks"};
        rg.mpsq = std::make_unique<queues::mp_send_queue>(o.sq(), log_sq, o.qpn(), a.type == qp_type::ud, slot,
                                                          dbrec, reg);
        out->mp_send_ = {rg.mpsq.get(), cap.max_send_sge, cap.max_inline_data, type};
    }
    out->signal_all_ = a.signal_all;
    out->own_counters_ = a.own_counters;
    out->other_send_ = a.multi_producer || a.signal_all;
    if (o.rq_wqe_count() != 0) {
        const unsigned log_rq = o.log_rq_size();
        rg.rq_wr_ids.assign(o.rq_wqe_count(), 0);
        rg.rq = queues::recv_queue(o.rq(), log_rq, o.rq_wqe_shift(), rg.rq_wr_ids.data(), dbrec, cap.max_recv_sge);
    } else {
        rg.rq = queues::recv_queue::srq_attached();
    }
    out->rq_ = &rg.rq;
    // Each CQ gets the rings of its role (both when it is both): a dead device's flush
    // completes the send queue on the send CQ and the receive queue on the receive CQ.
    const queues::qp_rings entry{o.qpn(), rg.mpsq ? nullptr : &rg.sq, rg.rq.srq() ? nullptr : &rg.rq,
                                 a.shared ? &a.shared->ring_ : nullptr, rg.mpsq.get()};
    const bool one_cq = a.send_cq == a.recv_cq;
    const queues::qp_rings send_entry{entry.qpn, entry.sq, one_cq ? entry.rq : nullptr, one_cq ? entry.srq : nullptr,
                                      entry.mpsq};
    const queues::qp_rings recv_entry{entry.qpn, one_cq ? entry.sq : nullptr, entry.rq, entry.srq,
                                      one_cq ? entry.mpsq : nullptr};
    if (!a.send_cq->attach(send_entry) || !a.recv_cq->attach(recv_entry)) {
        a.send_cq->detach(o.qpn(), out->rings_);
        a.recv_cq->detach(o.qpn(), out->rings_);
        return error{ENOSPC, "cxv::qp::create: the CQ serves its maximum of QPs"};
    }
    return out;
}

result<q_counter_values> qp::counters(bool clear) {
    if (!own_counters_ || !qp_ || !qp_->counter()) {
        return error{ENOENT, fmt::format("cxv::qp::counters: QP 0x{:x} counts to the device's set", qpn())};
    }
    return qp_->counter()->query(clear);
}

status qp::modify(qp_state to, const modify_attr& a) {
    if (raw_) return modify_raw(to);
    if (to == qp_state::rtr && (type_ == qp_type::rc || type_ == qp_type::uc) && !a.ah.rmac &&
        dev_->hca().ethernet()) {
        // RoCE: the path carries the peer's MAC (finding 19).
        auto with = with_peer_mac(*dev_, a.ah);
        if (!with) return with.error();
        modify_attr b = a;
        b.ah = *with;
        return qp_->modify(to, b);
    }
    auto s = qp_->modify(to, a);
    if (s && to == qp_state::reset) reset_rings();
    return s;
}

// 2RST_QP (or a raw packet QP's SQ and RQ to RST) sets the device's WQE counters back to
// 0 (PRM "QP State Transitions", "SQ State Machine"): the QP's completions still in its
// CQs go (they name WQEs of before), the rings start again at 0 and so do the doorbell
// records, or the device would take the records' old counters for WQEs posted anew. As
// with ibv_modify_qp(3) on rdma-core, nothing may poll the CQs or post to the QP
// meanwhile.
void qp::reset_rings() {
    queues::srq_ring* shared = srq_ ? &srq_->ring_ : nullptr;
    const std::uint32_t* raw_uidx = raw_ ? &rings_->user_index : nullptr;
    if (rcq_ == scq_) {
        rcq_->ring_.discard(qpn_, shared, raw_uidx);
    } else {
        scq_->ring_.discard(qpn_, static_cast<queues::srq_ring*>(nullptr));
        rcq_->ring_.discard(qpn_, shared, raw_uidx);
    }
    rings_->sq.reset();
    if (rings_->mpsq) rings_->mpsq->reset();
    if (!rings_->rq.srq()) rings_->rq.reset();
    for (std::byte* r : rings_->dbrecs) {
        auto* dbrec = reinterpret_cast<hw::wq_doorbell_record*>(r);
        if (dbrec == nullptr) continue;
        dbrec->rcv_counter = hw::be32{0};
        dbrec->snd_counter = hw::be32{0};
    }
}

result<qp_state> qp::query() {
    if (raw_) return raw_state();
    auto s = qp_->query();
    if (!s) return s.error();
    return static_cast<qp_state>(*s);
}

// The CQs drop the QP's rings from their tables (their pollers may be polling) and keep
// them until the pollers have let go: the QP's memory is not what a poller touches. An
// SRQ the QP held last goes with the rings.
qp::~qp() {
    // Its groups' MACs leave the vport's filter (DESTROY_QP takes the QP out of the groups).
    if (group_filter_) {
        for (const gid& g : groups_) (void)group_filter_->leave(*eth::neighbours::mac_of_multicast(g));
    }
    if (rings_ && srq_ && srq_.use_count() == 1) rings_->shared = std::move(srq_);
    if (scq_) scq_->detach(qpn_, rings_);
    if (rcq_) rcq_->detach(qpn_, rings_);
}

// A multi-producer QP, or one whose every WQE is signaled. For signal_all the WRs are
// copied with IBV_SEND_SIGNALED set (the caller's list stays as it is) a chunk at a time,
// each chunk posted as one list (one doorbell), and a failing copy maps back to the
// caller's WR for *bad_wr.
int qp::post_send_other(ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
    if (!signal_all_) return post_send_ring(wr, bad_wr);
    constexpr int chunk = kSignalAllChunk;
    ibv_send_wr copy[chunk];
    ibv_send_wr* from[chunk];
    while (wr != nullptr) {
        int n = 0;
        for (; wr != nullptr && n < chunk; wr = wr->next, ++n) {
            copy[n] = *wr;
            copy[n].send_flags |= IBV_SEND_SIGNALED;
            copy[n].next = nullptr;
            if (n > 0) copy[n - 1].next = &copy[n];
            from[n] = wr;
        }
        ibv_send_wr* bad = nullptr;
        if (const int err = post_send_ring(copy, &bad); err != 0) {
            *bad_wr = from[bad - copy];
            return err;
        }
    }
    return 0;
}

int qp::post_send(std::span<ibv_send_wr> wrs, ibv_send_wr** bad_wr) noexcept {
    if (wrs.empty()) return 0;
    for (std::size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
    wrs.back().next = nullptr;
    return post_send(wrs.data(), bad_wr);
}

int qp::post_recv(std::span<ibv_recv_wr> wrs, ibv_recv_wr** bad_wr) noexcept {
    if (wrs.empty()) return 0;
    for (std::size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
    wrs.back().next = nullptr;
    return post_recv(wrs.data(), bad_wr);
}

const char* wc_status_str(int status) noexcept {
    switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR: return "memory management operation error";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR: return "aborted error";
    case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
    case IBV_WC_GENERAL_ERR: return "general error";
    case IBV_WC_TM_ERR: return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
    default: return "unknown";
    }
}

result<api::address_handle> make_address_handle(device& d, const qp::path& p) {
    const bool ethernet = d.hca().ethernet();
    if (!ethernet || p.rmac) return make_address_handle(p, ethernet);
    auto with = with_peer_mac(d, p);
    if (!with) return with.error();
    return make_address_handle(*with, true);
}

api::address_handle make_address_handle(const qp::path& p, bool ethernet) {
    api::address_handle ah{};
    // RoCE: the peer's MAC as given, or where its GID names it, else 0.
    std::uint8_t mac[6] = {};
    if (ethernet) {
        if (p.rmac) {
            std::copy(p.rmac->begin(), p.rmac->end(), mac);
        } else if (const auto m = eth::neighbours::mac_of_link_local(p.dgid)) {
            std::copy(m->begin(), m->end(), mac);
        } else if (const auto g = eth::neighbours::mac_of_multicast(p.dgid)) {
            std::copy(g->begin(), g->end(), mac);
        }
    }
    std::uint8_t gid[16];
    std::memcpy(gid, p.dgid.data(), 16);
    const bool grh = ethernet || p.grh;
    const std::uint32_t grh_gid_fl = (grh ? 1u << 30 : 0) | (std::uint32_t{p.sgid_index} << 20) | (p.flow_label & 0xfffff);
    hw::wqe_datagram_seg seg{};
    hw::set_datagram_seg(seg, 0, 0, true, p.sl, 0, ethernet ? 0 : p.dlid, mac, p.traffic_class, p.hop_limit,
                         grh_gid_fl, reinterpret_cast<const std::uint8_t(&)[16]>(gid));
    ah.av = seg.av;
    return ah;
}

}  // namespace cxv
