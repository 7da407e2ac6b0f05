// driver::cmd_queue on its own, against the model under cxv-sim: the queue set up from the
// initialization segment, commands with inline and chained (mailbox) input and output,
// firmware failures and lost completions turned into errors that name the command.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "driver/cmd/cmd_queue.h"
#include "driver/vfio/vfio.h"
#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "hw/init_seg.h"
#include "hw/opcodes.h"
#include "tests/driver/test_util.h"

using namespace cxv;
using namespace std::chrono_literals;
namespace ifc = cxv::hw::ifc;
using driver::cmd_queue;
using driver::command;
using hw::cmd_opcode;

namespace {

using test::control;
using test::open_device;

// The firmware clears `initializing` when the command interface may be used.
void wait_ready(const driver::vfio::device& dev) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (dev.bar0().read32_be(hw::init_seg_offset::initializing) & hw::init_seg_initializing_bit) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(2ms);
    }
}

std::unique_ptr<cmd_queue> make_queue(driver::vfio::device& dev, const cmd_queue::options& o = {}) {
    wait_ready(dev);
    auto q = cmd_queue::create(dev, o);
    REQUIRE_MESSAGE(q.ok(), (q.ok() ? "" : q.error().message));
    return std::move(q).value();
}

// ENABLE_HCA, then ISSI 1: what the firmware wants before most other commands.
void enable(cmd_queue& q) {
    REQUIRE(q.exec(command<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16).ok());
    auto set_issi = command<ifc::set_issi_in>(cmd_opcode::SET_ISSI);
    ifc::set<ifc::set_issi_in::current_issi>(set_issi.data(), 1);
    REQUIRE(q.exec(set_issi, 16).ok());
}

std::vector<std::byte> query_issi() { return command<ifc::query_issi_in>(cmd_opcode::QUERY_ISSI); }

}  // namespace

TEST_CASE("the queue takes its geometry from the initialization segment and runs a command") {
    auto dev = open_device();
    wait_ready(*dev);
    // Read before the queue's address overwrites the dword.
    const std::uint32_t geometry = dev->bar0().read32_be(hw::init_seg_offset::cmdq_addr_l_sz);
    auto q = make_queue(*dev);
    CHECK(q->slots() == 1u << ((geometry >> hw::log_cmdq_size_shift) & 0xf));
    CHECK(q->slots() >= 1);

    REQUIRE(q->exec(command<ifc::enable_hca_in>(cmd_opcode::ENABLE_HCA), 16).ok());
    // QUERY_ISSI's output is longer than the 16 inline bytes: it comes through a mailbox.
    auto r = q->exec(query_issi(), ifc::query_issi_out::size_bytes);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    REQUIRE(r->size() == ifc::query_issi_out::size_bytes);
    CHECK(ifc::get<ifc::cmd_out::status>(r->data()) == 0);
    CHECK((ifc::get<ifc::query_issi_out::supported_issi_dw0>(r->data()) & 2) != 0);

    const auto trace = q->trace();
    REQUIRE(trace.size() == 2);
    CHECK(trace[1].opcode == cmd_opcode::QUERY_ISSI);
    CHECK(trace[1].status == hw::cmd_status::OK);
    CHECK(trace[1].error == 0);
    CHECK(trace[1].delivery == 0);
}

TEST_CASE("a failed status becomes an error naming opcode, op_mod, status and syndrome") {
    auto dev = open_device();
    auto q = make_queue(*dev);
    enable(*q);
    control("fail QUERY_ISSI BAD_PARAM 0x1234");
    auto r = q->exec(query_issi(), ifc::query_issi_out::size_bytes);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == EINVAL);  // as Linux's mlx5_cmd_status_to_err maps BAD_PARAM
    const std::string& m = r.error().message;
    CAPTURE(m);
    CHECK(m.find("QUERY_ISSI") != std::string::npos);
    CHECK(m.find("op_mod 0x0") != std::string::npos);
    CHECK(m.find("BAD_PARAM") != std::string::npos);
    CHECK(m.find("0x1234") != std::string::npos);
    const auto last = q->trace().back();
    CHECK(last.opcode == cmd_opcode::QUERY_ISSI);
    CHECK(last.status == hw::cmd_status::BAD_PARAM);
    CHECK(last.syndrome == 0x1234);
    CHECK(last.error == EINVAL);
    // The fault was for one command: the next one succeeds.
    CHECK(q->exec(query_issi(), ifc::query_issi_out::size_bytes).ok());
    CHECK(driver::status_errno(hw::cmd_status::RESOURCE_BUSY) == EBUSY);
    CHECK(driver::status_errno(hw::cmd_status::NO_RESOURCES) == EAGAIN);
    CHECK(driver::status_errno(hw::cmd_status::EXCEED_LIM) == ENOMEM);
}

TEST_CASE("a command that never completes times out with its name and does not hang the queue") {
    auto dev = open_device();
    cmd_queue::options o;
    o.timeout = 300ms;
    auto q = make_queue(*dev, o);
    enable(*q);
    control("drop QUERY_ISSI");
    const auto start = std::chrono::steady_clock::now();
    auto r = q->exec(query_issi(), ifc::query_issi_out::size_bytes);
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ETIMEDOUT);
    CHECK(r.error().message.find("QUERY_ISSI") != std::string::npos);
    CHECK(r.error().message.find("timed out") != std::string::npos);
    CHECK(took >= 300ms);
    CHECK(took < 5s);
    CHECK(q->trace().back().error == ETIMEDOUT);
    // The slot stays the device's; the others carry on.
    if (q->slots() > 1) CHECK(q->exec(query_issi(), ifc::query_issi_out::size_bytes).ok());
}

TEST_CASE("a dead queue fails every command at once with the reason") {
    auto dev = open_device();
    auto q = make_queue(*dev);
    q->mark_dead("test: gone");
    CHECK(q->dead());
    auto r = q->exec(query_issi(), ifc::query_issi_out::size_bytes);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ENODEV);
    CHECK(r.error().message == "test: gone");
}

TEST_CASE("mailbox chains carry long inputs and outputs both ways, in order") {
    auto dev = open_device();
    auto q = make_queue(*dev);
    enable(*q);
    // 200 page addresses (1600 bytes) go to the device in a chain of four input
    // mailboxes; taking them back brings them in a chain of four output mailboxes.
    constexpr std::uint32_t kPages = 200;
    auto mem = dev->alloc_dma(std::size_t{kPages} * 4096);
    REQUIRE(mem.ok());
    std::vector<std::uint64_t> given;
    for (std::uint32_t i = 0; i < kPages; ++i) given.push_back(mem->iova() + std::uint64_t{i} * 4096);
    auto give = command<ifc::manage_pages_in>(
        cmd_opcode::MANAGE_PAGES, static_cast<std::uint16_t>(hw::manage_pages_op_mod::ALLOCATION_SUCCESS), kPages * 8);
    ifc::set<ifc::manage_pages_in::input_num_entries>(give.data(), kPages);
    for (std::uint32_t i = 0; i < kPages; ++i) ifc::set<ifc::manage_pages_in::pas>(give.data(), i, given[i]);
    REQUIRE(give.size() > 16 + 3 * 512);
    auto g = q->exec(give, 16);
    REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));

    auto take = command<ifc::manage_pages_in>(cmd_opcode::MANAGE_PAGES,
                                              static_cast<std::uint16_t>(hw::manage_pages_op_mod::HCA_RETURN_PAGES));
    ifc::set<ifc::manage_pages_in::input_num_entries>(take.data(), kPages);
    const std::size_t out_len = ifc::manage_pages_out::size_bytes + std::size_t{kPages} * 8;
    REQUIRE(out_len > 16 + 3 * 512);
    auto t = q->exec(take, out_len);
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
    REQUIRE(t->size() == out_len);
    REQUIRE(ifc::get<ifc::manage_pages_out::output_num_entries>(t->data()) == kPages);
    std::vector<std::uint64_t> back;
    for (std::uint32_t i = 0; i < kPages; ++i) back.push_back(ifc::get<ifc::manage_pages_out::pas>(t->data(), i));
    std::sort(back.begin(), back.end());
    CHECK(back == given);  // every address crossed both chains intact

    // The capability page: 4 KiB of output through eight mailboxes, the same twice.
    auto caps = command<ifc::query_hca_cap_in>(
        cmd_opcode::QUERY_HCA_CAP, hw::hca_cap_op_mod(hw::hca_cap_type::GENERAL, hw::hca_cap_mode::GET_CUR));
    auto c1 = q->exec(caps, ifc::query_hca_cap_out::size_bytes);
    auto c2 = q->exec(caps, ifc::query_hca_cap_out::size_bytes);
    REQUIRE(c1.ok());
    REQUIRE(c2.ok());
    CHECK(*c1 == *c2);
    const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(c1->data());
    CHECK(ifc::get<ifc::cmd_hca_cap::log_bf_reg_size>(cap) >= 6);
}

TEST_CASE("a command needing more mailboxes than the queue has fails cleanly") {
    auto dev = open_device();
    cmd_queue::options o;
    o.mailbox_blocks = 2;
    auto q = make_queue(*dev, o);
    enable(*q);
    auto caps = command<ifc::query_hca_cap_in>(
        cmd_opcode::QUERY_HCA_CAP, hw::hca_cap_op_mod(hw::hca_cap_type::GENERAL, hw::hca_cap_mode::GET_CUR));
    auto r = q->exec(caps, ifc::query_hca_cap_out::size_bytes);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ENOMEM);
    CHECK(r.error().message.find("mailboxes") != std::string::npos);
    // Nothing was lost: a command that fits still runs.
    CHECK(q->exec(query_issi(), ifc::query_issi_out::size_bytes).ok());
    // Too short an input or output is refused before it reaches the device.
    CHECK(q->exec(std::vector<std::byte>(4), 16).error().code == EINVAL);
}
