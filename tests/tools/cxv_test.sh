#!/usr/bin/env bash
# The cxv tool end to end under cxv-sim: `cxv list` (libpci discovery) outside and inside
# the layer, its JSON form, and `cxv info` bringing each function up and down with
# nothing left open (cxv-sim's leak report).
set -uo pipefail
sim=$1
cxv=$2
cxvd=$3
source tests/checks.sh

# This machine has no mlx5 function of its own: outside the layer the list is empty
# (exit 0, with a hint); inside it, exactly the emulated functions.
out=$("$cxv" list)
expect_eq "list without devices exit" 0 $?
expect_eq "list without devices" "no mlx5 functions found (to try cxv without a card: cxv-sim run -- cxv list)" "$out"
expect_eq "list --json without devices" "[]" "$("$cxv" list --json)"
out=$("$sim" run --devices 2 -- "$cxv" list)
expect_eq "list exit" 0 $?
expect_eq "list rows" 3 "$(wc -l <<<"$out")"
expect_eq "list header" "bdf name id fn driver group numa link cxv" "$(sed -n 1p <<<"$out" | tr -s ' ')"
expect_eq "list row 0" "0000:c5:00.0 ConnectX-6 15b3:101b PF vfio-pci 120 -1 16.0 GT/s x16 ready" \
    "$(sed -n 2p <<<"$out" | tr -s ' ')"
expect_eq "list row 1" "0000:c5:00.1 ConnectX-6 15b3:101b PF vfio-pci 121 -1 16.0 GT/s x16 ready" \
    "$(sed -n 3p <<<"$out" | tr -s ' ')"
# Other settings show through: addresses, groups, NUMA node, a VF device ID.
json=$(CXV_SIM_NUMA_NODE=0 CXV_SIM_DEVICE_ID=0x101c "$sim" run --devices 3 --first-bdf 0000:81:00.2 \
    --first-group 7 -- "$cxv" list --json)
expect_eq "list --json entry 2" '{"bdf":"0000:81:00.4","vendor":"15b3","device":"101c","name":"ConnectX-6 VF","vf":true,"physfn":null,"driver":"vfio-pci","iommu_group":9,"numa_node":0,"link_speed":"16.0 GT/s","link_width":16,"usable":true}' \
    "$(sed 's/},{/}\n{/g; s/^\[//; s/\]$//' <<<"$json" | sed -n 3p)"
expect_eq "list --json entries" 3 "$(grep -o '"bdf"' <<<"$json" | wc -l)"
expect_eq "list --json usable" 3 "$(grep -o '"usable":true' <<<"$json" | wc -l)"

for bdf in 0000:c5:00.0 0000:c5:00.1; do
    info=$(CXV_SIM_LEAK_REPORT=1 "$sim" run --devices 2 -- "$cxv" info "$bdf" 2>&1)
    expect_eq "info $bdf exit" 0 $?
    grep -q "^$bdf: firmware " <<<"$info" || fail "info $bdf: no firmware line: $info"
    grep -q "^  vport counters:$" <<<"$info" || fail "info $bdf: no vport counters: $info"
    grep -q "^    rx_unicast_packets: 0$" <<<"$info" || fail "info $bdf: counters not one per line: $info"
    grep -q "^  Q counter sets: 64 besides the default" <<<"$info" || fail "info $bdf: no Q counter sets: $info"
    grep -q "teardown: [0-9]* firmware pages reclaimed, 0 left" <<<"$info" || fail "info $bdf: pages left: $info"
    grep -q "at exit: .*: clean$" <<<"$info" || fail "info $bdf: leaks: $info"
    # The link trains (300 ms by default), then the SM makes the InfiniBand port ACTIVE.
    ms=$(sed -n 's/^  port 1: Down -> Init -> Active after \([0-9]*\) ms$/\1/p' <<<"$info")
    [ -n "$ms" ] && [ "$ms" -ge 300 ] || fail "info $bdf: port line: $info"
    # The link as the port's PTYS has it (the model's InfiniBand port: 4X EDR).
    grep -q "^  port 1: link 4X EDR, 100 Gb/s, 4 lanes$" <<<"$info" || fail "info $bdf: no link speed: $info"
done
info=$("$sim" run --port-type eth --link-up-ms 50 -- "$cxv" info 0000:c5:00.0 2>&1)
# (On a loaded machine the bring-up itself may take longer than the 50 ms of training: the
# first look then already finds the port Active.)
ms=$(sed -n 's/^  port 1: \(Down -> \)\{0,1\}Active after \([0-9]*\) ms$/\2/p' <<<"$info")
[ -n "$ms" ] && [ "$ms" -ge 50 ] || fail "info (Ethernet, --link-up-ms 50): port line: $info"
grep -q "^  port 1: link 100GBASE-CR4, 100 Gb/s, 4 lanes$" <<<"$info" || fail "info (Ethernet): no link mode: $info"
"$sim" run -- "$cxv" info 0000:c5:00.7 >/dev/null 2>&1
expect_eq "info of a missing function fails" 1 $?
# A link that does not come up: the reason, a note while waiting, exit 1, in the time asked.
start=$SECONDS
# (3 s: the note comes after the first second, from a thread of its own, however loaded.)
info=$("$sim" run --port-type eth --set link_up_ms=600000 -- "$cxv" info --port-timeout-ms 3000 0000:c5:00.0 2>&1)
expect_eq "info of a dead link exit" 1 $?
((SECONDS - start < 30)) || fail "info of a dead link took $((SECONDS - start)) s"
grep -q "^  port 1: Down (0000:c5:00.0: port 1 not ACTIVE after 3000 ms: Down (admin up, link down); the physical link is down" \
    <<<"$info" || fail "info of a dead link: no reason: $info"
grep -q "^cxv info: port 1 is not up yet: waiting up to 3000 ms in all$" <<<"$info" || fail "info of a dead link: no note: $info"
grep -q "^  port 1: link down$" <<<"$info" || fail "info of a dead link: the link is not said down: $info"
grep -q "MAC 02:c5:00:00:00:01, path MTU 4096$" <<<"$info" || fail "info (Ethernet): no MAC or MTU: $info"
info=$("$sim" run --set sm_sweep_ms=600000 -- "$cxv" info --port-timeout-ms 1500 0000:c5:00.0 2>&1)
expect_eq "info of a port no SM makes Active exit" 1 $?
grep -q "Init: no subnet manager has made it Active yet" <<<"$info" || fail "info without an SM: $info"
# --json: one object with the port, the counters and the teardown. The link trains for
# 600 ms from INIT_HCA, so the tool's first look, after the rest of bring-up, sees it Down
# even in a sanitizer build (with 20 ms, one such run first saw it in Init).
info=$("$sim" run --link-up-ms 600 -- "$cxv" info --json 0000:c5:00.0)
expect_eq "info --json exit" 0 $?
expect_eq "info --json is one line" 1 "$(wc -l <<<"$info")"
for key in '"bdf":"0000:c5:00.0"' '"link_layer":"infiniband"' '"active":true' '"came_up":"Down -> Init -> Active"' \
    '"link":{"mode":"4X EDR","mbps":100000,"lanes":4}' \
    '"vport_counters":{"rx_unicast_packets":0' '"teardown":{"pages_reclaimed":80,"pages_left":0}'; do
    grep -qF "$key" <<<"$info" || fail "info --json: no $key: $info"
done

# cxv setup: the model's functions are ready (vfio-pci, an IOMMU group each, their
# /dev/vfio nodes free); outside the layer there are none. Binding refuses what is not a
# ConnectX (a real function of this machine) and leaves a bound function as it is.
out=$("$cxv" setup --status)
expect_eq "setup --status without devices exit" 0 $?
grep -q "^no mlx5 functions found" <<<"$out" || fail "setup --status without devices: $out"
grep -q "^  memlock: " <<<"$out" || fail "setup --status: no memlock line: $out"
out=$("$sim" run --devices 2 -- "$cxv" setup --status)
expect_eq "setup --status exit" 0 $?
expect_eq "setup --status: both ready" 2 "$(grep -c '^  cxv:         ready$' <<<"$out")"
grep -q "^0000:c5:00.1  ConnectX-6 (15b3:101b)$" <<<"$out" || fail "setup --status: no second function: $out"
grep -q "^  IOMMU group: 120: 0000:c5:00.0 (vfio-pci)$" <<<"$out" || fail "setup --status: group line: $out"
grep -q "^  /dev/vfio/121: free$" <<<"$out" || fail "setup --status: /dev/vfio line: $out"
grep -q "^  IOMMU:       on (2 groups)$" <<<"$out" || fail "setup --status: IOMMU line: $out"
out=$("$sim" run -- "$cxv" setup --bind 0000:c5:00.0)
expect_eq "setup --bind of a bound function exit" 0 $?
expect_eq "setup --bind of a bound function" "0000:c5:00.0: already on vfio-pci (IOMMU group 120)" "$out"
out=$("$sim" run -- "$cxv" setup --status 0000:c5:00.7 2>&1)
expect_eq "setup --status of a missing function exit" 1 $?
grep -q "0000:c5:00.7: no such PCI function" <<<"$out" || fail "setup --status of a missing function: $out"
"$cxv" setup --bind --unbind 0000:c5:00.0 >/dev/null 2>&1
[ $? -ne 0 ] || fail "setup --bind --unbind together was accepted"
# Binding on the model, as on Linux, one state for every process of the run: a function on
# mlx5_core with its netdev up is refused, then bound with --force (its netdev goes,
# /dev/vfio/N comes) and brought up by cxv info; --unbind gives it back; the steps cxv info
# prints for binding by hand work too.
cat >"$TEST_TMPDIR/binding.sh" <<EOS
set -u
c=\$1
\$c setup --bind 0000:c5:00.0 2>&1; echo "rc=\$?"
\$c setup --bind --force 0000:c5:00.0; echo "rc=\$?"
cat /sys/bus/pci/devices/0000:c5:00.0/driver_override
ls /dev/vfio
test -e /sys/bus/pci/devices/0000:c5:00.0/net || echo "no netdev"
\$c info --port-timeout-ms 5000 0000:c5:00.0 | head -1; echo "rc=\${PIPESTATUS[0]}"
\$c setup --unbind 0000:c5:00.0; echo "rc=\$?"
\$c setup --status 0000:c5:00.0 | sed -n 2p
echo vfio-pci > /sys/bus/pci/devices/0000:c5:00.0/driver_override
echo 0000:c5:00.0 > /sys/bus/pci/devices/0000:c5:00.0/driver/unbind
echo 0000:c5:00.0 > /sys/bus/pci/drivers_probe
\$c setup --status 0000:c5:00.0 | sed -n 2p
# Perl's syswrite is a write(2) (a shell's echo goes through stdio, whose error the layer
# cannot return); it leaks at exit by design, which the sanitizer build would report.
ASAN_OPTIONS=detect_leaks=0 perl -e 'open(my \$f, ">", "/sys/bus/pci/drivers/vfio-pci/bind") or die "open: \$!\\n";
    syswrite(\$f, "0000:c5:00.0") or die "write: \$!\\n"'; echo "bind again rc=\$?"
EOS
out=$("$sim" run --set kernel_driver=mlx5_core --set netdev=up --link-up-ms 20 -- bash "$TEST_TMPDIR/binding.sh" "$cxv" 2>&1)
expect_eq "binding on the model" "cxv setup: 0000:c5:00.0: enp197s0f0np0 is up; binding to vfio-pci takes it and the kernel's RDMA device away from mlx5_core. Bring it down (ip link set DEV down) or give --force
rc=1
0000:c5:00.0: mlx5_core -> vfio-pci (IOMMU group 120, /dev/vfio/120)
rc=0
vfio-pci
120
vfio
no netdev
0000:c5:00.0: firmware 20.39.1002, ISSI 1, 1 port(s), InfiniBand
rc=0
0000:c5:00.0: vfio-pci -> mlx5_core, netdev enp197s0f0np0
rc=0
  driver:      mlx5_core
  driver:      vfio-pci
write: Device or resource busy
bind again rc=16" "$out"

# A function one process holds is busy for every other process of the run, as a VFIO
# group is on a host: the first cxv info holds it while it waits for a link that never
# comes; the second is refused with EBUSY and names the holder (/proc/PID/fd shows the
# group's node, as on a host).
out=$("$sim" run --port-type eth --set link_up_ms=600000 -- bash -c "
    '$cxv' info --port-timeout-ms 4000 0000:c5:00.0 >/dev/null 2>&1 & holder=\$!
    sleep 1
    '$cxv' info 0000:c5:00.0; echo \"second rc=\$? holder=\$holder\"
    wait \$holder" 2>&1)
grep -q "second rc=1" <<<"$out" || fail "info of a function another process holds: exit: $out"
grep -q "is open in another process: Device or resource busy" <<<"$out" || fail "info of a held function: $out"
holder=$(sed -n 's/.*holder=\([0-9]*\)$/\1/p' <<<"$out")
grep -q "^cxv info: 0000:c5:00.0: /dev/vfio/120 is held by $holder (cxv)$" <<<"$out" ||
    fail "info of a held function: the holder ($holder) not named: $out"

# A function a cxvd holds: cxv info finds the daemon's socket through /proc (its control
# socket, not its metrics one) and asks it (HELLO and COUNTERS), with nothing brought up;
# the same as --json.
sock=$(mktemp -u /tmp/cxv_test.XXXXXX.sock)
out=$("$sim" run --port-type eth --link-up-ms 20 -- bash -c "
    '$cxvd' --socket '$sock' --metrics '$sock.metrics' >/dev/null 2>&1 & daemon=\$!
    for i in \$(seq 300); do [ -S '$sock' ] && break; sleep 0.1; done
    '$cxv' info 0000:c5:00.0; echo \"text rc=\$? daemon=\$daemon\"
    '$cxv' info --json 0000:c5:00.0; echo \"json rc=\$?\"
    kill \$daemon; wait \$daemon" 2>&1)
rm -f "$sock" "$sock.metrics"
daemon=$(sed -n 's/.*daemon=\([0-9]*\)$/\1/p' <<<"$out")
grep -q "text rc=0" <<<"$out" || fail "info of a function cxvd holds: exit: $out"
grep -q "json rc=0" <<<"$out" || fail "info --json of a function cxvd holds: exit: $out"
grep -q "^cxv info: 0000:c5:00.0: /dev/vfio/120 is held by $daemon (cxvd)$" <<<"$out" ||
    fail "info of a function cxvd holds: the daemon ($daemon) not named: $out"
grep -q "^  held by the cxvd at $sock: " <<<"$out" || fail "info through the found cxvd: $out"
grep -q "^    rx_unicast_packets: 0$" <<<"$out" || fail "info through the found cxvd: no counters: $out"
grep -q "^  port 1: link 100GBASE-CR4, 100 Gb/s, 4 lanes$" <<<"$out" || fail "info through the found cxvd: link: $out"
grep -q "\"daemon\":\"$sock\".*\"vport_counters\":{\"rx_unicast_packets\":0," <<<"$out" ||
    fail "info --json through the found cxvd: $out"

other=""
for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor" 2>/dev/null)" != 0x15b3 ] && [ -e "$d/vendor" ] && { other=$(basename "$d"); break; }
done
if [ -n "$other" ]; then
    out=$("$cxv" setup --bind "$other" 2>&1)
    expect_eq "setup --bind of $other (not a ConnectX) exit" 1 $?
    grep -q "^cxv setup: $other: not a ConnectX (" <<<"$out" || fail "setup --bind $other: $out"
    out=$("$cxv" info "$other" 2>&1)
    grep -q "$other: not a ConnectX (mlx5) function" <<<"$out" || fail "info $other: $out"
else
    echo "SKIPPED: this machine has no PCI function of another vendor to refuse"
fi

finish cxv
