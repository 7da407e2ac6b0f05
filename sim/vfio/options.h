// What the presentation layer presents: how many emulated functions, at which PCI
// addresses and IOMMU groups, and the device model behind each.
//
// The launcher (`cxv-sim`) and the preload library read the same settings, so that
// `cxv-sim list` prints exactly what `cxv-sim run` presents. Precedence, lowest first:
// built-in defaults, the config file (CXV_SIM_CONFIG / --config), the environment
// (CXV_SIM_*), the launcher's options (which it passes on as environment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "sim/device_config.h"

namespace cxv::sim::vfio {

struct pci_address {
    std::uint16_t domain = 0;
    std::uint8_t bus = 0xc5;
    std::uint8_t device = 0;
    std::uint8_t function = 0;

    std::string str() const;  // "DDDD:BB:DD.F", lower-case hex as sysfs spells it
    static result<pci_address> parse(const std::string& text);
    friend bool operator==(const pci_address&, const pci_address&) = default;
};

// One emulated function as presented.
struct function_spec {
    pci_address address;
    unsigned iommu_group = 0;
    int numa_node = -1;
    device_config model;
    // The host driver the function is bound to when the process starts: "vfio-pci",
    // "mlx5_core" (then it has a netdev, `netdev_up` its operational state, and no
    // /dev/vfio node) or "" (none). Binding changes through sysfs as on Linux.
    std::string kernel_driver = "vfio-pci";
    bool netdev_up = false;
    // SR-IOV. A PF offers model.sriov_totalvfs VFs, each a spec of its own after every
    // PF; a VF exists only while its PF's sriov_numvfs covers it (sysfs.h). `physfn`:
    // a VF's PF (its index in the function list), -1 for a PF; `vf_index`: which VF.
    int physfn = -1;
    unsigned vf_index = 0;
    // vfio-pci's enable_sriov module parameter (N by default, as in Linux): whether a
    // PF bound to vfio-pci may enable VFs.
    bool vfio_pci_enable_sriov = false;
};

// The binding of every function (sysfs.h), shared by the processes of one `cxv-sim run`:
// a memfd of this name that the launcher makes and its children inherit, its fd number
// in this variable.
inline constexpr const char* kBindingName = "cxv-sim-binding";
inline constexpr const char* kBindingVariable = "CXV_SIM_BINDING_FD";

// Functions one process may present on a shared fabric, and processes on one fabric.
inline constexpr unsigned kFunctionsPerProcess = 16;
inline constexpr unsigned kMaxFabricIndex = 255;

struct options {
    unsigned devices = 1;
    pci_address first_address;       // 0000:c5:00.0
    unsigned first_group = 120;      // IOMMU group of the first function
    int numa_node = -1;
    device_config model;             // of the first function; the others differ in GUID/MAC/LID
    // This process's place among the processes sharing model.fabric_dir (the launcher
    // takes the next free one): its functions' bus, IOMMU groups, GUIDs, MACs, LIDs
    // and addresses are offset by it, so that no two processes collide.
    unsigned fabric_index = 0;
    std::string kernel_driver = "vfio-pci";  // function_spec's, for every function
    bool netdev_up = false;
    bool vfio_pci_enable_sriov = false;      // function_spec's

    // Applies one "key = value" setting (config file syntax; keys in docs/device-model.md).
    status set(const std::string& key, const std::string& value);
    // Reads a config file: one setting per line, '#' starts a comment; with
    // `only_prefix`, keys must start with it.
    status load_file(const std::string& path, const std::string& only_prefix = "");
    // Applies CXV_SIM_CONFIG, then every other CXV_SIM_* variable.
    status load_environment();
    // Every CXV_SIM_* setting variable (not CXV_SIM_CONFIG).
    status load_variables();

    // Every setting as "key", "value" pairs that `set` reads back to these options.
    std::vector<std::pair<std::string, std::string>> settings() const;

    // The functions, in order: addresses count up by function number (then device
    // number), groups by one, GUIDs, MACs, LIDs and IPv4 addresses by one. The PFs
    // first, then each PF's VFs (model.sriov_totalvfs of them) at the routing IDs after
    // every PF's: First VF Offset from their PF, VF Stride 1.
    result<std::vector<function_spec>> functions() const;
};

// The environment variable for a setting key, e.g. "port_type" -> "CXV_SIM_PORT_TYPE".
std::string environment_name(const std::string& key);

// Every key `set` accepts, for usage texts and tests.
const std::vector<std::string>& setting_keys();

}  // namespace cxv::sim::vfio
