#!/usr/bin/env bash
# Linux's own mlx5_core probes the device model and is removed again, in User-Mode Linux
# (docs/linux-oracle.md). cxv-sim-uml serves one emulated function over vhost-user; the
# UML kernel (tools/uml/kernel's) boots with the host's root read-only, loads mlx5_core
# and removes it. With `ib`, mlx5_ib (and ib_core, ib_uverbs) too, between the two.
#
# Passes when: mlx5_core binds the function (its whole bring-up ran on the model: pages,
# capabilities, INIT_HCA, the command, async and pages EQs with their interrupts), reports
# the model's firmware version, and unloads with TEARDOWN_HCA and DISABLE_HCA answered OK;
# the model refused no virtio_pcidev message and no command. With `ib`: mlx5_ib registers
# mlx5_0 (its device resources, XRC domains, MAD QPs QP0 and QP1, UMR QP and
# write-combining test ran on the model), port 1 is ACTIVE on InfiniBand, no command
# timed out, and mlx5_ib unloads, with no command refused either (finding 9's CREATE_MKEYs
# that outran the pages now wait for them, as on a card; finding 7's lost completions,
# doorbells the backend used to write over, no longer come). The counts are printed as a
# note.
#
#   mlx5_probe_test.sh CXV_SIM_UML KERNEL_SCRIPT INIT_SH GUEST_TEST_LIB [ib]
set -uo pipefail

sim=$(realpath "$1")
kernel_script=$(realpath "$2")
init=$(realpath "$3")
# uml_begin, skip, fail: reporting in doctest's words (tests/qemu/guest_test_lib.sh).
. "$4"
with_ib=0
[ "${5:-}" = ib ] && with_ib=1

# mlx5_ib's probe drives the backend hard (thousands of commands, BlueFlame writes by the
# thousand): a sanitizer-built backend missed UML's 40 ms bound in CI. mlx5_core's probe
# runs in both builds.
why=
((with_ib)) && why="mlx5_ib's probe needs the backend's speed"
uml_begin "$sim" "$kernel_script" "$why"

out=${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d)}
# A socket path has at most 107 bytes: the work directory is under /tmp.
work=$(mktemp -d /tmp/cxv-uml.XXXXXX)
simpid=
umlpid=
cleanup() {
    [ -n "$umlpid" ] && kill "$umlpid" 2>/dev/null && wait "$umlpid" 2>/dev/null
    [ -n "$simpid" ] && kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
    cp "$work"/*.log "$out/" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

note() { echo "tests/uml/mlx5_probe_test.sh:0: MESSAGE: $*"; }

bdf=0000:00:00.0
ib_load=
ib_unload=
if ((with_ib)); then
    ib_load="for m in ib_core ib_uverbs mlx5_ib; do insmod $kdir/modules/\$m.ko && echo \"loaded \$m\"; done
for i in \$(seq 50); do [ -e /sys/class/infiniband/mlx5_0/ports/1/state ] && break; sleep 0.1; done
echo \"ib device: \$(ls /sys/class/infiniband 2>&1)\"
for i in \$(seq 50); do grep -q ACTIVE /sys/class/infiniband/mlx5_0/ports/1/state 2>/dev/null && break; sleep 0.1; done
echo \"port state: \$(cat /sys/class/infiniband/mlx5_0/ports/1/state 2>&1)\"
echo \"link layer: \$(cat /sys/class/infiniband/mlx5_0/ports/1/link_layer 2>&1)\""
    ib_unload="rmmod mlx5_ib && echo \"removed mlx5_ib\""
fi
cat >"$work/cmd.sh" <<CMD
if insmod $kdir/modules/mlx5_core.ko; then echo "loaded mlx5_core"; else echo "insmod mlx5_core failed"; fi
echo "driver: \$(readlink /sys/bus/pci/devices/$bdf/driver)"
$ib_load
$ib_unload
rmmod mlx5_core && echo "removed mlx5_core"
echo "=== dmesg"
dmesg
CMD

# The model, on socket $work/sock$1.
start_model() {
    "$sim" --socket "$work/sock$1" --trace-commands >"$work/model.log" 2>&1 &
    simpid=$!
    uml_backend_ready "$simpid" "$work/model.log"
}

# One boot of the kernel against the model on socket $work/sock$1; its exit status in rc.
run_kernel() {
    # Bounded: the guest powers itself off after the command; 240 s at most, then SIGKILL 10 s
    # later (a UML kernel stuck in a driver's shutdown does not end on SIGTERM).
    timeout -k 10 240 "$kdir/vmlinux" umid=cxv-$$ uml_dir="$work" mem=512M root=/dev/root rootfstype=hostfs rootflags=/ ro \
        init="$init" cxv.cmd="$work/cmd.sh" con=null con0=fd:0,fd:1 virtio_uml.device="$work/sock$1:1234" \
        </dev/null >"$work/console.log" 2>&1 &
    umlpid=$!
    wait "$umlpid"
    rc=$?
    umlpid=
    uml_backend_done "$work/model.log"
}

# UML's virtio transport now and then loses a message ("virtio-uml.0-cmd:id N is not a
# head!", then mlx5_core's health poll reads all ones: "PCI slot is unavailable";
# docs/linux-oracle.md): such a run is not Linux's verdict on the model. It is run again,
# with a new model, three runs at most, and each one lost is counted in the note.
lost=0
for attempt in 1 2 3; do
    start_model $attempt
    run_kernel $attempt
    grep -q "is not a head!" "$work/console.log" || break
    lost=$((lost + 1))
    ((attempt < 3)) || break
    kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
    simpid=
    for f in "$work"/*.log; do cp "$f" "$out/lost$attempt-$(basename "$f")"; done
done

console=$(cat "$work/console.log")
model=$(cat "$work/model.log")
show() {
    echo "--- the guest's console (last 80 lines)"
    tail -n 80 "$work/console.log"
    echo "--- the model's log (last 30 lines)"
    tail -n 30 "$work/model.log"
}
aborts=0
uml_exit_counted "$rc" "$work/console.log" "the UML kernel"
grep -q "^cxv-uml: exit" <<<"$console" || { show; fail "the guest never finished its command"; }
grep -q "^loaded mlx5_core$" <<<"$console" || { show; fail "mlx5_core did not load"; }
grep -q "^driver: .*/drivers/mlx5_core$" <<<"$console" || { show; fail "mlx5_core did not bind the function"; }
fw=$(grep -o "firmware version: [0-9.]*" <<<"$console" | head -1)
[ "$fw" = "firmware version: 20.39.1002" ] || { show; fail "mlx5_core read '$fw', not the model's 20.39.1002"; }
grep -q "^removed mlx5_core$" <<<"$console" || { show; fail "mlx5_core did not unload"; }
grep -Eq "TEARDOWN_HCA\(0x103\).*status=OK" <<<"$model" || { show; fail "no TEARDOWN_HCA answered OK"; }
grep -Eq "DISABLE_HCA\(0x105\).*status=OK" <<<"$model" || { show; fail "no DISABLE_HCA answered OK"; }
grep -q "cxv-sim-uml: done:.* 0 messages refused" <<<"$model" || { show; fail "the model refused virtio_pcidev messages"; }

refusals=$(grep " status=" <<<"$model" | grep -v "status=OK" | sed -E 's/.* slot +[0-9]+ //; s/ delivery=[^ ]*//; s/ [0-9]+us$//')
if ((with_ib)); then
    grep -q "^loaded mlx5_ib$" <<<"$console" || { show; fail "mlx5_ib did not load"; }
    grep -q "probe of mlx5_core.rdma.0 failed" <<<"$console" && { show; fail "mlx5_ib's probe failed"; }
    grep -q "^ib device: mlx5_0$" <<<"$console" || { show; fail "mlx5_ib registered no mlx5_0"; }
    grep -q "^port state: 4: ACTIVE$" <<<"$console" || { show; fail "port 1 of mlx5_0 is not ACTIVE"; }
    grep -q "^link layer: InfiniBand$" <<<"$console" || { show; fail "port 1 of mlx5_0 is not InfiniBand"; }
    grep -Eq "mlx5.*(timeout|No done completion)" <<<"$console" && { show; fail "a command of Linux's timed out on the model"; }
    grep -q "^removed mlx5_ib$" <<<"$console" || { show; fail "mlx5_ib did not unload"; }
fi
refused=$(sort -u <<<"$refusals" | sed '/^$/d')
[ -z "$refused" ] || { show; fail "the model refused what Linux's driver sent: $refused"; }
commands=$(grep -c " status=" <<<"$model")
what="mlx5_core: probed and removed"
((with_ib)) && what="mlx5_core and mlx5_ib: mlx5_0 registered, port 1 ACTIVE on InfiniBand, removed"
note "$what; $commands commands on the model, none refused; $lost runs lost to UML's transport; $aborts vmlinux aborts after the halt; $(grep -o '[0-9]* MSI sent' <<<"$model"); $(grep -o '[0-9]* doorbell registers taken[^,]*, [0-9]* writes waited[^,]*' <<<"$model")"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
