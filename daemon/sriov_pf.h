// cxvd as the driver of an SR-IOV PF bound to vfio-pci (cxvd --vfs N, docs/daemon.md
// "Trust domains on VFs"): it does the PF's part for N VFs as Linux's mlx5_core does on
// a PF (driver/hca/sriov.h), enables them through vfio-pci, and hands the server their
// addresses and the VF token that opens them. The PF's own device fd never leaves this
// object: clients are served the VFs only, one trust domain each.
//
// Order (Linux's mlx5_sriov_enable, then vfio-pci's sriov_configure): the PF opened and
// brought up; a fresh VF token set on it; for each VF n: ENABLE_HCA of function n, its
// admin state AUTO (follow the uplink), a MAC where it has none; then sriov_numvfs = N,
// which creates the VFs, bound to vfio-pci (vfio-pci sets their driver_override). Going
// away it undoes this in reverse: sriov_numvfs 0 (every VF closed first: the server
// goes before), DISABLE_HCA of each VF, the PF torn down.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "driver/hca/hca.h"

namespace cxv::daemon {

class sriov_pf {
public:
    // `vfs` VFs of `pf`. The PF must have no VFs enabled (another driver's?), be bound to
    // vfio-pci with its enable_sriov parameter on, and its firmware make it its VFs'
    // vport group manager.
    static result<std::unique_ptr<sriov_pf>> create(const std::string& pf, unsigned vfs, driver::hca::options o);
    ~sriov_pf();
    sriov_pf(const sriov_pf&) = delete;
    sriov_pf& operator=(const sriov_pf&) = delete;

    const std::string& bdf() const noexcept { return bdf_; }
    const std::vector<std::string>& vfs() const noexcept { return vfs_; }
    // The UUID every VF's open must give (VFIO_GROUP_GET_DEVICE_FD "BDF vf_token=UUID").
    const std::string& token() const noexcept { return token_; }
    driver::hca& hca() noexcept { return *hca_; }

private:
    sriov_pf() = default;
    std::string bdf_;
    std::string token_;
    std::unique_ptr<driver::hca> hca_;
    unsigned enabled_ = 0;        // VFs whose HCA the PF enabled (1..enabled_)
    bool numvfs_written_ = false;  // sriov_numvfs set: 0 again on the way out
    std::vector<std::string> vfs_;
};

// A random (version 4) UUID, from getrandom(2).
result<std::string> random_uuid();

}  // namespace cxv::daemon
