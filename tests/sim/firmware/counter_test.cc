// Counters: ALLOC_Q_COUNTER / QUERY_Q_COUNTER / DEALLOC_Q_COUNTER (limits, syndromes,
// clear, aggregate), a QP's counter_set_id (RST2INIT, RTS2RTS), counts that move with
// the events that cause them (flushes here; traffic in tests/e2e/counters_test.cc), and
// QUERY_VPORT_COUNTER. Output offsets are read with Linux's mlx5_ifc.h, not hw/'s.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>


#include <doctest/doctest.h>

#include "hw/endian.h"
#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using qpc = ifc::qpc;
using ads = ifc::ads;

namespace {

constexpr std::uint32_t kRc = ifc::qpc_values::st_rc, kUd = ifc::qpc_values::st_ud;
constexpr std::uint32_t kOptCounterSetId = ifc::qp_optpar::COUNTER_SET_ID;
constexpr std::size_t kMaxSets = 64;                  // the model's max_qp_cnt

// A 32-bit field of a command output at the offset Linux's mlx5_ifc.h gives it.
#define LINUX_U32(out, layout, field) \
    read_be32((out), offsetof(mlx5_ifc_##layout##_bits, field))
std::uint32_t read_be32(const std::vector<std::byte>& out, std::size_t bit) {
    return static_cast<std::uint32_t>(linux_bits(out, bit, 32));
}
std::uint64_t read_be64(const std::vector<std::byte>& out, std::size_t bit) {
    return (std::uint64_t{read_be32(out, bit)} << 32) | read_be32(out, bit + 32);
}

struct env : qp_env {
    using qp_env::qp_env;

    cmd_result alloc() { return h.exec(H::input<ifc::alloc_q_counter_in>(cmd_opcode::ALLOC_Q_COUNTER), 16); }
    std::uint32_t alloc_ok() {
        auto r = alloc();
        REQUIRE(r.status == cmd_status::OK);
        // An 8-bit field, byte aligned.
        return std::to_integer<std::uint32_t>(r.out.at(offsetof(mlx5_ifc_alloc_q_counter_out_bits, counter_set_id) / 8));
    }
    cmd_result dealloc(std::uint32_t id) {
        auto in = H::input<ifc::dealloc_q_counter_in>(cmd_opcode::DEALLOC_Q_COUNTER);
        ifc::set<ifc::dealloc_q_counter_in::counter_set_id>(in.data(), id);
        return h.exec(in, 16);
    }
    cmd_result query(std::uint32_t id, bool clear = false, bool aggregate = false) {
        auto in = H::input<ifc::query_q_counter_in>(cmd_opcode::QUERY_Q_COUNTER);
        ifc::set<ifc::query_q_counter_in::counter_set_id>(in.data(), id);
        ifc::set<ifc::query_q_counter_in::clear>(in.data(), clear);
        ifc::set<ifc::query_q_counter_in::aggregate>(in.data(), aggregate);
        return h.exec(in, sizeof(mlx5_ifc_query_q_counter_out_bits) / 8);
    }
    std::vector<std::byte> query_ok(std::uint32_t id, bool clear = false, bool aggregate = false) {
        auto r = query(id, clear, aggregate);
        REQUIRE(r.status == cmd_status::OK);
        return r.out;
    }
    // A transition of `qpn` (RC or UD) with the attributes it needs and counter_set_id
    // `set` in its context.
    cmd_result transition(cmd_opcode op, std::uint32_t qpn, std::uint32_t st, std::uint32_t set,
                          std::uint32_t mask = 0) {
        auto in = H::input<ifc::rst2init_qp_in>(op);
        ifc::set<ifc::rst2init_qp_in::qpn>(in.data(), qpn);
        ifc::set<ifc::rst2init_qp_in::opt_param_mask>(in.data(), mask);
        std::byte* c = ifc::at<ifc::rst2init_qp_in::qpc>(in.data());
        std::byte* p = ifc::at<qpc::primary_address_path>(c);
        ifc::set<qpc::counter_set_id>(c, set);
        if (op == cmd_opcode::RST2INIT_QP) {
            ifc::set<ads::vhca_port_num>(p, 1);
            if (st == kUd) ifc::set<qpc::q_key>(c, 0x1234);
        } else if (op == cmd_opcode::INIT2RTR_QP && st != kUd) {
            ifc::set<qpc::mtu>(c, 5);
            ifc::set<qpc::remote_qpn>(c, 0x123);
            ifc::set<ads::rlid>(p, 7);
        } else if (op == cmd_opcode::RTR2RTS_QP && st == kRc) {
            ifc::set<qpc::retry_count>(c, 7);
            ifc::set<qpc::rnr_retry>(c, 7);
            ifc::set<ads::ack_timeout>(p, 14);
        }
        return h.exec(in, 16);
    }
    std::uint32_t counter_set_of(std::uint32_t qpn) {
        auto r = query_qp(h, qpn);
        REQUIRE(r.status == cmd_status::OK);
        return ifc::get<qpc::counter_set_id>(ifc::at<ifc::query_qp_out::qpc>(r.out.data()));
    }
};

}  // namespace

TEST_CASE("ALLOC_Q_COUNTER hands out max_qp_cnt sets besides the default; the caps say so") {
    env e;
    auto cap = e.h.exec(H::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    REQUIRE(cap.status == cmd_status::OK);
    const std::byte* c = ifc::at<ifc::query_hca_cap_out::capability>(cap.out.data());
    using hc = ifc::cmd_hca_cap;
    CHECK(ifc::get<hc::max_qp_cnt>(c) == kMaxSets);
    CHECK(ifc::get<hc::out_of_seq_cnt>(c) == 1);
    CHECK(ifc::get<hc::retransmission_q_counters>(c) == 1);
    CHECK(ifc::get<hc::enhanced_error_q_counters>(c) == 1);
    CHECK(ifc::get<hc::rts2rts_qp_counters_set_id>(c) == 1);
    CHECK(ifc::get<hc::vport_counters>(c) == 1);

    std::vector<std::uint32_t> ids;
    for (std::size_t i = 0; i < kMaxSets; ++i) ids.push_back(e.alloc_ok());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        CHECK(ids[i] != 0);  // 0 is the default set, never handed out
        CHECK(ids[i] <= 0xff);
        for (std::size_t k = 0; k < i; ++k) CHECK(ids[k] != ids[i]);
    }
    check_status(e.alloc(), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
    // A set given back can be had again.
    check_status(e.dealloc(ids[10]), cmd_status::OK, cmd_syndrome::OK);
    CHECK(e.alloc_ok() == ids[10]);
    check_status(e.alloc(), cmd_status::EXCEED_LIM, cmd_syndrome::EXCEEDS_LIMIT);
}

TEST_CASE("QUERY_Q_COUNTER and DEALLOC_Q_COUNTER name a live set; the default set stays") {
    env e;
    const std::uint32_t id = e.alloc_ok();
    check_status(e.query(id + 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(e.dealloc(id + 1), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(e.dealloc(0), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(e.query(0), cmd_status::OK, cmd_syndrome::OK);
    auto bad_mod = H::input<ifc::alloc_q_counter_in>(cmd_opcode::ALLOC_Q_COUNTER, 1);
    check_status(e.h.exec(bad_mod, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    // Another vport's sets: the function has no e-switch.
    auto other = H::input<ifc::query_q_counter_in>(cmd_opcode::QUERY_Q_COUNTER);
    ifc::set<ifc::query_q_counter_in::other_vport>(other.data(), 1);
    ifc::set<ifc::query_q_counter_in::vport_number>(other.data(), 1);
    check_status(e.h.exec(other, 16), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);

    // A new set reads 0 in every counter Linux's layout names.
    const auto out = e.query_ok(id);
    for (std::size_t bit = offsetof(mlx5_ifc_query_q_counter_out_bits, rx_write_requests);
         bit < sizeof(mlx5_ifc_query_q_counter_out_bits); bit += 32) {
        CHECK(read_be32(out, bit) == 0);
    }
    check_status(e.dealloc(id), cmd_status::OK, cmd_syndrome::OK);
    check_status(e.query(id), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
    check_status(e.dealloc(id), cmd_status::BAD_RESOURCE, cmd_syndrome::UNKNOWN_RESOURCE);
}

TEST_CASE("a QP names an allocated set at RST2INIT; an unknown one is refused; a set in use stays") {
    env e;
    const std::uint32_t qpn = e.create_qp(kRc);
    check_status(e.transition(cmd_opcode::RST2INIT_QP, qpn, kRc, 9), cmd_status::BAD_RESOURCE,
                 cmd_syndrome::UNKNOWN_RESOURCE);
    CHECK(e.counter_set_of(qpn) == 0);
    const std::uint32_t id = e.alloc_ok();
    check_status(e.transition(cmd_opcode::RST2INIT_QP, qpn, kRc, id), cmd_status::OK, cmd_syndrome::OK);
    CHECK(e.counter_set_of(qpn) == id);
    check_status(e.dealloc(id), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    // 2RST forgets the transitions' attributes, the counter set with them.
    check_status(e.transition(cmd_opcode::QP_2RST, qpn, kRc, 0), cmd_status::OK, cmd_syndrome::OK);
    CHECK(e.counter_set_of(qpn) == 0);
    check_status(e.dealloc(id), cmd_status::OK, cmd_syndrome::OK);

    // Destroying the QP lets go of its set.
    const std::uint32_t id2 = e.alloc_ok();
    check_status(e.transition(cmd_opcode::RST2INIT_QP, qpn, kRc, id2), cmd_status::OK, cmd_syndrome::OK);
    check_status(e.dealloc(id2), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
    check_status(destroy_qp(e.h, qpn), cmd_status::OK, cmd_syndrome::OK);
    check_status(e.dealloc(id2), cmd_status::OK, cmd_syndrome::OK);
}

TEST_CASE("RTS2RTS moves a QP to another set with the COUNTER_SET_ID optional parameter only") {
    env e;
    for (const std::uint32_t st : {kRc, kUd}) {
        const std::uint32_t qpn = e.create_qp(st);
        const std::uint32_t a = e.alloc_ok(), b = e.alloc_ok();
        REQUIRE(e.transition(cmd_opcode::RST2INIT_QP, qpn, st, a).status == cmd_status::OK);
        // INIT2RTR and RTR2RTS do not take it (nor accept the optional bit): the set stays a.
        check_status(e.transition(cmd_opcode::INIT2RTR_QP, qpn, st, b, kOptCounterSetId), cmd_status::BAD_PARAM,
                     cmd_syndrome::BAD_PARAMETER);
        REQUIRE(e.transition(cmd_opcode::INIT2RTR_QP, qpn, st, b).status == cmd_status::OK);
        check_status(e.transition(cmd_opcode::RTR2RTS_QP, qpn, st, b, kOptCounterSetId), cmd_status::BAD_PARAM,
                     cmd_syndrome::BAD_PARAMETER);
        REQUIRE(e.transition(cmd_opcode::RTR2RTS_QP, qpn, st, b).status == cmd_status::OK);
        CHECK(e.counter_set_of(qpn) == a);
        // Without the bit RTS2RTS leaves it; with it, the set must exist.
        REQUIRE(e.transition(cmd_opcode::RTS2RTS_QP, qpn, st, b).status == cmd_status::OK);
        CHECK(e.counter_set_of(qpn) == a);
        check_status(e.transition(cmd_opcode::RTS2RTS_QP, qpn, st, 0xee, kOptCounterSetId), cmd_status::BAD_RESOURCE,
                     cmd_syndrome::UNKNOWN_RESOURCE);
        REQUIRE(e.transition(cmd_opcode::RTS2RTS_QP, qpn, st, b, kOptCounterSetId).status == cmd_status::OK);
        CHECK(e.counter_set_of(qpn) == b);
        check_status(e.dealloc(a), cmd_status::OK, cmd_syndrome::OK);  // no longer used
        check_status(e.dealloc(b), cmd_status::RESOURCE_BUSY, cmd_syndrome::RESOURCE_IN_USE);
        // Back to the default set.
        REQUIRE(e.transition(cmd_opcode::RTS2RTS_QP, qpn, st, 0, kOptCounterSetId).status == cmd_status::OK);
        check_status(e.dealloc(b), cmd_status::OK, cmd_syndrome::OK);
    }
}

TEST_CASE("flushed WQEs count on the QP's set by side, by the exact number; clear and aggregate") {
    env e;
    auto in = e.qp_input(kRc);
    dma_buffer& buf = e.h.last_buffer();
    const std::uint32_t qpn = e.create_qp(in);
    const std::uint32_t id = e.alloc_ok();
    REQUIRE(e.transition(cmd_opcode::RST2INIT_QP, qpn, kRc, id).status == cmd_status::OK);
    // Three receive WQEs and two send WQEs posted (the doorbell record after the one
    // page of queues: receive counter at +0, send counter at +4), then the QP to ERR.
    const std::uint32_t rq = hw::to_be(std::uint32_t{3}), sq = hw::to_be(std::uint32_t{2});
    std::memcpy(buf.data() + 4096, &rq, 4);
    std::memcpy(buf.data() + 4096 + 4, &sq, 4);
    const auto before_default = e.query_ok(0);
    REQUIRE(e.transition(cmd_opcode::QP_2ERR, qpn, kRc, 0).status == cmd_status::OK);

    auto out = e.query_ok(id);
    CHECK(LINUX_U32(out, query_q_counter_out, resp_cqe_flush_error) == 3);
    CHECK(LINUX_U32(out, query_q_counter_out, req_cqe_flush_error) == 2);
    CHECK(LINUX_U32(out, query_q_counter_out, resp_cqe_error) == 0);
    CHECK(LINUX_U32(out, query_q_counter_out, req_cqe_error) == 0);
    CHECK(LINUX_U32(out, query_q_counter_out, out_of_buffer) == 0);
    // The default set saw none of it.
    CHECK(e.query_ok(0) == before_default);

    // aggregate: every set of the function summed (this one and the default).
    auto all = e.query_ok(0x77, false, true);
    CHECK(LINUX_U32(all, query_q_counter_out, resp_cqe_flush_error) ==
          3 + LINUX_U32(before_default, query_q_counter_out, resp_cqe_flush_error));

    // clear: this read returns the counts, the next reads 0.
    out = e.query_ok(id, true);
    CHECK(LINUX_U32(out, query_q_counter_out, resp_cqe_flush_error) == 3);
    out = e.query_ok(id);
    CHECK(LINUX_U32(out, query_q_counter_out, resp_cqe_flush_error) == 0);
    CHECK(LINUX_U32(out, query_q_counter_out, req_cqe_flush_error) == 0);
}

TEST_CASE("QUERY_VPORT_COUNTER: the function's vport on port 1, at Linux's offsets") {
    env e;
    auto in = H::input<ifc::query_vport_counter_in>(cmd_opcode::QUERY_VPORT_COUNTER);
    const std::size_t olen = sizeof(mlx5_ifc_query_vport_counter_out_bits) / 8;
    auto r = e.h.exec(in, olen);
    REQUIRE(r.status == cmd_status::OK);
    // No traffic yet: every traffic counter is 0.
    for (std::size_t bit = offsetof(mlx5_ifc_query_vport_counter_out_bits, received_errors);
         bit < offsetof(mlx5_ifc_query_vport_counter_out_bits, reserved_at_680); bit += 64) {
        CHECK(read_be64(r.out, bit) == 0);
    }
    ifc::set<ifc::query_vport_counter_in::port_num>(in.data(), 1);
    check_status(e.h.exec(in, olen), cmd_status::OK, cmd_syndrome::OK);
    ifc::set<ifc::query_vport_counter_in::port_num>(in.data(), 2);
    check_status(e.h.exec(in, olen), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
    ifc::set<ifc::query_vport_counter_in::port_num>(in.data(), 1);
    ifc::set<ifc::query_vport_counter_in::other_vport>(in.data(), 1);
    ifc::set<ifc::query_vport_counter_in::vport_number>(in.data(), 1);
    check_status(e.h.exec(in, olen), cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    auto hca_counters = H::input<ifc::query_vport_counter_in>(cmd_opcode::QUERY_VPORT_COUNTER, 1);
    check_status(e.h.exec(hca_counters, olen), cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
}
