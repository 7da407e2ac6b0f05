// Byte offsets and values in the initialization segment (BAR0 offset 0; PRM §"Initialization
// Segment"), computed from the bit-exact layout in ifc_cmd.h so that the layout stays
// the one description. The driver reads and writes these dwords with 32-bit big-endian
// MMIO; the model answers at the same offsets.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hw/ifc_cmd.h"

namespace cxv::hw {

namespace init_seg_offset {

// The byte offset of the dword that holds field F (every field here lies inside one).
template <typename F>
inline constexpr std::size_t dword_of = F::bit_offset / 32 * 4;

using seg = ifc::initial_seg;
inline constexpr std::size_t cmd_interface_rev = dword_of<seg::cmd_interface_rev>;    // and fw_rev_subminor
inline constexpr std::size_t cmdq_addr_h = dword_of<seg::cmdq_phy_addr_63_32>;
// cmdq_phy_addr_31_12, nic_interface, log_cmdq_size and log_cmdq_stride share a dword.
inline constexpr std::size_t cmdq_addr_l_sz = dword_of<seg::cmdq_phy_addr_31_12>;
inline constexpr std::size_t nic_interface = dword_of<seg::nic_interface>;
inline constexpr std::size_t command_doorbell_vector = dword_of<seg::command_doorbell_vector>;
inline constexpr std::size_t initializing = dword_of<seg::initializing>;
inline constexpr std::size_t health_buffer = seg::health_buffer::bit_offset / 8;  // a whole structure
inline constexpr std::size_t health_fw_version = health_buffer + ifc::health_buffer::fw_version::bit_offset / 8;
inline constexpr std::size_t health_counter = dword_of<seg::health_counter>;
// The free-running internal timer, high dword then low (PRM "Initialization Segment":
// internal_timer_h, internal_timer_l), counting at cmd_hca_cap.device_frequency_khz. The
// bit layout above (mlx5_ifc.h's initial_seg) leaves these dwords out; Linux's struct
// mlx5_init_seg places them 16 bytes before health_counter, where the PRM does.
inline constexpr std::size_t internal_timer_h = 0x1000;
inline constexpr std::size_t internal_timer_l = 0x1004;

// The PRM's numbers, so that a layout edit that moves one is caught here.
static_assert(cmd_interface_rev == 0x04);
static_assert(cmdq_addr_h == 0x10);
static_assert(cmdq_addr_l_sz == 0x14 && nic_interface == 0x14);
static_assert(command_doorbell_vector == 0x18);
static_assert(initializing == 0x1fc);
static_assert(health_buffer == 0x200);
static_assert(health_fw_version == 0x230);
static_assert(health_counter == 0x1010);
static_assert(health_counter - internal_timer_h == 0x10 && internal_timer_l == internal_timer_h + 4);

}  // namespace init_seg_offset

// The bit of the `initializing` dword (bit 31, the dword's most significant) that the
// firmware clears when the command interface may be used.
inline constexpr std::uint32_t init_seg_initializing_bit = std::uint32_t{1}
                                                           << (31 - ifc::initial_seg::initializing::bit_offset % 32);
static_assert(init_seg_initializing_bit == 0x80000000u);

// cmd_interface_rev sits in the upper half of its dword; the revision this driver speaks
// (PRM §"Initialization Segment": command interface revision 5).
inline constexpr unsigned cmd_interface_rev_shift = 16;
inline constexpr std::uint32_t cmd_interface_rev_supported = 5;

// cmdq_addr_l_sz: log_cmdq_size in bits 7:4, log_cmdq_stride in bits 3:0, the queue's
// address (4 KiB aligned) in bits 31:12.
inline constexpr unsigned log_cmdq_size_shift = 31 - (ifc::initial_seg::log_cmdq_size::bit_offset % 32 + 3);
inline constexpr unsigned log_cmdq_stride_shift = 31 - (ifc::initial_seg::log_cmdq_stride::bit_offset % 32 + 3);
inline constexpr std::uint32_t cmdq_addr_l_mask = 0xfffff000u;
static_assert(log_cmdq_size_shift == 4 && log_cmdq_stride_shift == 0);

// nic_interface: the function's NIC interface state, read with the reserved bit above it
// (bits 10:8 of the cmdq_addr_l_sz dword) as Linux's mlx5_get_nic_state does, since
// SW_RESET (7) needs all three. Linux: MLX5_NIC_IFC_OFFSET (device.h) and the
// MLX5_NIC_IFC_* values (drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.h).
inline constexpr unsigned nic_interface_shift = 31 - (ifc::initial_seg::nic_interface::bit_offset % 32 + 1);
inline constexpr std::uint32_t nic_interface_mask = 0x7;
static_assert(nic_interface_shift == 8);
enum class nic_interface : std::uint8_t {
    FULL = 0,
    DISABLED = 1,
    NO_DRAM_NIC = 2,
    SW_RESET = 7,
};

// health_counter: 24 bits the firmware advances while it is alive.
inline constexpr std::uint32_t health_counter_mask = ifc::initial_seg::health_counter::max_value;
static_assert(health_counter_mask == 0xffffff);

}  // namespace cxv::hw
