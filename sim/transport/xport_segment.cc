// Cutting a kept message into its packets (segment.h).
#include "sim/transport/segment.h"
#include "sim/transport/xport_names.h"

#include <algorithm>

namespace cxv::sim {

std::uint8_t opcode_transport(transport tp) {
    switch (tp) {
    case transport::uc: return op::UC;
    case transport::ud: return op::UD;
    case transport::none: return 0xff;  // no request or response is this QP's
    default: return op::RC;
    }
}

namespace {

// The operation of packet k of n of a SEND or RDMA WRITE (IBA 9.4.1, 9.4.2): First,
// Middle, Last (with immediate) or Only (with immediate); a SEND with invalidate ends in
// Last or Only with invalidate.
std::uint8_t position_op(bool write, bool imm, std::uint32_t k, std::uint32_t n, bool inval = false) {
    if (inval && k + 1 >= n) return n == 1 ? op::SEND_ONLY_WITH_INVALIDATE : op::SEND_LAST_WITH_INVALIDATE;
    if (n == 1) {
        if (write) return imm ? op::RDMA_WRITE_ONLY_WITH_IMMEDIATE : op::RDMA_WRITE_ONLY;
        return imm ? op::SEND_ONLY_WITH_IMMEDIATE : op::SEND_ONLY;
    }
    if (k == 0) return write ? op::RDMA_WRITE_FIRST : op::SEND_FIRST;
    if (k + 1 < n) return write ? op::RDMA_WRITE_MIDDLE : op::SEND_MIDDLE;
    if (write) return imm ? op::RDMA_WRITE_LAST_WITH_IMMEDIATE : op::RDMA_WRITE_LAST;
    return imm ? op::SEND_LAST_WITH_IMMEDIATE : op::SEND_LAST;
}

}  // namespace

wire::packet segment(const sq_request& r, std::uint32_t k) {
    const wire::packet& m = r.msg;
    wire::packet p;
    p.net = m.net;
    p.bth.pkey = m.bth.pkey;
    p.bth.dest_qp = m.bth.dest_qp;
    p.bth.psn = psn_add(r.psn, k);
    const std::uint8_t tp = op::transport_of(m.bth.opcode);
    const bool last = k + 1 >= r.npsn;
    std::uint8_t o = op::SEND_ONLY;
    switch (r.op) {
    case wqe_opcode::SEND: o = position_op(false, false, k, r.npsn); break;
    case wqe_opcode::SEND_IMM: o = position_op(false, true, k, r.npsn); break;
    case wqe_opcode::SEND_INVAL: o = position_op(false, false, k, r.npsn, true); break;
    case wqe_opcode::RDMA_WRITE: o = position_op(true, false, k, r.npsn); break;
    case wqe_opcode::RDMA_WRITE_IMM: o = position_op(true, true, k, r.npsn); break;
    case wqe_opcode::RDMA_READ: o = op::RDMA_READ_REQUEST; break;
    case wqe_opcode::ATOMIC_CS: o = op::COMPARE_SWAP; break;
    case wqe_opcode::ATOMIC_FA: o = op::FETCH_ADD; break;
    default: break;
    }
    p.bth.opcode = static_cast<std::uint8_t>(tp | o);
    const std::uint16_t h = wire::headers_of(p.bth.opcode);
    // SE on the message's last packet (IBA 9.2.2); AckReq on the last packet of every
    // reliable request (IBA 9.7.5.1.1: the requester may ask more often, never less).
    p.bth.se = m.bth.se && last;
    p.bth.ack_req = tp == op::RC && (h & wire::is_last) != 0;
    if (h & wire::has_reth) p.reth = m.reth;
    if (h & (wire::has_immdt | wire::has_ieth)) p.immdt = m.immdt;
    if (h & wire::has_deth) p.deth = m.deth;
    if (h & wire::has_atomiceth) p.atomic = m.atomic;
    if (r.op == wqe_opcode::RDMA_READ) {
        const std::uint64_t skip = std::min<std::uint64_t>(std::uint64_t{k} * r.mtu, m.reth.dma_length);
        p.reth.va += skip;
        p.reth.dma_length -= static_cast<std::uint32_t>(skip);
    } else if (h & wire::has_payload) {
        const std::size_t off = std::min<std::size_t>(std::size_t{k} * r.mtu, m.payload.size());
        const std::size_t len = std::min<std::size_t>(r.mtu, m.payload.size() - off);
        p.payload.assign(m.payload.begin() + static_cast<std::ptrdiff_t>(off),
                         m.payload.begin() + static_cast<std::ptrdiff_t>(off + len));
        p.bth.pad = pad_of(len);
    }
    if (tp == op::UD) {
        p.grh_raw = m.grh_raw;
        p.grh_present = m.grh_present;
    }
    return p;
}

}  // namespace cxv::sim
