// Printers: what a person reads in a failure or a trace.
#include <array>
#include <cstddef>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "hw/ifc.h"
#include "hw/printers.h"

namespace hw = cxv::hw;
namespace ifc = cxv::hw::ifc;

TEST_CASE("layouts print their non-zero fields by PRM name") {
    std::array<std::byte, ifc::cmd_queue_entry::size_bytes> e{};
    ifc::set<ifc::cmd_queue_entry::type>(e.data(), 7);
    ifc::set<ifc::cmd_queue_entry::input_length>(e.data(), 0x10);
    ifc::set<ifc::cmd_queue_entry::command_input_inline_data>(e.data(), 1, 0x04);
    ifc::set<ifc::cmd_queue_entry::ownership>(e.data(), 1);
    CHECK(fmt::format("{}", hw::ifc_view<ifc::cmd_queue_entry>(e.data())) ==
          "cmd_queue_entry{type=0x7 input_length=0x10 command_input_inline_data[1]=0x4 "
          "ownership=0x1}");
}

TEST_CASE("nested structures print inside their parent, and only when non-zero") {
    std::array<std::byte, ifc::initial_seg::size_bytes> seg{};
    ifc::set<ifc::initial_seg::cmd_interface_rev>(seg.data(), 5);
    CHECK(fmt::format("{}", hw::ifc_view<ifc::initial_seg>(seg.data())) ==
          "initial_seg{cmd_interface_rev=0x5}");
    ifc::set<ifc::health_buffer::synd>(ifc::at<ifc::initial_seg::health_buffer>(seg.data()), 9);
    CHECK(fmt::format("{}", hw::ifc_view<ifc::initial_seg>(seg.data())) ==
          "initial_seg{cmd_interface_rev=0x5 health_buffer=health_buffer{synd=0x9}}");
}

TEST_CASE("a short buffer prints only the fields it holds") {
    std::array<std::byte, 8> out{};
    ifc::set<ifc::cmd_out::status>(out.data(), 3);
    ifc::set<ifc::cmd_out::syndrome>(out.data(), 0x1234);
    CHECK(fmt::format("{}", hw::ifc_view<ifc::cmd_out>(out.data(), out.size())) ==
          "cmd_out{status=0x3 syndrome=0x1234}");
}

TEST_CASE("enums print with their PRM names") {
    CHECK(fmt::format("{}", hw::cmd_opcode::CREATE_CQ) == "CREATE_CQ(0x400)");
    CHECK(fmt::format("{}", hw::cmd_opcode::QP_2ERR) == "2ERR_QP(0x507)");
    CHECK(fmt::format("{}", hw::cmd_status::BAD_PARAM) == "BAD_PARAM(0x3)");
    CHECK(fmt::format("{}", static_cast<hw::cmd_status>(0x77)) == "unknown(0x77)");
    CHECK(fmt::format("{}", hw::cqe_syndrome::RNR_RETRY_EXC_ERR) == "RNR_RETRY_EXC_ERR(0x16)");
}

TEST_CASE("WQE and CQE printers decode the fields") {
    hw::wqe_ctrl_seg c{};
    hw::set_ctrl_seg(c, 3, hw::wqe_opcode::SEND_IMM, 0, 0x22, 2,
                     hw::fm_ce_se(hw::fence_mode::none, true, false), hw::be32::from(0xabc));
    CHECK(fmt::format("{}", c) ==
          "ctrl{SEND_IMM(0xb) opmod=0x0 wqe_index=3 qpn=0x22 ds=2 fence=0 ce=1 se=0 imm=0xabc}");

    hw::cqe64 q{};
    q.op_own = hw::make_op_own(hw::cqe_opcode::REQ_ERR, false, 1);
    auto& e = reinterpret_cast<hw::err_cqe64&>(q);
    e.syndrome = static_cast<std::uint8_t>(hw::cqe_syndrome::REMOTE_ACCESS_ERR);
    e.s_wqe_opcode_qpn = hw::be32::from((0x08u << 24) | 0x22);
    CHECK(fmt::format("{}", q) ==
          "cqe{REQ_ERR(0xd) syndrome=REMOTE_ACCESS_ERR(0x13) vendor_err_synd=0x0 qpn=0x22 "
          "wqe_opcode=0x8 wqe_counter=0 owner=1}");
}

#include "hw/cmd_layouts.h"

TEST_CASE("commands print with the layout their opcode names") {
    std::array<std::byte, ifc::create_cq_in::size_bytes> in{};
    ifc::set<ifc::create_cq_in::opcode>(in.data(), 0x400);
    ifc::set<ifc::cqc::log_cq_size>(ifc::at<ifc::create_cq_in::cq_context>(in.data()), 10);
    CHECK(hw::format_command_input(in.data(), in.size()) ==
          "create_cq_in{opcode=0x400 cq_context=cqc{log_cq_size=0xa}}");
    CHECK(hw::command_input_size(hw::cmd_opcode::CREATE_CQ) == ifc::create_cq_in::size_bytes);
    CHECK(hw::command_input_size(hw::cmd_opcode::GEN_EQE) == 0);

    std::array<std::byte, 16> out{};
    ifc::set<ifc::create_cq_out::status>(out.data(), 0x3);
    ifc::set<ifc::create_cq_out::cqn>(out.data(), 0x42);
    CHECK(hw::format_command_output(hw::cmd_opcode::CREATE_CQ, out.data(), out.size()) ==
          "create_cq_out{status=0x3 cqn=0x42}");

    // An opcode hw/ has no layout for still prints its name and header.
    std::array<std::byte, 16> other{};
    ifc::set<ifc::cmd_in::opcode>(other.data(), 0x932);
    ifc::set<ifc::cmd_in::op_mod>(other.data(), 1);
    CHECK(hw::format_command_input(other.data(), other.size()) ==
          "QUERY_FLOW_TABLE(0x932) cmd_in{opcode=0x932 op_mod=0x1}");
}

// The differential check's view of what a driver sets outside hw/'s fields
// (docs/linux-oracle.md): bytes 4-5 of a command are reserved, bit 0 of byte 0x5c is
// cq_umem_valid's and the rest of that byte reserved.
TEST_CASE("a command's set bits that no field names are listed by byte, in PRM bit order") {
    std::array<std::byte, ifc::create_cq_in::size_bytes + 16> in{};
    ifc::set<ifc::create_cq_in::opcode>(in.data(), 0x400);
    ifc::set<ifc::cqc::log_cq_size>(ifc::at<ifc::create_cq_in::cq_context>(in.data()), 10);
    ifc::set<ifc::create_cq_in::pas>(in.data(), 0, 0x1000);  // the flexible array: named
    CHECK(hw::command_input_unnamed_bits(in.data(), in.size()).empty());
    in[4] = std::byte{0x81};
    ifc::set<ifc::create_cq_in::cq_umem_valid>(in.data(), 1);
    CHECK(hw::command_input_unnamed_bits(in.data(), in.size()) == " @0x4=0x81");
    in[0x5c] |= std::byte{0x40};  // the bit after cq_umem_valid (0x2e1)
    CHECK(hw::command_input_unnamed_bits(in.data(), in.size()) == " @0x4=0x81 @0x5c=0x40");
    // An opcode without a layout has nothing to say.
    std::array<std::byte, 16> other{};
    ifc::set<ifc::cmd_in::opcode>(other.data(), 0x932);
    other[4] = std::byte{1};
    CHECK(hw::command_input_unnamed_bits(other.data(), other.size()).empty());
}
