// cxvd's SR-IOV PF (sriov_pf.h). PRM "ENABLE_HCA", "Vport Commands"; Linux
// drivers/pci/iov.c and vfio-pci for the sysfs and VFIO steps.
#include "daemon/sriov_pf.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "daemon/server.h"
#include "driver/hca/sriov.h"
#include "driver/pci/pci.h"
#include "driver/vfio/vfio.h"

namespace cxv::daemon {

namespace sriov = driver::sriov;

result<std::string> random_uuid() {
    std::array<std::uint8_t, 16> b{};
    std::size_t got = 0;
    while (got < b.size()) {
        const ssize_t n = ::getrandom(b.data() + got, b.size() - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return error{errno, "getrandom for a VF token failed"};
        got += static_cast<std::size_t>(n);
    }
    b[6] = static_cast<std::uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
    b[8] = static_cast<std::uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
    std::string s;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += fmt::format("{:02x}", b[i]);
    }
    return s;
}

result<std::unique_ptr<sriov_pf>> sriov_pf::create(const std::string& pf, unsigned vfs, driver::hca::options o) {
    const auto fail = [&pf](const error& e) { return error{e.code, fmt::format("--vfs on {}: {}", pf, e.message)}; };
    auto total = driver::pci::total_vfs(pf);
    if (!total) return fail(total.error());
    if (vfs == 0 || vfs > *total) {
        return error{ERANGE, fmt::format("--vfs {} on {}: it offers 1 to {} VFs (sriov_totalvfs)", vfs, pf, *total)};
    }
    std::unique_ptr<sriov_pf> p(new sriov_pf());
    p->bdf_ = pf;
    // The PF opens only when no process drives it (and, while its VFs are open somewhere,
    // only with their token): VFs enabled now are an earlier PF user's, a cxvd that was
    // killed for instance. They go first, as a restarted PF driver starts afresh.
    auto dev = driver::vfio::device::open(pf);
    if (!dev) return fail(dev.error());
    auto now = driver::pci::num_vfs(pf);
    if (!now) return fail(now.error());
    if (*now != 0) {
        log(level::warning, fmt::format("{}: {} VFs left enabled by an earlier user of the PF: disabling them first",
                                        pf, *now));
        if (auto s = driver::pci::set_num_vfs(pf, 0); !s) {
            return error{s.error().code, fmt::format("--vfs on {}: {} VFs are enabled and could not be disabled "
                                                     "(still in use?): {}",
                                                     pf, *now, s.error().message)};
        }
    }
    auto token = random_uuid();
    if (!token) return fail(token.error());
    if (auto s = (*dev)->set_vf_token(*token); !s) return fail(s.error());
    p->token_ = *token;
    auto h = driver::hca::create(std::move(dev).value(), o);
    if (!h) return error{h.error().code, fmt::format("{}: bring-up failed: {}", pf, h.error().message)};
    p->hca_ = std::move(h).value();
    log(level::info, fmt::format("{}: up as the PF's driver, firmware {}", pf, p->hca_->fw_version_string()));
    if (!sriov::vport_group_manager(*p->hca_)) {
        return error{ENOTSUP, fmt::format("--vfs on {}: its firmware does not make it its VFs' vport group manager "
                                          "(cmd_hca_cap.vport_group_manager 0: is SR-IOV enabled in the firmware?)",
                                          pf)};
    }
    // The PF's part for each VF, before the VFs exist on the bus.
    for (unsigned n = 1; n <= vfs; ++n) {
        const auto vf = static_cast<std::uint16_t>(n);
        if (auto s = sriov::enable_vf_hca(*p->hca_, vf); !s) return fail(s.error());
        p->enabled_ = n;
        auto v = sriov::query_vf_vport(*p->hca_, vf);
        if (!v) return fail(v.error());
        if (p->hca_->ethernet() && v->mac == std::array<std::uint8_t, 6>{}) {
            if (auto s = sriov::set_vf_mac(*p->hca_, vf, sriov::vf_mac_of(p->hca_->mac(), vf)); !s) {
                return fail(s.error());
            }
        }
        if (auto s = sriov::set_vf_admin_state(*p->hca_, vf, hw::vport_admin_state::AUTO); !s) {
            return fail(s.error());
        }
    }
    if (auto s = driver::pci::set_num_vfs(pf, vfs); !s) return fail(s.error());
    p->numvfs_written_ = true;
    for (unsigned i = 0; i < vfs; ++i) {
        auto a = driver::pci::vf_address(pf, i);
        if (!a) return fail(a.error());
        p->vfs_.push_back(std::move(a).value());
    }
    log(level::info, fmt::format("{}: {} VFs enabled: {}", pf, vfs, fmt::join(p->vfs_, " ")));
    return p;
}

sriov_pf::~sriov_pf() {
    if (numvfs_written_) {
        if (auto s = driver::pci::set_num_vfs(bdf_, 0); !s) {
            log(level::warning, s.error().message);
        } else {
            log(level::info, fmt::format("{}: VFs disabled", bdf_));
        }
    }
    for (unsigned n = enabled_; n >= 1 && hca_; --n) {
        if (auto s = sriov::disable_vf_hca(*hca_, static_cast<std::uint16_t>(n)); !s) {
            log(level::warning, fmt::format("{}: DISABLE_HCA of VF {}: {}", bdf_, n, s.error().message));
        }
    }
    hca_.reset();
}

}  // namespace cxv::daemon
