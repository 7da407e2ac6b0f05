// The Ethernet send pipeline (PRM "Send WQE Construction", "Ethernet Segment"): an SQ's
// doorbell record says how many WQE basic blocks are posted; each SEND WQE is a control
// segment, an Ethernet segment carrying the frame's first bytes inline, and data
// segments (pointers through memory keys, or inline data) for the rest. The device
// gathers the frame, fills the checksums the Ethernet segment asks for (IPv4 header, UDP
// or TCP over IPv4 or IPv6), puts it on the wire and, when the WQE asks, writes a CQE.
// NOP WQEs complete without a frame. What the offload capabilities leave out (LSO, VLAN
// insertion, tunnels) completes in error.
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
wire::ip_checksums fill_checksums(std::span<std::byte> f, std::uint8_t cs_flags) {
    eth_headers h;
    wire::ip_checksums done;
    if (!parse_eth(f, h, false) || h.ip_version == 0) return done;
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
        if (op == hw::wqe_opcode::SEND && ds >= 2) {
            err = send_frame(sq, std::span<const std::byte>(wqe.data(), ds * kDs));
        } else if (op != hw::wqe_opcode::NOP) {
            err = hw::cqe_syndrome::LOCAL_QP_OP_ERR;  // LSO and the rest: not offered
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

hw::cqe_syndrome transport_engine::send_frame(const wq_object& sq, std::span<const std::byte> wqe) {
    hw::wqe_eth_seg eth;
    std::memcpy(&eth, wqe.data() + kDs, sizeof(eth) <= wqe.size() - kDs ? sizeof(eth) : wqe.size() - kDs);
    if (eth.mss.value() != 0) return hw::cqe_syndrome::LOCAL_QP_OP_ERR;  // LSO: max_lso_cap 0
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
                if (const auto e = gather_into(sq.pd, sges); e != hw::cqe_syndrome{}) return e;
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
        if (const auto e = gather_into(sq.pd, sges); e != hw::cqe_syndrome{}) return e;
    }
    if (tx_frame_.size() < 14 || tx_frame_.size() > kMaxFrame) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    const wire::ip_checksums computed = fill_checksums(tx_frame_, eth.cs_flags);
    hooks_.transmit_frame(tx_frame_, computed);
    return {};
}

hw::cqe_syndrome transport_engine::gather_into(std::uint32_t pd, const std::vector<local_sge>& sges) {
    wire::payload_buffer data;
    if (const auto e = gather(pd, sges, data); e != hw::cqe_syndrome{}) return e;
    if (tx_frame_.size() + data.size() > kMaxFrame) return hw::cqe_syndrome::LOCAL_LENGTH_ERR;
    tx_frame_.insert(tx_frame_.end(), data.begin(), data.end());
    return {};
}

}  // namespace cxv::sim
