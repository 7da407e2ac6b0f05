# Two User-Mode Linux kernels on one fabric, each with one function served by its own
# cxv-sim-uml (docs/linux-oracle.md): what mlx5e_test.sh, nvmeof_test.sh and
# ipoib_test.sh share.
# Sourced, after tests/qemu/guest_test_lib.sh (skip, fail), with `sim` (cxv-sim-uml),
# `kdir` (the built kernel's directory) and `init` (tools/uml/init.sh) set.
#
#   two_kernels_begin FABRIC [PORT_TYPE]
#                              the work directory ($work, under /tmp: a socket path has at
#                              most 107 bytes), cleanup on exit (by process id), both
#                              models started and listening; their ports Ethernet (eth,
#                              the default) or InfiniBand (ib: model 0's port has LID 1,
#                              the subnet manager's, and so hosts its SA)
#   two_kernels_run SECONDS    boots kernel i with $work/cmd$i.sh, both at once; each
#                              powers itself off after its command, or is killed after
#                              SECONDS (or once a console matches $two_kernels_abort_on,
#                              an extended regular expression,
#                              when set); their exit statuses in rcs[0], rcs[1]
#   two_kernels_show           the consoles' and the models' last lines (before a fail)
#   two_kernels_model_clean I  fails unless model I refused no message and no command
#   two_kernels_checked I      $work/checked$I.log: console I without the reports of
#                              UML's 40 ms bound on a read (below), which it counts in
#                              $delays and $taken
#   two_kernels_traffic_whole  fails unless traffic.py's TCP bytes (2 MiB) and UDP
#                              datagrams (4 of 1,000 bytes) from guest 0 reached guest 1
#                              whole (their SHA-256 compared)
#   two_kernels_cleanup [TAG]  ends a run early (its logs kept as TAG*.log), for another

work=""
simpids=()
umlpids=()
rcs=()
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d)}

# Stops what runs (by process id), keeps the logs (in $out, their names prefixed with
# $1 when given; the command logs too after a failure) and removes the work directory;
# two_kernels_begin may start again.
two_kernels_cleanup() {
    local rc=$? p f keep="$work/*.log"
    # The models' command logs too when the test fails (the differential check's input).
    ((rc != 0)) && keep="$keep $work/*.trace"
    for p in "${umlpids[@]}" "${simpids[@]}"; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    umlpids=()
    simpids=()
    [ -n "$work" ] || return 0
    for f in $keep; do
        [ -e "$f" ] && cp "$f" "$out/${1:-}$(basename "$f")"
    done
    rm -rf "$work"
    work=""
}

two_kernels_begin() {
    local i ib=()
    # On InfiniBand the SM the model plays sweeps for 3 s (its default, 30 ms, suits cxv's
    # own tests), as a fabric's SM takes seconds. mlx5_ib drops port events until the
    # last stage of its probe (main.c: ib_active), after ib_sa has read the SM's LID
    # (ib_sa_add_one): a port that became ACTIVE within that window left ib_sa with SM
    # LID 0 for good. That window explains what 3 of 21 runs of ipoib_test showed on
    # 2026-11-30 with INIT_HCA to ACTIVE in 330 ms: one kernel's ib0 never got its
    # carrier, and none of its SA requests reached the SA.
    [ "${2:-eth}" = ib ] && ib=(--set sm_sweep_ms=3000)
    work=$(mktemp -d /tmp/cxv-uml.XXXXXX)
    trap two_kernels_cleanup EXIT
    trap 'exit 1' INT TERM HUP
    mkdir "$work/fabric"
    for i in 0 1; do
        "$sim" --socket "$work/$i.sock" --trace-commands --command-log "$work/commands$i.trace" \
            --set port_type="${2:-eth}" --set fabric_dir="$work/fabric" \
            --set fabric="$1" --set fabric_index=$i "${ib[@]}" >"$work/model$i.log" 2>&1 &
        simpids+=($!)
    done
    for i in 0 1; do
        uml_backend_ready "${simpids[$i]}" "$work/model$i.log"
    done
}

two_kernels_run() {
    local i
    for i in 0 1; do
        timeout -k 10 "$1" "$kdir/vmlinux" umid=cxv-$$-$i uml_dir="$work" mem=384M root=/dev/root rootfstype=hostfs \
            rootflags=/ ro init="$init" cxv.cmd="$work/cmd$i.sh" con=null con0=fd:0,fd:1 \
            virtio_uml.device="$work/$i.sock:1234" </dev/null >"$work/console$i.log" 2>&1 &
        umlpids+=($!)
    done
    # A run that prints $two_kernels_abort_on (a transport loss the caller runs again) is
    # ended at once, not at the limit.
    local watcher=""
    if [ -n "${two_kernels_abort_on:-}" ]; then
        (
            while sleep 1; do
                if grep -qE "$two_kernels_abort_on" "$work/console0.log" "$work/console1.log" 2>/dev/null; then
                    kill "${umlpids[@]}" 2>/dev/null
                    break
                fi
            done
        ) &
        watcher=$!
    fi
    rcs=()
    for i in 0 1; do
        wait "${umlpids[$i]}"
        rcs+=($?)
    done
    [ -n "$watcher" ] && { kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; }
    umlpids=()
    for i in 0 1; do
        uml_backend_done "$work/model$i.log"
    done
}

two_kernels_show() {
    local i
    for i in 0 1; do
        echo "--- guest $i's console (last 60 lines)"
        tail -n 60 "$work/console$i.log"
        echo "--- model $i's log (last 15 lines)"
        tail -n 15 "$work/model$i.log"
    done
}

two_kernels_model_clean() {
    local m="$work/model$1.log" refused
    grep -q "cxv-sim-uml: done:.* 0 messages refused" "$m" || { two_kernels_show; fail "model $1 refused virtio_pcidev messages"; }
    refused=$(grep " status=" "$m" | grep -v "status=OK" | sed -E 's/.* slot +[0-9]+ //; s/ delivery=[^ ]*//; s/ [0-9]+us$//' |
        sort -u)
    [ -z "$refused" ] || { two_kernels_show; fail "model $1 refused what Linux sent: $refused"; }
}

two_kernels_traffic_whole() {
    local sent got usent ugot
    sent=$(grep -o "^tcp sent .*" "$work/console0.log")
    got=$(grep -o "^tcp received .*" "$work/console1.log")
    [ "${sent#tcp sent }" = "${got#tcp received }" ] && [[ $sent == *" 2097152 bytes "* ]] ||
        { two_kernels_show; fail "TCP: the sender says '$sent', the receiver '$got'"; }
    usent=$(grep -o "^udp sent .*" "$work/console0.log")
    ugot=$(grep -o "^udp received .*" "$work/console1.log")
    [ "${usent##* sha256 }" = "${ugot##* sha256 }" ] &&
        [[ $ugot == "udp received 4 datagrams of 1000/1000/1000/1000 bytes "* ]] ||
        { two_kernels_show; fail "UDP: the sender says '$usent', the receiver '$ugot'"; }
}

# UML's own limit, not Linux's verdict on the model: a read the backend answered after
# UML's 40 ms (virt-pci.c:160 warns "um virt-pci delay"; on a loaded machine a BAR read
# can wait that long behind the other kernel and model). A read given up so leaves its
# buffer in the command queue; when its answer comes, the queue's callback takes the
# buffer back and warns (virt-pci.c:519: a read's buffer where it expects a posted
# write's): the same late read's second report, at most one per late read. Both are left
# out of the console the test checks (each report up to its end marker), and counted.
delays=0
taken=0
two_kernels_checked() {
    local c="$work/console$1.log" d l late=()
    d=$(grep -c "at arch/um/drivers/virt-pci.c:160 " "$c")
    delays=$((delays + d))
    l=$(grep -c "at arch/um/drivers/virt-pci.c:519 " "$c")
    ((l > 0 && l <= d)) && late=(-e '/at arch\/um\/drivers\/virt-pci.c:519 /,/end trace/d') && taken=$((taken + l))
    sed -e '/at arch\/um\/drivers\/virt-pci.c:160 /,/end trace/d' "${late[@]}" "$c" >"$work/checked$1.log"
}
