// The checks a forwarded PRM command passes (daemon/owner.h), on their own: a client
// that owns a little of everything, and commands built with the PRM layouts the driver
// uses. Each case is a way around the books the review of issue 20 found, refused.
#include <cerrno>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "daemon/owner.h"
#include "driver/cmd/cmd_queue.h"
#include "hw/ifc.h"

namespace d = cxv::daemon;
namespace ifc = cxv::hw::ifc;
using cxv::hw::cmd_opcode;

namespace {

constexpr std::uint64_t kIova = 1 << 20, kLen = 1 << 20;  // the client's writable mapping
constexpr std::uint64_t kRoIova = 4 << 20;                 // and a read-only one (1 MiB)
constexpr std::uint32_t kEqn = 8;

// UAR 5, PD 3, CQs 7 and 8, QP 7 (send and receive CQ 7) on the writable mapping.
d::owned client() {
    d::owned o;
    o.maps[kIova].length = kLen;
    o.maps[kIova].device_writes = true;
    o.maps[kRoIova].length = kLen;
    o.uars = {5};
    o.pds = {3};
    o.cqs = {7, 8};
    o.qps = {7};
    o.qp_info[7] = d::owned::qp_uses{3, 5, {7}, {kIova}, 7, 7, 0};
    return o;
}

cxv::result<d::command_effect> check(const std::vector<std::byte>& in, const d::owned& o, std::uint32_t out = 256) {
    return d::check_command(in, out, o, d::device_facts{kEqn}, d::quotas{});
}

int err(const cxv::result<d::command_effect>& r) { return r ? 0 : r.error().code; }

// CREATE_MKEY (MTT, lr) of `len` bytes from `start` over the given raw MTT entries.
std::vector<std::byte> mkey(const std::vector<std::uint64_t>& mtt, std::uint64_t start, std::uint64_t len,
                            bool lw = false) {
    const unsigned octwords = static_cast<unsigned>((mtt.size() + 1) / 2);
    auto in = cxv::driver::command<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY, 0, octwords * 16);
    std::byte* mkc = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(in.data());
    ifc::set<ifc::mkc::access_mode_1_0>(mkc, 1);
    ifc::set<ifc::mkc::lr>(mkc, 1);
    ifc::set<ifc::mkc::lw>(mkc, lw ? 1 : 0);
    ifc::set<ifc::mkc::qpn>(mkc, 0xffffff);
    ifc::set<ifc::mkc::pd>(mkc, 3);
    ifc::set<ifc::mkc::start_addr>(mkc, start);
    ifc::set<ifc::mkc::len>(mkc, len);
    ifc::set<ifc::mkc::translations_octword_size>(mkc, octwords);
    ifc::set<ifc::mkc::log_page_size>(mkc, 12);
    ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(in.data(), octwords);
    for (std::size_t i = 0; i < octwords * 2; ++i) {
        const std::uint64_t e = mtt[std::min(i, mtt.size() - 1)];
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i, static_cast<std::uint32_t>(e >> 32));
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(in.data(), 2 * i + 1, static_cast<std::uint32_t>(e));
    }
    return in;
}

std::vector<std::byte> create_cq(std::uint64_t ring, std::uint64_t dbr, std::uint32_t eqn = kEqn) {
    auto in = cxv::driver::command<ifc::create_cq_in>(cmd_opcode::CREATE_CQ, 0, 8);
    std::byte* cqc = ifc::at<ifc::create_cq_in::cq_context>(in.data());
    ifc::set<ifc::cqc::log_cq_size>(cqc, 6);
    ifc::set<ifc::cqc::uar_page>(cqc, 5);
    ifc::set<ifc::cqc::c_eqn_or_apu_element>(cqc, eqn);
    ifc::set<ifc::cqc::dbr_addr>(cqc, dbr);
    ifc::set<ifc::create_cq_in::pas>(in.data(), 0, ring);
    return in;
}

// CREATE_QP (RC): RQ of 256 bytes and SQ of 1 KiB on the page at `wq`.
std::vector<std::byte> create_qp(std::uint64_t wq, std::uint64_t dbr, std::uint32_t snd = 7, std::uint32_t rcv = 8) {
    auto in = cxv::driver::command<ifc::create_qp_in>(cmd_opcode::CREATE_QP, 0, 8);
    std::byte* qpc = ifc::at<ifc::create_qp_in::qpc>(in.data());
    ifc::set<ifc::qpc::st>(qpc, ifc::qpc_values::st_rc);
    ifc::set<ifc::qpc::pd>(qpc, 3);
    ifc::set<ifc::qpc::uar_page>(qpc, 5);
    ifc::set<ifc::qpc::log_sq_size>(qpc, 4);
    ifc::set<ifc::qpc::log_rq_size>(qpc, 4);
    ifc::set<ifc::qpc::cqn_snd>(qpc, snd);
    ifc::set<ifc::qpc::cqn_rcv>(qpc, rcv);
    ifc::set<ifc::qpc::dbr_addr>(qpc, dbr);
    ifc::set<ifc::create_qp_in::pas>(in.data(), 0, wq);
    return in;
}

std::vector<std::byte> rts2rts(std::uint32_t qpn, std::uint32_t mask, std::uint32_t rcv) {
    auto in = cxv::driver::command<ifc::rts2rts_qp_in>(cmd_opcode::RTS2RTS_QP);
    ifc::set<ifc::rts2rts_qp_in::qpn>(in.data(), qpn);
    ifc::set<ifc::rts2rts_qp_in::opt_param_mask>(in.data(), mask);
    ifc::set<ifc::qpc::cqn_rcv>(ifc::at<ifc::rts2rts_qp_in::qpc>(in.data()), rcv);
    return in;
}

std::vector<std::byte> destroy_cq(std::uint32_t cqn) {
    auto in = cxv::driver::command<ifc::destroy_cq_in>(cmd_opcode::DESTROY_CQ);
    ifc::set<ifc::destroy_cq_in::cqn>(in.data(), cqn);
    return in;
}

}  // namespace

TEST_CASE("MTT entries: only bits 1:0 are flags; an address must be a page of the client's memory (A)") {
    const auto o = client();
    const std::uint64_t last = kIova + kLen - 4096;
    CHECK(err(check(mkey({last}, 0, 4096), o)) == 0);
    CHECK(err(check(mkey({last | 3}, 0, 4096), o)) == 0);  // read/write enables
    // Bits 11:2 set: not a page address. Masking them off (as before the fix) made this
    // the last page, and the device adds them to the address it reaches.
    CHECK(err(check(mkey({last | 0xF00}, 0, 4096), o)) == EPERM);
    CHECK(err(check(mkey({last | 0x4}, 0, 4096), o)) == EPERM);
    CHECK(err(check(mkey({kIova + kLen}, 0, 4096), o)) == EPERM);  // past the mapping
}

TEST_CASE("a key's length is checked against its translations without wrapping (B)") {
    const auto o = client();
    CHECK(err(check(mkey({kIova, kIova + 4096}, 0x1000, 8192), o)) == 0);
    CHECK(err(check(mkey({kIova, kIova + 4096}, 0x1001, 8192), o)) == EPERM);  // one byte into a third page
    CHECK(err(check(mkey({kIova, kIova + 4096}, 0x1001, 8191), o)) == 0);
    // len + offset wraps to 0: passed the old check.
    CHECK(err(check(mkey({kIova}, 1, ~std::uint64_t{0}), o)) == EPERM);
    CHECK(err(check(mkey({kIova}, 0xfff, ~std::uint64_t{0} - 0xffe), o)) == EPERM);
}

TEST_CASE("a transition moving the receive CQ (CQN_RCV) is checked and kept in the books (C)") {
    auto o = client();
    namespace opt = ifc::qp_optpar;
    CHECK(err(check(rts2rts(7, opt::CQN_RCV, 99), o)) == EPERM);  // not the client's CQ
    CHECK(err(check(rts2rts(7, opt::CQN_RCV, 0), o)) == EPERM);   // 0 is not "unset" here
    CHECK(err(check(rts2rts(7, 0, 8), o)) == EPERM);              // a receive CQ other than the QP's, no CQN_RCV
    CHECK(err(check(rts2rts(7, 0, 7), o)) == 0);
    CHECK(err(check(rts2rts(7, 0, 0), o)) == 0);
    CHECK(err(check(destroy_cq(8), o)) == 0);  // not used by the QP yet
    auto e = check(rts2rts(7, opt::CQN_RCV, 8), o);
    REQUIRE(e);
    d::apply(*e, std::vector<std::byte>(256), o);
    CHECK(o.qp_info[7].cqn_rcv == 8);
    CHECK(err(check(destroy_cq(8), o)) == EBUSY);  // the QP receives on it now
    CHECK(err(check(destroy_cq(7), o)) == EBUSY);  // and still sends on 7
    // A transition naming a PD, UAR or send CQ other than the QP's is refused.
    auto in = rts2rts(7, 0, 0);
    std::byte* qpc = ifc::at<ifc::rts2rts_qp_in::qpc>(in.data());
    ifc::set<ifc::qpc::cqn_snd>(qpc, 8);
    CHECK(err(check(in, o)) == EPERM);
    ifc::set<ifc::qpc::cqn_snd>(qpc, 0);
    ifc::set<ifc::qpc::pd>(qpc, 4);
    CHECK(err(check(in, o)) == EPERM);
    ifc::set<ifc::qpc::pd>(qpc, 3);
    CHECK(err(check(in, o)) == 0);
    CHECK(err(check(rts2rts(7, opt::SRQN, 0), o)) == EPERM);
    CHECK(err(check(rts2rts(7, opt::COUNTER_SET_ID, 0), o)) == EPERM);
}

TEST_CASE("QP context fields a client has no use for are refused; uid is checked in every QP command and QUERY_CQ (D, F)") {
    const auto o = client();
    const std::uint64_t wq = kIova + 8192, dbr = kIova + 4096;
    REQUIRE(err(check(create_qp(wq, dbr), o)) == 0);
    auto with = [&](auto field, std::uint32_t v) {
        auto in = create_qp(wq, dbr);
        ifc::set<decltype(field)>(ifc::at<ifc::create_qp_in::qpc>(in.data()), v);
        return err(check(in, o));
    };
    CHECK(with(ifc::qpc::deth_sqpn{}, 1) == EPERM);
    CHECK(with(ifc::qpc::cd_master{}, 1) == EPERM);
    CHECK(with(ifc::qpc::cd_slave_send{}, 1) == EPERM);
    CHECK(with(ifc::qpc::cd_slave_receive{}, 1) == EPERM);
    CHECK(with(ifc::qpc::q_key{}, 0x80010000) == EPERM);  // privileged Q_Key
    CHECK(with(ifc::qpc::q_key{}, 0x00010000) == 0);
    CHECK(with(ifc::qpc::ulp_stateless_offload_mode{}, 1) == EPERM);
    auto modify = rts2rts(7, 0, 0);
    ifc::set<ifc::qpc::deth_sqpn>(ifc::at<ifc::rts2rts_qp_in::qpc>(modify.data()), 1);
    CHECK(err(check(modify, o)) == EPERM);
    for (const auto op : {cmd_opcode::DESTROY_QP, cmd_opcode::QP_2ERR, cmd_opcode::QP_2RST, cmd_opcode::QUERY_QP}) {
        auto in = cxv::driver::command<ifc::destroy_qp_in>(op);
        ifc::set<ifc::destroy_qp_in::qpn>(in.data(), 7);
        CHECK(err(check(in, o)) == 0);
        ifc::set<ifc::destroy_qp_in::uid>(in.data(), 1);
        CHECK(err(check(in, o)) == EPERM);
    }
    // And in QUERY_CQ's (the daemon fuzz regression found it let through once it put the
    // client's numbers where they go).
    auto query_cq = cxv::driver::command<ifc::query_cq_in>(cmd_opcode::QUERY_CQ);
    ifc::set<ifc::query_cq_in::cqn>(query_cq.data(), 7);
    CHECK(err(check(query_cq, o)) == 0);
    ifc::set<ifc::destroy_cq_in::uid>(query_cq.data(), 1);
    CHECK(err(check(query_cq, o)) == EPERM);
}

TEST_CASE("memory the device writes must be mapped device-writable (E)") {
    const auto o = client();
    CHECK(err(check(create_cq(kIova, kIova + 4096), o)) == 0);
    CHECK(err(check(create_cq(kRoIova, kIova + 4096), o)) == EPERM);  // CQEs into read-only memory
    CHECK(err(check(create_cq(kIova, kRoIova), o)) == EPERM);         // its doorbell record
    CHECK(err(check(create_cq(kIova, kIova + 4096, kEqn + 1), o)) == EPERM);  // not the completion EQ
    CHECK(err(check(create_qp(kIova + 8192, kIova + 4096), o)) == 0);
    CHECK(err(check(create_qp(kRoIova, kIova + 4096), o)) == EPERM);  // the RQ's page
    CHECK(err(check(create_qp(kIova + 8192, kRoIova), o)) == EPERM);  // the doorbell record
    CHECK(err(check(mkey({kRoIova}, 0, 4096), o)) == 0);              // a read-only key may
    CHECK(err(check(mkey({kRoIova}, 0, 4096, true), o)) == EPERM);    // a writable key may not
}

TEST_CASE("cleanup: each object's destroy with the mappings it uses; a stuck QP goes to RST, then ERR (J)") {
    auto o = client();
    o.cq_maps[7] = {kIova};
    const auto steps = d::teardown_commands(o);
    REQUIRE(steps.size() == 4);  // QP 7, CQs 7 and 8, PD 3
    CHECK(steps[0].obj == d::command_effect::object::qp);
    CHECK(steps[0].maps == std::set<std::uint64_t>{kIova});
    CHECK(steps[1].obj == d::command_effect::object::cq);
    CHECK(steps[1].maps == std::set<std::uint64_t>{kIova});
    CHECK(steps[3].obj == d::command_effect::object::pd);
    const auto moves = d::qp_reset_commands(7);
    REQUIRE(moves.size() == 2);
    CHECK(ifc::get<ifc::cmd_in::opcode>(moves[0].data()) == static_cast<unsigned>(cmd_opcode::QP_2RST));
    CHECK(ifc::get<ifc::cmd_in::opcode>(moves[1].data()) == static_cast<unsigned>(cmd_opcode::QP_2ERR));
    CHECK(ifc::get<ifc::qp_2rst_in::qpn>(moves[0].data()) == 7);
}

namespace {

// CREATE_RMP of 16 64-byte strides (1 KiB) on the page at `ring`, on PD `pd`.
std::vector<std::byte> create_rmp(std::uint64_t ring, std::uint64_t dbr, std::uint32_t pd = 3) {
    auto in = cxv::driver::command<ifc::create_rmp_in>(cmd_opcode::CREATE_RMP, 0, 8);
    std::byte* rmpc = ifc::at<ifc::create_rmp_in::ctx>(in.data());
    ifc::set<ifc::rmpc::state>(rmpc, ifc::rmpc_values::state_rdy);
    std::byte* wq = ifc::at<ifc::rmpc::wq>(rmpc);
    ifc::set<ifc::wq::log_wq_sz>(wq, 4);
    ifc::set<ifc::wq::log_wq_stride>(wq, 6);
    ifc::set<ifc::wq::pd>(wq, pd);
    ifc::set<ifc::wq::dbr_addr>(wq, dbr);
    ifc::set<ifc::wq::pas>(wq, 0, ring);
    return in;
}

// The same with a field of its wq changed.
template <typename Field>
std::vector<std::byte> create_rmp_with(std::uint64_t ring, std::uint64_t dbr, std::uint64_t v) {
    auto in = create_rmp(ring, dbr);
    ifc::set<Field>(ifc::at<ifc::rmpc::wq>(ifc::at<ifc::create_rmp_in::ctx>(in.data())), v);
    return in;
}

template <typename In, typename Field>
std::vector<std::byte> by_number(cmd_opcode op, std::uint32_t n, std::uint16_t op_mod = 0) {
    auto in = cxv::driver::command<In>(op, op_mod);
    ifc::set<Field>(in.data(), n);
    return in;
}

std::vector<std::byte> on_srq(std::vector<std::byte> qp, std::uint32_t srqn) {
    std::byte* qpc = ifc::at<ifc::create_qp_in::qpc>(qp.data());
    ifc::set<ifc::qpc::rq_type>(qpc, ifc::qpc_values::rq_srq);
    ifc::set<ifc::qpc::srqn_rmpn_xrqn>(qpc, srqn);
    return qp;
}

}  // namespace

TEST_CASE("SRQs (RMPs): created on the client's PD and memory; QPs only on the client's SRQ; kept in the books") {
    auto o = client();
    const std::uint64_t ring = kIova + 3 * 4096, dbr = kIova + 64;
    auto e = check(create_rmp(ring, dbr), o);
    REQUIRE_MESSAGE(e, e.error().message);
    CHECK(e->obj == d::command_effect::object::srq);
    CHECK(e->maps == std::set<std::uint64_t>{kIova});
    CHECK(err(check(create_rmp(ring, dbr, 4), o)) == EPERM);        // another's PD
    CHECK(err(check(create_rmp(kRoIova, dbr), o)) == EPERM);        // read-only ring
    CHECK(err(check(create_rmp(ring, kRoIova), o)) == EPERM);       // read-only doorbell record
    CHECK(err(check(create_rmp(16 << 20, dbr), o)) == EPERM);       // not the client's memory
    CHECK(err(check(create_rmp_with<ifc::wq::log_wq_sz>(ring, dbr, 9), o)) == EBADMSG);  // 32 KiB on one page
    CHECK(err(check(create_rmp_with<ifc::wq::wq_umem_valid>(ring, dbr, 1), o)) == EPERM);
    CHECK(err(check(create_rmp_with<ifc::wq::wq_type>(ring, dbr, ifc::wq_values::type_cyclic), o)) == EINVAL);
    auto not_ready = create_rmp(ring, dbr);
    ifc::set<ifc::rmpc::state>(ifc::at<ifc::create_rmp_in::ctx>(not_ready.data()), 0);
    CHECK(err(check(not_ready, o)) == EINVAL);
    d::quotas none;
    none.srqs = 0;
    CHECK(err(d::check_command(create_rmp(ring, dbr), 256, o, d::device_facts{kEqn}, none)) == EDQUOT);

    // The firmware answered RMP 0x21: in the books, with its mapping in use.
    std::vector<std::byte> out(ifc::create_rmp_out::size_bytes);
    ifc::set<ifc::create_rmp_out::rmpn>(out.data(), 0x21);
    d::apply(*e, out, o);
    CHECK(o.srqs.contains(0x21));
    CHECK(o.maps.at(kIova).users == 1);
    const std::uint64_t wq = kIova + 8192, qdbr = kIova + 4096;
    CHECK(err(check(on_srq(create_qp(wq, qdbr), 0x21), o)) == 0);
    CHECK(err(check(on_srq(create_qp(wq, qdbr), 0x22), o)) == EPERM);  // not the client's SRQ
    auto sneaky = create_qp(wq, qdbr);  // a regular RQ naming an SRQ
    ifc::set<ifc::qpc::srqn_rmpn_xrqn>(ifc::at<ifc::create_qp_in::qpc>(sneaky.data()), 0x21);
    CHECK(err(check(sneaky, o)) == EPERM);
    CHECK(err(check(rts2rts(7, ifc::qp_optpar::SRQN, 0), o)) == EPERM);
    auto qe = check(on_srq(create_qp(wq, qdbr), 0x21), o);
    REQUIRE(qe);
    CHECK(qe->srq == 0x21);
    std::vector<std::byte> qout(ifc::create_qp_out::size_bytes);
    ifc::set<ifc::create_qp_out::qpn>(qout.data(), 0x40);
    d::apply(*qe, qout, o);
    CHECK(o.qp_info.at(0x40).srq == 0x21);

    // QUERY_RMP, MODIFY_RMP and DESTROY_RMP: the client's RMP only; DESTROY_RMP waits for
    // its QPs; uid 0; the SRQ commands of ISSI 0 are not offered.
    using qin = ifc::query_rmp_in;
    CHECK(err(check(by_number<qin, qin::rmpn>(cmd_opcode::QUERY_RMP, 0x21), o, ifc::query_rmp_out::size_bytes)) == 0);
    CHECK(err(check(by_number<qin, qin::rmpn>(cmd_opcode::QUERY_RMP, 0x22), o, ifc::query_rmp_out::size_bytes)) == EPERM);
    CHECK(err(check(by_number<qin, qin::rmpn>(cmd_opcode::QUERY_RMP, 0x21), o, 16)) == EINVAL);  // no room for the context
    using min = ifc::modify_rmp_in;
    CHECK(err(check(by_number<min, min::rmpn>(cmd_opcode::MODIFY_RMP, 0x21), o)) == 0);
    CHECK(err(check(by_number<min, min::rmpn>(cmd_opcode::MODIFY_RMP, 0x22), o)) == EPERM);
    using sin = ifc::query_srq_in;
    CHECK(err(check(by_number<sin, sin::srqn>(cmd_opcode::QUERY_SRQ, 0x21), o)) == EPERM);
    using arm = ifc::arm_rq_in;
    CHECK(err(check(by_number<arm, arm::srq_number>(cmd_opcode::ARM_RQ, 0x21, 1), o)) == EPERM);
    using din = ifc::destroy_rmp_in;
    auto destroy = by_number<din, din::rmpn>(cmd_opcode::DESTROY_RMP, 0x21);
    CHECK(err(check(destroy, o)) == EBUSY);  // QP 0x40 uses it
    auto with_uid = destroy;
    ifc::set<din::uid>(with_uid.data(), 1);
    CHECK(err(check(with_uid, o)) == EPERM);
    CHECK(err(check(by_number<ifc::destroy_srq_in, ifc::destroy_srq_in::srqn>(cmd_opcode::DESTROY_SRQ, 0x21), o)) == EPERM);
    CHECK(err(check(by_number<ifc::dealloc_pd_in, ifc::dealloc_pd_in::pd>(cmd_opcode::DEALLOC_PD, 3), o)) == EBUSY);

    // Teardown: QPs, then the RMP (DESTROY_RMP), then CQs and the PD.
    const auto steps = d::teardown_commands(o);
    REQUIRE(steps.size() == 6);  // QPs 7 and 0x40, RMP 0x21, CQs 7 and 8, PD 3
    CHECK(steps[0].obj == d::command_effect::object::qp);
    CHECK(steps[1].obj == d::command_effect::object::qp);
    CHECK(steps[2].obj == d::command_effect::object::srq);
    CHECK(steps[2].id == 0x21);
    CHECK(ifc::get<ifc::cmd_in::opcode>(steps[2].in.data()) == static_cast<unsigned>(cmd_opcode::DESTROY_RMP));
    CHECK(steps[2].maps == std::set<std::uint64_t>{kIova});

    // Once the QP is gone the RMP may go, and its mapping is free again.
    auto dq = check(by_number<ifc::destroy_qp_in, ifc::destroy_qp_in::qpn>(cmd_opcode::DESTROY_QP, 0x40), o);
    REQUIRE(dq);
    d::apply(*dq, {}, o);
    auto ds = check(destroy, o);
    REQUIRE_MESSAGE(ds, ds.error().message);
    d::apply(*ds, {}, o);
    CHECK_FALSE(o.srqs.contains(0x21));
    CHECK(o.maps.at(kIova).users == 0);
}

TEST_CASE("vport queries: read-only, the function's own vport only") {
    const d::owned o = client();
    auto own = cxv::driver::command<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(own.data(), 1);
    CHECK(err(check(own, o, ifc::query_hca_vport_context_out::size_bytes)) == 0);
    auto other = own;
    ifc::set<ifc::query_hca_vport_context_in::other_vport>(other.data(), 1);
    ifc::set<ifc::query_hca_vport_context_in::vport_number>(other.data(), 1);
    CHECK(err(check(other, o, ifc::query_hca_vport_context_out::size_bytes)) == EPERM);
    auto numbered = own;  // vport_number without other_vport: refused as well
    ifc::set<ifc::query_hca_vport_context_in::vport_number>(numbered.data(), 2);
    CHECK(err(check(numbered, o, ifc::query_hca_vport_context_out::size_bytes)) == EPERM);
    auto nic = cxv::driver::command<ifc::query_nic_vport_context_in>(cmd_opcode::QUERY_NIC_VPORT_CONTEXT);
    CHECK(err(check(nic, o, ifc::query_nic_vport_context_out::size_bytes)) == 0);
    ifc::set<ifc::query_nic_vport_context_in::other_vport>(nic.data(), 1);
    CHECK(err(check(nic, o, ifc::query_nic_vport_context_out::size_bytes)) == EPERM);
    auto state = cxv::driver::command<ifc::query_vport_state_in>(cmd_opcode::QUERY_VPORT_STATE);
    CHECK(err(check(state, o, ifc::query_vport_state_out::size_bytes)) == 0);
    state.resize(8);  // shorter than its layout
    CHECK(err(check(state, o)) == EBADMSG);
    // A modify of the vport stays off the list.
    auto modify = cxv::driver::command<ifc::modify_nic_vport_context_in>(cmd_opcode::MODIFY_NIC_VPORT_CONTEXT);
    CHECK(err(check(modify, o)) == EPERM);
}

TEST_CASE("page-list entries are a quota whatever they name: a key's MTT and a queue's PAS count, and go with "
          "the object") {
    d::owned o = client();
    d::quotas q;
    q.translations = 10;
    // Eight MTT entries of one page: 4 KiB of memory, eight entries of firmware memory.
    const std::vector<std::uint64_t> same(8, kIova);
    auto key = d::check_command(mkey(same, 0, 8 * 4096), 256, o, d::device_facts{kEqn}, q);
    REQUIRE_MESSAGE(key, key.error().message);
    CHECK(key->translations == 8);
    CHECK(d::declared_translations(mkey(same, 0, 8 * 4096)) == 8);
    std::vector<std::byte> out(256);
    ifc::set<ifc::create_mkey_out::mkey_index>(out.data(), 0x42);
    d::apply(*key, out, o);
    CHECK(o.translations == 8);
    // Two more fit (a CQ's one page, and a key of one octword: two entries), a third not.
    auto cq = d::check_command(create_cq(kIova, kIova + 4096), 256, o, d::device_facts{kEqn}, q);
    REQUIRE_MESSAGE(cq, cq.error().message);
    CHECK(cq->translations == 1);
    q.translations = 9;
    auto over = d::check_command(mkey({kIova, kIova}, 0, 4096), 256, o, d::device_facts{kEqn}, q);
    REQUIRE_FALSE(over);
    CHECK(over.error().code == EDQUOT);
    CHECK_MESSAGE(over.error().message.find("quota of firmware translations") != std::string::npos,
                  over.error().message);
    // The key destroyed: its entries are free again.
    auto del = cxv::driver::command<ifc::destroy_mkey_in>(cmd_opcode::DESTROY_MKEY);
    ifc::set<ifc::destroy_mkey_in::mkey_index>(del.data(), 0x42);
    auto gone = d::check_command(del, 16, o, d::device_facts{kEqn}, q);
    REQUIRE_MESSAGE(gone, gone.error().message);
    d::apply(*gone, {}, o);
    CHECK(o.translations == 0);
    CHECK(o.translations_of.empty());
    CHECK(d::check_command(mkey({kIova, kIova}, 0, 4096), 256, o, d::device_facts{kEqn}, q));
}
