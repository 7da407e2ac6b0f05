#!/usr/bin/env bash
# NVMe over Fabrics between two User-Mode Linux kernels over the model's RoCE wire
# (docs/linux-oracle.md): each kernel has one Ethernet function served by its own
# cxv-sim-uml, the two on one fabric. Linux's mlx5_core and mlx5e make eth0, mlx5_ib
# registers the RoCE device over it; one kernel exports a memory-backed null_blk disk with
# nvmet-rdma, the other connects with nvme-rdma (RDMA CM over the RoCE GIDs of eth0's
# addresses), writes 1 MiB of random bytes to /dev/nvme0n1 and reads them back. The I/O
# is Linux's: its memory registrations are UMR WQEs (fast registration), the target reads
# and writes the host's buffers with RDMA READ and WRITE, and answers with SEND with
# invalidate.
#
# Passes when: the host connects; the bytes read back have the SHA-256 of those written;
# both kernels disconnect and unload every module; neither model refused a command or a
# message, and both executed UMRs; no kernel warned (a WARNING, an error CQE, a command
# timeout, an I/O timeout).
#
# Then the differential check (docs/linux-oracle.md, "The differential check"): cxv's
# driver, under cxv-sim run, makes the same kinds of objects (Debian's ibv_rc_pingpong and
# ibv_ud_pingpong on RoCE under `cxv exec`), and differential.py compares the command
# inputs the two drivers gave the model, field by field: its own test case.
#
# With `ib` last: the same over InfiniBand (issue 34's fourth goal as it asks it). The
# functions' ports are InfiniBand; IPoIB's ib0 carries the addresses (its carrier once
# the broadcast group is joined at the subnet administrator the model plays,
# ipoib_test.sh), RDMA CM resolves the route with a PathRecord query and connects with
# CM MADs between the two QP1s, and the RC QPs are LID-routed. Its differential check
# compares InfiniBand paths: cxv's pingpongs run on an IB fabric, LID-routed.
#
#   nvmeof_test.sh CXV_SIM_UML KERNEL_SCRIPT INIT_SH GUEST_TEST_LIB TWO_KERNELS_SH
#                  CXV_SIM CXV DIFFERENTIAL_PY [ib]
set -uo pipefail

sim=$(realpath "$1")
kernel_script=$(realpath "$2")
init=$(realpath "$3")
cxv_sim=$(realpath "$6")
cxv=$(realpath "$7")
differential=$(realpath "$8")
port=${9:-eth}
if [ "$port" = ib ]; then
    ifname=ib0 transport=InfiniBand extra_mods=ib_ipoib
else
    ifname=eth0 transport=RoCE extra_mods=""
fi
# uml_begin, skip, fail: reporting in doctest's words (tests/qemu/guest_test_lib.sh).
. "$4"

uml_begin "$sim" "$kernel_script" "mlx5_ib's probe and NVMe I/O need the backend's speed" python3:python3
for m in null_blk nvmet nvmet-rdma nvme-core nvme-fabrics nvme-rdma rdma_cm mlx5_ib; do
    [ -f "$kdir/modules/$m.ko" ] || fail "the UML kernel has no $m.ko (tools/uml/kernel builds it)"
done

# The two kernels and their models (two_kernels.sh).
. "$5"
# One run: both models and kernels, their commands written first.
one_run() {
two_kernels_begin nvmeof-$port $port

note() { echo "tests/uml/nvmeof_test.sh:0: MESSAGE: $*"; }

target=169.254.78.1
host=169.254.78.2
mods="ib_core ib_uverbs iw_cm ib_cm rdma_cm mlx5_core mlx5_ib $extra_mods"
# Both kernels: the modules, eth0 (or ib0) up with its address, its carrier.
up() {
    cat <<CMD
for m in $mods $1; do
    if [ \$m = null_blk ]; then a="nr_devices=1 gb=1 memory_backed=1"; else a=""; fi
    insmod $kdir/modules/\$m.ko \$a || echo "insmod \$m failed"
done
for t in \$(seq 50); do [ -e /sys/class/net/$ifname ] && break; sleep 0.1; done
ip link set $ifname up && echo "$ifname up"
ip addr add $2/16 dev $ifname
for t in \$(seq 300); do [ "\$(cat /sys/class/net/$ifname/carrier 2>/dev/null)" = 1 ] && break; sleep 0.1; done
echo "carrier: \$(cat /sys/class/net/$ifname/carrier 2>&1)"
CMD
}
# ... and the modules out again, in reverse order.
down() {
    cat <<CMD
ip link set $ifname down
for m in $(echo "$mods $1" | tr ' ' '\n' | tac | tr '\n' ' '); do rmmod \$m || echo "rmmod \$m failed"; done
echo "=== dmesg"
dmesg
CMD
}
# The target: null_blk's disk as namespace 1 of testnqn on port 4420, until the host
# says it is done (a TCP message over eth0 or ib0; 150 s at most).
{
    up "null_blk nvme-core nvmet nvmet-rdma" $target
    cat <<CMD
mount -t configfs none /sys/kernel/config || echo "no configfs"
S=/sys/kernel/config/nvmet/subsystems/testnqn
P=/sys/kernel/config/nvmet/ports/1
mkdir \$S && echo 1 >\$S/attr_allow_any_host
mkdir \$S/namespaces/1 && echo -n /dev/nullb0 >\$S/namespaces/1/device_path && echo 1 >\$S/namespaces/1/enable
mkdir \$P && echo $target >\$P/addr_traddr && echo rdma >\$P/addr_trtype && echo 4420 >\$P/addr_trsvcid &&
    echo ipv4 >\$P/addr_adrfam && ln -s \$S \$P/subsystems/testnqn && echo "target ready"
/usr/bin/python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("$target", 5001)); s.listen(1); s.settimeout(150)
c, _ = s.accept(); print("host says", c.recv(16).decode())'
rm \$P/subsystems/testnqn && rmdir \$P
echo 0 >\$S/namespaces/1/enable && rmdir \$S/namespaces/1 && rmdir \$S && echo "target removed"
umount /sys/kernel/config
CMD
    down "null_blk nvme-core nvmet nvmet-rdma"
} >"$work/cmd0.sh"
# The host: connect (the target may still be starting: tried for a minute), 1 MiB
# written and read back, disconnect.
{
    # mlx5_ib's probe writes BlueFlame registers by the thousand (its write-combining
    # test): the two kernels' probes one after the other, not both at once on a loaded
    # machine (UML's 40 ms bound on a read).
    echo "sleep 12"
    up "nvme-core nvme-fabrics nvme-rdma" $host
    cat <<CMD
for t in \$(seq 30); do
    echo "nqn=testnqn,transport=rdma,traddr=$target,trsvcid=4420" >/dev/nvme-fabrics 2>/dev/null && { echo "connected"; break; }
    sleep 2
done
for t in \$(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.2; done
head -c 1048576 /dev/urandom >/tmp/written
dd if=/tmp/written of=/dev/nvme0n1 bs=64k oflag=direct 2>&1 | tail -1
dd if=/dev/nvme0n1 of=/tmp/read bs=64k count=16 iflag=direct 2>&1 | tail -1
echo "written \$(sha256sum </tmp/written | cut -d' ' -f1)"
echo "read \$(sha256sum </tmp/read | cut -d' ' -f1)"
echo 1 >/sys/class/nvme/nvme0/delete_controller && echo "disconnected"
/usr/bin/python3 -c 'import socket; socket.create_connection(("$target", 5001), 10).send(b"done")'
CMD
    down "nvme-core nvme-fabrics nvme-rdma"
} >"$work/cmd1.sh"
# Bounded: each guest powers itself off after its command (20-60 s); 180 s at most, then SIGKILL.
two_kernels_run 180
}
# UML's virtio transport now and then loses a message (the kernel says
# "virtio-uml.0-cmd:id N is not a head!", then mlx5_core's health poll reads all ones:
# "PCI slot is unavailable"; docs/linux-oracle.md). A run that ends so is a transport
# failure, not Linux's verdict on the model: it is ended at once (two_kernels_abort_on:
# both kernels killed, which UML reports as a panic), run again, eight runs at most (on
# 2026-11-30 such losses came four and five in a row), and each one lost is counted in
# the note.
# A run in which a kernel did not end within its limit (timeout's 124) is run again too,
# twice at most (each costs the whole limit), counted apart, with its kernel's first
# complaint in the note. Seen on 2026-11-30: after the target was removed, mlx5_ib's
# asynchronous CREATE_MKEY (its MR cache's refill) timed out ("Async, timeout") and
# rmmod mlx5_core waited on it until the limit; the model's log has no such command, so
# it never reached the model (the same transport, or an interrupt it lost). The logs of
# such a run are kept (hung<N>-*.log in the test's outputs).
# And a run in which UML gave up on a read after its 40 ms (virt-pci.c:160, "um virt-pci
# delay") and mlx5_core's health poll then read all ones ("Fatal error 1": the PCI
# communication sensor): UML's limit, not the model's answer (which came, late).
lost=0
slow=0
hung=0
hung_signs=""
two_kernels_abort_on="is not a head!|poll_health.*Fatal error 1 detected"
for attempt in 1 2 3 4 5 6 7 8; do
    one_run
    if grep -q "is not a head!" "$work/console0.log" "$work/console1.log"; then
        lost=$((lost + 1))
        tag=lost
    elif grep -q "um virt-pci delay" "$work/console0.log" "$work/console1.log" &&
        grep -q "poll_health.*Fatal error 1 detected" "$work/console0.log" "$work/console1.log"; then
        slow=$((slow + 1))
        tag=slow
    elif ((rcs[0] == 124 || rcs[1] == 124)) && ((hung < 2)); then  # (each costs the whole limit)
        hung=$((hung + 1))
        hung_signs+=" [$(grep -hEm1 "timeout|WARNING|Kernel panic" "$work/console0.log" "$work/console1.log" | head -1 | cut -c1-160)]"
        tag=hung
    else
        break
    fi
    ((attempt < 8)) || break
    two_kernels_cleanup "$tag$attempt-"
done
show() { two_kernels_show; }
warned="WARNING|error cqe|timeout|failed|Fatal|probe .* failed"
# UML's own limits, not Linux's verdict on the model: a read answered after UML's 40 ms
# (two_kernels_checked), and a vmlinux that aborts in its host-side exit after the kernel
# halted. Counted in the note; anything else fails.
aborts=0
for i in 0 1; do
    uml_exit_counted "${rcs[i]}" "$work/console$i.log" "UML kernel $i"
    two_kernels_checked $i
    c="$work/checked$i.log"
    grep -q "^cxv-uml: exit" "$c" || { show; fail "guest $i never finished its command"; }
    grep -q "^carrier: 1$" "$c" || { show; fail "guest $i: $ifname has no carrier"; }
    grep -q "^\(insmod\|rmmod\) .* failed" "$c" && { show; fail "guest $i: $(grep -m3 "^\(insmod\|rmmod\) .* failed" "$c")"; }
    grep -Eq "$warned" "$c" && { show; fail "guest $i's kernel complained: $(grep -Em3 "$warned" "$c")"; }
    two_kernels_model_clean $i
done
grep -q "^target ready$" "$work/console0.log" || { show; fail "the target did not start"; }
grep -q "^connected$" "$work/console1.log" || { show; fail "the host did not connect"; }
written=$(grep -o "^written .*" "$work/console1.log")
read=$(grep -o "^read .*" "$work/console1.log")
[ -n "$written" ] && [ "${written#written }" = "${read#read }" ] ||
    { show; fail "the bytes read back differ: $written, $read"; }
grep -q "^disconnected$" "$work/console1.log" || { show; fail "the host did not disconnect"; }
grep -q "^host says done$" "$work/console0.log" || { show; fail "the target never heard the host was done"; }
grep -q "^target removed$" "$work/console0.log" || { show; fail "the target's subsystem did not go"; }
umrs=()
for i in 0 1; do
    u=$(sed -nE 's/.*WQEs: [0-9]+ executed, ([0-9]+) UMRs.*/\1/p' "$work/model$i.log")
    [ -n "$u" ] && ((u > 0)) || { show; fail "model $i executed no UMR: '$(grep "send WQEs" "$work/model$i.log")'"; }
    umrs+=("$u")
done
commands=$(cat "$work/model0.log" "$work/model1.log" | grep -c " status=")
note "NVMe-oF over $transport between two kernels: 1 MiB written and read back whole (${written#written }); ${umrs[0]} and ${umrs[1]} UMRs; $commands commands on the models, none refused; UML: $delays reads answered after its 40 ms ($taken of their buffers taken back late), $aborts vmlinux aborts after the halt, $lost runs lost to its transport, $slow to a read past its 40 ms, $hung runs that did not end in time${hung_signs}"

# --- The differential check: cxv's driver beside Linux's, on the same model ---
# One pair of a pingpong tool, server and client each under its own cxv-sim run on one
# fabric of the test's port type, each model logging its commands
# ($work/cxv-TOOL-ROLE.trace).
cxv_pair() {
    local tool=$1 dir="$work/cxv-$1" role i pid
    shift
    free_ports 1
    mkdir -p "$dir"
    for i in 0 1; do
        role=server
        ((i == 1)) && role=client
        CXV_SIM_COMMAND_LOG="$work/cxv-$tool-$role.trace" timeout -k 5 60 "$cxv_sim" run --fabric "$dir" \
            --port-type "$port" --set fabric_index=$i --link-up-ms 20 -- "$cxv" exec -- "/usr/bin/$tool" \
            -p "${ports[0]}" "$@" $( ((i == 1)) && echo 127.0.0.1) >"$work/cxv-$tool-$role.log" 2>&1 &
        pid=$!
        simpids+=($pid)
        if ((i == 0)); then
            for _ in $(seq 200); do
                grep -q "$(printf ':%04X 00000000:0000 0A' "${ports[0]}")" /proc/net/tcp && break
                kill -0 $pid 2>/dev/null || break
                sleep 0.05
            done
        fi
    done
    for pid in "${simpids[@]: -2}"; do
        wait "$pid" || { tail -n 20 "$work/cxv-$tool-server.log" "$work/cxv-$tool-client.log"; fail "cxv's $tool ended in error"; }
    done
}
if [ "$port" = ib ]; then
    # LID-routed: no GID (the pingpongs then send no GRH).
    cxv_pair ibv_srq_pingpong -n 10
    cxv_pair ibv_rc_pingpong -n 10
    cxv_pair ibv_ud_pingpong -n 10 -s 1024
else
    cxv_pair ibv_srq_pingpong -g 1 -n 10
    cxv_pair ibv_rc_pingpong -g 1 -n 10
    cxv_pair ibv_ud_pingpong -g 0 -n 10 -s 1024
fi
# The SRQ pingpong's log first: each kind's last object is compared, and its RC QPs (on
# the SRQ) are not the RC pingpong's.
"$differential" --link "$port" "$work"/commands0.trace "$work"/commands1.trace \
    --cxv "$work"/cxv-ibv_srq_pingpong-server.trace "$work"/cxv-ibv_rc_pingpong-server.trace "$work"/cxv-ibv_ud_pingpong-server.trace \
    --report "$work/differential.log" >/dev/null ||
    { cat "$work/differential.log"; fail "the differential check found differences the docs do not explain"; }
note "differential check: $(grep -c "(a known difference)" "$work/differential.log") known differences, none unexplained ($(grep -cv '^ ' "$work/differential.log") object kinds and commands compared)"
echo "[doctest] test cases: 2 | 2 passed | 0 failed | 0 skipped"
