// ACCESS_REG through rdma-core's mlx5 VFIO provider (Debian's libmlx5.so.1, unmodified)
// with mlx5dv_devx_general_cmd, as a third-party program sends it: a PAOS write whose own
// output carries admin_status and oper_status, with ase 0 and 1; PPCNT and PCAM reads;
// refusals come back as EREMOTEIO with the PRM status and syndrome in the output.
#include <chrono>
#include <thread>

#include "hw/registers.h"
#include "tests/vfio/devx_common.h"

namespace cxv::test::vfio {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kWrite = 0, kRead = 1;  // ACCESS_REGISTER op_mod (PRM)

// ACCESS_REG of `id` with `reg` as register_data; room for the whole register back.
result access(ibv_context* ctx, std::uint16_t op_mod, hw::reg_id id, const std::vector<std::byte>& reg) {
    auto in = input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, op_mod, reg.size());
    ifc::set<ifc::access_register_in::register_id>(in.data(), static_cast<std::uint32_t>(id));
    std::memcpy(ifc::at<ifc::access_register_in::register_data>(in.data()), reg.data(), reg.size());
    return general_cmd(ctx, in, ifc::access_register_out::size_bytes + reg.size());
}

const std::byte* reg_of(const result& r) { return ifc::at<ifc::access_register_out::register_data>(r.data()); }

std::vector<std::byte> paos_bytes(std::uint32_t admin, bool ase) {
    using R = ifc::paos_reg;
    std::vector<std::byte> b(R::size_bytes);
    ifc::set<R::local_port>(b.data(), 1);
    ifc::set<R::admin_status>(b.data(), admin);
    ifc::set<R::ase>(b.data(), ase ? 1 : 0);
    return b;
}

std::uint32_t admin_of(const result& r) { return ifc::get<ifc::paos_reg::admin_status>(reg_of(r)); }
std::uint32_t oper_of(const result& r) { return ifc::get<ifc::paos_reg::oper_status>(reg_of(r)); }

std::vector<std::byte> ppcnt(std::uint32_t grp, bool clr = false) {
    using R = ifc::ppcnt_reg;
    std::vector<std::byte> b(R::size_bytes);
    ifc::set<R::local_port>(b.data(), 1);
    ifc::set<R::grp>(b.data(), grp);
    ifc::set<R::clr>(b.data(), clr ? 1 : 0);
    return b;
}

std::uint64_t time_since_clear(const result& r) {
    using G = ifc::phys_layer_cntrs;
    const std::byte* set = ifc::at<ifc::ppcnt_reg::counter_set>(reg_of(r));
    return std::uint64_t{ifc::get<G::time_since_last_clear_high>(set)} << 32 |
           ifc::get<G::time_since_last_clear_low>(set);
}

TEST_CASE("devx: PAOS writes answer with admin_status and oper_status in their own output") {
    device d(kBdf[0]);
    ibv_context* ctx = d.ctx();
    // Link trained at open: up, up.
    const auto until_oper = [&](std::uint32_t oper) {
        const auto end = std::chrono::steady_clock::now() + 5s;
        result r;
        do {
            r = access(ctx, kRead, hw::reg_id::PAOS, paos_bytes(0, false));
            REQUIRE_MESSAGE(r.ok(), describe(cmd_opcode::ACCESS_REG, r));
            if (oper_of(r) == oper) return true;
            std::this_thread::sleep_for(2ms);
        } while (std::chrono::steady_clock::now() < end);
        return false;
    };
    REQUIRE(wait_port_active(ctx));  // the link trained after bring-up, and the SM swept it

    // ase 0: the write takes nothing and answers with the register as it stands.
    result w = access(ctx, kWrite, hw::reg_id::PAOS, paos_bytes(2, false));
    REQUIRE_MESSAGE(w.ok(), describe(cmd_opcode::ACCESS_REG, w));
    CHECK(admin_of(w) == 1);
    CHECK(oper_of(w) == 1);
    CHECK(ifc::get<ifc::paos_reg::local_port>(reg_of(w)) == 1);
    CHECK(port_state(ctx) == kPortActive);

    // ase 1, down: down at once, in the write's output.
    w = access(ctx, kWrite, hw::reg_id::PAOS, paos_bytes(2, true));
    REQUIRE_MESSAGE(w.ok(), describe(cmd_opcode::ACCESS_REG, w));
    CHECK(admin_of(w) == 2);
    CHECK(oper_of(w) == 2);
    CHECK(port_state(ctx) == kPortDown);

    // ase 0 with admin up: still down.
    w = access(ctx, kWrite, hw::reg_id::PAOS, paos_bytes(1, false));
    REQUIRE(w.ok());
    CHECK(admin_of(w) == 2);
    CHECK(oper_of(w) == 2);

    // ase 1, up: admin up in the output; oper follows once the link is up.
    w = access(ctx, kWrite, hw::reg_id::PAOS, paos_bytes(1, true));
    REQUIRE(w.ok());
    CHECK(admin_of(w) == 1);
    CHECK(oper_of(w) == 2);  // the link trains first
    CHECK(until_oper(1));
    CHECK(wait_port_active(ctx));

    // An admin_status the PRM does not define: refused, nothing changes.
    const result bad = access(ctx, kWrite, hw::reg_id::PAOS, paos_bytes(5, true));
    CHECK(bad.err == EREMOTEIO);
    CHECK(bad.status() == cmd_status::BAD_PARAM);
    CHECK(bad.syndrome() == cmd_syndrome::BAD_PARAMETER);
    CHECK(until_oper(1));
}

TEST_CASE("devx: PPCNT groups and clr, PCAM, and an unknown register") {
    device d(kBdf[0]);
    ibv_context* ctx = d.ctx();
    for (const std::uint32_t grp : {0x0u, 0x1u, 0x2u, 0x10u, 0x12u, 0x20u}) {
        const result r = access(ctx, kRead, hw::reg_id::PPCNT, ppcnt(grp));
        REQUIRE_MESSAGE(r.ok(), fmt::format("grp 0x{:x}: {}", grp, describe(cmd_opcode::ACCESS_REG, r)));
        CHECK(ifc::get<ifc::ppcnt_reg::grp>(reg_of(r)) == grp);
        CHECK(ifc::get<ifc::ppcnt_reg::local_port>(reg_of(r)) == 1);
    }
    // The physical layer group's clock runs, and restarts on a clr write.
    std::this_thread::sleep_for(20ms);
    result r = access(ctx, kRead, hw::reg_id::PPCNT, ppcnt(0x12));
    REQUIRE(r.ok());
    CHECK(time_since_clear(r) >= 20);
    r = access(ctx, kWrite, hw::reg_id::PPCNT, ppcnt(0x12, true));
    REQUIRE(r.ok());
    CHECK(time_since_clear(r) < 20);
    // A group the model does not have (the extended Ethernet counters: PCAM announces none).
    r = access(ctx, kRead, hw::reg_id::PPCNT, ppcnt(0x5));
    CHECK(r.err == EREMOTEIO);
    CHECK(r.status() == cmd_status::BAD_PARAM);

    // PCAM: PPCNT, PAOS and PCAM itself among the registers (bit k: 0x5000 + k).
    r = access(ctx, kRead, hw::reg_id::PCAM, std::vector<std::byte>(ifc::pcam_reg::size_bytes));
    REQUIRE_MESSAGE(r.ok(), describe(cmd_opcode::ACCESS_REG, r));
    const std::byte* mask = ifc::at<ifc::pcam_reg::port_access_reg_cap_mask>(reg_of(r));
    CHECK(ifc::get<ifc::pcam_regs_5000_to_507f::ppcnt>(mask) == 1);
    const auto has = [&](unsigned k) { return (std::to_integer<unsigned>(mask[15 - k / 8]) >> (k % 8)) & 1; };
    CHECK(has(0x06) == 1);   // PAOS
    CHECK(has(0x7f) == 1);   // PCAM
    CHECK(has(0x01) == 1);   // PCAP (mlx5_ib sets an IB port's capability mask with it)
    CHECK(has(0x05) == 0);   // no register there
    CHECK(ifc::get<ifc::pcam_regs_5000_to_507f::pplm>(mask) == 0);
    // PCAM cannot be written.
    r = access(ctx, kWrite, hw::reg_id::PCAM, std::vector<std::byte>(ifc::pcam_reg::size_bytes));
    CHECK(r.err == EREMOTEIO);
    CHECK(r.status() == cmd_status::BAD_PARAM);
    CHECK(r.syndrome() == cmd_syndrome::READ_ONLY_REGISTER);

    // A register id no ConnectX has.
    auto in = input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, kRead, 16);
    ifc::set<ifc::access_register_in::register_id>(in.data(), 0x5a5a);
    r = general_cmd(ctx, in, 32);
    CHECK(r.err == EREMOTEIO);
    CHECK(r.status() == cmd_status::BAD_PARAM);
    CHECK(r.syndrome() == cmd_syndrome::BAD_REGISTER);
}

}  // namespace
}  // namespace cxv::test::vfio
