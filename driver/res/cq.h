// Completion queues (PRM "Completion Queue"): a ring of CQEs the device writes with the
// owner-bit protocol (64-byte entries, or 128-byte ones whose second half is the CQE), a doorbell record holding the consumer index and the arm
// state, and an EQ that receives the CQ's completion events.
#pragma once

#include <cstdint>
#include <memory>

#include "driver/res/object.h"

namespace cxv::driver {

class cq : public hca_object {
public:
    struct attr {
        unsigned entries = 256;  // at least this many CQEs (rounded up to a power of two)
        int eqn = -1;            // completion EQ; -1: the HCA's
        // The entry stride (cqc.cqe_sz): 64, or 128 (the CQE in the entry's second half,
        // the first left for data scattered to the CQE); anything else is EINVAL.
        unsigned cqe_size = 64;
        // cqc.oi: the device goes on writing over entries the driver has not taken
        // instead of failing the CQ with an overrun (EOPNOTSUPP without cap cq_oi).
        bool overrun_ignore = false;
    };
    // CREATE_CQ on fresh memory: every CQE invalid and owned by the device for the
    // first pass, consumer index 0.
    static result<std::shared_ptr<cq>> create(hca& h, const attr& a);
    ~cq();
    // DESTROY_CQ now (RESOURCE_BUSY while a QP uses the CQ).
    status destroy();

    std::uint32_t cqn() const noexcept { return cqn_; }
    unsigned entries() const noexcept { return 1u << log_size_; }
    unsigned log_entries() const noexcept { return log_size_; }
    unsigned cqe_size() const noexcept { return cqe_size_; }
    std::byte* cqes() const noexcept { return mem_.ring(); }
    std::byte* doorbell_record() const noexcept { return mem_.doorbell_record(); }
    std::uint32_t uar() const noexcept { return uar_; }
    hca& device() const noexcept { return owner(); }

    // QUERY_CQ: the firmware's view (its counters, status).
    struct state {
        std::uint32_t status = 0;  // 0 OK, 9 overflow, 10 write fail (PRM cqc.status)
        std::uint32_t producer_counter = 0;
        std::uint32_t consumer_counter = 0;
        std::uint32_t eqn = 0;
    };
    result<state> query();

private:
    explicit cq(hca& h) : hca_object(h) {}
    queue_memory mem_;
    std::uint32_t cqn_ = 0;
    unsigned log_size_ = 0;
    unsigned cqe_size_ = 64;
    std::uint32_t uar_ = 0;
};

}  // namespace cxv::driver
