// Queue pairs: CREATE_QP's checks (transport, features, bound objects, sizes, buffer,
// doorbell record, count), QUERY_QP, DESTROY_QP and the use counts a QP holds. The state
// machine is in qp_transition_test.cc.
#include <algorithm>
#include <cstring>

#include <doctest/doctest.h>

#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using qpc = ifc::qpc;

namespace {

constexpr std::uint32_t kRc = ifc::qpc_values::st_rc, kUc = ifc::qpc_values::st_uc, kUd = ifc::qpc_values::st_ud;

// A brought-up device with what a QP binds to: a UAR, a PD, an EQ and a CQ.
struct env : qp_env {
    using qp_env::qp_env;
    static std::byte* ctx(std::vector<std::byte>& in) { return ifc::at<ifc::create_qp_in::qpc>(in.data()); }
    cmd_result exec(const std::vector<std::byte>& in) { return h.exec(in, 16); }
};

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

        auto q = query_qp(e.h, qpn);
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
    CHECK(query_qp(e.h, 0x42).synd() == cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("CREATE_QP refuses transports and features the device does not offer") {
    env e;
    auto with = [&](auto set) {
        auto in = e.qp_input(kRc);
        set(env::ctx(in), in.data());
        return e.exec(in);
    };
    for (std::uint32_t st : {3u, 5u, 9u, 0xffu}) {  // XRC, DCI, raw, junk (QP0 and QP1: qp_transition_test)
        check_status(with([&](std::byte* q, std::byte*) { ifc::set<qpc::st>(q, st); }), cmd_status::BAD_PARAM,
                     cmd_syndrome::BAD_PARAMETER);
    }
    // pm_state 2 is reserved (ARMED, REARM and MIGRATED are taken: see below).
    check_status(with([&](std::byte* q, std::byte*) { ifc::set<qpc::pm_state>(q, 2); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte* q, std::byte*) { ifc::set<qpc::ts_format>(q, 2); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte* q, std::byte*) { ifc::set<qpc::block_lb_mc>(q, 1); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte* q, std::byte*) { ifc::set<qpc::cd_master>(q, 1); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte* q, std::byte*) { ifc::set<qpc::cs_res>(q, 1); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte* q, std::byte*) { ifc::set<qpc::rq_type>(q, 2); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(with([](std::byte*, std::byte* in) { ifc::set<ifc::create_qp_in::input_qpn>(in, 0x500); }),
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
    check_status(with([&](std::byte* q) { ifc::set<qpc::pd>(q, e.pd + 77); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PD);
    check_status(with([&](std::byte* q) { ifc::set<qpc::uar_page>(q, e.uar + 77); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_UAR);
    check_status(with([&](std::byte* q) { ifc::set<qpc::cqn_snd>(q, e.cq + 77); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_CQ);
    check_status(with([&](std::byte* q) { ifc::set<qpc::cqn_rcv>(q, 0); }), cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_CQ);
    // Objects of another user: the PD (the first checked) is uid 0's.
    check_status(with([](std::byte*) {}, 5), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    // An SRQ QP needs a live SRQ; a zero-length RQ needs no receive CQ, no SQ no send CQ.
    check_status(with([](std::byte* q) {
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

// Cards take a QP created with any defined pm_state, whatever apm says: DPDK's mlx5
// (mlx5_devx_cmd_create_qp) leaves pm_state 0 (ARMED) in the firmware-managed QPs it
// creates. The model keeps the value; it migrates no path.
TEST_CASE("CREATE_QP takes pm_state ARMED and REARM as well as MIGRATED, without APM") {
    env e;
    for (std::uint32_t pm : {0u, 1u, 3u}) {
        auto in = e.qp_input(kRc);
        ifc::set<qpc::pm_state>(env::ctx(in), pm);
        const std::uint32_t qpn = e.create_qp(in);
        auto q = query_qp(e.h, qpn);
        REQUIRE(q.status == cmd_status::OK);
        CHECK(ifc::get<qpc::pm_state>(ifc::at<ifc::query_qp_out::qpc>(q.out.data())) == pm);
    }
}

// The UAR page is the send queue's doorbell page. Linux's mlx5_vdpa (qp_prepare for the
// firmware QP) and DPDK's mlx5 ("special QP to be managed by FW") create QPs with no SQ,
// a zero-length RQ, no CQs and uar_page 0, and cards take them.
TEST_CASE("CREATE_QP: a QP without a send queue needs no UAR") {
    env e;
    auto fw_qp = [&] {
        auto in = H::input<ifc::create_qp_in>(cmd_opcode::CREATE_QP);
        std::byte* q = env::ctx(in);
        ifc::set<qpc::st>(q, kRc);
        ifc::set<qpc::pm_state>(q, 3);  // MIGRATED, as mlx5_vdpa sets it
        ifc::set<qpc::pd>(q, e.pd);
        ifc::set<qpc::no_sq>(q, 1);
        ifc::set<qpc::rq_type>(q, ifc::qpc_values::rq_zero_len);
        return in;
    };
    auto in = fw_qp();
    const std::uint32_t qpn = e.create_qp(in);
    auto q = query_qp(e.h, qpn);
    REQUIRE(q.status == cmd_status::OK);
    CHECK(ifc::get<qpc::uar_page>(ifc::at<ifc::query_qp_out::qpc>(q.out.data())) == 0);
    // A UAR that is named must exist, with or without a send queue.
    auto bad = fw_qp();
    ifc::set<qpc::uar_page>(env::ctx(bad), e.uar + 77);
    check_status(e.exec(bad), cmd_status::BAD_PARAM, cmd_syndrome::BAD_UAR);
    // A QP with a send queue needs its UAR.
    auto sq = e.qp_input(kRc);
    ifc::set<qpc::uar_page>(env::ctx(sq), 0);
    check_status(e.exec(sq), cmd_status::BAD_PARAM, cmd_syndrome::BAD_UAR);
    REQUIRE(destroy_qp(e.h, qpn).status == cmd_status::OK);
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
    check_status(with([](std::byte* q) { ifc::set<qpc::log_rq_stride>(q, 6); }), cmd_status::BAD_PARAM,
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
    check_status(e.exec(big), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    big = e.qp_input(kRc, 5);
    ifc::set<qpc::log_sq_size>(env::ctx(big), 8);
    const std::uint32_t qpn = e.create_qp(big);
    auto q = query_qp(e.h, qpn, 5);
    CHECK(ifc::get<ifc::query_qp_out::pas>(q.out.data(), 4) == ifc::get<ifc::create_qp_in::pas>(big.data(), 4));

    // The buffer starting 63/64 into its first page spills into a second.
    auto off = e.qp_input(kRc, 1);
    ifc::set<qpc::page_offset>(env::ctx(off), 63);
    check_status(e.exec(off), cmd_status::BAD_INPUT_LEN, cmd_syndrome::PAS_TOO_SHORT);
    off = e.qp_input(kRc, 2);
    ifc::set<qpc::page_offset>(env::ctx(off), 63);
    CHECK(e.exec(off).status == cmd_status::OK);

    // Pages are aligned to the page size (4 KiB << log_page_size).
    auto mis = e.qp_input(kRc);
    ifc::set<ifc::create_qp_in::pas>(mis.data(), 0, ifc::get<ifc::create_qp_in::pas>(mis.data(), 0) + 64);
    check_status(e.exec(mis), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    auto large = e.qp_input(kRc);
    ifc::set<qpc::log_page_size>(env::ctx(large), 1);  // 8 KiB pages: the 4 KiB-aligned page is not
    if (ifc::get<ifc::create_qp_in::pas>(large.data(), 0) % 8192 == 0) {
        ifc::set<ifc::create_qp_in::pas>(large.data(), 0, ifc::get<ifc::create_qp_in::pas>(large.data(), 0) + 4096);
    }
    check_status(e.exec(large), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);

    auto dbr = e.qp_input(kRc);
    ifc::set<qpc::dbr_addr>(env::ctx(dbr), ifc::get<qpc::dbr_addr>(env::ctx(dbr)) + 4);
    check_status(e.exec(dbr), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
}

TEST_CASE("CREATE_QP with its buffer and doorbell record in UMEMs") {
    env e;
    const std::uint32_t umem = create_umem(e.h, e.h.alloc(4096), 1), small = create_umem(e.h, e.h.alloc(4096), 1);
    REQUIRE(umem != 0);
    auto in_umem = [&](std::uint32_t id, std::uint64_t off) {
        auto in = e.qp_input(kRc, 0);
        ifc::set<ifc::create_qp_in::wq_umem_valid>(in.data(), 1);
        ifc::set<ifc::create_qp_in::wq_umem_id>(in.data(), id);
        ifc::set<ifc::create_qp_in::wq_umem_offset>(in.data(), off);
        return in;
    };
    check_status(e.exec(in_umem(0x777, 0)), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(e.exec(in_umem(umem, 32)), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    check_status(e.exec(in_umem(umem, 2048 + 64)), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);

    // The 2 KiB of queues at the UMEM's start; the doorbell record in the other UMEM.
    auto in = in_umem(umem, 0);
    ifc::set<qpc::dbr_umem_valid>(env::ctx(in), 1);
    ifc::set<qpc::dbr_umem_id>(env::ctx(in), small);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 4096);  // past its end
    check_status(e.exec(in), cmd_status::BAD_PARAM, cmd_syndrome::PAS_TOO_SHORT);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 4);
    check_status(e.exec(in), cmd_status::BAD_PARAM, cmd_syndrome::BAD_ALIGNMENT);
    ifc::set<qpc::dbr_addr>(env::ctx(in), 64);
    const std::uint32_t qpn = e.create_qp(in);

    // Both UMEMs are held until the QP is gone.
    for (auto id : {umem, small}) {
        check_status(destroy_umem(e.h, id), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    }
    REQUIRE(destroy_qp(e.h, qpn).status == cmd_status::OK);
    for (auto id : {umem, small}) {
        CHECK(destroy_umem(e.h, id).status == cmd_status::OK);
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
    check_status(destroy_srq(e.h, srq), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    REQUIRE(destroy_qp(e.h, qpn).status == cmd_status::OK);
    CHECK(destroy_srq(e.h, srq).status == cmd_status::OK);
}

TEST_CASE("DESTROY_QP releases the PD, UAR and CQs the QP held") {
    env e;
    const std::uint32_t uar = e.h.alloc_uar(), pd = alloc_pd(e.h), snd = e.create_cq(), rcv = e.create_cq();
    auto in = e.qp_input(kUc);
    ifc::set<qpc::uar_page>(env::ctx(in), uar);
    ifc::set<qpc::pd>(env::ctx(in), pd);
    ifc::set<qpc::cqn_snd>(env::ctx(in), snd);
    ifc::set<qpc::cqn_rcv>(env::ctx(in), rcv);
    const std::uint32_t qpn = e.create_qp(in);

    auto busy = [&] {
        check_status(destroy_cq(e.h, snd), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
        check_status(destroy_cq(e.h, rcv), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
        check_status(dealloc_pd(e.h, pd), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
        check_status(dealloc_uar(e.h, uar), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    };
    busy();
    // Only its owner destroys it, and only once.
    check_status(destroy_qp(e.h, qpn, 3), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    busy();
    REQUIRE(destroy_qp(e.h, qpn).status == cmd_status::OK);
    check_status(destroy_qp(e.h, qpn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(query_qp(e.h, qpn), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(destroy_cq(e.h, snd).status == cmd_status::OK);
    CHECK(destroy_cq(e.h, rcv).status == cmd_status::OK);
    CHECK(dealloc_pd(e.h, pd).status == cmd_status::OK);
    CHECK(dealloc_uar(e.h, uar).status == cmd_status::OK);
}

TEST_CASE("CREATE_QP stops at 2^log_max_qp QPs") {
    env e({}, false);
    boot_and_enable(e.h);
    REQUIRE(e.h.set_issi(1).status == cmd_status::OK);
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
    check_status(e.exec(e.qp_input(kUc)), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    REQUIRE(destroy_qp(e.h, a).status == cmd_status::OK);
    CHECK(e.exec(e.qp_input(kUc)).status == cmd_status::OK);
}

namespace {

cmd_result mcg(harness& h, cmd_opcode op, std::uint32_t qpn, std::uint8_t group, std::uint16_t uid = 0) {
    auto in = H::input<ifc::attach_to_mcg_in>(op);
    ifc::set<ifc::attach_to_mcg_in::qpn>(in.data(), qpn);
    ifc::set<ifc::attach_to_mcg_in::uid>(in.data(), uid);
    std::byte* gid = ifc::at<ifc::attach_to_mcg_in::multicast_gid>(in.data());
    gid[0] = std::byte{0xff};
    gid[1] = std::byte{0x12};
    gid[15] = std::byte{group};
    return h.exec(in, 16);
}

}  // namespace

// PRM ATTACH_TO_MCG / DETACH_FROM_MCG: a live QP of the caller's uid; a group holds at most
// max_qp_mcg QPs (240, announced), past which EXCEED_LIM; a QP destroyed leaves its groups.
// Attaching twice and detaching what is not attached change nothing (the PRM states no
// refusal for them).
TEST_CASE("ATTACH_TO_MCG: live QPs of the uid, max_qp_mcg per group; DESTROY_QP leaves the group") {
    env e;
    auto caps = e.h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(caps.out.data());
    const std::uint32_t max = ifc::get<ifc::cmd_hca_cap::max_qp_mcg>(cap);
    CHECK(max == 240);
    CHECK(ifc::get<ifc::cmd_hca_cap::log_max_mcg>(cap) == 21);

    check_status(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, 0x4242, 1), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::UNKNOWN_RESOURCE);
    std::vector<std::uint32_t> qps;
    for (std::uint32_t i = 0; i < max; ++i) qps.push_back(e.create_qp(e.qp_input(kUd)));
    check_status(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, qps[0], 1, 3), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::FOREIGN_RESOURCE);
    for (const std::uint32_t q : qps) REQUIRE(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, q, 1).status == cmd_status::OK);
    CHECK(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, qps[0], 1).status == cmd_status::OK);  // already in: no change
    const std::uint32_t extra = e.create_qp(e.qp_input(kUd));
    check_status(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, extra, 1), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    CHECK(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, extra, 2).status == cmd_status::OK);  // another group has room

    // One leaves by DETACH_FROM_MCG, one by DESTROY_QP: room for two.
    CHECK(mcg(e.h, cmd_opcode::DETACH_FROM_MCG, qps[1], 1).status == cmd_status::OK);
    CHECK(mcg(e.h, cmd_opcode::DETACH_FROM_MCG, qps[1], 1).status == cmd_status::OK);  // not in it: no change
    REQUIRE(destroy_qp(e.h, qps[2]).status == cmd_status::OK);
    check_status(mcg(e.h, cmd_opcode::DETACH_FROM_MCG, qps[2], 1), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, extra, 1).status == cmd_status::OK);
    const std::uint32_t last = e.create_qp(e.qp_input(kUd));
    CHECK(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, last, 1).status == cmd_status::OK);
    check_status(mcg(e.h, cmd_opcode::ATTACH_TO_MCG, qps[1], 1), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
}
