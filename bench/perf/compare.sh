#!/usr/bin/env bash
# Runs one sweep twice, with Debian's perftest (ib_send_lat, ib_write_bw, ...) on the
# host's kernel RDMA device and with cxv-perf on cxv, and writes one side-by-side table.
#
#   bench/perf/compare.sh [options]
#     --ib-dev NAME        the kernel RDMA device for perftest (default: the first in
#                          /sys/class/infiniband: a card's mlx5_0, or Soft-RoCE's rxe0)
#     --ib-port N          its port (default 1)
#     --gid-index N        perftest's -x (RoCE; default: none)
#     --cxv-perf PATH      the cxv-perf binary (default: next to this script, or PATH)
#     --cxv-server BDF     the function cxv-perf's server uses
#     --cxv-client BDF     the function its client uses (both on a card bound to vfio-pci)
#     --model              cxv-perf on the model instead: each side under
#                          `cxv-sim run --fabric DIR` (--cxv-sim PATH, default PATH)
#     --perftest-on-model  perftest on the model too, unmodified, under `cxv exec` (cxv's
#                          libibverbs, librdmacm, libmlx5 and libefa; --cxv PATH, default
#                          PATH): no kernel RDMA device needed. Implies --model.
#     --tests "T ..."      default "send_lat write_lat read_lat send_bw write_bw read_bw"
#     --sizes "S ..."      default "2 64 4096 65536"
#     --iters N            default 1000
#     --out FILE           also write the table (Markdown) to FILE
#
# Both harnesses run their server and client on this host, over loopback TCP for the
# exchange (a free port each time). Where the host has no kernel RDMA device there is
# nothing for perftest to run on: the script says so and exits 77 (skipped) without
# running anything. Exit 1 on a failed run, 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ib_dev="" ib_port=1 gid_index="" cxv_perf="" cxv_server="" cxv_client="" model=0 cxv_sim=""
on_model=0 cxv=""
tests="send_lat write_lat read_lat send_bw write_bw read_bw"
sizes="2 64 4096 65536"
iters=1000
out=""

usage() {
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while (($#)); do
    case "$1" in
        --ib-dev) ib_dev=${2:?}; shift 2 ;;
        --ib-port) ib_port=${2:?}; shift 2 ;;
        --gid-index) gid_index=${2:?}; shift 2 ;;
        --cxv-perf) cxv_perf=${2:?}; shift 2 ;;
        --cxv-server) cxv_server=${2:?}; shift 2 ;;
        --cxv-client) cxv_client=${2:?}; shift 2 ;;
        --model) model=1; shift ;;
        --perftest-on-model) on_model=1; model=1; shift ;;
        --cxv) cxv=${2:?}; shift 2 ;;
        --cxv-sim) cxv_sim=${2:?}; shift 2 ;;
        --tests) tests=${2:?}; shift 2 ;;
        --sizes) sizes=${2:?}; shift 2 ;;
        --iters) iters=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "compare: unknown option $1" >&2; usage ;;
    esac
done
for t in $tests; do
    case "$t" in
        send_lat|send_bw|write_lat|write_bw|read_lat|read_bw|atomic_lat|atomic_bw) ;;
        *) echo "compare: unknown test $t" >&2; exit 2 ;;
    esac
done
[[ "$iters" =~ ^[0-9]+$ ]] || { echo "compare: --iters takes a number" >&2; exit 2; }

# The kernel's RDMA devices: without one perftest cannot run, and there is no comparison
# (unless perftest runs on the model too).
if ((on_model)); then
    ib_dev="the model, cxv exec"
    [ -n "$cxv" ] || cxv=$(command -v cxv || true)
    [ -x "$cxv" ] || { echo "compare: --perftest-on-model needs cxv (--cxv PATH)" >&2; exit 1; }
elif [ -z "$ib_dev" ]; then
    for d in /sys/class/infiniband/*; do
        [ -e "$d" ] && { ib_dev=$(basename "$d"); break; }
    done
fi
if ((!on_model)) && { [ -z "$ib_dev" ] || [ ! -e "/sys/class/infiniband/$ib_dev" ]; }; then
    echo "compare: no kernel RDMA device on this host (/sys/class/infiniband${ib_dev:+/$ib_dev} is missing):" \
         "perftest has nothing to run on, so there is nothing to compare. Run it where a card has its kernel" \
         "driver, or add Linux's Soft-RoCE: rdma link add rxe0 type rxe netdev IFACE" >&2
    exit 77
fi
command -v ib_send_lat >/dev/null || { echo "compare: perftest is not installed (apt-get install perftest)" >&2; exit 1; }

if [ -z "$cxv_perf" ]; then
    if [ -x "$here/cxv-perf" ]; then cxv_perf="$here/cxv-perf"; else cxv_perf=$(command -v cxv-perf || true); fi
fi
[ -x "$cxv_perf" ] || { echo "compare: cannot find cxv-perf (--cxv-perf PATH)" >&2; exit 1; }
work=$(mktemp -d /tmp/cxv-compare.XXXXXX)
# The servers still running: each a `timeout` that leads its own process group (timeout(1)
# makes one unless --foreground), so its group holds the server and what it started.
pids=()
stop_server() {  # PID: the group killed, the wrapper reaped, its PID forgotten
    kill -9 -- "-$1" 2>/dev/null || kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    local keep=() p
    for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    pids=("${keep[@]}")
}
cleanup() {
    local p
    for p in "${pids[@]}"; do stop_server "$p"; done
    rm -rf "$work"
}
trap cleanup EXIT
if ((model)); then
    [ -n "$cxv_sim" ] || cxv_sim=$(command -v cxv-sim || true)
    [ -x "$cxv_sim" ] || { echo "compare: --model needs cxv-sim (--cxv-sim PATH)" >&2; exit 1; }
    cxv_server=$("$cxv_sim" list --fabric "$work/fabric" --set fabric_index=0)
    cxv_client=$("$cxv_sim" list --fabric "$work/fabric" --set fabric_index=1)
fi
[ -n "$cxv_server" ] && [ -n "$cxv_client" ] || {
    echo "compare: cxv-perf needs --cxv-server BDF and --cxv-client BDF (or --model)" >&2
    exit 2
}

# A TCP port nothing listens on, below the kernel's ephemeral range: a port in that range
# may be the local end of another program's connection, which no connect() probe sees
# and which makes the server's bind fail (EADDRINUSE).
free_port() {
    local p first=32768 lo=20000
    read -r first _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    ((first - lo >= 1000)) || { lo=1024; ((first - lo >= 1000)) || first=61000; }
    for _ in $(seq 1 50); do
        p=$((lo + RANDOM % (first - lo)))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
    echo 18515
}

# run_pair NAME SERVER-COMMAND... :: CLIENT-COMMAND...: the server in the background, the
# client (retried while the server is not listening yet), both bounded in time; the
# client's output in $work/NAME.out.
run_pair() {
    local name=$1
    shift
    local server=() client=()
    # (Not "--": the commands under cxv-sim run and cxv exec hold that.)
    while [ "$1" != "::" ]; do server+=("$1"); shift; done
    shift
    client=("$@")
    timeout 120 "${server[@]}" >"$work/$name.server" 2>&1 &
    local spid=$!
    pids+=("$spid")
    local ok=1 try rc
    : >"$work/$name.tries"
    for try in $(seq 1 20); do
        sleep 0.5
        rc=0
        timeout 120 "${client[@]}" >"$work/$name.out" 2>&1 || rc=$?
        if ((rc == 0)); then ok=0; break; fi
        # Each failed try's output is kept: the first one says why, the later ones may
        # only say that the server no longer listens.
        { echo "--- client try $try (exit $rc)"; cat "$work/$name.out"; } >>"$work/$name.tries"
        kill -0 "$spid" 2>/dev/null || break
    done
    stop_server "$spid"
    if ((ok)); then
        echo "compare: $name failed:" >&2
        head -n 30 "$work/$name.tries" >&2
        tail -n 5 "$work/$name.server" >&2
    fi
    return $ok
}

# The figure a harness's table gives for one size: latency t_typical and 99%, bandwidth
# BW average (MB/s) and MsgRate (Mpps), as "a b".
figures() {  # FILE TEST SIZE
    awk -v size="$3" -v kind="${2##*_}" '
        $1 == size && $2 ~ /^[0-9]+$/ && NF >= 5 {
            if (kind == "lat") print $5, $8; else print $4, $5
            exit
        }' "$1"
}

table="$work/table.md"
{
    echo "| test | bytes | perftest ($ib_dev) | cxv-perf (${cxv_server}$( ((model)) && echo ", the model")) | cxv / perftest |"
    echo "|---|---:|---:|---:|---:|"
} >"$table"
status=0
for t in $tests; do
    kind=${t##*_}
    for s in $sizes; do
        port=$(free_port)
        perftest_fig="" cxv_fig=""
        if ((on_model)); then
            # Each side its own function on the model's fabric; cxv exec binds the first.
            # -u 18 as cxv-perf has it on the model: a process may wait longer than
            # perftest's default ACK timeout (14: 67 ms) for a core on a loaded machine.
            pt=(ib_"$t" -i "$ib_port" -s "$s" -n "$iters" -p "$port" -F -u 18)
            [ -n "$gid_index" ] && pt+=(-x "$gid_index")
            ps=("$cxv_sim" run --fabric "$work/fabric" --set fabric_index=0 -- "$cxv" exec -- "${pt[@]}")
            pc=("$cxv_sim" run --fabric "$work/fabric" --set fabric_index=1 -- "$cxv" exec -- "${pt[@]}" 127.0.0.1)
        else
            pt=(ib_"$t" -d "$ib_dev" -i "$ib_port" -s "$s" -n "$iters" -p "$port" -F)
            [ -n "$gid_index" ] && pt+=(-x "$gid_index")
            ps=("${pt[@]}")
            pc=("${pt[@]}" 127.0.0.1)
        fi
        if run_pair "perftest-$t-$s" "${ps[@]}" :: "${pc[@]}"; then
            perftest_fig=$(figures "$work/perftest-$t-$s.out" "$t" "$s")
        else
            status=1
        fi
        port=$(free_port)
        cs=("$cxv_perf" "$t" -d "$cxv_server" -s "$s" -n "$iters" -p "$port")
        cc=("$cxv_perf" "$t" -d "$cxv_client" -s "$s" -n "$iters" -p "$port")
        if ((model)); then
            cs=("$cxv_sim" run --fabric "$work/fabric" --set fabric_index=0 -- "${cs[@]}")
            cc=("$cxv_sim" run --fabric "$work/fabric" --set fabric_index=1 -- "${cc[@]}")
        fi
        if run_pair "cxv-$t-$s" "${cs[@]}" :: "${cc[@]}" 127.0.0.1; then
            cxv_fig=$(figures "$work/cxv-$t-$s.out" "$t" "$s")
        else
            status=1
        fi
        read -r p1 p2 <<<"${perftest_fig:-- -}"
        read -r c1 c2 <<<"${cxv_fig:-- -}"
        if [ "$kind" = lat ]; then
            unit="µs typical (99 %)"
            pcell="$p1 ($p2)" ccell="$c1 ($c2)"
        else
            unit="MB/s (Mpps)"
            pcell="$p1 ($p2)" ccell="$c1 ($c2)"
        fi
        ratio=$(awk -v a="$c1" -v b="$p1" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        echo "| $t ($unit) | $s | $pcell | $ccell | $ratio |" >>"$table"
    done
done
if ((on_model)); then
    echo "Both harnesses' figures are the software model's, not a card's (perftest under cxv exec)." >>"$table"
elif ((model)); then
    echo "cxv-perf's figures are the software model's, not a card's." >>"$table"
fi
cat "$table"
[ -n "$out" ] && cp "$table" "$out"
exit $status
