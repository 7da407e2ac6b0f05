// hw/'s layouts against Linux's include/linux/mlx5/mlx5_ifc.h (Linux 6.1, from Debian's
// linux-source-6.1), a description of the PRM we did not write.
//
// mlx5_ifc.h declares each PRM structure as struct mlx5_ifc_<name>_bits with one u8 per
// bit, so offsetof() is a field's bit offset and sizeof() its bit width. For every field
// of every layout we declare, the compiler looks the same name up in Linux's structure
// (a requires-expression, so a missing name is a result, not an error) and the test
// compares bit offset, bit width and the structure's size. A field we declare that
// Linux does not must appear in kOursOnly below with a reason; anything else fails.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

// Linux's mlx5_ifc.h, with the kernel types it expects.
#include "tests/hw/linux_mlx5_ifc.h"

#include <doctest/doctest.h>
#include <fmt/core.h>

#include "hw/ifc.h"
#include "hw/opcodes.h"
#include "hw/registers.h"

namespace {

using linux_field = std::optional<std::pair<std::size_t, std::size_t>>;

struct field_report {
    std::string field;
    std::size_t our_offset, our_width;
    linux_field theirs;
};

struct layout_report {
    std::string name;
    std::size_t our_size, linux_size;
    std::vector<field_report> fields;
};

// Fields we declare that Linux 6.1's mlx5_ifc.h does not, each with the reason.
// (layout, field) pairs; keep this list short and justified.
const std::set<std::pair<std::string, std::string>> kOursOnly = {
    // DevX UMEMs for a QP's work queue and doorbell record: the PRM (and rdma-core's
    // mlx5_ifc.h) name them; Linux 6.1 leaves them reserved.
    {"create_qp_in", "wq_umem_offset"},
    {"create_qp_in", "wq_umem_id"},
    {"qpc", "dbr_umem_id"},
    // The UMEM behind a CREATE_MKEY with mkey_umem_valid: the PRM (and rdma-core's
    // mlx5_ifc.h) name them; Linux 6.1 leaves them reserved.
    {"create_mkey_in", "mkey_umem_id"},
    {"create_mkey_in", "mkey_umem_offset"},
    // A CQ's ring and doorbell record in UMEMs: named by the PRM and rdma-core's
    // mlx5_ifc.h; reserved in Linux 6.1.
    {"create_cq_in", "cq_umem_offset"},
    {"create_cq_in", "cq_umem_id"},
    {"cqc", "dbr_umem_id"},
    // QUERY_Q_COUNTER of another vport and of every set at once (aggregate), with the
    // capability that offers it: added to Linux's mlx5_ifc.h after 6.1 (6.4), at the
    // bits 6.1 reserves.
    {"query_q_counter_in", "other_vport"},
    {"query_q_counter_in", "vport_number"},
    {"query_q_counter_in", "aggregate"},
    {"cmd_hca_cap", "q_counter_aggregation"},
};

template <typename OurField>
void add_field(layout_report& rep, const char* name, linux_field theirs) {
    rep.fields.push_back({name, OurField::bit_offset, OurField::bit_width, theirs});
}

std::vector<layout_report> collect() {
    std::vector<layout_report> reports;

// Looks field n up in Linux's structure L (dependent, so absence is not an error).
#define CXV_CHECK_MEMBER(n, ...)                                                          \
    add_field<ours::n>(rep, #n, []<typename L>(L*) -> linux_field {                        \
        if constexpr (requires(L& l) { l.n; }) {                                           \
            return std::pair<std::size_t, std::size_t>{offsetof(L, n),                     \
                                                       sizeof(std::declval<L&>().n)};      \
        } else {                                                                           \
            return std::nullopt;                                                           \
        }                                                                                  \
    }(static_cast<theirs*>(nullptr)));

#define CXV_CHECK_LAYOUT(cpp, prm)                                                        \
    {                                                                                     \
        using ours = ::cxv::hw::ifc::cpp;                                                 \
        using theirs = mlx5_ifc_##prm##_bits;                                             \
        layout_report rep{#prm, ours::size_bits, sizeof(theirs), {}};                     \
        CXV_IFC_##cpp(CXV_CHECK_MEMBER, CXV_CHECK_MEMBER, CXV_CHECK_MEMBER, CXV_CHECK_MEMBER) \
        reports.push_back(std::move(rep));                                                \
    }

    CXV_IFC_LAYOUTS(CXV_CHECK_LAYOUT)
    return reports;
}

}  // namespace

TEST_CASE("every hw/ layout matches Linux's mlx5_ifc.h field by field") {
    const auto reports = collect();
    std::size_t compared = 0;
    std::vector<std::string> ours_only;
    for (const auto& rep : reports) {
        INFO("layout ", rep.name);
        CHECK_MESSAGE(rep.our_size == rep.linux_size,
                      fmt::format("{}: size 0x{:x} bits, Linux 0x{:x}", rep.name, rep.our_size,
                                  rep.linux_size));
        for (const auto& f : rep.fields) {
            if (!f.theirs) {
                ours_only.push_back(rep.name + "." + f.field);
                CHECK_MESSAGE(kOursOnly.count({rep.name, f.field}) == 1,
                              fmt::format("{}.{} is not in Linux's mlx5_ifc.h (typo, or add it "
                                          "to kOursOnly with a reason)",
                                          rep.name, f.field));
                continue;
            }
            ++compared;
            CHECK_MESSAGE(f.our_offset == f.theirs->first,
                          fmt::format("{}.{}: bit offset 0x{:x}, Linux 0x{:x}", rep.name, f.field,
                                      f.our_offset, f.theirs->first));
            CHECK_MESSAGE(f.our_width == f.theirs->second,
                          fmt::format("{}.{}: bit width 0x{:x}, Linux 0x{:x}", rep.name, f.field,
                                      f.our_width, f.theirs->second));
        }
    }
    fmt::print("ifc conformance: {} layouts, {} fields compared with Linux 6.1 mlx5_ifc.h\n",
               reports.size(), compared);
    fmt::print("ifc conformance: {} fields not in Linux:{}\n", ours_only.size(),
               ours_only.empty() ? " none" : "");
    for (const auto& f : ours_only) fmt::print("  {}\n", f);
    CHECK(reports.size() > 0);
    CHECK(compared > 0);
}

TEST_CASE("command opcodes match Linux's MLX5_CMD_OP_*") {
    std::size_t n = 0;
#define CXV_CHECK_OPCODE(name, prm, value)                                              \
    CHECK_MESSAGE(static_cast<unsigned>(::cxv::hw::cmd_opcode::name) ==                  \
                      static_cast<unsigned>(MLX5_CMD_OP_##prm),                          \
                  #prm);                                                                 \
    ++n;
    CXV_CMD_OPCODES(CXV_CHECK_OPCODE)
    fmt::print("ifc conformance: {} command opcodes compared\n", n);
    CHECK(n > 0);
}

TEST_CASE("ACCESS_REG op_mods match Linux's MLX5_ACCESS_REGISTER_IN_OP_MOD_*") {
    std::size_t n = 0;
#define CXV_CHECK_OP_MOD(name, value)                                                     \
    CHECK_MESSAGE(static_cast<unsigned>(::cxv::hw::access_reg_op_mod::name) ==             \
                      static_cast<unsigned>(MLX5_ACCESS_REGISTER_IN_OP_MOD_##name),        \
                  #name);                                                                  \
    ++n;
    CXV_ACCESS_REG_OP_MODS(CXV_CHECK_OP_MOD)
    fmt::print("ifc conformance: {} ACCESS_REG op_mods compared\n", n);
    CHECK(n == 2);
}
