#!/usr/bin/env bash
# RDMA WRITE, READ and atomics between cxv and Linux's Soft-RoCE, both directions:
# perftest's ib_write_lat, ib_read_lat and ib_atomic_lat in a QEMU guest whose e1000 is
# cabled to the model's RoCE port on a fabric directory, rxe_perf_peer (cxv's API) on
# that port. One boot: the guest first runs the three servers (rxe_perf_peer connects as
# the client through a port forwarded from the host's loopback), then the three clients
# (they reach rxe_perf_peer listening on the host's loopback through QEMU's guestfwd).
# So cxv WRITEs to and is written by rxe (the write ping-pong), READs the guest's memory
# and is READ from, fetches-and-adds on the guest and is added to. rxe_perf_peer checks
# what perftest does not: the bytes each WRITE carries, that every READ returns the same
# bytes, that the fetched values rise by one, that the guest's 200 adds moved our value
# by 200. The capture of the guest's NIC is kept as rxe-perftest.pcap in the outputs,
# with the guest's console. Skipped only when the guest's prerequisites or perftest are
# absent; once the guest is started, a failing cxv side fails the test whatever the guest
# did, and a guest that does not reach or finish its command fails it too.
#
#   rxe_cxv_perftest_test.sh LAUNCHER CXV_SIM RXE_PERF_PEER
# Environment (defaults in brackets): CXV_RXE_GID_INDEX [0], CXV_RXE_ITERS [200],
# CXV_RXE_GUEST_CLIENTS [1].
set -uo pipefail

# skip, fail, require_guest, guest_test_dirs, free_ports: guest_test_lib.sh, next to the
# launcher (the first argument).
. "$(dirname "${1:?usage: $0 rxe_guest.sh ...}")/guest_test_lib.sh"

launcher=$(realpath "${1:?usage: $0 rxe_guest.sh cxv-sim rxe_perf_peer}")
sim=$(realpath "${2:?}")
peer=$(realpath "${3:?}")
for p in ib_write_lat ib_read_lat ib_atomic_lat; do
    command -v $p >/dev/null || skip "$p is not installed (tools/setup installs perftest)"
done
command -v bash >/dev/null || skip "no bash for the guestfwd relay"
gidx=${CXV_RXE_GID_INDEX:-0}
iters=${CXV_RXE_ITERS:-200}
cxv_mac=02:c5:00:00:00:01  # the model's default (sim/device_config.h)
require_guest "$launcher"
guest_test_dirs rxe-perftest
# Three free loopback ports: the guest's servers forwarded here, our servers for its
# clients, the guest's gate (see below).
free_ports 3
to_guest=${ports[0]} to_host=${ports[1]} to_gate=${ports[2]}

# perftest options: the device, the GID, the iterations, an ACK timeout long enough for
# a guest under TCG (18: about 1 s; perftest's default 14 is 67 ms).
opts="-d rxe0 -x $gidx -n $iters -u 18"
# A guest client must not connect before rxe_perf_peer listens (the relay would fail and
# perftest wait for ever): before each client the guest waits on port 18517 for the
# host's word, answering "ready" to it.
# CXV_RXE_GUEST_CLIENTS=0 leaves the guest's clients (the second half) out.
guest_clients=${CXV_RXE_GUEST_CLIENTS:-1}
guest_cmd="ib_write_lat $opts && ib_read_lat $opts && ib_atomic_lat $opts"
if ((guest_clients)); then
    guest_cmd+=$(cat <<EOF
 &&
gate() { echo ready | timeout 90 nc -l -p 18517 >/dev/null; }
gate && ib_write_lat $opts -p 18516 169.254.77.100 &&
gate && ib_read_lat $opts -p 18516 169.254.77.100 &&
gate && ib_atomic_lat $opts -p 18516 169.254.77.100
EOF
)
fi

start=$(date +%s)
"$launcher" run --name G --mac 52:54:00:00:00:01 --ip 169.254.100.1/16 \
    --fabric "$fabric" --peer-mac "$cxv_mac" --pcap "$out/rxe-perftest.pcap" \
    --forward "$to_guest:18515" --forward "$to_gate:18517" --guest-forward "18516:$to_host" \
    --work "$work" --timeout 170 -- "$guest_cmd" >"$work/G.out" 2>&1 &
gpid=$!
while ! grep -q 'guest: command starts' "$work/G.console" 2>/dev/null; do
    kill -0 "$gpid" 2>/dev/null || break
    (($(date +%s) - start < 120)) || break
    sleep 0.5
done
rc_peer=0
run=0
run_peer() {
    run=$((run + 1))
    timeout 100 "$sim" run --fabric "$fabric" --set fabric_index=0 --port-type eth -- \
        "$peer" 0000:c5:00.0 "$@" -n "$iters" -g "$gidx" -t 60 >"$work/peer.$run.out" 2>&1
    local rc=$?
    { echo "== rxe_perf_peer $*"; cat "$work/peer.$run.out"; echo "== exit $rc"; } >>"$work/peer.out"
    return $rc
}
# The guest's gate: connect through the forward until the guest's nc answers "ready".
open_gate() {
    local end=$(($(date +%s) + 60)) line
    while (($(date +%s) < end)); do
        if exec 3<>"/dev/tcp/127.0.0.1/$to_gate" 2>/dev/null; then
            line=
            read -r -t 2 line <&3
            exec 3<&-
            [ "$line" = ready ] && return 0
        fi
        sleep 0.5
    done
    echo "== the guest's gate never opened" >>"$work/peer.out"
    return 1
}
for t in write read atomic; do
    ((rc_peer == 0)) && kill -0 "$gpid" 2>/dev/null || break
    run_peer $t client "127.0.0.1:$to_guest" || rc_peer=$?
done
for t in write read atomic; do
    ((guest_clients && rc_peer == 0)) && kill -0 "$gpid" 2>/dev/null || break
    next=$((run + 1))
    run_peer $t server "127.0.0.1:$to_host" &
    ppid=$!
    # Our server listens (its first line) before the guest's client is let go.
    for _ in $(seq 300); do
        grep -q '^listening on' "$work/peer.$next.out" 2>/dev/null && break
        sleep 0.1
    done
    open_gate || rc_peer=1
    wait $ppid || rc_peer=$?
    run=$next
done
# A failed peer leaves the guest waiting: end it now rather than at its limit.
((rc_peer == 0)) || kill "$gpid" 2>/dev/null
wait "$gpid"
rc_guest=$?
gpid=
sed 's/^/[cxv] /' "$work/peer.out" 2>/dev/null
cat "$work/G.out"
cp "$work/G.console" "$out/" 2>/dev/null
echo "guest and cxv: exit $rc_guest and $rc_peer after $(($(date +%s) - start)) s"
# The cxv side first: its failure is the test's whatever the guest did. The guest's
# prerequisites were checked before it started, so any non-zero exit of its is a failure.
((rc_peer == 0)) || fail "rxe_perf_peer (cxv) exited $rc_peer (its log: the [cxv] lines above)"
((rc_guest == 0)) || fail "the guest's perftest runs exited $rc_guest (the [G] lines above)"
runs=$((guest_clients ? 6 : 3))
n=$(grep -c '^data checked: ok$' "$work/peer.out")
((n == runs)) || fail "rxe_perf_peer checked the data of $n of its $runs runs"
# A title per run; a result line from the write server and each guest client.
n=$(grep -c 'Latency Test' "$work/G.out")
((n == runs)) || fail "the guest started $n of its $runs perftest runs"
results=$((guest_clients ? 4 : 1))
# perftest prints "inf" for the times when it cannot calibrate the guest's CPU clock
# ("Correlation coefficient r^2 ... < 0.9", on a loaded host); the row still says that the
# run completed its iterations, and the data were checked above.
n=$(grep -cE "^\[G\] +[0-9]+ +$iters +([0-9.]+|inf) " "$work/G.out")
((n == results)) || fail "the guest reported $n of its $results latency results"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
