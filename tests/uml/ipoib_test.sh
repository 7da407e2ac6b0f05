#!/usr/bin/env bash
# IPoIB between two User-Mode Linux kernels on one InfiniBand fabric (issue 34's goals 2
# and 3, docs/linux-oracle.md): each kernel loads mlx5_core, mlx5_ib and ib_ipoib against
# its own cxv-sim-uml. IPoIB's ib0 gets its carrier only once Linux's ib_sa has joined the
# broadcast group at the subnet administrator (the model plays it at the SM's LID,
# sim/link/subnet_admin.h: model 0's port hosts it) and IPoIB has attached its UD QP to
# the group (ATTACH_TO_MCG). Then each pings the other: ARP goes to the broadcast group
# (UD multicast), the answers unicast after a PathRecord query to the SA; and 2 MiB go
# over TCP and 4 UDP datagrams from the first to the second, IPoIB's UD sends and
# receives with the 40-byte GRH (traffic.py, as mlx5e_test.sh).
#
# Passes when: both kernels' ib0 come up with a carrier; both pings get every answer;
# the TCP bytes and the UDP datagrams arrive whole (their SHA-256 compared); the SA
# answered MADs; neither model refused a command or a message; no kernel warned (a
# command timeout, a WARNING, an SA or multicast failure); both take ib0 down and unload
# every module.
#
#   ipoib_test.sh CXV_SIM_UML KERNEL_SCRIPT INIT_SH GUEST_TEST_LIB TRAFFIC_PY TWO_KERNELS_SH
set -uo pipefail

sim=$(realpath "$1")
kernel_script=$(realpath "$2")
init=$(realpath "$3")
# uml_begin, skip, fail: reporting in doctest's words (tests/qemu/guest_test_lib.sh).
. "$4"
traffic=$(realpath "$5")

uml_begin "$sim" "$kernel_script" "mlx5_ib's probe and IPoIB traffic need the backend's speed" \
    ping:iputils-ping python3:python3
mods="ib_core ib_uverbs iw_cm ib_cm rdma_cm mlx5_core mlx5_ib ib_ipoib"
for m in $mods; do
    [ -f "$kdir/modules/$m.ko" ] || fail "the UML kernel has no $m.ko (tools/uml/kernel builds it)"
done

# The two kernels and their models (two_kernels.sh), on InfiniBand.
. "$6"

note() { echo "tests/uml/ipoib_test.sh:0: MESSAGE: $*"; }

addr() { echo "169.254.79.$(($1 + 1))"; }
# One run: both models and kernels, their commands written first.
one_run() {
two_kernels_begin ipoib ib
for i in 0 1; do
    peer=$(addr $((1 - i)))
    # The UDP message as 4 datagrams: IPoIB here has no checksum offload (the model does
    # not announce ipoib_basic_offloads), without which Linux refuses UDP_SEGMENT.
    if ((i == 0)); then role="send $(addr 1) datagrams"; else role="receive $(addr 1)"; fi
    # mlx5_ib's probe writes BlueFlame registers by the thousand (its write-combining
    # test): the second kernel's after the first's, as in nvmeof_test.sh. Both at once on
    # a 2-core machine left a kernel spinning in that test (its doorbells lost in UML's
    # full ring), or its reads past UML's 40 ms bound.
    ((i == 1)) && echo "sleep 12" >"$work/cmd$i.sh"
    cat >>"$work/cmd$i.sh" <<CMD
for m in $mods; do insmod $kdir/modules/\$m.ko || echo "insmod \$m failed"; done
for t in \$(seq 50); do [ -e /sys/class/net/ib0 ] && break; sleep 0.1; done
ip link set ib0 up && echo "ib0 up"
ip addr add $(addr $i)/16 dev ib0
for t in \$(seq 300); do [ "\$(cat /sys/class/net/ib0/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
echo "carrier: \$(cat /sys/class/net/ib0/carrier 2>&1)"
p=/sys/class/infiniband/mlx5_0/ports/1
echo "port: \$(cat \$p/state) lid \$(cat \$p/lid) sm_lid \$(cat \$p/sm_lid) gid \$(cat \$p/gids/0) pkey \$(cat \$p/pkeys/0)"
echo "mtu: \$(cat /sys/class/net/ib0/mtu)"
ping -c 1 -w 40 $peer >/dev/null  # the peer up: the second kernel starts 12 s later
ping -c 3 -W 3 $peer | grep -E "packets transmitted"
/usr/bin/python3 $traffic $role
ip -s link show ib0
ip link set ib0 down && echo "ib0 down"
for m in $(echo "$mods" | tr ' ' '\n' | tac | tr '\n' ' '); do rmmod \$m || echo "rmmod \$m failed"; done
echo "=== dmesg"
dmesg
CMD
done
# Bounded: each guest powers itself off after its command; 240 s at most, then SIGKILL.
two_kernels_run 240
}
# A run lost to UML's transport (nvmeof_test.sh says how: "is not a head!", or a read
# given up after 40 ms and then the health poll's "Fatal error 1") is ended at once, run
# again (four runs at most) and counted.
lost=0
two_kernels_abort_on="is not a head!|poll_health.*Fatal error 1 detected"
for attempt in 1 2 3 4; do
    one_run
    grep -Eq "$two_kernels_abort_on" "$work/console0.log" "$work/console1.log" || break
    lost=$((lost + 1))
    ((attempt < 4)) || break
    two_kernels_cleanup "lost$attempt-"
done
show() { two_kernels_show; }
aborts=0
complaints="mlx5.*(timeout|No done completion)|WARNING|probe .* failed|multicast join failed|couldn't attach QP|ib_query_port failed|path_rec_completion.*status|Couldn't create"
for i in 0 1; do
    uml_exit_counted "${rcs[i]}" "$work/console$i.log" "UML kernel $i"
    two_kernels_checked $i  # without the reports of UML's 40 ms bound on a read (counted)
    c="$work/checked$i.log"
    grep -q "^cxv-uml: exit" "$c" || { show; fail "guest $i never finished its command"; }
    grep -q "^\(insmod\|rmmod\) .* failed" "$c" && { show; fail "guest $i: $(grep -m3 "^\(insmod\|rmmod\) .* failed" "$c")"; }
    grep -q "^ib0 up$" "$c" || { show; fail "guest $i: IPoIB made no ib0, or it did not come up"; }
    grep -q "^carrier: 1$" "$c" || { show; fail "guest $i: ib0 has no carrier (the broadcast group was not joined)"; }
    grep -q "^3 packets transmitted, 3 received" "$c" || { show; fail "guest $i: ping did not get every answer"; }
    grep -q "^ib0 down$" "$c" || { show; fail "guest $i: ib0 did not go down"; }
    grep -Eq "$complaints" "$c" && { show; fail "guest $i's kernel complained: $(grep -Em3 "$complaints" "$c")"; }
    two_kernels_model_clean $i
done
two_kernels_traffic_whole
sa=$(sed -nE 's/^cxv-sim-uml: subnet administrator: ([0-9]+) MADs answered$/\1/p' "$work/model0.log")
[ -n "$sa" ] && ((sa >= 2)) || { show; fail "the subnet administrator (model 0's port) answered no joins: '$sa'"; }
mtu=$(grep -o "^mtu: .*" "$work/console0.log")
commands=$(cat "$work/model0.log" "$work/model1.log" | grep -c " status=")
note "IPoIB between two kernels on one InfiniBand fabric: ib0 up with its carrier ($mtu), pings answered, 2 MiB over TCP and 4 UDP datagrams arrived whole; the SA answered $sa MADs; $commands commands on the models, none refused; UML: $delays reads answered after its 40 ms ($taken of their buffers taken back late), $aborts vmlinux aborts after the halt, $lost runs lost to its transport"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
