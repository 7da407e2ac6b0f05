#!/usr/bin/env bash
# Linux's mlx5e on the model's Ethernet functions: two User-Mode Linux kernels, each
# with one function served by its own cxv-sim-uml, the two functions on one fabric
# (docs/linux-oracle.md). Each kernel loads mlx5_core, whose mlx5e makes eth0 (its TISs,
# RQTs, TIRs, flow tables, the SQs and RQs of its channels), brings it up with a
# link-local address, and pings the other; then 2 MiB go over TCP from the first to the
# second (the stack hands mlx5e TSO messages: LSO WQEs the model cuts into frames) and one
# 4,000-byte UDP message cut into 1,000-byte datagrams by the device (UDP_SEGMENT).
# Linux's own TCP, UDP and IP check what arrives, with the receive CQEs' checksums
# (CHECKSUM_COMPLETE); the test compares the bytes' SHA-256 on both sides.
#
# Passes when: both pings get every answer; the TCP bytes and the UDP datagrams arrive
# whole (4 of 1,000 bytes); the sender's model cut LSO WQEs; neither model refused a
# command or a message; no kernel warned (hw csum failure, a command timeout, a WARNING);
# both kernels take eth0 down and unload mlx5_core.
#
#   mlx5e_test.sh CXV_SIM_UML KERNEL_SCRIPT INIT_SH GUEST_TEST_LIB TRAFFIC_PY TWO_KERNELS_SH
set -uo pipefail

sim=$(realpath "$1")
kernel_script=$(realpath "$2")
init=$(realpath "$3")
# uml_begin, skip, fail: reporting in doctest's words (tests/qemu/guest_test_lib.sh).
. "$4"
traffic=$(realpath "$5")

uml_begin "$sim" "$kernel_script" "mlx5e's traffic needs the backend's speed" ping:iputils-ping python3:python3

# The two kernels and their models (two_kernels.sh).
. "$6"
two_kernels_begin mlx5e

note() { echo "tests/uml/mlx5e_test.sh:0: MESSAGE: $*"; }

addr() { echo "169.254.77.$(($1 + 1))"; }
for i in 0 1; do
    peer=$(addr $((1 - i)))
    if ((i == 0)); then role="send $(addr 1)"; else role="receive $(addr 1)"; fi
    cat >"$work/cmd$i.sh" <<CMD
if insmod $kdir/modules/mlx5_core.ko; then echo "loaded mlx5_core"; else echo "insmod mlx5_core failed"; fi
for t in \$(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set eth0 up && echo "eth0 up"
ip addr add $(addr $i)/16 dev eth0
for t in \$(seq 100); do [ "\$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
echo "carrier: \$(cat /sys/class/net/eth0/carrier 2>&1)"
ping -c 3 -W 3 $peer | grep -E "packets transmitted"
/usr/bin/python3 $traffic $role
ip -s link show eth0
ip link set eth0 down && echo "eth0 down"
rmmod mlx5_core && echo "removed mlx5_core"
echo "=== dmesg"
dmesg
CMD
done
# Bounded: each guest powers itself off after its command; 240 s at most, then SIGKILL.
two_kernels_run 240
show() { two_kernels_show; }
aborts=0
for i in 0 1; do
    c="$work/console$i.log"
    uml_exit_counted "${rcs[i]}" "$c" "UML kernel $i"
    grep -q "^cxv-uml: exit" "$c" || { show; fail "guest $i never finished its command"; }
    grep -q "^loaded mlx5_core$" "$c" || { show; fail "guest $i: mlx5_core did not load"; }
    grep -q "^eth0 up$" "$c" || { show; fail "guest $i: mlx5e made no eth0, or it did not come up"; }
    grep -q "^carrier: 1$" "$c" || { show; fail "guest $i: eth0 has no carrier"; }
    grep -q "^3 packets transmitted, 3 received" "$c" || { show; fail "guest $i: ping did not get every answer"; }
    grep -q "^eth0 down$" "$c" || { show; fail "guest $i: eth0 did not go down"; }
    grep -q "^removed mlx5_core$" "$c" || { show; fail "guest $i: mlx5_core did not unload"; }
    grep -Eq "hw csum failure|mlx5.*(timeout|No done completion)|WARNING|Missing .* capability|probe .* failed" "$c" &&
        { show; fail "guest $i's kernel complained: $(grep -Em3 "hw csum failure|mlx5.*(timeout|No done completion)|WARNING|Missing .* capability|probe .* failed" "$c")"; }
    two_kernels_model_clean $i
done
two_kernels_traffic_whole
frames=$(grep -o "cxv-sim-uml: frames: .*" "$work/model0.log")
lso=$(sed -nE 's/.*\(([0-9]+) LSO WQEs.*/\1/p' <<<"$frames")
[ -n "$lso" ] && ((lso >= 2)) || { show; fail "the sender's model cut no LSO WQEs (TCP and UDP): '$frames'"; }
commands=$(cat "$work/model0.log" "$work/model1.log" | grep -c " status=")
note "mlx5e on two functions of one fabric: eth0 up, pings answered, 2 MiB over TCP and a UDP message cut in 4 arrived whole; $commands commands on the models, none refused; $aborts vmlinux aborts after the halt (UML's); sender ${frames#cxv-sim-uml: }"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
