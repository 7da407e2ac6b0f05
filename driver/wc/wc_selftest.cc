// The self-test's NOPs go through queues/: the send ring builds each one and rings its
// BlueFlame copy (send_queue::ring_blueflame_copy), the CQ poller takes the first
// completion (completion_queue::poll), so that no WQE or CQE byte is laid out here.
#include "driver/wc/wc_selftest.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "driver/res/cq.h"
#include "driver/res/pd_mr.h"
#include "driver/res/qp.h"
#include "hw/doorbell.h"
#include "hw/wqe.h"
#include "queues/completion_queue.h"
#include "queues/send_queue.h"
#include "queues/send_wqe.h"

namespace cxv::driver::wc {

namespace {
constexpr unsigned kNops = 32;
}

result<bool> self_test(hca& h) {
    auto pd = pd::create(h);
    if (!pd) return pd.error();
    cq::attr ca;
    ca.entries = 64;
    auto c = cq::create(h, ca);
    if (!c) return c.error();
    qp::attr qa;
    qa.type = qp_type::ud;
    qa.domain = *pd;
    qa.send_cq = qa.recv_cq = *c;
    qa.cap = {kNops, 1, 1, 1, 0};
    auto q = qp::create(qa);
    if (!q) return q.error();
    qp& o = **q;
    qp::modify_attr m;
    m.qkey = 0x1;
    for (auto s : {qp_state::init, qp_state::rtr, qp_state::rts}) {
        if (auto st = o.modify(s, m); !st) return st.error();
    }

    // The QP's send ring, ringing its BlueFlame register through the write-combining
    // mapping (the BAR's uncached one when there is none), one BB per NOP.
    std::vector<std::uint64_t> wr_ids(o.sq_wqebb_count());
    std::vector<std::uint32_t> ends(o.sq_wqebb_count());
    auto* dbrec = reinterpret_cast<hw::wq_doorbell_record*>(o.doorbell_record());
    queues::send_queue sq(o.sq(), o.log_sq_size(), o.qpn(), true, wr_ids.data(), ends.data(), dbrec,
                          o.bf_register(true), o.bf().size / 2, queues::doorbell_mode::blueflame, 1);
    for (unsigned i = 0; i < kNops; ++i) {
        const bool last = i + 1 == kNops;
        queues::send_queue::wqe_slot slot;
        if (!sq.reserve(slot)) return error{EIO, "write-combining self-test: the send queue is full"};
        sq.finish(slot, slot.w + sizeof(hw::wqe_ctrl_seg), hw::wqe_opcode::NOP,
                  queues::send_wqe::control(false, last, false), 0, i);
        // The BlueFlame copy asks for a completion whatever the ring's copy says.
        alignas(64) std::byte copy[hw::send_wqe_bb] = {};
        std::memcpy(copy, slot.w, sizeof(hw::wqe_ctrl_seg));
        reinterpret_cast<hw::wqe_ctrl_seg*>(copy)->fm_ce_se |= hw::ctrl_cq_update;
        sq.ring_blueflame_copy(copy);
    }

    // The first completion says which copy the device executed: its wr_id is its NOP's.
    queues::completion_queue cq((*c)->cqes(), (*c)->log_entries(),
                                reinterpret_cast<hw::cq_doorbell_record*>((*c)->doorbell_record()));
    const queues::qp_rings rings{o.qpn(), &sq, nullptr, nullptr, nullptr};
    cq.attach(&rings, 1);
    queues::work_completion wc{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (cq.poll(&wc, 1) == 0) {
        if (std::chrono::steady_clock::now() > end) {
            return error{EIO, "write-combining self-test: no completion for " + std::to_string(kNops) + " NOPs"};
        }
        std::this_thread::yield();
    }
    if (wc.status != queues::wc_success || (wc.opcode & queues::wc_recv) != 0) {
        return error{EIO, "write-combining self-test: the NOPs completed in error"};
    }
    return wc.wr_id != kNops - 1;
}

}  // namespace cxv::driver::wc
