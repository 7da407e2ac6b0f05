// What the tests of rdma-core's mlx5 VFIO provider share: opening an emulated device the
// way an application does (mlx5dv_get_vfio_device_list + ibv_open_device), building
// command inputs with hw/ layouts, and running DevX commands with failures that name the
// PRM status and syndrome. The provider is Debian's libmlx5.so.1 (rdma-core 44),
// unmodified; the device is whatever `cxv-sim run` presents at the contract's default
// addresses.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "sim/syndromes.h"
#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "hw/printers.h"

namespace cxv::test::vfio {

namespace ifc = hw::ifc;
using hw::cmd_opcode;
using hw::cmd_status;
using sim::cmd_syndrome;

// `cxv-sim run --devices 2`: device i is 0000:c5:00.<i> (the contract's defaults).
inline constexpr const char* kBdf[] = {"0000:c5:00.0", "0000:c5:00.1"};

// The PRM's vendor and device IDs of the emulated ConnectX-6.
inline constexpr std::uint32_t kMellanox = 0x15b3;
inline constexpr std::uint32_t kConnectX6 = 0x101b;

// mlx5dv_get_vfio_device_list for one PCI address; nullptr (errno set) on failure.
inline ibv_device** vfio_list(const char* bdf, std::uint32_t flags = 0, std::uint64_t comp_mask = 0) {
    mlx5dv_vfio_context_attr attr{};
    attr.pci_name = bdf;
    attr.flags = flags;
    attr.comp_mask = comp_mask;
    errno = 0;
    return mlx5dv_get_vfio_device_list(&attr);
}

// One opened emulated device: the provider's whole bring-up has run when this exists.
class device {
public:
    explicit device(const char* bdf, std::uint32_t flags = 0) : bdf_(bdf) {
        list_ = vfio_list(bdf, flags);
        REQUIRE_MESSAGE(list_ != nullptr, "mlx5dv_get_vfio_device_list(", bdf, "): ", std::strerror(errno));
        REQUIRE(list_[0] != nullptr);
        errno = 0;
        ctx_ = ibv_open_device(list_[0]);
        REQUIRE_MESSAGE(ctx_ != nullptr, "ibv_open_device(", bdf, "): ", std::strerror(errno));
    }
    ~device() {
        if (ctx_) CHECK_MESSAGE(ibv_close_device(ctx_) == 0, "ibv_close_device(", bdf_, ")");
        if (list_) ibv_free_device_list(list_);
    }
    device(const device&) = delete;
    device& operator=(const device&) = delete;

    ibv_context* ctx() const { return ctx_; }
    const char* bdf() const { return bdf_; }

private:
    const char* bdf_;
    ibv_device** list_ = nullptr;
    ibv_context* ctx_ = nullptr;
};

// A command input of layout In (plus `extra` bytes) with opcode and op_mod set.
template <typename In>
std::vector<std::byte> input(cmd_opcode op, std::uint16_t op_mod = 0, std::size_t extra = 0) {
    std::vector<std::byte> in(In::size_bytes + extra);
    ifc::set<typename In::opcode>(in.data(), static_cast<std::uint32_t>(op));
    ifc::set<typename In::op_mod>(in.data(), op_mod);
    return in;
}

// The outcome of one command: the provider's return value (0, or EREMOTEIO when the
// device's status is not OK) and the output mailbox.
struct result {
    int err = 0;
    std::vector<std::byte> out;

    cmd_status status() const { return static_cast<cmd_status>(ifc::get<ifc::cmd_out::status>(out.data())); }
    cmd_syndrome syndrome() const {
        return static_cast<cmd_syndrome>(ifc::get<ifc::cmd_out::syndrome>(out.data()));
    }
    bool ok() const { return err == 0 && status() == cmd_status::OK; }
    const std::byte* data() const { return out.data(); }
};

// "OPCODE: err=N (strerror) status=NAME(0x..) syndrome=NAME(0x..)", for failure messages.
inline std::string describe(cmd_opcode op, const result& r) {
    return fmt::format("{}: err={} ({}) status={} syndrome={} [{}]", op, r.err, std::strerror(r.err), r.status(),
                       r.syndrome(), sim::describe(r.syndrome()));
}

inline cmd_opcode opcode_of(const std::vector<std::byte>& in) {
    return static_cast<cmd_opcode>(ifc::get<ifc::cmd_in::opcode>(in.data()));
}

// mlx5dv_devx_general_cmd: the mailbox goes to the device as is (slot 0).
inline result general_cmd(ibv_context* ctx, const std::vector<std::byte>& in, std::size_t outlen) {
    result r;
    r.out.assign(outlen, std::byte{0});
    r.err = mlx5dv_devx_general_cmd(ctx, in.data(), in.size(), r.out.data(), outlen);
    return r;
}

// The same, REQUIREd to succeed; the failure names the PRM status and syndrome.
inline result must(ibv_context* ctx, const std::vector<std::byte>& in, std::size_t outlen) {
    result r = general_cmd(ctx, in, outlen);
    REQUIRE_MESSAGE(r.ok(), describe(opcode_of(in), r));
    return r;
}

// QUERY_HCA_CAP of the general capabilities: current (op_mod 1) or maximum (op_mod 0).
inline std::vector<std::byte> query_general_caps(ibv_context* ctx, bool current) {
    auto in = input<ifc::query_hca_cap_in>(cmd_opcode::QUERY_HCA_CAP, current ? 1 : 0);
    const result r = must(ctx, in, ifc::query_hca_cap_out::size_bytes);
    const std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(r.data());
    return {cap, cap + ifc::cmd_hca_cap::size_bytes};
}

// QUERY_HCA_VPORT_CONTEXT of the caller's own vport on port 1 (PRM
// hca_vport_context): the port's state and LID, which ibv_query_port would report on a
// kernel provider.
inline std::vector<std::byte> query_vport(ibv_context* ctx) {
    auto in = input<ifc::query_hca_vport_context_in>(cmd_opcode::QUERY_HCA_VPORT_CONTEXT);
    ifc::set<ifc::query_hca_vport_context_in::port_num>(in.data(), 1);
    const result r = must(ctx, in, ifc::query_hca_vport_context_out::size_bytes);
    const std::byte* v = ifc::at<ifc::query_hca_vport_context_out::hca_vport_context>(r.data());
    return {v, v + ifc::hca_vport_context::size_bytes};
}

// IBTA PortInfo:PortState, as hca_vport_context reports it.
inline constexpr std::uint32_t kPortDown = 1, kPortInit = 2, kPortActive = 4;

inline std::uint32_t port_state(ibv_context* ctx) {
    return ifc::get<ifc::hca_vport_context::port_state>(query_vport(ctx).data());
}

// ACCESS_REG of PAOS on port 1: a write of admin_status (1 up, 2 down) with ase = 1, or
// a read. The register id is written out (0x5006), not taken from hw/.
inline result paos(ibv_context* ctx, bool write, std::uint32_t admin = 0) {
    using r = ifc::paos_reg;
    auto in = input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, write ? 0 : 1, r::size_bytes);
    ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5006);
    std::byte* reg = ifc::at<ifc::access_register_in::register_data>(in.data());
    ifc::set<r::local_port>(reg, 1);
    if (write) {
        ifc::set<r::admin_status>(reg, admin);
        ifc::set<r::ase>(reg, 1);
    }
    return must(ctx, in, ifc::access_register_out::size_bytes + r::size_bytes);
}

// The provider does not wait for the link after INIT_HCA (it trains for a while, and an
// InfiniBand port then waits for the SM): true once port 1 is ACTIVE, polled.
inline bool wait_port_active(ibv_context* ctx, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (port_state(ctx) != kPortActive) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// A page-aligned buffer (posix_memalign), zeroed, freed with free().
struct aligned_buffer {
    std::unique_ptr<std::byte, decltype(&std::free)> p{nullptr, &std::free};
    std::size_t size = 0;

    aligned_buffer(std::size_t align, std::size_t n) : size(n) {
        void* raw = nullptr;
        REQUIRE(posix_memalign(&raw, align, n) == 0);
        std::memset(raw, 0, n);
        p.reset(static_cast<std::byte*>(raw));
    }
    std::byte* get() const { return p.get(); }
};

}  // namespace cxv::test::vfio
