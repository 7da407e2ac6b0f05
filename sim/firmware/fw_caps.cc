// The capabilities the model reports (PRM QUERY_HCA_CAP, "HCA Capabilities"): a
// ConnectX-6 class device, with limits sized for a model whose object contexts live in
// real host pages. docs/device-model.md lists every value and why.
#include <cstring>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/firmware.h"

namespace cxv::sim {

namespace ifc = hw::ifc;
using cap = ifc::cmd_hca_cap;

void firmware::fill_general_caps(std::byte* p, bool max) const {
    std::memset(p, 0, cap::size_bytes);
    const bool eth = cfg_.port == port_type::ethernet;
    // Object limits (log2).
    ifc::set<cap::log_max_qp>(p, 16);
    ifc::set<cap::log_max_qp_sz>(p, 15);
    ifc::set<cap::log_max_srq>(p, 16);
    ifc::set<cap::log_max_srq_sz>(p, 15);
    ifc::set<cap::log_max_cq>(p, 16);
    ifc::set<cap::log_max_cq_sz>(p, 22);
    ifc::set<cap::log_max_eq>(p, 6);
    ifc::set<cap::log_max_eq_sz>(p, 22);
    ifc::set<cap::max_num_eqs>(p, 64);
    ifc::set<cap::log_max_mkey>(p, 20);
    ifc::set<cap::log_max_mrw_sz>(p, 64);
    ifc::set<cap::log_max_klm_list_size>(p, 16);
    ifc::set<cap::max_indirection>(p, 4);
    ifc::set<cap::log_max_pd>(p, 18);
    ifc::set<cap::log_max_xrcd>(p, 16);
    // log_max_transport_domain stays 0: ALLOC_TRANSPORT_DOMAIN is not implemented, and
    // a non-zero value makes Linux's mlx5_ib allocate one per user context.
    ifc::set<cap::log_max_ra_req_qp>(p, 4);
    ifc::set<cap::log_max_ra_res_qp>(p, 4);
    ifc::set<cap::log_max_msg>(p, 30);
    ifc::set<cap::max_qp_cnt>(p, 64);
    // Work queue entry sizes (bytes) and stride limits.
    ifc::set<cap::max_wqe_sz_sq>(p, 1024);
    ifc::set<cap::max_wqe_sz_rq>(p, 512);
    ifc::set<cap::max_sgl_for_optimized_performance>(p, 8);
    // Transports and features.
    ifc::set<cap::rc>(p, 1);
    ifc::set<cap::uc>(p, 1);
    ifc::set<cap::ud>(p, 1);
    ifc::set<cap::xrc>(p, 1);
    ifc::set<cap::atomic>(p, 1);
    ifc::set<cap::roce>(p, eth ? 1 : 0);
    ifc::set<cap::wq_signature>(p, 1);
    ifc::set<cap::cq_oi>(p, 1);
    ifc::set<cap::cq_resize>(p, 1);
    ifc::set<cap::cq_moderation>(p, 1);
    ifc::set<cap::cq_eq_remap>(p, 1);
    ifc::set<cap::cqe_version>(p, 1);
    ifc::set<cap::qkv>(p, 1);
    ifc::set<cap::pkv>(p, 1);
    ifc::set<cap::local_ca_ack_delay>(p, 16);
    // Counters (fw_counters.cc): max_qp_cnt Q counter sets besides the default set 0,
    // the retransmission and error counters, QPs moved between sets in RTS, aggregate
    // queries, and the vport's traffic counters.
    ifc::set<cap::out_of_seq_cnt>(p, 1);
    ifc::set<cap::retransmission_q_counters>(p, 1);
    ifc::set<cap::enhanced_error_q_counters>(p, 1);
    ifc::set<cap::rts2rts_qp_counters_set_id>(p, 1);
    ifc::set<cap::q_counter_aggregation>(p, 1);
    ifc::set<cap::vport_counters>(p, 1);
    // Ports.
    ifc::set<cap::port_type>(p, eth ? 1 : 0);
    ifc::set<cap::num_ports>(p, 1);
    ifc::set<cap::num_vhca_ports>(p, 1);
    ifc::set<cap::pkey_table_size>(p, 0);  // 128 entries
    ifc::set<cap::gid_table_size>(p, gid_table_size_code);  // 32 entries
    ifc::set<cap::ports_check>(p, 1);
    // Doorbells: 4 KiB UARs over the 32 MiB BAR, BlueFlame registers of 512 bytes.
    ifc::set<cap::uar_4k>(p, 1);
    ifc::set<cap::uar_sz>(p, 13);
    ifc::set<cap::num_of_uars_per_page>(p, 1);
    ifc::set<cap::bf>(p, 1);
    ifc::set<cap::log_bf_reg_size>(p, 9);
    ifc::set<cap::log_pg_sz>(p, 12);
    // Command interface and bring-up.
    ifc::set<cap::driver_version>(p, 1);
    ifc::set<cap::umem_uid_0>(p, 1);
    ifc::set<cap::fast_teardown>(p, 1);
    ifc::set<cap::force_teardown>(p, 1);
    ifc::set<cap::event_cap>(p, 1);
    ifc::set<cap::device_frequency_khz>(p, 156250);
    if (max) {
        // Settable features the device offers but does not enable by default.
        ifc::set<cap::cmdif_checksum>(p, 3);
        ifc::set<cap::cache_line_128byte>(p, 1);
        ifc::set<cap::disable_link_up>(p, 1);
    }
}

// Atomic Capabilities: 8-byte compare-and-swap and fetch-and-add on RC QPs (no DC, no
// extended atomics), as the transport engine executes them. Linux's mlx5_ib reports
// IB_ATOMIC_HCA only with both operations, 8-byte size and a non-zero current
// endianness mode, which it sets itself (handle_hca_cap_atomic) when mode 1 is offered.
void firmware::fill_atomic_caps(std::byte* p, bool max) const {
    using atomic = ifc::atomic_caps;
    std::memset(p, 0, atomic::size_bytes);
    ifc::set<atomic::atomic_req_8B_endianness_mode>(p, max ? 1 : atomic_req_mode_);
    ifc::set<atomic::supported_atomic_req_8B_endianness_mode_1>(p, 1);
    ifc::set<atomic::atomic_operations>(p, 0x3);  // bit 0 CAS, bit 1 FA
    ifc::set<atomic::atomic_size_qp>(p, 1u << 3);  // 8 bytes
}

void firmware::fill_roce_caps(std::byte* p) const {
    using roce = ifc::roce_cap;
    std::memset(p, 0, roce::size_bytes);
    ifc::set<roce::sw_r_roce_src_udp_port>(p, 1);
    ifc::set<roce::fl_rc_qp_when_roce_enabled>(p, 1);
    ifc::set<roce::l3_type>(p, 0x7);         // GRH, IPv4, IPv6
    // A bit per version (Linux MLX5_ROCE_VERSION_*_CAP = 1 << version): RoCE v2 only,
    // the one the transport engine builds.
    ifc::set<roce::roce_version>(p, 1u << static_cast<unsigned>(hw::roce_version::V2));
    ifc::set<roce::r_roce_dest_udp_port>(p, 4791);
    ifc::set<roce::r_roce_max_src_udp_port>(p, 0xffff);
    ifc::set<roce::r_roce_min_src_udp_port>(p, 0xc000);
    // One RoCE address per GID table entry (SET_ROCE_ADDRESS, fw_roce.cc).
    ifc::set<roce::roce_address_table_size>(p, gid_table_entries);
}

}  // namespace cxv::sim
