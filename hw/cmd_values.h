// Values of command fields the PRM enumerates: op_mods that select what a command does,
// and the enumerated inputs and outputs of the bring-up, page and port commands. Each
// enum is checked against Linux's mlx5_ifc.h / device.h in tests/hw/linux_constants_test.
#pragma once

#include <cstdint>

namespace cxv::hw {

// QUERY_PAGES op_mod: which pages the firmware is asked about (PRM §"QUERY_PAGES",
// Linux MLX5_QUERY_PAGES_IN_OP_MOD_*): before INIT_HCA's "boot" pages, the pages
// INIT_HCA needs, and those the firmware wants at run time.
enum class query_pages_op_mod : std::uint16_t {
    BOOT_PAGES = 0x1,
    INIT_PAGES = 0x2,
    REGULAR_PAGES = 0x3,
};

// MANAGE_PAGES op_mod (PRM §"MANAGE_PAGES", Linux MLX5_MANAGE_PAGES_IN_OP_MOD_*): the
// driver gives pages with ALLOCATION_SUCCESS and asks some back with HCA_RETURN_PAGES.
enum class manage_pages_op_mod : std::uint16_t {
    ALLOCATION_FAIL = 0x0,
    ALLOCATION_SUCCESS = 0x1,
    HCA_RETURN_PAGES = 0x2,
};

// QUERY_HCA_CAP / SET_HCA_CAP op_mod (PRM §"QUERY_HCA_CAP"): bit 0 chooses the maximum
// (0) or current (1) values, bits 15:1 the capability type (Linux: enum mlx5_cap_mode
// HCA_CAP_OPMOD_GET_*, enum mlx5_cap_type MLX5_CAP_*).
enum class hca_cap_mode : std::uint16_t {
    GET_MAX = 0,
    GET_CUR = 1,
};
enum class hca_cap_type : std::uint16_t {
    GENERAL = 0x0,
    ETHERNET_OFFLOADS = 0x1,
    ATOMIC = 0x3,
    ROCE = 0x4,
    FLOW_TABLE = 0x7,
    DEV_EVENT = 0x14,
};
constexpr std::uint16_t hca_cap_op_mod(hca_cap_type t, hca_cap_mode m) noexcept {
    return static_cast<std::uint16_t>(static_cast<unsigned>(t) << 1 | static_cast<unsigned>(m));
}

// TEARDOWN_HCA profile (input) and force state (output) (PRM §"TEARDOWN_HCA", Linux
// MLX5_TEARDOWN_HCA_IN_PROFILE_* and MLX5_TEARDOWN_HCA_OUT_FORCE_STATE_*).
enum class teardown_hca_profile : std::uint16_t {
    GRACEFUL_CLOSE = 0x0,
    FORCE_CLOSE = 0x1,
    PREPARE_FAST_TEARDOWN = 0x2,
};
enum class teardown_hca_state : std::uint8_t {
    SUCCESS = 0x0,
    FAIL = 0x1,  // the PRM's FORCE_CLOSE_FAILED
};

// QUERY_VPORT_STATE op_mod and output state (PRM §"QUERY_VPORT_STATE", Linux
// MLX5_VPORT_STATE_OP_MOD_* and MLX5_QUERY_VPORT_STATE_OUT_STATE_*).
enum class vport_state_op_mod : std::uint16_t {
    VNIC_VPORT = 0x0,
    ESW_VPORT = 0x1,
    UPLINK = 0x2,
};
enum class vport_state : std::uint8_t {
    DOWN = 0x0,
    UP = 0x1,
};
// QUERY/MODIFY_VPORT_STATE admin_state (Linux MLX5_VPORT_ADMIN_STATE_*): what the vport's
// manager set; AUTO follows the uplink.
enum class vport_admin_state : std::uint8_t {
    DOWN = 0x0,
    UP = 0x1,
    AUTO = 0x2,
};

// cmd_hca_cap.port_type (PRM §"HCA Capabilities", Linux MLX5_CMD_HCA_CAP_PORT_TYPE_*).
enum class port_type : std::uint8_t {
    IB = 0x0,
    ETHERNET = 0x1,
};

// IBTA PortState, as hca_vport_context.port_state reports it (InfiniBand Architecture
// Specification, PortInfo; rdma-core enum ibv_port_state IBV_PORT_*).
enum class ib_port_state : std::uint8_t {
    NOP = 0,
    DOWN = 1,
    INIT = 2,
    ARMED = 3,
    ACTIVE = 4,
};

// roce_addr_layout.roce_version and roce_l3_type (PRM "SET_ROCE_ADDRESS", Linux
// MLX5_ROCE_VERSION_* and MLX5_ROCE_L3_TYPE_*): RoCE v1 (a GRH over Ethernet) or v2
// (UDP/IP), and whether a v2 packet is IPv4 or IPv6.
enum class roce_version : std::uint8_t {
    V1 = 0,
    V2 = 2,
};
enum class roce_l3_type : std::uint8_t {
    IPV4 = 0,
    IPV6 = 1,
};

// What a RoCEv2 packet adds to its payload inside an Ethernet frame, at most: the IPv6
// header (40 bytes, the GRH's place), UDP (8), BTH (12), XRCETH (4), AtomicETH (28, the
// largest extended transport header) and ICRC (4). A port's RoCE MTU is the largest IB
// MTU that fits the Ethernet MTU less this. Linux names no single constant for it.
inline constexpr std::uint32_t roce_header_overhead = 40 + 8 + 12 + 4 + 28 + 4;
static_assert(roce_header_overhead == 96);

}  // namespace cxv::hw
