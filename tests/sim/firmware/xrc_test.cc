// XRC domains, XRC SRQs and RMPs (sim/firmware/fw_xrc.cc): what Linux 6.1's mlx5_ib makes
// at probe. Inputs are written at the offsets of Linux's mlx5_ifc.h, not through hw/'s
// layouts, so a layout mistake the model shares with hw/ would show.
#include <doctest/doctest.h>

#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;

namespace {

test::cmd_result alloc_xrcd(H& h, std::uint16_t uid = 0) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(alloc_xrcd_in));
    CXV_LINUX_SET(alloc_xrcd_in, in, opcode, 0x80e);
    CXV_LINUX_SET(alloc_xrcd_in, in, uid, uid);
    return h.exec(in, CXV_LINUX_BYTES(alloc_xrcd_out));
}
std::uint32_t xrcd_of(const test::cmd_result& r) {
    return static_cast<std::uint32_t>(CXV_LINUX_GET(alloc_xrcd_out, r.out, xrcd));
}

test::cmd_result dealloc_xrcd(H& h, std::uint32_t xrcd, std::uint16_t uid = 0) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(dealloc_xrcd_in));
    CXV_LINUX_SET(dealloc_xrcd_in, in, opcode, 0x80f);
    CXV_LINUX_SET(dealloc_xrcd_in, in, uid, uid);
    CXV_LINUX_SET(dealloc_xrcd_in, in, xrcd, xrcd);
    return h.exec(in, 16);
}

// By number: DESTROY_XRC_SRQ (0x706), DESTROY_RMP (0x90e) or DESTROY_SRQ (0x701).
test::cmd_result destroy(H& h, std::uint16_t opcode, std::uint32_t n) {
    std::vector<std::byte> in(16);
    CXV_LINUX_SET(destroy_rmp_in, in, opcode, opcode);
    CXV_LINUX_SET(destroy_rmp_in, in, rmpn, n);  // xrc_srqn, srqn: the same bits
    return h.exec(in, 16);
}

// CREATE_XRC_SRQ as Linux's create_xrc_srq_cmd writes it: 16 WQEs of 64 bytes in `buf`.
test::cmd_result create_xrc_srq(H& h, const dma_buffer& buf, std::uint32_t pd, std::uint32_t xrcd, std::uint32_t cqn) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(create_xrc_srq_in) + 8);
    CXV_LINUX_SET(create_xrc_srq_in, in, opcode, 0x705);
    const std::size_t ctx = CXV_LINUX_OFF(create_xrc_srq_in, xrc_srq_context_entry);
    auto put = [&](std::size_t off, std::size_t width, std::uint64_t v) { linux_put(in, ctx + off, width, v); };
    put(CXV_LINUX_OFF(xrc_srqc, log_xrc_srq_size), CXV_LINUX_WIDTH(xrc_srqc, log_xrc_srq_size), 4);
    put(CXV_LINUX_OFF(xrc_srqc, log_rq_stride), CXV_LINUX_WIDTH(xrc_srqc, log_rq_stride), 2);
    put(CXV_LINUX_OFF(xrc_srqc, xrcd), CXV_LINUX_WIDTH(xrc_srqc, xrcd), xrcd);
    put(CXV_LINUX_OFF(xrc_srqc, cqn), CXV_LINUX_WIDTH(xrc_srqc, cqn), cqn);
    put(CXV_LINUX_OFF(xrc_srqc, user_index), CXV_LINUX_WIDTH(xrc_srqc, user_index), 0x123);
    put(CXV_LINUX_OFF(xrc_srqc, pd), CXV_LINUX_WIDTH(xrc_srqc, pd), pd);
    const std::uint64_t dbr = buf.iova() + buf.size() - 64;
    put(CXV_LINUX_OFF(xrc_srqc, db_record_addr_h), 32, dbr >> 32);
    put(CXV_LINUX_OFF(xrc_srqc, db_record_addr_l), 30, (dbr & 0xffffffff) >> 2);
    linux_put(in, CXV_LINUX_BYTES(create_xrc_srq_in) * 8, 64, buf.iova());
    return h.exec(in, CXV_LINUX_BYTES(create_xrc_srq_out));
}

// CREATE_RMP as Linux's create_rmp_cmd writes it (state RDY, the wq, the page list after
// it): 16 WQEs of 64 bytes in `buf`.
test::cmd_result create_rmp(H& h, const dma_buffer& buf, std::uint32_t pd, unsigned wq_type = 0,
                            unsigned log_wq_stride = 6, unsigned state = 1) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(create_rmp_in) + 8);
    CXV_LINUX_SET(create_rmp_in, in, opcode, 0x90c);
    const std::size_t rmpc = CXV_LINUX_OFF(create_rmp_in, ctx);
    const std::size_t wq = rmpc + CXV_LINUX_OFF(rmpc, wq);
    linux_put(in, rmpc + CXV_LINUX_OFF(rmpc, state), CXV_LINUX_WIDTH(rmpc, state), state);
    auto put = [&](std::size_t off, std::size_t width, std::uint64_t v) { linux_put(in, wq + off, width, v); };
    put(CXV_LINUX_OFF(wq, wq_type), CXV_LINUX_WIDTH(wq, wq_type), wq_type);
    put(CXV_LINUX_OFF(wq, log_wq_stride), CXV_LINUX_WIDTH(wq, log_wq_stride), log_wq_stride);
    put(CXV_LINUX_OFF(wq, log_wq_sz), CXV_LINUX_WIDTH(wq, log_wq_sz), 4);
    put(CXV_LINUX_OFF(wq, pd), CXV_LINUX_WIDTH(wq, pd), pd);
    put(CXV_LINUX_OFF(wq, dbr_addr), CXV_LINUX_WIDTH(wq, dbr_addr), buf.iova() + buf.size() - 64);
    linux_put(in, CXV_LINUX_BYTES(create_rmp_in) * 8, 64, buf.iova());
    return h.exec(in, CXV_LINUX_BYTES(create_rmp_out));
}

// MODIFY_RMP as Linux's arm_rmp_cmd writes it: the state now (`now`), the next one in the
// context, and with the bitmask's lwm the limit in the context's wq.
test::cmd_result modify_rmp(H& h, std::uint32_t rmpn, unsigned lwm, unsigned now = 1, unsigned next = 1,
                            bool mask_lwm = true, std::uint16_t uid = 0) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(modify_rmp_in));
    CXV_LINUX_SET(modify_rmp_in, in, opcode, 0x90d);
    CXV_LINUX_SET(modify_rmp_in, in, uid, uid);
    CXV_LINUX_SET(modify_rmp_in, in, rmp_state, now);
    CXV_LINUX_SET(modify_rmp_in, in, rmpn, rmpn);
    linux_put(in, CXV_LINUX_OFF(modify_rmp_in, bitmask) + CXV_LINUX_OFF(rmp_bitmask, lwm), 1, mask_lwm);
    const std::size_t rmpc = CXV_LINUX_OFF(modify_rmp_in, ctx);
    linux_put(in, rmpc + CXV_LINUX_OFF(rmpc, state), CXV_LINUX_WIDTH(rmpc, state), next);
    linux_put(in, rmpc + CXV_LINUX_OFF(rmpc, wq) + CXV_LINUX_OFF(wq, lwm), CXV_LINUX_WIDTH(wq, lwm), lwm);
    return h.exec(in, CXV_LINUX_BYTES(modify_rmp_out));
}

// QUERY_RMP with room for one page-list entry; a field of the reply's wq by Linux's offsets.
test::cmd_result query_rmp(H& h, std::uint32_t rmpn) {
    std::vector<std::byte> in(CXV_LINUX_BYTES(query_rmp_in));
    CXV_LINUX_SET(query_rmp_in, in, opcode, 0x90f);
    CXV_LINUX_SET(query_rmp_in, in, rmpn, rmpn);
    return h.exec(in, CXV_LINUX_BYTES(query_rmp_out) + 8);
}
std::uint64_t wq_field(const test::cmd_result& r, std::size_t off, std::size_t width) {
    return linux_bits(r.out, CXV_LINUX_OFF(query_rmp_out, rmp_context) + CXV_LINUX_OFF(rmpc, wq) + off, width);
}
#define CXV_RMP_WQ(r, fld) wq_field(r, CXV_LINUX_OFF(wq, fld), CXV_LINUX_WIDTH(wq, fld))

}  // namespace

TEST_CASE_FIXTURE(booted, "ALLOC_XRCD: non-zero domains; DEALLOC_XRCD of an unknown, foreign or busy one is refused") {
    const auto a = alloc_xrcd(h);
    const auto b = alloc_xrcd(h);
    REQUIRE(a.status == cmd_status::OK);
    REQUIRE(b.status == cmd_status::OK);
    CHECK(xrcd_of(a) != 0);
    CHECK(xrcd_of(a) != xrcd_of(b));
    check_status(dealloc_xrcd(h, 0x4321), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(dealloc_xrcd(h, xrcd_of(a), 7), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    // Held by its XRC SRQ.
    auto& buf = h.alloc(2 * 4096);
    const auto srq = create_xrc_srq(h, buf, pd, xrcd_of(a), create_small_cq(h));
    REQUIRE_MESSAGE(srq.status == cmd_status::OK, sim::name(srq.synd()));
    check_status(dealloc_xrcd(h, xrcd_of(a)), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    CHECK(destroy(h, 0x706, CXV_LINUX_GET(create_xrc_srq_out, srq.out, xrc_srqn)).status == cmd_status::OK);
    CHECK(dealloc_xrcd(h, xrcd_of(a)).status == cmd_status::OK);
    CHECK(dealloc_xrcd(h, xrcd_of(b)).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(booted, "CREATE_XRC_SRQ needs a live domain and a CQ; only DESTROY_XRC_SRQ destroys it") {
    auto& buf = h.alloc(2 * 4096);
    const auto cqn = create_small_cq(h);
    check_status(create_xrc_srq(h, buf, pd, 0x777, cqn), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    const auto xrcd = xrcd_of(alloc_xrcd(h));
    check_status(create_xrc_srq(h, buf, pd, xrcd, 0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    const auto r = create_xrc_srq(h, buf, pd, xrcd, cqn);
    REQUIRE(r.status == cmd_status::OK);
    const auto n = static_cast<std::uint32_t>(CXV_LINUX_GET(create_xrc_srq_out, r.out, xrc_srqn));
    CHECK(n != 0);
    // Its number is in the SRQ number space, but it is no basic SRQ, nor an RMP.
    check_status(destroy(h, 0x701, n), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(destroy(h, 0x90e, n), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(destroy(h, 0x706, n).status == cmd_status::OK);
    // A basic SRQ may name a live domain (Linux names its default one), which it then
    // holds; an unknown one is refused.
    check_status(create_srq(h, buf, {.pd = pd, .xrcd = 0x777}), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    const auto basic = create_srq(h, buf, {.pd = pd, .xrcd = xrcd});
    REQUIRE(basic.status == cmd_status::OK);
    check_status(dealloc_xrcd(h, xrcd), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    CHECK(destroy(h, 0x701, srqn_of(basic)).status == cmd_status::OK);
    CHECK(dealloc_xrcd(h, xrcd).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(booted, "CREATE_RMP: a ready linked-list wq becomes a receive queue a QP can share") {
    auto& buf = h.alloc(2 * 4096);
    check_status(create_rmp(h, buf, pd, 1), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);      // cyclic
    check_status(create_rmp(h, buf, pd, 0, 3), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);   // 8-byte WQEs
    check_status(create_rmp(h, buf, pd, 0, 6, 0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);  // not RDY
    check_status(create_rmp(h, buf, 0xabcd), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PD);
    const auto r = create_rmp(h, buf, pd);
    REQUIRE_MESSAGE(r.status == cmd_status::OK, sim::name(r.synd()));
    const auto rmpn = static_cast<std::uint32_t>(CXV_LINUX_GET(create_rmp_out, r.out, rmpn));
    CHECK(rmpn != 0);
    // A UD QP receiving from it (rq_type SRQ, srqn_rmpn_xrqn = rmpn) holds it.
    const auto cqn = create_small_cq(h);
    const auto qpn = create_srq_qp(h, pd, cqn, rmpn);
    check_status(destroy(h, 0x90e, rmpn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    CHECK(destroy_qp(h, qpn).status == cmd_status::OK);
    check_status(destroy(h, 0x701, rmpn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(destroy(h, 0x90e, rmpn).status == cmd_status::OK);
}

TEST_CASE_FIXTURE(booted, "MODIFY_RMP arms an RMP's limit below its size; QUERY_RMP reads the RMP back") {
    auto& buf = h.alloc(2 * 4096);
    const auto r = create_rmp(h, buf, pd);
    REQUIRE_MESSAGE(r.status == cmd_status::OK, sim::name(r.synd()));
    const auto rmpn = static_cast<std::uint32_t>(CXV_LINUX_GET(create_rmp_out, r.out, rmpn));
    auto q = query_rmp(h, rmpn);
    REQUIRE(q.status == cmd_status::OK);
    const std::size_t rmpc = CXV_LINUX_OFF(query_rmp_out, rmp_context);
    CHECK(linux_bits(q.out, rmpc + CXV_LINUX_OFF(rmpc, state), CXV_LINUX_WIDTH(rmpc, state)) == 1);  // RDY
    CHECK(CXV_RMP_WQ(q, wq_type) == 0);  // linked list
    CHECK(CXV_RMP_WQ(q, log_wq_stride) == 6);
    CHECK(CXV_RMP_WQ(q, log_wq_sz) == 4);
    CHECK(CXV_RMP_WQ(q, pd) == pd);
    CHECK(CXV_RMP_WQ(q, dbr_addr) == buf.iova() + buf.size() - 64);
    CHECK(CXV_RMP_WQ(q, lwm) == 0);
    CHECK(CXV_RMP_WQ(q, hw_counter) == 0);
    CHECK(linux_bits(q.out, CXV_LINUX_BYTES(query_rmp_out) * 8, 64) == buf.iova());  // wq.pas[0]
    // Armed below its 16 WQEs; the limit reads back.
    CHECK(modify_rmp(h, rmpn, 5).status == cmd_status::OK);
    CHECK(CXV_RMP_WQ(query_rmp(h, rmpn), lwm) == 5);
    // Without the bitmask's lwm the context's limit is not taken.
    CHECK(modify_rmp(h, rmpn, 9, 1, 1, false).status == cmd_status::OK);
    CHECK(CXV_RMP_WQ(query_rmp(h, rmpn), lwm) == 5);
    CHECK(modify_rmp(h, rmpn, 0).status == cmd_status::OK);  // disarmed
    CHECK(CXV_RMP_WQ(query_rmp(h, rmpn), lwm) == 0);
    // Refused, and nothing changed: a limit not below the size, a wrong present state,
    // another user's RMP, a basic SRQ's or an unknown number.
    check_status(modify_rmp(h, rmpn, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(modify_rmp(h, rmpn, 3, 3), cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    check_status(modify_rmp(h, rmpn, 3, 1, 0), cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    check_status(modify_rmp(h, rmpn, 3, 1, 1, true, 7), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(CXV_RMP_WQ(query_rmp(h, rmpn), lwm) == 0);
    const auto basic = create_srq(h, buf, {.pd = pd});
    REQUIRE(basic.status == cmd_status::OK);
    check_status(modify_rmp(h, srqn_of(basic), 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_rmp(h, srqn_of(basic)), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_rmp(h, 0x4321), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    // To error, where it stays: QUERY_RMP says so, and no further MODIFY_RMP is taken.
    CHECK(modify_rmp(h, rmpn, 0, 1, 3, false).status == cmd_status::OK);
    CHECK(linux_bits(query_rmp(h, rmpn).out, rmpc + CXV_LINUX_OFF(rmpc, state), CXV_LINUX_WIDTH(rmpc, state)) == 3);
    check_status(modify_rmp(h, rmpn, 0, 3, 1), cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    CHECK(destroy(h, 0x90e, rmpn).status == cmd_status::OK);
    CHECK(destroy(h, 0x701, srqn_of(basic)).status == cmd_status::OK);
}
