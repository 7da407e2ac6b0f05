// The HCA's life cycle: enable and disable, ISSI, init and teardown, driver version,
// adapter identity (PRM "Initialization and Teardown"). The firmware pages these steps
// wait for are fw_pages.cc's, the capabilities fw_caps.cc's.
#include <algorithm>
#include <cstring>
#include <vector>

#include "hw/cmd_values.h"
#include "hw/ifc.h"
#include "sim/firmware/firmware.h"
#include "sim/firmware/handler_util.h"

namespace cxv::sim {

namespace {

using hw::teardown_hca_profile;

constexpr std::uint32_t supported_issi_mask = 0x3;  // ISSI 0 and 1


}  // namespace

namespace {

// ENABLE_HCA and DISABLE_HCA name the function they act on (PRM "ENABLE_HCA"): 0 is the
// caller itself; a PF with SR-IOV also names its VFs, 1 to TotalVFs, as Linux's PF
// driver enables each VF's HCA before the VFs appear. The VFs' own firmware runs in
// their own functions; the PF's part is accepted here. Any other, or an embedded CPU's
// function, is not this function's.
bool other_function_ok(const device_config& cfg, std::uint32_t function_id) {
    return function_id != 0 && !cfg.virtual_function && function_id <= cfg.sriov_totalvfs;
}

}  // namespace

cmd_reply firmware::enable_hca(cmd_ctx& c) {
    const std::uint32_t fn = ifc::get<ifc::enable_hca_in::function_id>(c.in.data());
    if (ifc::get<ifc::enable_hca_in::embedded_cpu_function>(c.in.data()) != 0) {
        return bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    }
    if (fn != 0) return other_function_ok(cfg_, fn) ? ok() : bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    if (state_ == hca_state::disabled) state_ = hca_state::enabled;
    return ok();
}

cmd_reply firmware::disable_hca(cmd_ctx& c) {
    const std::uint32_t fn = ifc::get<ifc::disable_hca_in::function_id>(c.in.data());
    if (fn != 0) return other_function_ok(cfg_, fn) ? ok() : bad_param(cmd_syndrome::UNKNOWN_RESOURCE);
    // The function stops; every page it held returns to the driver implicitly.
    release_all_objects();
    port_.stop();
    icm_.clear();
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

cmd_reply firmware::init_hca(cmd_ctx&) {
    if (state_ == hca_state::initialized) return fail(cmd_status::BAD_SYS_STATE, cmd_syndrome::HCA_ALREADY_INITIALIZED);
    if (!icm_.all_given()) {
        return fail(cmd_status::BAD_SYS_STATE, cmd_syndrome::PAGES_OUTSTANDING);
    }
    state_ = hca_state::initialized;
    // The link trains from here (sim/device_port.h), unless disable_link_up is set.
    port_.on_init_hca(ifc::get<ifc::cmd_hca_cap::disable_link_up>(caps_.current()) != 0);
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
