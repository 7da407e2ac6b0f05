// The Ethernet send pipeline (PRM "Send WQE Construction", "Ethernet Segment"): an SQ's
// doorbell record says how many WQE basic blocks are posted; each SEND WQE is a control
// segment, an Ethernet segment carrying the frame's first bytes inline, and data
// segments (pointers through memory keys, or inline data) for the rest. The device
// gathers the frame, fills the checksums the Ethernet segment asks for (IPv4 header, UDP
// or TCP over IPv4 or IPv6), puts it on the wire and, when the WQE asks, writes a CQE.
// An LSO WQE (PRM "Large Send Offload") carries a message larger than a frame: its
// inline headers (L2 to L4) go in front of every mss-byte piece of the payload, each
// frame's IP length and identification, TCP sequence number and flags or UDP length
// set for it. NOP WQEs complete without a frame. What the offload capabilities leave
// out (VLAN insertion, tunnels) completes in error.
#include <algorithm>
#include <array>
#include <cstring>

#include "hw/cqe.h"
#include "hw/wqe.h"
#include "sim/transport/engine.h"
#include "sim/transport/eth_headers.h"

namespace cxv::sim {

namespace {

namespace ifc = hw::ifc;
constexpr std::size_t kBb = hw::send_wqe_bb;  // 64
constexpr std::size_t kDs = 16;
// The largest frame an SQ sends: a 9216-byte MTU with its Ethernet header and a tag.
constexpr std::size_t kMaxFrame = 9216 + 18;
// The largest LSO message: 2^max_lso_cap bytes after the headers (fw_caps.cc), and the
// headers themselves (what an Ethernet segment inlines: 2 + 16 bytes and inline data
// segments, at most a WQE's 63 octowords).
constexpr std::size_t kMaxLso = std::size_t{1} << kMaxLsoLog, kMaxLsoHeaders = 1008;

void put16(std::byte* p, std::uint16_t v) {
    p[0] = static_cast<std::byte>(v >> 8);
    p[1] = static_cast<std::byte>(v);
}

std::uint16_t get16(const std::byte* p) {
    return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) << 8 | std::to_integer<unsigned>(p[1]));
}

// The checksums cs_flags asks for, computed in the frame (RFC 791, 768, 793, 8200). The
// field's old value is summed with the rest and its complement added, which takes it
// out (RFC 1624), so each field is stored once: zeroing it first and then loading the
// words around it would stall every load on that store.
wire::ip_checksums fill_checksums(eth_parse_memo& memo, std::span<std::byte> f, std::uint8_t cs_flags) {
    wire::ip_checksums done;
    if ((cs_flags & (hw::eth_wqe_l3_csum | hw::eth_wqe_l4_csum)) == 0) return done;
    const eth_headers* parsed = memo.parse(f, false);
    if (parsed == nullptr || parsed->ip_version == 0) return done;
    const eth_headers& h = *parsed;
    if ((cs_flags & hw::eth_wqe_l3_csum) && h.ip_version == 4) {
        std::byte* ip = f.data() + h.l3_at;
        const std::uint16_t old = static_cast<std::uint16_t>(~get16(ip + 10));
        put16(ip + 10, static_cast<std::uint16_t>(~ones_sum(std::span<const std::byte>(ip, h.ihl * 4u), old)));
        done.l3 = true;
    }
    if ((cs_flags & hw::eth_wqe_l4_csum) && (h.udp || h.tcp) && !h.fragment) {
        std::byte* l4 = f.data() + h.l4_at;
        const std::size_t ip_len = h.ip_version == 4 ? get16(f.data() + h.l3_at + 2) - h.ihl * 4u
                                                     : get16(f.data() + h.l3_at + 4);
        const std::size_t len = h.udp ? get16(l4 + 4) : ip_len;
        // A length that runs past the frame (or short of the header): nothing to sum.
        if (len > f.size() - h.l4_at || len < (h.udp ? 8u : 20u)) return done;
        std::byte* field = l4 + (h.udp ? 6 : 16);
        const std::uint32_t acc = pseudo_header_sum(h, len) + static_cast<std::uint16_t>(~get16(field));
        std::uint16_t c = static_cast<std::uint16_t>(~ones_sum(std::span<const std::byte>(l4, len), acc));
        if (h.udp && c == 0) c = 0xffff;  // UDP sends 0 as all ones (RFC 768)
        put16(field, c);
        done.l4 = true;
    }
    return done;
}

}  // namespace

void transport_engine::eth_sq_progress(wq_object& sq) {
    if (sq.state != wq_state::RDY) return;
    const auto producer = wq_dbr(sq, true);
    if (!producer) return;
    const std::byte* wq = ifc::at<ifc::sqc::wq>(sq.ctx.data());
    const std::uint32_t size = 1u << ifc::get<ifc::wq::log_wq_sz>(wq);
    std::array<std::byte, kBb * 16> wqe;  // a WQE of at most 63 octowords
    while (((*producer - sq.consumer) & 0xffff) != 0) {
        const std::uint32_t index = sq.consumer & (size - 1);
        if (!wq_read(sq, std::uint64_t{index} * kBb, wqe.data(), kBb)) return;
        hw::wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, wqe.data(), sizeof(ctrl));
        const auto op = static_cast<hw::wqe_opcode>(ctrl.opmod_idx_opcode.value() & 0xff);
        const unsigned ds = ctrl.qpn_ds.value() & 0x3f;
        const std::uint32_t bbs = std::max<std::uint32_t>(1, static_cast<std::uint32_t>((ds * kDs + kBb - 1) / kBb));
        // The WQE's other basic blocks: in one read, unless they wrap to the ring's start.
        if (bbs > 1 && index + bbs <= size) {
            if (!wq_read(sq, std::uint64_t{index + 1} * kBb, wqe.data() + kBb, (bbs - 1) * kBb)) return;
        } else {
            for (std::uint32_t b = 1; b < bbs; ++b) {
                if (!wq_read(sq, std::uint64_t{(index + b) & (size - 1)} * kBb, wqe.data() + b * kBb, kBb)) return;
            }
        }
        hw::cqe_syndrome err{};
        if ((op == hw::wqe_opcode::SEND || op == hw::wqe_opcode::LSO) && ds >= 2) {
            err = send_frame(sq, std::span<const std::byte>(wqe.data(), ds * kDs), op == hw::wqe_opcode::LSO);
        } else if (op != hw::wqe_opcode::NOP) {
            err = hw::cqe_syndrome::LOCAL_QP_OP_ERR;  // the rest: not offered
        }
        sq.consumer += bbs;
        if (err != hw::cqe_syndrome{}) {
            hw::cqe64 e{};
            auto& x = reinterpret_cast<hw::err_cqe64&>(e);
            x.syndrome = static_cast<std::uint8_t>(err);
            x.s_wqe_opcode_qpn = hw::be32::from(static_cast<std::uint32_t>(op) << 24 | sq.n);
            x.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(ctrl.opmod_idx_opcode.value() >> 8));
            x.srqn = hw::be32::from(ifc::get<ifc::sqc::user_index>(sq.ctx.data()));
            x.op_own = hw::make_op_own(hw::cqe_opcode::REQ_ERR, false, 0);
            push_cqe(sq.cqn, e, false);
            // The SQ goes to ERR (PRM "SQ State Machine"); the driver's MODIFY_SQ recovers it.
            sq.state = wq_state::ERR;
            ifc::set<ifc::sqc::state>(sq.ctx.data(), static_cast<std::uint32_t>(wq_state::ERR));
            return;
        }
        if (ctrl.fm_ce_se & hw::ctrl_cq_update) {
            hw::cqe64 c{};
            c.op_own = hw::make_op_own(hw::cqe_opcode::REQ, false, 0);
            c.wqe_counter = hw::be16::from(static_cast<std::uint16_t>(ctrl.opmod_idx_opcode.value() >> 8));
            c.sop_drop_qpn = hw::be32::from(static_cast<std::uint32_t>(op) << 24 | sq.n);
            c.srqn_uidx = hw::be32::from(ifc::get<ifc::sqc::user_index>(sq.ctx.data()));
            c.timestamp = hw::be64::from(hooks_.timestamp());
            push_cqe(sq.cqn, c, false);
        }
    }
}

// A SEND's frame, or the frames an LSO WQE's message is cut into (lso_begin, lso_cut):
// each goes out through the one call below, the SEND's path as it is without LSO.
hw::cqe_syndrome transport_engine::send_frame(const wq_object& sq, std::span<const std::byte> wqe, bool lso) {
    // An SQ without a TIS (tis_lst_sz 0, as Linux's mlx5e makes the SQ it posts only
    // NOPs and UMRs on) has no transport to send a frame with.
    if (sq.tisn == 0) [[unlikely]] return hw::cqe_syndrome::LOCAL_QP_OP_ERR;
    hw::wqe_eth_seg eth;
    std::memcpy(&eth, wqe.data() + kDs, sizeof(eth) <= wqe.size() - kDs ? sizeof(eth) : wqe.size() - kDs);
    const std::size_t max_bytes = lso ? kMaxLsoHeaders + kMaxLso : kMaxFrame;
    const std::size_t inl = eth.inline_hdr_sz.value();
    // The inline bytes: 2 in inline_hdr_start, the rest in the octowords after the
    // Ethernet segment's first.
    const std::size_t inl_end = 2 * kDs + (inl > 2 ? (inl - 2 + kDs - 1) / kDs * kDs : 0);
    if (inl > kMaxFrame || inl_end > wqe.size()) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    tx_frame_.assign(wqe.begin() + kDs + 14, wqe.begin() + kDs + 14 + static_cast<std::ptrdiff_t>(inl));
    // Then the data segments: pointers, or inline data (byte_count | inline_seg_flag).
    std::vector<local_sge>& sges = tx_sges_;
    sges.clear();
    for (std::size_t pos = inl_end; pos + kDs <= wqe.size();) {
        hw::wqe_data_seg d;
        std::memcpy(&d, wqe.data() + pos, sizeof(d));
        const std::uint32_t bc = d.byte_count.value();
        if (bc & hw::inline_seg_flag) {
            const std::size_t n = bc & ~hw::inline_seg_flag;
            if (pos + 4 + n > wqe.size()) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
            // Pointers gathered so far come first.
            if (!sges.empty()) {
                if (const auto e = gather_into(sq.pd, sges, max_bytes); e != hw::cqe_syndrome{}) return e;
                sges.clear();
            }
            tx_frame_.insert(tx_frame_.end(), wqe.begin() + static_cast<std::ptrdiff_t>(pos + 4),
                             wqe.begin() + static_cast<std::ptrdiff_t>(pos + 4 + n));
            pos += (4 + n + kDs - 1) / kDs * kDs;
            continue;
        }
        if (bc != 0) sges.push_back({d.lkey.value(), d.addr.value(), bc});
        pos += kDs;
    }
    if (!sges.empty()) {
        if (const auto e = gather_into(sq.pd, sges, max_bytes); e != hw::cqe_syndrome{}) return e;
    }
    if (tx_frame_.size() < 14 || tx_frame_.size() > max_bytes) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    std::size_t frames = 1;
    if (lso) [[unlikely]] {
        if (const auto e = lso_begin(inl, eth.mss.value(), frames); e != hw::cqe_syndrome{}) return e;
    }
    for (std::size_t i = 0; i < frames; ++i) {
        if (lso) [[unlikely]] lso_cut(i, frames);
        const wire::ip_checksums computed = fill_checksums(tx_parse_, tx_frame_, eth.cs_flags);
        hooks_.transmit_frame(tx_frame_, computed);
    }
    return {};
}

// tx_frame_ holds an LSO message: `header` bytes of headers (the inline ones), then the
// payload, to be cut into `frames` of at most `mss` payload bytes. The headers must
// reach past the TCP header (data offset) or the UDP header of an IPv4 or IPv6 packet
// that is not a fragment: those are what each frame's fields are set in. The message
// moves to lso_message_ (tx_frame_ carries each frame: the wire may keep it).
hw::cqe_syndrome transport_engine::lso_begin(std::size_t header, std::size_t mss, std::size_t& frames) {
    lso_state& l = lso_;
    if (mss == 0) return hw::cqe_syndrome::LOCAL_QP_OP_ERR;
    if (!parse_eth(tx_frame_, l.h, false) || l.h.ip_version == 0 || l.h.fragment || !(l.h.tcp || l.h.udp)) {
        return hw::cqe_syndrome::LOCAL_QP_OP_ERR;
    }
    const std::size_t l4_len =
        l.h.tcp ? std::size_t{std::to_integer<unsigned>(tx_frame_[l.h.l4_at + 12]) >> 4} * 4 : 8;
    if (header < l.h.l4_at + l4_len || header > tx_frame_.size() || header + mss > kMaxFrame) {
        return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    }
    trace_.count(&counters::lso_wqes);
    l.message.swap(tx_frame_);
    l.header = header;
    l.mss = mss;
    const std::byte* m = l.message.data();
    l.ip_id = get16(m + l.h.l3_at + 4);
    l.seq = 0;
    if (l.h.tcp) {
        for (int i = 0; i < 4; ++i) l.seq = l.seq << 8 | std::to_integer<unsigned>(m[l.h.l4_at + 4 + i]);
    }
    const std::size_t payload = l.message.size() - header;
    frames = payload == 0 ? 1 : (payload + mss - 1) / mss;
    return {};
}

// Frame `i` of `frames` of the LSO message into tx_frame_, its checksums still to fill.
void transport_engine::lso_cut(std::size_t i, std::size_t frames) {
    const lso_state& l = lso_;
    const eth_headers& h = l.h;
    const std::byte* m = l.message.data();
    const std::size_t payload = l.message.size() - l.header;
    const std::size_t off = i * l.mss, len = std::min(l.mss, payload - std::min(payload, off));
    tx_frame_.assign(m, m + l.header);
    tx_frame_.insert(tx_frame_.end(), m + l.header + off, m + l.header + off + len);
    std::byte* f = tx_frame_.data();
    const std::size_t l3_len = tx_frame_.size() - h.l3_at;
    if (h.ip_version == 4) {
        put16(f + h.l3_at + 2, static_cast<std::uint16_t>(l3_len));
        put16(f + h.l3_at + 4, static_cast<std::uint16_t>(l.ip_id + i));
    } else {
        put16(f + h.l3_at + 4, static_cast<std::uint16_t>(l3_len - 40));
    }
    if (h.tcp) {
        // FIN and PSH (bits 0 and 3 of the flags byte) go with the last frame only, CWR
        // (bit 7) with the first only: what Linux's own segmentation leaves in each
        // segment (tcp_offload.c, tcp_gso_segment), which a card's is to match.
        constexpr unsigned kFin = 0x01, kPsh = 0x08, kCwr = 0x80;
        const std::uint32_t seq = l.seq + static_cast<std::uint32_t>(off);
        for (int b = 0; b < 4; ++b) f[h.l4_at + 4 + b] = static_cast<std::byte>(seq >> (24 - 8 * b));
        unsigned flags = std::to_integer<unsigned>(f[h.l4_at + 13]);
        if (i + 1 != frames) flags &= ~(kFin | kPsh);
        if (i != 0) flags &= ~kCwr;
        f[h.l4_at + 13] = static_cast<std::byte>(flags);
    } else {
        put16(f + h.l4_at + 4, static_cast<std::uint16_t>(tx_frame_.size() - h.l4_at));
    }
}

hw::cqe_syndrome transport_engine::gather_into(std::uint32_t pd, const std::vector<local_sge>& sges,
                                               std::size_t max_bytes) {
    wire::payload_buffer data;
    if (const auto e = gather(pd, sges, data); e != hw::cqe_syndrome{}) return e;
    if (tx_frame_.size() + data.size() > max_bytes) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    tx_frame_.insert(tx_frame_.end(), data.begin(), data.end());
    return {};
}

}  // namespace cxv::sim
