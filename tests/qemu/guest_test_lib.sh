# Sourced by the guest tests (tests/qemu/*_test.sh): reporting in doctest's words, so that
# tools/test counts the one test case (and tells a skip from a pass), and the set-up the
# tests with a guest on a fabric share.
#
# A skip is only for what is absent before the test starts, and says which kind:
#   skip REASON           "SKIPPED: REASON": this machine lacks something (QEMU, the guest
#                         kernel or a module it needs, a tool). tools/test counts it as a
#                         failure under CI=true: CI's machine has all tools/setup installs.
#   skip_in_build REASON  "SKIPPED in this build: REASON": the build configuration itself
#                         cannot run the test (the sanitizer build); allowed everywhere.
# Once a guest was started, whatever goes wrong is a failure (fail), never a skip.
skip() {
    echo "SKIPPED: $*"
    echo "[doctest] test cases: 1 | 0 passed | 0 failed | 1 skipped"
    exit 0
}
skip_in_build() {
    echo "SKIPPED in this build: $*"
    echo "[doctest] test cases: 1 | 0 passed | 0 failed | 1 skipped"
    exit 0
}
fail() {
    echo "FAILED: $*"
    echo "[doctest] test cases: 1 | 0 passed | 1 failed | 0 skipped"
    exit 1
}

# uml_halted_abort RC CONSOLE: true when a User-Mode Linux kernel's exit status RC is 134
# (SIGABRT) and the last lines of its console CONSOLE say "reboot: System halted": vmlinux
# now and then aborts in its host-side exit after the kernel halted (seen in the UML tests
# under load). That is UML's, not Linux's verdict on the model: the tests count it.
uml_halted_abort() {
    (($1 == 134)) && tail -n 3 "$2" | grep -q "^reboot: System halted"
}

# uml_exit_counted RC CONSOLE WHAT: a UML kernel's exit status RC. 0 is a clean exit; UML's
# own abort after the halt (uml_halted_abort) counts one more in $aborts; anything else
# fails the test ("WHAT exited RC"), after the caller's `show`.
uml_exit_counted() {
    (($1 == 0)) && return 0
    if uml_halted_abort "$1" "$2"; then
        aborts=$((aborts + 1))
        return 0
    fi
    show
    fail "$3 exited $1"
}

# sanitizer_build BINARY: true when BINARY is of the ASan+UBSan build. (ldd's whole output
# first: `ldd | grep -q` under pipefail fails whenever grep's early exit cuts ldd short with
# SIGPIPE, and the answer is then wrong.)
sanitizer_build() {
    [[ $(ldd "$1" 2>/dev/null) == *libasan* ]]
}

# uml_backend_done LOG: waits (5 s at most) for the counts a cxv-sim-uml prints in LOG once
# its kernel's socket closed ("cxv-sim-uml: done"): the frontend's going ends the session.
uml_backend_done() {
    local _
    for _ in $(seq 50); do
        grep -q "cxv-sim-uml: done" "$1" && return 0
        sleep 0.1
    done
}

# uml_kernel KERNEL_SCRIPT: sets kdir to the directory of the UML kernel tools/uml/kernel
# built on this machine, or skips (tools/setup builds it).
uml_kernel() {
    kdir=$("$1" --print-dir 2>/dev/null) ||
        skip "no UML kernel built on this machine (tools/setup builds it: tools/uml/kernel)"
    [ -x "$kdir/vmlinux" ] || skip "no vmlinux in $kdir (tools/setup builds it: tools/uml/kernel)"
}

# uml_begin CXV_SIM_UML KERNEL_SCRIPT WHY [PROGRAM:PACKAGE ...]: a UML test's start. With
# WHY (what of the test needs the backend's speed) it is skipped in the sanitizer build:
# UML reads all ones from a read not answered in 40 ms, which a backend built with
# AddressSanitizer, several times slower, misses (mlx5_core's health poll then declares
# the device dead). Then uml_kernel (kdir), and each /usr/bin/PROGRAM must be there (from
# PACKAGE, which tools/setup installs): from here on what goes wrong is a failure.
uml_begin() {
    local sim=$1 kernel=$2 why=$3 p
    shift 3
    if [ -n "$why" ] && sanitizer_build "$sim"; then
        skip_in_build "$why: UML bounds a read at 40 ms, which the sanitizer build can miss (the default build runs this test)"
    fi
    uml_kernel "$kernel"
    for p in "$@"; do
        [ -x "/usr/bin/${p%%:*}" ] || fail "no /usr/bin/${p%%:*} (${p#*:}: tools/setup installs it)"
    done
}

# uml_backend_ready PID LOG: waits (10 s at most) for the cxv-sim-uml of PID to say
# "listening on" in LOG, and fails with its log when it does not. Then it gets a real-time
# priority where the machine allows it (root), else a higher one: UML gives a read's
# answer 40 ms before it reads all ones, which mlx5_core's health poll takes for a dead
# device, and PCIe holds a posted write back while the device is busy where UML drops it
# when its ring of 256 messages is full (a command doorbell lost so was finding 7,
# docs/linux-oracle.md). So the backend must not wait behind other tests' loads for a CPU.
# All of its threads at one priority: the thread that answers UML's messages yields to the
# model thread while it waits for it to take a doorbell, which a higher priority would
# turn into a spin the model thread never gets to end.
uml_backend_ready() {
    local _
    for _ in $(seq 100); do
        grep -q "listening on" "$2" && break
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "listening on" "$2" || fail "cxv-sim-uml did not start: $(cat "$2")"
    chrt -a -r -p 10 "$1" >/dev/null 2>&1 || renice -n -10 -p "$1" >/dev/null 2>&1 || true
}

# require_guest LAUNCHER: skips (with rxe_guest.sh's reason) unless an rxe guest can run
# here: QEMU, busybox, the prepared kernel and its modules, the RDMA tools. Call it before
# anything starts; after it, a guest's non-zero exit (77 included) is a failure.
require_guest() {
    local why rc
    why=$("$1" check 2>&1)
    rc=$?
    ((rc == 0)) && return 0
    ((rc == 77)) && skip "${why#SKIPPED: }"
    fail "$1 check exited $rc: $why"
}

# guest_test_dirs NAME: $out (kept with the test's outputs), $work (fresh scratch) and
# $fabric (a fabric directory under /tmp: UNIX socket paths have at most 107 bytes). On
# exit the guest whose pid is in $gpid is ended and $fabric removed.
guest_test_dirs() {
    out=${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d)}
    work=${TEST_TMPDIR:-$(mktemp -d)}/$1
    rm -rf "$work"
    mkdir -p "$work" "$out"
    fabric=$(mktemp -d /tmp/cxv-fabric.XXXXXX)
    gpid=
    trap guest_test_cleanup EXIT
    trap 'exit 1' INT TERM HUP
}
guest_test_cleanup() {
    [ -n "$gpid" ] && kill "$gpid" 2>/dev/null && wait "$gpid" 2>/dev/null
    host_side_cleanup
    rm -rf "$fabric"
}

# Host and guest side by side: host_side_start LOG CMD... starts a host program (cxv's
# side, under cxv-sim) in the background with its output in LOG; guest_and_host_wait
# waits for the guest (pid $gpid, output in $work/G.out), then up to 10 s for the host
# side, ends it if it is still there, prints both logs (the host's as [cxv] lines), keeps
# the guest's console and sets rc_guest and rc_host. The host side is ended by its pid on
# any exit (host_side_cleanup runs from guest_test_cleanup).
host_pid=
host_log=
host_side_start() {
    host_log=$1
    shift
    "$@" >"$host_log" 2>&1 &
    host_pid=$!
}
host_side_cleanup() { [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null; }
guest_and_host_wait() {
    wait "$gpid"
    rc_guest=$?
    gpid=
    local _
    for _ in $(seq 100); do
        kill -0 "$host_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$host_pid" 2>/dev/null
    wait "$host_pid"
    rc_host=$?
    host_pid=
    sed 's/^/[cxv] /' "$host_log"
    cat "$work/G.out"
    cp "$work/G.console" "$out/" 2>/dev/null
    echo "guest and cxv: exit $rc_guest and $rc_host after $(($(date +%s) - start)) s"
}

# free_ports N: sets ports=(...) to N loopback TCP ports nothing listens on, or skips.
# They lie below the kernel's ephemeral range (a port inside it may become the local end of
# any program's connect() and then the guest's forward fails to bind), and each is kept
# from the other tests by a lock on /tmp/cxv-test-ports/PORT held until this script ends,
# as tests/exec/processes.h's free_port() does.
free_ports() {
    ports=()
    local first=32768 low=20000 dir=/tmp/cxv-test-ports p fd
    read -r first _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    ((first >= low + 1000)) || low=1024
    mkdir -p -m 1777 "$dir" 2>/dev/null
    for p in $(shuf -i "$low-$((first - 1))" -n 200); do
        exec {fd}<>"$dir/$p" 2>/dev/null || continue
        if ! flock -n "$fd" || grep -q "$(printf ':%04X ' "$p")" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
            exec {fd}>&-
            continue
        fi
        ports+=("$p")
        ((${#ports[@]} == $1)) && return 0
    done
    skip "no $1 free loopback ports for the out-of-band exchanges"
}
