#include "hw/printers.h"

namespace cxv::hw {

std::string to_string(const wqe_ctrl_seg& s) {
    return fmt::format("ctrl{{{} opmod={:#x} wqe_index={} qpn={:#x} ds={} fence={} ce={} se={} imm={:#x}}}",
                       ctrl_opcode(s), ctrl_opmod(s), ctrl_wqe_index(s), ctrl_qpn(s), ctrl_ds(s),
                       static_cast<unsigned>(ctrl_fence(s)), ctrl_cq_update_set(s) ? 1 : 0,
                       ctrl_solicited_set(s) ? 1 : 0, s.imm.value());
}

std::string to_string(const wqe_data_seg& s) {
    return fmt::format("data{{byte_count={} lkey={:#x} addr={:#x}}}", s.byte_count.value(),
                       s.lkey.value(), s.addr.value());
}

std::string to_string(const cqe64& c) {
    const auto op = cqe_get_opcode(c.op_own);
    if (op == cqe_opcode::REQ_ERR || op == cqe_opcode::RESP_ERR) {
        const auto& e = reinterpret_cast<const err_cqe64&>(c);
        return fmt::format("cqe{{{} syndrome={} vendor_err_synd={:#x} qpn={:#x} wqe_opcode={:#x} "
                           "wqe_counter={} owner={}}}",
                           op, static_cast<cqe_syndrome>(e.syndrome), e.vendor_err_synd,
                           err_cqe_qpn(e), err_cqe_wqe_opcode(e), e.wqe_counter.value(),
                           cqe_get_owner(e.op_own));
    }
    return fmt::format("cqe{{{} qpn={:#x} wqe_counter={} byte_cnt={} imm={:#x} srqn={:#x} "
                       "src_qpn={:#x} slid={:#x} se={} owner={}}}",
                       op, cqe_qpn(c), c.wqe_counter.value(), c.byte_cnt.value(),
                       c.imm_inval_pkey.value(), cqe_srqn(c), cqe_src_qpn(c), c.slid.value(),
                       cqe_get_se(c.op_own) ? 1 : 0, cqe_get_owner(c.op_own));
}

}  // namespace cxv::hw
