// A minimal driver written for the model's tests: it talks to the model exactly as a
// driver talks to a card — DMA memory it maps into the IOMMU, stores to BAR0, the command
// queue and its mailboxes, doorbells, EQEs and eventfds — and never calls into the
// firmware directly. (It is deliberately independent of driver/, so that the model is
// not tested only against our own driver.)
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "sim/syndromes.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "sim/device.h"

namespace cxv::test {

namespace ifc = hw::ifc;

// Names the tests use unqualified: a test file says `using namespace cxv::test;` (and
// `using namespace cxv;` for hw:: and sim::).
using hw::cmd_opcode;
using hw::cmd_status;
using sim::cmd_syndrome;

// A device whose port is Ethernet (RoCE) instead of InfiniBand.
inline sim::device_config ethernet() {
    sim::device_config cfg;
    cfg.port = sim::port_type::ETHERNET;
    return cfg;
}

// Page-aligned host memory mapped into the model's IOMMU at a fixed IOVA.
class dma_buffer {
public:
    dma_buffer(sim::iommu& mmu, std::uint64_t iova, std::size_t size);
    ~dma_buffer();
    dma_buffer(const dma_buffer&) = delete;
    dma_buffer& operator=(const dma_buffer&) = delete;
    std::byte* data() const noexcept { return p_; }
    std::uint64_t iova() const noexcept { return iova_; }
    std::size_t size() const noexcept { return size_; }
    void unmap();

private:
    sim::iommu& mmu_;
    std::byte* p_;
    std::uint64_t iova_;
    std::size_t size_;
    bool mapped_ = true;
};

struct cmd_result {
    bool completed = false;           // ownership came back before the timeout
    std::uint8_t delivery_status = 0;  // cmd_queue_entry.status
    hw::cmd_status status{};
    std::uint32_t syndrome = 0;
    std::vector<std::byte> out;       // olen bytes

    sim::cmd_syndrome synd() const { return static_cast<sim::cmd_syndrome>(syndrome); }
};

class harness {
public:
    explicit harness(sim::device_config cfg = {});
    ~harness();

    sim::device& dev() { return *dev_; }
    std::byte* bar() { return dev_->bar().base(); }
    std::uint32_t bar_load32(std::size_t off);
    void bar_store32(std::size_t off, std::uint32_t v);

    // Waits for `initializing` to clear and writes the command queue address.
    bool wait_boot(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    void set_cmdq();

    // Posts one command in `slot` and waits for ownership to return.
    struct post_options {
        unsigned slot = 0;
        bool ring = true;                 // write the doorbell
        std::chrono::milliseconds timeout{2000};
        std::uint8_t token = 0;
        std::optional<std::uint32_t> corrupt_block = std::nullopt;  // a wrong block_number here
    };
    cmd_result exec(std::span<const std::byte> in, std::size_t olen);
    cmd_result exec(std::span<const std::byte> in, std::size_t olen, const post_options& o);
    // Writes a command into a slot without waiting (for multi-slot tests).
    void post(unsigned slot, std::span<const std::byte> in, std::size_t olen, bool ring,
              std::uint8_t token = 0, std::optional<std::uint32_t> corrupt_block = {});
    bool owned(unsigned slot);
    bool wait_slot(unsigned slot, std::chrono::milliseconds timeout);
    cmd_result collect(unsigned slot, std::size_t olen);

    // A command input of the layout's size with opcode (and op_mod) set.
    template <typename In>
    static std::vector<std::byte> input(hw::cmd_opcode op, std::uint16_t op_mod = 0,
                                        std::size_t extra = 0) {
        std::vector<std::byte> in(In::size_bytes + extra);
        ifc::set<typename In::opcode>(in.data(), static_cast<std::uint32_t>(op));
        ifc::set<typename In::op_mod>(in.data(), op_mod);
        return in;
    }
    cmd_result simple(hw::cmd_opcode op, std::uint16_t op_mod = 0, std::size_t olen = 16);

    // The bring-up a driver does, step by step (PRM order). Each returns the result of
    // its last command.
    cmd_result enable_hca();
    cmd_result give_pages(std::uint16_t query_op_mod);  // QUERY_PAGES + MANAGE_PAGES
    // MANAGE_PAGES with `op_mod` and `n` fresh pages, on the last slot (as drivers send it).
    cmd_result manage_pages(std::uint16_t op_mod, std::uint32_t n);
    cmd_result set_issi(unsigned issi);
    cmd_result init_hca();
    bool bring_up();  // boot .. INIT_HCA, all successful
    // The same with SET_HCA_CAP's disable_link_up set before INIT_HCA (the current
    // capabilities as queried, that one bit changed): the link stays down after INIT_HCA.
    bool bring_up_link_disabled();
    // QUERY_VPORT_STATE (the vNIC's vport): 1 up (the port is ACTIVE), 0 down; -1 when
    // the command fails.
    int vport_state();
    // Polls vport_state() until the port is ACTIVE (its link trains after INIT_HCA).
    bool wait_port_active(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    std::uint32_t alloc_uar();

    // An EQ on `uar` subscribed to `bitmask` bits, signalling `vector` (an eventfd this
    // harness registers). Returns eqn or 0.
    struct eq {
        std::uint32_t eqn = 0;
        std::unique_ptr<dma_buffer> buf;
        unsigned log_size = 0;
        std::uint32_t ci = 0;
        int fd = -1;
        std::uint32_t uar = 0;
    };
    cmd_result create_eq(eq& e, std::uint32_t uar, unsigned log_size, std::uint64_t bitmask,
                         unsigned vector);
    void arm_eq(const eq& e);
    // The next EQE if the device has handed it over (owner bit), consuming it.
    std::optional<std::vector<std::byte>> next_eqe(eq& e);
    // Polls next_eqe for up to `timeout`.
    std::optional<std::vector<std::byte>> wait_eqe(eq& e, std::chrono::milliseconds timeout = std::chrono::seconds(1));
    std::uint64_t read_eventfd(int fd);  // 0 when nothing pending

    std::uint64_t next_iova(std::size_t size);
    dma_buffer& alloc(std::size_t size);
    dma_buffer& last_buffer() { return *buffers_.back(); }

private:
    std::unique_ptr<sim::device> dev_;
    std::unique_ptr<dma_buffer> cmdq_;
    std::vector<std::unique_ptr<dma_buffer>> buffers_;
    std::vector<int> fds_;
    std::uint64_t iova_next_ = 0x100000;
};

using H = harness;  // the tests' short name

}  // namespace cxv::test
