// Queue pairs (PRM "Queue Pair"): RC, UC and UD, with a send queue of 64-byte WQE basic
// blocks, a receive queue (or an SRQ), a doorbell record, a BlueFlame register of its
// own, and the state machine the firmware runs through the transition commands:
//
//   RST ─RST2INIT→ INIT ─INIT2RTR→ RTR ─RTR2RTS→ RTS   (INIT2INIT, RTS2RTS, SQERR2RTS,
//   SQD2RTS change attributes in place; 2ERR and 2RST from any state)
//
// modify() sends the command the current and target states name, with the attributes
// that transition takes for the QP's transport; the firmware checks them and refuses
// with its status and syndrome (the error names both).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "base/values.h"
#include "driver/res/cq.h"
#include "driver/res/object.h"
#include "driver/res/pd_mr.h"
#include "driver/res/q_counter.h"
#include "driver/res/srq.h"
#include "hw/opcodes.h"

namespace cxv::driver {

// qp_type, qp_state, qp_caps, qp_path and qp_modify_attr: base/values.h.
const char* name(qp_type t) noexcept;
const char* name(qp_state s) noexcept;

class qp : public hca_object {
public:
    using caps = qp_caps;  // base/values.h
    struct attr {
        qp_type type = qp_type::rc;
        std::shared_ptr<pd> domain;
        std::shared_ptr<cq> send_cq, recv_cq;
        std::shared_ptr<srq> shared;  // receives come from this SRQ; the QP has no RQ
        // The Q counter set the QP counts to from RST2INIT on (qpc.counter_set_id);
        // none: the device's default set 0.
        std::shared_ptr<q_counter> counter;
        caps cap;
    };
    static result<std::shared_ptr<qp>> create(const attr& a);
    ~qp();
    // DESTROY_QP now.
    status destroy();

    // The peer's address and a transition's attributes (base/values.h).
    using path = qp_path;
    using modify_attr = qp_modify_attr;
    // One transition to `to` from the current state (RST→INIT, INIT→INIT/RTR, RTR→RTS,
    // RTS→RTS, SQERR→RTS, SQD→RTS, any→ERR, any→RST). EINVAL for a pair the state
    // machine has no command for.
    status modify(qp_state to, const modify_attr& a);
    // The state the last successful transition left (the device may have moved the QP
    // to ERR or SQERR since: query() asks it).
    qp_state state() const noexcept { return state_; }
    result<qp_state> query();
    // ATTACH_TO_MCG, DETACH_FROM_MCG: the QP (UD) joins or leaves the multicast group
    // `mgid` (IBA 10.5): it is handed a copy of each packet to QP 0xFFFFFF with that
    // DGID. The firmware's refusal as its error; the verbs' checks (a multicast GID, UD,
    // an InfiniBand multicast LID) are the caller's.
    status attach_mcg(const std::array<std::uint8_t, 16>& mgid) {
        return multicast_group(hw::cmd_opcode::ATTACH_TO_MCG, mgid);
    }
    status detach_mcg(const std::array<std::uint8_t, 16>& mgid) {
        return multicast_group(hw::cmd_opcode::DETACH_FROM_MCG, mgid);
    }

    std::uint32_t qpn() const noexcept { return qpn_; }
    qp_type type() const noexcept { return type_; }
    // Send queue: 64-byte basic blocks.
    std::byte* sq() const noexcept { return mem_.ring() + sq_offset_; }
    unsigned sq_wqebb_count() const noexcept { return 1u << log_sq_; }
    unsigned log_sq_size() const noexcept { return log_sq_; }  // qpc.log_sq_size: log2 of the BBs
    bool has_sq() const noexcept { return has_sq_; }  // false: max_send_wr 0, qpc.no_sq
    unsigned max_send_wqebbs() const noexcept { return max_send_wqebbs_; }  // per WQE
    // Receive queue (none with an SRQ): WQEs of 1 << rq_wqe_shift() bytes.
    std::byte* rq() const noexcept { return mem_.ring(); }
    unsigned rq_wqe_count() const noexcept { return has_rq_ ? 1u << log_rq_ : 0; }
    unsigned rq_wqe_shift() const noexcept { return rq_shift_; }
    unsigned log_rq_size() const noexcept { return has_rq_ ? log_rq_ : 0; }  // qpc.log_rq_size (0: no RQ)
    std::byte* doorbell_record() const noexcept { return mem_.doorbell_record(); }
    const hca::bf_reg& bf() const noexcept { return bf_; }
    // The QP's BlueFlame register in BAR0 (PRM "BlueFlame"): through the write-combining
    // mapping when `write_combining` is set and the device has one (BlueFlame copies),
    // else through the uncached mapping (8-byte doorbells, whose store must not wait
    // in the CPU's write-combining buffers).
    std::byte* bf_register(bool write_combining) const noexcept;
    const caps& capabilities() const noexcept { return cap_; }  // as granted (rounded up)
    const std::shared_ptr<cq>& send_cq() const noexcept { return scq_; }
    const std::shared_ptr<cq>& recv_cq() const noexcept { return rcq_; }
    const std::shared_ptr<srq>& shared_rq() const noexcept { return srq_; }
    const std::shared_ptr<q_counter>& counter() const noexcept { return counter_; }

private:
    explicit qp(hca& h) : hca_object(h) {}
    status multicast_group(hw::cmd_opcode op, const std::array<std::uint8_t, 16>& mgid);
    std::shared_ptr<pd> pd_;
    std::shared_ptr<cq> scq_, rcq_;
    std::shared_ptr<srq> srq_;
    std::shared_ptr<q_counter> counter_;
    qp_type type_ = qp_type::rc;
    qp_state state_ = qp_state::reset;
    queue_memory mem_;
    hca::bf_reg bf_{};
    bool bf_held_ = false;
    caps cap_{};
    std::uint32_t qpn_ = 0;
    bool has_rq_ = false;
    unsigned log_rq_ = 0, rq_shift_ = 0, log_sq_ = 0;
    bool has_sq_ = true;
    unsigned max_send_wqebbs_ = 1;
    std::size_t sq_offset_ = 0;
};

}  // namespace cxv::driver
