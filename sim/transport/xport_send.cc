// The requester side of the transport engine (IBA 9.7 "Reliable Service", 9.8
// "Unreliable Service"; PRM "Send WQE", "Doorbells and BlueFlame"): send doorbells, WQE
// execution, ACKs and responses, retransmission and the send queue's completions.
//
// What the device acts on, as a card: a send doorbell (the first 8 bytes of a WQE's
// control segment written to a BlueFlame register half of the QP's own UAR page) makes
// it read the send counter of the QP's doorbell record and execute WQEs up to it. A
// doorbell without a record update executes nothing; a record update without a
// doorbell is not seen until the next doorbell. A whole WQE written to the register in
// one burst (BlueFlame) is executed from that copy -- the device checks it against the
// ring only to know that the burst arrived complete.
//
// To tell a burst from a plain doorbell the device keeps a sentinel in every 8 bytes of
// a register half but the first, and puts it back after each doorbell: a copy is
// complete when none of its 8-byte words still holds the sentinel.
#include <algorithm>
#include <cstring>

#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/endian.h"
#include "hw/ifc.h"
#include "hw/mac.h"
#include "hw/wqe.h"
#include "sim/transport/engine.h"
#include "sim/transport/segment.h"
#include "sim/transport/xport_names.h"

namespace cxv::sim {

namespace {

constexpr std::uint64_t kBfSentinel = 0x5a17ee15deadbf00ull;
constexpr std::size_t kBfArea = hw::uar_bf_offset;   // BlueFlame registers: 0x800..0xfff
constexpr std::size_t kBfHalf = 0x100;              // a register half (log_bf_reg_size 9)
constexpr std::uint32_t kRqRegular = 0x0;
bool reads_remote(wqe_opcode op) {
    return op == wqe_opcode::RDMA_READ || op == wqe_opcode::ATOMIC_CS || op == wqe_opcode::ATOMIC_FA;
}

// The operations each transport carries (IBA Table 3; NOP and UMR are local). A UMR QP
// (REG_UMR) carries only those two; the others take UMRs too (Linux's fast registration
// and local invalidation are UMR WQEs on its RC QPs).
bool allowed(transport tp, wqe_opcode op) {
    if (tp == transport::none) return op == wqe_opcode::NOP || op == wqe_opcode::UMR;
    switch (op) {
    case wqe_opcode::NOP:
    case wqe_opcode::UMR:
    case wqe_opcode::SEND:
    case wqe_opcode::SEND_IMM: return true;
    case wqe_opcode::RDMA_WRITE:
    case wqe_opcode::RDMA_WRITE_IMM: return tp != transport::ud;
    case wqe_opcode::SEND_INVAL:  // the responder invalidates an R_Key: RC only
    case wqe_opcode::RDMA_READ:
    case wqe_opcode::ATOMIC_CS:
    case wqe_opcode::ATOMIC_FA: return tp == transport::rc;
    default: return false;
    }
}

std::uint16_t ip_checksum(const std::byte* h, std::size_t n) {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2) {
        sum += (std::to_integer<std::uint32_t>(h[i]) << 8) | std::to_integer<std::uint32_t>(h[i + 1]);
    }
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

template <typename T>
void put_be(std::byte* at, T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = std::byte(v >> (8 * (sizeof(T) - 1 - i)));
}

// What a UD receiver finds in the first 40 bytes of its buffer: the GRH (InfiniBand), or
// for RoCE v2 over IPv4 the IPv4 header in the last 20 bytes (IBA A16/A17).
void build_grh(wire::packet& p, const hw::wqe_av& av, bool eth, const device_config& cfg, std::size_t len) {
    std::byte* g = p.grh_raw.data();
    p.grh_present = true;
    const std::uint32_t headers = 12 + 8 + 4;  // BTH, DETH, ICRC
    if (eth) {
        std::byte* ip = g + 20;
        ip[0] = std::byte{0x45};
        ip[1] = std::byte{av.tclass};
        put_be<std::uint16_t>(ip + 2, static_cast<std::uint16_t>(20 + 8 + headers + len));
        put_be<std::uint16_t>(ip + 6, 0x4000);  // don't fragment
        ip[8] = std::byte{av.hop_limit};
        ip[9] = std::byte{17};  // UDP
        for (std::size_t i = 0; i < 4; ++i) ip[12 + i] = std::byte{cfg.ipv4[i]};
        for (std::size_t i = 0; i < 4; ++i) ip[16 + i] = std::byte{av.rgid[12 + i]};
        put_be<std::uint16_t>(ip + 10, ip_checksum(ip, 20));
        return;
    }
    put_be<std::uint32_t>(g, (6u << 28) | (std::uint32_t{av.tclass} << 20) | (av.grh_gid_fl.value() & 0xfffff));
    put_be<std::uint16_t>(g + 4, static_cast<std::uint16_t>(headers + len));
    g[6] = std::byte{0x1b};  // next header: IBA transport
    g[7] = std::byte{av.hop_limit};
    put_be<std::uint64_t>(g + 8, 0xfe80000000000000ull);  // GID 0: link-local prefix, port GUID
    put_be<std::uint64_t>(g + 16, cfg.node_guid + 1);
    std::memcpy(g + 24, av.rgid, 16);
}

std::uint64_t sq_base(const std::byte* q) {
    if (ifc::get<qpc::rq_type>(q) != kRqRegular) return 0;
    return (std::uint64_t{16} << ifc::get<qpc::log_rq_stride>(q)) << ifc::get<qpc::log_rq_size>(q);
}

}  // namespace

// --- doorbells ---------------------------------------------------------------------------

void transport_engine::watch_bf_page(std::uint32_t uar) {
    if (!bf_pages_.insert(uar).second) return;
    const std::size_t base = std::size_t{uar} * hw::uar_page_size;
    if (base + hw::uar_page_size > bar_.size()) return;
    for (std::size_t off = kBfArea; off < hw::uar_page_size; off += 8) {
        if (off % kBfHalf != 0) bar_.store64(base + off, kBfSentinel);
    }
}

void transport_engine::sq_doorbell(std::uint32_t uar, std::size_t off, std::uint64_t qword0) {
    trace_.count(&counters::send_doorbells);
    const auto qpn = static_cast<std::uint32_t>(qword0) >> 8;
    const unsigned ds = static_cast<unsigned>(qword0 & 0x3f);
    // The BlueFlame copy, if the whole burst is there: the WQE's ds octowords in whole
    // 64-byte blocks, every 8 bytes of them written.
    const std::size_t n = (ds * 16 + 63) / 64 * 64;
    std::array<std::byte, kBfHalf> copy;  // its first n bytes, when complete
    bool complete = false;
    if (cfg_.write_combining && ds != 0 && n <= kBfHalf) {
        for (unsigned tries = 0; tries < 64 && !complete; ++tries) {
            complete = true;
            for (std::size_t q = 8; q < n && complete; q += 8) complete = bar_.load64(off + q) != kBfSentinel;
        }
        if (complete) {
            const hw::be64 first = hw::be64::from(qword0);
            std::memcpy(copy.data(), &first, 8);
            std::memcpy(copy.data() + 8, bar_.base() + off + 8, n - 8);
        }
    }
    for (std::size_t q = 8; q < kBfHalf; q += 8) bar_.store64(off + q, kBfSentinel);

    const auto it = t_.qps.find(qpn);
    if (it == t_.qps.end()) {
        // An Ethernet SQ's doorbell (its WQEs are read from the ring; no BlueFlame copy).
        if (const auto sq = t_.eth.sqs.find(qpn); sq != t_.eth.sqs.end() && sq->second.uar == uar) {
            eth_sq_progress(sq->second);
            return;
        }
    }
    if (it == t_.qps.end() || ifc::get<qpc::uar_page>(it->second.qpc.data()) != uar) {
        trace_.count(&counters::stray_doorbells);
        return;
    }
    qp_object& qp = it->second;
    if (complete) {
        qp.x.bf = copy;
        qp.x.bf_len = static_cast<std::uint32_t>(n);
        qp.x.bf_index = static_cast<std::uint16_t>(qword0 >> 40);
    }
    qp.x.kicked = true;
    sq_progress(qp);
    // Another QP's doorbell to this register half may have been overwritten by this one
    // before the model thread read it (the model sees memory, not write transactions):
    // QPs of the same UAR page whose record shows unexecuted WQEs are taken up too.
    for (auto& [n2, other] : t_.qps) {
        if (n2 == qpn || other.state != qp_state::RTS || other.x.rnr_wait ||
            ifc::get<qpc::uar_page>(other.qpc.data()) != uar || ifc::get<qpc::no_sq>(other.qpc.data())) {
            continue;
        }
        const auto producer = qp_dbr(other, true);
        if (producer && ((*producer - other.x.sq_fetched) & 0xffff) != 0) {
            other.x.kicked = true;
            sq_progress(other);
        }
    }
}

// --- executing the send queue --------------------------------------------------------------

void transport_engine::sq_progress(qp_object& qp) {
    qp_transport& x = qp.x;
    if (qp.state == qp_state::ERR || qp.state == qp_state::SQER) {
        flush_sq(qp);
        return;
    }
    if (qp.state != qp_state::RTS) {
        if (x.kicked) active_qps_.insert(qp.qpn);  // taken up when the QP reaches RTS
        return;
    }
    if (x.rnr_wait || (!x.outstanding.empty() && x.outstanding.back().failed)) return;
    const auto producer = qp_dbr(qp, true);
    const std::uint32_t size = 1u << ifc::get<qpc::log_sq_size>(qp.qpc.data());
    if (!producer || ((*producer - x.sq_fetched) & 0xffff) > size) {
        // A record the device cannot read, or one claiming more WQEs than the ring holds.
        qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
        qp_to_error(qp, false);
        return;
    }
    while (((*producer - x.sq_fetched) & 0xffff) != 0) {
        std::uint32_t bbs = 0;
        if (!execute_wqe(qp, x.sq_fetched, bbs)) break;
        if (qp.state != qp_state::RTS || (!x.outstanding.empty() && x.outstanding.back().failed)) break;
    }
    x.kicked = qp.state == qp_state::RTS && ((*producer - x.sq_fetched) & 0xffff) != 0;
    if (x.kicked || x.timer || x.rnr_wait) active_qps_.insert(qp.qpn);
}

// One WQE as the requester executes it: the ring position, the WQE's bytes, and the
// request and message it becomes. Each opcode family's function reads the segments it
// needs from `pos` on.
struct transport_engine::wqe_exec {
    wqe_exec(qp_object& o, std::uint32_t& taken, bool ethernet, std::vector<local_sge>& scratch)
        : qp(o), bbs(taken), q(o.qpc.data()), tp(transport_of_st(ifc::get<qpc::st>(q))), eth(ethernet),
          sges(scratch) {
        sges.clear();
    }

    qp_object& qp;
    std::uint32_t& bbs;   // set to the WQE's size once taken
    const std::byte* q;   // the QP's context
    transport tp;
    bool eth;
    std::array<std::byte, 64 * 16> w;  // ds is 6 bits: at most 1008 bytes (only those read are used)
    hw::wqe_ctrl_seg ctrl{};
    std::size_t size = 0;  // ds * 16
    std::uint32_t nbb = 1;
    std::size_t pos = sizeof(hw::wqe_ctrl_seg);  // the next segment
    sq_request r;
    wire::packet& m = r.msg;  // the message: route, headers, payload
    hw::wqe_av av{};
    std::uint32_t mtu = 0;
    // The data segments: pointers not yet gathered (the engine's list, reused), and the
    // message's length.
    std::vector<local_sge>& sges;
    bool any_inline = false;
    std::uint64_t total = 0;
};

// A BlueFlame copy whose control flags, signature or immediate (bytes 8-15 of the control
// segment) differ from the ring's: a card executes the copy as written, but the model sees
// the register as memory, not as write bursts. When the driver writes a register half
// twice before the model thread reads it, the burst it missed is still in the half's later
// bytes, and the new burst's first 8 bytes may be read before the rest of it is written:
// the copy then names this WQE but carries an earlier WQE's bytes 8-15 (a lost CQ_UPDATE,
// a wrong immediate). Such a copy is told by those bytes equalling the ring's control
// segment of one of the WQEs posted just before (the bursts that can still be in the
// half); the ring's then execute, as a card does when it fetches a WQE from memory. A
// driver whose copy deliberately differs from its ring (the write-combining self-test's
// CQ_UPDATE) matches none of them.
bool transport_engine::stale_bf_control(const qp_object& qp, std::uint64_t base, std::uint32_t mask,
                                        std::uint32_t at, const std::byte* copy8) {
    const std::uint32_t window = std::min<std::uint32_t>(mask + 1, kBfStaleWindow);
    for (std::uint32_t back = 1; back < window; ++back) {
        const std::uint32_t bb = at - back;
        std::array<std::byte, 16> c;
        if (!wq_read(qp, base + std::uint64_t{bb & mask} * 64, c.data(), c.size())) return true;
        hw::wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, c.data(), sizeof(ctrl));
        // A control segment of this QP at its own position, with the copy's bytes 8-15.
        if (hw::ctrl_wqe_index(ctrl) == static_cast<std::uint16_t>(bb) && hw::ctrl_qpn(ctrl) == qp.qpn &&
            std::memcmp(c.data() + 8, copy8, 8) == 0) {
            return true;
        }
    }
    return false;
}

// Executes the WQE at WQE-BB counter `at`. False (and bbs 0) when it must wait (a fence
// on earlier reads) or the QP failed; true when the WQE was taken (sq_fetched moves past
// it), with its size in bbs.
bool transport_engine::execute_wqe(qp_object& qp, std::uint32_t at, std::uint32_t& bbs) {
    qp_transport& x = qp.x;
    wqe_exec e(qp, bbs, cfg_.port == port_type::ETHERNET, wqe_sges_);
    const std::uint32_t mask = (1u << ifc::get<qpc::log_sq_size>(e.q)) - 1;
    const std::uint64_t base = sq_base(e.q);
    if (!wq_read(qp, base + std::uint64_t{at & mask} * 64, e.w.data(), 64)) {
        qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
        qp_to_error(qp, false);
        return false;
    }
    std::memcpy(&e.ctrl, e.w.data(), sizeof(e.ctrl));
    e.size = std::size_t{hw::ctrl_ds(e.ctrl)} * 16;
    e.nbb = std::max<std::uint32_t>(1, static_cast<std::uint32_t>((e.size + 63) / 64));
    // The other basic blocks: in one read up to the end of the ring, the rest from its start.
    for (std::uint32_t i = 1; i < e.nbb;) {
        const std::uint32_t slot = (at + i) & mask;
        const std::uint32_t n = std::min(e.nbb - i, mask + 1 - slot);
        if (!wq_read(qp, base + std::uint64_t{slot} * 64, e.w.data() + 64 * i, std::size_t{n} * 64)) {
            qp_event(hw::event_type::WQ_CATAS_ERROR, qp.qpn);
            qp_to_error(qp, false);
            return false;
        }
        i += n;
    }
    // The BlueFlame copy of this WQE, when it arrived whole, is what executes.
    if (x.bf_len != 0 && x.bf_index == static_cast<std::uint16_t>(at)) {
        if (e.size >= 16 && x.bf_len >= e.size && std::memcmp(x.bf.data(), e.w.data(), 8) == 0 &&
            std::memcmp(x.bf.data() + 16, e.w.data() + 16, e.size - 16) == 0) {
            if (std::memcmp(x.bf.data() + 8, e.w.data() + 8, 8) == 0) {
                trace_.count(&counters::bf_copies_used);
            } else if (stale_bf_control(qp, base, mask, at, x.bf.data() + 8)) {
                trace_.count(&counters::bf_copies_torn);
            } else {
                std::memcpy(e.w.data() + 8, x.bf.data() + 8, 8);
                std::memcpy(&e.ctrl, e.w.data(), sizeof(e.ctrl));
                trace_.count(&counters::bf_copies_used);
            }
        }
        x.bf_len = 0;
    }
    trace_.count(&counters::wqes);

    e.r.wqe_index = static_cast<std::uint16_t>(at);
    e.r.bbs = e.nbb;
    e.r.op = hw::ctrl_opcode(e.ctrl);
    e.r.signaled = hw::ctrl_cq_update_set(e.ctrl);

    // PRM "Send WQE": the index must be the WQE's position, the QPN this QP's.
    if (e.size == 0 || hw::ctrl_wqe_index(e.ctrl) != static_cast<std::uint16_t>(at) ||
        hw::ctrl_qpn(e.ctrl) != qp.qpn || !allowed(e.tp, e.r.op) || hw::ctrl_opmod(e.ctrl) != 0) {
        return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
    }
    // Fences: wait until earlier RDMA READs and atomics have completed (strong ordering:
    // every earlier WQE).
    if (const auto fm = hw::ctrl_fence(e.ctrl); fm != hw::fence_mode::none) {
        const bool wait = std::any_of(x.outstanding.begin(), x.outstanding.end(), [&](const sq_request& o) {
            return !o.done && (fm == hw::fence_mode::strong_ordering || reads_remote(o.op));
        });
        if (wait) return false;
    }
    switch (e.r.op) {
    case wqe_opcode::NOP: return finish_wqe(e, {});
    case wqe_opcode::SEND:
    case wqe_opcode::SEND_IMM:
    case wqe_opcode::SEND_INVAL: return exec_send(e);
    case wqe_opcode::RDMA_WRITE:
    case wqe_opcode::RDMA_WRITE_IMM: return exec_rdma_write(e);
    case wqe_opcode::RDMA_READ: return exec_rdma_read(e);
    case wqe_opcode::ATOMIC_CS:
    case wqe_opcode::ATOMIC_FA: return exec_atomic(e);
    case wqe_opcode::UMR: return exec_umr(e);
    default: return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);  // refused by allowed() above
    }
}

// SEND and SEND with immediate, on every transport: the data is the payload.
bool transport_engine::exec_send(wqe_exec& e) {
    start_message(e);
    if (e.tp == transport::ud) {
        if (const auto s = ud_address(e); s != cqe_syndrome{}) return finish_wqe(e, s);
    } else {
        connected_address(e);
    }
    if (const auto s = take_data(e, true); s != cqe_syndrome{}) return finish_wqe(e, s);
    if (e.tp == transport::ud && (e.eth || ((e.av.grh_gid_fl.value() >> 30) & 1))) {
        build_grh(e.m, e.av, e.eth, cfg_, e.m.payload.size());
    }
    return issue(e);
}

// RDMA WRITE and WRITE with immediate (RC, UC): a remote address, then the payload.
bool transport_engine::exec_rdma_write(wqe_exec& e) {
    start_message(e);
    connected_address(e);
    if (const auto s = take_raddr(e); s != cqe_syndrome{}) return finish_wqe(e, s);
    if (const auto s = take_data(e, true); s != cqe_syndrome{}) return finish_wqe(e, s);
    e.m.reth.dma_length = static_cast<std::uint32_t>(e.m.payload.size());
    return issue(e);
}

// RDMA READ (RC): a remote address; the scatter list is where the response goes.
bool transport_engine::exec_rdma_read(wqe_exec& e) {
    start_message(e);
    connected_address(e);
    if (const auto s = take_raddr(e); s != cqe_syndrome{}) return finish_wqe(e, s);
    if (const auto s = take_data(e, false); s != cqe_syndrome{}) return finish_wqe(e, s);
    return issue_for_response(e);
}

// Compare-and-swap and fetch-and-add (RC): a remote address, the atomic segment, and an
// 8-byte scatter list for the original value.
bool transport_engine::exec_atomic(wqe_exec& e) {
    start_message(e);
    connected_address(e);
    if (const auto s = take_raddr(e); s != cqe_syndrome{}) return finish_wqe(e, s);
    if (e.pos + sizeof(hw::wqe_atomic_seg) > e.size) return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
    hw::wqe_atomic_seg as{};
    std::memcpy(&as, e.w.data() + e.pos, sizeof(as));
    e.m.atomic.va = e.m.reth.va;
    e.m.atomic.r_key = e.m.reth.r_key;
    e.m.atomic.swap_add = as.swap_add.value();
    e.m.atomic.compare = as.compare.value();
    e.pos += sizeof(as);
    if (const auto s = take_data(e, false); s != cqe_syndrome{}) return finish_wqe(e, s);
    if (!e.any_inline && e.total != 8) return finish_wqe(e, cqe_syndrome::LOCAL_LENGTH_ERR);
    return issue_for_response(e);
}

// UMR (PRM "UMR Control Segment"; Linux's mlx5_ib registers memory with it): the control
// segment's imm names the key, the UMR control segment what changes, the memory key
// context segment the new values; the translation entries follow inline or are read
// through one data segment (its key checked against the QP's PD, or for a UMR QP, which
// has none, the key's own). The key changes only once every check passed.
bool transport_engine::exec_umr(wqe_exec& e) {
    constexpr std::size_t segs = sizeof(hw::wqe_ctrl_seg) + sizeof(hw::wqe_umr_ctrl_seg) + hw::umr_mkey_seg_size;
    if (e.size < segs) return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
    hw::wqe_umr_ctrl_seg u{};
    std::memcpy(&u, e.w.data() + sizeof(hw::wqe_ctrl_seg), sizeof(u));
    const std::byte* mkey_seg = e.w.data() + sizeof(hw::wqe_ctrl_seg) + sizeof(u);
    // Two 8-byte MTT entries per octoword, from entry 2 * offset on.
    const std::size_t n = std::size_t{u.xlt_octowords.value()} * 2;
    const std::uint64_t first =
        (u.flags & hw::umr_translation_offset_en) != 0
            ? ((std::uint64_t{u.xlt_offset_47_16.value()} << 16) | u.xlt_offset.value()) * 2
            : 0;
    // The entries' bytes: in the WQE, or gathered into the message's payload (unused by a UMR).
    const std::byte* src = e.w.data() + segs;
    if (n != 0 && (u.flags & hw::umr_inline) != 0) {
        if (segs + n * 8 > e.size) return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
    } else if (n != 0) {
        if (segs + sizeof(hw::wqe_data_seg) > e.size) return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
        hw::wqe_data_seg d{};
        std::memcpy(&d, src, sizeof(d));
        std::uint32_t pd = e.qp.pd;
        if (pd == 0) {
            const auto k = t_.mkeys.find(d.lkey.value() >> 8);
            if (k == t_.mkeys.end()) return finish_wqe(e, cqe_syndrome::LOCAL_PROT_ERR);
            pd = ifc::get<ifc::mkc::pd>(k->second.mkc.data());
        }
        e.sges.push_back({d.lkey.value(), d.addr.value(), static_cast<std::uint32_t>(n * 8)});
        e.m.payload.clear();
        if (const auto s = gather(pd, e.sges, e.m.payload); s != cqe_syndrome{}) return finish_wqe(e, s);
        src = e.m.payload.data();
    }
    std::vector<std::uint64_t>& xlt = umr_xlt_;
    xlt.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        hw::be64 v{};
        std::memcpy(&v, src + i * 8, 8);
        xlt[i] = v.value();
    }
    return finish_wqe(e, modify_mkey(e.qp, e.ctrl.imm.value(), u, mkey_seg, first, xlt));
}

// READ and atomics: the scatter list is where the response goes, so it may hold no
// inline data; the request carries only its length.
bool transport_engine::issue_for_response(wqe_exec& e) {
    if (e.any_inline) return finish_wqe(e, cqe_syndrome::LOCAL_QP_OP_ERR);
    e.r.local.assign(e.sges.begin(), e.sges.end());
    e.m.reth.dma_length = static_cast<std::uint32_t>(e.total);
    return issue(e);
}

// What every message carries from the control segment.
void transport_engine::start_message(wqe_exec& e) {
    e.m.bth.opcode = opcode_transport(e.tp);
    e.m.bth.se = hw::ctrl_solicited_set(e.ctrl);
    // The immediate, or the R_Key a SEND with invalidate names (its IETH).
    if (e.r.op == wqe_opcode::SEND_IMM || e.r.op == wqe_opcode::RDMA_WRITE_IMM || e.r.op == wqe_opcode::SEND_INVAL) {
        std::memcpy(e.m.immdt.data(), &e.ctrl.imm, 4);  // already in network order
    }
}

// The source GID of GID index `index` (PRM "SET_ROCE_ADDRESS"); before the driver set
// one, the port's default: its IPv4 address as an IPv4-mapped GID.
std::array<std::uint8_t, 16> transport_engine::source_gid(unsigned index) const {
    if (const auto it = t_.roce_addresses.find(index); it != t_.roce_addresses.end()) {
        return it->second.source_l3_address;
    }
    std::array<std::uint8_t, 16> g{};
    g[10] = g[11] = 0xff;
    for (std::size_t i = 0; i < 4; ++i) g[12 + i] = cfg_.ipv4[i];
    return g;
}

// GID 0 of an InfiniBand port: the link-local prefix and the port GUID (IBA 4.1.1).
std::array<std::uint8_t, 16> transport_engine::port_gid() const {
    std::array<std::uint8_t, 16> g{};
    g[0] = 0xfe;
    g[1] = 0x80;
    const std::uint64_t guid = cfg_.node_guid + 1;
    for (std::size_t i = 0; i < 8; ++i) g[8 + i] = static_cast<std::uint8_t>(guid >> (56 - 8 * i));
    return g;
}

// The network part of a packet: RoCEv2 over IPv4 when the destination GID is
// IPv4-mapped, over IPv6 otherwise; on InfiniBand the LRH, and a GRH when asked for.
// A destination MAC of zero is resolved by the port.
void transport_engine::fill_route(wire::route& n, const std::uint8_t* dgid, unsigned sgid_index, bool grh) const {
    std::copy(dgid, dgid + 16, n.dgid.begin());
    if (cfg_.port == port_type::ETHERNET) {
        n.link = wire::is_ipv4_mapped(n.dgid) ? wire::link_kind::roce_v4 : wire::link_kind::roce_v6;
        n.sgid = source_gid(sgid_index);
        n.src_mac = cfg_.mac;
        n.grh = true;
        if (n.hop_limit == 0) n.hop_limit = 64;
        return;
    }
    n.link = wire::link_kind::ib;
    n.slid = cfg_.lid;
    n.grh = grh;
    if (grh) n.sgid = port_gid();
}

// UD: the address vector segment names the destination (PRM "Send WQE").
cqe_syndrome transport_engine::ud_address(wqe_exec& e) {
    if (e.pos + sizeof(e.av) > e.size) return cqe_syndrome::LOCAL_QP_OP_ERR;
    std::memcpy(&e.av, e.w.data() + e.pos, sizeof(e.av));
    e.pos += sizeof(e.av);
    const hw::wqe_av& av = e.av;
    e.m.bth.dest_qp = av.dqp_dct.value() & kMask24;
    // A Q_Key with the high bit set means "the QP's own" (IBA 10.2.5).
    const std::uint32_t qkey = av.qkey.value();
    e.m.deth.q_key = (qkey & 0x80000000u) ? ifc::get<qpc::q_key>(e.q) : qkey;
    e.m.deth.src_qp = wire_qpn(ifc::get<qpc::st>(e.q), e.qp.qpn);  // QP0/QP1: 0 or 1
    wire::route& n = e.m.net;
    n.sl = av.stat_rate_sl & 0xf;
    n.dlid = av.rlid.value();
    n.traffic_class = av.tclass;
    n.hop_limit = av.hop_limit;
    n.flow_label = av.grh_gid_fl.value() & 0xfffff;
    std::copy(av.rmac, av.rmac + 6, n.dst_mac.begin());
    fill_route(n, av.rgid, (av.grh_gid_fl.value() >> 20) & 0xff, (av.grh_gid_fl.value() >> 30) & 1);
    const unsigned code = ifc::get<qpc::mtu>(e.q);
    e.mtu = 128u << ((code == 0 || code > 5) ? 5 : code);
    return {};
}

// RC and UC: the QP's context names the destination (its primary address path).
void transport_engine::connected_address(wqe_exec& e) {
    const std::byte* path = ifc::at<qpc::primary_address_path>(e.q);
    e.m.bth.dest_qp = ifc::get<qpc::remote_qpn>(e.q);
    std::uint8_t gid[16];
    std::memcpy(gid, ifc::at<ads::rgid_rip>(path), sizeof gid);  // 16 bytes, as on the wire
    // fl (force loopback, PRM "Address Path"): the packets come back to this function
    // whatever the remote address says (RTR takes an fl path without one). The model
    // addresses them to the source GID, which its port loops back as any packet to one
    // of its own addresses (so, unlike a card's, only while the port has its cable).
    const bool loopback = ifc::get<ads::fl>(path) != 0 && cfg_.port == port_type::ETHERNET;
    if (loopback) {
        const auto own = source_gid(ifc::get<ads::src_addr_index>(path));
        std::copy(own.begin(), own.end(), gid);
    }
    wire::route& n = e.m.net;
    n.sl = static_cast<std::uint8_t>(ifc::get<ads::sl>(path));
    n.dlid = static_cast<std::uint16_t>(ifc::get<ads::rlid>(path));
    n.traffic_class = static_cast<std::uint8_t>(ifc::get<ads::tclass>(path));
    n.hop_limit = static_cast<std::uint8_t>(ifc::get<ads::hop_limit>(path));
    n.flow_label = ifc::get<ads::flow_label>(path);
    n.dst_mac = hw::get_mac_fields<ads::rmac_47_32, ads::rmac_31_0>(path);
    if (loopback) n.dst_mac = cfg_.mac;
    fill_route(n, gid, ifc::get<ads::src_addr_index>(path), ifc::get<ads::grh>(path) != 0);
    e.mtu = 128u << std::clamp<unsigned>(ifc::get<qpc::mtu>(e.q), 1, 5);
}

// The remote address segment of a WRITE, READ or atomic.
cqe_syndrome transport_engine::take_raddr(wqe_exec& e) {
    if (e.pos + sizeof(hw::wqe_raddr_seg) > e.size) return cqe_syndrome::LOCAL_QP_OP_ERR;
    hw::wqe_raddr_seg ra{};
    std::memcpy(&ra, e.w.data() + e.pos, sizeof(ra));
    e.m.reth.va = ra.raddr.value();
    e.m.reth.r_key = ra.rkey.value();
    e.pos += sizeof(ra);
    return {};
}

// The data: inline pieces and pointers, in order, to the end of the WQE; inline bytes go
// straight to the payload, the pointers before them are gathered first. Then the message
// size limit: the path MTU for UD, 2^log_msg_max for connected QPs. With `payload` the
// pointers left are gathered too; without (READ, atomics) they stay in e.sges, the list
// the response is scattered to.
cqe_syndrome transport_engine::take_data(wqe_exec& e, bool payload) {
    while (e.pos < e.size) {
        hw::be32 bc{};
        std::memcpy(&bc, e.w.data() + e.pos, 4);
        if (bc.value() & hw::inline_seg_flag) {
            const std::uint32_t len = bc.value() & ~hw::inline_seg_flag;
            if (e.pos + 4 + len > e.size) return cqe_syndrome::LOCAL_QP_OP_ERR;
            if (!e.sges.empty()) {
                if (const auto s = gather(e.qp.pd, e.sges, e.m.payload); s != cqe_syndrome{}) return s;
                e.sges.clear();
            }
            const auto* src = e.w.data() + e.pos + 4;
            e.m.payload.insert(e.m.payload.end(), src, src + len);
            e.any_inline = true;
            e.total += len;
            e.pos += (4 + len + 15) / 16 * 16;
        } else {
            if (e.pos + sizeof(hw::wqe_data_seg) > e.size) return cqe_syndrome::LOCAL_QP_OP_ERR;
            hw::wqe_data_seg d{};
            std::memcpy(&d, e.w.data() + e.pos, sizeof(d));
            const std::uint32_t len = d.byte_count.value() == 0 ? 0x80000000u : d.byte_count.value();
            e.sges.push_back({d.lkey.value(), d.addr.value(), len});
            e.total += len;
            e.pos += sizeof(d);
        }
    }
    if (e.tp == transport::ud) {
        if (e.total > e.mtu) return cqe_syndrome::LOCAL_LENGTH_ERR;
    } else {
        const unsigned lmm = ifc::get<qpc::log_msg_max>(e.q);
        if (e.total > (std::uint64_t{1} << (lmm == 0 ? 31 : lmm))) return cqe_syndrome::LOCAL_LENGTH_ERR;
    }
    if (payload && !e.sges.empty()) return gather(e.qp.pd, e.sges, e.m.payload);
    return {};
}

// Where a message leaves the requester: its PSNs taken, its packets onto the wire (a
// READ: one request for all its response packets). UC and UD WQEs complete as they are
// sent; an RC request is kept, whole, until its answer (on_response), with the ACK timer
// running.
bool transport_engine::issue(wqe_exec& e) {
    qp_transport& x = e.qp.x;
    sq_request& r = e.r;
    const wqe_opcode op = r.op;
    r.mtu = e.mtu;
    const std::uint64_t bytes = op == wqe_opcode::RDMA_READ ? r.msg.reth.dma_length : r.msg.payload.size();
    r.npsn = reads_remote(op) && op != wqe_opcode::RDMA_READ ? 1 : packets_for(bytes, e.mtu);
    r.psn = x.next_psn;
    x.next_psn = psn_add(x.next_psn, r.npsn);
    const std::uint32_t n = op == wqe_opcode::RDMA_READ ? 1 : r.npsn;
    for (std::uint32_t k = 0; k < n; ++k) send_packet(segment(r, k));
    if (e.tp != transport::rc) return finish_wqe(e, {});
    e.bbs = e.nbb;
    x.sq_fetched += e.nbb;
    x.outstanding.push_back(std::move(e.r));
    if (!x.timer) arm_ack_timer(e.qp);
    return true;
}

// A WQE that completes at once: NOP and sent UC/UD messages (why 0), or a local error
// (the WQE completes with `why` and the QP leaves RTS).
bool transport_engine::finish_wqe(wqe_exec& e, cqe_syndrome why) {
    qp_transport& x = e.qp.x;
    e.r.done = true;
    e.r.failed = why != cqe_syndrome{};
    e.r.error = why;
    e.r.msg.payload.clear();
    x.outstanding.push_back(std::move(e.r));
    e.bbs = e.nbb;
    x.sq_fetched += e.nbb;
    complete_front(e.qp);
    return true;
}

}  // namespace cxv::sim
