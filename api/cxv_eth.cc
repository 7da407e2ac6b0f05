// The raw Ethernet API (cxv_eth.h) over driver/res/eth.h and flow.h.
#include "api/cxv_eth.h"

#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "driver/hca/clock.h"
#include "driver/hca/hca.h"
#include "driver/res/cq.h"
#include "driver/res/eth.h"
#include "driver/res/flow.h"
#include "driver/res/pd_mr.h"

namespace cxv::eth {

mac address(device& d) { return d.hca().mac(); }

mac multicast_mac(const ipv4& g) noexcept {
    return {0x01, 0x00, 0x5e, static_cast<std::uint8_t>(g[1] & 0x7f), g[2], g[3]};
}
mac multicast_mac(const ipv6& g) noexcept { return {0x33, 0x33, g[12], g[13], g[14], g[15]}; }

namespace {

unsigned log2_of(unsigned v) { return static_cast<unsigned>(std::countr_zero(std::bit_ceil(std::max(v, 1u)))); }

}  // namespace

// --- queue ---------------------------------------------------------------------------

result<std::shared_ptr<queue>> queue::create(device& d, const attr& a) {
    if (a.buffer_size < 64 || !std::has_single_bit(a.buffer_size)) {
        return error{EINVAL, fmt::format("cxv::eth::queue::create: buffer_size {} (a power of two, 64 or more)",
                                         a.buffer_size)};
    }
    auto chosen = d.send_doorbell(a.doorbell);
    if (!chosen) return chosen.error();
    const doorbell_mode mode = *chosen;
    driver::hca& h = d.hca();
    std::shared_ptr<queue> q(new queue());
    q->dev_ = &d;
    auto p = d.alloc_pd();
    if (!p) return p.error();
    q->pd_ = std::move(p).value();
    auto td = driver::transport_domain::create(h);
    if (!td) return td.error();
    q->td_ = std::move(td).value();
    auto tis = driver::tis::create(q->td_);
    if (!tis) return tis.error();
    q->tis_ = std::move(tis).value();

    // The receive side: its CQ as deep as its ring can complete packets (a striding WQE
    // may take one per stride), its RQ, the buffers.
    const unsigned log_wqes = log2_of(a.recv_entries);
    const unsigned log_buffer = a.striding ? a.log_strides + a.log_stride : log2_of(a.buffer_size);
    driver::cq::attr rca;
    rca.entries = std::min(1u << (log_wqes + (a.striding ? a.log_strides : 0)), 1u << 22);
    auto rcq = driver::cq::create(h, rca);
    if (!rcq) return rcq.error();
    q->rcq_ = std::move(rcq).value();
    driver::rq::attr ra;
    ra.domain = q->pd_->object();
    ra.recv_cq = q->rcq_;
    ra.wqes = 1u << log_wqes;
    ra.multi_packet = a.striding;
    ra.strides = {a.log_strides, a.log_stride};
    ra.strip_vlan = a.strip_vlan;
    auto rq = driver::rq::create(ra);
    if (!rq) return rq.error();
    q->rq_obj_ = std::move(rq).value();
    auto bufs = buffer::create(std::size_t{1} << (log_wqes + log_buffer));
    if (!bufs) return bufs.error();
    q->bufs_ = std::move(bufs).value();
    auto m = mr::create(q->pd_, q->bufs_->data(), q->bufs_->size(), access_local_write);
    if (!m) return m.error();
    q->bufs_mr_ = std::move(m).value();
    queues::eth_recv_queue::layout l;
    l.wqes = q->rq_obj_->wqes();
    l.log_wqes = log_wqes;
    l.wqe_shift = q->rq_obj_->wqe_shift();
    l.dbrec = reinterpret_cast<hw::wq_doorbell_record*>(q->rq_obj_->doorbell_record());
    l.buffers = q->bufs_->data();
    l.log_buffer = log_buffer;
    l.lkey = q->bufs_mr_->lkey();
    l.log_strides = a.striding ? a.log_strides : 0;
    l.log_stride = a.striding ? a.log_stride : 0;
    l.cq = queues::cqe_reader(q->rcq_->cqes(), q->rcq_->log_entries(),
                              reinterpret_cast<hw::cq_doorbell_record*>(q->rcq_->doorbell_record()));
    q->rq_ = queues::eth_recv_queue(l);
    q->rq_.start();  // every WQE posted before the RQ is RDY
    if (auto s = q->rq_obj_->ready(); !s) return s.error();
    auto tir = driver::tir::create(q->td_, q->rq_obj_);
    if (!tir) return tir.error();
    q->tir_ = std::move(tir).value();

    // The send side.
    driver::cq::attr sca;
    sca.entries = std::max(a.send_entries, 16u);
    auto scq = driver::cq::create(h, sca);
    if (!scq) return scq.error();
    q->scq_ = std::move(scq).value();
    driver::sq::attr sa;
    sa.domain = q->pd_->object();
    sa.send_cq = q->scq_;
    sa.transport = q->tis_;
    sa.wqebbs = std::max(a.send_entries, 4 * queues::eth_wqe::max_bbs());
    auto sq = driver::sq::create(sa);
    if (!sq) return sq.error();
    q->sq_obj_ = std::move(sq).value();
    driver::sq& o = *q->sq_obj_;
    const unsigned bbs = o.wqebb_count();
    q->sq_ids_.assign(bbs, 0);
    q->sq_ends_.assign(bbs, 0);
    q->sq_ = queues::send_queue(o.wqes(), log2_of(bbs), o.sqn(), false, q->sq_ids_.data(), q->sq_ends_.data(),
                                reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record()),
                                o.bf_register(mode != doorbell_mode::doorbell), o.bf().size / 2, mode,
                                queues::eth_wqe::max_bbs());
    q->scq_ring_ = queues::eth_send_cq(
        queues::cqe_reader(q->scq_->cqes(), q->scq_->log_entries(),
                           reinterpret_cast<hw::cq_doorbell_record*>(q->scq_->doorbell_record())),
        &q->sq_);
    // Own completion requests often enough that the largest frames cannot fill the ring
    // between two of them.
    q->signal_every_ = std::max(1u, bbs / (4 * queues::eth_wqe::max_bbs()));
    if (auto s = o.ready(); !s) return s.error();
    // The device clock, where there is one (not through cxvd).
    if (auto c = d.clock()) q->clock_ = *c;
    return q;
}

queue::~queue() = default;

int queue::poll_send(std::span<send_completion> out) noexcept {
    int n = 0;
    const int max = static_cast<int>(out.size());
    while (n < max) {
        const int got = scq_ring_.poll(out.data() + n, max - n);
        if (got == 0) break;
        // The queue's own completion requests are not reported (unless one failed).
        int kept = n;
        for (int i = n; i < n + got; ++i) {
            const send_completion& c = out[static_cast<std::size_t>(i)];
            if (c.id != kOwnId || c.status != queues::wc_success) out[static_cast<std::size_t>(kept++)] = c;
        }
        n = kept;
    }
    return n;
}

std::int64_t queue::to_ns(std::uint64_t ticks) const noexcept {
    return clock_ != nullptr ? clock_->to_realtime_ns(ticks) : 0;
}
std::uint32_t queue::sqn() const noexcept { return sq_obj_->sqn(); }
std::uint32_t queue::rqn() const noexcept { return rq_obj_->rqn(); }

// --- rss -----------------------------------------------------------------------------

result<std::shared_ptr<rss>> rss::create(device& d, std::span<const std::shared_ptr<queue>> queues, const attr& a) {
    if (queues.empty()) return error{EINVAL, "cxv::eth::rss::create: no queue"};
    if (a.ip_version != 4 && a.ip_version != 6) {
        return error{EINVAL, fmt::format("cxv::eth::rss::create: IP version {}", a.ip_version)};
    }
    std::shared_ptr<rss> r(new rss());
    r->queues_.assign(queues.begin(), queues.end());
    if (a.key) {
        r->key_ = *a.key;
    } else {
        std::size_t got = 0;
        while (got < r->key_.size()) {
            const ssize_t n = ::getrandom(r->key_.data() + got, r->key_.size() - got, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return error{errno, "cxv::eth::rss::create: getrandom for the hash key failed"};
            got += static_cast<std::size_t>(n);
        }
    }
    auto td = driver::transport_domain::create(d.hca());
    if (!td) return td.error();
    r->td_ = std::move(td).value();
    std::vector<std::shared_ptr<driver::rq>> rqs;
    for (const auto& q : queues) {
        if (!q) return error{EINVAL, "cxv::eth::rss::create: a null queue"};
        rqs.push_back(q->rq_object());
    }
    auto t = driver::rqt::create(rqs);
    if (!t) return t.error();
    r->table_ = std::move(t).value();
    driver::rx_hash h;
    h.key = r->key_;
    h.l3_type = a.ip_version == 4 ? driver::rx_hash::l3::ipv4 : driver::rx_hash::l3::ipv6;
    h.l4_type = a.ports == l4::udp   ? driver::rx_hash::l4::udp
                : a.ports == l4::tcp ? driver::rx_hash::l4::tcp
                                     : driver::rx_hash::l4::none;
    h.selected = driver::rx_hash::src_ip | driver::rx_hash::dst_ip;
    if (a.ports != l4::none) h.selected |= driver::rx_hash::l4_sport | driver::rx_hash::l4_dport;
    auto tir = driver::tir::create(r->td_, r->table_, h);
    if (!tir) return tir.error();
    r->tir_ = std::move(tir).value();
    return r;
}

rss::~rss() = default;

// --- steering ------------------------------------------------------------------------

namespace {

// Whether a value has bits outside its mask.
template <std::size_t N>
bool outside(const std::array<std::uint8_t, N>& v, const std::array<std::uint8_t, N>& mask) {
    for (std::size_t i = 0; i < N; ++i) {
        if ((v[i] & ~mask[i]) != 0) return true;
    }
    return false;
}
template <typename T>
bool outside(const std::optional<T>& v, const T& mask) {
    if (!v) return false;
    if constexpr (std::is_integral_v<T>) {
        return (*v & ~mask) != 0;
    } else {
        return outside(*v, mask);
    }
}

// The first field whose value has bits outside its mask (null: none).
const char* stray_bits(const match& m) {
    const match::masks& k = m.mask;
    if (outside(m.dmac, k.dmac)) return "dmac";
    if (outside(m.smac, k.smac)) return "smac";
    if (outside(m.ethertype, k.ethertype)) return "ethertype";
    if (outside(m.vlan, std::uint16_t(k.vlan & 0xfff))) return "vlan";
    if (outside(m.vlan_prio, std::uint8_t(k.vlan_prio & 7))) return "vlan_prio";
    if (outside(m.vlan_cfi, std::uint8_t{1})) return "vlan_cfi";
    if (outside(m.dscp, std::uint8_t(k.dscp & 0x3f))) return "dscp";
    if (outside(m.ecn, std::uint8_t(k.ecn & 3))) return "ecn";
    if (outside(m.ip_protocol, k.ip_protocol)) return "ip_protocol";
    if (outside(m.src_ipv4, k.src_ipv4)) return "src_ipv4";
    if (outside(m.dst_ipv4, k.dst_ipv4)) return "dst_ipv4";
    if (outside(m.src_ipv6, k.src_ipv6)) return "src_ipv6";
    if (outside(m.dst_ipv6, k.dst_ipv6)) return "dst_ipv6";
    if (outside(m.udp_sport, k.sport) || outside(m.tcp_sport, k.sport)) return "sport";
    if (outside(m.udp_dport, k.dport) || outside(m.tcp_dport, k.dport)) return "dport";
    if (outside(m.ipv6_flow_label, k.ipv6_flow_label & 0xfffff)) return "ipv6_flow_label";
    return nullptr;
}

driver::flow_match to_flow_match(const match& m) {
    const match::masks& k = m.mask;
    driver::flow_match f;
    if (m.dmac) f.dmac(*m.dmac, k.dmac);
    if (m.smac) f.smac(*m.smac, k.smac);
    if (m.ethertype) f.ethertype(*m.ethertype, k.ethertype);
    if (m.vlan) f.vlan(*m.vlan, k.vlan);
    if (m.vlan_prio) f.vlan_prio(*m.vlan_prio, k.vlan_prio);
    if (m.vlan_cfi) f.vlan_cfi(*m.vlan_cfi);
    if (m.dscp) f.ip_dscp(*m.dscp, k.dscp);
    if (m.ecn) f.ip_ecn(*m.ecn, k.ecn);
    if (m.ip_version) f.ip_version(*m.ip_version);
    if (m.ip_protocol) f.ip_protocol(*m.ip_protocol, k.ip_protocol);
    if (m.src_ipv4) f.src_ipv4(*m.src_ipv4, k.src_ipv4);
    if (m.dst_ipv4) f.dst_ipv4(*m.dst_ipv4, k.dst_ipv4);
    if (m.src_ipv6) f.src_ipv6(*m.src_ipv6, k.src_ipv6);
    if (m.dst_ipv6) f.dst_ipv6(*m.dst_ipv6, k.dst_ipv6);
    if (m.udp_sport) f.udp_sport(*m.udp_sport, k.sport);
    if (m.udp_dport) f.udp_dport(*m.udp_dport, k.dport);
    if (m.tcp_sport) f.tcp_sport(*m.tcp_sport, k.sport);
    if (m.tcp_dport) f.tcp_dport(*m.tcp_dport, k.dport);
    if (m.ipv6_flow_label) f.ipv6_flow_label(*m.ipv6_flow_label, k.ipv6_flow_label);
    return f;
}

}  // namespace

namespace {

// Each device's steering (steering::of): the last create()'s, while it lives.
std::mutex registry_mu;
std::map<const device*, std::weak_ptr<steering>> registry;

}  // namespace

result<std::shared_ptr<steering>> steering::of(device& d) {
    static std::mutex making;  // two first callers make one steering, not two roots
    std::lock_guard made(making);
    {
        std::lock_guard lock(registry_mu);
        if (const auto it = registry.find(&d); it != registry.end()) {
            if (auto s = it->second.lock()) return s;
        }
    }
    return create(d);
}

result<std::shared_ptr<steering>> steering::create(device& d, const attr& a) {
    if (a.group_size == 0 || a.log_size > 24 || a.group_size > (1u << a.log_size)) {
        return error{EINVAL, fmt::format("cxv::eth::steering::create: groups of {} in a table of 2^{}", a.group_size,
                                         a.log_size)};
    }
    std::shared_ptr<steering> s(new steering());
    s->dev_ = &d;
    s->attr_ = a;
    driver::flow_table::attr ta;
    ta.log_size = a.log_size;
    auto t = driver::flow_table::create(d.hca(), ta);
    if (!t) return t.error();
    table& root = s->tables_[0];
    root.t = std::move(t).value();
    if (auto r = root.t->make_root(); !r) return r.error();
    std::lock_guard lock(registry_mu);
    std::erase_if(registry, [](const auto& e) { return e.second.expired(); });
    registry[&d] = s;
    return s;
}

steering::~steering() {
    // The rules hold the steering (rule::owner_), so none is left; the groups go before the
    // tables, and a table before the one it misses to (which it holds).
    for (auto& [priority, t] : tables_) t.groups.clear();
    for (auto& [priority, t] : tables_) t.t.reset();
}

result<steering::table*> steering::table_of(unsigned priority) {
    if (const auto it = tables_.find(priority); it != tables_.end()) return &it->second;
    // Between the priorities before and after it (the root, priority 0, is always there):
    // it misses to the next one, and the one before now misses to it.
    const auto next = tables_.upper_bound(priority);
    auto before = std::prev(next);
    driver::flow_table::attr ta;
    ta.level = priority;
    ta.log_size = attr_.log_size;
    if (next != tables_.end()) ta.miss = next->second.t;
    auto t = driver::flow_table::create(dev_->hca(), ta);
    if (!t) return t.error();
    if (auto r = before->second.t->set_miss(*t); !r) return r.error();
    table& made = tables_[priority];
    made.t = std::move(t).value();
    return &made;
}

result<std::unique_ptr<rule>> steering::add(const match& m, std::shared_ptr<queue> to, const rule::options& o) {
    if (!to) return error{EINVAL, "cxv::eth::steering::add: no queue"};
    return make(m, target{std::move(to), nullptr, false, nullptr}, o);
}
result<std::unique_ptr<rule>> steering::add(const match& m, std::shared_ptr<rss> to, const rule::options& o) {
    if (!to) return error{EINVAL, "cxv::eth::steering::add: no RSS group"};
    return make(m, target{nullptr, std::move(to), false, nullptr}, o);
}
result<std::unique_ptr<rule>> steering::add(const match& m, std::shared_ptr<driver::tir> to,
                                             const rule::options& o) {
    if (!to) return error{EINVAL, "cxv::eth::steering::add: no TIR"};
    return make(m, target{nullptr, nullptr, false, std::move(to)}, o);
}
result<std::unique_ptr<rule>> steering::drop(const match& m, const rule::options& o) {
    return make(m, target{nullptr, nullptr, true, nullptr}, o);
}

result<std::unique_ptr<rule>> steering::make(const match& m, target t, const rule::options& o) {
    if (o.flow_tag > 0xffffff) {
        return error{EINVAL, fmt::format("cxv::eth::steering::add: flow tag {:#x} (24 bits)", o.flow_tag)};
    }
    if (const char* f = stray_bits(m)) {
        return error{EINVAL, fmt::format("cxv::eth::steering::add: the value of {} has bits outside its mask", f)};
    }
    if (o.priority >= kPriorities) {
        return error{EINVAL, fmt::format("cxv::eth::steering::add: priority {} (0 to {})", o.priority,
                                         kPriorities - 1)};
    }
    const driver::flow_match fm = to_flow_match(m);
    static_assert(sizeof(group::criteria) == driver::flow_match::size);
    std::lock_guard lock(mu_);
    auto tab = table_of(o.priority);
    if (!tab) return tab.error();
    std::vector<group>& groups = (*tab)->groups;
    const auto& ft = (*tab)->t;
    // The group of this rule's fields, or a new one in the table's next free range. A
    // packet meets the groups in the order of their entries, so rules added later (in a
    // later group) come after those before them.
    unsigned gi = static_cast<unsigned>(groups.size());
    unsigned index = 0;
    if (!groups.empty() && groups.back().criteria == fm.criteria()) {  // only the last group takes more
        const auto& u = groups.back().used;
        const auto free = std::find(u.begin(), u.end(), false);
        if (free != u.end()) {
            gi = static_cast<unsigned>(groups.size() - 1);
            index = static_cast<unsigned>(free - u.begin());
        }
    }
    if (gi == groups.size()) {
        const unsigned first = groups.empty() ? 0 : groups.back().first + attr_.group_size;
        if (first + attr_.group_size > ft->size()) {
            return error{ENOSPC, fmt::format("cxv::eth::steering::add: the table's {} entries are in groups",
                                             ft->size())};
        }
        auto g = driver::flow_group::create(ft, first, first + attr_.group_size - 1, fm);
        if (!g) return g.error();
        group ng;
        ng.criteria = fm.criteria();
        ng.g = std::move(g).value();
        ng.used.assign(attr_.group_size, false);
        ng.first = first;
        groups.push_back(std::move(ng));
        index = 0;
    }
    group& g = groups[gi];
    std::unique_ptr<rule> r(new rule());
    driver::flow_rule::action act;
    if (t.q) act.to_tirs.push_back(t.q->tir());
    if (t.r) act.to_tirs.push_back(t.r->tir());
    if (t.tir) act.to_tirs.push_back(t.tir);
    act.drop = t.drop;
    act.flow_tag = o.flow_tag;
    if (o.count) {
        auto c = driver::flow_counter::create(dev_->hca());
        if (!c) return c.error();
        r->counter_ = std::move(c).value();
        act.count = r->counter_;
    }
    auto fr = driver::flow_rule::create(g.g, g.first + index, fm, act);
    if (!fr) return fr.error();
    g.used[index] = true;
    r->rule_ = std::move(fr).value();
    r->owner_ = shared_from_this();
    r->queue_ = std::move(t.q);
    r->rss_ = std::move(t.r);
    r->tir_ = std::move(t.tir);
    r->priority_ = o.priority;
    r->group_ = gi;
    r->index_ = index;
    return r;
}

void steering::release(unsigned priority, unsigned gi, unsigned index) noexcept {
    std::lock_guard lock(mu_);
    const auto it = tables_.find(priority);
    if (it == tables_.end()) return;
    auto& groups = it->second.groups;
    if (gi < groups.size() && index < groups[gi].used.size()) groups[gi].used[index] = false;
}

status steering::set_groups(const std::vector<std::pair<mac, unsigned>>& next) {
    std::vector<mac> macs;
    macs.reserve(next.size());
    for (const auto& [m, n] : next) macs.push_back(m);
    if (auto s = driver::set_multicast_macs(dev_->hca(), macs); !s) return s.error();
    joined_ = next;
    return ok_status();
}

status steering::join(const mac& group) {
    if ((group[0] & 1) == 0) return error{EINVAL, "cxv::eth::steering::join: not a multicast MAC"};
    std::lock_guard lock(mu_);
    const auto it = std::find_if(joined_.begin(), joined_.end(), [&](const auto& j) { return j.first == group; });
    if (it != joined_.end()) {
        ++it->second;
        return ok_status();
    }
    auto next = joined_;
    next.emplace_back(group, 1);
    return set_groups(next);
}

status steering::leave(const mac& group) {
    std::lock_guard lock(mu_);
    const auto it = std::find_if(joined_.begin(), joined_.end(), [&](const auto& j) { return j.first == group; });
    if (it == joined_.end()) return error{ENOENT, "cxv::eth::steering::leave: not a group joined"};
    if (it->second > 1) {
        --it->second;
        return ok_status();
    }
    auto next = joined_;
    next.erase(next.begin() + (it - joined_.begin()));
    return set_groups(next);
}

status steering::promiscuous(bool unicast, bool multicast) {
    return driver::set_promiscuous(dev_->hca(), unicast, multicast, false);
}

// --- rule ----------------------------------------------------------------------------

rule::~rule() {
    // The entry goes first (its packets stop), then its counter, then the slot is free.
    rule_.reset();
    counter_.reset();
    if (owner_) owner_->release(priority_, group_, index_);
}

result<traffic> rule::counters(bool clear) {
    if (!counter_) return error{ENOENT, "cxv::eth::rule::counters: the rule counts nothing (options::count)"};
    return counter_->query(clear);
}

}  // namespace cxv::eth
