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
    local i
    work=$(mktemp -d /tmp/cxv-uml.XXXXXX)
    trap two_kernels_cleanup EXIT
    trap 'exit 1' INT TERM HUP
    mkdir "$work/fabric"
    for i in 0 1; do
        "$sim" --socket "$work/$i.sock" --trace-commands --command-log "$work/commands$i.trace" \
            --set port_type="${2:-eth}" --set fabric_dir="$work/fabric" \
            --set fabric="$1" --set fabric_index=$i >"$work/model$i.log" 2>&1 &
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
