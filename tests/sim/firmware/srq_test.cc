// Shared receive queues: CREATE_SRQ checks, srqn allocation, QUERY_SRQ from firmware
// memory, DESTROY_SRQ, ARM_RQ.
#include <set>

#include <doctest/doctest.h>

#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

test::cmd_result arm_rq(H& h, std::uint16_t op_mod, std::uint32_t srqn, std::uint32_t lwm,
                        std::uint16_t uid = 0) {
    auto in = H::input<ifc::arm_rq_in>(cmd_opcode::ARM_RQ, op_mod);
    ifc::set<ifc::arm_rq_in::srq_number>(in.data(), srqn);
    ifc::set<ifc::arm_rq_in::lwm>(in.data(), lwm);
    ifc::set<ifc::arm_rq_in::uid>(in.data(), uid);
    return h.exec(in, 16);
}

// Every firmware page given so far lies between the command queue and the next IOVA the
// harness hands out: a fault injected there hits firmware memory (ICM) only.
void fault_firmware_pages(H& h) {
    const std::uint64_t first = 0x110000;  // just after the command queue page
    h.dev().mmu().inject_fault(first, h.next_iova(0) - first);
}

}  // namespace

TEST_CASE_FIXTURE(booted, "CREATE_SRQ: unique non-zero srqns; QUERY_SRQ reads the context back") {
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
    CHECK(dealloc_pd(h, pd).status == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_srq(h, srqn_of(a)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd).status == cmd_status::RESOURCE_BUSY);
    REQUIRE(destroy_srq(h, srqn_of(b)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(booted, "CREATE_SRQ: a page offset and larger pages change how many pages are needed") {
    auto& buf = h.alloc(4 * 8192);
    // 64 WQEs of 64 bytes fill a 4 KiB page exactly; 64-byte offset units spill into a
    // second page.
    check_status(create_srq(h, buf, {.log_size = 6, .page_offset = 1, .pd = pd, .npas = 1}), cmd_status::BAD_INPUT_LEN,
                 cmd_syndrome::PAS_TOO_SHORT);
    CHECK(create_srq(h, buf, {.log_size = 6, .page_offset = 1, .pd = pd, .npas = 2}).status ==
          cmd_status::OK);
    // 8 KiB pages: one holds the same SRQ, but page addresses must be 8 KiB aligned.
    auto& big = h.alloc(4 * 8192);
    const std::uint64_t skew = big.iova() % 8192 ? 8192 - big.iova() % 8192 : 0;
    CHECK(create_srq(h, big, {.log_size = 6, .log_page = 1, .pd = pd, .npas = 1, .pas_delta = skew}).status ==
          cmd_status::OK);
    check_status(create_srq(h, big, {.log_size = 6, .log_page = 1, .pd = pd, .npas = 1, .pas_delta = skew + 4096}),
                 cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
}

TEST_CASE_FIXTURE(booted, "CREATE_SRQ refuses bad sizes, PDs, CQs, XRC, doorbell records and page lists") {
    const auto user_pd = alloc_pd(h, 7);
    auto& buf = h.alloc(4 * 4096);
    // (log_srq_size is 4 bits wide and log_max_srq_sz is 15: no size is too big.)
    // 1 KiB WQEs exceed max_wqe_sz_rq (512).
    check_status(create_srq(h, buf, {.log_stride = 6, .pd = pd}), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    CHECK(create_srq(h, buf, {.log_stride = 5, .pd = pd}).status == cmd_status::OK);
    check_status(create_srq(h, buf, {.pd = 0xabcd}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PD);
    // A PD of another user, and a PD of uid 0 for a user's SRQ.
    check_status(create_srq(h, buf, {.pd = user_pd}), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(create_srq(h, buf, {.pd = pd, .uid = 7}), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(create_srq(h, buf, {.pd = user_pd, .uid = 7}).status == cmd_status::OK);
    check_status(create_srq(h, buf, {.pd = pd, .cqn = 0x55}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    check_status(create_srq(h, buf, {.pd = pd, .xrcd = 1}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);  // no such domain
    check_status(create_srq(h, buf, {.pd = pd, .cont = true}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // A limit must be below the SRQ's 16 WQEs.
    check_status(create_srq(h, buf, {.pd = pd, .lwm = 16}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(create_srq(h, buf, {.log_page = 52, .pd = pd, .npas = 1}), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(create_srq(h, buf, {.pd = pd, .dbr = buf.iova() + 4}), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_ALIGNMENT);
    check_status(create_srq(h, buf, {.pd = pd, .pas_delta = 0x800}), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_ALIGNMENT);
    // 256 WQEs of 64 bytes need 4 pages.
    check_status(create_srq(h, buf, {.log_size = 8, .pd = pd, .npas = 3}), cmd_status::BAD_INPUT_LEN,
                 cmd_syndrome::PAS_TOO_SHORT);
    CHECK(create_srq(h, buf, {.log_size = 8, .pd = pd, .npas = 4}).status == cmd_status::OK);

    // The refused commands took no reference: only the three SRQs created hold PDs.
    for (std::uint32_t srqn : {1u, 3u}) REQUIRE(destroy_srq(h, srqn).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, 2, 7).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd).status == cmd_status::OK);
    CHECK(dealloc_pd(h, user_pd, 7).status == cmd_status::OK);
}

namespace {

// Creates SRQs in slot 0 until one does not complete: the firmware's memory ran out and
// it holds the command (no EQ here answers its page requests). The srqns made go in `seen`.
void create_until_held(H& h, const dma_buffer& buf, std::uint32_t pd, std::set<std::uint32_t>& seen) {
    for (int i = 0; i < 100000; ++i) {
        const auto r = create_srq(h, buf, {.pd = pd});
        if (!r.completed) return;
        REQUIRE(r.status == cmd_status::OK);
        CHECK(seen.insert(srqn_of(r)).second);
    }
    FAIL("firmware memory never ran out");
}

// The answer to the firmware's page request: `n` pages, or ALLOCATION_FAIL when n is 0.
test::cmd_result answer_page_request(H& h, std::uint32_t n) { return h.manage_pages(n ? 1 : 0, n); }

}  // namespace

TEST_CASE_FIXTURE(booted, "CREATE_SRQ: when firmware memory runs out the command waits for pages, then completes") {
    auto& buf = h.alloc(4096);
    std::set<std::uint32_t> seen;
    create_until_held(h, buf, pd, seen);
    REQUIRE(seen.size() > 100);
    // Held: the slot stays the device's while no pages come (a card's firmware waits for
    // the answer to its PAGE_REQUEST; Linux's mlx5 keeps a command slot for MANAGE_PAGES).
    CHECK_FALSE(h.wait_slot(0, std::chrono::milliseconds(300)));
    // The driver answers on another slot: the held command is executed again and succeeds.
    REQUIRE(answer_page_request(h, 4).status == cmd_status::OK);
    REQUIRE(h.wait_slot(0, std::chrono::seconds(2)));
    const auto done = h.collect(0, 16);
    REQUIRE(done.status == cmd_status::OK);
    CHECK(srqn_of(done) != 0);
    CHECK(seen.insert(srqn_of(done)).second);
    // The four pages hold more: the next create completes at once.
    const auto next = create_srq(h, buf, {.pd = pd});
    REQUIRE(next.completed);
    CHECK(next.status == cmd_status::OK);
    CHECK(seen.insert(srqn_of(next)).second);
}

TEST_CASE_FIXTURE(booted, "CREATE_SRQ: a held command fails with NO_RESOURCES when the driver cannot give pages") {
    auto& buf = h.alloc(4096);
    std::set<std::uint32_t> seen;
    create_until_held(h, buf, pd, seen);
    REQUIRE(answer_page_request(h, 0).status == cmd_status::OK);  // ALLOCATION_FAIL
    REQUIRE(h.wait_slot(0, std::chrono::seconds(2)));
    const auto r = h.collect(0, 16);
    check_status(r, cmd_status::NO_RESOURCES, cmd_syndrome::NO_RESOURCES);
    // Freeing firmware memory makes room again, with no pages given.
    REQUIRE(destroy_srq(h, *seen.begin()).status == cmd_status::OK);
    const auto again = create_srq(h, buf, {.pd = pd});
    REQUIRE(again.completed);
    REQUIRE(again.status == cmd_status::OK);
    CHECK(srqn_of(again) != 0);
}

TEST_CASE_FIXTURE(booted, "CREATE_SRQ: a held command fails once TEARDOWN_HCA has run, with no pages given") {
    auto& buf = h.alloc(4096);
    std::set<std::uint32_t> seen;
    create_until_held(h, buf, pd, seen);
    auto td = H::input<ifc::teardown_hca_in>(cmd_opcode::TEARDOWN_HCA);
    REQUIRE(h.exec(td, 16, H::post_options{.slot = 1}).status == cmd_status::OK);
    // No page request goes out for an HCA torn down: the command runs again and fails as
    // an object create fails on a torn-down HCA, instead of waiting for ever.
    REQUIRE(h.wait_slot(0, std::chrono::seconds(2)));
    const auto r = h.collect(0, 16);
    CHECK(r.status == cmd_status::BAD_SYS_STATE);
}

TEST_CASE_FIXTURE(booted, "CREATE_SRQ and QUERY_SRQ: an IOMMU fault on firmware memory fails the command") {
    auto& buf = h.alloc(4096);
    fault_firmware_pages(h);
    check_status(create_srq(h, buf, {.pd = pd}), cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    // Nothing was created and the PD is not held.
    check_status(query_srq(h, 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    auto ok = create_srq(h, buf, {.pd = pd});
    REQUIRE(ok.status == cmd_status::OK);
    fault_firmware_pages(h);
    check_status(query_srq(h, srqn_of(ok)), cmd_status::INTERNAL_ERR, cmd_syndrome::IOMMU_FAULT);
    CHECK(query_srq(h, srqn_of(ok)).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, srqn_of(ok)).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd).status == cmd_status::OK);
}

TEST_CASE("DESTROY_SRQ and QUERY_SRQ: unknown and foreign SRQs") {
    H h;
    REQUIRE(h.bring_up());
    const auto pd = alloc_pd(h, 3);
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.pd = pd, .uid = 3});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    check_status(destroy_srq(h, srqn + 1, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(destroy_srq(h, srqn, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(query_srq(h, srqn + 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    REQUIRE(destroy_srq(h, srqn, 3).status == cmd_status::OK);
    check_status(destroy_srq(h, srqn, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_srq(h, srqn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(dealloc_pd(h, pd, 3).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(booted, "ARM_RQ arms an SRQ's limit below its size; RQ and XRQ objects are refused") {
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.log_size = 4, .pd = pd});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    auto lwm = [&] {
        auto q = query_srq(h, srqn);
        REQUIRE(q.status == cmd_status::OK);
        return ifc::get<ifc::srqc::lwm>(ifc::at<ifc::query_srq_out::srq_context_entry>(q.out.data()));
    };
    check_status(arm_rq(h, 0, srqn, 4), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_status(arm_rq(h, 2, srqn, 4), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    check_status(arm_rq(h, 1, srqn + 1, 4), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(arm_rq(h, 1, srqn, 4, 9), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(arm_rq(h, 1, srqn, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    CHECK(lwm() == 0);
    REQUIRE(arm_rq(h, 1, srqn, 15).status == cmd_status::OK);
    CHECK(lwm() == 15);
    REQUIRE(arm_rq(h, 1, srqn, 4).status == cmd_status::OK);
    CHECK(lwm() == 4);
    REQUIRE(arm_rq(h, 1, srqn, 0).status == cmd_status::OK);  // disarm
    CHECK(lwm() == 0);
}

TEST_CASE_FIXTURE(booted, "an SRQ holds the CQ it names; a QP receiving from it holds the SRQ") {
    const auto cqn = create_small_cq(h);
    auto& buf = h.alloc(4096);
    auto r = create_srq(h, buf, {.pd = pd, .cqn = cqn});
    REQUIRE(r.status == cmd_status::OK);
    const auto srqn = srqn_of(r);
    // A CQ of another user cannot be named.
    const auto user_pd = alloc_pd(h, 4);
    check_status(create_srq(h, buf, {.pd = user_pd, .cqn = cqn, .uid = 4}), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::FOREIGN_RESOURCE);
    check_status(destroy_cq(h, cqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);

    const auto qpn = create_srq_qp(h, pd, cqn, srqn);
    check_status(destroy_srq(h, srqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_qp(h, qpn).status == cmd_status::OK);
    REQUIRE(destroy_srq(h, srqn).status == cmd_status::OK);
    CHECK(destroy_cq(h, cqn).status == cmd_status::OK);
    CHECK(dealloc_pd(h, pd).status == cmd_status::OK);
    CHECK(dealloc_pd(h, user_pd, 4).status == cmd_status::OK);
}
