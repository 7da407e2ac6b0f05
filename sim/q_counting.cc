#include "sim/q_counting.h"

#include "hw/ifc.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using hw::cqe_syndrome;

void q_counting::count(const qp_object& qp, std::uint32_t q_counter_values::*what) {
    auto it = sets_.find(ifc::get<ifc::qpc::counter_set_id>(qp.qpc.data()));
    if (it == sets_.end()) it = sets_.find(0);
    ++(it->second.v.*what);
}

// PRM "Q Counters": the error counters by CQE syndrome (PRM "Completion Queue Entry
// Format", syndrome values).
void q_counting::req_error(const qp_object& qp, cqe_syndrome why) {
    using v = q_counter_values;
    count(qp, &v::req_cqe_error);
    switch (why) {
    case cqe_syndrome::LOCAL_LENGTH_ERR: return count(qp, &v::req_local_length_error);
    case cqe_syndrome::LOCAL_QP_OP_ERR: return count(qp, &v::local_operation_error);
    case cqe_syndrome::LOCAL_PROT_ERR: return count(qp, &v::req_local_protection);
    case cqe_syndrome::REMOTE_INVAL_REQ_ERR: return count(qp, &v::req_remote_invalid_request);
    case cqe_syndrome::REMOTE_ACCESS_ERR: return count(qp, &v::req_remote_access_errors);
    case cqe_syndrome::REMOTE_OP_ERR: return count(qp, &v::req_remote_operation_errors);
    case cqe_syndrome::TRANSPORT_RETRY_EXC_ERR: return count(qp, &v::req_transport_retries_exceeded);
    default: return;
    }
}

void q_counting::resp_error(const qp_object& qp, cqe_syndrome why, bool cqe) {
    using v = q_counter_values;
    if (cqe) count(qp, &v::resp_cqe_error);
    switch (why) {
    case cqe_syndrome::LOCAL_LENGTH_ERR: return count(qp, &v::resp_local_length_error);
    case cqe_syndrome::LOCAL_PROT_ERR: return count(qp, &v::resp_local_protection);
    case cqe_syndrome::REMOTE_INVAL_REQ_ERR: return count(qp, &v::resp_remote_invalid_request);
    case cqe_syndrome::REMOTE_ACCESS_ERR: return count(qp, &v::resp_remote_access_errors);
    default: return;
    }
}

}  // namespace cxv::sim
