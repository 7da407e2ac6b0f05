// The write-combining self-test, in the manner of Linux's mlx5 (mlx5_wc_support_get):
// a UD QP in RTS posts NOPs whose ring copy is unsignaled while their BlueFlame copy --
// written as one 64-byte burst -- asks for a CQE; only the last NOP is signaled in the
// ring. A CQE for an earlier NOP means the device executed a BlueFlame copy, so 64-byte
// bursts reach it whole through this mapping: BlueFlame may be used. A first CQE for the
// last NOP means they do not (the mapping is uncached, or the platform splits the
// burst), and QPs fall back to 8-byte doorbells.
#include <chrono>
#include <cstring>
#include <thread>

#include "api/cxv.h"
#include "driver/vfio/vfio.h"
#include "hw/barrier.h"
#include "hw/cqe.h"
#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "hw/wqe.h"

namespace cxv {

namespace {
constexpr unsigned kNops = 32;
}

result<bool> device::write_combining() {
    if (wc_known_) return wc_;
    auto pd = alloc_pd();
    if (!pd) return pd.error();
    driver::cq::attr ca;
    ca.entries = 64;
    auto cq = driver::cq::create(*hca_, ca);
    if (!cq) return cq.error();
    driver::qp::attr qa;
    qa.type = qp_type::ud;
    qa.domain = *pd;
    qa.send_cq = qa.recv_cq = *cq;
    qa.cap = {kNops, 1, 1, 1, 0};
    auto qp = driver::qp::create(qa);
    if (!qp) return qp.error();
    driver::qp& q = **qp;
    driver::qp::modify_attr m;
    m.qkey = 0x1;
    for (auto s : {qp_state::init, qp_state::rtr, qp_state::rts}) {
        if (auto st = q.modify(s, m); !st) return st.error();
    }
    auto* dbrec = reinterpret_cast<hw::wq_doorbell_record*>(q.doorbell_record());
    const auto& bf = q.bf();
    const hw::mmio_window reg(bf_base() + std::size_t{bf.uar} * hw::uar_page_size + bf.offset, bf.size);
    std::size_t half = 0;
    for (unsigned i = 0; i < kNops; ++i) {
        auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(q.sq() + std::size_t{i} * hw::send_wqe_bb);
        const bool last = i + 1 == kNops;
        hw::set_ctrl_seg(*ctrl, static_cast<std::uint16_t>(i), hw::wqe_opcode::NOP, 0, q.qpn(), 1,
                         hw::fm_ce_se(hw::fence_mode::none, last, false));
        alignas(64) std::byte copy[hw::send_wqe_bb] = {};
        std::memcpy(copy, ctrl, sizeof(*ctrl));
        reinterpret_cast<hw::wqe_ctrl_seg*>(copy)->fm_ce_se |= hw::ctrl_cq_update;
        hw::to_device();
        dbrec->snd_counter = hw::be32::from(i + 1);
        hw::to_device();
        hw::wc_start();
        reg.copy64(half, copy);
        hw::wc_flush();
        half ^= bf.size / 2;
    }
    // The first CQE says which copy the device executed.
    const auto* cqes = (*cq)->cqes();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    const auto* first = reinterpret_cast<const hw::cqe64*>(cqes);
    for (;;) {
        const std::uint8_t op_own = first->op_own;
        if (hw::cqe_get_owner(op_own) == 0 && hw::cqe_get_opcode(op_own) != hw::cqe_opcode::INVALID) break;
        if (std::chrono::steady_clock::now() > end) {
            return error{EIO, "write-combining self-test: no completion for " + std::to_string(kNops) + " NOPs"};
        }
        std::this_thread::yield();
    }
    hw::from_device();
    if (hw::cqe_get_opcode(first->op_own) != hw::cqe_opcode::REQ) {
        return error{EIO, "write-combining self-test: the NOPs completed in error"};
    }
    wc_ = first->wqe_counter.value() != kNops - 1;
    wc_known_ = true;
    return wc_;
}

}  // namespace cxv
