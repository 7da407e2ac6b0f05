#!/usr/bin/env bash
# SR-IOV on the model, as a user with a kernel PF takes VFs for cxv: the PF bound to
# mlx5_core, VFs made through sriov_numvfs (they come up on mlx5_core, as Linux probes
# them), `cxv list` and `cxv setup --status` showing them and their PF, `cxv setup --bind` moving two to
# vfio-pci, `cxv info` bringing one up with an address of its own, the example program
# moving data between the two over the model's wire, and the VFs going again.
set -uo pipefail
sim=$1
cxv=$2
send_recv=$3
source tests/checks.sh
# A write(2) to a sysfs attribute that shows its errno (a shell's echo > hides it here).
store='perl -e "open(my \$f, \">\", \$ARGV[0]) or die \"open: \$!\\n\"; syswrite(\$f, \$ARGV[1]) or print \"\$!\\n\"" '

out=$("$sim" run --port-type eth --link-up-ms 20 --set kernel_driver=mlx5_core --set sriov_totalvfs=4 -- bash -c "
    pf=/sys/bus/pci/devices/0000:c5:00.0
    echo \"total \$(cat \$pf/sriov_totalvfs) now \$(cat \$pf/sriov_numvfs) device \$(cat \$pf/sriov_vf_device)\"
    $store \$pf/sriov_numvfs 5
    $store \$pf/sriov_numvfs 2
    $store \$pf/sriov_numvfs 3
    '$cxv' list
    '$cxv' setup --status 0000:c5:00.0 0000:c5:00.2 | grep SR-IOV
    '$cxv' setup --bind 0000:c5:00.1 0000:c5:00.2
    '$cxv' info 0000:c5:00.1 | grep -E 'port 1: Active,|GID 1'
    '$cxv' info 0000:c5:00.0 2>&1 | tail -1
    '$send_recv' 0000:c5:00.1 0000:c5:00.2; echo \"send_recv rc=\$?\"
    $store \$pf/sriov_numvfs 0
    ls /sys/bus/pci/devices/ | grep -c c5
" 2>&1)
echo "$out"
grep -q "^total 4 now 0 device 101c$" <<<"$out" || fail "the PF's SR-IOV attributes: $out"
grep -q "^Numerical result out of range$" <<<"$out" || fail "5 VFs of 4: not ERANGE: $out"
grep -q "^Device or resource busy$" <<<"$out" || fail "3 VFs while 2 are enabled: not EBUSY: $out"
grep -Eq "^0000:c5:00.1 +ConnectX-6 VF +15b3:101c VF mlx5_core +121 .* - +bound to mlx5_core" <<<"$out" ||
    fail "cxv list: the first VF: $out"
grep -Eq "^0000:c5:00.2 +ConnectX-6 VF +15b3:101c VF mlx5_core +122 " <<<"$out" || fail "cxv list: the second VF: $out"
grep -q "^0000:c5:00.3" <<<"$out" && fail "cxv list: a third VF: $out"
grep -q "^  SR-IOV:      2 of 4 VFs: 0000:c5:00.1, 0000:c5:00.2$" <<<"$out" || fail "setup --status of the PF: $out"
grep -q "^  SR-IOV:      a VF of 0000:c5:00.0$" <<<"$out" || fail "setup --status of a VF: $out"
grep -q "^0000:c5:00.1: mlx5_core -> vfio-pci (IOMMU group 121, /dev/vfio/121)$" <<<"$out" || fail "bind VF 1: $out"
grep -q "^0000:c5:00.2: mlx5_core -> vfio-pci (IOMMU group 122, /dev/vfio/122)$" <<<"$out" || fail "bind VF 2: $out"
# The VF's own addresses: the second function's MAC and link-local IPv4 address.
grep -q "port 1: Active, LID 0, port GUID [0-9a-f]*, MAC 02:c5:00:00:00:02, path MTU" <<<"$out" ||
    fail "cxv info of the VF: $out"
grep -q "GID 1: 0000:0000:0000:0000:0000:ffff:a9fe:0102$" <<<"$out" || fail "cxv info of the VF: GID: $out"
grep -q "bound to mlx5_core" <<<"$out" || fail "the PF stays the kernel's: $out"
grep -q "^ok$" <<<"$out" || fail "send_recv between the VFs: $out"
grep -q "^send_recv rc=0$" <<<"$out" || fail "send_recv between the VFs: exit: $out"
[ "$(tail -1 <<<"$out")" == 1 ] || fail "the VFs did not go with sriov_numvfs 0: $out"

finish SR-IOV
