// Completion queues: CREATE_CQ checks, DESTROY_CQ and the references a CQ holds,
// QUERY_CQ with device state, MODIFY_CQ (moderation, EQ remap, resize with its RESIZE_CQ
// CQE), the arm doorbell and completion events, CQs and doorbell records in UMEMs.
#include <chrono>
#include <thread>

#include <doctest/doctest.h>

#include "hw/doorbell.h"
#include "hw/mmio.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kStIdle = 0x0, kStSolArmed = 0x6, kStArmed = 0x9, kStFired = 0xa;
constexpr std::uint8_t kResizeOpOwn = 0x50;  // opcode RESIZE_CQ (5) in bits 7:4

// A device brought up, a UAR and an EQ (no event subscribed).
using env = eq_env;

// A CQ with its own ring and doorbell record.
struct cq_handle {
    std::uint32_t cqn = 0;
    test::dma_buffer* ring = nullptr;
    test::dma_buffer* dbr = nullptr;
};

cq_spec spec_for(env& e, test::dma_buffer& ring, test::dma_buffer& dbr, unsigned log_size = 4) {
    cq_spec s;
    s.log_size = log_size;
    s.uar = e.uar;
    s.eqn = e.eq.eqn;
    s.buf = ring.iova();
    s.dbr = dbr.iova();
    return s;
}

cq_handle make_cq(env& e, unsigned log_size = 4, unsigned cqe_sz = 0) {
    cq_handle q;
    q.ring = &e.h.alloc((std::size_t{cqe_sz ? 128u : 64u} << log_size) + 4096);
    q.dbr = &e.h.alloc(4096);
    cq_spec s = spec_for(e, *q.ring, *q.dbr, log_size);
    s.cqe_sz = cqe_sz;
    const auto r = e.h.exec(create_cq_in(s), 16);
    REQUIRE(r.status == cmd_status::OK);
    q.cqn = cqn_of(r);
    return q;
}

const std::byte* ctx(const test::cmd_result& r) {
    return ifc::at<ifc::query_cq_out::cq_context>(r.out.data());
}

template <typename F>
std::uint32_t queried(H& h, std::uint32_t cqn) {
    const auto r = query_cq(h, cqn);
    REQUIRE(r.status == cmd_status::OK);
    return static_cast<std::uint32_t>(ifc::get<F>(ctx(r)));
}

// MODIFY_CQ with op_mod, field select and the context fields set by `fill`.
template <typename Fill>
test::cmd_result modify_cq(H& h, std::uint32_t cqn, std::uint16_t op_mod, std::uint32_t sel, Fill fill,
                           std::size_t npas = 0, std::uint32_t uid = 0) {
    auto in = H::input<ifc::modify_cq_in>(cmd_opcode::MODIFY_CQ, op_mod, npas * 8);
    ifc::set<ifc::modify_cq_in::cqn>(in.data(), cqn);
    ifc::set<ifc::modify_cq_in::uid>(in.data(), uid);
    ifc::set<ifc::modify_cq_in::modify_field_select_resize_field_select>(in.data(), sel);
    fill(in.data(), ifc::at<ifc::modify_cq_in::cq_context>(in.data()));
    return h.exec(in, 16);
}

// RESIZE to 2^log_size entries in the 4 KiB pages from `ring`.
test::cmd_result resize(H& h, std::uint32_t cqn, unsigned log_size, std::uint64_t ring,
                        std::size_t npas = 1) {
    return modify_cq(
        h, cqn, 1, 0x7,
        [&](std::byte* in, std::byte* c) {
            ifc::set<ifc::cqc::log_cq_size>(c, log_size);
            for (std::size_t i = 0; i < npas; ++i) {
                ifc::set<ifc::modify_cq_in::pas>(in, i, ring + i * 4096);
            }
        },
        npas);
}

// A RESIZE to 16 entries in a new page: the old ring gets a RESIZE_CQ CQE.
test::cmd_result resize_to_new_page(env& e, std::uint32_t cqn) { return resize(e.h, cqn, 4, e.h.alloc(4096).iova()); }

// The driver's consumer index in the doorbell record (update_ci), as a driver writes it.
void set_update_ci(const cq_handle& q, std::uint32_t ci) {
    auto* rec = reinterpret_cast<hw::cq_doorbell_record*>(q.dbr->data());
    rec->update_ci = hw::be32::from(ci & 0xffffff);
}

// The arm sequence: record first, then the 64-bit doorbell in the CQ's UAR page.
void arm(env& e, const cq_handle& q, std::uint32_t sn, std::uint32_t cmd, std::uint32_t ci) {
    const std::uint32_t word = hw::cq_arm_value(sn, cmd, ci);
    reinterpret_cast<hw::cq_doorbell_record*>(q.dbr->data())->arm_ci = hw::be32::from(word);
    hw::mmio_window bar(e.h.bar(), e.h.dev().config().bar0_size);
    bar.write64_be(e.uar * hw::uar_page_size + hw::uar_cq_doorbell, hw::cq_doorbell_value(word, q.cqn));
}

// Polls QUERY_CQ until st is `want` (the doorbell is seen by the device thread).
bool wait_st(H& h, std::uint32_t cqn, std::uint32_t want) {
    const auto end = std::chrono::steady_clock::now() + 1000ms;
    while (std::chrono::steady_clock::now() < end) {
        if (queried<ifc::cqc::st>(h, cqn) == want) return true;
        std::this_thread::sleep_for(1ms);
    }
    return false;
}

std::uint32_t eqe_cqn(const std::vector<std::byte>& eqe) {
    return ifc::get<ifc::comp_event::cq_number>(ifc::at<ifc::eqe::event_data>(eqe.data()));
}

std::uint8_t op_own(const test::dma_buffer& ring, std::size_t index, std::size_t cqe = 64) {
    return std::to_integer<std::uint8_t>(ring.data()[index * cqe + cqe - 1]);
}

}  // namespace

TEST_CASE("CREATE_CQ: a CQ that QUERY_CQ reads back, with fresh device state") {
    env e;
    auto& ring = e.h.alloc(4096);
    auto& dbr = e.h.alloc(4096);
    cq_spec s = spec_for(e, ring, dbr);
    s.dbr = dbr.iova() + 8;
    auto in = create_cq_in(s);
    ifc::set<ifc::cqc::oi>(cqc_of(in), 1);
    ifc::set<ifc::cqc::cq_period>(cqc_of(in), 0xfff);     // the fields' whole ranges
    ifc::set<ifc::cqc::cq_max_count>(cqc_of(in), 0xffff);
    ifc::set<ifc::cqc::st>(cqc_of(in), kStArmed);          // device state: not the driver's
    ifc::set<ifc::cqc::producer_counter>(cqc_of(in), 7);
    const auto r = e.h.exec(in, 16);
    REQUIRE(r.status == cmd_status::OK);
    const auto cqn = cqn_of(r);
    CHECK(cqn != 0);
    CHECK(cqn <= 0xffffff);
    const auto again = e.h.exec(create_cq_in(spec_for(e, e.h.alloc(4096), dbr)), 16);
    REQUIRE(again.status == cmd_status::OK);
    CHECK(cqn_of(again) != cqn);

    const auto q = query_cq(e.h, cqn);
    REQUIRE(q.status == cmd_status::OK);
    const std::byte* c = ctx(q);
    CHECK(ifc::get<ifc::cqc::log_cq_size>(c) == 4);
    CHECK(ifc::get<ifc::cqc::uar_page>(c) == e.uar);
    CHECK(ifc::get<ifc::cqc::c_eqn_or_apu_element>(c) == e.eq.eqn);
    CHECK(ifc::get<ifc::cqc::dbr_addr>(c) == dbr.iova() + 8);
    CHECK(ifc::get<ifc::cqc::oi>(c) == 1);
    CHECK(ifc::get<ifc::cqc::cq_period>(c) == 0xfff);
    CHECK(ifc::get<ifc::cqc::cq_max_count>(c) == 0xffff);
    CHECK(ifc::get<ifc::cqc::status>(c) == 0);
    CHECK(ifc::get<ifc::cqc::st>(c) == kStIdle);
    CHECK(ifc::get<ifc::cqc::producer_counter>(c) == 0);
    CHECK(ifc::get<ifc::cqc::consumer_counter>(c) == 0);
    CHECK(ifc::get<ifc::query_cq_out::pas>(q.out.data(), 0) == ring.iova());
}

TEST_CASE("CREATE_CQ refuses bad sizes, features, UARs, EQs, page lists and doorbell records") {
    env e;
    // A UAR of its own: only a successful CQ may take a reference on it.
    const auto uar = e.h.alloc_uar();
    auto& ring = e.h.alloc(4 * 4096);
    auto& dbr = e.h.alloc(4096);
    cq_spec good = spec_for(e, ring, dbr);
    good.uar = uar;
    auto expect = [&](const cq_spec& s, auto&& tweak, cmd_status st, cmd_syndrome syn) {
        auto in = create_cq_in(s);
        tweak(cqc_of(in));
        const auto r = e.h.exec(in, 16);
        CHECK_MESSAGE(r.status == st, sim::name(syn));
        CHECK_MESSAGE(r.synd() == syn, sim::name(syn));
    };
    const auto none = [](std::byte*) {};
    const auto bad = [&](auto&& tweak) {
        expect(good, tweak, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    };

    cq_spec s = good;
    s.log_size = 23;  // log_max_cq_sz is 22
    s.npas = 1;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::LOG_SIZE_TOO_BIG);
    // CQE sizes: 2 (padded 128) needs cqe_128_always; 3 and up are reserved.
    bad([](std::byte* c) { ifc::set<ifc::cqc::cqe_sz>(c, 2); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::cqe_sz>(c, 3); });
    // Features whose capability is 0, and ones the model does not implement.
    bad([](std::byte* c) { ifc::set<ifc::cqc::cqe_comp_en>(c, 1); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::cq_period_mode>(c, 1); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::cq_period_mode>(c, 2); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::scqe_break_moderation_en>(c, 1); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::cc>(c, 1); });
    bad([](std::byte* c) { ifc::set<ifc::cqc::apu_cq>(c, 1); });

    s = good;
    s.uar = uar + 50;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::BAD_UAR);
    s = good;
    s.eqn = e.eq.eqn + 1;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::BAD_EQ);

    // Page lists: 64 entries of 128 bytes need two 4 KiB pages.
    s = good;
    s.log_size = 6;
    s.cqe_sz = 1;
    s.npas = 1;
    expect(s, none, cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    // 64 entries of 64 bytes fill one page; a page_offset of 1/64 page spills into a second.
    s = good;
    s.log_size = 6;
    s.page_offset = 1;
    s.npas = 1;
    expect(s, none, cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    s = good;
    s.buf = ring.iova() + 64;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    s = good;
    s.log_page_size = 1;  // 8 KiB pages: a 4 KiB-aligned address is not enough
    s.buf = ring.iova() + 4096;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    // The doorbell record is 8-byte aligned.
    s = good;
    s.dbr = dbr.iova() + 4;
    expect(s, none, cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    // UMEMs that do not exist.
    expect(good, [](std::byte* c) {
        ifc::set<ifc::cqc::dbr_umem_valid>(c, 1);
        ifc::set<ifc::cqc::dbr_umem_id>(c, 999);
    }, cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    auto in = create_cq_in(good);
    ifc::set<ifc::create_cq_in::cq_umem_valid>(in.data(), 1);
    ifc::set<ifc::create_cq_in::cq_umem_id>(in.data(), 999);
    check_status(e.h.exec(in, 16), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);

    // None of the refused commands kept a reference on the UAR.
    check_status(dealloc_uar(e.h, uar), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("CREATE_CQ: 128-byte CQEs, larger pages and a quantized page_offset") {
    env e;
    auto& ring = e.h.alloc(3 * 8192);
    auto& dbr = e.h.alloc(4096);
    cq_spec s = spec_for(e, ring, dbr, 6);
    s.cqe_sz = 1;              // 8 KiB of CQEs
    s.log_page_size = 1;       // in 8 KiB pages,
    s.page_offset = 2;         // starting 256 bytes into the first: two pages
    s.buf = (ring.iova() + 8191) & ~std::uint64_t{8191};
    const auto r = e.h.exec(create_cq_in(s), 16);
    REQUIRE(r.status == cmd_status::OK);
    const auto q = query_cq(e.h, cqn_of(r), 2);
    REQUIRE(q.status == cmd_status::OK);
    CHECK(ifc::get<ifc::cqc::cqe_sz>(ctx(q)) == 1);
    CHECK(ifc::get<ifc::cqc::page_offset>(ctx(q)) == 2);
    CHECK(ifc::get<ifc::query_cq_out::pas>(q.out.data(), 1) == s.buf + 8192);
}

TEST_CASE("DESTROY_CQ: unknown and foreign CQs; the UAR is released") {
    env e;
    const auto uar = e.h.alloc_uar();
    auto& ring = e.h.alloc(4096);
    auto& dbr = e.h.alloc(4096);
    cq_spec s = spec_for(e, ring, dbr);
    s.uar = uar;
    s.uid = 3;
    const auto r = e.h.exec(create_cq_in(s), 16);
    REQUIRE(r.status == cmd_status::OK);
    const auto cqn = cqn_of(r);
    check_status(dealloc_uar(e.h, uar), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    check_status(destroy_cq(e.h, cqn + 1, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(destroy_cq(e.h, cqn, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(destroy_cq(e.h, cqn, 3), cmd_status::OK, cmd_syndrome::OK);
    check_status(destroy_cq(e.h, cqn, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_cq(e.h, cqn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(dealloc_uar(e.h, uar), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("DESTROY_EQ is refused while a CQ reports to the EQ") {
    env e;
    const auto q = make_cq(e);
    check_status(destroy_eq(e.h, e.eq.eqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_cq(e.h, q.cqn).status == cmd_status::OK);
    check_status(destroy_eq(e.h, e.eq.eqn), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("QUERY_CQ reads the consumer index from the doorbell record") {
    env e;
    const auto q = make_cq(e);
    set_update_ci(q, 5);
    CHECK(queried<ifc::cqc::consumer_counter>(e.h, q.cqn) == 5);
    set_update_ci(q, 0x1000007);  // 24 bits
    CHECK(queried<ifc::cqc::consumer_counter>(e.h, q.cqn) == 7);
}

TEST_CASE("MODIFY_CQ changes moderation, overrun ignore and the EQ, and nothing else") {
    env e;
    const auto q = make_cq(e);
    auto r = modify_cq(e.h, q.cqn, 0, 0x3, [](std::byte*, std::byte* c) {
        ifc::set<ifc::cqc::cq_period>(c, 100);
        ifc::set<ifc::cqc::cq_max_count>(c, 16);
        ifc::set<ifc::cqc::oi>(c, 1);              // not selected
        ifc::set<ifc::cqc::log_cq_size>(c, 9);     // not a modify field
    });
    REQUIRE(r.status == cmd_status::OK);
    auto qr = query_cq(e.h, q.cqn);
    CHECK(ifc::get<ifc::cqc::cq_period>(ctx(qr)) == 100);
    CHECK(ifc::get<ifc::cqc::cq_max_count>(ctx(qr)) == 16);
    CHECK(ifc::get<ifc::cqc::oi>(ctx(qr)) == 0);
    CHECK(ifc::get<ifc::cqc::log_cq_size>(ctx(qr)) == 4);
    const auto oi = [](std::byte*, std::byte* c) { ifc::set<ifc::cqc::oi>(c, 1); };
    REQUIRE(modify_cq(e.h, q.cqn, 0, 0x4, oi).status == cmd_status::OK);
    CHECK(queried<ifc::cqc::oi>(e.h, q.cqn) == 1);

    // EQ remap: the CQ now holds the second EQ, not the first.
    H::eq other;
    REQUIRE(e.h.create_eq(other, e.uar, 4, 0, 0).status == cmd_status::OK);
    const auto to = [](std::uint32_t eqn) {
        return [eqn](std::byte*, std::byte* c) { ifc::set<ifc::cqc::c_eqn_or_apu_element>(c, eqn); };
    };
    check_status(modify_cq(e.h, q.cqn, 0, 0x8, to(other.eqn + 1)), cmd_status::BAD_PARAM, cmd_syndrome::BAD_EQ);
    REQUIRE(modify_cq(e.h, q.cqn, 0, 0x8, to(other.eqn)).status == cmd_status::OK);
    CHECK(queried<ifc::cqc::c_eqn_or_apu_element>(e.h, q.cqn) == other.eqn);
    check_status(destroy_eq(e.h, other.eqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    check_status(destroy_eq(e.h, e.eq.eqn), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("MODIFY_CQ refusals change nothing") {
    env e;
    const auto q = make_cq(e);
    const auto period = [](std::byte*, std::byte* c) { ifc::set<ifc::cqc::cq_period>(c, 9); };
    using S = cmd_status;
    using Y = cmd_syndrome;
    check_status(modify_cq(e.h, q.cqn, 0, 0x1 | 0x10, period), S::BAD_PARAM, Y::BAD_PARAMETER);
    check_status(modify_cq(e.h, q.cqn, 2, 0x1, period), S::BAD_PARAM, Y::BAD_OP_MOD);
    check_status(modify_cq(e.h, q.cqn + 1, 0, 0x1, period), S::BAD_RESOURCE, Y::UNKNOWN_RESOURCE);
    check_status(modify_cq(e.h, q.cqn, 0, 0x1, period, 0, 4), S::BAD_RESOURCE, Y::FOREIGN_RESOURCE);
    CHECK(queried<ifc::cqc::cq_period>(e.h, q.cqn) == 0);
}

TEST_CASE("resize: a RESIZE_CQ CQE in the old ring, the new ring from the next index") {
    env e;
    const auto q = make_cq(e, 2);  // 4 entries in ring A
    auto& b = e.h.alloc(4096);
    auto& c = e.h.alloc(4096);
    auto& d = e.h.alloc(4096);
    auto& f = e.h.alloc(4096);
    REQUIRE(resize(e.h, q.cqn, 6, b.iova()).status == cmd_status::OK);  // 64 entries, one page
    CHECK(op_own(*q.ring, 0) == kResizeOpOwn);                          // index 0, owner 0
    auto r = query_cq(e.h, q.cqn);
    REQUIRE(r.status == cmd_status::OK);
    CHECK(ifc::get<ifc::cqc::log_cq_size>(ctx(r)) == 6);
    CHECK(ifc::get<ifc::cqc::producer_counter>(ctx(r)) == 1);
    CHECK(ifc::get<ifc::query_cq_out::pas>(r.out.data(), 0) == b.iova());

    REQUIRE(resize(e.h, q.cqn, 6, c.iova()).status == cmd_status::OK);
    CHECK(op_own(b, 1) == kResizeOpOwn);  // index 1 went to the new ring
    CHECK(op_own(b, 0) == 0);
    // Two CQEs the driver has not consumed do not fit a 1-entry ring.
    check_status(resize(e.h, q.cqn, 0, d.iova()), cmd_status::BAD_SIZE_OUTS_CQES, cmd_syndrome::LOG_SIZE_TOO_SMALL);
    REQUIRE(resize(e.h, q.cqn, 1, d.iova()).status == cmd_status::OK);  // 2 entries hold them
    CHECK(op_own(c, 2) == kResizeOpOwn);
    // Three outstanding in a 2-entry ring: no room for another RESIZE_CQ CQE.
    check_status(resize(e.h, q.cqn, 6, f.iova()), cmd_status::BAD_RES_STATE, cmd_syndrome::BAD_RESOURCE_STATE);
    CHECK(queried<ifc::cqc::producer_counter>(e.h, q.cqn) == 3);
    // Consumed up to 2: index 3 is slot 1 of ring D, on its second pass (owner 1).
    set_update_ci(q, 2);
    REQUIRE(resize(e.h, q.cqn, 6, f.iova()).status == cmd_status::OK);
    CHECK(op_own(d, 1) == (kResizeOpOwn | 1));
    r = query_cq(e.h, q.cqn);
    CHECK(ifc::get<ifc::cqc::producer_counter>(ctx(r)) == 4);
    CHECK(ifc::get<ifc::cqc::consumer_counter>(ctx(r)) == 2);
    CHECK(ifc::get<ifc::query_cq_out::pas>(r.out.data(), 0) == f.iova());
}

TEST_CASE("resize refusals change nothing") {
    env e;
    const auto q = make_cq(e, 2);
    auto& big = e.h.alloc(2 * 4096);
    const auto none = [](std::byte*, std::byte*) {};
    check_status(modify_cq(e.h, q.cqn, 1, 0x8, none, 1), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(modify_cq(e.h, q.cqn, 1, 0x1, [](std::byte* in, std::byte*) {
                     ifc::set<ifc::modify_cq_in::cq_umem_valid>(in, 1);
                 }, 1),
                 cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(resize(e.h, q.cqn, 23, big.iova()), cmd_status::BAD_PARAM, cmd_syndrome::LOG_SIZE_TOO_BIG);
    check_status(resize(e.h, q.cqn, 7, big.iova(), 1), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    check_status(resize(e.h, q.cqn, 6, big.iova() + 512), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    check_status(modify_cq(e.h, q.cqn, 1, 0x1, none, 1, 9), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    const auto r = query_cq(e.h, q.cqn);
    CHECK(ifc::get<ifc::cqc::log_cq_size>(ctx(r)) == 2);
    CHECK(ifc::get<ifc::cqc::producer_counter>(ctx(r)) == 0);
    CHECK(ifc::get<ifc::query_cq_out::pas>(r.out.data(), 0) == q.ring->iova());
    CHECK(op_own(*q.ring, 0) == 0);
    // With resize selects but only a log size, the page geometry stays.
    REQUIRE(modify_cq(e.h, q.cqn, 1, 0x1, [&](std::byte* in, std::byte* c) {
                ifc::set<ifc::cqc::log_cq_size>(c, 7);
                ifc::set<ifc::cqc::log_page_size>(c, 1);  // not selected
                ifc::set<ifc::modify_cq_in::pas>(in, 0, big.iova());
                ifc::set<ifc::modify_cq_in::pas>(in, 1, big.iova() + 4096);
            }, 2).status == cmd_status::OK);
    CHECK(queried<ifc::cqc::log_page_size>(e.h, q.cqn) == 0);
}

TEST_CASE("resize with 128-byte CQEs: the CQE is the second half of the entry") {
    env e;
    const auto q = make_cq(e, 2, 1);
    REQUIRE(resize_to_new_page(e, q.cqn).status == cmd_status::OK);
    CHECK(op_own(*q.ring, 0, 128) == kResizeOpOwn);
    CHECK(op_own(*q.ring, 0, 64) == 0);
}

TEST_CASE("the arm doorbell arms the CQ; an armed CQ's next CQE raises one completion event") {
    env e;
    const auto q = make_cq(e);
    arm(e, q, 0, hw::cq_db_req_not, 0);
    REQUIRE(wait_st(e.h, q.cqn, kStArmed));
    // The RESIZE_CQ CQE is a CQE like any other: the armed CQ fires on the CQ's EQ.
    REQUIRE(resize_to_new_page(e, q.cqn).status == cmd_status::OK);
    const auto eqe = e.h.wait_eqe(e.eq);
    REQUIRE(eqe);
    CHECK(ifc::get<ifc::eqe::event_type>(eqe->data()) == 0x00);
    CHECK(eqe_cqn(*eqe) == q.cqn);
    auto r = query_cq(e.h, q.cqn);
    CHECK(ifc::get<ifc::cqc::st>(ctx(r)) == kStFired);
    CHECK(ifc::get<ifc::cqc::last_notified_index>(ctx(r)) == 0);
    // Disarmed: the next CQE raises nothing.
    set_update_ci(q, 1);
    REQUIRE(resize_to_new_page(e, q.cqn).status == cmd_status::OK);
    CHECK_FALSE(e.h.wait_eqe(e.eq, 50ms));

    // An arm with the sn of the request that fired is stale and ignored.
    arm(e, q, 0, hw::cq_db_req_not, 1);
    std::this_thread::sleep_for(50ms);
    CHECK(queried<ifc::cqc::st>(e.h, q.cqn) == kStFired);
    CHECK_FALSE(e.h.wait_eqe(e.eq, 50ms));
    // sn + 1 arms; CQE 1 is already past consumer index 1, so the event fires at once.
    arm(e, q, 1, hw::cq_db_req_not, 1);
    const auto now = e.h.wait_eqe(e.eq);
    REQUIRE(now);
    CHECK(eqe_cqn(*now) == q.cqn);
    r = query_cq(e.h, q.cqn);
    CHECK(ifc::get<ifc::cqc::st>(ctx(r)) == kStFired);
    CHECK(ifc::get<ifc::cqc::last_notified_index>(ctx(r)) == 1);
}

TEST_CASE("REQ_NOT_SOL: armed for solicited CQEs only; undefined commands are ignored") {
    env e;
    const auto q = make_cq(e);
    arm(e, q, 0, hw::cq_db_req_not_sol, 0);
    REQUIRE(wait_st(e.h, q.cqn, kStSolArmed));
    // A RESIZE_CQ CQE is not solicited: no event, still armed.
    REQUIRE(resize_to_new_page(e, q.cqn).status == cmd_status::OK);
    CHECK_FALSE(e.h.wait_eqe(e.eq, 50ms));
    CHECK(queried<ifc::cqc::st>(e.h, q.cqn) == kStSolArmed);
    // Command 2 is not an arm command.
    arm(e, q, 0, 2u << 24, 0);
    std::this_thread::sleep_for(50ms);
    CHECK(queried<ifc::cqc::st>(e.h, q.cqn) == kStSolArmed);
    // Re-arming before any event (same sn) switches to REQ_NOT, and CQE 0 fires it.
    arm(e, q, 0, hw::cq_db_req_not, 0);
    const auto eqe = e.h.wait_eqe(e.eq);
    REQUIRE(eqe);
    CHECK(eqe_cqn(*eqe) == q.cqn);
    CHECK(queried<ifc::cqc::st>(e.h, q.cqn) == kStFired);
}

TEST_CASE("DESTROY_CQ is refused while an SRQ holds the CQ") {
    env e;
    const auto q = make_cq(e);
    const auto pd = alloc_pd(e.h);
    auto& buf = e.h.alloc(4096);
    // 16-byte WQEs (log_stride 0); the doorbell record next to the CQ's.
    const auto srq = create_srq(e.h, buf, {.log_stride = 0, .pd = pd, .cqn = q.cqn, .dbr = q.dbr->iova() + 64});
    REQUIRE(srq.status == cmd_status::OK);
    check_status(destroy_cq(e.h, q.cqn), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_srq(e.h, srqn_of(srq)).status == cmd_status::OK);
    check_status(destroy_cq(e.h, q.cqn), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("a CQ and its doorbell record in UMEMs: checks, references, addressing") {
    env e;
    auto& mem = e.h.alloc(2 * 4096);
    const auto ring = create_umem(e.h, mem, 2);           // 8 KiB
    const auto dbr = create_umem(e.h, mem, 1, 0x2b0);     // a small region 0x2b0 into a page
    const auto foreign = create_umem(e.h, mem, 2, 0, 7);  // another user's
    REQUIRE(ring != 0);
    REQUIRE(dbr != 0);
    REQUIRE(foreign != 0);
    auto in_for = [&](std::uint32_t umem, std::uint64_t off, unsigned log_size, std::uint32_t dumem,
                      std::uint64_t doff) {
        cq_spec s;
        s.log_size = log_size;
        s.uar = e.uar;
        s.eqn = e.eq.eqn;
        s.npas = 0;
        auto in = create_cq_in(s);
        in.resize(ifc::create_cq_in::size_bytes);  // no page list
        ifc::set<ifc::create_cq_in::cq_umem_valid>(in.data(), 1);
        ifc::set<ifc::create_cq_in::cq_umem_id>(in.data(), umem);
        ifc::set<ifc::create_cq_in::cq_umem_offset>(in.data(), off);
        ifc::set<ifc::cqc::dbr_umem_valid>(cqc_of(in), 1);
        ifc::set<ifc::cqc::dbr_umem_id>(cqc_of(in), dumem);
        ifc::set<ifc::cqc::dbr_addr>(cqc_of(in), doff);
        return in;
    };
    auto try_create = [&](auto&&... a) { return e.h.exec(in_for(a...), 16); };
    check_status(try_create(foreign, 0, 4, dbr, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    check_status(try_create(ring, 32, 4, dbr, 0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    // 8 KiB of CQEs 4 KiB into an 8 KiB UMEM; a record 4 bytes from the UMEM's end.
    check_status(try_create(ring, 4096, 7, dbr, 0), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    check_status(try_create(ring, 0, 4, dbr, 4096 - 0x2b0 - 4), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    check_status(try_create(ring, 0, 4, dbr, 4), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    check_status(try_create(ring, 0, 4, foreign, 0), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);

    // The ring at 4 KiB into the UMEM: 16 entries in its second page.
    const auto r = try_create(ring, 4096, 4, dbr, 8);
    REQUIRE(r.status == cmd_status::OK);
    const auto cqn = cqn_of(r);
    check_status(destroy_umem(e.h, ring), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    check_status(destroy_umem(e.h, dbr), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    // The doorbell record is at 0x2b0 + 8 of the page.
    auto* rec = reinterpret_cast<hw::cq_doorbell_record*>(mem.data() + 0x2b0 + 8);
    rec->update_ci = hw::be32::from(3);
    CHECK(queried<ifc::cqc::consumer_counter>(e.h, cqn) == 3);
    // A RESIZE_CQ CQE goes to slot 0 of the ring, the UMEM's second page; the new ring
    // is a page list, and the ring's UMEM is no longer held.
    rec->update_ci = hw::be32::from(0);
    REQUIRE(resize_to_new_page(e, cqn).status == cmd_status::OK);
    CHECK(std::to_integer<std::uint8_t>(mem.data()[4096 + 63]) == kResizeOpOwn);
    check_status(destroy_umem(e.h, ring), cmd_status::OK, cmd_syndrome::OK);
    check_status(destroy_umem(e.h, dbr), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_cq(e.h, cqn).status == cmd_status::OK);
    check_status(destroy_umem(e.h, dbr), cmd_status::OK, cmd_syndrome::OK);
}
