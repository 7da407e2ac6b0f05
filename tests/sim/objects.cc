#include "tests/sim/objects.h"

#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"

namespace cxv::test {

using qpc = ifc::qpc;

// --- checks and bring-up ------------------------------------------------------------

void check_status(const cmd_result& r, cmd_status st, cmd_syndrome syn, std::source_location where) {
    INFO("checked at ", where.file_name(), ":", where.line());
    CHECK(r.status == st);
    CHECK_MESSAGE(r.synd() == syn, sim::name(r.synd()));
}

void bad_parameter(const cmd_result& r, std::source_location where) {
    check_status(r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER, where);
}
void in_use(const cmd_result& r, std::source_location where) {
    check_status(r, cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE, where);
}
void bad_state(const cmd_result& r, std::source_location where) {
    check_status(r, cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE, where);
}
const cmd_result& require_ok(const cmd_result& r) {
    REQUIRE_MESSAGE(r.status == cmd_status::OK, sim::name(r.synd()));
    return r;
}

std::vector<std::byte> linux_command(std::size_t bytes, cmd_opcode op, std::uint16_t op_mod) {
    std::vector<std::byte> in(bytes);
    CXV_LINUX_SET(cmd_in, in, opcode, static_cast<std::uint16_t>(op));
    CXV_LINUX_SET(cmd_in, in, op_mod, op_mod);
    return in;
}

cmd_result query_cap(harness& h, std::uint16_t op_mod) {
    return h.exec(linux_command(CXV_LINUX_BYTES(query_hca_cap_in), cmd_opcode::QUERY_HCA_CAP, op_mod),
                  CXV_LINUX_BYTES(query_hca_cap_out));
}

void boot(harness& h) {
    REQUIRE(h.wait_boot());
    h.set_cmdq();
}

void boot_and_enable(harness& h) {
    boot(h);
    REQUIRE(h.enable_hca().status == cmd_status::OK);
}

// --- the commands that name one object ------------------------------------------------

std::uint32_t alloc_pd(harness& h, std::uint16_t uid) {
    auto in = harness::input<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD);
    ifc::set<ifc::alloc_pd_in::uid>(in.data(), uid);
    auto r = h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    return ifc::get<ifc::alloc_pd_out::pd>(r.out.data());
}

cmd_result dealloc_pd(harness& h, std::uint32_t pd, std::uint16_t uid) {
    return h.exec(named_input<ifc::dealloc_pd_in, ifc::dealloc_pd_in::pd>(cmd_opcode::DEALLOC_PD, pd, uid), 16);
}

cmd_result dealloc_uar(harness& h, std::uint32_t uar, std::uint16_t uid) {
    return h.exec(named_input<ifc::dealloc_uar_in, ifc::dealloc_uar_in::uar>(cmd_opcode::DEALLOC_UAR, uar, uid), 16);
}

cmd_result destroy_eq(harness& h, std::uint32_t eqn) {
    return h.exec(named_input<ifc::destroy_eq_in, ifc::destroy_eq_in::eq_number>(cmd_opcode::DESTROY_EQ, eqn), 16);
}

cmd_result destroy_cq(harness& h, std::uint32_t cqn, std::uint16_t uid) {
    return h.exec(named_input<ifc::destroy_cq_in, ifc::destroy_cq_in::cqn>(cmd_opcode::DESTROY_CQ, cqn, uid), 16);
}

cmd_result destroy_srq(harness& h, std::uint32_t srqn, std::uint16_t uid) {
    return h.exec(named_input<ifc::destroy_srq_in, ifc::destroy_srq_in::srqn>(cmd_opcode::DESTROY_SRQ, srqn, uid), 16);
}

cmd_result destroy_qp(harness& h, std::uint32_t qpn, std::uint16_t uid) {
    return h.exec(named_input<ifc::destroy_qp_in, ifc::destroy_qp_in::qpn>(cmd_opcode::DESTROY_QP, qpn, uid), 16);
}

cmd_result destroy_mkey(harness& h, std::uint32_t index, std::uint16_t uid) {
    return h.exec(
        named_input<ifc::destroy_mkey_in, ifc::destroy_mkey_in::mkey_index>(cmd_opcode::DESTROY_MKEY, index, uid), 16);
}

cmd_result destroy_umem(harness& h, std::uint32_t id, std::uint16_t uid, std::size_t len) {
    return h.exec(named_input<ifc::destroy_umem_in, ifc::destroy_umem_in::umem_id>(
                      cmd_opcode::DESTROY_UMEM, id, uid, len - ifc::destroy_umem_in::size_bytes),
                  16);
}

cmd_result query_cq(harness& h, std::uint32_t cqn, std::size_t npas) {
    return h.exec(named_input<ifc::query_cq_in, ifc::query_cq_in::cqn>(cmd_opcode::QUERY_CQ, cqn),
                  ifc::query_cq_out::size_bytes + npas * 8);
}

cmd_result query_srq(harness& h, std::uint32_t srqn, std::size_t npas) {
    return h.exec(named_input<ifc::query_srq_in, ifc::query_srq_in::srqn>(cmd_opcode::QUERY_SRQ, srqn),
                  ifc::query_srq_out::size_bytes + npas * 8);
}

cmd_result query_qp(harness& h, std::uint32_t qpn, std::size_t npas) {
    return h.exec(named_input<ifc::query_qp_in, ifc::query_qp_in::qpn>(cmd_opcode::QUERY_QP, qpn),
                  ifc::query_qp_out::size_bytes + npas * 8);
}

// --- CREATE_* inputs ----------------------------------------------------------------------

namespace {

std::size_t pages_needed(const cq_spec& s) {
    const std::uint64_t page = std::uint64_t{4096} << s.log_page_size;
    const std::uint64_t ring = std::uint64_t{s.cqe_sz ? 128u : 64u} << s.log_size;
    const std::uint64_t bytes = ring + s.page_offset * (page / 64);
    return static_cast<std::size_t>((bytes + page - 1) / page);
}

}  // namespace

std::vector<std::byte> create_cq_in(const cq_spec& s) {
    const std::size_t n = s.npas ? s.npas : pages_needed(s);
    auto in = harness::input<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, n * 8);
    ifc::set<ifc::create_cq_in::uid>(in.data(), s.uid);
    std::byte* c = cqc_of(in);
    ifc::set<ifc::cqc::log_cq_size>(c, s.log_size);
    ifc::set<ifc::cqc::uar_page>(c, s.uar);
    ifc::set<ifc::cqc::c_eqn_or_apu_element>(c, s.eqn);
    ifc::set<ifc::cqc::cqe_sz>(c, s.cqe_sz);
    ifc::set<ifc::cqc::log_page_size>(c, s.log_page_size);
    ifc::set<ifc::cqc::page_offset>(c, s.page_offset);
    ifc::set<ifc::cqc::dbr_addr>(c, s.dbr);
    const std::uint64_t page = std::uint64_t{4096} << s.log_page_size;
    for (std::size_t i = 0; i < n; ++i) ifc::set<ifc::create_cq_in::pas>(in.data(), i, s.buf + i * page);
    return in;
}

std::byte* cqc_of(std::vector<std::byte>& in) { return ifc::at<ifc::create_cq_in::cq_context>(in.data()); }

std::uint32_t cqn_of(const cmd_result& r) { return ifc::get<ifc::create_cq_out::cqn>(r.out.data()); }

cmd_result create_srq(harness& h, const dma_buffer& buf, const srq_spec& s) {
    const std::uint64_t page = std::uint64_t{4096} << s.log_page;
    const std::uint64_t bytes =
        (std::uint64_t{1} << s.log_size) * (16u << s.log_stride) + std::uint64_t{s.page_offset} * (page / 64);
    const std::size_t n = s.npas >= 0 ? static_cast<std::size_t>(s.npas) : (bytes + page - 1) / page;
    auto in = harness::input<ifc::create_srq_in>(cmd_opcode::CREATE_SRQ, 0, n * 8);
    ifc::set<ifc::create_srq_in::uid>(in.data(), s.uid);
    std::byte* c = ifc::at<ifc::create_srq_in::srq_context_entry>(in.data());
    ifc::set<ifc::srqc::log_srq_size>(c, s.log_size);
    ifc::set<ifc::srqc::log_rq_stride>(c, s.log_stride);
    ifc::set<ifc::srqc::log_page_size>(c, s.log_page);
    ifc::set<ifc::srqc::page_offset>(c, s.page_offset);
    ifc::set<ifc::srqc::pd>(c, s.pd);
    ifc::set<ifc::srqc::cqn>(c, s.cqn);
    ifc::set<ifc::srqc::lwm>(c, s.lwm);
    ifc::set<ifc::srqc::xrcd>(c, s.xrcd);
    ifc::set<ifc::srqc::cont_srq>(c, s.cont ? 1 : 0);
    ifc::set<ifc::srqc::dbr_addr>(c, s.dbr ? s.dbr : buf.iova() + buf.size() - 64);
    for (std::size_t i = 0; i < n; ++i) {
        ifc::set<ifc::create_srq_in::pas>(in.data(), i, buf.iova() + i * page + s.pas_delta);
    }
    return h.exec(in, 16);
}

std::uint32_t srqn_of(const cmd_result& r) { return ifc::get<ifc::create_srq_out::srqn>(r.out.data()); }

std::uint32_t create_small_cq(harness& h, std::uint16_t uid) {
    const auto uar = h.alloc_uar();
    harness::eq e;
    REQUIRE(h.create_eq(e, uar, 4, 0, 0).status == cmd_status::OK);
    auto& ring = h.alloc(4096);
    const auto r = h.exec(
        create_cq_in({.uar = uar, .eqn = e.eqn, .buf = ring.iova(), .npas = 1, .dbr = ring.iova() + 2048, .uid = uid}),
        16);
    REQUIRE(r.status == cmd_status::OK);
    return cqn_of(r);
}

std::uint32_t create_srq_qp(harness& h, std::uint32_t pd, std::uint32_t cqn, std::uint32_t srqn) {
    auto& buf = h.alloc(4096);
    const auto r = h.exec(create_qp_in({.st = 2,
                                        .pd = pd,
                                        .uar = h.alloc_uar(),
                                        .cqn = cqn,
                                        .log_rq_size = 0,
                                        .log_rq_stride = 0,
                                        .log_sq_size = 2,
                                        .srqn = srqn,
                                        .buf = buf.iova(),
                                        .dbr = buf.iova() + 2048}),
                          16);
    REQUIRE_MESSAGE(r.status == cmd_status::OK, sim::name(r.synd()));
    return qpn_of(r);
}

std::vector<std::byte> create_qp_in(const qp_spec& s) {
    auto in = harness::input<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, s.npas * 8);
    std::byte* q = ifc::at<ifc::create_qp_in::qpc>(in.data());
    ifc::set<qpc::st>(q, s.st);
    ifc::set<qpc::pm_state>(q, 3);  // MIGRATED
    ifc::set<qpc::pd>(q, s.pd);
    ifc::set<qpc::uar_page>(q, s.uar);
    ifc::set<qpc::cqn_snd>(q, s.cqn);
    ifc::set<qpc::cqn_rcv>(q, s.cqn);
    ifc::set<qpc::log_rq_size>(q, s.log_rq_size);
    ifc::set<qpc::log_rq_stride>(q, s.log_rq_stride);
    ifc::set<qpc::log_sq_size>(q, s.log_sq_size);
    ifc::set<qpc::rq_type>(q, s.srqn ? 1 : 0);
    ifc::set<qpc::srqn_rmpn_xrqn>(q, s.srqn);
    ifc::set<qpc::dbr_addr>(q, s.dbr);
    for (std::size_t i = 0; i < s.npas; ++i) ifc::set<ifc::create_qp_in::pas>(in.data(), i, s.buf + i * 4096);
    return in;
}

std::uint32_t qpn_of(const cmd_result& r) { return ifc::get<ifc::create_qp_out::qpn>(r.out.data()); }

std::vector<std::byte> create_umem_in(unsigned log_page, std::uint32_t page_offset,
                                      const std::vector<std::uint64_t>& mtt, std::uint16_t uid) {
    auto in = harness::input<ifc::create_umem_in>(cmd_opcode::CREATE_UMEM, 0, mtt.size() * ifc::mtt::size_bytes);
    ifc::set<ifc::create_umem_in::uid>(in.data(), uid);
    std::byte* u = ifc::at<ifc::create_umem_in::umem>(in.data());
    ifc::set<ifc::umem::log_page_size>(u, log_page);
    ifc::set<ifc::umem::page_offset>(u, page_offset);
    ifc::set<ifc::umem::num_of_mtt>(u, mtt.size());
    for (std::size_t i = 0; i < mtt.size(); ++i) {
        std::byte* e = ifc::at<ifc::umem::mtt>(u, i);
        ifc::set<ifc::mtt::ptag_63_32>(e, static_cast<std::uint32_t>(mtt[i] >> 32));
        ifc::set<ifc::mtt::ptag_31_8>(e, static_cast<std::uint32_t>(mtt[i] >> 8));
        ifc::set<ifc::mtt::wr_en>(e, (mtt[i] >> 1) & 1);
        ifc::set<ifc::mtt::rd_en>(e, mtt[i] & 1);
    }
    return in;
}

std::uint32_t umem_id_of(const cmd_result& r) { return ifc::get<ifc::create_umem_out::umem_id>(r.out.data()); }

std::uint32_t create_umem(harness& h, const dma_buffer& mem, std::size_t pages, std::uint32_t page_offset,
                          std::uint16_t uid) {
    std::vector<std::uint64_t> mtt;
    for (std::size_t i = 0; i < pages; ++i) mtt.push_back((mem.iova() + i * 4096) | 0x3);  // wr_en, rd_en
    const auto r = h.exec(create_umem_in(0, page_offset, mtt, uid), 16);
    return r.status == cmd_status::OK ? umem_id_of(r) : 0;
}

// --- fixtures -------------------------------------------------------------------------

booted::booted() {
    REQUIRE(h.bring_up());
    pd = alloc_pd(h);
}

eq_env::eq_env(unsigned log_size, std::uint64_t bitmask, unsigned vector) {
    REQUIRE(h.bring_up());
    uar = h.alloc_uar();
    REQUIRE(h.create_eq(eq, uar, log_size, bitmask, vector).status == cmd_status::OK);
}

qp_env::qp_env(sim::device_config cfg, bool up) : h(cfg) {
    if (!up) return;
    REQUIRE(h.bring_up());
    setup();
}

void qp_env::setup() {
    uar = h.alloc_uar();
    REQUIRE(h.create_eq(eq, uar, 4, 0, 0).status == cmd_status::OK);
    pd = alloc_pd(h);
    cq = create_cq();
    REQUIRE(pd != 0);
    REQUIRE(cq != 0);
}

std::uint32_t qp_env::create_cq() {
    auto& buf = h.alloc(8192);
    const auto r = h.exec(
        create_cq_in({.log_size = 6, .uar = uar, .eqn = eq.eqn, .buf = buf.iova(), .dbr = buf.iova() + 4096}), 16);
    return r.status == cmd_status::OK ? cqn_of(r) : 0;
}

std::uint32_t qp_env::create_srq() {
    auto& buf = h.alloc(8192);
    const auto r = test::create_srq(h, buf, {.pd = pd, .dbr = buf.iova() + 4096});
    return r.status == cmd_status::OK ? srqn_of(r) : 0;
}

std::vector<std::byte> qp_env::qp_input(std::uint32_t st, std::size_t npas, std::uint32_t srqn, std::uint32_t cqn) {
    auto& buf = h.alloc((npas + 1) * 4096);
    return create_qp_in({.st = st,
                         .pd = pd,
                         .uar = uar,
                         .cqn = cqn ? cqn : cq,
                         .srqn = srqn,
                         .buf = buf.iova(),
                         .npas = npas,
                         .dbr = buf.iova() + npas * 4096});
}

std::uint32_t qp_env::create_qp(const std::vector<std::byte>& in) {
    const auto r = h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    return qpn_of(r);
}

std::uint32_t qp_env::create_qp(std::uint32_t st, std::uint32_t srqn, std::uint32_t cqn) {
    return create_qp(qp_input(st, 1, srqn, cqn));
}

}  // namespace cxv::test
