// HCA-level commands: enable, ISSI, firmware pages, capabilities, init and teardown,
// driver version (PRM "Initialization and Teardown", "Firmware Pages", "HCA
// Capabilities"); register access is in fw_reg.cc.
#include <algorithm>
#include <cstring>
#include <vector>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/firmware.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

using hw::hca_cap_type;
using hw::manage_pages_op_mod;
using hw::query_pages_op_mod;
using hw::teardown_hca_profile;

// SET_HCA_CAP's op_mod names the capability type only (bit 0, current/max, is a query's).
constexpr std::uint16_t set_cap_op_mod(hca_cap_type t) { return hw::hca_cap_op_mod(t, hw::hca_cap_mode::GET_MAX); }

constexpr std::uint32_t supported_issi_mask = 0x3;  // ISSI 0 and 1


}  // namespace

cmd_reply firmware::enable_hca(cmd_ctx& c) {
    if (ifc::get<ifc::enable_hca_in::function_id>(c.in.data()) != 0 ||
        ifc::get<ifc::enable_hca_in::embedded_cpu_function>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);  // only the PF itself
    }
    if (state_ == hca_state::disabled) state_ = hca_state::enabled;
    return ok();
}

cmd_reply firmware::disable_hca(cmd_ctx& c) {
    if (ifc::get<ifc::disable_hca_in::function_id>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    // The function stops; every page it held returns to the driver implicitly.
    release_all_objects();
    port_.stop();
    pages_.clear();
    boot_pages_given_ = init_pages_given_ = false;
    pages_requested_ = 0;
    state_ = hca_state::disabled;
    return ok();
}

cmd_reply firmware::query_issi(cmd_ctx& c) {
    ifc::set<ifc::query_issi_out::current_issi>(c.out.data(), current_issi_);
    ifc::set<ifc::query_issi_out::supported_issi_dw0>(c.out.data(), supported_issi_mask);
    return ok();
}

cmd_reply firmware::set_issi(cmd_ctx& c) {
    const auto issi = ifc::get<ifc::set_issi_in::current_issi>(c.in.data());
    if (issi >= 32 || !((supported_issi_mask >> issi) & 1)) return bad_param(cmd_syndrome::BAD_ISSI);
    current_issi_ = static_cast<std::uint16_t>(issi);
    return ok();
}

cmd_reply firmware::query_pages(cmd_ctx& c) {
    if (ifc::get<ifc::query_pages_in::function_id>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    std::uint32_t n = 0;
    switch (static_cast<query_pages_op_mod>(c.op_mod)) {
        case query_pages_op_mod::BOOT_PAGES:
            n = boot_pages_given_ ? 0 : cfg_.boot_pages;
            break;
        case query_pages_op_mod::INIT_PAGES:
            n = init_pages_given_ ? 0 : cfg_.init_pages;
            break;
        case query_pages_op_mod::REGULAR_PAGES:
            n = 0;  // run-time needs arrive as PAGE_REQUEST events
            break;
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
    pages_requested_ = n;
    ifc::set<ifc::query_pages_out::function_id>(c.out.data(), 0);
    ifc::set<ifc::query_pages_out::num_pages>(c.out.data(), n);
    return ok();
}

cmd_reply firmware::manage_pages(cmd_ctx& c) {
    if (ifc::get<ifc::manage_pages_in::function_id>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    const std::uint32_t n = ifc::get<ifc::manage_pages_in::input_num_entries>(c.in.data());
    switch (static_cast<manage_pages_op_mod>(c.op_mod)) {
        case manage_pages_op_mod::ALLOCATION_FAIL:
            // The driver could not give what was asked: nothing changes.
            pages_requested_ = 0;
            return ok();
        case manage_pages_op_mod::ALLOCATION_SUCCESS: {
            const std::size_t need = ifc::manage_pages_in::size_bytes + std::size_t{n} * 8;
            // The input must hold the entries it announces.
            if (c.in.size() < need) return fail(cmd_status::BAD_INPUT_LEN, cmd_syndrome::BAD_INPUT_LEN);
            // Check the whole list before taking any page, so that a bad list changes
            // nothing: 4 KiB aligned, not given already, not listed twice. (IOVA 0 is
            // valid: VFIO's usable range starts there, and rdma-core hands it out.)
            std::vector<std::uint64_t> list(n);
            for (std::uint32_t i = 0; i < n; ++i) {
                list[i] = ifc::get<ifc::manage_pages_in::pas>(c.in.data(), i);
                if (list[i] % pages::page_size) return bad_param(cmd_syndrome::BAD_ALIGNMENT);
                if (pages_.contains(list[i])) return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
            std::sort(list.begin(), list.end());
            if (std::adjacent_find(list.begin(), list.end()) != list.end()) {
                return bad_param(cmd_syndrome::BAD_PARAMETER);
            }
            for (const auto pa : list) pages_.give(pa);
            if (!boot_pages_given_) {
                boot_pages_given_ = true;
            } else if (!init_pages_given_ && state_ == hca_state::enabled) {
                init_pages_given_ = true;
            }
            pages_requested_ = pages_requested_ > n ? pages_requested_ - n : 0;
            return ok();
        }
        case manage_pages_op_mod::HCA_RETURN_PAGES: {
            // Give back up to n pages that hold no object; the reply lists them.
            const std::size_t room = c.olen > ifc::manage_pages_out::size_bytes
                                         ? (c.olen - ifc::manage_pages_out::size_bytes) / 8
                                         : 0;
            const auto back = pages_.take(std::min<std::size_t>(n, room));
            if (c.out.size() < ifc::manage_pages_out::size_bytes + back.size() * 8) {
                return fail(cmd_status::BAD_OUTPUT_LEN, cmd_syndrome::OUTPUT_TOO_SHORT);
            }
            ifc::set<ifc::manage_pages_out::output_num_entries>(c.out.data(),
                                                                static_cast<std::uint32_t>(back.size()));
            for (std::size_t i = 0; i < back.size(); ++i) {
                ifc::set<ifc::manage_pages_out::pas>(c.out.data(), i, back[i]);
            }
            return ok();
        }
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
}

cmd_reply firmware::query_hca_cap(cmd_ctx& c) {
    if (ifc::get<ifc::query_hca_cap_in::other_function>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    std::byte* cap = ifc::at<ifc::query_hca_cap_out::capability>(c.out.data());
    const bool current = c.op_mod & 1;
    switch (static_cast<hca_cap_type>(c.op_mod >> 1)) {
        case hca_cap_type::GENERAL:
            if (current) {
                std::memcpy(cap, current_caps_.data(), current_caps_.size());
            } else {
                fill_general_caps(cap, true);
            }
            return ok();
        case hca_cap_type::ATOMIC:
            // cmd_hca_cap.atomic is set, so drivers query these (Linux mlx5_query_hca_caps
            // fails its bring-up without them).
            fill_atomic_caps(cap, !current);
            return ok();
        case hca_cap_type::ROCE:
            if (cfg_.port != port_type::ethernet) return bad_param(cmd_syndrome::BAD_OP_MOD);
            fill_roce_caps(cap);
            return ok();
        case hca_cap_type::DEV_EVENT:
            // cmd_hca_cap.event_cap is set: the events a DevX user may subscribe to
            // (user_affiliated_events, user_unaffiliated_events). None: the model has no
            // event subscription for users, so the bitmaps are zero.
            return ok();
        default:
            return bad_param(cmd_syndrome::BAD_OP_MOD);
    }
}

cmd_reply firmware::set_hca_cap(cmd_ctx& c) {
    using cap = ifc::cmd_hca_cap;
    const std::byte* in = ifc::at<ifc::set_hca_cap_in::capability>(c.in.data());
    if (c.op_mod == set_cap_op_mod(hca_cap_type::ROCE)) {
        // Only sw_r_roce_src_udp_port is settable, and only on a RoCE port.
        if (cfg_.port != port_type::ethernet) return bad_param(cmd_syndrome::BAD_OP_MOD);
        return ok();
    }
    if (c.op_mod == set_cap_op_mod(hca_cap_type::ATOMIC)) {
        // Only the requester's 8-byte endianness mode is settable: 0 (big endian) or,
        // as supported_atomic_req_8B_endianness_mode_1 offers, 1 (host endianness).
        const auto mode = ifc::get<ifc::atomic_caps::atomic_req_8B_endianness_mode>(in);
        if (mode > 1) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
        atomic_req_mode_ = static_cast<std::uint8_t>(mode);
        return ok();
    }
    if (c.op_mod != set_cap_op_mod(hca_cap_type::GENERAL)) return bad_param(cmd_syndrome::BAD_OP_MOD);

    std::array<std::byte, cap::size_bytes> max{};
    fill_general_caps(max.data(), true);
    std::array<std::byte, cap::size_bytes> next = current_caps_;
    // A settable field takes the driver's value if the device's maximum allows it; all
    // other fields keep the device's value, whatever the input says.
    bool refused = false;
    auto settable = [&]<typename F>(F) {
        const auto want = ifc::get<F>(in);
        if (want > ifc::get<F>(max.data())) refused = true;
        ifc::set<F>(next.data(), want);
    };
    settable(cap::cmdif_checksum{});
    settable(cap::cache_line_128byte{});
    settable(cap::disable_link_up{});
    settable(cap::log_max_qp{});
    settable(cap::pkey_table_size{});
    settable(cap::num_vhca_ports{});
    if (ifc::get<cap::log_uar_page_sz>(in) != 0) refused = true;  // 4 KiB UARs only
    if (refused) return bad_param(cmd_syndrome::EXCEEDS_LIMIT);
    current_caps_ = next;
    return ok();
}

cmd_reply firmware::init_hca(cmd_ctx&) {
    if (state_ == hca_state::initialized) return fail(cmd_status::BAD_SYS_STATE, cmd_syndrome::HCA_ALREADY_INITIALIZED);
    if (!boot_pages_given_ || !init_pages_given_ || pages_requested_ != 0) {
        return fail(cmd_status::BAD_SYS_STATE, cmd_syndrome::PAGES_OUTSTANDING);
    }
    state_ = hca_state::initialized;
    // The link trains from here (fw_port.cc), unless disable_link_up is set.
    port_.on_init_hca(ifc::get<ifc::cmd_hca_cap::disable_link_up>(current_caps_.data()) != 0);
    return ok();
}

cmd_reply firmware::teardown_hca(cmd_ctx& c) {
    const auto profile = ifc::get<ifc::teardown_hca_in::profile>(c.in.data());
    switch (static_cast<teardown_hca_profile>(profile)) {
        case teardown_hca_profile::GRACEFUL_CLOSE:
        case teardown_hca_profile::FORCE_CLOSE:
            release_all_objects();
            port_.stop();
            state_ = hca_state::torn_down;
            return ok();
        case teardown_hca_profile::PREPARE_FAST_TEARDOWN:
            // The driver completes it by writing nic_interface = DISABLED (model thread).
            fast_teardown_prepared_ = true;
            ifc::set<ifc::teardown_hca_out::state>(c.out.data(),
                                                   static_cast<std::uint32_t>(hw::teardown_hca_state::SUCCESS));
            return ok();
        default:
            return bad_param(cmd_syndrome::BAD_PARAMETER);
    }
}

bool firmware::finish_fast_teardown() {
    if (!fast_teardown_prepared_) return false;
    fast_teardown_prepared_ = false;
    release_all_objects();
    port_.stop();
    state_ = hca_state::torn_down;
    return true;
}

cmd_reply firmware::set_driver_version(cmd_ctx& c) {
    const std::byte* v = ifc::at<ifc::set_driver_version_in::driver_version>(c.in.data());
    std::memcpy(driver_version_.data(), v, driver_version_.size());
    return ok();
}

// PRM QUERY_ADAPTER: the vendor ids and the PSID (a card's VSD is vendor data; the
// model's is empty).
cmd_reply firmware::query_adapter(cmd_ctx& c) {
    std::byte* block = ifc::at<ifc::query_adapter_out::query_adapter_struct>(c.out.data());
    ifc::set<ifc::query_adapter_param_block::ieee_vendor_id>(block, 0x0002c9);  // the Mellanox OUI
    ifc::set<ifc::query_adapter_param_block::vsd_vendor_id>(block, 0x15b3);
    std::byte* psid = ifc::at<ifc::query_adapter_param_block::vsd_contd_psid>(block);
    std::memcpy(psid, cfg_.psid.data(), std::min<std::size_t>(cfg_.psid.size(), 16));
    return ok();
}

}  // namespace cxv::sim
