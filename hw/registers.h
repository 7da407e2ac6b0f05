// Access registers (PRM "Access Registers"): the ids ACCESS_REG takes, its op_mod, and
// the constants of the registers the model implements. X-macros, so that one list gives
// the enum and the checks against Linux (tests/hw: MLX5_REG_* of driver.h, the PPCNT
// groups of device.h, the op_mods of mlx5_ifc.h).
#pragma once

#include <cstdint>

namespace cxv::hw {

// Register ids. X(PRM name, value); Linux spells them MLX5_REG_<name>.
#define CXV_REG_IDS(X)          \
    X(PCAP, 0x5001)             \
    X(PMLP, 0x5002)             \
    X(PMTU, 0x5003)             \
    X(PTYS, 0x5004)             \
    X(PAOS, 0x5006)             \
    X(PPCNT, 0x5008)            \
    X(PMAOS, 0x5012)            \
    X(PCMR, 0x5041)             \
    X(PCAM, 0x507f)             \
    X(NODE_DESC, 0x6001)        \
    X(HOST_ENDIANNESS, 0x7004)  \
    X(MCAM, 0x907f)

enum class reg_id : std::uint16_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_REG_IDS(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// ACCESS_REGISTER op_mod (MLX5_ACCESS_REGISTER_IN_OP_MOD_*).
#define CXV_ACCESS_REG_OP_MODS(X) \
    X(WRITE, 0x0)                 \
    X(READ, 0x1)

enum class access_reg_op_mod : std::uint16_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_ACCESS_REG_OP_MODS(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// PPCNT grp: which counter set counter_set holds (PRM PPCNT; Linux MLX5_<name>).
#define CXV_PPCNT_GROUPS(X)                      \
    X(IEEE_802_3_COUNTERS_GROUP, 0x00)           \
    X(RFC_2863_COUNTERS_GROUP, 0x01)             \
    X(RFC_2819_COUNTERS_GROUP, 0x02)             \
    X(PER_PRIORITY_COUNTERS_GROUP, 0x10)         \
    X(PHYSICAL_LAYER_COUNTERS_GROUP, 0x12)       \
    X(INFINIBAND_PORT_COUNTERS_GROUP, 0x20)

enum class ppcnt_group : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_PPCNT_GROUPS(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// PAOS admin_status / oper_status (Linux enum mlx5_port_status, MLX5_PORT_<name>).
#define CXV_PORT_STATUSES(X) \
    X(UP, 1)                 \
    X(DOWN, 2)

enum class port_status : std::uint8_t {
#define CXV_ENUM_ENTRY(name, value) name = value,
    CXV_PORT_STATUSES(CXV_ENUM_ENTRY)
#undef CXV_ENUM_ENTRY
};

// PMAOS admin_status and oper_status (PRM PMAOS): the module (cage and cable) of a port.
enum class module_admin_status : std::uint8_t { ENABLED = 1, DISABLED = 2, ENABLED_ONCE = 3 };
enum class module_oper_status : std::uint8_t {
    INITIALIZING = 0,
    PLUGGED_ENABLED = 1,
    UNPLUGGED = 2,
    PLUGGED_WITH_ERROR = 3,
    PLUGGED_DISABLED = 4,
};

}  // namespace cxv::hw
