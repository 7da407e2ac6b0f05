// The transport engine's access to work queues and data (PRM "Send and Receive Queue
// Buffers", "Doorbell Record", "Memory Keys"), and what happens to a QP in error
// (IBA 10.3.1 "QP State": flushing; PRM "Completion Queue Entry Format": error CQEs).
//
// Everything here reads and writes host memory only through the IOMMU, and data only
// through memory keys: a scatter or gather is translated and checked as a whole before
// the first byte moves, so a refused access leaves memory as it was.
#include <algorithm>
#include <cstring>
#include <optional>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/ifc.h"
#include "hw/wqe.h"
#include "sim/transport/engine.h"
#include "sim/transport/xport_names.h"

namespace cxv::sim {

transport_engine::transport_engine(const device_config& cfg, bar0& bar, iommu& mmu, trace& tr, object_tables& t,
                                   transport_hooks& hooks)
    : cfg_(cfg), bar_(bar), mmu_(mmu), trace_(tr), t_(t), hooks_(hooks), cqs_(mmu, tr, t, hooks) {}

void transport_engine::reset() {
    active_qps_.clear();
    bf_pages_.clear();
    owed_acks_.clear();
}

namespace {

constexpr std::uint32_t kRqRegular = 0x0;
constexpr std::uint32_t kRqSrq = 0x1;

// Where byte `off` of a buffer described by a page list lies: its pages are
// 4 KiB << log_page_size and it starts page_offset 64ths of a page into the first.
struct pas_place {
    std::uint64_t page;     // the page size
    std::uint64_t idx;      // the page in the list
    std::uint64_t in_page;  // the offset in it
};
std::optional<pas_place> place_in_pas(unsigned log_page_size, std::uint32_t page_offset, std::uint64_t off) {
    const unsigned page_shift = 12 + log_page_size;  // shifts, not divisions: read on every WQE
    if (page_shift >= 48) return std::nullopt;       // beyond any IOVA (iommu::iova_limit)
    const std::uint64_t page = std::uint64_t{1} << page_shift;
    const std::uint64_t pos = (std::uint64_t{page_offset} << (page_shift - 6)) + off;
    return pas_place{page, pos >> page_shift, pos & (page - 1)};
}

// Reads [off, off + len) of a buffer described by a page list (place_in_pas). Pages
// that follow each other in IOVA too are read in one access.
bool read_pas(const iommu& mmu, const std::vector<std::uint64_t>& pas, unsigned log_page_size,
              std::uint32_t page_offset, std::uint64_t off, void* dst, std::size_t len) {
    const auto at = place_in_pas(log_page_size, page_offset, off);
    if (!at) return false;
    const std::uint64_t page = at->page;
    std::uint64_t idx = at->idx;
    std::uint64_t in_page = at->in_page;
    auto* out = static_cast<std::byte*>(dst);
    while (len != 0) {
        if (idx >= pas.size()) return false;
        const std::uint64_t iova = pas[idx] + in_page;
        std::uint64_t n = std::min<std::uint64_t>(len, page - in_page);
        while (n < len && idx + 1 < pas.size() && pas[idx + 1] == pas[idx] + page) {
            ++idx;
            n = std::min<std::uint64_t>(len, n + page);
        }
        if (!mmu.read(iova, out, static_cast<std::size_t>(n))) return false;
        out += n;
        len -= static_cast<std::size_t>(n);
        ++idx;
        in_page = 0;
    }
    return true;
}

// A WQE inside one page, through the page's kept translation (a card's IOTLB);
// anything else, and a translation the table no longer has, the ordinary way.
bool read_pages(const iommu& mmu, const std::vector<std::uint64_t>& pas, std::vector<wq_translation>& kept,
                unsigned log_page_size, std::uint32_t page_offset, std::uint64_t off, void* dst, std::size_t len) {
    if (const auto at = place_in_pas(log_page_size, page_offset, off);
        at && at->idx < pas.size() && at->in_page + len <= at->page) {
        if (kept.size() != pas.size()) kept.assign(pas.size(), {});
        wq_translation& t = kept[at->idx];
        if (t.host != nullptr && mmu.read_cached(t.generation, t.host + at->in_page, dst, len)) return true;
        t.host = mmu.translate(pas[at->idx], at->page, false, t.generation);
        if (t.host != nullptr && mmu.read_cached(t.generation, t.host + at->in_page, dst, len)) return true;
    }
    return read_pas(mmu, pas, log_page_size, page_offset, off, dst, len);
}

}  // namespace

bool transport_engine::wq_read(const qp_object& qp, std::uint64_t off, void* dst, std::size_t len) {
    const std::byte* q = qp.qpc.data();
    if (qp.umem_id == 0) {
        return read_pages(mmu_, qp.pas, qp.pas_translated, ifc::get<qpc::log_page_size>(q),
                          ifc::get<qpc::page_offset>(q), off, dst, len);
    }
    const auto u = t_.umems.find(qp.umem_id);
    if (u == t_.umems.end()) return false;
    const umem_object& um = u->second;
    auto* out = static_cast<std::byte*>(dst);
    const std::uint64_t page = std::uint64_t{4096} << um.log_page_size;
    std::uint64_t pos = qp.umem_offset + off;
    while (len != 0) {
        const auto iova = umem_iova(um, pos);
        if (!iova) return false;
        // To the end of this page, and on through pages that follow it in IOVA.
        std::uint64_t n = std::min<std::uint64_t>(len, page - (um.page_offset + pos) % page);
        while (n < len) {
            const auto next = umem_iova(um, pos + n);
            if (!next || *next != *iova + n) break;
            n = std::min<std::uint64_t>(len, n + page);
        }
        if (!mmu_.read(*iova, out, static_cast<std::size_t>(n))) return false;
        out += n;
        pos += n;
        len -= static_cast<std::size_t>(n);
    }
    return true;
}

bool transport_engine::srq_read(const srq_object& srq, std::uint64_t off, void* dst, std::size_t len) {
    const std::byte* c = srq.srqc.data();
    return read_pas(mmu_, srq.pas, ifc::get<ifc::srqc::log_page_size>(c), ifc::get<ifc::srqc::page_offset>(c),
                    off, dst, len);
}

bool transport_engine::wq_read(const wq_object& q, std::uint64_t off, void* dst, std::size_t len) {
    const std::byte* wq = ifc::at<ifc::sqc::wq>(q.ctx.data());
    return read_pages(mmu_, q.pas, q.pas_translated, ifc::get<ifc::wq::log_wq_pg_sz>(wq),
                      ifc::get<ifc::wq::page_offset>(wq), off, dst, len);
}

// An SQ's or RQ's doorbell record: the receive counter at +0 (an RQ's), the send counter
// at +4 (an SQ's), 16 bits each (PRM "Doorbell Record").
std::optional<std::uint32_t> transport_engine::wq_dbr(const wq_object& q, bool send) {
    hw::be32 v{};
    const std::uint64_t iova = ifc::get<ifc::wq::dbr_addr>(ifc::at<ifc::sqc::wq>(q.ctx.data())) + (send ? 4 : 0);
    if (!mmu_.read(iova, &v, sizeof(v))) return std::nullopt;
    return v.value() & 0xffff;
}

// The doorbell record's counters (16 bits each): the receive counter at +0, the send
// counter at +4 (PRM "Doorbell Record").
std::optional<std::uint32_t> transport_engine::qp_dbr(const qp_object& qp, bool send) {
    const std::byte* q = qp.qpc.data();
    std::uint64_t iova = ifc::get<qpc::dbr_addr>(q) + (send ? 4 : 0);
    if (ifc::get<qpc::dbr_umem_valid>(q)) {
        const auto u = t_.umems.find(ifc::get<qpc::dbr_umem_id>(q));
        if (u == t_.umems.end()) return std::nullopt;
        const auto at = umem_iova(u->second, iova);
        if (!at) return std::nullopt;
        iova = *at;
    }
    hw::be32 v{};
    if (!mmu_.read(iova, &v, sizeof(v))) return std::nullopt;
    return v.value() & 0xffff;
}

std::optional<std::uint32_t> transport_engine::srq_dbr(const srq_object& srq) {
    hw::be32 v{};
    if (!mmu_.read(ifc::get<ifc::srqc::dbr_addr>(srq.srqc.data()), &v, sizeof(v))) return std::nullopt;
    return v.value() & 0xffff;
}

// --- data through memory keys --------------------------------------------------------

namespace {

// The mkey the key names (key >> 8) and the UMEM its translations come from, then the
// translation with every check (mkey_translate.h).
template <class Ranges>
bool through_key(const object_tables& t, std::uint32_t pd, std::uint32_t key, std::uint64_t va,
                 std::uint64_t len, unsigned access, Ranges& out) {
    out.clear();
    const auto mk = t.mkeys.find(key >> 8);
    if (mk == t.mkeys.end()) return false;
    const umem_object* umem = nullptr;
    if (mk->second.umem_id != 0) {
        const auto u = t.umems.find(mk->second.umem_id);
        if (u != t.umems.end()) umem = &u->second;
    }
    return translate(mk->second, umem, key, pd, va, len, access, out) == translate_status::ok;
}

}  // namespace

// A UMR's checks, in the PRM's terms where it states them: the key exists, belongs to the
// QP's user (uid) and, on a QP with a PD, to that PD (IBA: a fast registration stays in
// its PD); its context allows UMR (umr_en); it is in the state the check_free bits ask
// for; a new PD is the user's; the entries fit the key's table (translations_octword_size
// octwords, in 64-byte units). Refused: the WQE completes with LOCAL_PROT_ERR (the key)
// or LOCAL_LENGTH_ERR (the table), the key unchanged (the PRM gives no syndromes: the
// model's choice). Signature offload (bsf_en) is not offered (caps). Then the fields
// `mask` names, and the entries, replace the key's.
hw::cqe_syndrome transport_engine::modify_mkey(const qp_object& qp, std::uint32_t key, const hw::wqe_umr_ctrl_seg& u,
                                               const std::byte* seg, std::uint64_t first,
                                               std::span<const std::uint64_t> xlt) {
    using m = ifc::mkc;
    const auto it = t_.mkeys.find(key >> 8);
    if (it == t_.mkeys.end()) return hw::cqe_syndrome::LOCAL_PROT_ERR;
    mkey_object& mk = it->second;
    std::byte* c = mk.mkc.data();
    if (mk.uid != qp.uid || !ifc::get<m::umr_en>(c)) return hw::cqe_syndrome::LOCAL_PROT_ERR;
    if (qp.pd != 0 && ifc::get<m::pd>(c) != qp.pd) return hw::cqe_syndrome::LOCAL_PROT_ERR;
    const bool is_free = ifc::get<m::free>(c);
    const std::uint8_t check = u.flags & hw::umr_check_mask;
    if ((check == hw::umr_check_key_free && !is_free) || (check == hw::umr_check_key_not_free && is_free)) {
        return hw::cqe_syndrome::LOCAL_PROT_ERR;
    }
    const std::uint64_t mask = u.mkey_mask.value();
    if ((mask & hw::umr_mask_bsf_en) != 0 && ifc::get<m::bsf_en>(seg)) return hw::cqe_syndrome::LOCAL_QP_OP_ERR;
    const std::uint32_t old_pd = ifc::get<m::pd>(c);
    const std::uint32_t new_pd = (mask & hw::umr_mask_pd) != 0 ? ifc::get<m::pd>(seg) : old_pd;
    pd_object* pd = nullptr;
    if (new_pd != old_pd) {
        const auto p = t_.pds.find(new_pd);
        if (p == t_.pds.end() || p->second.uid != mk.uid) return hw::cqe_syndrome::LOCAL_PROT_ERR;
        pd = &p->second;
    }
    // The table in whole 64-byte units: Linux's mlx5_ib writes its UMRs' entries in such
    // units (MLX5_UMR_MTT_ALIGNMENT), past the end of a key made with 2 octowords (its
    // cache's smallest), and cards take them.
    const std::uint64_t table = (std::uint64_t{ifc::get<m::translations_octword_size>(c)} + 3) / 4 * 8;
    if (first > table || xlt.size() > table - first) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;

    if (!xlt.empty()) {
        if (mk.translations.size() < first + xlt.size()) mk.translations.resize(first + xlt.size());
        std::copy(xlt.begin(), xlt.end(), mk.translations.begin() + static_cast<std::ptrdiff_t>(first));
    }
    // Each field the mask names, copied from the context segment.
    const auto take = [&]<class F>(std::uint64_t bit, F) {
        if ((mask & bit) != 0) ifc::set<F>(c, ifc::get<F>(seg));
    };
    take(hw::umr_mask_len, m::len{});
    take(hw::umr_mask_len, m::length64{});
    take(hw::umr_mask_page_size, m::log_page_size{});
    take(hw::umr_mask_start_addr, m::start_addr{});
    take(hw::umr_mask_en_rinval, m::en_rinval{});
    take(hw::umr_mask_key, m::mkey_7_0{});
    take(hw::umr_mask_qpn, m::qpn{});
    take(hw::umr_mask_lr, m::lr{});
    take(hw::umr_mask_lw, m::lw{});
    take(hw::umr_mask_rr, m::rr{});
    take(hw::umr_mask_rw, m::rw{});
    take(hw::umr_mask_a, m::a{});
    take(hw::umr_mask_small_fence, m::small_fence_on_rdma_read_response{});
    take(hw::umr_mask_relaxed_ordering_write, m::relaxed_ordering_write{});
    take(hw::umr_mask_relaxed_ordering_read, m::relaxed_ordering_read{});
    take(hw::umr_mask_free, m::free{});
    if (pd != nullptr) {
        --t_.pds.at(old_pd).users;
        ++pd->users;
        ifc::set<m::pd>(c, new_pd);
    }
    ++t_.eth.generation;  // what the queues keep of keys (a striding WQE's translation) is stale
    trace_.count(&counters::umrs);
    hooks_.mkey_changed(mk);
    return {};
}

// Remote invalidation (IBA: Send with Invalidate): only a key a UMR registers (umr_en; Linux's
// fast-registration keys, which it makes without en_rinval: that bit is for memory
// windows, which the model does not have), named with its variant, in the QP's PD. An
// invalidated key is free: no access passes it until a UMR enables it again.
bool transport_engine::invalidate_rkey(const qp_object& qp, const std::array<std::byte, 4>& ieth) {
    using m = ifc::mkc;
    hw::be32 be{};
    std::memcpy(&be, ieth.data(), 4);
    const std::uint32_t rkey = be.value();
    const auto it = t_.mkeys.find(rkey >> 8);
    if (it == t_.mkeys.end()) return false;
    mkey_object& mk = it->second;
    std::byte* c = mk.mkc.data();
    if (ifc::get<m::mkey_7_0>(c) != (rkey & 0xff) || !ifc::get<m::umr_en>(c) || ifc::get<m::pd>(c) != qp.pd ||
        mk.uid != qp.uid) {
        return false;
    }
    ifc::set<m::free>(c, 1);
    ++t_.eth.generation;
    hooks_.mkey_changed(mk);
    return true;
}

bool transport_engine::remote_access(std::uint32_t pd, std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                                     unsigned access, iova_list& out) {
    return through_key(t_, pd, rkey, va, len, access, out);
}

bool transport_engine::remote_access(std::uint32_t pd, std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                                     unsigned access, std::vector<iova_range>& out) {
    return through_key(t_, pd, rkey, va, len, access, out);
}

hw::cqe_syndrome transport_engine::gather(std::uint32_t pd, const std::vector<local_sge>& sges,
                                          wire::payload_buffer& out) {
    iova_list ranges;
    for (const local_sge& s : sges) {
        if (s.len == 0) continue;
        if (!remote_access(pd, s.lkey, s.addr, s.len, access_local_read, ranges)) {
            return hw::cqe_syndrome::LOCAL_PROT_ERR;
        }
        std::size_t at = out.size();
        out.resize(at + s.len);  // the ranges of an SGE add up to its length
        for (const iova_range& r : ranges) {
            if (!mmu_.read(r.iova, out.data() + at, r.len)) {
                trace_.count(&counters::iommu_faults);
                return hw::cqe_syndrome::LOCAL_PROT_ERR;
            }
            at += r.len;
        }
    }
    return hw::cqe_syndrome{};
}

// Writes `data` into the scatter list from byte `skip` on; the list must hold
// `capacity_needed` bytes (the GRH area of a UD receive counts even when not written).
hw::cqe_syndrome transport_engine::scatter(std::uint32_t pd, const std::vector<local_sge>& sges, std::size_t skip,
                                           std::span<const std::byte> data, std::size_t capacity_needed) {
    std::uint64_t capacity = 0;
    for (const local_sge& s : sges) capacity += s.len;
    if (capacity < capacity_needed || capacity < skip + data.size()) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    // Translate every piece first: nothing is written unless all of it may be.
    iova_list all, ranges;
    std::size_t pos = 0;
    const std::size_t end = skip + data.size();
    for (const local_sge& s : sges) {
        if (pos >= end) break;
        const std::size_t from = std::max(pos, skip);
        const std::size_t to = std::min<std::size_t>(pos + s.len, end);
        if (from < to) {
            // The first piece is translated into `all` itself (a receive has one, mostly).
            const bool first = all.empty();
            if (!remote_access(pd, s.lkey, s.addr + (from - pos), to - from, access_local_write,
                               first ? all : ranges)) {
                return hw::cqe_syndrome::LOCAL_PROT_ERR;
            }
            if (!first) all.append(ranges);
        }
        pos += s.len;
    }
    std::size_t at = 0;
    for (const iova_range& r : all) {
        if (!mmu_.write(r.iova, data.data() + at, r.len)) {
            trace_.count(&counters::iommu_faults);
            return hw::cqe_syndrome::LOCAL_PROT_ERR;
        }
        at += r.len;
    }
    return hw::cqe_syndrome{};
}

// --- errors and flushes ----------------------------------------------------------------

void transport_engine::qp_event(hw::event_type t, std::uint32_t qpn) {
    std::array<std::byte, ifc::qp_events::size_bytes> d{};
    ifc::set<ifc::qp_events::qpn_rqn_sqn>(d.data(), qpn);
    cqs_.flush();  // the QP's CQEs before its event
    hooks_.async_event(t, d);
}

namespace {

hw::cqe64 flush_cqe(hw::cqe_opcode op, std::uint32_t qpn, std::uint8_t wqe_opcode, std::uint16_t counter,
                    std::uint32_t srqn) {
    hw::cqe64 c{};
    auto& e = reinterpret_cast<hw::err_cqe64&>(c);
    e.syndrome = static_cast<std::uint8_t>(hw::cqe_syndrome::WR_FLUSH_ERR);
    e.srqn = hw::be32::from(srqn);
    e.s_wqe_opcode_qpn = hw::be32::from((std::uint32_t{wqe_opcode} << 24) | qpn);
    e.wqe_counter = hw::be16::from(counter);
    e.op_own = hw::make_op_own(op, false, 0);
    return c;
}

}  // namespace

// Every send WQE taken and not completed, then every WQE posted up to the doorbell
// record, completes with WR_FLUSH_ERR, signaled or not (IBA C10-96 ff.).
void transport_engine::flush_sq(qp_object& qp) {
    qp_transport& x = qp.x;
    for (const sq_request& r : x.outstanding) {
        push_cqe(qp.cqn_snd, flush_cqe(hw::cqe_opcode::REQ_ERR, qp.qpn, static_cast<std::uint8_t>(r.op),
                                       r.wqe_index, 0),
                 false);
        hooks_.count(qp, &q_counter_values::req_cqe_flush_error);
        qp.sq_consumer += r.bbs;
    }
    x.outstanding.clear();
    x.timer = x.rnr_wait = false;
    x.kicked = false;
    const std::byte* q = qp.qpc.data();
    if (ifc::get<qpc::no_sq>(q)) return;
    const auto producer = qp_dbr(qp, true);
    if (!producer) return;
    const unsigned log_sq = ifc::get<qpc::log_sq_size>(q);
    const std::uint64_t rq_bytes = ifc::get<qpc::rq_type>(q) == kRqRegular
                                       ? (std::uint64_t{16} << ifc::get<qpc::log_rq_stride>(q)) << ifc::get<qpc::log_rq_size>(q)
                                       : 0;
    std::uint32_t budget = 1u << log_sq;  // never more WQE-BBs than the ring holds
    while (((*producer - x.sq_fetched) & 0xffff) != 0 && budget != 0) {
        hw::wqe_ctrl_seg ctrl{};
        const std::uint64_t off = rq_bytes + std::uint64_t{x.sq_fetched & ((1u << log_sq) - 1)} * hw::send_wqe_bb;
        if (!wq_read(qp, off, &ctrl, sizeof(ctrl))) break;
        const std::uint32_t bbs = std::max<std::uint32_t>(1, (hw::ctrl_ds(ctrl) * 16u + 63) / 64);
        push_cqe(qp.cqn_snd, flush_cqe(hw::cqe_opcode::REQ_ERR, qp.qpn, static_cast<std::uint8_t>(hw::ctrl_opcode(ctrl)),
                                       static_cast<std::uint16_t>(x.sq_fetched), 0),
                 false);
        hooks_.count(qp, &q_counter_values::req_cqe_flush_error);
        x.sq_fetched += bbs;
        qp.sq_consumer += bbs;
        budget = budget > bbs ? budget - bbs : 0;
    }
}

// Every receive WQE posted to the QP's own RQ completes with WR_FLUSH_ERR; an SRQ's
// WQEs belong to the SRQ and stay.
void transport_engine::flush_rq(qp_object& qp) {
    const std::byte* q = qp.qpc.data();
    if (ifc::get<qpc::rq_type>(q) != kRqRegular) return;
    const auto producer = qp_dbr(qp, false);
    if (!producer) return;
    std::uint32_t budget = 1u << ifc::get<qpc::log_rq_size>(q);
    while (((*producer - qp.rq_consumer) & 0xffff) != 0 && budget-- != 0) {
        push_cqe(qp.cqn_rcv, flush_cqe(hw::cqe_opcode::RESP_ERR, qp.qpn, 0, static_cast<std::uint16_t>(qp.rq_consumer), 0),
                 false);
        hooks_.count(qp, &q_counter_values::resp_cqe_flush_error);
        ++qp.rq_consumer;
    }
    qp.rq_posted = qp.rq_consumer;  // what is left unflushed is read from the record again
}

// A transport error: RC QPs go to ERR (both queues flushed); a send-side error of a UC or
// UD QP goes to SQE, flushing the send queue only (IBA 10.3.1).
void transport_engine::qp_to_error(qp_object& qp, bool send_queue_only) {
    const qp_state from = qp.state;
    qp.state = send_queue_only ? qp_state::SQER : qp_state::ERR;
    ifc::set<qpc::state>(qp.qpc.data(), static_cast<std::uint32_t>(qp.state));
    flush_sq(qp);
    if (!send_queue_only) {
        // A receive WQE a message in progress had taken is flushed first.
        if (qp.x.have_wqe) {
            const recv_slot& w = qp.x.wqe;
            push_cqe(qp.cqn_rcv, flush_cqe(hw::cqe_opcode::RESP_ERR, qp.qpn, 0, w.index, w.srq ? w.srqn : 0), false);
            hooks_.count(qp, &q_counter_values::resp_cqe_flush_error);
            qp.x.have_wqe = false;
        }
        qp.x.in_msg = 0;
        flush_rq(qp);
        // IBA 11.6.3.2: a QP on an SRQ reports the last WQE it will take.
        if (ifc::get<qpc::rq_type>(qp.qpc.data()) == kRqSrq && from != qp_state::ERR) {
            qp_event(hw::event_type::SRQ_LAST_WQE, qp.qpn);
        }
    }
    active_qps_.insert(qp.qpn);
}

// After a transition command has changed the QP's state (fw_qp.cc).
void transport_engine::on_qp_transition(qp_object& qp, qp_state from) {
    qp_transport& x = qp.x;
    const std::byte* q = qp.qpc.data();
    switch (qp.state) {
    case qp_state::RST:
        x = qp_transport{};
        active_qps_.erase(qp.qpn);
        owed_acks_.erase(qp.qpn);
        return;
    case qp_state::ERR:
        if (from != qp_state::ERR) {
            qp.state = from;  // qp_to_error sets it again and reports the last WQE
            qp_to_error(qp, false);
        }
        return;
    case qp_state::RTR:
        if (from == qp_state::INIT) x.epsn = ifc::get<qpc::next_rcv_psn>(q);
        return;
    case qp_state::RTS:
        if (from == qp_state::RTR) {
            x.next_psn = ifc::get<qpc::next_send_psn>(q);
            x.retries_left = ifc::get<qpc::retry_count>(q);
            x.rnr_left = ifc::get<qpc::rnr_retry>(q);
        }
        if (x.kicked) sq_progress(qp);
        return;
    default:
        return;
    }
}

}  // namespace cxv::sim
