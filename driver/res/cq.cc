#include "driver/res/cq.h"

#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "driver/cmd/cmd_queue.h"
#include "hw/cqe.h"
#include "hw/ifc.h"

namespace cxv::driver {

namespace ifc = hw::ifc;
using hw::cmd_opcode;

result<std::shared_ptr<cq>> cq::create(hca& h, const attr& a) {
    const unsigned log_max = ifc::get<ifc::cmd_hca_cap::log_max_cq_sz>(h.caps().data());
    if (a.entries == 0 || a.entries > (1u << log_max)) {
        return error{EINVAL, fmt::format("cq::create: {} entries (the device allows 1 to {})", a.entries, 1u << log_max)};
    }
    if (a.cqe_size != 64 && a.cqe_size != 128) {
        return error{EINVAL, fmt::format("cq::create: {}-byte CQEs (the device writes 64 or 128)", a.cqe_size)};
    }
    if (a.overrun_ignore && !ifc::get<ifc::cmd_hca_cap::cq_oi>(h.caps().data())) {
        return error{EOPNOTSUPP, "cq::create: the device cannot ignore CQ overruns (cap cq_oi is 0)"};
    }
    std::shared_ptr<cq> c(new cq(h));
    c->log_size_ = static_cast<unsigned>(std::bit_width(std::bit_ceil(a.entries)) - 1);
    c->cqe_size_ = a.cqe_size;
    const std::size_t bytes = std::size_t{a.cqe_size} << c->log_size_;
    auto mem = queue_memory::alloc(h.device(), bytes);
    if (!mem) return mem.error();
    c->mem_ = std::move(mem).value();
    // The device writes owner = pass parity; on the first pass that is 0, so every
    // entry starts as invalid with owner 1. A 128-byte entry's CQE is its second half
    // (PRM "CQE Format").
    for (std::size_t i = 0; i < c->entries(); ++i) {
        auto* e = reinterpret_cast<hw::cqe64*>(c->mem_.ring() + (i + 1) * a.cqe_size - sizeof(hw::cqe64));
        e->op_own = hw::make_op_own(hw::cqe_opcode::INVALID, false, 1);
    }
    c->uar_ = h.uar();

    auto in = command<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, c->mem_.pages() * 8);
    std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(in.data());
    ifc::set<ifc::cqc::cqe_sz>(cqc, a.cqe_size == 128 ? 1 : 0);
    ifc::set<ifc::cqc::oi>(cqc, a.overrun_ignore ? 1 : 0);
    ifc::set<ifc::cqc::log_cq_size>(cqc, c->log_size_);
    ifc::set<ifc::cqc::uar_page>(cqc, c->uar_);
    ifc::set<ifc::cqc::c_eqn_or_apu_element>(cqc, a.eqn >= 0 ? static_cast<std::uint32_t>(a.eqn) : h.comp_eqn());
    ifc::set<ifc::cqc::log_page_size>(cqc, c->mem_.log_page_size());
    ifc::set<ifc::cqc::dbr_addr>(cqc, c->mem_.doorbell_record_iova());
    for (std::size_t i = 0; i < c->mem_.pages(); ++i) ifc::set<ifc::create_cq_in::pas>(in.data(), i, c->mem_.page_iova(i));
    auto r = h.exec(in, ifc::create_cq_out::size_bytes);
    if (!r) return r.error();
    c->cqn_ = ifc::get<ifc::create_cq_out::cqn>(r->data());
    c->created();
    return c;
}

status cq::destroy() {
    auto in = command<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ);
    ifc::set<ifc::destroy_cq_in::cqn>(in.data(), cqn_);
    return destroy_with(std::move(in));
}

cq::~cq() { (void)destroy(); }

result<cq::state> cq::query() {
    auto in = command<ifc::query_cq_in>(cmd_opcode::QUERY_CQ);
    ifc::set<ifc::query_cq_in::cqn>(in.data(), cqn_);
    auto r = owner().exec(in, ifc::query_cq_out::size_bytes);
    if (!r) return r.error();
    const std::byte* cqc = ifc::at<ifc::query_cq_out::cq_context>(r->data());
    return state{ifc::get<ifc::cqc::status>(cqc), ifc::get<ifc::cqc::producer_counter>(cqc),
                 ifc::get<ifc::cqc::consumer_counter>(cqc), ifc::get<ifc::cqc::c_eqn_or_apu_element>(cqc)};
}

}  // namespace cxv::driver
