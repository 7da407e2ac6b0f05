// What the speed fields of PRM PTYS (Port Type and Speed Register, 0x5004; layout in
// hw/ifc_reg.h) mean: the bits of ib_proto_*, ib_link_width_*, eth_proto_* and
// ext_eth_proto_*. Checked against Linux 6.1's include/linux/mlx5/port.h
// (tests/hw:linux_constants_test: enum mlx5e_link_mode, mlx5e_ext_link_mode and
// MLX5_PTYS_WIDTH_*); the rates per mode against drivers/net/ethernet/mellanox/mlx5/core/
// en/port.c (mlx5e_link_speed, mlx5e_ext_link_speed), by hand.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace cxv::hw {

// PTYS proto_mask: whose fields a read or write is about (Linux MLX5_PTYS_IB, _EN).
inline constexpr std::uint32_t ptys_proto_ib = 1u << 0;
inline constexpr std::uint32_t ptys_proto_en = 1u << 2;

// PTYS ib_proto_* bit k: an IBTA link speed (per lane), the same bit as the verbs'
// active_speed (IB_SPEED_SDR = 1 ... IB_SPEED_NDR = 128): mlx5_ib reports ib_proto_oper
// as it is. Rates as ibv_devinfo prints them, in Mb/s per lane (FDR10 and EDR are
// 10.3125 and 25.78125 Gb/s signalling with 64b/66b coding).
struct ib_link_speed {
    std::string_view name;  // IBTA: SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR
    std::uint16_t bit;
    std::uint32_t lane_mbps;
};
inline constexpr ib_link_speed ib_link_speeds[] = {
    {"SDR", 1u << 0, 2500},   {"DDR", 1u << 1, 5000},   {"QDR", 1u << 2, 10000},  {"FDR10", 1u << 3, 10000},
    {"FDR", 1u << 4, 14000},  {"EDR", 1u << 5, 25000},  {"HDR", 1u << 6, 50000},  {"NDR", 1u << 7, 100000},
};

// PTYS ib_link_width_* bit: the number of lanes (Linux MLX5_PTYS_WIDTH_<name>).
struct ib_link_width {
    std::string_view name;  // 1X, 2X, 4X, 8X, 12X
    std::uint16_t bit;
    unsigned lanes;
};
inline constexpr ib_link_width ib_link_widths[] = {
    {"1X", 1u << 0, 1}, {"2X", 1u << 1, 2}, {"4X", 1u << 2, 4}, {"8X", 1u << 3, 8}, {"12X", 1u << 4, 12},
};

// One Ethernet link mode of PTYS eth_proto_* (legacy) or ext_eth_proto_* (extended: the
// port's eth_proto_capability in the extended field is non-zero, PCAM
// ptys_extended_ethernet). `ib_speed` and `ib_width` are what Linux's mlx5_ib reports
// for a RoCE port in that mode (its translate_eth_legacy_proto_oper and
// translate_eth_ext_proto_oper); a mode it does not list is 4X QDR there.
struct eth_link_mode {
    std::string_view name;     // Linux MLX5E_<name>
    std::string_view display;  // as IEEE 802.3 writes it
    unsigned bit;
    std::uint32_t mbps;
    unsigned lanes;
    std::string_view ib_speed;  // an ib_link_speeds name
    std::string_view ib_width;  // an ib_link_widths name
};
inline constexpr eth_link_mode eth_link_modes[] = {
    {"1000BASE_CX_SGMII", "1000BASE-CX-SGMII", 0, 1000, 1, "SDR", "1X"},
    {"1000BASE_KX", "1000BASE-KX", 1, 1000, 1, "SDR", "1X"},
    {"10GBASE_CX4", "10GBASE-CX4", 2, 10000, 4, "QDR", "1X"},
    {"10GBASE_KX4", "10GBASE-KX4", 3, 10000, 4, "QDR", "1X"},
    {"10GBASE_KR", "10GBASE-KR", 4, 10000, 1, "QDR", "1X"},
    {"20GBASE_KR2", "20GBASE-KR2", 5, 20000, 2, "QDR", "4X"},
    {"40GBASE_CR4", "40GBASE-CR4", 6, 40000, 4, "QDR", "4X"},
    {"40GBASE_KR4", "40GBASE-KR4", 7, 40000, 4, "QDR", "4X"},
    {"56GBASE_R4", "56GBASE-R4", 8, 56000, 4, "FDR", "4X"},
    {"10GBASE_CR", "10GBASE-CR", 12, 10000, 1, "QDR", "1X"},
    {"10GBASE_SR", "10GBASE-SR", 13, 10000, 1, "QDR", "1X"},
    {"10GBASE_ER", "10GBASE-ER", 14, 10000, 1, "QDR", "1X"},
    {"40GBASE_SR4", "40GBASE-SR4", 15, 40000, 4, "QDR", "4X"},
    {"40GBASE_LR4", "40GBASE-LR4", 16, 40000, 4, "QDR", "4X"},
    {"50GBASE_SR2", "50GBASE-SR2", 18, 50000, 2, "HDR", "1X"},
    {"100GBASE_CR4", "100GBASE-CR4", 20, 100000, 4, "EDR", "4X"},
    {"100GBASE_SR4", "100GBASE-SR4", 21, 100000, 4, "EDR", "4X"},
    {"100GBASE_KR4", "100GBASE-KR4", 22, 100000, 4, "EDR", "4X"},
    {"100GBASE_LR4", "100GBASE-LR4", 23, 100000, 4, "EDR", "4X"},
    {"100BASE_TX", "100BASE-TX", 24, 100, 1, "SDR", "1X"},
    {"1000BASE_T", "1000BASE-T", 25, 1000, 1, "SDR", "1X"},
    {"10GBASE_T", "10GBASE-T", 26, 10000, 1, "QDR", "1X"},
    {"25GBASE_CR", "25GBASE-CR", 27, 25000, 1, "EDR", "1X"},
    {"25GBASE_KR", "25GBASE-KR", 28, 25000, 1, "EDR", "1X"},
    {"25GBASE_SR", "25GBASE-SR", 29, 25000, 1, "EDR", "1X"},
    {"50GBASE_CR2", "50GBASE-CR2", 30, 50000, 2, "HDR", "1X"},
    {"50GBASE_KR2", "50GBASE-KR2", 31, 50000, 2, "HDR", "1X"},
};
inline constexpr eth_link_mode ext_eth_link_modes[] = {
    {"SGMII_100M", "SGMII 100M", 0, 100, 1, "SDR", "1X"},
    {"1000BASE_X_SGMII", "1000BASE-X/SGMII", 1, 1000, 1, "SDR", "1X"},
    {"5GBASE_R", "5GBASE-R", 3, 5000, 1, "DDR", "1X"},
    {"10GBASE_XFI_XAUI_1", "10GBASE-XFI/XAUI-1", 4, 10000, 1, "QDR", "1X"},
    {"40GBASE_XLAUI_4_XLPPI_4", "40GBASE-XLAUI-4/XLPPI-4", 5, 40000, 4, "QDR", "4X"},
    {"25GAUI_1_25GBASE_CR_KR", "25GAUI-1/25GBASE-CR/KR", 6, 25000, 1, "EDR", "1X"},
    {"50GAUI_2_LAUI_2_50GBASE_CR2_KR2", "50GAUI-2/LAUI-2/50GBASE-CR2/KR2", 7, 50000, 2, "EDR", "2X"},
    {"50GAUI_1_LAUI_1_50GBASE_CR_KR", "50GAUI-1/LAUI-1/50GBASE-CR/KR", 8, 50000, 1, "HDR", "1X"},
    {"CAUI_4_100GBASE_CR4_KR4", "CAUI-4/100GBASE-CR4/KR4", 9, 100000, 4, "EDR", "4X"},
    {"100GAUI_2_100GBASE_CR2_KR2", "100GAUI-2/100GBASE-CR2/KR2", 10, 100000, 2, "HDR", "2X"},
    {"100GAUI_1_100GBASE_CR_KR", "100GAUI-1/100GBASE-CR/KR", 11, 100000, 1, "NDR", "1X"},
    {"200GAUI_4_200GBASE_CR4_KR4", "200GAUI-4/200GBASE-CR4/KR4", 12, 200000, 4, "HDR", "4X"},
    {"200GAUI_2_200GBASE_CR2_KR2", "200GAUI-2/200GBASE-CR2/KR2", 13, 200000, 2, "NDR", "2X"},
    {"400GAUI_8", "400GAUI-8", 15, 400000, 8, "HDR", "8X"},
    {"400GAUI_4_400GBASE_CR4_KR4", "400GAUI-4/400GBASE-CR4/KR4", 16, 400000, 4, "NDR", "4X"},
};

// A RoCE port's mode when mlx5_ib finds none it knows in eth_proto_oper.
inline constexpr std::string_view eth_unknown_ib_speed = "QDR";
inline constexpr std::string_view eth_unknown_ib_width = "4X";

// The table entry whose bit is the lowest set in `mask`, or nullptr.
constexpr const eth_link_mode* eth_link_mode_of(std::uint32_t mask, bool extended) noexcept {
    const std::span<const eth_link_mode> t = extended ? std::span<const eth_link_mode>(ext_eth_link_modes)
                                                      : std::span<const eth_link_mode>(eth_link_modes);
    for (unsigned k = 0; k < 32; ++k) {
        if ((mask & (1u << k)) == 0) continue;
        for (const auto& m : t) {
            if (m.bit == k) return &m;
        }
    }
    return nullptr;
}
constexpr const ib_link_speed* ib_link_speed_named(std::string_view name) noexcept {
    for (const auto& s : ib_link_speeds) {
        if (s.name == name) return &s;
    }
    return nullptr;
}
constexpr const ib_link_width* ib_link_width_named(std::string_view name) noexcept {
    for (const auto& w : ib_link_widths) {
        if (w.name == name) return &w;
    }
    return nullptr;
}
// The entry for the lowest bit set in a PTYS ib_proto_* / ib_link_width_* value, or nullptr.
constexpr const ib_link_speed* ib_link_speed_of(std::uint16_t mask) noexcept {
    for (const auto& s : ib_link_speeds) {
        if (mask & s.bit) return &s;
    }
    return nullptr;
}
constexpr const ib_link_width* ib_link_width_of(std::uint16_t mask) noexcept {
    for (const auto& w : ib_link_widths) {
        if (mask & w.bit) return &w;
    }
    return nullptr;
}

}  // namespace cxv::hw
