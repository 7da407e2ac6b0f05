#include "driver/res/srq.h"

#include <bit>
#include <cerrno>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"
#include "hw/wqe.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

result<std::shared_ptr<srq>> srq::create(std::shared_ptr<pd> domain, const attr& a) {
    if (!domain) return error{EINVAL, "srq::create: no protection domain"};
    hca& h = domain->device();
    const std::byte* caps = h.caps().data();
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_srq_sz>(caps);
    const std::uint32_t max_stride = ifc::get<ifc::cmd_hca_cap::max_wqe_sz_rq>(caps);
    if (a.max_wr == 0 || a.max_wr > (1u << log_max)) {
        return error{EINVAL, fmt::format("srq::create: {} WQEs (the device allows 1 to {})", a.max_wr, 1u << log_max)};
    }
    // A WQE is the next segment and the scatter list, rounded up to a power of two.
    const std::size_t stride = std::bit_ceil(sizeof(hw::wqe_srq_next_seg) + std::size_t{a.max_sge} * sizeof(hw::wqe_data_seg));
    if (a.max_sge == 0 || stride > max_stride) {
        return error{EINVAL, fmt::format("srq::create: {} scatter entries (the device's WQEs hold at most {})",
                                         a.max_sge, max_stride / 16 - 1)};
    }
    if (a.limit >= std::bit_ceil(a.max_wr)) {
        return error{EINVAL, fmt::format("srq::create: limit {} is not below the SRQ size", a.limit)};
    }
    std::shared_ptr<srq> s(new srq(std::move(domain)));
    s->log_size_ = static_cast<unsigned>(std::bit_width(std::bit_ceil(a.max_wr)) - 1);
    s->wqe_shift_ = static_cast<unsigned>(std::countr_zero(stride));
    s->max_sge_ = static_cast<unsigned>((stride - sizeof(hw::wqe_srq_next_seg)) / sizeof(hw::wqe_data_seg));
    auto mem = queue_memory::alloc(h.device(), stride << s->log_size_);
    if (!mem) return mem.error();
    s->mem_ = std::move(mem).value();
    // The free list: each WQE names the next one, the last wraps to the first.
    for (unsigned i = 0; i < s->wqe_count(); ++i) {
        auto* next = reinterpret_cast<hw::wqe_srq_next_seg*>(s->mem_.ring() + (std::size_t{i} << s->wqe_shift_));
        next->next_wqe_index = hw::be16::from(static_cast<std::uint16_t>((i + 1) & (s->wqe_count() - 1)));
    }

    // At ISSI 1 (the only one this driver speaks) a basic SRQ is an RMP (PRM "RMP
    // Context"): its wq describes the same ring of linked WQEs (wq_type linked list, the
    // stride in bytes as log2). Linux's mlx5_ib makes its SRQs so at ISSI 1 and sends
    // CREATE_SRQ only at ISSI 0. Created ready, with no limit (lwm 0): arm() sets it.
    auto in = command<ifc::create_rmp_in>(cmd_opcode::CREATE_RMP, 0, s->mem_.pages() * 8);
    std::byte* rmpc = ifc::at<ifc::create_rmp_in::ctx>(in.data());
    ifc::set<ifc::rmpc::state>(rmpc, ifc::rmpc_values::state_rdy);
    std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    ifc::set<ifc::wq::wq_type>(wq, ifc::wq_values::type_linked_list);
    ifc::set<ifc::wq::log_wq_stride>(wq, s->wqe_shift_);
    ifc::set<ifc::wq::log_wq_pg_sz>(wq, s->mem_.log_page_size());
    ifc::set<ifc::wq::log_wq_sz>(wq, s->log_size_);
    ifc::set<ifc::wq::pd>(wq, s->pd_->pdn());
    ifc::set<ifc::wq::dbr_addr>(wq, s->mem_.doorbell_record_iova());
    for (std::size_t i = 0; i < s->mem_.pages(); ++i) ifc::set<ifc::wq::pas>(wq, i, s->mem_.page_iova(i));
    auto r = h.exec(in, ifc::create_rmp_out::size_bytes);
    if (!r) return r.error();
    s->srqn_ = ifc::get<ifc::create_rmp_out::rmpn>(r->data());
    s->created();
    s->pd_->hold();
    if (a.limit > 0) {
        if (auto st = s->arm(a.limit); !st) return st.error();
    }
    return s;
}

status srq::destroy() {
    if (destroyed_) return ok_status();
    auto in = command<ifc::destroy_rmp_in>(cmd_opcode::DESTROY_RMP);
    ifc::set<ifc::destroy_rmp_in::rmpn>(in.data(), srqn_);
    auto s = destroy_with(std::move(in));
    if (s) pd_->release();
    return s;
}

srq::~srq() { (void)destroy(); }

// MODIFY_RMP from ready to ready with the bitmask's lwm: the limit in the context's wq.
status srq::arm(unsigned limit) {
    auto in = command<ifc::modify_rmp_in>(cmd_opcode::MODIFY_RMP);
    ifc::set<ifc::modify_rmp_in::rmp_state>(in.data(), ifc::rmpc_values::state_rdy);
    ifc::set<ifc::modify_rmp_in::rmpn>(in.data(), srqn_);
    ifc::set<ifc::rmp_bitmask::lwm>(ifc::at<ifc::modify_rmp_in::bitmask>(in.data()), 1);
    std::byte* rmpc = ifc::at<ifc::modify_rmp_in::ctx>(in.data());
    ifc::set<ifc::rmpc::state>(rmpc, ifc::rmpc_values::state_rdy);
    ifc::set<ifc::wq::lwm>(ifc::at<ifc::rmpc::wq>(rmpc), limit);
    auto r = owner().exec(in, ifc::modify_rmp_out::size_bytes);
    if (!r) return r.error();
    return ok_status();
}

result<srq::state> srq::query() {
    auto in = command<ifc::query_rmp_in>(cmd_opcode::QUERY_RMP);
    ifc::set<ifc::query_rmp_in::rmpn>(in.data(), srqn_);
    auto r = owner().exec(in, ifc::query_rmp_out::size_bytes);
    if (!r) return r.error();
    const std::byte* rmpc = ifc::at<ifc::query_rmp_out::rmp_context>(r->data());
    const std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    return state{ifc::get<ifc::rmpc::state>(rmpc) != ifc::rmpc_values::state_rdy, ifc::get<ifc::wq::lwm>(wq),
                 ifc::get<ifc::wq::hw_counter>(wq)};
}

}  // namespace cxv::driver
