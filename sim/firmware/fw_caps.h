// The function's capabilities (PRM "HCA Capabilities": QUERY_HCA_CAP, SET_HCA_CAP): the
// values the model reports and the few a driver may set. The other command units read
// the current general capabilities (cmd_hca_cap) for their limits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hw/ifc.h"
#include "sim/device_config.h"
#include "sim/firmware/command.h"

namespace cxv::sim {

class hca_caps {
public:
    // The GID table's size: cmd_hca_cap.gid_table_size's encoding (8 << n entries) and
    // the entries it means, which roce_cap.roce_address_table_size reports too.
    static constexpr unsigned gid_table_size_code = 2;
    static constexpr std::uint32_t gid_table_entries = 8u << gid_table_size_code;
    // RSS: an RQT holds at most 2^log_max_rqt_size RQs (cmd_hca_cap, and the Ethernet
    // offloads' rss_ind_tbl_cap).
    static constexpr unsigned log_max_rqt_size = 11;
    // NIC receive flow tables (flow_table_prop_layout): entries per table (and in all),
    // levels, tables, counters, destinations per entry (log2 except the level).
    static constexpr unsigned flow_log_max_ft_size = 16;
    static constexpr unsigned flow_max_ft_level = 63;
    static constexpr unsigned flow_log_max_ft_num = 10;
    static constexpr unsigned flow_log_max_counter = 16;
    static constexpr unsigned flow_log_max_destination = 6;
    // Multicast: groups (log2) and the QPs attached to one (cmd_hca_cap's log_max_mcg and
    // max_qp_mcg).
    static constexpr unsigned log_max_mcg = 21;
    static constexpr unsigned max_qp_mcg = 240;

    explicit hca_caps(const device_config& cfg) : cfg_(cfg) { reset(); }

    cmd_reply query_hca_cap(cmd_ctx& c);
    cmd_reply set_hca_cap(cmd_ctx& c);

    // cmd_hca_cap as SET_HCA_CAP left it.
    const std::byte* current() const noexcept { return current_.data(); }
    // Power-on values: the device's defaults.
    void reset();

private:
    void fill_general_caps(std::byte* cap, bool max) const;
    void fill_roce_caps(std::byte* cap) const;
    void fill_atomic_caps(std::byte* cap, bool max) const;
    void fill_ethernet_offload_caps(std::byte* cap) const;
    void fill_flow_table_caps(std::byte* cap) const;

    const device_config& cfg_;
    std::array<std::byte, hw::ifc::cmd_hca_cap::size_bytes> current_{};
    std::uint8_t atomic_req_mode_ = 0;  // atomic_caps.atomic_req_8B_endianness_mode
};

}  // namespace cxv::sim
