// What cxv::qp keeps beside its handle (cxv.cc, cxv_raw_qp.cc): its rings, shared with
// its CQs, and a raw packet QP's device objects. Private to api/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "api/cxv.h"
#include "driver/res/eth.h"
#include "queues/mp_send_queue.h"
#include "queues/recv_queue.h"
#include "queues/send_queue.h"

namespace cxv {

// The rings and what their retire() touches: on the heap, shared with the CQs, which
// keep them past the QP until their pollers have let go.
struct qp::rings {
    // The doorbell records: the QP's, or a raw packet QP's SQ's and RQ's.
    std::array<std::byte*, 2> dbrecs{};
    std::uint32_t user_index = 0;  // a raw packet QP's RQ's (queues::qp_rings::user_index)
    std::vector<std::uint64_t> sq_wr_ids, rq_wr_ids;
    std::vector<std::uint32_t> sq_ends;
    queues::send_queue sq;
    std::unique_ptr<queues::mp_send_queue> mpsq;
    queues::recv_queue rq;
    // The SRQ the QP's receives come from, when the QP held it last: a poller retiring
    // into its ring writes its WQEs' free list, so it stays as long as the rings do.
    std::shared_ptr<srq> shared;
};

// A raw packet QP's objects (PRM "Transport Interface"), and its state as the verbs see
// it: the SQ and RQ have their own (sqc.state, rqc.state).
struct qp::raw_objects {
    std::shared_ptr<driver::transport_domain> td;
    std::shared_ptr<driver::tis> tis;
    std::shared_ptr<driver::sq> sq;  // null without sends (max_send_wr 0)
    std::shared_ptr<driver::rq> rq;  // null without receives (max_recv_wr 0)
    std::shared_ptr<driver::tir> tir;
    caps granted;
    qp_state state = qp_state::reset;
};

}  // namespace cxv
