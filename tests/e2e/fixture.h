// End-to-end fixtures: the driver and the C++ API against emulated functions under
// cxv-sim -- devices brought up, a registered buffer each, connected QP pairs, and
// waiting for completions and events with a deadline.
#pragma once

#include <doctest/doctest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/cxv.h"

namespace cxv::test {

template <typename T>
T take(result<T> r) {
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return std::move(r).value();
}

inline void check_ok(const status& s) { REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message)); }

// One emulated function: its device, a PD, a 1 MiB buffer registered with every access
// right, a CQ, and the asynchronous events it reported.
struct node {
    // First, so that they outlive the device: its event thread reports into them until
    // the device is gone (members are destroyed in reverse order).
    std::mutex mu;
    std::vector<cxv::event> events;
    std::unique_ptr<cxv::device> dev;
    std::shared_ptr<cxv::pd> pd;
    std::vector<std::byte> mem;
    std::shared_ptr<cxv::mr> mr;
    std::shared_ptr<cxv::cq> cq;
    std::uint16_t lid = 0;
    bool ethernet = false;

    std::byte* at(std::size_t off) { return mem.data() + off; }
    std::uint64_t addr(std::size_t off) { return reinterpret_cast<std::uint64_t>(mem.data() + off); }

    // Whether an event whose detail contains `what` arrived for `object` within `wait`.
    bool saw_event(const std::string& what, std::uint32_t object,
                   std::chrono::milliseconds wait = std::chrono::milliseconds(3000)) {
        const auto end = std::chrono::steady_clock::now() + wait;
        do {
            {
                std::lock_guard lock(mu);
                for (const auto& e : events) {
                    if (e.object == object && e.detail.find(what) != std::string::npos) return true;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } while (std::chrono::steady_clock::now() < end);
        return false;
    }
};

inline std::unique_ptr<node> make_node(const char* bdf, unsigned cq_entries = 256) {
    auto n = std::make_unique<node>();
    cxv::device::options o;
    node* raw = n.get();
    o.on_event = [raw](const cxv::event& e) {
        std::lock_guard lock(raw->mu);
        raw->events.push_back(e);
    };
    n->dev = take(cxv::device::open(bdf, o));
    n->pd = take(n->dev->alloc_pd());
    n->mem.assign(std::size_t{1} << 20, std::byte{0});
    n->mr = take(cxv::mr::create(n->pd, n->mem.data(), n->mem.size(),
                                 access_local_write | access_remote_write | access_remote_read | access_remote_atomic));
    n->cq = take(cxv::cq::create(*n->dev, cq_entries));
    const auto port = take(n->dev->port(1));
    n->lid = port.lid;
    n->ethernet = port.ethernet;
    return n;
}

inline std::shared_ptr<cxv::qp> make_qp(node& n, qp_type t, cxv::qp::caps cap = {},
                                        std::shared_ptr<cxv::srq> srq = nullptr,
                                        doorbell_mode mode = doorbell_mode::doorbell) {
    cxv::qp::attr a;
    a.type = t;
    a.domain = n.pd;
    a.send_cq = n.cq;
    a.recv_cq = n.cq;
    a.shared = std::move(srq);
    a.cap = cap;
    a.doorbell = mode;
    return take(cxv::qp::create(*n.dev, a));
}

// The attributes for connecting to `peer` (on node `pn`), every access right granted.
inline cxv::qp::modify_attr link_to(const cxv::qp& peer, const node& pn) {
    cxv::qp::modify_attr m;
    m.access = access_local_write | access_remote_write | access_remote_read | access_remote_atomic;
    m.dest_qpn = peer.qpn();
    m.ah.dlid = pn.lid;
    m.path_mtu = 5;
    m.min_rnr_timer = 1;  // 0.01 ms
    m.timeout = 10;       // ~4 ms
    m.retry_cnt = 7;
    m.rnr_retry = 7;
    m.qkey = 0x11111111;
    return m;
}

// RST -> INIT -> RTR -> RTS with `m`.
inline void bring_to_rts(cxv::qp& q, const cxv::qp::modify_attr& m) {
    check_ok(q.modify(qp_state::init, m));
    check_ok(q.modify(qp_state::rtr, m));
    check_ok(q.modify(qp_state::rts, m));
}

// `x` (on node `xn`) and `y` (on node `yn`) connected to each other: both brought to RTS
// with link_to the other, `x` first.
inline void connect_qps(cxv::qp& x, const node& xn, cxv::qp& y, const node& yn) {
    bring_to_rts(x, link_to(y, yn));
    bring_to_rts(y, link_to(x, xn));
}

// The same for two QPs on one node.
inline void connect_qps(cxv::qp& x, cxv::qp& y, const node& n) { connect_qps(x, n, y, n); }

// Exactly `n` completions within the deadline (fails the test otherwise).
inline std::vector<ibv_wc> wait_wc(cxv::cq& cq, std::size_t n,
                                   std::chrono::milliseconds wait = std::chrono::milliseconds(5000)) {
    std::vector<ibv_wc> out;
    const auto end = std::chrono::steady_clock::now() + wait;
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
        ibv_wc wc[16];
        const int got = cq.poll(16, wc);
        out.insert(out.end(), wc, wc + got);
        if (got == 0) std::this_thread::yield();
    }
    REQUIRE_MESSAGE(out.size() == n, "completions: ", out.size(), " of ", n);
    return out;
}

// No completion arrives for `wait`.
inline void expect_no_wc(cxv::cq& cq, std::chrono::milliseconds wait = std::chrono::milliseconds(100)) {
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
        ibv_wc wc;
        REQUIRE(cq.poll(1, &wc) == 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

inline ibv_sge sge(node& n, std::size_t off, std::uint32_t len) {
    return ibv_sge{n.addr(off), len, n.mr->lkey()};
}

inline int post_recv(cxv::qp& q, std::uint64_t id, ibv_sge* s, int n) {
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = s;
    wr.num_sge = n;
    ibv_recv_wr* bad = nullptr;
    return q.post_recv(&wr, &bad);
}

inline int post_send(cxv::qp& q, std::uint64_t id, ibv_wr_opcode op, ibv_sge* s, int n, unsigned flags = IBV_SEND_SIGNALED,
                     std::uint64_t raddr = 0, std::uint32_t rkey = 0) {
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.opcode = op;
    wr.sg_list = s;
    wr.num_sge = n;
    wr.send_flags = flags;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return q.post_send(&wr, &bad);
}

inline void fill(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) p[i] = std::byte(static_cast<unsigned char>(seed * 131 + i * 7 + (i >> 8)));
}

}  // namespace cxv::test
