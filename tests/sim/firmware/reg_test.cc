// ACCESS_REG, every register the model implements, both directions, through the
// harness. The registers a test expects are built from Linux's mlx5_ifc.h (offsetof and
// sizeof on struct mlx5_ifc_<reg>_bits, one u8 per bit) with the bit writer of
// tests/sim/linux_ifc.h, and compared byte for byte with what the model answered: hw/'s
// layouts are not the only description in play.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>


#include <doctest/doctest.h>
#include <fmt/core.h>

#include "hw/registers.h"
#include "hw/wqe.h"
#include "tests/sim/linux_ifc.h"
#include "tests/sim/objects.h"

using namespace cxv;
using namespace cxv::test;
using namespace std::chrono_literals;

namespace {

// --- Linux's description of the registers -------------------------------------------

// A 64-bit PPCNT counter (_high and _low) of counter group `grp` inside ppcnt_reg.
#define LINUX_COUNTER(grp, b, fld)                                                                    \
    ((CXV_LINUX_GET(grp, b, fld##_high) << 32) | CXV_LINUX_GET(grp, b, fld##_low))

// A PPCNT register's counter_set as a buffer of its own (the group's layout starts there).
std::vector<std::byte> counter_set(const std::vector<std::byte>& ppcnt) {
    const std::size_t at = CXV_LINUX_OFF(ppcnt_reg, counter_set) / 8;
    return {ppcnt.begin() + static_cast<std::ptrdiff_t>(at), ppcnt.end()};
}

// --- ACCESS_REG through the harness --------------------------------------------------

constexpr std::uint16_t kWrite = 0, kRead = 1;  // PRM op_mod, written out here on purpose

struct reg_reply {
    cmd_result r;
    std::vector<std::byte> reg;  // the output's register_data (reg_bytes of it)
};

// ACCESS_REG of register `id` with `reg` as register_data; the output has room for
// out_bytes of register (default: all of it).
reg_reply access(harness& h, std::uint16_t op_mod, std::uint16_t id, const std::vector<std::byte>& reg,
                 std::size_t out_bytes = SIZE_MAX) {
    if (out_bytes == SIZE_MAX) out_bytes = reg.size();
    auto in = H::input<ifc::access_register_in>(cmd_opcode::ACCESS_REG, op_mod, reg.size());
    ifc::set<ifc::access_register_in::register_id>(in.data(), id);
    std::memcpy(in.data() + 16, reg.data(), reg.size());  // register_data: PRM offset 0x10
    reg_reply rr;
    rr.r = h.exec(in, 16 + out_bytes);
    if (rr.r.out.size() >= 16) rr.reg.assign(rr.r.out.begin() + 16, rr.r.out.end());
    return rr;
}

std::uint16_t id(hw::reg_id r) { return static_cast<std::uint16_t>(r); }

std::vector<std::byte> paos(unsigned admin, bool ase, unsigned e = 0, bool ee = false, unsigned port = 1) {
    std::vector<std::byte> b(CXV_LINUX_BYTES(paos_reg));
    CXV_LINUX_SET(paos_reg, b, local_port, port);
    CXV_LINUX_SET(paos_reg, b, admin_status, admin);
    CXV_LINUX_SET(paos_reg, b, ase, ase);
    CXV_LINUX_SET(paos_reg, b, e, e);
    CXV_LINUX_SET(paos_reg, b, ee, ee);
    return b;
}

// What PAOS must read as: the index and the state, nothing else.
std::vector<std::byte> paos_expected(unsigned admin, unsigned oper, unsigned e = 0) {
    std::vector<std::byte> b(CXV_LINUX_BYTES(paos_reg));
    CXV_LINUX_SET(paos_reg, b, local_port, 1);
    CXV_LINUX_SET(paos_reg, b, admin_status, admin);
    CXV_LINUX_SET(paos_reg, b, oper_status, oper);
    CXV_LINUX_SET(paos_reg, b, e, e);
    return b;
}

std::vector<std::byte> with_port(std::size_t bytes, std::size_t port_off) {
    std::vector<std::byte> b(bytes);
    linux_put(b, port_off, 8, 1);
    return b;
}

void check_ok(const reg_reply& rr) {
    CHECK_MESSAGE(rr.r.status == cmd_status::OK,
                  fmt::format("status 0x{:x} syndrome 0x{:x}", static_cast<unsigned>(rr.r.status), rr.r.syndrome));
}

// Reads PAOS until oper_status is `oper` (the link trains after an admin up).
bool wait_oper(harness& h, unsigned oper) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < end) {
        const auto rr = access(h, kRead, id(hw::reg_id::PAOS), paos(0, false));
        if (rr.r.status == cmd_status::OK && CXV_LINUX_GET(paos_reg, rr.reg, oper_status) == oper) return true;
        std::this_thread::sleep_for(2ms);
    }
    return false;
}

}  // namespace

TEST_CASE("PAOS: a write answers with the port's state; ase 0 changes nothing, ase 1 sets admin_status") {
    H h;
    REQUIRE(h.bring_up());
    const auto paos_id = id(hw::reg_id::PAOS);
    REQUIRE(wait_oper(h, 1));

    // ase 0: admin_status is not taken, the answer is the register as it stands.
    auto rr = access(h, kWrite, paos_id, paos(2, false));
    check_ok(rr);
    CHECK(rr.reg == paos_expected(1, 1));

    // ase 1, down: admin and oper down at once, in the write's own output.
    rr = access(h, kWrite, paos_id, paos(2, true));
    check_ok(rr);
    CHECK(rr.reg == paos_expected(2, 2));
    CHECK(access(h, kRead, paos_id, paos(0, false)).reg == paos_expected(2, 2));

    // ase 0 with admin up: still down.
    rr = access(h, kWrite, paos_id, paos(1, false));
    check_ok(rr);
    CHECK(rr.reg == paos_expected(2, 2));

    // ase 1, up: admin up in the answer; oper follows when the link is up.
    rr = access(h, kWrite, paos_id, paos(1, true));
    check_ok(rr);
    CHECK(CXV_LINUX_GET(paos_reg, rr.reg, admin_status) == 1);
    const auto oper = CXV_LINUX_GET(paos_reg, rr.reg, oper_status);
    CHECK((oper == 1 || oper == 2));
    CHECK(CXV_LINUX_GET(paos_reg, rr.reg, local_port) == 1);
    REQUIRE(wait_oper(h, 1));
    CHECK(access(h, kRead, paos_id, paos(0, false)).reg == paos_expected(1, 1));

    // e is taken with ee only, kept, and returned.
    rr = access(h, kWrite, paos_id, paos(0, false, 1, true));
    check_ok(rr);
    CHECK(rr.reg == paos_expected(1, 1, 1));
    rr = access(h, kWrite, paos_id, paos(0, false, 2, false));
    CHECK(rr.reg == paos_expected(1, 1, 1));
    CHECK(access(h, kRead, paos_id, paos(0, false)).reg == paos_expected(1, 1, 1));

    // Out-of-range values are refused and change nothing.
    check_status(access(h, kWrite, paos_id, paos(3, true)).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(access(h, kWrite, paos_id, paos(0, true)).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(access(h, kWrite, paos_id, paos(2, true, 3, true)).r, cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    CHECK(access(h, kRead, paos_id, paos(0, false)).reg == paos_expected(1, 1, 1));
    check_status(access(h, kRead, paos_id, paos(0, false, 0, false, 2)).r, cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PORT);
    check_status(access(h, kWrite, paos_id, paos(2, true, 0, false, 0)).r, cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PORT);
    CHECK(access(h, kRead, paos_id, paos(0, false)).reg == paos_expected(1, 1, 1));
}

TEST_CASE("ACCESS_REG refuses unknown registers, short inputs and outputs, bad op_mods and read-only writes") {
    H h;
    REQUIRE(h.bring_up());
    for (const std::uint16_t unknown : {0x0000, 0x5005, 0x5007, 0x9999, 0xffff}) {
        INFO("register 0x", std::hex, unknown);
        for (const std::uint16_t op : {kRead, kWrite}) {
            check_status(access(h, op, unknown, std::vector<std::byte>(64)).r, cmd_status::BAD_PARAM,
                         cmd_syndrome::BAD_REGISTER);
        }
    }
    const auto paos_id = id(hw::reg_id::PAOS);
    // The register in the input, and room for it in the output, in both directions.
    for (const std::uint16_t op : {kRead, kWrite}) {
        auto shortin = paos(2, true);
        shortin.resize(8);
        check_status(access(h, op, paos_id, shortin, 16).r, cmd_status::BAD_INPUT_LEN, cmd_syndrome::INPUT_TOO_SHORT);
        check_status(access(h, op, paos_id, paos(2, true), 8).r, cmd_status::BAD_OUTPUT_LEN,
                     cmd_syndrome::OUTPUT_TOO_SHORT);
        check_status(access(h, op, paos_id, paos(2, true), 0).r, cmd_status::BAD_OUTPUT_LEN,
                     cmd_syndrome::OUTPUT_TOO_SHORT);
    }
    CHECK(wait_oper(h, 1));  // none of the refused writes took the port down
    check_status(access(h, 2, paos_id, paos(0, false)).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_OP_MOD);
    // Capability masks and the module mapping are read-only.
    check_status(access(h, kWrite, id(hw::reg_id::PCAM), std::vector<std::byte>(CXV_LINUX_BYTES(pcam_reg))).r,
                 cmd_status::BAD_PARAM, cmd_syndrome::READ_ONLY_REGISTER);
    check_status(access(h, kWrite, id(hw::reg_id::MCAM), std::vector<std::byte>(CXV_LINUX_BYTES(mcam_reg))).r,
                 cmd_status::BAD_PARAM, cmd_syndrome::READ_ONLY_REGISTER);
    check_status(access(h, kWrite, id(hw::reg_id::PMLP), with_port(CXV_LINUX_BYTES(pmlp_reg), CXV_LINUX_OFF(pmlp_reg, local_port))).r,
                 cmd_status::BAD_PARAM, cmd_syndrome::READ_ONLY_REGISTER);
    // Every port register names local port 1.
    for (const auto& [r, bytes, off] :
         {std::tuple{hw::reg_id::PTYS, CXV_LINUX_BYTES(ptys_reg), CXV_LINUX_OFF(ptys_reg, local_port)},
          std::tuple{hw::reg_id::PMTU, CXV_LINUX_BYTES(pmtu_reg), CXV_LINUX_OFF(pmtu_reg, local_port)},
          std::tuple{hw::reg_id::PPCNT, CXV_LINUX_BYTES(ppcnt_reg), CXV_LINUX_OFF(ppcnt_reg, local_port)},
          std::tuple{hw::reg_id::PCMR, CXV_LINUX_BYTES(pcmr_reg), CXV_LINUX_OFF(pcmr_reg, local_port)},
          std::tuple{hw::reg_id::PMLP, CXV_LINUX_BYTES(pmlp_reg), CXV_LINUX_OFF(pmlp_reg, local_port)}}) {
        INFO("register 0x", std::hex, id(r));
        auto b = std::vector<std::byte>(bytes);
        linux_put(b, off, 8, 3);
        check_status(access(h, kRead, id(r), b).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PORT);
        linux_put(b, off, 8, 1);
        check_ok(access(h, kRead, id(r), b));
    }
}

TEST_CASE("PTYS, PMTU and HOST_ENDIANNESS answer reads and writes with the register as it stands") {
    SUBCASE("InfiniBand: 4x EDR") {
        H h;
        REQUIRE(h.bring_up());
        REQUIRE(wait_oper(h, 1));
        std::vector<std::byte> want(CXV_LINUX_BYTES(ptys_reg));
        CXV_LINUX_SET(ptys_reg, want, local_port, 1);
        CXV_LINUX_SET(ptys_reg, want, proto_mask, 1);  // MLX5_PTYS_IB
        CXV_LINUX_SET(ptys_reg, want, data_rate_oper, 1000);
        CXV_LINUX_SET(ptys_reg, want, ib_link_width_capability, 1u << 2);  // MLX5_PTYS_WIDTH_4X
        CXV_LINUX_SET(ptys_reg, want, ib_proto_capability, 1u << 5);       // EDR
        CXV_LINUX_SET(ptys_reg, want, ib_link_width_admin, 1u << 2);
        CXV_LINUX_SET(ptys_reg, want, ib_proto_admin, 1u << 5);
        CXV_LINUX_SET(ptys_reg, want, ib_link_width_oper, 1u << 2);
        CXV_LINUX_SET(ptys_reg, want, ib_proto_oper, 1u << 5);
        auto q = with_port(CXV_LINUX_BYTES(ptys_reg), CXV_LINUX_OFF(ptys_reg, local_port));
        CXV_LINUX_SET(ptys_reg, q, proto_mask, 1);
        auto rr = access(h, kRead, id(hw::reg_id::PTYS), q);
        check_ok(rr);
        CHECK(rr.reg == want);
        auto w = q;
        CXV_LINUX_SET(ptys_reg, w, ib_link_width_admin, 1u << 2);
        CXV_LINUX_SET(ptys_reg, w, ib_proto_admin, 1u << 5);
        rr = access(h, kWrite, id(hw::reg_id::PTYS), w);
        check_ok(rr);
        CHECK(rr.reg == want);
        CXV_LINUX_SET(ptys_reg, w, ib_proto_admin, 1u << 0);  // SDR: not a speed of this port
        check_status(access(h, kWrite, id(hw::reg_id::PTYS), w).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
        CXV_LINUX_SET(ptys_reg, w, ib_proto_admin, 1u << 5);
        CXV_LINUX_SET(ptys_reg, w, proto_mask, 4);  // Ethernet, on an InfiniBand port
        check_status(access(h, kWrite, id(hw::reg_id::PTYS), w).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);

        // PMTU: 4096 at most; a write answers with the new admin and oper MTU.
        std::vector<std::byte> mtu = with_port(CXV_LINUX_BYTES(pmtu_reg), CXV_LINUX_OFF(pmtu_reg, local_port));
        CXV_LINUX_SET(pmtu_reg, mtu, admin_mtu, 2048);
        std::vector<std::byte> mwant = with_port(CXV_LINUX_BYTES(pmtu_reg), CXV_LINUX_OFF(pmtu_reg, local_port));
        CXV_LINUX_SET(pmtu_reg, mwant, max_mtu, 4096);
        CXV_LINUX_SET(pmtu_reg, mwant, admin_mtu, 2048);
        CXV_LINUX_SET(pmtu_reg, mwant, oper_mtu, 2048);
        rr = access(h, kWrite, id(hw::reg_id::PMTU), mtu);
        check_ok(rr);
        CHECK(rr.reg == mwant);
        CHECK(access(h, kRead, id(hw::reg_id::PMTU), with_port(CXV_LINUX_BYTES(pmtu_reg), CXV_LINUX_OFF(pmtu_reg, local_port))).reg ==
              mwant);
        CXV_LINUX_SET(pmtu_reg, mtu, admin_mtu, 4097);
        check_status(access(h, kWrite, id(hw::reg_id::PMTU), mtu).r, cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
        CXV_LINUX_SET(pmtu_reg, mtu, admin_mtu, 0);
        check_status(access(h, kWrite, id(hw::reg_id::PMTU), mtu).r, cmd_status::BAD_PARAM, cmd_syndrome::EXCEEDS_LIMIT);
        CHECK(access(h, kRead, id(hw::reg_id::PMTU), mtu).reg == mwant);

        // HOST_ENDIANNESS: he as written.
        std::vector<std::byte> he(CXV_LINUX_BYTES(register_host_endianness));
        CXV_LINUX_SET(register_host_endianness, he, he, 1);
        rr = access(h, kWrite, id(hw::reg_id::HOST_ENDIANNESS), he);
        check_ok(rr);
        CHECK(rr.reg == he);
        CHECK(access(h, kRead, id(hw::reg_id::HOST_ENDIANNESS), std::vector<std::byte>(16)).reg == he);
        CXV_LINUX_SET(register_host_endianness, he, he, 0);
        rr = access(h, kWrite, id(hw::reg_id::HOST_ENDIANNESS), he);
        CHECK(rr.reg == std::vector<std::byte>(16));
    }
    SUBCASE("Ethernet: 100GBASE-CR4, down while the port is down") {
        H h(ethernet());
        REQUIRE(h.bring_up());
        REQUIRE(wait_oper(h, 1));
        auto q = with_port(CXV_LINUX_BYTES(ptys_reg), CXV_LINUX_OFF(ptys_reg, local_port));
        CXV_LINUX_SET(ptys_reg, q, proto_mask, 4);  // MLX5_PTYS_EN
        std::vector<std::byte> want = with_port(CXV_LINUX_BYTES(ptys_reg), CXV_LINUX_OFF(ptys_reg, local_port));
        CXV_LINUX_SET(ptys_reg, want, proto_mask, 4);
        CXV_LINUX_SET(ptys_reg, want, data_rate_oper, 1000);
        CXV_LINUX_SET(ptys_reg, want, eth_proto_capability, 1u << 20);  // MLX5E_100GBASE_CR4
        CXV_LINUX_SET(ptys_reg, want, eth_proto_admin, 1u << 20);
        CXV_LINUX_SET(ptys_reg, want, eth_proto_oper, 1u << 20);
        CHECK(access(h, kRead, id(hw::reg_id::PTYS), q).reg == want);
        check_ok(access(h, kWrite, id(hw::reg_id::PAOS), paos(2, true)));
        CXV_LINUX_SET(ptys_reg, want, data_rate_oper, 0);
        CXV_LINUX_SET(ptys_reg, want, eth_proto_oper, 0);
        CHECK(access(h, kRead, id(hw::reg_id::PTYS), q).reg == want);
        auto w = q;
        CXV_LINUX_SET(ptys_reg, w, eth_proto_admin, 1u << 21);  // 100GBASE-SR4: not this port's
        check_status(access(h, kWrite, id(hw::reg_id::PTYS), w).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
        std::vector<std::byte> mtu = with_port(CXV_LINUX_BYTES(pmtu_reg), CXV_LINUX_OFF(pmtu_reg, local_port));
        CHECK(CXV_LINUX_GET(pmtu_reg, access(h, kRead, id(hw::reg_id::PMTU), mtu).reg, max_mtu) == 9216);
    }
}

TEST_CASE("PCAM and MCAM report exactly the registers the model implements") {
    H h;
    REQUIRE(h.bring_up());
    auto rr = access(h, kRead, id(hw::reg_id::PCAM), std::vector<std::byte>(CXV_LINUX_BYTES(pcam_reg)));
    check_ok(rr);
    std::vector<std::byte> want(CXV_LINUX_BYTES(pcam_reg));
    // Bit k of the mask is register 0x5000 + k, counted from the mask's last bit (PRM
    // PCAM; Linux's regs_5000_to_507f.ppcnt sits where k = 8 does).
    const std::size_t mask_end = CXV_LINUX_OFF(pcam_reg, port_access_reg_cap_mask) + 128 - 1;
    for (const unsigned k : {0x01u, 0x02u, 0x03u, 0x04u, 0x06u, 0x08u, 0x12u, 0x41u, 0x7fu}) linux_put(want, mask_end - k, 1, 1);
    CHECK(rr.reg == want);
    CHECK(linux_bits(rr.reg, CXV_LINUX_OFF(pcam_reg, port_access_reg_cap_mask) + CXV_LINUX_OFF(pcam_regs_5000_to_507f, ppcnt), 1) == 1);
    std::vector<std::byte> other(CXV_LINUX_BYTES(pcam_reg));
    CXV_LINUX_SET(pcam_reg, other, access_reg_group, 1);
    check_status(access(h, kRead, id(hw::reg_id::PCAM), other).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);

    // MCAM: group 0 holds MCAM itself (0x907f); groups 1 and 2 (0x9080-0x917f) nothing.
    for (unsigned g = 0; g < 3; ++g) {
        std::vector<std::byte> q(CXV_LINUX_BYTES(mcam_reg));
        CXV_LINUX_SET(mcam_reg, q, access_reg_group, g);
        rr = access(h, kRead, id(hw::reg_id::MCAM), q);
        check_ok(rr);
        std::vector<std::byte> m(CXV_LINUX_BYTES(mcam_reg));
        CXV_LINUX_SET(mcam_reg, m, access_reg_group, g);
        if (g == 0) linux_put(m, CXV_LINUX_OFF(mcam_reg, mng_access_reg_cap_mask) + 128 - 1 - 0x7f, 1, 1);
        CHECK(rr.reg == m);
    }
    std::vector<std::byte> q(CXV_LINUX_BYTES(mcam_reg));
    CXV_LINUX_SET(mcam_reg, q, access_reg_group, 3);
    check_status(access(h, kRead, id(hw::reg_id::MCAM), q).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
}

TEST_CASE("PCMR: FCS checking offered, on by default, turned off and on again (Linux's rx-fcs); no entropy or "
          "timestamp control") {
    H h;
    REQUIRE(h.bring_up());
    const auto pcmr_id = id(hw::reg_id::PCMR);
    auto q = with_port(CXV_LINUX_BYTES(pcmr_reg), CXV_LINUX_OFF(pcmr_reg, local_port));
    auto rr = access(h, kRead, pcmr_id, q);
    check_ok(rr);
    std::vector<std::byte> want(CXV_LINUX_BYTES(pcmr_reg));
    CXV_LINUX_SET(pcmr_reg, want, local_port, 1);
    CXV_LINUX_SET(pcmr_reg, want, fcs_cap, 1);
    CXV_LINUX_SET(pcmr_reg, want, fcs_chk, 1);
    CHECK(rr.reg == want);
    // mlx5_set_port_fcs(mdev, 0): a write of fcs_chk 0 (port.c), then read back.
    auto w = q;
    CXV_LINUX_SET(pcmr_reg, w, fcs_chk, 0);
    check_ok(access(h, kWrite, pcmr_id, w));
    rr = access(h, kRead, pcmr_id, q);
    check_ok(rr);
    CHECK(CXV_LINUX_GET(pcmr_reg, rr.reg, fcs_chk) == 0);
    CHECK(CXV_LINUX_GET(pcmr_reg, rr.reg, fcs_cap) == 1);
    CHECK(CXV_LINUX_GET(pcmr_reg, rr.reg, entropy_calc_cap) == 0);
    CXV_LINUX_SET(pcmr_reg, w, fcs_chk, 1);
    check_ok(access(h, kWrite, pcmr_id, w));
    CHECK(CXV_LINUX_GET(pcmr_reg, access(h, kRead, pcmr_id, q).reg, fcs_chk) == 1);
}

TEST_CASE("PMLP and PMAOS: the port's one module, its lanes and its admin state") {
    H h;
    REQUIRE(h.bring_up());
    auto rr = access(h, kRead, id(hw::reg_id::PMLP), with_port(CXV_LINUX_BYTES(pmlp_reg), CXV_LINUX_OFF(pmlp_reg, local_port)));
    check_ok(rr);
    std::vector<std::byte> want = with_port(CXV_LINUX_BYTES(pmlp_reg), CXV_LINUX_OFF(pmlp_reg, local_port));
    CXV_LINUX_SET(pmlp_reg, want, width, 4);
    const std::size_t lanes[] = {CXV_LINUX_OFF(pmlp_reg, lane0_module_mapping), CXV_LINUX_OFF(pmlp_reg, lane1_module_mapping),
                                 CXV_LINUX_OFF(pmlp_reg, lane2_module_mapping), CXV_LINUX_OFF(pmlp_reg, lane3_module_mapping)};
    for (unsigned i = 0; i < 4; ++i) {
        linux_put(want, lanes[i] + CXV_LINUX_OFF(lane_2_module_mapping, module), 8, 0);
        linux_put(want, lanes[i] + CXV_LINUX_OFF(lane_2_module_mapping, tx_lane), 4, i);
        linux_put(want, lanes[i] + CXV_LINUX_OFF(lane_2_module_mapping, rx_lane), 4, i);
    }
    CHECK(rr.reg == want);

    const auto pmaos_id = id(hw::reg_id::PMAOS);
    const auto pmaos = [](unsigned admin, bool ase, unsigned e = 0, bool ee = false, unsigned module = 0) {
        std::vector<std::byte> b(CXV_LINUX_BYTES(pmaos_reg));
        CXV_LINUX_SET(pmaos_reg, b, module, module);
        CXV_LINUX_SET(pmaos_reg, b, admin_status, admin);
        CXV_LINUX_SET(pmaos_reg, b, ase, ase);
        CXV_LINUX_SET(pmaos_reg, b, ee, ee);
        CXV_LINUX_SET(pmaos_reg, b, e, e);
        return b;
    };
    const auto expected = [](unsigned admin, unsigned oper, unsigned e) {
        std::vector<std::byte> b(CXV_LINUX_BYTES(pmaos_reg));
        CXV_LINUX_SET(pmaos_reg, b, admin_status, admin);
        CXV_LINUX_SET(pmaos_reg, b, oper_status, oper);
        CXV_LINUX_SET(pmaos_reg, b, e, e);
        return b;
    };
    CHECK(access(h, kRead, pmaos_id, pmaos(0, false)).reg == expected(1, 1, 0));  // enabled, plugged
    rr = access(h, kWrite, pmaos_id, pmaos(2, false));  // ase 0: nothing
    check_ok(rr);
    CHECK(rr.reg == expected(1, 1, 0));
    rr = access(h, kWrite, pmaos_id, pmaos(2, true, 2, true));  // disabled: plugged, disabled
    check_ok(rr);
    CHECK(rr.reg == expected(2, 4, 2));
    CHECK(access(h, kRead, pmaos_id, pmaos(0, false)).reg == expected(2, 4, 2));
    rr = access(h, kWrite, pmaos_id, pmaos(1, true));
    CHECK(rr.reg == expected(1, 1, 2));
    check_status(access(h, kWrite, pmaos_id, pmaos(4, true)).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(access(h, kWrite, pmaos_id, pmaos(0, true)).r, cmd_status::BAD_PARAM, cmd_syndrome::BAD_PARAMETER);
    check_status(access(h, kWrite, pmaos_id, pmaos(2, true, 3, true)).r, cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    check_status(access(h, kRead, pmaos_id, pmaos(0, false, 0, false, 1)).r, cmd_status::BAD_PARAM,
                 cmd_syndrome::BAD_PARAMETER);
    CHECK(access(h, kRead, pmaos_id, pmaos(0, false)).reg == expected(1, 1, 2));
}

// --- PPCNT after traffic ----------------------------------------------------------------

namespace {

using qpc = ifc::qpc;
using ads = ifc::ads;

std::vector<std::byte> ppcnt_query(std::uint32_t grp, std::uint32_t prio = 0, bool clr = false) {
    std::vector<std::byte> b(CXV_LINUX_BYTES(ppcnt_reg));
    CXV_LINUX_SET(ppcnt_reg, b, local_port, 1);
    CXV_LINUX_SET(ppcnt_reg, b, grp, grp);
    CXV_LINUX_SET(ppcnt_reg, b, prio_tc, prio);
    CXV_LINUX_SET(ppcnt_reg, b, clr, clr);
    return b;
}

std::vector<std::byte> ppcnt(harness& h, std::uint32_t grp, std::uint32_t prio = 0, bool clr = false,
                             std::uint16_t op = kRead) {
    auto rr = access(h, op, id(hw::reg_id::PPCNT), ppcnt_query(grp, prio, clr));
    REQUIRE(rr.r.status == cmd_status::OK);
    CHECK(CXV_LINUX_GET(ppcnt_reg, rr.reg, local_port) == 1);
    CHECK(CXV_LINUX_GET(ppcnt_reg, rr.reg, grp) == grp);
    CHECK(CXV_LINUX_GET(ppcnt_reg, rr.reg, prio_tc) == prio);
    return rr.reg;
}

std::uint64_t frames_sent(harness& h) {
    return LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, counter_set(ppcnt(h, 0x0)), a_frames_transmitted_ok);
}

// An RC QP connected to itself through the port (loopback on the fabric), path MTU 256,
// and a key over `mem` that it may write remotely.
struct loopback {
    qp_env e;
    std::uint32_t qpn = 0;
    std::byte* qbuf = nullptr;      // RQ (16 x 64 bytes), then SQ (16 WQE-BBs)
    std::byte* dbr = nullptr;
    dma_buffer* mem = nullptr;
    std::uint32_t rkey = 0;
    std::uint32_t posted = 0;

    loopback() {
        auto in = e.qp_input(0);
        dma_buffer& buf = e.h.last_buffer();
        qbuf = buf.data();
        dbr = buf.data() + 4096;
        qpn = e.create_qp(in);
        mem = &e.h.alloc(4096);
        // An MTT key over the page, remote write allowed (PRM CREATE_MKEY).
        auto mk = H::input<ifc::create_mkey_in>(cmd_opcode::CREATE_MKEY, 0, 16);
        ifc::set<ifc::create_mkey_in::pg_access>(mk.data(), 1);
        ifc::set<ifc::create_mkey_in::translations_octword_actual_size>(mk.data(), 1);
        std::byte* m = ifc::at<ifc::create_mkey_in::memory_key_mkey_entry>(mk.data());
        ifc::set<ifc::mkc::access_mode_1_0>(m, 1);
        ifc::set<ifc::mkc::lr>(m, 1);
        ifc::set<ifc::mkc::lw>(m, 1);
        ifc::set<ifc::mkc::rw>(m, 1);
        ifc::set<ifc::mkc::qpn>(m, 0xffffff);
        ifc::set<ifc::mkc::mkey_7_0>(m, 0x33);
        ifc::set<ifc::mkc::pd>(m, e.pd);
        ifc::set<ifc::mkc::start_addr>(m, mem->iova());
        ifc::set<ifc::mkc::len>(m, 4096);
        ifc::set<ifc::mkc::log_page_size>(m, 12);
        ifc::set<ifc::mkc::translations_octword_size>(m, 1);
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(mk.data(), 0, static_cast<std::uint32_t>(mem->iova() >> 32));
        ifc::set<ifc::create_mkey_in::klm_pas_mtt>(mk.data(), 1, static_cast<std::uint32_t>(mem->iova()) | 3);
        const auto r = e.h.exec(mk, 16);
        REQUIRE(r.status == cmd_status::OK);
        rkey = (ifc::get<ifc::create_mkey_out::mkey_index>(r.out.data()) << 8) | 0x33;

        const std::uint32_t lid = sim::device_config{}.lid;
        for (const cmd_opcode op : {cmd_opcode::RST2INIT_QP, cmd_opcode::INIT2RTR_QP, cmd_opcode::RTR2RTS_QP}) {
            auto t = H::input<ifc::rst2init_qp_in>(op);
            ifc::set<ifc::rst2init_qp_in::qpn>(t.data(), qpn);
            std::byte* c = ifc::at<ifc::rst2init_qp_in::qpc>(t.data());
            std::byte* path = ifc::at<qpc::primary_address_path>(c);
            if (op == cmd_opcode::RST2INIT_QP) {
                ifc::set<ads::vhca_port_num>(path, 1);
                ifc::set<qpc::rwe>(c, 1);
            } else if (op == cmd_opcode::INIT2RTR_QP) {
                ifc::set<qpc::mtu>(c, 1);  // 256 bytes
                ifc::set<qpc::log_msg_max>(c, 30);
                ifc::set<qpc::remote_qpn>(c, qpn);
                ifc::set<ads::rlid>(path, lid);
                ifc::set<qpc::log_rra_max>(c, 2);
                ifc::set<qpc::min_rnr_nak>(c, 12);
            } else {
                ifc::set<qpc::retry_count>(c, 7);
                ifc::set<qpc::rnr_retry>(c, 7);
                ifc::set<qpc::log_sra_max>(c, 2);
                ifc::set<ads::ack_timeout>(path, 20);  // 4 s: no retransmission to count
            }
            REQUIRE(e.h.exec(t, 16).status == cmd_status::OK);
        }
    }

    // An RDMA WRITE of `len` bytes of inline data to the key's page: ctrl, raddr and
    // inline segments (PRM "Send WQE Format"), record, then the doorbell in the UAR
    // page's BlueFlame register.
    void write(std::size_t len) {
        const std::uint32_t at = posted & 15;
        std::byte* w = qbuf + 1024 + 64 * at;
        const std::size_t ds = (16 + 16 + 4 + len + 15) / 16;
        REQUIRE(ds * 16 <= 64 * (16 - at));  // no wrap in these tests
        std::memset(w, 0, ds * 16);
        const auto put32 = [](std::byte* p, std::uint32_t v) { const auto b = hw::to_be(v); std::memcpy(p, &b, 4); };
        put32(w, (posted & 0xffff) << 8 | 0x08);  // RDMA_WRITE
        put32(w + 4, qpn << 8 | static_cast<std::uint32_t>(ds));
        put32(w + 16, static_cast<std::uint32_t>(mem->iova() >> 32));
        put32(w + 20, static_cast<std::uint32_t>(mem->iova()));
        put32(w + 24, rkey);
        put32(w + 32, static_cast<std::uint32_t>(len) | 0x80000000u);
        for (std::size_t i = 0; i < len; ++i) w[36 + i] = static_cast<std::byte>(i);
        posted += static_cast<std::uint32_t>((ds * 16 + 63) / 64);
        put32(dbr + 4, posted & 0xffff);  // send counter
        std::uint64_t q0;
        std::memcpy(&q0, w, 8);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(e.h.bar() + e.uar * 4096 + 0x800))
            .store(q0, std::memory_order_release);
    }
};

// Waits until the port has sent `n` frames, then a little longer to see that no more come.
bool settle(harness& h, std::uint64_t n) {
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (frames_sent(h) < n && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    return frames_sent(h) == n;
}

}  // namespace

TEST_CASE("PPCNT counts the port's wire packets and bytes per group; clr clears one group") {
    loopback lb;
    harness& h = lb.e.h;
    REQUIRE(h.wait_port_active());  // a port that is not ACTIVE sends nothing
    // Nothing yet.
    auto ieee = counter_set(ppcnt(h, 0x0));
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_transmitted_ok) == 0);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_received_ok) == 0);

    // Two writes of 300 bytes at MTU 256: 2 request packets and one ACK each, sent and
    // received by the same port (the QP is its own peer). Then one of 0 bytes: 1 + 1.
    // Each write waits for the one before it to be acknowledged: the responder coalesces
    // the ACKs of requests that arrive in one batch (IBA 9.7.5.1.1), so writes posted
    // back to back could share one ACK and make the counts below timing-dependent.
    lb.write(300);
    REQUIRE(settle(h, 3));
    lb.write(300);
    REQUIRE(settle(h, 6));
    lb.write(0);
    constexpr std::uint64_t packets = 3 + 3 + 2;
    REQUIRE(settle(h, packets));
    // InfiniBand: LRH 8, BTH 12, ICRC 4, VCRC 2 per packet (the model's header count).
    // Each write's first (or only) packet carries a RETH (16), each ACK an AETH (4).
    constexpr std::uint64_t bytes = 2 * 300 + packets * 26 + 3 * (16 + 4);
    CHECK(lb.mem->data()[299] == std::byte{299 & 0xff});  // the data went where it was sent

    ieee = counter_set(ppcnt(h, 0x0));
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_transmitted_ok) == packets);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_received_ok) == packets);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_octets_transmitted_ok) == bytes);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_octets_received_ok) == bytes);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frame_check_sequence_errors) == 0);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_multicast_frames_xmitted_ok) == 0);

    auto rfc = counter_set(ppcnt(h, 0x1));
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_in_octets) == bytes);
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_out_octets) == bytes);
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_in_ucast_pkts) == packets);
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_out_ucast_pkts) == packets);
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_in_discards) == 0);
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_out_discards) == 0);

    auto prio0 = counter_set(ppcnt(h, 0x10, 0));
    CHECK(LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, tx_frames) == packets);
    CHECK(LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, rx_frames) == packets);
    CHECK(LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, tx_octets) == bytes);
    CHECK(LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, rx_octets) == bytes);
    const auto prio3 = counter_set(ppcnt(h, 0x10, 3));
    CHECK(prio3 == std::vector<std::byte>(prio3.size()));

    auto phys = counter_set(ppcnt(h, 0x12));
    CHECK(LINUX_COUNTER(phys_layer_cntrs, phys, symbol_errors) == 0);
    std::this_thread::sleep_for(5ms);
    // clr on a read: this read still has the counts, the next does not; other groups keep theirs.
    ieee = counter_set(ppcnt(h, 0x0, 0, true));
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_transmitted_ok) == packets);
    ieee = counter_set(ppcnt(h, 0x0));
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_transmitted_ok) == 0);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_octets_received_ok) == 0);
    rfc = counter_set(ppcnt(h, 0x1));
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_out_ucast_pkts) == packets);
    // clr on a write: the answer is the group cleared.
    rfc = counter_set(ppcnt(h, 0x1, 0, true, kWrite));
    CHECK(rfc == std::vector<std::byte>(rfc.size()));
    // A write without clr changes nothing and answers with the counts.
    prio0 = counter_set(ppcnt(h, 0x10, 0, false, kWrite));
    CHECK(LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, tx_frames) == packets);
    // The physical layer's clock restarts on its clr.
    phys = counter_set(ppcnt(h, 0x12));
    CHECK(LINUX_COUNTER(phys_layer_cntrs, phys, time_since_last_clear) >= 5);
    ppcnt(h, 0x12, 0, true, kWrite);
    phys = counter_set(ppcnt(h, 0x12));
    CHECK(LINUX_COUNTER(phys_layer_cntrs, phys, time_since_last_clear) < 5);
    CHECK(CXV_LINUX_GET(phys_layer_cntrs, phys, link_down_events) == 0);
    // The link's downs: PAOS down takes it down once; up again trains it (no down).
    const auto paos_id = id(hw::reg_id::PAOS);
    REQUIRE(access(h, kWrite, paos_id, paos(2, true)).r.status == cmd_status::OK);
    REQUIRE(access(h, kWrite, paos_id, paos(1, true)).r.status == cmd_status::OK);
    REQUIRE(h.wait_port_active());
    phys = counter_set(ppcnt(h, 0x12));
    CHECK(CXV_LINUX_GET(phys_layer_cntrs, phys, link_down_events) == 1);
    phys = counter_set(ppcnt(h, 0x12, 0, true, kWrite));  // clr: the downs restart from 0
    CHECK(CXV_LINUX_GET(phys_layer_cntrs, phys, link_down_events) == 0);

    // More traffic counts from the clear on.
    lb.write(100);  // one packet and its ACK
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (frames_sent(h) < 2 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    ieee = counter_set(ppcnt(h, 0x0));
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_frames_transmitted_ok) == 2);
    CHECK(LINUX_COUNTER(eth_802_3_cntrs_grp_data_layout, ieee, a_octets_transmitted_ok) == 100 + 2 * 26 + 16 + 4);
    rfc = counter_set(ppcnt(h, 0x1));
    CHECK(LINUX_COUNTER(eth_2863_cntrs_grp_data_layout, rfc, if_in_ucast_pkts) == 2);

    // RFC 2819 (Linux's mlx5e reads it for ethtool's statistics): the port's receive
    // counts since the start, as the per-priority group (never cleared) has them.
    const auto rmon = counter_set(ppcnt(h, 0x2));
    prio0 = counter_set(ppcnt(h, 0x10, 0));
    CHECK(LINUX_COUNTER(eth_2819_cntrs_grp_data_layout, rmon, ether_stats_pkts) ==
          LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, rx_frames));
    CHECK(LINUX_COUNTER(eth_2819_cntrs_grp_data_layout, rmon, ether_stats_octets) ==
          LINUX_COUNTER(eth_per_prio_grp_data_layout, prio0, rx_octets));
    CHECK(LINUX_COUNTER(eth_2819_cntrs_grp_data_layout, rmon, ether_stats_pkts) == packets + 2);
    CHECK(LINUX_COUNTER(eth_2819_cntrs_grp_data_layout, rmon, ether_stats_crc_align_errors) == 0);
    // The InfiniBand port counters (Linux's PMA answers PortCounters MADs from them): the
    // PAOS down above, no errors; clr on a read.
    auto ib = counter_set(ppcnt(h, 0x20, 0, true));
    CHECK(CXV_LINUX_GET(ib_port_cntrs_grp_data_layout, ib, link_downed_counter) == 1);
    CHECK(CXV_LINUX_GET(ib_port_cntrs_grp_data_layout, ib, port_rcv_errors) == 0);
    CHECK(CXV_LINUX_GET(ib_port_cntrs_grp_data_layout, ib, port_xmit_discards) == 0);
    ib = counter_set(ppcnt(h, 0x20));
    CHECK(CXV_LINUX_GET(ib_port_cntrs_grp_data_layout, ib, link_downed_counter) == 0);

    // Groups the model does not have are refused.
    for (const std::uint32_t g : {0x5u, 0x11u}) {
        check_status(access(h, kRead, id(hw::reg_id::PPCNT), ppcnt_query(g)).r, cmd_status::BAD_PARAM,
                     cmd_syndrome::BAD_PARAMETER);
    }
}

TEST_CASE("NODE_DESC: read as Linux's mlx5_ib reads it where no SMA answers (a RoCE port), written, read back") {
    H h;
    REQUIRE(h.bring_up());
    const auto node_desc = id(hw::reg_id::NODE_DESC);
    const std::vector<std::byte> none(CXV_LINUX_BYTES(set_node_in));
    auto text = [](const reg_reply& rr) {
        REQUIRE(rr.reg.size() == 64);
        const auto* p = reinterpret_cast<const char*>(rr.reg.data());
        return std::string(p, strnlen(p, 64));
    };
    auto rr = access(h, kRead, node_desc, none);
    check_ok(rr);
    const std::string initial = fmt::format("MT{} cxv ConnectX model", h.dev().config().device_id);
    CHECK(text(rr) == initial);
    // Not a port register: its first byte is text, not a local port.
    std::vector<std::byte> w(none.size());
    const std::string mine = "uml-host mlx5_0";
    std::memcpy(w.data(), mine.data(), mine.size());
    check_ok(access(h, kWrite, node_desc, w));
    CHECK(text(access(h, kRead, node_desc, none)) == mine);
    // All 64 bytes are the description (no terminator needed).
    std::fill(w.begin(), w.end(), std::byte{'x'});
    check_ok(access(h, kWrite, node_desc, w));
    CHECK(text(access(h, kRead, node_desc, none)) == std::string(64, 'x'));
    // An empty description brings the model's own back.
    check_ok(access(h, kWrite, node_desc, none));
    CHECK(text(access(h, kRead, node_desc, none)) == initial);
}
