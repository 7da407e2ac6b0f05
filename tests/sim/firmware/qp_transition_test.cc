// The QP state machine: RST2INIT .. RTR2RTS for RC, UC and UD, the source state each
// transition requires, 2ERR and 2RST from every state, required and optional attributes
// (opt_param_mask) per transition and transport, and the values they are checked
// against. CREATE_QP and DESTROY_QP themselves are in qp_test.cc.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "hw/doorbell.h"
#include "hw/wqe.h"
#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using qpc = ifc::qpc;
using ads = ifc::ads;

namespace {

// The service types, qpc.state values and opt_param_mask bits as hw/ names them
// (tests/hw/linux_qp_constants_test checks them against Linux).
namespace qv = ifc::qpc_values;
namespace opt = ifc::qp_optpar;
constexpr std::uint32_t kRc = qv::st_rc, kUc = qv::st_uc, kUd = qv::st_ud;
constexpr std::uint32_t value(ifc::qp_state s) { return static_cast<std::uint32_t>(s); }
constexpr std::uint32_t kRst = value(ifc::qp_state::RST), kInit = value(ifc::qp_state::INIT),
                        kRtr = value(ifc::qp_state::RTR), kRts = value(ifc::qp_state::RTS),
                        kErr = value(ifc::qp_state::ERR);

// A brought-up device with a UAR, a PD, an EQ and a CQ for QPs to bind to.
struct env : qp_env {
    bool roce = false;

    explicit env(sim::device_config cfg = {}) : qp_env(cfg), roce(cfg.port == sim::port_type::ETHERNET) {}
    // The context as QUERY_QP returns it.
    std::vector<std::byte> query(std::uint32_t qpn) {
        auto r = query_qp(h, qpn);
        REQUIRE(r.status == cmd_status::OK);
        const std::byte* c = ifc::at<ifc::query_qp_out::qpc>(r.out.data());
        return {c, c + qpc::size_bytes};
    }
    std::uint32_t state(std::uint32_t qpn) { return ifc::get<qpc::state>(query(qpn).data()); }
};

bool modifies(cmd_opcode op) { return op != cmd_opcode::QP_2ERR && op != cmd_opcode::QP_2RST; }

// A transition command for `qpn`, with valid attributes for the step of the path to RTS
// it is (and none for the others).
struct transition_in {
    std::vector<std::byte> in;
    std::byte* ctx() { return ifc::at<ifc::rst2init_qp_in::qpc>(in.data()); }
    std::byte* path() { return ifc::at<qpc::primary_address_path>(ctx()); }
    void mask(std::uint32_t m) { ifc::set<ifc::rst2init_qp_in::opt_param_mask>(in.data(), m); }

    transition_in(cmd_opcode op, std::uint32_t qpn, std::uint32_t st, bool roce) {
        in = modifies(op) ? H::input<ifc::rst2init_qp_in>(op) : H::input<ifc::qp_2rst_in>(op);
        ifc::set<ifc::qp_2rst_in::qpn>(in.data(), qpn);
        if (op == cmd_opcode::RST2INIT_QP) {
            ifc::set<ads::vhca_port_num>(path(), 1);
            ifc::set<ads::pkey_index>(path(), 3);
            if (st == kRc) ifc::set<qpc::rre>(ctx(), 1);
            if (st != kUd) ifc::set<qpc::rwe>(ctx(), 1);
            if (st == kUd) ifc::set<qpc::q_key>(ctx(), 0x11112222);
        } else if (op == cmd_opcode::INIT2RTR_QP && st != kUd) {
            ifc::set<qpc::mtu>(ctx(), 5);
            ifc::set<qpc::log_msg_max>(ctx(), 30);
            ifc::set<qpc::remote_qpn>(ctx(), 0x123);
            ifc::set<qpc::next_rcv_psn>(ctx(), 0x456);
            if (roce) {
                ifc::set<ads::rgid_rip>(path(), 15, 7);  // any GID but zero
                ifc::set<ads::rmac_31_0>(path(), 0x02000002);
            } else {
                ifc::set<ads::rlid>(path(), 7);
            }
            if (st == kRc) {
                ifc::set<qpc::log_rra_max>(ctx(), 2);
                ifc::set<qpc::min_rnr_nak>(ctx(), 12);
            }
        } else if (op == cmd_opcode::RTR2RTS_QP) {
            ifc::set<qpc::next_send_psn>(ctx(), 0x789);
            if (st == kRc) {
                ifc::set<qpc::retry_count>(ctx(), 7);
                ifc::set<qpc::rnr_retry>(ctx(), 6);
                ifc::set<qpc::log_sra_max>(ctx(), 3);
                ifc::set<ads::ack_timeout>(path(), 14);
            }
        }
    }
};

cmd_result run(env& e, transition_in& t) { return e.h.exec(t.in, 16); }

// Sets the port's MTU (PMTU admin_mtu, bytes).
void set_port_mtu(env& e, std::uint32_t bytes) {
    auto pmtu = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, ifc::pmtu_reg::size_bytes);
    ifc::set<ifc::access_register_in::register_id>(pmtu.data(), 0x5003);
    std::byte* reg = ifc::at<ifc::access_register_in::register_data>(pmtu.data());
    ifc::set<ifc::pmtu_reg::local_port>(reg, 1);
    ifc::set<ifc::pmtu_reg::admin_mtu>(reg, bytes);
    REQUIRE(e.h.exec(pmtu, 16 + ifc::pmtu_reg::size_bytes).status == cmd_status::OK);
}
cmd_result step(env& e, cmd_opcode op, std::uint32_t qpn, std::uint32_t st) {
    transition_in t(op, qpn, st, e.roce);
    return run(e, t);
}

constexpr cmd_opcode kToRts[] = {cmd_opcode::RST2INIT_QP, cmd_opcode::INIT2RTR_QP, cmd_opcode::RTR2RTS_QP};

// Moves a new QP from RST along the path to RTS (0..3 steps), or to ERR.
void drive(env& e, std::uint32_t qpn, std::uint32_t st, std::uint32_t target) {
    if (target == kErr) {
        REQUIRE(step(e, cmd_opcode::QP_2ERR, qpn, st).status == cmd_status::OK);
        return;
    }
    for (std::uint32_t i = 0; i < target; ++i) REQUIRE(step(e, kToRts[i], qpn, st).status == cmd_status::OK);
    REQUIRE(e.state(qpn) == target);
}

}  // namespace

TEST_CASE("an RC QP goes RST -> INIT -> RTR -> RTS, taking each step's attributes") {
    env e;
    const std::uint32_t qpn = e.create_qp(kRc);
    REQUIRE(step(e, cmd_opcode::RST2INIT_QP, qpn, kRc).status == cmd_status::OK);
    auto c = e.query(qpn);
    CHECK(ifc::get<qpc::state>(c.data()) == kInit);
    const std::byte* p = ifc::at<qpc::primary_address_path>(c.data());
    CHECK(ifc::get<ads::vhca_port_num>(p) == 1);
    CHECK(ifc::get<ads::pkey_index>(p) == 3);
    CHECK(ifc::get<qpc::rre>(c.data()) == 1);
    CHECK(ifc::get<qpc::rwe>(c.data()) == 1);
    CHECK(ifc::get<qpc::rae>(c.data()) == 0);

    REQUIRE(step(e, cmd_opcode::INIT2RTR_QP, qpn, kRc).status == cmd_status::OK);
    c = e.query(qpn);
    p = ifc::at<qpc::primary_address_path>(c.data());
    CHECK(ifc::get<qpc::state>(c.data()) == kRtr);
    CHECK(ifc::get<qpc::mtu>(c.data()) == 5);
    CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0x123);
    CHECK(ifc::get<qpc::next_rcv_psn>(c.data()) == 0x456);
    CHECK(ifc::get<qpc::log_rra_max>(c.data()) == 2);
    CHECK(ifc::get<qpc::min_rnr_nak>(c.data()) == 12);
    CHECK(ifc::get<ads::rlid>(p) == 7);
    // The path came with P_Key index 0 and port 0: those stay RST2INIT's.
    CHECK(ifc::get<ads::pkey_index>(p) == 3);
    CHECK(ifc::get<ads::vhca_port_num>(p) == 1);

    REQUIRE(step(e, cmd_opcode::RTR2RTS_QP, qpn, kRc).status == cmd_status::OK);
    c = e.query(qpn);
    p = ifc::at<qpc::primary_address_path>(c.data());
    CHECK(ifc::get<qpc::state>(c.data()) == kRts);
    CHECK(ifc::get<qpc::next_send_psn>(c.data()) == 0x789);
    CHECK(ifc::get<qpc::retry_count>(c.data()) == 7);
    CHECK(ifc::get<qpc::rnr_retry>(c.data()) == 6);
    CHECK(ifc::get<qpc::log_sra_max>(c.data()) == 3);
    CHECK(ifc::get<ads::ack_timeout>(p) == 14);
    CHECK(ifc::get<ads::rlid>(p) == 7);           // the address stays
    CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0x123);
    CHECK(ifc::get<qpc::mtu>(c.data()) == 5);     // RTR2RTS's context has mtu 0: not taken

    // RTS2RTS and INIT2INIT-style steps with nothing to change are fine.
    CHECK(step(e, cmd_opcode::RTS2RTS_QP, qpn, kRc).status == cmd_status::OK);
    CHECK(e.state(qpn) == kRts);
}

TEST_CASE("UC and UD QPs reach RTS with their transports' attributes only") {
    env e;
    const std::uint32_t uc = e.create_qp(kUc), ud = e.create_qp(kUd);
    drive(e, uc, kUc, kRts);
    auto c = e.query(uc);
    CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0x123);
    CHECK(ifc::get<qpc::rre>(c.data()) == 0);  // UC has no RDMA read
    CHECK(ifc::get<qpc::next_send_psn>(c.data()) == 0x789);

    // UD: a Q_Key at RST2INIT, nothing at INIT2RTR, a send PSN at RTR2RTS.
    drive(e, ud, kUd, kRts);
    c = e.query(ud);
    CHECK(ifc::get<qpc::q_key>(c.data()) == 0x11112222);
    CHECK(ifc::get<qpc::next_send_psn>(c.data()) == 0x789);
    CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0);

    // Connected-QP attributes in a UC or UD context are not taken.
    const std::uint32_t uc2 = e.create_qp(kUc), ud2 = e.create_qp(kUd);
    drive(e, uc2, kUc, kInit);
    drive(e, ud2, kUd, kInit);
    transition_in t(cmd_opcode::INIT2RTR_QP, uc2, kUc, false);
    ifc::set<qpc::log_rra_max>(t.ctx(), 7);  // beyond log_max_ra_res_qp: ignored for UC
    REQUIRE(run(e, t).status == cmd_status::OK);
    CHECK(ifc::get<qpc::log_rra_max>(e.query(uc2).data()) == 0);
    transition_in u(cmd_opcode::INIT2RTR_QP, ud2, kUd, false);
    ifc::set<qpc::remote_qpn>(u.ctx(), 0x999);
    ifc::set<qpc::mtu>(u.ctx(), 7);
    REQUIRE(run(e, u).status == cmd_status::OK);
    CHECK(ifc::get<qpc::remote_qpn>(e.query(ud2).data()) == 0);
}

TEST_CASE("QP0 and QP1 (Linux mlx5_ib's MAD QPs): created, and driven to RTS as datagram QPs") {
    // As mlx5_ib's create_kernel_qp and __mlx5_ib_modify_qp send them for IB_QPT_SMI and
    // its hardware GSI QP: qpc.st 0x7 and 0x8, a Q_Key at RST2INIT, no optional
    // parameters (Linux's opt_mask has none for these service types).
    env e;
    for (std::uint32_t st : {ifc::qpc_values::st_qp0, ifc::qpc_values::st_qp1}) {
        CAPTURE(st);
        const std::uint32_t qpn = e.create_qp(st);
        CHECK(qpn >= 0x100);  // the device's own number; the wire knows it as 0 or 1
        CHECK(ifc::get<qpc::st>(e.query(qpn).data()) == st);
        drive(e, qpn, kUd, kRts);
        const auto c = e.query(qpn);
        CHECK(ifc::get<qpc::q_key>(c.data()) == 0x11112222);
        CHECK(ifc::get<qpc::next_send_psn>(c.data()) == 0x789);
        // Connected-QP attributes are not theirs: INIT2RTR's remote QPN is not taken.
        CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0);
        // A second one of the same type is taken too (the first stays the wire's).
        const std::uint32_t again = e.create_qp(st);
        CHECK(again != qpn);
        CHECK(destroy_qp(e.h, again).status == cmd_status::OK);
        CHECK(destroy_qp(e.h, qpn).status == cmd_status::OK);
    }
}

TEST_CASE("a UMR QP (Linux mlx5_ib's REG_UMR): created, and driven to RTS with only a port, as Linux drives it") {
    // mlx5r_umr_qp_rst2rts: INIT with port 1, then RTR and RTS with no attribute at all
    // (no MTU, peer or path: a UMR QP reaches no wire).
    env e;
    const std::uint32_t st = ifc::qpc_values::st_reg_umr;
    // No PD: Linux's create_kernel_qp names none for it (latency_sensitive instead).
    auto in = e.qp_input(st);
    ifc::set<qpc::pd>(ifc::at<ifc::create_qp_in::qpc>(in.data()), 0);
    ifc::set<qpc::latency_sensitive>(ifc::at<ifc::create_qp_in::qpc>(in.data()), 1);
    const std::uint32_t qpn = e.create_qp(in);
    CHECK(ifc::get<qpc::st>(e.query(qpn).data()) == st);
    transition_in init(cmd_opcode::RST2INIT_QP, qpn, st, false);
    REQUIRE(run(e, init).status == cmd_status::OK);
    for (cmd_opcode op : {cmd_opcode::INIT2RTR_QP, cmd_opcode::RTR2RTS_QP}) {
        auto in = H::input<ifc::rst2init_qp_in>(op);
        ifc::set<ifc::qp_2rst_in::qpn>(in.data(), qpn);
        REQUIRE(e.h.exec(in, 16).status == cmd_status::OK);
    }
    CHECK(e.state(qpn) == kRts);
    CHECK(destroy_qp(e.h, qpn).status == cmd_status::OK);
}

TEST_CASE("every transition needs its source state (BAD_QP_STATE otherwise)") {
    env e;
    struct { cmd_opcode op; std::uint32_t from; } const all[] = {
        {cmd_opcode::RST2INIT_QP, kRst}, {cmd_opcode::INIT2INIT_QP, kInit}, {cmd_opcode::INIT2RTR_QP, kInit},
        {cmd_opcode::RTR2RTS_QP, kRtr},  {cmd_opcode::RTS2RTS_QP, kRts},    {cmd_opcode::SQERR2RTS_QP, 4},
        {cmd_opcode::SQD_RTS_QP, 5},
    };
    for (std::uint32_t st : {kRc, kUc, kUd}) {
        for (std::uint32_t s : {kRst, kInit, kRtr, kRts, kErr}) {
            const std::uint32_t qpn = e.create_qp(st);
            drive(e, qpn, st, s);
            for (const auto& t : all) {
                if (t.from == s) continue;
                INFO("st ", st, " state ", s, " ", hw::name(t.op));
                auto r = step(e, t.op, qpn, st);
                CHECK(r.status == cmd_status::BAD_QP_STATE);
                CHECK(static_cast<unsigned>(r.status) == 0x10);
                CHECK(r.synd() == cmd_syndrome::BAD_QP_STATE);
            }
            CHECK(e.state(qpn) == s);
        }
    }
}

TEST_CASE("2ERR and 2RST work from every state; 2RST forgets the transitions") {
    env e;
    for (std::uint32_t st : {kRc, kUc, kUd}) {
        for (std::uint32_t s : {kRst, kInit, kRtr, kRts, kErr}) {
            INFO("st ", st, " state ", s);
            const std::uint32_t a = e.create_qp(st), b = e.create_qp(st);
            drive(e, a, st, s);
            drive(e, b, st, s);
            REQUIRE(step(e, cmd_opcode::QP_2ERR, a, st).status == cmd_status::OK);
            CHECK(e.state(a) == kErr);
            REQUIRE(step(e, cmd_opcode::QP_2RST, b, st).status == cmd_status::OK);
            auto c = e.query(b);
            CHECK(ifc::get<qpc::state>(c.data()) == kRst);
            CHECK(ifc::get<qpc::next_send_psn>(c.data()) == 0);
            CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0);
            CHECK(ifc::get<qpc::q_key>(c.data()) == 0);
            CHECK(ifc::get<ads::vhca_port_num>(ifc::at<qpc::primary_address_path>(c.data())) == 0);
            CHECK(ifc::get<qpc::log_sq_size>(c.data()) == 4);  // what CREATE_QP set stays
            CHECK(ifc::get<qpc::cqn_rcv>(c.data()) == e.cq);
            // From RST again, all the way.
            drive(e, b, st, kRts);
        }
    }
}

TEST_CASE("DESTROY_QP works from every state and frees the QP's CQ") {
    env e;
    for (std::uint32_t s : {kRst, kInit, kRtr, kRts, kErr}) {
        const std::uint32_t cq = e.create_cq();
        const std::uint32_t qpn = e.create_qp(kRc, 0, cq);
        transition_in t(cmd_opcode::QP_2ERR, qpn, kRc, false);
        drive(e, qpn, kRc, s);
        check_status(destroy_cq(e.h, cq), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
        CHECK(destroy_qp(e.h, qpn).status == cmd_status::OK);
        CHECK(destroy_cq(e.h, cq).status == cmd_status::OK);
        check_status(run(e, t), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    }
}

TEST_CASE("a transition on another user's QP is refused") {
    env e;
    // A QP of uid 0 addressed with uid 4.
    const std::uint32_t qpn = e.create_qp(kRc);
    transition_in t(cmd_opcode::RST2INIT_QP, qpn, kRc, false);
    ifc::set<ifc::rst2init_qp_in::uid>(t.in.data(), 4);
    check_status(run(e, t), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    transition_in r(cmd_opcode::QP_2RST, qpn, kRc, false);
    ifc::set<ifc::qp_2rst_in::uid>(r.in.data(), 4);
    check_status(run(e, r), cmd_status::BAD_RESOURCE, cmd_syndrome::FOREIGN_RESOURCE);
    CHECK(e.state(qpn) == kRst);
}

TEST_CASE("missing required attributes: port, MTU, a RoCE path's GID") {
    env e;
    const std::uint32_t qpn = e.create_qp(kRc);
    transition_in t(cmd_opcode::RST2INIT_QP, qpn, kRc, false);
    ifc::set<ads::vhca_port_num>(t.path(), 0);
    check_status(run(e, t), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    ifc::set<ads::vhca_port_num>(t.path(), 2);  // a one-port device
    check_status(run(e, t), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    CHECK(e.state(qpn) == kRst);
    drive(e, qpn, kRc, kInit);

    transition_in m(cmd_opcode::INIT2RTR_QP, qpn, kRc, false);
    ifc::set<qpc::mtu>(m.ctx(), 0);
    check_status(run(e, m), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    // A failed transition changes nothing.
    auto c = e.query(qpn);
    CHECK(ifc::get<qpc::state>(c.data()) == kInit);
    CHECK(ifc::get<qpc::remote_qpn>(c.data()) == 0);
    // UD needs no address at all.
    const std::uint32_t ud = e.create_qp(kUd);
    transition_in u(cmd_opcode::RST2INIT_QP, ud, kUd, false);
    ifc::set<ads::vhca_port_num>(u.path(), 0);
    check_status(run(e, u), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    drive(e, ud, kUd, kRtr);
}

// A card takes INIT2RTR whatever the remote LID: a program may make its QPs ready while
// its port is still Down or Init, before the SM assigned the LIDs (the path's rlid 0).
TEST_CASE("InfiniBand: INIT2RTR with remote LID 0 (the port not yet swept) is taken") {
    env e;
    const std::uint32_t qpn = e.create_qp(kRc);
    drive(e, qpn, kRc, kInit);
    transition_in l(cmd_opcode::INIT2RTR_QP, qpn, kRc, false);
    ifc::set<ads::rlid>(l.path(), 0);
    REQUIRE(run(e, l).status == cmd_status::OK);
    auto c = e.query(qpn);
    CHECK(ifc::get<qpc::state>(c.data()) == kRtr);
    CHECK(ifc::get<ads::rlid>(ifc::at<qpc::primary_address_path>(c.data())) == 0);
}

TEST_CASE("RoCE: INIT2RTR addresses the peer by GID") {
    env e(ethernet());
    const std::uint32_t qpn = e.create_qp(kRc);
    drive(e, qpn, kRc, kInit);
    transition_in t(cmd_opcode::INIT2RTR_QP, qpn, kRc, true);
    ifc::set<ads::rgid_rip>(t.path(), 15, 0);
    ifc::set<ads::rlid>(t.path(), 7);  // a LID does not address a RoCE peer
    check_status(run(e, t), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    ifc::set<ads::rgid_rip>(t.path(), 10, 0xff);
    ifc::set<ads::rgid_rip>(t.path(), 11, 0xff);
    ifc::set<ads::rgid_rip>(t.path(), 12, 10);
    ifc::set<ads::src_addr_index>(t.path(), 32);  // 32 GIDs: 0..31
    check_status(run(e, t), cmd_status::BAD_INDEX, cmd_syndrome::BAD_PARAMETER);
    ifc::set<ads::src_addr_index>(t.path(), 31);
    REQUIRE(run(e, t).status == cmd_status::OK);
    auto c = e.query(qpn);
    CHECK(ifc::get<ads::rgid_rip>(ifc::at<qpc::primary_address_path>(c.data()), 12) == 10);
    CHECK(ifc::get<qpc::mtu>(c.data()) == 5);  // 4096 fits a 9216-byte frame
}

// Force loopback (ads.fl; the model offers roce_cap.fl_rc_qp_when_roce_enabled): Linux's
// mlx5_vdpa (alloc_inout) and vfio/mlx5 (mlx5vf_activate_qp) and DPDK's mlx5
// (mlx5_devx_cmd_modify_qp_state) move their loopback RC QPs to RTR with fl set and no
// remote GID; vfio/mlx5 asks a 4096-byte path MTU on whatever MTU the function's port
// has. Cards take both: the packets never reach the wire.
TEST_CASE("RoCE: INIT2RTR with force loopback needs no remote GID, and the port's MTU does not bound it") {
    env e(ethernet());
    set_port_mtu(e, 1500);  // RoCE paths of 1024 bytes at most on the wire
    const std::uint32_t qpn = e.create_qp(kRc);
    drive(e, qpn, kRc, kInit);
    transition_in t(cmd_opcode::INIT2RTR_QP, qpn, kRc, true);
    std::memset(t.path(), 0, ads::size_bytes);  // mlx5_vdpa's path: fl and nothing else
    ifc::set<ads::fl>(t.path(), 1);
    REQUIRE(run(e, t).status == cmd_status::OK);
    auto c = e.query(qpn);
    const std::byte* path = ifc::at<qpc::primary_address_path>(c.data());
    CHECK(ifc::get<qpc::state>(c.data()) == kRtr);
    CHECK(ifc::get<ads::fl>(path) == 1);
    CHECK(ifc::get<ads::vhca_port_num>(path) == 1);  // RST2INIT's
    CHECK(ifc::get<qpc::mtu>(c.data()) == 5);
    REQUIRE(step(e, cmd_opcode::RTR2RTS_QP, qpn, kRc).status == cmd_status::OK);

    // Without fl, the same path still needs a peer's GID, and the port bounds the MTU.
    const std::uint32_t other = e.create_qp(kRc);
    drive(e, other, kRc, kInit);
    transition_in n(cmd_opcode::INIT2RTR_QP, other, kRc, true);
    std::memset(n.path(), 0, ads::size_bytes);
    ifc::set<qpc::mtu>(n.ctx(), 3);
    check_status(run(e, n), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    transition_in w(cmd_opcode::INIT2RTR_QP, other, kRc, true);
    check_status(run(e, w), cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
    // fl does not make a path MTU that does not exist.
    transition_in f(cmd_opcode::INIT2RTR_QP, other, kRc, true);
    ifc::set<ads::fl>(f.path(), 1);
    ifc::set<qpc::mtu>(f.ctx(), 6);
    check_status(run(e, f), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    ifc::set<qpc::mtu>(f.ctx(), 0);
    check_status(run(e, f), cmd_status::BAD_PARAM, cmd_syndrome::MISSING_ATTRIBUTE);
    CHECK(e.state(other) == kInit);
}

TEST_CASE("transition values are checked against the port and the capabilities") {
    env e;
    const std::uint32_t qpn = e.create_qp(kRc);
    auto expect = [&](cmd_opcode op, auto set, cmd_status st, cmd_syndrome syn) {
        transition_in t(op, qpn, kRc, false);
        set(t);
        check_status(run(e, t), st, syn);
    };
    using T = transition_in;
    expect(cmd_opcode::RST2INIT_QP, [](T& t) { ifc::set<ads::pkey_index>(t.path(), 128); }, cmd_status::BAD_INDEX,
           cmd_syndrome::BAD_PARAMETER);
    expect(cmd_opcode::RST2INIT_QP, [](T& t) { ifc::set<qpc::counter_set_id>(t.ctx(), 5); },
           cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    expect(cmd_opcode::RST2INIT_QP, [](T& t) { ifc::set<qpc::atomic_mode>(t.ctx(), 9); }, cmd_status::BAD_PARAM,
           cmd_syndrome::BAD_PARAMETER);
    drive(e, qpn, kRc, kInit);
    expect(cmd_opcode::INIT2RTR_QP, [](T& t) { ifc::set<qpc::mtu>(t.ctx(), 6); }, cmd_status::BAD_PARAM,
           cmd_syndrome::BAD_PARAMETER);
    expect(cmd_opcode::INIT2RTR_QP, [](T& t) { ifc::set<qpc::log_msg_max>(t.ctx(), 31); }, cmd_status::BAD_PARAM,
           cmd_syndrome::LOG_SIZE_TOO_BIG);
    expect(cmd_opcode::INIT2RTR_QP, [](T& t) { ifc::set<qpc::log_rra_max>(t.ctx(), 5); }, cmd_status::BAD_PARAM,
           cmd_syndrome::LOG_SIZE_TOO_BIG);
    expect(
        cmd_opcode::INIT2RTR_QP,
        [](T& t) {
            ifc::set<ads::grh>(t.path(), 1);
            ifc::set<ads::src_addr_index>(t.path(), 40);
        },
        cmd_status::BAD_INDEX, cmd_syndrome::BAD_PARAMETER);

    // The port's MTU set to 1024 bytes (PMTU): a 2048-byte path MTU exceeds it.
    auto pmtu = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, 0, ifc::pmtu_reg::size_bytes);
    ifc::set<ifc::access_register_in::register_id>(pmtu.data(), 0x5003);
    std::byte* reg = ifc::at<ifc::access_register_in::register_data>(pmtu.data());
    ifc::set<ifc::pmtu_reg::local_port>(reg, 1);
    ifc::set<ifc::pmtu_reg::admin_mtu>(reg, 1024);
    REQUIRE(e.h.exec(pmtu, 16 + ifc::pmtu_reg::size_bytes).status == cmd_status::OK);
    expect(cmd_opcode::INIT2RTR_QP, [](T& t) { ifc::set<qpc::mtu>(t.ctx(), 4); }, cmd_status::BAD_PARAM,
           cmd_syndrome::EXCEEDS_LIMIT);
    // A UD QP may ask for more (Linux always asks for 4096), not for an MTU that does not
    // exist.
    const std::uint32_t ud = e.create_qp(kUd);
    transition_in u(cmd_opcode::RST2INIT_QP, ud, kUd, false);
    ifc::set<qpc::mtu>(u.ctx(), 6);
    check_status(run(e, u), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    ifc::set<qpc::mtu>(u.ctx(), 5);
    REQUIRE(run(e, u).status == cmd_status::OK);
    CHECK(ifc::get<qpc::mtu>(e.query(ud).data()) == 5);
    transition_in ok3(cmd_opcode::INIT2RTR_QP, qpn, kRc, false);
    ifc::set<qpc::mtu>(ok3.ctx(), 3);
    REQUIRE(run(e, ok3).status == cmd_status::OK);
    expect(cmd_opcode::RTR2RTS_QP, [](T& t) { ifc::set<qpc::log_sra_max>(t.ctx(), 5); }, cmd_status::BAD_PARAM,
           cmd_syndrome::LOG_SIZE_TOO_BIG);
    CHECK(e.state(qpn) == kRtr);
}

TEST_CASE("optional attributes: taken with their bit, refused where the transition has none") {
    env e;
    const std::uint32_t rc = e.create_qp(kRc), ud = e.create_qp(kUd);
    // RST2INIT has no optional parameters at all.
    transition_in t0(cmd_opcode::RST2INIT_QP, rc, kRc, false);
    t0.mask(opt::PKEY_INDEX);
    check_status(run(e, t0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    drive(e, rc, kRc, kInit);
    drive(e, ud, kUd, kInit);

    // INIT2INIT: a new P_Key index only with its bit.
    transition_in a(cmd_opcode::INIT2INIT_QP, rc, kRc, false);
    ifc::set<ads::pkey_index>(a.path(), 9);
    ifc::set<qpc::rre>(a.ctx(), 0);
    REQUIRE(run(e, a).status == cmd_status::OK);
    auto c = e.query(rc);
    CHECK(ifc::get<ads::pkey_index>(ifc::at<qpc::primary_address_path>(c.data())) == 3);
    CHECK(ifc::get<qpc::rre>(c.data()) == 1);
    a.mask(opt::PKEY_INDEX | opt::RRE | opt::PRI_PORT);
    ifc::set<ads::vhca_port_num>(a.path(), 1);
    REQUIRE(run(e, a).status == cmd_status::OK);
    c = e.query(rc);
    CHECK(ifc::get<ads::pkey_index>(ifc::at<qpc::primary_address_path>(c.data())) == 9);
    CHECK(ifc::get<qpc::rre>(c.data()) == 0);
    ifc::set<ads::pkey_index>(a.path(), 200);
    check_status(run(e, a), cmd_status::BAD_INDEX, cmd_syndrome::BAD_PARAMETER);

    // Per transport: a UD QP has no RDMA access rights; an RC QP no Q_Key.
    transition_in b(cmd_opcode::INIT2INIT_QP, ud, kUd, false);
    b.mask(opt::RRE);
    check_status(run(e, b), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    b.mask(opt::Q_KEY);
    ifc::set<qpc::q_key>(b.ctx(), 0x77);
    REQUIRE(run(e, b).status == cmd_status::OK);
    CHECK(ifc::get<qpc::q_key>(e.query(ud).data()) == 0x77);

    // No automatic path migration here: no alternate path, and PM state stays MIGRATED.
    transition_in r(cmd_opcode::INIT2RTR_QP, rc, kRc, false);
    r.mask(opt::ALT_ADDR_PATH);
    check_status(run(e, r), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    r.mask(1u << 11);  // no such parameter
    check_status(run(e, r), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    r.mask(opt::RNR_TIMEOUT);  // required in INIT2RTR, optional only later
    check_status(run(e, r), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    r.mask(opt::RWE);
    REQUIRE(run(e, r).status == cmd_status::OK);

    transition_in s(cmd_opcode::RTR2RTS_QP, rc, kRc, false);
    s.mask(opt::RNR_TIMEOUT | opt::PM_STATE);
    ifc::set<qpc::min_rnr_nak>(s.ctx(), 20);
    ifc::set<qpc::pm_state>(s.ctx(), 0);  // ARMED
    check_status(run(e, s), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    ifc::set<qpc::pm_state>(s.ctx(), 3);
    REQUIRE(run(e, s).status == cmd_status::OK);
    CHECK(ifc::get<qpc::min_rnr_nak>(e.query(rc).data()) == 20);

    transition_in x(cmd_opcode::RTS2RTS_QP, rc, kRc, false);
    x.mask(opt::Q_KEY);
    check_status(run(e, x), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    x.mask(opt::CQN_RCV);  // UD only
    check_status(run(e, x), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    CHECK(e.state(rc) == kRts);
}

TEST_CASE("UD RTS2RTS moves the receive CQ and the SRQ, and their use counts") {
    env e;
    const std::uint32_t cq2 = e.create_cq(), cq3 = e.create_cq();
    const std::uint32_t srq1 = e.create_srq(), srq2 = e.create_srq();
    REQUIRE(srq2 != 0);
    const std::uint32_t ud = e.create_qp(kUd, srq1), plain = e.create_qp(kUd);
    drive(e, ud, kUd, kRts);
    drive(e, plain, kUd, kRts);
    transition_in t(cmd_opcode::RTS2RTS_QP, ud, kUd, false);
    t.mask(opt::CQN_RCV | opt::SRQN);
    ifc::set<qpc::cqn_rcv>(t.ctx(), cq3 + 100);
    ifc::set<qpc::srqn_rmpn_xrqn>(t.ctx(), srq2);
    check_status(run(e, t), cmd_status::BAD_PARAM, cmd_syndrome::BAD_CQ);
    ifc::set<qpc::cqn_rcv>(t.ctx(), cq2);
    ifc::set<qpc::srqn_rmpn_xrqn>(t.ctx(), srq2 + 100);
    check_status(run(e, t), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    ifc::set<qpc::srqn_rmpn_xrqn>(t.ctx(), srq2);
    REQUIRE(run(e, t).status == cmd_status::OK);
    auto c = e.query(ud);
    CHECK(ifc::get<qpc::cqn_rcv>(c.data()) == cq2);
    CHECK(ifc::get<qpc::srqn_rmpn_xrqn>(c.data()) == srq2);
    check_status(destroy_cq(e.h, cq2), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    check_status(destroy_srq(e.h, srq2), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    CHECK(destroy_srq(e.h, srq1).status == cmd_status::OK);
    CHECK(destroy_cq(e.h, cq3).status == cmd_status::OK);

    // A QP with its own RQ has no SRQ to move to.
    transition_in p(cmd_opcode::RTS2RTS_QP, plain, kUd, false);
    p.mask(opt::SRQN);
    ifc::set<qpc::srqn_rmpn_xrqn>(p.ctx(), srq2);
    check_status(run(e, p), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
}

TEST_CASE("QUERY_QP reports the PSNs the transport has reached, not those of the last transition") {
    env e;
    auto& buf = e.h.alloc(2 * 4096);
    const auto r = e.h.exec(create_qp_in({.st = kUd, .pd = e.pd, .uar = e.uar, .cqn = e.cq, .buf = buf.iova(),
                                          .npas = 1, .dbr = buf.iova() + 4096}), 16);
    REQUIRE(r.status == cmd_status::OK);
    const std::uint32_t qpn = qpn_of(r);
    drive(e, qpn, kUd, kRts);
    // Linux's query_qp_attr: sq_psn = next_send_psn (RTR2RTS gave 0x789).
    auto psn = [&] { return CXV_LINUX_GET(qpc, e.query(qpn).data(), next_send_psn); };
    REQUIRE(psn() == 0x789);

    // One UD SEND without data to a LID no port has (the fabric drops it): the send queue
    // follows the receive queue's 16 WQEs of 64 bytes.
    std::byte* wqe = buf.data() + 16 * 64;
    auto* ctrl = reinterpret_cast<hw::wqe_ctrl_seg*>(wqe);
    hw::set_ctrl_seg(*ctrl, 0, hw::wqe_opcode::SEND, 0, qpn, 4, 0);
    auto* av = reinterpret_cast<hw::wqe_datagram_seg*>(wqe + sizeof(hw::wqe_ctrl_seg));
    av->av.qkey = hw::be32::from(0x11112222);
    av->av.dqp_dct = hw::be32::from(0x999);
    av->av.rlid = hw::be16::from(0x77);
    auto* dbr = reinterpret_cast<hw::wq_doorbell_record*>(buf.data() + 4096);
    dbr->snd_counter = hw::be32::from(1);
    std::atomic_thread_fence(std::memory_order_release);
    std::uint64_t first8;
    std::memcpy(&first8, wqe, 8);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(e.h.bar() + e.uar * 4096 + 0x800))
        .store(first8, std::memory_order_release);

    std::uint32_t now = 0;
    for (int i = 0; i < 5000 && (now = psn()) == 0x789; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(now == 0x78a);
    CHECK(e.state(qpn) == kRts);
}
