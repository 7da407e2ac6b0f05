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

#include "driver/res/cq.h"
#include "driver/res/object.h"
#include "driver/res/pd_mr.h"
#include "driver/res/q_counter.h"
#include "driver/res/srq.h"

namespace cxv::driver {

enum class qp_type { rc, uc, ud };
enum class qp_state { reset, init, rtr, rts, sqerr, sqd, error };
const char* name(qp_type t) noexcept;
const char* name(qp_state s) noexcept;

class qp : public hca_object {
public:
    struct caps {
        unsigned max_send_wr = 64;
        unsigned max_recv_wr = 64;  // ignored with an SRQ
        unsigned max_send_sge = 1;
        unsigned max_recv_sge = 1;
        unsigned max_inline_data = 0;
    };
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

    // The address of the peer (INIT2RTR of a connected QP): InfiniBand by LID, with a
    // GRH when grh is set; RoCE always by GID.
    struct path {
        std::uint16_t dlid = 0;
        std::uint8_t sl = 0;
        bool grh = false;
        std::array<std::uint8_t, 16> dgid{};
        std::uint8_t sgid_index = 0;
        std::uint8_t hop_limit = 64;
        std::uint8_t traffic_class = 0;
        std::uint32_t flow_label = 0;
    };
    // Attributes as ibv_qp_attr names them; each transition takes its own (see modify).
    struct modify_attr {
        std::uint8_t port = 1;
        std::uint16_t pkey_index = 0;
        std::uint32_t qkey = 0;      // UD
        unsigned access = 0;         // mr_access bits: remote read/write/atomic (RC, UC)
        std::uint32_t path_mtu = 5;  // 1 = 256 .. 5 = 4096
        std::uint32_t dest_qpn = 0;
        std::uint32_t rq_psn = 0;
        std::uint32_t sq_psn = 0;
        unsigned max_dest_rd_atomic = 1;  // responder: RDMA READ/atomic in flight
        unsigned max_rd_atomic = 1;       // requester
        std::uint8_t min_rnr_timer = 12;  // IBTA encoding (12 = 0.64 ms)
        std::uint8_t timeout = 14;        // ACK timeout, 4.096 µs << timeout
        std::uint8_t retry_cnt = 7;
        std::uint8_t rnr_retry = 7;       // 7 = forever
        path ah;
    };
    // One transition to `to` from the current state (RST→INIT, INIT→INIT/RTR, RTR→RTS,
    // RTS→RTS, SQERR→RTS, SQD→RTS, any→ERR, any→RST). EINVAL for a pair the state
    // machine has no command for.
    status modify(qp_state to, const modify_attr& a);
    // The state the last successful transition left (the device may have moved the QP
    // to ERR or SQERR since: query() asks it).
    qp_state state() const noexcept { return state_; }
    result<qp_state> query();

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
