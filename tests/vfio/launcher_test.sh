#!/usr/bin/env bash
# The `cxv-sim` launcher: list, run, exit status pass-through, transparency for programs
# that never touch VFIO, nesting and usage errors.
#   launcher_test.sh <path to cxv-sim>
set -uo pipefail

sim=$1
source tests/checks.sh

# list
expect_eq "list (default)" "0000:c5:00.0" "$("$sim" list)"
expect_eq "list --devices 2" $'0000:c5:00.0\n0000:c5:00.1' "$("$sim" list --devices 2)"
expect_eq "list --first-bdf" $'0000:17:00.0\n0000:17:00.1' "$("$sim" list --devices 2 --first-bdf 0000:17:00.0)"

# Options and --set apply in command-line order: the later one wins.
expect_eq "later --set wins" "0000:c5:00.0" "$("$sim" list --devices 2 --set devices=1)"
expect_eq "later option wins" $'0000:c5:00.0\n0000:c5:00.1' "$("$sim" list --set devices=1 --devices 2)"
expect_eq "later --first-bdf wins" "0000:18:00.0" "$("$sim" list --first-bdf 0000:17:00.0 --set first_bdf=0000:18:00.0)"

# Help is not an error.
for args in "--help" "help" "run --help" "list --help"; do
    # shellcheck disable=SC2086
    "$sim" $args >/dev/null 2>&1
    expect_eq "help: cxv-sim $args" 0 $?
done
expect_eq "run --help names --set" 1 "$("$sim" run --help | grep -c -- '--set KEY=VALUE')"

# Exit status is the command's; signal death is 128 + signal.
"$sim" run -- sh -c 'exit 7'
expect_eq "run exit 7" 7 $?
"$sim" run -- true
expect_eq "run true" 0 $?
"$sim" run -- false
expect_eq "run false" 1 $?
"$sim" run -- sh -c 'kill -TERM $$'
expect_eq "run killed by SIGTERM" 143 $?

# Arguments reach the command unchanged.
expect_eq "run argv" "a b|c" "$("$sim" run -- sh -c 'printf "%s|%s" "$1" "$2"' sh "a b" c)"

# Programs that never touch VFIO see the host unchanged.
expect_eq "ls /" "$(ls / 2>&1)" "$("$sim" run -- ls / 2>&1)"
expect_eq "ls -l /usr" "$(ls -l /usr 2>&1)" "$("$sim" run -- ls -l /usr 2>&1)"
expect_eq "cat /etc/os-release" "$(cat /etc/os-release)" "$("$sim" run -- cat /etc/os-release)"
expect_eq "stdin pass-through" "piped" "$(echo piped | "$sim" run -- cat)"
expect_eq "env pass-through" "kept" "$(CXV_LAUNCHER_TEST_VAR=kept "$sim" run -- sh -c 'echo "$CXV_LAUNCHER_TEST_VAR"')"

# The emulated sysfs, through ordinary tools.
expect_eq "vendor via cat" "0x15b3" "$("$sim" run --devices 2 -- cat /sys/bus/pci/devices/0000:c5:00.1/vendor)"
expect_eq "class, port type eth" "0x020000" "$("$sim" run --port-type eth -- cat /sys/bus/pci/devices/0000:c5:00.0/class)"
expect_eq "class, port type ib" "0x020700" "$("$sim" run --port-type ib -- cat /sys/bus/pci/devices/0000:c5:00.0/class)"
expect_eq "iommu group link" "121" "$("$sim" run --devices 2 -- sh -c 'basename "$(readlink /sys/bus/pci/devices/0000:c5:00.1/iommu_group)"')"
expect_eq "--first-group" "7" "$("$sim" run --first-group 7 -- sh -c 'basename "$(readlink /sys/bus/pci/devices/0000:c5:00.0/iommu_group)"')"
expect_eq "driver link" "vfio-pci" "$("$sim" run -- sh -c 'basename "$(readlink /sys/bus/pci/devices/0000:c5:00.0/driver)"')"
expect_eq "no device outside --devices" "absent" "$("$sim" run -- sh -c 'test -e /sys/bus/pci/devices/0000:c5:00.1 && echo present || echo absent')"

# Nesting.
expect_eq "nested list" "0000:c5:00.0" "$("$sim" run -- "$sim" list)"
"$sim" run -- "$sim" run -- sh -c 'exit 5'
expect_eq "nested run exit" 5 $?

# realpath through the emulated links (libpci resolves iommu_group and driver so).
expect_eq "realpath" $'/sys/devices/pci0000:c5/0000:c5:00.0\n/sys/kernel/iommu_groups/120\n/sys/bus/pci/drivers/vfio-pci\n/tmp' \
    "$("$sim" run -- realpath /sys/bus/pci/devices/0000:c5:00.0 /sys/bus/pci/devices/0000:c5:00.0/iommu_group \
        /sys/bus/pci/devices/0000:c5:00.0/driver /tmp)"
expect_eq "realpath of a missing emulated path" 1 "$("$sim" run -- realpath -e /sys/bus/pci/devices/0000:c5:00.0/nothing >/dev/null 2>&1; echo $?)"

# The leak report at exit: what a program left open, or "clean".
expect_eq "leak report, fd left open" \
    "cxv-sim: at exit: 1 container, 0 group and 0 device fds open, 0 DMA mappings (0 bytes), 0 BAR mappings" \
    "$(CXV_SIM_LEAK_REPORT=1 "$sim" run -- bash -c 'exec 3</dev/vfio/vfio; exit 0' 2>&1 | grep 'at exit')"
expect_eq "leak report, clean" \
    "cxv-sim: at exit: 0 container, 0 group and 0 device fds open, 0 DMA mappings (0 bytes), 0 BAR mappings: clean" \
    "$(CXV_SIM_LEAK_REPORT=1 "$sim" run -- bash -c 'exec 3</dev/vfio/vfio; exec 3<&-; exit 0' 2>&1 | grep 'at exit')"

# --fabric DIR is made if missing, also when the place on it is given.
fabric_tmp=$(mktemp -d /tmp/cxv-launcher.XXXXXX)
expect_eq "fabric dir made, index given" "yes" \
    "$("$sim" run --fabric "$fabric_tmp/f" --set fabric_index=3 -- sh -c 'test -d "$0" && echo yes' "$fabric_tmp/f")"
expect_eq "fabric dir made, index taken" "yes" \
    "$("$sim" run --fabric "$fabric_tmp/g" -- sh -c 'test -d "$0" && echo yes' "$fabric_tmp/g")"
rm -rf "$fabric_tmp"

# Usage errors exit 2.
for args in "--bogus" "bogus-subcommand" "run --bogus -- true" "list --devices" "list --port-type token-ring" \
            "list --devices abc" "list --first-bdf nonsense" "" "run" "run true" "list -- true" \
            "list --set devices" "list --config"; do
    # shellcheck disable=SC2086
    "$sim" $args >/dev/null 2>&1
    expect_eq "usage error: cxv-sim $args" 2 $?
done

finish launcher
