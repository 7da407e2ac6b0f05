// What an emulated ConnectX is: identity, port, sizes and the firmware's page appetite.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hw/cmd_values.h"

namespace cxv::sim {

class vport_links;

// cmd_hca_cap.port_type (hw/cmd_values.h): InfiniBand or Ethernet (RoCE).
using hw::port_type;

// The LID at which every InfiniBand port finds the subnet manager the model plays
// (PortInfo:MasterSMLID), as OpenSM on the first host of a fabric: the port with this LID
// also hosts its subnet administrator (sim/link/subnet_admin.h).
inline constexpr std::uint16_t subnet_manager_lid = 1;

struct device_config {
    // PCI identity: a ConnectX-6 (0x101b) PF by default. Subsystem IDs as on
    // NVIDIA-branded cards.
    std::uint16_t device_id = 0x101b;
    std::uint16_t subsystem_vendor_id = 0x15b3;
    std::uint16_t subsystem_id = 0x0007;
    port_type port = port_type::IB;
    // SR-IOV (PCIe Base "SR-IOV Extended Capability"): the VFs a PF offers (0: the
    // function has no such capability, as when the firmware's SR-IOV is off), their
    // device ID, and where their routing IDs lie (First VF Offset, VF Stride). The
    // presentation layer presents the VFs (sim/vfio/options.h) and says how many are
    // enabled (config_space::set_num_vfs). A VF's own model has `virtual_function`.
    std::uint16_t sriov_totalvfs = 0;
    std::uint16_t sriov_vf_device_id = 0;
    std::uint16_t sriov_vf_offset = 0;
    std::uint16_t sriov_vf_stride = 1;
    bool virtual_function = false;
    // What a PF, as its VFs' vport group manager, set of their vports (sim/vport_links.h),
    // shared with the VFs' models wherever they run; the presentation layer provides it
    // to an SR-IOV PF and its VFs. Null: nothing to share (no SR-IOV).
    std::shared_ptr<vport_links> vports;

    // Firmware version reported in the initialization segment and health buffer.
    std::uint16_t fw_rev_major = 20;
    std::uint16_t fw_rev_minor = 39;
    std::uint16_t fw_rev_subminor = 1002;
    // The board's PSID (QUERY_ADAPTER's vsd_contd_psid, at most 16 characters): what Linux
    // reports as its board id.
    std::string psid = "MT_0000000222";

    // BAR0: 32 MiB as on ConnectX-5/6; UARs are its 4 KiB pages from first_uar on.
    std::size_t bar0_size = std::size_t{32} << 20;
    std::uint32_t first_uar = 8;
    unsigned msix_vectors = 64;

    // Firmware pages asked for by QUERY_PAGES (boot, init) before INIT_HCA.
    std::uint32_t boot_pages = 16;
    std::uint32_t init_pages = 64;
    // Pages asked for with one PAGE_REQUEST event when firmware memory runs low.
    std::uint32_t page_request_batch = 16;

    // How long `initializing` stays set after reset.
    std::chrono::milliseconds boot_time{20};
    // How often health_counter advances.
    std::chrono::milliseconds health_period{50};
    // The internal timer's frequency (cmd_hca_cap.device_frequency_khz: ConnectX-6's
    // 156.25 MHz), and how far its crystal is off it, in parts per million (the timer then
    // runs at clock_khz * (1 + clock_ppm / 1e6) while the capability still says clock_khz,
    // as a card's oscillator drifts from its nominal frequency).
    std::uint32_t clock_khz = 156250;
    std::int32_t clock_ppm = 0;
    // How long the link trains after INIT_HCA, PAOS admin up or the cable plugged in,
    // before it is up (Ethernet: ACTIVE; InfiniBand: INITIALIZED, physical LinkUp). A
    // card takes seconds; a few hundred milliseconds keeps the events visible to a
    // program that creates its EQs right after bring-up.
    std::chrono::milliseconds link_up_time{300};
    // InfiniBand: how long after the link is up the subnet manager (played by the model)
    // takes to assign the LID and move the port to ACTIVE.
    std::chrono::milliseconds sm_sweep_time{30};

    // Port addressing. InfiniBand: LID and GUIDs. Ethernet: MAC and an IPv4 address
    // (its IPv4-mapped IPv6 GID is GID index 0), link-local by default (RFC 3927's
    // 169.254.1.0 - 169.254.254.255), never a private or public range.
    std::uint16_t lid = 1;
    std::uint64_t node_guid = 0x0002c90300a1b2c0ull;
    std::array<std::uint8_t, 6> mac{0x02, 0xc5, 0x00, 0x00, 0x00, 0x01};
    std::array<std::uint8_t, 4> ipv4{169, 254, 1, 1};

    // The segment the port is cabled to (sim/link/segment.h). With `fabric_dir` empty,
    // the in-process segment named `fabric`: the ports of this process with the same
    // name reach each other. Otherwise the segment of that directory, shared by every
    // process started with it.
    std::string fabric = "default";
    std::string fabric_dir;
    // Every frame the port sends or receives, appended to this pcap file (empty: none).
    std::string pcap;
    // Faults on the frames the port sends (sim/link/port.h): each frame is independently
    // dropped, duplicated, held back behind the next one, or has one bit flipped after
    // its link header, with these probabilities; and every frame waits `delay` first.
    struct link_faults {
        double drop = 0, duplicate = 0, reorder = 0, corrupt = 0;
        std::chrono::microseconds delay{0};
        std::uint64_t seed = 1;
        bool any() const noexcept {
            return drop > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delay.count() > 0;
        }
    } faults;
    // Whether BlueFlame writes arrive as one 64-byte burst (a write-combining mapping on
    // a platform that combines). When false the device sees only the doorbell part of a
    // BlueFlame write, as on a platform without write combining, and drivers that test
    // for it (Linux's mlx5 write-combining self-test) must fall back.
    bool write_combining = true;
    // Whether the function's rounds run on a model thread of its own rather than on the
    // process's shared one (sim/model_thread.h).
    bool own_thread = false;
};

}  // namespace cxv::sim
