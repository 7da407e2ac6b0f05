// hw/ifc_qp.h's QP values against independent descriptions: the QP states and the
// transitions' opt_param_mask bits against Linux 6.1's include/linux/mlx5/qp.h (copied
// by tests/hw:linux_mlx5_constants_cxx, see tests/hw/BUILD), the values of QPC fields
// and the SRQ's state and ARM_RQ op_mod values against Linux's mlx5_ifc.h and qp.h, and
// the MTU encoding against rdma-core's <infiniband/verbs.h>.
//
// Every entry of CXV_QP_STATES and CXV_QP_OPTPARS is looked up by its Linux name
// (MLX5_QP_STATE_<name>, MLX5_QP_OPTPAR_<name>); a name Linux lacks fails, so a typo or
// a bit Linux does not know cannot pass unnoticed.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "tests/hw/linux_constants.h"

// Linux's mlx5_ifc.h, with the kernel types and macros it expects.
#include "tests/hw/linux_mlx5_ifc.h"

#include <doctest/doctest.h>
#include <fmt/core.h>
#include <infiniband/verbs.h>

#include "hw/ifc_qp.h"

namespace ifc = cxv::hw::ifc;
namespace qv = cxv::hw::ifc::qpc_values;

namespace {

using cxv::test::linux_constants;

// Compares one of our values with Linux's value of `linux_name`; counts what it compared.
void compare(std::string_view ours, std::uint64_t value, const std::string& linux_name, std::size_t& compared) {
    const auto& lx = linux_constants();
    const auto it = lx.find(linux_name);
    if (it == lx.end()) {
        FAIL_CHECK(fmt::format("{}: Linux has no {} (a typo in hw/ifc_qp.h, or an anchor missing "
                               "in tests/hw/BUILD)",
                               ours, linux_name));
        return;
    }
    ++compared;
    CHECK_MESSAGE(value == it->second,
                  fmt::format("{} = 0x{:x}, Linux {} = 0x{:x}", ours, value, linux_name, it->second));
}

// After a table's entries went through compare(): the table has the `expected` number of
// entries and Linux had a value for every one.
void check_all_compared(std::string_view what, std::size_t entries, std::size_t expected, std::size_t compared) {
    fmt::print("linux qp constants: {} {} compared with Linux 6.1 qp.h\n", compared, what);
    CHECK(entries == expected);
    CHECK(compared == entries);
}

// Compares values of different enum and integer types as numbers.
template <typename T>
constexpr std::uint64_t v(T x) {
    return static_cast<std::uint64_t>(x);
}

}  // namespace

TEST_CASE("qp_state matches Linux's MLX5_QP_STATE_*") {
    std::size_t compared = 0, entries = 0;
#define CXV_CHECK_STATE(name, value)                                                                   \
    ++entries;                                                                                         \
    compare("qp_state::" #name, static_cast<std::uint64_t>(ifc::qp_state::name), "MLX5_QP_STATE_" #name, \
            compared);
    CXV_QP_STATES(CXV_CHECK_STATE)
#undef CXV_CHECK_STATE
    check_all_compared("QP states", entries, 7, compared);
}

TEST_CASE("qp_optpar matches Linux's MLX5_QP_OPTPAR_*") {
    std::size_t compared = 0, entries = 0;
    std::uint64_t seen = 0;
#define CXV_CHECK_OPTPAR(name, value)                                                                       \
    ++entries;                                                                                              \
    CHECK_MESSAGE((seen & ifc::qp_optpar::name) == 0, "qp_optpar::" #name " shares a bit with another one"); \
    seen |= ifc::qp_optpar::name;                                                                           \
    compare("qp_optpar::" #name, ifc::qp_optpar::name, "MLX5_QP_OPTPAR_" #name, compared);
    CXV_QP_OPTPARS(CXV_CHECK_OPTPAR)
#undef CXV_CHECK_OPTPAR
    check_all_compared("opt_param_mask bits", entries, 13, compared);
}

TEST_CASE("QPC field values match Linux's mlx5_ifc.h and qp.h") {
    // qpc.st
    CHECK(v(qv::st_rc) == v(MLX5_QPC_ST_RC));
    CHECK(v(qv::st_uc) == v(MLX5_QPC_ST_UC));
    CHECK(v(qv::st_ud) == v(MLX5_QPC_ST_UD));
    CHECK(v(qv::st_qp0) == v(MLX5_QPC_ST_QP0));
    CHECK(v(qv::st_qp1) == v(MLX5_QPC_ST_QP1));
    CHECK(v(qv::st_reg_umr) == v(MLX5_QPC_ST_REG_UMR));
    // qpc.rq_type (qp.h)
    std::size_t compared = 0;
    compare("qpc_values::rq_regular", qv::rq_regular, "MLX5_NON_ZERO_RQ", compared);
    compare("qpc_values::rq_srq", qv::rq_srq, "MLX5_SRQ_RQ", compared);
    compare("qpc_values::rq_zero_len", qv::rq_zero_len, "MLX5_ZERO_LEN_RQ", compared);
    CHECK(compared == 3);
    // qpc.pm_state
    CHECK(v(qv::pm_armed) == v(MLX5_QPC_PM_STATE_ARMED));
    CHECK(v(qv::pm_rearm) == v(MLX5_QPC_PM_STATE_REARM));
    CHECK(v(qv::pm_reserved) == v(MLX5_QPC_PM_STATE_RESERVED));
    CHECK(v(qv::pm_migrated) == v(MLX5_QPC_PM_STATE_MIGRATED));
    // qpc.mtu, in the encoding both mlx5_ifc.h and rdma-core's enum ibv_mtu use.
    CHECK(v(qv::mtu_256) == v(MLX5_QPC_MTU_256_BYTES));
    CHECK(v(qv::mtu_512) == v(MLX5_QPC_MTU_512_BYTES));
    CHECK(v(qv::mtu_1024) == v(MLX5_QPC_MTU_1K_BYTES));
    CHECK(v(qv::mtu_2048) == v(MLX5_QPC_MTU_2K_BYTES));
    CHECK(v(qv::mtu_4096) == v(MLX5_QPC_MTU_4K_BYTES));
    CHECK(v(qv::mtu_256) == v(IBV_MTU_256));
    CHECK(v(qv::mtu_512) == v(IBV_MTU_512));
    CHECK(v(qv::mtu_1024) == v(IBV_MTU_1024));
    CHECK(v(qv::mtu_2048) == v(IBV_MTU_2048));
    CHECK(v(qv::mtu_4096) == v(IBV_MTU_4096));
    // qpc.atomic_mode
    CHECK(v(qv::atomic_mode_ib_spec) == v(MLX5_QPC_ATOMIC_MODE_IB_SPEC));
    CHECK(v(qv::atomic_mode_only_8b) == v(MLX5_QPC_ATOMIC_MODE_ONLY_8B));
    CHECK(v(qv::atomic_mode_up_to_8b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_8B));
    CHECK(v(qv::atomic_mode_up_to_16b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_16B));
    CHECK(v(qv::atomic_mode_up_to_32b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_32B));
    CHECK(v(qv::atomic_mode_up_to_64b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_64B));
    CHECK(v(qv::atomic_mode_up_to_128b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_128B));
    CHECK(v(qv::atomic_mode_up_to_256b) == v(MLX5_QPC_ATOMIC_MODE_UP_TO_256B));
    // qpc.ts_format
    CHECK(v(qv::ts_format_free_running) == v(MLX5_TIMESTAMP_FORMAT_FREE_RUNNING));
    CHECK(v(qv::ts_format_default) == v(MLX5_TIMESTAMP_FORMAT_DEFAULT));
    CHECK(v(qv::ts_format_real_time) == v(MLX5_TIMESTAMP_FORMAT_REAL_TIME));
}

TEST_CASE("SRQ values match Linux's mlx5_ifc.h") {
    namespace sv = cxv::hw::ifc::srqc_values;
    CHECK(v(sv::state_good) == v(MLX5_SRQC_STATE_GOOD));
    CHECK(v(sv::state_error) == v(MLX5_SRQC_STATE_ERROR));
    CHECK(v(ifc::arm_rq_op_mod::srq) == v(MLX5_ARM_RQ_IN_OP_MOD_SRQ));
    CHECK(v(ifc::arm_rq_op_mod::xrq) == v(MLX5_ARM_RQ_IN_OP_MOD_XRQ));
}
