#!/usr/bin/env bash
# Linux's mlx5e on the model pings a QEMU guest's e1000, and the guest pings it back
# (docs/linux-oracle.md, issue 34's fifth goal): one User-Mode Linux kernel whose Ethernet
# function is served by cxv-sim-uml on a fabric directory, and the QEMU guest of the rxe
# tests (tests/qemu/rxe_guest.sh) cabled to that function's port on the same fabric. Two
# Linux network stacks, two drivers that share nothing: mlx5e's ARP and ICMP go out
# through the model's SQ, onto the fabric's wire, into QEMU's e1000, and back through the
# model's flow tables to mlx5e's RQ.
#
# Passes when: mlx5_core makes eth0 and brings it up with carrier; the kernel's ping to the
# guest and the guest's to the kernel each get all 3 answers; the guest finished its
# command; the kernel takes eth0 down and unloads mlx5_core without a complaint; the model
# refused no command and no message. UML's own limit (a vmlinux that aborts in its
# host-side exit after the halt) is counted, not failed.
#
#   mlx5e_guest_test.sh CXV_SIM_UML KERNEL_SCRIPT INIT_SH GUEST_TEST_LIB LAUNCHER
set -uo pipefail

sim=$(realpath "$1")
kernel_script=$(realpath "$2")
init=$(realpath "$3")
# uml_begin, skip, fail, require_guest: tests/qemu/guest_test_lib.sh.
. "$4"
launcher=$(realpath "$5")

uml_begin "$sim" "$kernel_script" "mlx5e needs the backend's speed" ping:iputils-ping
require_guest "$launcher"

out=${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d)}
# A socket path has at most 107 bytes: the work directory is under /tmp.
work=$(mktemp -d /tmp/cxv-uml.XXXXXX)
simpid=
umlpid=
gpid=
cleanup() {
    local p
    for p in "$gpid" "$umlpid" "$simpid"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    cp "$work"/*.log "$work"/*.out "$out/" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

note() { echo "tests/uml/mlx5e_guest_test.sh:0: MESSAGE: $*"; }

# The model's function at fabric index 0 has the MAC sim/device_config.h gives it.
model_mac=02:c5:00:00:00:01
uml_ip=169.254.77.1
guest_ip=169.254.100.1
guest_mac=52:54:00:00:00:01
mkdir "$work/fabric"
"$sim" --socket "$work/uml.sock" --trace-commands --set port_type=eth --set fabric_dir="$work/fabric" \
    --set fabric=mlx5e-guest --set fabric_index=0 >"$work/model.log" 2>&1 &
simpid=$!
uml_backend_ready "$simpid" "$work/model.log"

# The kernel: eth0 up, then pings the guest once it answers (it boots meanwhile), then
# stays up while the guest answers: it powers off after its own pings (~300 s at most).
cat >"$work/cmd.sh" <<CMD
if insmod $kdir/modules/mlx5_core.ko; then echo "loaded mlx5_core"; else echo "insmod mlx5_core failed"; fi
for t in \$(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set eth0 up && echo "eth0 up"
ip addr add $uml_ip/16 dev eth0
for t in \$(seq 100); do [ "\$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
echo "carrier: \$(cat /sys/class/net/eth0/carrier 2>&1)"
for t in \$(seq 150); do ping -c 1 -W 1 $guest_ip >/dev/null 2>&1 && break; sleep 0.2; done
ping -c 3 -W 3 $guest_ip | grep -E "packets transmitted"
for t in \$(seq 200); do ping -c 1 -W 1 $guest_ip >/dev/null 2>&1 || break; sleep 0.5; done
ping -c 1 -W 1 $guest_ip >/dev/null 2>&1 || echo "the guest is gone"
ip -s link show eth0
ip link set eth0 down && echo "eth0 down"
rmmod mlx5_core && echo "removed mlx5_core"
echo "=== dmesg"
dmesg
CMD
start=$(date +%s)
timeout -k 10 240 "$kdir/vmlinux" umid=cxv-$$ uml_dir="$work" mem=384M root=/dev/root rootfstype=hostfs \
    rootflags=/ ro init="$init" cxv.cmd="$work/cmd.sh" con=null con0=fd:0,fd:1 \
    virtio_uml.device="$work/uml.sock:1234" </dev/null >"$work/console.log" 2>&1 &
umlpid=$!

# The guest, cabled to the function's port: pings the kernel once eth0 answers, then
# stays 10 s more, answering the kernel's pings (which began about when its own did).
"$launcher" run --name G --mac "$guest_mac" --ip "$guest_ip/16" --fabric "$work/fabric" --peer-mac "$model_mac" \
    --pcap "$out/mlx5e-guest.pcap" --work "$work/guest" --timeout 220 -- \
    "for t in \$(seq 150); do ping -c 1 -W 1 $uml_ip >/dev/null 2>&1 && break; sleep 0.2; done; ping -c 3 -W 3 $uml_ip | grep -E 'packets transmitted'; sleep 10" \
    >"$work/G.out" 2>&1 &
gpid=$!
wait "$gpid"
rc_guest=$?
gpid=
wait "$umlpid"
rc=$?
umlpid=
uml_backend_done "$work/model.log"
secs=$(($(date +%s) - start))

console="$work/console.log"
show() {
    echo "--- the guest's output"
    cat "$work/G.out"
    echo "--- the UML kernel's console (last 60 lines)"
    tail -n 60 "$console"
    echo "--- the model's log (last 20 lines)"
    tail -n 20 "$work/model.log"
}
aborts=0
uml_exit_counted "$rc" "$console" "the UML kernel"
((rc_guest == 0)) || { show; fail "the guest exited $rc_guest"; }
grep -Eq "^\[G\] 3 packets transmitted, 3 (packets )?received" "$work/G.out" ||
    { show; fail "the guest's ping of mlx5e's eth0 did not get every answer"; }
grep -q "^loaded mlx5_core$" "$console" || { show; fail "mlx5_core did not load"; }
grep -q "^eth0 up$" "$console" || { show; fail "mlx5e made no eth0, or it did not come up"; }
grep -q "^carrier: 1$" "$console" || { show; fail "eth0 has no carrier"; }
grep -q "^3 packets transmitted, 3 received" "$console" || { show; fail "mlx5e's ping of the guest did not get every answer"; }
grep -q "^the guest is gone$" "$console" || { show; fail "the kernel did not see the guest power off"; }
grep -q "^eth0 down$" "$console" || { show; fail "eth0 did not go down"; }
grep -q "^removed mlx5_core$" "$console" || { show; fail "mlx5_core did not unload"; }
complaints="hw csum failure|mlx5.*(timeout|No done completion)|WARNING|Missing .* capability|probe .* failed"
grep -Eq "$complaints" "$console" && { show; fail "the kernel complained: $(grep -Em3 "$complaints" "$console")"; }
grep -q "cxv-sim-uml: done:.* 0 messages refused" "$work/model.log" || { show; fail "the model refused virtio_pcidev messages"; }
refused=$(grep " status=" "$work/model.log" | grep -v "status=OK" | sed -E 's/.* slot +[0-9]+ //; s/ delivery=[^ ]*//; s/ [0-9]+us$//' | sort -u)
[ -z "$refused" ] || { show; fail "the model refused what Linux sent: $refused"; }
commands=$(grep -c " status=" "$work/model.log")
note "mlx5e and a QEMU guest's e1000 on one fabric: each pinged the other, 3 of 3 answered; $commands commands on the model, none refused; $aborts vmlinux aborts after the halt (UML's); $(grep -o "frames: .*" "$work/model.log" | head -1); $secs s"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
