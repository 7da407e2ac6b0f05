// Queue pairs: CREATE_QP's checks (transport, features, bound objects, sizes, buffer,
// doorbell record, count), QUERY_QP, DESTROY_QP and the use counts a QP holds. The state
// machine is in qp_transition_test.cc.
#include <algorithm>
#include <cstring>

#include <doctest/doctest.h>

#include "tests/sim/harness.h"

using namespace cxv;
using hw::cmd_opcode;
using hw::cmd_status;
using hw::cmd_syndrome;
namespace ifc = hw::ifc;
using H = test::harness;
using test::cmd_result;
using qpc = ifc::qpc;

namespace {

constexpr std::uint32_t kRc = 0, kUc = 1, kUd = 2;

// A brought-up device with what a QP binds to: a UAR, a PD, an EQ and a CQ.
struct env {
    H h;
    std::uint32_t uar = 0, pd = 0, cq = 0;
    H::eq eq;

    explicit env(bool up = true) {
        if (!up) return;
        REQUIRE(h.bring_up());
        setup();
    }
    void setup() {
        uar = h.alloc_uar();
        REQUIRE(h.create_eq(eq, uar, 4, 0, 0).status == cmd_status::OK);
        pd = alloc_pd();
        cq = create_cq();
        REQUIRE(pd != 0);
        REQUIRE(cq != 0);
    }
    std::uint32_t alloc_pd() {
        auto r = h.simple(cmd_opcode::ALLOC_PD);
        return r.status == cmd_status::OK ? ifc::get<ifc::alloc_pd_out::pd>(r.out.data()) : 0;
    }
    // 64 CQEs in one page; the doorbell record in the next.
    std::uint32_t create_cq() {
        auto& buf = h.alloc(8192);
        auto in = H::input<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, 8);
        std::byte* c = ifc::at<ifc::create_cq_in::cq_context>(in.data());
        ifc::set<ifc::cqc::log_cq_size>(c, 6);
        ifc::set<ifc::cqc::uar_page>(c, uar);
        ifc::set<ifc::cqc::c_eqn_or_apu_element>(c, eq.eqn);
        ifc::set<ifc::cqc::dbr_addr>(c, buf.iova() + 4096);
        ifc::set<ifc::create_cq_in::pas>(in.data(), 0, buf.iova());
        auto r = h.exec(in, 16);
        return r.status == cmd_status::OK ? ifc::get<ifc::create_cq_out::cqn>(r.out.data()) : 0;
    }
    // 16 receive WQEs of 64 bytes in one page.
    std::uint32_t create_srq() {
        auto& buf = h.alloc(8192);
        auto in = H::input<ifc::create_srq_in>(cmd_opcode::CREATE_SRQ, 0, 8);
        std::byte* s = ifc::at<ifc::create_srq_in::srq_context_entry>(in.data());
        ifc::set<ifc::srqc::log_srq_size>(s, 4);
        ifc::set<ifc::srqc::log_rq_stride>(s, 2);
        ifc::set<ifc::srqc::pd>(s, pd);
        ifc::set<ifc::srqc::dbr_addr>(s, buf.iova() + 4096);
        ifc::set<ifc::create_srq_in::pas>(in.data(), 0, buf.iova());
        auto r = h.exec(in, 16);
        return r.status == cmd_status::OK ? ifc::get<ifc::create_srq_out::srqn>(r.out.data()) : 0;
    }
    // A UMEM over `pages` pages of 4 KiB.
    std::uint32_t create_umem(std::size_t pages) {
        auto& buf = h.alloc(pages * 4096);
        auto in = H::input<ifc::create_umem_in>(cmd_opcode::CREATE_UMEM, 0, pages * ifc::mtt::size_bytes);
        std::byte* u = ifc::at<ifc::create_umem_in::umem>(in.data());
        ifc::set<ifc::umem::num_of_mtt>(u, pages);
        for (std::size_t i = 0; i < pages; ++i) {
            std::byte* e = ifc::at<ifc::umem::mtt>(u, i);
            const std::uint64_t a = buf.iova() + i * 4096;
            ifc::set<ifc::mtt::ptag_63_32>(e, static_cast<std::uint32_t>(a >> 32));
            ifc::set<ifc::mtt::ptag_31_8>(e, static_cast<std::uint32_t>(a >> 8));
            ifc::set<ifc::mtt::rd_en>(e, 1);
            ifc::set<ifc::mtt::wr_en>(e, 1);
        }
        auto r = h.exec(in, 16);
        return r.status == cmd_status::OK ? ifc::get<ifc::create_umem_out::umem_id>(r.out.data()) : 0;
    }
    // A CREATE_QP input: 16 receive WQEs of 64 bytes then 16 send WQE-BBs, in one page;
    // `npas` page-list entries; the doorbell record in the buffer's last page.
    std::vector<std::byte> qp_input(std::uint32_t st, std::size_t npas = 1) {
        auto& buf = h.alloc((npas + 1) * 4096);
        auto in = H::input<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, npas * 8);
        std::byte* q = ifc::at<ifc::create_qp_in::qpc>(in.data());
        ifc::set<qpc::st>(q, st);
        ifc::set<qpc::pm_state>(q, 3);  // MIGRATED
        ifc::set<qpc::pd>(q, pd);
        ifc::set<qpc::uar_page>(q, uar);
        ifc::set<qpc::cqn_snd>(q, cq);
        ifc::set<qpc::cqn_rcv>(q, cq);
        ifc::set<qpc::log_rq_size>(q, 4);
        ifc::set<qpc::log_rq_stride>(q, 2);
        ifc::set<qpc::log_sq_size>(q, 4);
        ifc::set<qpc::dbr_addr>(q, buf.iova() + npas * 4096);
        for (std::size_t i = 0; i < npas; ++i) ifc::set<ifc::create_qp_in::pas>(in.data(), i, buf.iova() + i * 4096);
        return in;
    }
    static std::byte* ctx(std::vector<std::byte>& in) { return ifc::at<ifc::create_qp_in::qpc>(in.data()); }
    cmd_result exec(const std::vector<std::byte>& in) { return h.exec(in, 16); }
    std::uint32_t create_qp(std::vector<std::byte> in) {
        auto r = exec(in);
        REQUIRE(r.status == cmd_status::OK);
        return ifc::get<ifc::create_qp_out::qpn>(r.out.data());
    }
    cmd_result query(std::uint32_t qpn, std::size_t npas = 1) {
        auto in = H::input<ifc::query_qp_in>(cmd_opcode::QUERY_QP);
        ifc::set<ifc::query_qp_in::qpn>(in.data(), qpn);
        return h.exec(in, ifc::query_qp_out::size_bytes + npas * 8);
    }
    template <typename In>
    cmd_result destroy(cmd_opcode op, std::uint32_t n, std::uint32_t uid = 0) {
        auto in = H::input<In>(op);
        ifc::set<typename In::uid>(in.data(), uid);
        // Every destroy/dealloc input names its object in the same dword (bits 0x48..0x60).
        ifc::set<ifc::destroy_qp_in::qpn>(in.data(), n);
        return h.exec(in, 16);
    }
    cmd_result destroy_qp(std::uint32_t qpn, std::uint32_t uid = 0) {
        return destroy<ifc::destroy_qp_in>(cmd_opcode::DESTROY_QP, qpn, uid);
    }
};

void check_fails(const cmd_result& r, cmd_status st, cmd_syndrome syn) {
    CHECK(r.status == st);
    CHECK_MESSAGE(r.synd() == syn, hw::name(r.synd()));
}

}  // namespace

TEST_CASE("CREATE_QP: RC, UC and UD QPs start in RST with unique 24-bit numbers from 0x100") {
    env e;
    std::vector<std::uint32_t> qpns;
    for (auto st : {kRc, kUc, kUd}) {
        auto in = e.qp_input(st);
        const std::uint64_t page = ifc::get<ifc::create_qp_in::pas>(in.data(), 0);
        const std::uint32_t qpn = e.create_qp(in);
        CHECK(qpn >= 0x100);
        CHECK(qpn <= 0xffffff);
        CHECK(std::find(qpns.begin(), qpns.end(), qpn) == qpns.end());
        qpns.push_back(qpn);

        auto q = e.query(qpn);
        REQUIRE(q.status == cmd_status::OK);
        const std::byte* c = ifc::at<ifc::query_qp_out::qpc>(q.out.data());
        CHECK(ifc::get<qpc::state>(c) == 0);
        CHECK(ifc::get<qpc::st>(c) == st);
        CHECK(ifc::get<qpc::pd>(c) == e.pd);
        CHECK(ifc::get<qpc::cqn_snd>(c) == e.cq);
        CHECK(ifc::get<qpc::log_sq_size>(c) == 4);
        CHECK(ifc::get<qpc::log_rq_stride>(c) == 2);
        CHECK(ifc::get<ifc::query_qp_out::opt_param_mask>(q.out.data()) == 0);
        CHECK(ifc::get<ifc::query_qp_out::pas>(q.out.data(), 0) == page);
    }
    CHECK(e.query(0x42).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("CREATE_QP refuses transports and features the device does not offer") {
    env e;
    auto with = [&](auto set) {
        auto in = e.qp_input(kRc);
        set(env::ctx(in), in.data());
        return e.exec(in);
    };
    for (std::uint32_t st : {3u, 5u, 7u, 9u, 0xffu}) {  // XRC, DCI, QP0, raw, junk
        check_fails(with([&](std::byte* q, std::byte*) { ifc::set<qpc::st>(q, st); }), cmd_status::BAD_PARAM,
                    cmd_syndrome::BAD_PARAMETER);
    }
    // No automatic path migration: MIGRATED only; 2 is reserved anyway.
    for (std::uint32_t pm : {0u, 1u, 2u}) {
        check_fails(with([&](std::byte* q, std::byte*) { ifc::set<qpc::pm_state>(q, pm); }), cmd_status::BAD_PARAM,
                    cmd_syndrome::BAD_PARAMETER);
    }
    check_fails(with([](std::byte* q, std::byte*) { ifc::set<qpc::ts_format>(q, 2); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(with([](std::byte* q, std::byte*) { ifc::set<qpc::block_lb_mc>(q, 1); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(with([](std::byte* q, std::byte*) { ifc::set<qpc::cd_master>(q, 1); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(with([](std::byte* q, std::byte*) { ifc::set<qpc::cs_res>(q, 1); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(with([](std::byte* q, std::byte*) { ifc::set<qpc::rq_type>(q, 2); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PARAMETER);
    check_fails(with([](std::byte*, std::byte* in) { ifc::set<ifc::create_qp_in::input_qpn>(in, 0x500); }),
                cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    // Features the capabilities offer are fine.
    CHECK(with([](std::byte* q, std::byte*) {
              ifc::set<qpc::wq_signature>(q, 1);
              ifc::set<qpc::ts_format>(q, 1);
          }).status == cmd_status::OK);
}

TEST_CASE("CREATE_QP checks the objects it binds to") {
    env e;
    auto with = [&](auto set, std::uint32_t uid = 0) {
        auto in = e.qp_input(kRc);
        ifc::set<ifc::create_qp_in::uid>(in.data(), uid);
        set(env::ctx(in));
        return e.exec(in);
    };
    check_fails(with([&](std::byte* q) { ifc::set<qpc::pd>(q, e.pd + 77); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_PD);
    check_fails(with([&](std::byte* q) { ifc::set<qpc::uar_page>(q, e.uar + 77); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_UAR);
    check_fails(with([&](std::byte* q) { ifc::set<qpc::cqn_snd>(q, e.cq + 77); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_CQ);
    check_fails(with([&](std::byte* q) { ifc::set<qpc::cqn_rcv>(q, 0); }), cmd_status::BAD_PARAM,
                cmd_syndrome::BAD_CQ);
    // Objects of another user: the PD (the first checked) is uid 0's.
    check_fails(with([](std::byte*) {}, 5), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    // An SRQ QP needs a live SRQ; a zero-length RQ needs no receive CQ, no SQ no send CQ.
    check_fails(with([](std::byte* q) {
                    ifc::set<qpc::rq_type>(q, 1);
                    ifc::set<qpc::srqn_rmpn_xrqn>(q, 0x77);
                }),
                cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(with([](std::byte* q) {
              ifc::set<qpc::rq_type>(q, 3);
              ifc::set<qpc::cqn_rcv>(q, 0);
              ifc::set<qpc::no_sq>(q, 1);
              ifc::set<qpc::cqn_snd>(q, 0);
          }).status == cmd_status::OK);
}

TEST_CASE("CREATE_QP checks queue sizes against the capabilities") {
    env e;
    auto with = [&](auto set) {
        auto in = e.qp_input(kUd, 64);
        set(env::ctx(in));
        return e.exec(in);
    };
    // max_wqe_sz_rq is 512 bytes. (log_max_qp_sz is 15, the most the 4-bit log_sq_size
    // and log_rq_size can say, so no size is too big for it.)
    check_fails(with([](std::byte* q) { ifc::set<qpc::log_rq_stride>(q, 6); }), cmd_status::BAD_PARAM,
                cmd_syndrome::EXCEEDS_LIMIT);
    // Sizes of absent queues do not matter.
    CHECK(with([](std::byte* q) {
              ifc::set<qpc::no_sq>(q, 1);
              ifc::set<qpc::log_sq_size>(q, 0xf);
              ifc::set<qpc::log_rq_stride>(q, 5);
              ifc::set<qpc::log_rq_size>(q, 6);  // 32 KiB of receive WQEs, no SQ
          }).status == cmd_status::OK);
}

TEST_CASE("CREATE_QP checks the page list and the doorbell record") {
    env e;
    // 256 send WQE-BBs (16 KiB) after 1 KiB of receive WQEs: five pages.
    auto big = e.qp_input(kRc, 4);
    ifc::set<qpc::log_sq_size>(env::ctx(big), 8);
    check_fails(e.exec(big), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    big = e.qp_input(kRc, 5);
    ifc::set<qpc::log_sq_size>(env::ctx(big), 8);
    const std::uint32_t qpn = e.create_qp(big);
    auto q = e.query(qpn, 5);
    CHECK(ifc::get<ifc::query_qp_out::pas>(q.out.data(), 4) == ifc::get<ifc::create_qp_in::pas>(big.data(), 4));

    // The buffer starting 63/64 into its first page spills into a second.
    auto off = e.qp_input(kRc, 1);
    ifc::set<qpc::page_offset>(env::ctx(off), 63);
    check_fails(e.exec(off), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    off = e.qp_input(kRc, 2);
    ifc::set<qpc::page_offset>(env::ctx(off), 63);
    CHECK(e.exec(off).status == cmd_status::OK);

    // Pages are aligned to the page size (4 KiB << log_page_size).
    auto mis = e.qp_input(kRc);
    ifc::set<ifc::create_qp_in::pas>(mis.data(), 0, ifc::get<ifc::create_qp_in::pas>(mis.data(), 0) + 64);
    check_fails(e.exec(mis), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    auto large = e.qp_input(kRc);
    ifc::set<qpc::log_page_size>(env::ctx(large), 1);  // 8 KiB pages: the 4 KiB-aligned page is not
    if (ifc::get<ifc::create_qp_in::pas>(large.data(), 0) % 8192 == 0) {
        ifc::set<ifc::create_qp_in::pas>(large.data(), 0, ifc::get<ifc::create_qp_in::pas>(large.data(), 0) + 4096);
    }
    check_fails(e.exec(large), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);

    auto dbr = e.qp_input(kRc);
    ifc::set<qpc::dbr_addr>(env::ctx(dbr), ifc::get<qpc::dbr_addr>(env::ctx(dbr)) + 4);
    check_fails(e.exec(dbr), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
}

TEST_CASE("CREATE_QP with its buffer and doorbell record in UMEMs") {
    env e;
    const std::uint32_t umem = e.create_umem(1), small = e.create_umem(1);
    REQUIRE(umem != 0);
    auto in_umem = [&](std::uint32_t id, std::uint64_t off) {
        auto in = e.qp_input(kRc, 0);
        ifc::set<ifc::create_qp_in::wq_umem_valid>(in.data(), 1);
        ifc::set<ifc::create_qp_in::wq_umem_id>(in.data(), id);
        ifc::set<ifc::create_qp_in::wq_umem_offset>(in.data(), off);
        return in;
    };
    check_fails(e.exec(in_umem(0x777, 0)), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_fails(e.exec(in_umem(umem, 32)), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    check_fails(e.exec(in_umem(umem, 2048 + 64)), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);

    // The 2 KiB of queues at the UMEM's start; the doorbell record in the other UMEM.
    auto in = in_umem(umem, 0);
    ifc::set<qpc::dbr_umem_valid>(env::ctx(in), 1);
    ifc::set<qpc::dbr_umem_id>(env::ctx(in), small);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 4096);  // past its end
    check_fails(e.exec(in), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 4);
    check_fails(e.exec(in), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 64);
    const std::uint32_t qpn = e.create_qp(in);

    // Both UMEMs are held until the QP is gone.
    for (auto id : {umem, small}) {
        check_fails(e.destroy<ifc::destroy_umem_in>(cmd_opcode::DESTROY_UMEM, id), cmd_status::RESOURCE_BUSY,
                    cmd_syndrome::RESOURCE_IN_USE);
    }
    REQUIRE(e.destroy_qp(qpn).status == cmd_status::OK);
    for (auto id : {umem, small}) {
        CHECK(e.destroy<ifc::destroy_umem_in>(cmd_opcode::DESTROY_UMEM, id).status == cmd_status::OK);
    }
}

TEST_CASE("a QP on an SRQ holds the SRQ") {
    env e;
    const std::uint32_t srq = e.create_srq();
    REQUIRE(srq != 0);
    auto in = e.qp_input(kRc);
    ifc::set<qpc::rq_type>(env::ctx(in), 1);
    ifc::set<qpc::srqn_rmpn_xrqn>(env::ctx(in), srq);
    ifc::set<qpc::log_rq_size>(env::ctx(in), 0xf);  // no RQ of its own: ignored
    const std::uint32_t qpn = e.create_qp(in);
    check_fails(e.destroy<ifc::destroy_srq_in>(cmd_opcode::DESTROY_SRQ, srq), cmd_status::RESOURCE_BUSY,
                cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(e.destroy_qp(qpn).status == cmd_status::OK);
    CHECK(e.destroy<ifc::destroy_srq_in>(cmd_opcode::DESTROY_SRQ, srq).status == cmd_status::OK);
}

TEST_CASE("DESTROY_QP releases the PD, UAR and CQs the QP held") {
    env e;
    const std::uint32_t uar = e.h.alloc_uar(), pd = e.alloc_pd(), snd = e.create_cq(), rcv = e.create_cq();
    auto in = e.qp_input(kUc);
    ifc::set<qpc::uar_page>(env::ctx(in), uar);
    ifc::set<qpc::pd>(env::ctx(in), pd);
    ifc::set<qpc::cqn_snd>(env::ctx(in), snd);
    ifc::set<qpc::cqn_rcv>(env::ctx(in), rcv);
    const std::uint32_t qpn = e.create_qp(in);

    auto busy = [&] {
        check_fails(e.destroy<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ, snd), cmd_status::RESOURCE_BUSY,
                    cmd_syndrome::RESOURCE_IN_USE);
        check_fails(e.destroy<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ, rcv), cmd_status::RESOURCE_BUSY,
                    cmd_syndrome::RESOURCE_IN_USE);
        check_fails(e.destroy<ifc::dealloc_pd_in>(cmd_opcode::DEALLOC_PD, pd), cmd_status::RESOURCE_BUSY,
                    cmd_syndrome::RESOURCE_IN_USE);
        check_fails(e.destroy<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR, uar), cmd_status::RESOURCE_BUSY,
                    cmd_syndrome::RESOURCE_IN_USE);
    };
    busy();
    // Only its owner destroys it, and only once.
    check_fails(e.destroy_qp(qpn, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    busy();
    REQUIRE(e.destroy_qp(qpn).status == cmd_status::OK);
    check_fails(e.destroy_qp(qpn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_fails(e.query(qpn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(e.destroy<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ, snd).status == cmd_status::OK);
    CHECK(e.destroy<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ, rcv).status == cmd_status::OK);
    CHECK(e.destroy<ifc::dealloc_pd_in>(cmd_opcode::DEALLOC_PD, pd).status == cmd_status::OK);
    CHECK(e.destroy<ifc::dealloc_uar_in>(cmd_opcode::DEALLOC_UAR, uar).status == cmd_status::OK);
}

TEST_CASE("CREATE_QP stops at 2^log_max_qp QPs") {
    env e(false);
    REQUIRE(e.h.wait_boot());
    e.h.set_cmdq();
    REQUIRE(e.h.enable_hca().status == cmd_status::OK);
    auto issi = H::input<ifc::set_issi_in>(cmd_opcode::SET_ISSI);
    ifc::set<ifc::set_issi_in::current_issi>(issi.data(), 1);
    REQUIRE(e.h.exec(issi, 16).status == cmd_status::OK);
    REQUIRE(e.h.give_pages(1).status == cmd_status::OK);
    auto cur = e.h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    auto set = H::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP);
    std::byte* cap = ifc::at<ifc::set_hca_cap_in::capability>(set.data());
    std::memcpy(cap, ifc::at<ifc::query_hca_cap_out::capability>(cur.out.data()), ifc::cmd_hca_cap::size_bytes);
    ifc::set<ifc::cmd_hca_cap::log_max_qp>(cap, 1);
    REQUIRE(e.h.exec(set, 16).status == cmd_status::OK);
    REQUIRE(e.h.give_pages(2).status == cmd_status::OK);
    REQUIRE(e.h.init_hca().status == cmd_status::OK);
    e.setup();

    const std::uint32_t a = e.create_qp(e.qp_input(kRc));
    e.create_qp(e.qp_input(kUd));
    check_fails(e.exec(e.qp_input(kUc)), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    REQUIRE(e.destroy_qp(a).status == cmd_status::OK);
    CHECK(e.exec(e.qp_input(kUc)).status == cmd_status::OK);
}
