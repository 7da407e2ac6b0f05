#include "bench/perf/cm_connect.h"

#include <endian.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "api/abi/cm_wire.h"

namespace cxv::perf {

namespace {

using cm::wire_msg;

// cxv-perf's private data in a REQ or REP (within rdma_connect(3)'s 56 bytes), big-endian.
struct cm_private {
    char tag[4] = {'c', 'x', 'v', 'p'};
    std::uint8_t op = 0, conn = 0, latency = 0, pad = 0;
    std::uint32_t qp_index = 0, qps = 0, rkey = 0;
    std::uint64_t vaddr = 0, length = 0;
};
static_assert(sizeof(cm_private) <= cm::kConnectPrivate);

// What this side's QP q says about itself: the CM's address fields and the private data.
wire_msg local_msg(const side& s, unsigned q, cm::msg_type type) {
    const options& o = *s.o;
    const wire_qp& w = s.local[q];
    wire_msg m{};
    m.magic = cm::kMagic;
    m.type = type;
    m.responder_resources = m.initiator_depth = kOutstandingReads;
    m.retry_count = m.rnr_retry_count = 7;
    m.link_layer = s.fn->port.ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    m.mtu = static_cast<std::uint8_t>(s.fn->port.max_mtu);
    m.lid = static_cast<std::uint16_t>(w.lid);
    m.qpn = w.qpn;
    m.psn = w.psn;
    m.qkey = kQkey;
    std::memcpy(m.gid, w.gid, 16);
    cm_private p;
    p.op = static_cast<std::uint8_t>(o.op);
    p.conn = static_cast<std::uint8_t>(o.conn);
    p.latency = o.latency;
    p.qp_index = htobe32(q);
    p.qps = htobe32(o.qps);
    p.rkey = htobe32(w.rkey);
    p.vaddr = htobe64(w.vaddr);
    p.length = htobe64(w.length);
    std::memcpy(m.private_data, &p, sizeof p);
    m.private_data_len = sizeof p;
    return m;
}

// The peer's QP q from its REQ or REP; an empty string, or why it does not fit this run.
std::string take_remote(side& s, unsigned q, const wire_msg& m) {
    const options& o = *s.o;
    cm_private p;
    if (m.private_data_len < sizeof p) return "its private data is not cxv-perf's";
    std::memcpy(&p, m.private_data, sizeof p);
    if (std::memcmp(p.tag, "cxvp", 4) != 0) return "its private data is not cxv-perf's";
    const std::string peer = s.server ? "the client" : "the server", self = s.server ? "the server" : "the client";
    if (p.op != static_cast<std::uint8_t>(o.op) || p.conn != static_cast<std::uint8_t>(o.conn) ||
        p.latency != static_cast<std::uint8_t>(o.latency)) {
        return peer + " runs another test or transport";
    }
    if (be32toh(p.qps) != o.qps) {
        return peer + " has " + std::to_string(be32toh(p.qps)) + " QPs, " + self + " " + std::to_string(o.qps);
    }
    if (be32toh(p.qp_index) != q) return "its QPs come out of order";
    wire_qp& r = s.remote.at(q);
    r.qpn = m.qpn;
    r.psn = m.psn;
    r.lid = m.lid;
    r.rkey = be32toh(p.rkey);
    r.vaddr = be64toh(p.vaddr);
    r.length = be64toh(p.length);
    std::memcpy(r.gid, m.gid, 16);
    return {};
}

error sys(const std::string& what, int e) { return error{e, what + ": " + std::strerror(e)}; }

}  // namespace

result<std::vector<channel>> cm_accept(side& s, listener& l, std::chrono::milliseconds first_timeout,
                                       std::chrono::milliseconds timeout) {
    const options& o = *s.o;
    s.remote.assign(o.qps, wire_qp{});
    std::vector<channel> out;
    for (unsigned q = 0; q < o.qps; ++q) {
        auto ch = l.accept(q == 0 ? first_timeout : timeout);
        if (!ch) return ch.error();
        const std::string which = "rdma_cm: QP " + std::to_string(q) + "'s connection";
        wire_msg req{};
        if (cm::recv_msg(ch->fd(), req, timeout) != 0) return sys(which + ": no connect request", errno);
        if (req.type != cm::msg_type::req) return error{EPROTO, which + ": the first message is not a connect request"};
        if (const std::string why = take_remote(s, q, req); !why.empty()) {
            // rdma_reject(3) with the reason as private data: the client prints it.
            wire_msg rej = local_msg(s, q, cm::msg_type::rej);
            rej.reason = cm::kRejectConsumer;
            const std::string text = "the server rejected the connection: " + why;
            rej.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(text.size(), cm::kRejectPrivate - 1));
            std::memset(rej.private_data, 0, sizeof rej.private_data);
            std::memcpy(rej.private_data, text.data(), rej.private_data_len);
            (void)cm::send_msg(ch->fd(), rej);
            return error{EINVAL, "rdma_cm: rejected the client's connection: " + why};
        }
        // As rdma_accept(3): the QP is ready to receive and send before the REP leaves.
        if (auto r = connect_qp(s, q); !r) return r.error();
        if (cm::send_msg(ch->fd(), local_msg(s, q, cm::msg_type::rep)) != 0) return sys(which + ": send the reply", errno);
        if (o.conn != transport::ud) {
            wire_msg rtu{};
            if (cm::recv_msg(ch->fd(), rtu, timeout) != 0) return sys(which + ": no ready-to-use", errno);
            if (rtu.type != cm::msg_type::rtu) return error{EPROTO, which + ": the client did not send the ready-to-use"};
        }
        out.push_back(std::move(ch).value());
    }
    return out;
}

result<std::vector<channel>> cm_connect(side& s, const std::string& host, unsigned port,
                                        std::chrono::milliseconds retry_for) {
    const options& o = *s.o;
    s.remote.assign(o.qps, wire_qp{});
    std::vector<channel> out;
    for (unsigned q = 0; q < o.qps; ++q) {
        auto ch = channel::connect(host, port, retry_for);
        if (!ch) {
            // No listener: what rdma_cm reports as REJECTED (reason 8) or UNREACHABLE.
            return error{ch.error().code, "rdma_cm: " + ch.error().message};
        }
        const std::string which = "rdma_cm: QP " + std::to_string(q) + "'s connection to " + host + ":" + std::to_string(port);
        if (cm::send_msg(ch->fd(), local_msg(s, q, cm::msg_type::req)) != 0) return sys(which + ": send the request", errno);
        wire_msg rep{};
        if (cm::recv_msg(ch->fd(), rep, cm::kReplyTimeout) != 0) {
            const int e = errno;
            return sys(which + (e == ETIMEDOUT ? ": no reply (UNREACHABLE)" : ": no reply"), e);
        }
        if (rep.type == cm::msg_type::rej) {
            std::string text(reinterpret_cast<const char*>(rep.private_data), rep.private_data_len);
            if (text.empty()) text = "rejected (reason " + std::to_string(rep.reason) + ")";
            return error{ECONNREFUSED, "rdma_cm: " + text};
        }
        if (rep.type != cm::msg_type::rep) return error{EPROTO, which + ": the answer is not a reply"};
        if (const std::string why = take_remote(s, q, rep); !why.empty()) return error{EINVAL, which + ": " + why};
        // As rdma_connect(3) on the active side: RTR and RTS from the REP, then the RTU.
        if (auto r = connect_qp(s, q); !r) return r.error();
        if (o.conn != transport::ud) {
            wire_msg rtu = local_msg(s, q, cm::msg_type::rtu);
            rtu.private_data_len = 0;
            if (cm::send_msg(ch->fd(), rtu) != 0) return sys(which + ": send the ready-to-use", errno);
        }
        out.push_back(std::move(ch).value());
    }
    return out;
}

}  // namespace cxv::perf
