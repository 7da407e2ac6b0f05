#include "api/cxv.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "driver/vfio/vfio.h"
#include "driver/wc/wc_selftest.h"
#include "hw/barrier.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"

namespace cxv {

void detail::cq_events::signal(std::uint32_t cqn) {
    std::lock_guard lock(mu);
    const auto it = fds.find(cqn);
    if (it == fds.end()) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(it->second, &one, sizeof(one));
}

result<std::unique_ptr<device>> device::open(const std::string& bdf, const driver::hca::options& o) {
    auto dev = driver::vfio::device::open(bdf);
    if (!dev) return dev.error();
    auto events = std::make_shared<detail::cq_events>();
    driver::hca::options opts = o;
    opts.on_completion = [events, user = o.on_completion](std::uint32_t cqn) {
        events->signal(cqn);
        if (user) user(cqn);
    };
    auto h = driver::hca::create(std::move(dev).value(), opts);
    if (!h) return h.error();
    std::unique_ptr<device> d(new device(std::move(h).value(), std::move(events)));
    // The device's Q counter set; without one (every set taken) QPs count to set 0,
    // which no command reads back here.
    if (auto c = driver::q_counter::create(*d->hca_)) d->counter_ = std::move(c).value();
    return d;
}

result<bool> device::write_combining() {
    if (wc_known_) return wc_;
    auto wc = driver::wc::self_test(*hca_);
    if (!wc) return wc.error();
    wc_ = *wc;
    wc_known_ = true;
    return wc_;
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

// --- CQ ----------------------------------------------------------------------------------

result<std::shared_ptr<cq>> cq::create(device& d, unsigned entries) {
    driver::cq::attr a;
    a.entries = entries;
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
                                          uar, out->cq_->cqn());
    out->qps_.init(max_qps);
    out->event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (out->event_fd_ < 0) return error{errno, std::string("cxv::cq::create: eventfd: ") + std::strerror(errno)};
    out->events_ = d.events_;
    {
        std::lock_guard lock(out->events_->mu);
        out->events_->fds[out->cq_->cqn()] = out->event_fd_;
    }
    return out;
}

cq::~cq() {
    if (events_) {
        std::lock_guard lock(events_->mu);
        events_->fds.erase(cq_->cqn());
    }
    if (event_fd_ >= 0) ::close(event_fd_);
}

void cq::request_notify(bool solicited_only) noexcept { ring_.arm(solicited_only); }

bool cq::wait_event(std::chrono::milliseconds timeout) noexcept {
    pollfd p{event_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    std::uint64_t n = 0;
    if (::read(event_fd_, &n, sizeof(n)) != sizeof(n) || n == 0) return false;
    ring_.on_event(static_cast<std::uint32_t>(n));  // one arm sequence step per event
    return true;
}

// --- SRQ ---------------------------------------------------------------------------------

result<std::shared_ptr<srq>> srq::create(std::shared_ptr<pd> domain, const driver::srq::attr& a) {
    auto s = driver::srq::create(std::move(domain), a);
    if (!s) return s.error();
    std::shared_ptr<srq> out(new srq());
    out->srq_ = std::move(s).value();
    const auto& o = *out->srq_;
    unsigned log = 0;
    while ((1u << log) < o.wqe_count()) ++log;
    out->wr_ids_.assign(o.wqe_count(), 0);
    out->ring_ = queues::srq_ring(o.wqes(), log, o.wqe_shift(), out->wr_ids_.data(),
                                  reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record()));
    return out;
}

// --- QP ----------------------------------------------------------------------------------

struct qp::rings {
    std::vector<std::uint64_t> sq_wr_ids, rq_wr_ids;
    std::vector<std::uint32_t> sq_ends;
    queues::send_queue sq;
    std::unique_ptr<queues::mp_send_queue> mpsq;
    queues::recv_queue rq;
    // The SRQ the QP's receives come from, when the QP held it last: a poller retiring
    // into its ring writes its WQEs' free list, so it stays as long as the rings do.
    std::shared_ptr<srq> shared;
};

result<std::shared_ptr<qp>> qp::create(device& d, const attr& a) {
    if (!a.send_cq || !a.recv_cq || !a.domain) return error{EINVAL, "cxv::qp::create: a PD and both CQs are needed"};
    doorbell_mode mode = doorbell_mode::doorbell;
    if (a.doorbell) {
        mode = *a.doorbell;
    } else {
        auto wc = d.write_combining();
        if (!wc) return wc.error();
        if (*wc) mode = hw::cpu_has_movdir64b() ? doorbell_mode::movdir64b : doorbell_mode::blueflame;
    }
    driver::qp::attr da;
    da.type = a.type;
    da.domain = a.domain;
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
    out->scq_ = a.send_cq;
    out->rcq_ = a.recv_cq;
    out->srq_ = a.shared;
    driver::qp& o = *out->qp_;
    out->rings_ = std::make_shared<rings>();
    rings& rg = *out->rings_;
    out->mode_ = a.multi_producer ? doorbell_mode::doorbell : mode;
    auto* dbrec = reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record());

    const unsigned log_sq = o.log_sq_size();
    rg.sq_wr_ids.assign(o.sq_wqebb_count(), 0);
    rg.sq_ends.assign(o.sq_wqebb_count(), 0);
    const auto& bf = o.bf();
    // BlueFlame copies through the write-combining mapping; 8-byte doorbells through the
    // uncached one (a store to a WC mapping would wait in the CPU's buffers).
    std::byte* reg = o.bf_register(mode != doorbell_mode::doorbell && !a.multi_producer);
    rg.sq = queues::send_queue(o.sq(), log_sq, o.qpn(), a.type == qp_type::ud, rg.sq_wr_ids.data(),
                               rg.sq_ends.data(), dbrec, reg, bf.size / 2, mode, o.max_send_wqebbs());
    const auto& cap = o.capabilities();
    const ibv_qp_type type = a.type == qp_type::rc ? IBV_QPT_RC : a.type == qp_type::uc ? IBV_QPT_UC : IBV_QPT_UD;
    out->send_ = {&rg.sq, cap.max_send_sge, cap.max_inline_data, type};
    if (a.multi_producer) {
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
    const queues::qp_rings entry{o.qpn(), rg.mpsq ? nullptr : &rg.sq, rg.rq.srq() ? nullptr : &rg.rq,
                                 a.shared ? &a.shared->ring_ : nullptr, rg.mpsq.get()};
    if (!a.send_cq->attach(entry) || !a.recv_cq->attach(entry)) {
        a.send_cq->detach(o.qpn(), out->rings_);
        a.recv_cq->detach(o.qpn(), out->rings_);
        return error{ENOSPC, "cxv::qp::create: the CQ serves its maximum of QPs"};
    }
    return out;
}

result<driver::q_counter_values> qp::counters(bool clear) {
    if (!own_counters_ || !qp_->counter()) {
        return error{ENOENT, fmt::format("cxv::qp::counters: QP 0x{:x} counts to the device's set", qpn())};
    }
    return qp_->counter()->query(clear);
}

// The CQs drop the QP's rings from their tables (their pollers may be polling) and keep
// them until the pollers have let go: the QP's memory is not what a poller touches. An
// SRQ the QP held last goes with the rings.
qp::~qp() {
    if (rings_ && srq_ && srq_.use_count() == 1) rings_->shared = std::move(srq_);
    if (scq_) scq_->detach(qp_->qpn(), rings_);
    if (rcq_) rcq_->detach(qp_->qpn(), rings_);
}

// A multi-producer QP, or one whose every WQE is signaled. For signal_all the WRs are
// copied with IBV_SEND_SIGNALED set (the caller's list stays as it is) a chunk at a time,
// each chunk posted as one list (one doorbell), and a failing copy maps back to the
// caller's WR for *bad_wr.
int qp::post_send_other(ibv_send_wr* wr, ibv_send_wr** bad_wr) noexcept {
    if (!signal_all_) return post_send_ring(wr, bad_wr);
    constexpr int chunk = 16;
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
    default: return "unknown";
    }
}

api::address_handle make_address_handle(const driver::qp::path& p, bool ethernet) {
    api::address_handle ah{};
    const std::uint8_t no_mac[6] = {};
    std::uint8_t gid[16];
    std::memcpy(gid, p.dgid.data(), 16);
    const bool grh = ethernet || p.grh;
    const std::uint32_t grh_gid_fl = (grh ? 1u << 30 : 0) | (std::uint32_t{p.sgid_index} << 20) | (p.flow_label & 0xfffff);
    hw::wqe_datagram_seg seg{};
    hw::set_datagram_seg(seg, 0, 0, true, p.sl, 0, ethernet ? 0 : p.dlid, no_mac, p.traffic_class, p.hop_limit,
                         grh_gid_fl, reinterpret_cast<const std::uint8_t(&)[16]>(gid));
    ah.av = seg.av;
    return ah;
}

}  // namespace cxv
