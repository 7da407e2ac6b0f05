// The command interface: slots, doorbells, mailboxes, lengths, delivery status, faults.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sim/syndromes.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;

TEST_CASE("a command completes: ownership returns, status OK, output where the driver reads it") {
    test::harness h;
    boot(h);
    auto r = h.enable_hca();
    CHECK(r.completed);
    CHECK(r.delivery_status == 0);
    CHECK(r.status == cmd_status::OK);
    auto q = h.exec(test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112);
    CHECK(q.status == cmd_status::OK);
    CHECK((ifc::get<ifc::query_issi_out::supported_issi_dw0>(q.out.data()) & 0x2) != 0);
}

TEST_CASE("every slot works, and several may be outstanding at once") {
    test::harness h;
    boot_and_enable(h);
    for (unsigned slot = 0; slot < 32; ++slot) {
        auto r = h.exec(test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112,
                        {.slot = slot});
        CHECK_MESSAGE(r.status == cmd_status::OK, "slot ", slot);
    }
    // Post three without waiting, each with its own doorbell, then collect.
    auto in = test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI);
    h.post(0, in, 112, true);
    h.post(7, in, 112, true);
    h.post(31, in, 112, true);
    for (unsigned s : {0u, 7u, 31u}) {
        REQUIRE(h.wait_slot(s, 2000ms));
        CHECK(h.collect(s, 112).status == cmd_status::OK);
    }
}

TEST_CASE("a command whose doorbell is never written is never executed") {
    test::harness h;
    boot(h);
    auto r = h.exec(test::harness::input<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16,
                    {.slot = 3, .ring = false, .timeout = 300ms});
    CHECK_FALSE(r.completed);
    CHECK(h.dev().state() == sim::hca_state::disabled);
    // Ringing it now executes it.
    h.bar_store32(0x18, 1u << 3);
    REQUIRE(h.wait_slot(3, 2000ms));
    CHECK(h.collect(3, 16).status == cmd_status::OK);
    CHECK(h.dev().state() == sim::hca_state::enabled);
}

TEST_CASE("a doorbell overwritten by another slot's doorbell is not lost") {
    test::harness h;
    boot_and_enable(h);
    auto in = test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI);
    // Both commands are handed over before either doorbell; the second doorbell store
    // replaces the first in BAR0 before the device can have read it.
    for (int round = 0; round < 50; ++round) {
        h.post(1, in, 112, false);
        h.post(30, in, 112, false);
        h.bar_store32(0x18, 1u << 1);
        h.bar_store32(0x18, 1u << 30);
        REQUIRE(h.wait_slot(1, 2000ms));
        REQUIRE(h.wait_slot(30, 2000ms));
    }
}

TEST_CASE("where every doorbell write is seen (sim/uml), a doorbell executes the slots it rings and no other") {
    // Under VFIO the model executes every slot handed over at any doorbell (a store may
    // have replaced another's); behind UML's virtual PCI bus each write arrives, the
    // backend ORs it into the word, and a slot handed over but not rung stays the
    // driver's: Linux's mlx5_core marks a command as awaiting completion between handing
    // it over and ringing, and took a completion before that for a late one (finding 7).
    test::harness h;
    boot_and_enable(h);
    h.dev().set_writes_seen(true);
    auto in = test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI);
    h.post(2, in, 112, false);
    h.post(5, in, 112, false);
    h.bar_store32(0x18, 1u << 2);
    REQUIRE(h.wait_slot(2, 2000ms));
    CHECK(h.collect(2, 112).status == cmd_status::OK);
    CHECK_FALSE(h.wait_slot(5, 300ms));
    // Two slots rung in one word: both run.
    h.post(9, in, 112, false);
    h.bar_store32(0x18, (1u << 5) | (1u << 9));
    REQUIRE(h.wait_slot(5, 2000ms));
    REQUIRE(h.wait_slot(9, 2000ms));
    CHECK(h.collect(5, 112).status == cmd_status::OK);
    CHECK(h.collect(9, 112).status == cmd_status::OK);
}

TEST_CASE("mailbox chains: capability fields arrive intact across block boundaries") {
    test::harness h;
    boot_and_enable(h);
    auto q = h.exec(test::harness::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    REQUIRE(q.status == cmd_status::OK);
    const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(q.out.data());
    CHECK(ifc::get<ifc::cmd_hca_cap::umem_uid_0>(cap) == 1);
    CHECK(ifc::get<ifc::cmd_hca_cap::log_max_qp>(cap) == 16);
    CHECK(ifc::get<ifc::cmd_hca_cap::log_bf_reg_size>(cap) == 9);
    CHECK(ifc::get<ifc::cmd_hca_cap::port_type>(cap) == 0);
    // SET_HCA_CAP: a 4112-byte input through the input chain.
    auto in = test::harness::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0);
    std::memcpy(ifc::at<ifc::set_hca_cap_in::capability>(in.data()), cap, ifc::cmd_hca_cap::size_bytes);
    ifc::set<ifc::cmd_hca_cap::cache_line_128byte>(ifc::at<ifc::set_hca_cap_in::capability>(in.data()), 1);
    REQUIRE(h.exec(in, 16).status == cmd_status::OK);
    auto q2 = h.exec(test::harness::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 4112);
    CHECK(ifc::get<ifc::cmd_hca_cap::cache_line_128byte>(
              ifc::at<ifc::query_hca_cap_out::capability>(q2.out.data())) == 1);
}

TEST_CASE("an output shorter than the layout gets what fits") {
    test::harness h;
    boot(h);
    auto r = h.exec(test::harness::input<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 12);
    CHECK(r.status == cmd_status::OK);
    REQUIRE(h.dev().state() == sim::hca_state::enabled);
    auto q = h.exec(test::harness::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1), 2064);
    CHECK(q.status == cmd_status::OK);
    CHECK(q.out.size() == 2064);
}

TEST_CASE("a failed command's output holds status and syndrome only") {
    test::harness h;
    REQUIRE(h.bring_up());
    // Outputs with a context and a list past it, naming objects that do not exist.
    for (auto op : {cmd_opcode::QUERY_CQ, cmd_opcode::QUERY_QP, cmd_opcode::QUERY_SRQ, cmd_opcode::QUERY_EQ,
                    cmd_opcode::QUERY_MKEY}) {
        auto in = test::harness::input<ifc::query_qp_in>(op);
        ifc::set<ifc::query_qp_in::qpn>(in.data(), 0x7777);
        auto r = h.exec(in, 2048);
        CHECK_MESSAGE(r.status == cmd_status::BAD_RESOURCE, hw::name(op));
        CHECK(r.synd() == cmd_syndrome::UNKNOWN_RESOURCE);
        CHECK_MESSAGE(std::all_of(r.out.begin() + 8, r.out.end(), [](std::byte b) { return b == std::byte{0}; }),
                      hw::name(op));
    }
}

TEST_CASE("an input longer than the layout is fine; a shorter one is BAD_INPUT_LEN") {
    test::harness h;
    boot(h);
    auto longer = test::harness::input<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA, 0, 40);
    CHECK(h.exec(longer, 16).status == cmd_status::OK);
    auto set_issi = test::harness::input<ifc::set_issi_in>(cmd_opcode::SET_ISSI);
    set_issi.resize(8);  // header only
    auto r = h.exec(set_issi, 16);
    CHECK(r.status == cmd_status::BAD_INPUT_LEN);
    CHECK(r.synd() == cmd_syndrome::INPUT_TOO_SHORT);
}

TEST_CASE("unknown opcodes are BAD_OP; a bad op_mod is BAD_PARAM") {
    test::harness h;
    boot_and_enable(h);
    auto r = h.simple(static_cast<cmd_opcode>(0x7777));
    CHECK(r.status == cmd_status::BAD_OP);
    CHECK(r.synd() == cmd_syndrome::UNKNOWN_OPCODE);
    auto q = h.exec(test::harness::input<ifc::query_pages_in>(cmd_opcode::QUERY_PAGES, 9), 16);
    CHECK(q.status == cmd_status::BAD_PARAM);
    CHECK(q.synd() == cmd_syndrome::BAD_OP_MOD);
}

TEST_CASE("a wrong mailbox block number or token is a delivery error") {
    test::harness h;
    boot_and_enable(h);
    auto in = test::harness::input<ifc::set_hca_cap_in>(cmd_opcode::SET_HCA_CAP, 0);
    auto r = h.exec(in, 16, {.corrupt_block = 2});
    CHECK(r.completed);
    CHECK(r.delivery_status == static_cast<std::uint8_t>(hw::cmd_delivery_status::BAD_BLOCK_NUMBER));
    // Token: the entry says 0x5a, the blocks agree: fine.
    auto ok = h.exec(test::harness::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1),
                     4112, {.token = 0x5a});
    CHECK(ok.delivery_status == 0);
    CHECK(ok.status == cmd_status::OK);
}

TEST_CASE("a mailbox the driver did not map is an IOMMU fault, not a crash or a write") {
    test::harness h;
    boot_and_enable(h);
    const auto before = h.dev().mmu().fault_count();
    // Build a command whose output chain lives in memory we then unmap.
    auto in = test::harness::input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, 1);
    h.post(5, in, 4112, false);
    // The newest buffer holds this command's output mailboxes: make it fault.
    h.dev().mmu().inject_fault(h.last_buffer().iova(), h.last_buffer().size());
    h.bar_store32(0x18, 1u << 5);
    REQUIRE(h.wait_slot(5, 2000ms));
    auto r = h.collect(5, 16);
    CHECK(r.delivery_status == static_cast<std::uint8_t>(hw::cmd_delivery_status::FW_ERR));
    CHECK(h.dev().mmu().fault_count() > before);
}

TEST_CASE("fault injection: a chosen opcode fails with a chosen status and syndrome") {
    test::harness h;
    boot(h);
    h.dev().faults().fail_commands(cmd_opcode::ENABLE_HCA, cmd_status::INTERNAL_ERR,
                                   cmd_syndrome::INJECTED);
    auto r = h.enable_hca();
    CHECK(r.status == cmd_status::INTERNAL_ERR);
    CHECK(r.synd() == cmd_syndrome::INJECTED);
    CHECK(h.dev().state() == sim::hca_state::disabled);
    CHECK(h.enable_hca().status == cmd_status::OK);
}

TEST_CASE("fault injection: a delayed completion arrives late, a dropped one never") {
    test::harness h;
    boot(h);
    h.dev().faults().delay_completion(cmd_opcode::ENABLE_HCA, 200ms);
    auto r = h.exec(test::harness::input<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16,
                    {.timeout = 50ms});
    CHECK_FALSE(r.completed);
    REQUIRE(h.wait_slot(0, 2000ms));
    CHECK(h.collect(0, 16).status == cmd_status::OK);

    h.dev().faults().drop_completion(cmd_opcode::QUERY_ISSI);
    auto d = h.exec(test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112,
                    {.slot = 2, .timeout = 300ms});
    CHECK_FALSE(d.completed);
    // Other slots still work.
    CHECK(h.exec(test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112,
                 {.slot = 4})
              .status == cmd_status::OK);
}

TEST_CASE("the trace records each command with its outcome") {
    test::harness h;
    boot_and_enable(h);
    (void)h.simple(static_cast<cmd_opcode>(0x7777));
    const auto cmds = h.dev().tracer().commands();
    REQUIRE(cmds.size() >= 2);
    CHECK(cmds[cmds.size() - 2].opcode == cmd_opcode::ENABLE_HCA);
    CHECK(cmds.back().status == cmd_status::BAD_OP);
    const auto c = h.dev().tracer().snapshot();
    CHECK(c.commands >= 2);
    CHECK(c.commands_failed >= 1);
    CHECK(h.dev().tracer().dump().find("ENABLE_HCA") != std::string::npos);
}

TEST_CASE("the model's syndromes print with their names; a card's prints as a number") {
    CHECK(fmt::format("{}", sim::cmd_syndrome::LOG_SIZE_TOO_BIG) == "LOG_SIZE_TOO_BIG(0xc50010)");
    CHECK(sim::describe(sim::cmd_syndrome::BAD_REGISTER).find("register") != std::string_view::npos);
    // A card's syndrome is an opaque firmware identifier: printed, never named.
    CHECK(fmt::format("{}", static_cast<sim::cmd_syndrome>(0x4bb88f)) == "unknown(0x4bb88f)");
    CHECK(sim::name(static_cast<sim::cmd_syndrome>(0x4bb88f)).empty());
}

// CXV_SIM_COMMAND_LOG, --command-log: what the differential check reads
// (tests/uml/differential.py, docs/linux-oracle.md).
TEST_CASE("the command log: each command's input and output by PRM field name, one line each") {
    test::harness h;
    boot_and_enable(h);
    std::FILE* log = std::tmpfile();
    REQUIRE(log != nullptr);
    h.dev().tracer().set_command_log(log, "fn");
    CHECK(h.dev().tracer().logs_commands());
    auto in = test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI);
    in[4] = std::byte{0x80};  // a reserved bit of the header
    CHECK(h.exec(in, 112).status == cmd_status::OK);
    // A refused command is logged too, with its status.
    CHECK(h.exec(test::harness::input<ifc::query_issi_in>(static_cast<cmd_opcode>(0x7ff)), 16).status ==
          cmd_status::BAD_OP);
    h.dev().tracer().set_command_log(nullptr, "");
    CHECK_FALSE(h.dev().tracer().logs_commands());
    CHECK(h.exec(test::harness::input<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI), 112).status == cmd_status::OK);
    std::rewind(log);
    std::string text;
    for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
    std::fclose(log);
    INFO(text);
    CHECK(text.find("fn: in=query_issi_in{opcode=0x10a} unnamed={ @0x4=0x80} out=query_issi_out{") == 0);
    CHECK(text.find("supported_issi_dw0=0x") != std::string::npos);
    CHECK(text.find("\nfn: in=unknown(0x7ff) cmd_in{opcode=0x7ff} unnamed={} out=cmd_out{status=0x2 syndrome=") !=
          std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 2);  // nothing after the log was stopped
}
