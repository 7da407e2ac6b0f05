// Shared receive queues (PRM "Shared Receive Queue"): a ring of receive WQEs (a 16-byte
// next segment, then the scatter list) that several QPs take their receives from, a
// doorbell record with the WQE counter, and a limit (lwm) below which the device
// raises an SRQ_RQ_LIMIT event once armed. Made as an RMP (PRM "RMP Context": CREATE_RMP,
// MODIFY_RMP, QUERY_RMP, DESTROY_RMP), the SRQ of an ISSI 1 driver; srqn() is the RMP's
// number, which QPs name as their SRQ.
#pragma once

#include <cstdint>
#include <memory>

#include "base/values.h"
#include "driver/res/object.h"
#include "driver/res/pd_mr.h"

namespace cxv::driver {

class srq : public hca_object {
public:
    using attr = srq_attr;  // base/values.h
    static result<std::shared_ptr<srq>> create(std::shared_ptr<pd> pd, const attr& a);
    ~srq();
    // DESTROY_RMP now (RESOURCE_BUSY while a QP is attached).
    status destroy();
    // MODIFY_RMP: the next time fewer than `limit` WQEs are posted, raise SRQ_RQ_LIMIT
    // (0 disarms).
    status arm(unsigned limit);

    std::uint32_t srqn() const noexcept { return srqn_; }
    unsigned wqe_count() const noexcept { return 1u << log_size_; }
    unsigned wqe_shift() const noexcept { return wqe_shift_; }  // log2 of the WQE stride in bytes
    unsigned max_sge() const noexcept { return max_sge_; }
    std::byte* wqes() const noexcept { return mem_.ring(); }
    std::byte* doorbell_record() const noexcept { return mem_.doorbell_record(); }
    const std::shared_ptr<pd>& domain() const noexcept { return pd_; }
    hca& device() const noexcept { return owner(); }

    // QUERY_RMP: the device's view.
    struct state {
        std::uint32_t state = 0;  // 0 ready, 1 error
        std::uint32_t lwm = 0;    // the armed limit, 0 once the event fired
        std::uint32_t wqe_cnt = 0;  // WQEs the device has consumed (wq.hw_counter)
    };
    result<state> query();

private:
    explicit srq(std::shared_ptr<pd> p) : hca_object(p->device()), pd_(std::move(p)) {}
    std::shared_ptr<pd> pd_;
    queue_memory mem_;
    std::uint32_t srqn_ = 0;
    unsigned log_size_ = 0;
    unsigned wqe_shift_ = 0;
    unsigned max_sge_ = 0;
};

}  // namespace cxv::driver
