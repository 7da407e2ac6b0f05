// Shared receive queues: CREATE_SRQ checks, srqn allocation, QUERY_SRQ from firmware
// memory, DESTROY_SRQ, ARM_RQ.
#include <set>

#include <doctest/doctest.h>

#include "tests/sim/harness.h"

using namespace cxv;
using hw::cmd_opcode;
using hw::cmd_status;
using hw::cmd_syndrome;
namespace ifc = hw::ifc;
using H = test::harness;

namespace {

std::uint32_t alloc_pd(H& h, std::uint16_t uid = 0) {
    auto in = H::input<ifc::alloc_pd_in>(cmd_opcode::ALLOC_PD);
    ifc::set<ifc::alloc_pd_in::uid>(in.data(), uid);
    auto r = h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    return ifc::get<ifc::alloc_pd_out::pd>(r.out.data());
}

cmd_status dealloc_pd(H& h, std::uint32_t pd, std::uint16_t uid = 0) {
    auto in = H::input<ifc::dealloc_pd_in>(cmd_opcode::DEALLOC_PD);
    ifc::set<ifc::dealloc_pd_in::pd>(in.data(), pd);
    ifc::set<ifc::dealloc_pd_in::uid>(in.data(), uid);
    return h.exec(in, 16).status;
}

// An SRQ of 2^log_size WQEs of 16 << log_stride bytes in `buf`, page list of npas
// entries (default: as many as the buffer needs, one per 4 KiB page).
struct srq_spec {
    unsigned log_size = 4;
    unsigned log_stride = 2;  // 64-byte WQEs
    unsigned log_page = 0;
    unsigned page_offset = 0;
    std::uint32_t pd = 0;
    std::uint32_t cqn = 0;
    std::uint16_t uid = 0;
    std::uint64_t dbr = 0;
    std::uint32_t lwm = 0;
    std::uint32_t xrcd = 0;
    bool cont = false;
    int npas = -1;
    std::uint64_t pas_delta = 0;  // added to every page address
};

test::cmd_result create_srq(H& h, const test::dma_buffer& buf, const srq_spec& s) {
    const std::uint64_t page = std::uint64_t{4096} << s.log_page;
    const std::uint64_t bytes = (std::uint64_t{1} << s.log_size) * (16u << s.log_stride) +
                                std::uint64_t{s.page_offset} * (page / 64);
    const std::size_t n = s.npas >= 0 ? static_cast<std::size_t>(s.npas) : (bytes + page - 1) / page;
    auto in = H::input<ifc::create_srq_in>(cmd_opcode::CREATE_SRQ, 0, n * 8);
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

std::uint32_t srqn_of(const test::cmd_result& r) { return ifc::get<ifc::create_srq_out::srqn>(r.out.data()); }

test::cmd_result destroy_srq(H& h, std::uint32_t srqn, std::uint16_t uid = 0) {
    auto in = H::input<ifc::destroy_srq_in>(cmd_opcode::DESTROY_SRQ);
    ifc::set<ifc::destroy_srq_in::srqn>(in.data(), srqn);
    ifc::set<ifc::destroy_srq_in::uid>(in.data(), uid);
    return h.exec(in, 16);
}

test::cmd_result query_srq(H& h, std::uint32_t srqn, std::size_t npas = 1) {
    auto in = H::input<ifc::query_srq_in>(cmd_opcode::QUERY_SRQ);
    ifc::set<ifc::query_srq_in::srqn>(in.data(), srqn);
    return h.exec(in, ifc::query_srq_out::size_bytes + npas * 8);
}

test::cmd_result arm_rq(H& h, std::uint16_t op_mod, std::uint32_t srqn, std::uint32_t lwm,
                        std::uint16_t uid = 0) {
    auto in = H::input<ifc::arm_rq_in>(cmd_opcode::ARM_RQ, op_mod);
    ifc::set<ifc::arm_rq_in::srq_number>(in.data(), srqn);
    ifc::set<ifc::arm_rq_in::lwm>(in.data(), lwm);
    ifc::set<ifc::arm_rq_in::uid>(in.data(), uid);
    return h.exec(in, 16);
}

// A 16-entry CQ on a fresh UAR and EQ. Returns cqn.
std::uint32_t create_cq(H& h, std::uint16_t uid = 0) {
    const auto uar = h.alloc_uar();
    H::eq e;
    REQUIRE(h.create_eq(e, uar, 4, 0, 0).status == cmd_status::OK);
    auto& ring = h.alloc(4096);
    auto in = H::input<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, 8);
    ifc::set<ifc::create_cq_in::uid>(in.data(), uid);
    std::byte* c = ifc::at<ifc::create_cq_in::cq_context>(in.data());
    ifc::set<ifc::cqc::log_cq_size>(c, 4);
    ifc::set<ifc::cqc::uar_page>(c, uar);
    ifc::set<ifc::cqc::c_eqn_or_apu_element>(c, e.eqn);
    ifc::set<ifc::cqc::dbr_addr>(c, ring.iova() + 2048);
    ifc::set<ifc::create_cq_in::pas>(in.data(), 0, ring.iova());
    auto r = h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    return ifc::get<ifc::create_cq_out::cqn>(r.out.data());
}

test::cmd_result destroy_cq(H& h, std::uint32_t cqn) {
    auto in = H::input<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ);
    ifc::set<ifc::destroy_cq_in::cqn>(in.data(), cqn);
    return h.exec(in, 16);
}

// A UD QP whose receive side is the SRQ. Returns qpn.
std::uint32_t create_srq_qp(H& h, std::uint32_t pd, std::uint32_t cqn, std::uint32_t srqn) {
    auto& buf = h.alloc(4096);
    auto in = H::input<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, 8);
    std::byte* c = ifc::at<ifc::create_qp_in::qpc>(in.data());
    ifc::set<ifc::qpc::st>(c, 2);        // UD
    ifc::set<ifc::qpc::pm_state>(c, 3);  // migrated
    ifc::set<ifc::qpc::pd>(c, pd);
    ifc::set<ifc::qpc::uar_page>(c, h.alloc_uar());
    ifc::set<ifc::qpc::cqn_snd>(c, cqn);
    ifc::set<ifc::qpc::cqn_rcv>(c, cqn);
    ifc::set<ifc::qpc::rq_type>(c, 1);   // SRQ
    ifc::set<ifc::qpc::srqn_rmpn_xrqn>(c, srqn);
    ifc::set<ifc::qpc::log_sq_size>(c, 2);
    ifc::set<ifc::qpc::dbr_addr>(c, buf.iova() + 2048);
    ifc::set<ifc::create_qp_in::pas>(in.data(), 0, buf.iova());
    auto r = h.exec(in, 16);
    REQUIRE_MESSAGE(r.status == cmd_status::OK, hw::name(r.synd()));
    return ifc::get<ifc::create_qp_out::qpn>(r.out.data());
}

void check_fails(const test::cmd_result& r, cmd_status st, cmd_syndrome syn) {
    CHECK(r.status == st);
    CHECK_MESSAGE(r.synd() == syn, hw::name(r.synd()));
}

// Every firmware page given so far lies between the command queue and the next IOVA the
// harness hands out: a fault injected there hits firmware memory (ICM) only.
void fault_firmware_pages(H& h) {
    const std::uint64_t first = 0x110000;  // just after the command queue page
    h.dev().mmu().inject_fault(first, h.next_iova(0) - first);
}

}  // namespace

TEST_CASE("CREATE_SRQ: unique non-zero srqns; QUERY_SRQ reads the context back") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    auto& buf = h.alloc(2 * 4096);
    auto a = create_srq(h, buf, {.log_size = 5, .log_stride = 3, .pd = pd});
    REQUIRE(a.status == cmd_status::OK);
    auto b = create_srq(h, buf, {.pd = pd});
    REQUIRE(b.status == cmd_status::OK);
    CHECK(srqn_of(a) != 0);
    CHECK(srqn_of(b) != 0);
    CHECK(srqn_of(a) != srqn_of(b));

    auto q = query_srq(h, srqn_of(a), 2);  // 32 x 128 bytes: one page
    REQUIRE(q.status == cmd_status::OK);
    const std::byte* c = ifc::at<ifc::query_srq_out::srq_context_entry>(q.out.data());
    CHECK(ifc::get<ifc::srqc::state>(c) == 0);
    CHECK(ifc::get<ifc::srqc::log_srq_size>(c) == 5);
    CHECK(ifc::get<ifc::srqc::log_rq_stride>(c) == 3);
    CHECK(ifc::get<ifc::srqc::pd>(c) == pd);
    CHECK(ifc::get<ifc::srqc::lwm>(c) == 0);
    CHECK(ifc::get<ifc::srqc::wqe_cnt>(c) == 0);
    CHECK(ifc::get<ifc::srqc::dbr_addr>(c) == buf.iova() + buf.size() - 64);
    CHECK(ifc::get<ifc::query_srq_out::pas>(q.out.data(), 0) == buf.iova());
    CHECK(ifc::get<ifc::query_srq_out::pas>(q.out.data(), 1) == 0);

    // The SRQs hold their PD.
    CHECK(dealloc_pd(h, pd) == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_srq(h, srqn_of(a)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd) == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_srq(h, srqn_of(b)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd) == cmd_status::OK);
}

TEST_CASE("CREATE_SRQ: a page offset and larger pages change how many pages are needed") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    auto& buf = h.alloc(4 * 8192);
    // 64 WQEs of 64 bytes fill a 4 KiB page exactly; 64-byte offset units spill into a
    // second page.
    check_fails(create_srq(h, buf, {.log_size = 6, .page_offset = 1, .pd = pd, .npas = 1}),
                cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    CHECK(create_srq(h, buf, {.log_size = 6, .page_offset = 1, .pd = pd, .npas = 2}).status ==
          cmd_status::OK);
    // 8 KiB pages: one holds the same SRQ, but page addresses must be 8 KiB aligned.
    auto& big = h.alloc(4 * 8192);
    const std::uint64_t skew = big.iova() % 8192 ? 8192 - big.iova() % 8192 : 0;
    CHECK(create_srq(h, big, {.log_size = 6, .log_page = 1, .pd = pd, .npas = 1, .pas_delta = skew}).status ==
          cmd_status::OK);
    check_fails(create_srq(h, big, {.log_size = 6, .log_page = 1, .pd = pd, .npas = 1, .pas_delta = skew + 4096}),
                cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
}

TEST_CASE("CREATE_SRQ refuses bad sizes, PDs, CQs, XRC, doorbell records and page lists") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    const auto user_pd = alloc_pd(h, 7);
    auto& buf = h.alloc(4 * 4096);
    // (log_srq_size is 4 bits wide and log_max_srq_sz is 15: no size is too big.)
    // 1 KiB WQEs exceed max_wqe_sz_rq (512).
    check_fails(create_srq(h, buf, {.log_stride = 6, .pd = pd}), cmd_status::BAD_PARAM,
                cmd_syndrome::EXCEEDS_LIMIT);
    CHECK(create_srq(h, buf, {.log_stride = 5, .pd = pd}).status == cmd_status::OK);
    check_fails(create_srq(h, buf, {.pd = 0xabcd}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PD);
    // A PD of another user, and a PD of uid 0 for a user's SRQ.
    check_fails(create_srq(h, buf, {.pd = user_pd}), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_fails(create_srq(h, buf, {.pd = pd, .uid = 7}), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(create_srq(h, buf, {.pd = user_pd, .uid = 7}).status == cmd_status::OK);
    check_fails(create_srq(h, buf, {.pd = pd, .cqn = 0x55}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    check_fails(create_srq(h, buf, {.pd = pd, .xrcd = 1}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_fails(create_srq(h, buf, {.pd = pd, .cont = true}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // A limit must be below the SRQ's 16 WQEs.
    check_fails(create_srq(h, buf, {.pd = pd, .lwm = 16}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_fails(create_srq(h, buf, {.log_page = 52, .pd = pd, .npas = 1}), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(create_srq(h, buf, {.pd = pd, .dbr = buf.iova() + 4}), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_ALIGNMENT);
    check_fails(create_srq(h, buf, {.pd = pd, .pas_delta = 0x800}), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_ALIGNMENT);
    // 256 WQEs of 64 bytes need 4 pages.
    check_fails(create_srq(h, buf, {.log_size = 8, .pd = pd, .npas = 3}), cmd_status::BAD_INPUT_LEN,
                cmd_syndrome::PAS_TOO_SHORT);
    CHECK(create_srq(h, buf, {.log_size = 8, .pd = pd, .npas = 4}).status == cmd_status::OK);

    // The refused commands took no reference: only the three SRQs created hold PDs.
    for (std::uint32_t srqn : {1u, 3u}) REQUIRE(destroy_srq(h, srqn).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, 2, 7).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd) == cmd_status::OK);
    CHECK(dealloc_pd(h, user_pd, 7) == cmd_status::OK);
}

TEST_CASE("CREATE_SRQ: firmware memory runs out with NO_RESOURCES, and srqns stay unique") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    auto& buf = h.alloc(4096);
    std::set<std::uint32_t> seen;
    test::cmd_result r;
    // No EQ answers page requests, so the pages given at bring-up are all there is.
    for (int i = 0; i < 100000; ++i) {
        r = create_srq(h, buf, {.pd = pd});
        if (r.status != cmd_status::OK) break;
        CHECK(seen.insert(srqn_of(r)).second);
    }
    check_fails(r, cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    REQUIRE(seen.size() > 100);
    REQUIRE(destroy_srq(h, *seen.begin()).status == cmd_status::OK);
    auto again = create_srq(h, buf, {.pd = pd});
    REQUIRE(again.status == cmd_status::OK);
    CHECK(srqn_of(again) != 0);
}

TEST_CASE("CREATE_SRQ and QUERY_SRQ: an IOMMU fault on firmware memory fails the command") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    auto& buf = h.alloc(4096);
    fault_firmware_pages(h);
    check_fails(create_srq(h, buf, {.pd = pd}), cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    // Nothing was created and the PD is not held.
    check_fails(query_srq(h, 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    auto ok = create_srq(h, buf, {.pd = pd});
    REQUIRE(ok.status == cmd_status::OK);
    fault_firmware_pages(h);
    check_fails(query_srq(h, srqn_of(ok)), cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    CHECK(query_srq(h, srqn_of(ok)).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, srqn_of(ok)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd) == cmd_status::OK);
}

TEST_CASE("DESTROY_SRQ and QUERY_SRQ: unknown and foreign SRQs") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h, 3);
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.pd = pd, .uid = 3});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    check_fails(destroy_srq(h, srqn + 1, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_fails(destroy_srq(h, srqn, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_fails(query_srq(h, srqn + 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    REQUIRE(destroy_srq(h, srqn, 3).status == cmd_status::OK);
    check_fails(destroy_srq(h, srqn, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_fails(query_srq(h, srqn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(dealloc_pd(h, pd, 3) == cmd_status::OK);
}

TEST_CASE("ARM_RQ arms an SRQ's limit below its size; RQ and XRQ objects are refused") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.log_size = 4, .pd = pd});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    auto lwm = [&] {
        auto q = query_srq(h, srqn);
        REQUIRE(q.status == cmd_status::OK);
        return ifc::get<ifc::srqc::lwm>(ifc::at<ifc::query_srq_out::srq_context_entry>(q.out.data()));
    };
    check_fails(arm_rq(h, 0, srqn, 4), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_fails(arm_rq(h, 2, srqn, 4), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_fails(arm_rq(h, 1, srqn + 1, 4), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_fails(arm_rq(h, 1, srqn, 4, 9), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_fails(arm_rq(h, 1, srqn, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    CHECK(lwm() == 0);
    REQUIRE(arm_rq(h, 1, srqn, 15).status == cmd_status::OK);
    CHECK(lwm() == 15);
    REQUIRE(arm_rq(h, 1, srqn, 4).status == cmd_status::OK);
    CHECK(lwm() == 4);
    REQUIRE(arm_rq(h, 1, srqn, 0).status == cmd_status::OK);  // disarm
    CHECK(lwm() == 0);
}

TEST_CASE("an SRQ holds the CQ it names; a QP receiving from it holds the SRQ") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h);
    const auto cqn = create_cq(h);
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.pd = pd, .cqn = cqn});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    // A CQ of another user cannot be named.
    const auto user_pd = alloc_pd(h, 4);
    check_fails(create_srq(h, buf, {.pd = user_pd, .cqn = cqn, .uid = 4}), cmd_status::BAD_RESOURCE,
                cmd_syndrome::FOREIGN_RESOURCE);
    check_fails(destroy_cq(h, cqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);

    const auto qpn = create_srq_qp(h, pd, cqn, srqn);
    check_fails(destroy_srq(h, srqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    auto dq = H::input<ifc::destroy_qp_in>(cmd_opcode::DESTROY_QP);
    ifc::set<ifc::destroy_qp_in::qpn>(dq.data(), qpn);
    REQUIRE(h.exec(dq, 16).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, srqn).status == cmd_status::OK);
    CHECK(destroy_cq(h, cqn).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd) == cmd_status::OK);
    CHECK(dealloc_pd(h, user_pd, 4) == cmd_status::OK);
}
