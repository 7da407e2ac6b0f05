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

namespace {
constexpr std::uint16_t kArmSrq = 1;  // ARM_RQ op_mod: the queue is an SRQ
}  // namespace

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

    auto in = command<ifc::create_srq_in>(cmd_opcode::CREATE_SRQ, 0, s->mem_.pages() * 8);
    std::byte* srqc = ifc::at<ifc::create_srq_in::srq_context_entry>(in.data());
    ifc::set<ifc::srqc::log_srq_size>(srqc, s->log_size_);
    ifc::set<ifc::srqc::log_rq_stride>(srqc, s->wqe_shift_ - 4);
    ifc::set<ifc::srqc::log_page_size>(srqc, s->mem_.log_page_size());
    ifc::set<ifc::srqc::pd>(srqc, s->pd_->pdn());
    ifc::set<ifc::srqc::dbr_addr>(srqc, s->mem_.doorbell_record_iova());
    for (std::size_t i = 0; i < s->mem_.pages(); ++i) ifc::set<ifc::create_srq_in::pas>(in.data(), i, s->mem_.page_iova(i));
    auto r = h.exec(in, ifc::create_srq_out::size_bytes);
    if (!r) return r.error();
    s->srqn_ = ifc::get<ifc::create_srq_out::srqn>(r->data());
    s->created();
    s->pd_->hold();
    // The limit is armed by ARM_RQ (the firmware takes no lwm at creation).
    if (a.limit > 0) {
        if (auto st = s->arm(a.limit); !st) return st.error();
    }
    return s;
}

status srq::destroy() {
    if (destroyed_) return ok_status();
    auto in = command<ifc::destroy_srq_in>(cmd_opcode::DESTROY_SRQ);
    ifc::set<ifc::destroy_srq_in::srqn>(in.data(), srqn_);
    auto s = destroy_with(std::move(in));
    if (s) pd_->release();
    return s;
}

srq::~srq() { (void)destroy(); }

status srq::arm(unsigned limit) {
    auto in = command<ifc::arm_rq_in>(cmd_opcode::ARM_RQ, kArmSrq);
    ifc::set<ifc::arm_rq_in::srq_number>(in.data(), srqn_);
    ifc::set<ifc::arm_rq_in::lwm>(in.data(), limit);
    auto r = owner().exec(in, 16);
    if (!r) return r.error();
    return ok_status();
}

result<srq::state> srq::query() {
    auto in = command<ifc::query_srq_in>(cmd_opcode::QUERY_SRQ);
    ifc::set<ifc::query_srq_in::srqn>(in.data(), srqn_);
    auto r = owner().exec(in, ifc::query_srq_out::size_bytes);
    if (!r) return r.error();
    const std::byte* srqc = ifc::at<ifc::query_srq_out::srq_context_entry>(r->data());
    return state{ifc::get<ifc::srqc::state>(srqc), ifc::get<ifc::srqc::lwm>(srqc), ifc::get<ifc::srqc::wqe_cnt>(srqc)};
}

}  // namespace cxv::driver
