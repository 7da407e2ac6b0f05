#!/usr/bin/env bash
# cxv against Linux's Soft-RoCE: `ibv_rc_pingpong` then `ibv_ud_pingpong` servers in a
# QEMU guest whose e1000 is cabled to the model's RoCE port on a fabric directory, and
# rxe_peer (the same clients on cxv's API) on that port; the out-of-band exchange goes
# through a TCP port forwarded from the host's loopback into the guest. The capture of
# the guest's NIC is kept as rxe-cxv.pcap in the test's outputs, with the guest's console.
# Skipped only when the guest's prerequisites are absent (rxe_guest.sh check); once the
# guest is started, a failing cxv side fails the test whatever the guest did, and a guest
# that does not reach or finish its command fails it too.
#
#   rxe_cxv_peer_test.sh LAUNCHER CXV_SIM RXE_PEER
# Environment (defaults in brackets): CXV_RXE_GID_INDEX [0: fe80::EUI-64, which needs the
# model to answer IPv6 neighbour solicitations; 1: ::ffff:169.254.x.y, which needs ARP],
# CXV_RXE_PEER_GID [the GID rxe_peer announces: the device's of that index], CXV_RXE_ITERS [100],
# CXV_RXE_PEER_TIMEOUT [60 s without progress].
set -uo pipefail

# skip, fail, require_guest, guest_test_dirs, free_ports: guest_test_lib.sh, next to the
# launcher (the first argument).
. "$(dirname "${1:?usage: $0 rxe_guest.sh ...}")/guest_test_lib.sh"

launcher=$(realpath "${1:?usage: $0 rxe_guest.sh cxv-sim rxe_peer}")
sim=$(realpath "${2:?}")
peer=$(realpath "${3:?}")
gidx=${CXV_RXE_GID_INDEX:-0}
iters=${CXV_RXE_ITERS:-100}
cxv_mac=02:c5:00:00:00:01  # the model's default (sim/device_config.h)
require_guest "$launcher"
guest_test_dirs rxe-cxv
free_ports 1
port=${ports[0]}

start=$(date +%s)
"$launcher" run --name G --mac 52:54:00:00:00:01 --ip 169.254.100.1/16 \
    --fabric "$fabric" --peer-mac "$cxv_mac" --pcap "$out/rxe-cxv.pcap" --forward "$port:18515" \
    --work "$work" --timeout 150 -- \
    "ibv_rc_pingpong -d rxe0 -g $gidx -n $iters && ibv_ud_pingpong -d rxe0 -g $gidx -s 512 -n $iters" \
    >"$work/G.out" 2>&1 &
gpid=$!
# The peer connects once the guest's server is about to listen (it retries until then).
while ! grep -q 'guest: command starts' "$work/G.console" 2>/dev/null; do
    kill -0 "$gpid" 2>/dev/null || break
    (($(date +%s) - start < 120)) || break
    sleep 0.5
done
peer_args=(0000:c5:00.0 "127.0.0.1:$port" -n "$iters" -g "$gidx" -t "${CXV_RXE_PEER_TIMEOUT:-60}")
[ -n "${CXV_RXE_PEER_GID:-}" ] && peer_args+=(--gid "$CXV_RXE_PEER_GID")
timeout 120 "$sim" run --fabric "$fabric" --set fabric_index=0 --port-type eth -- "$peer" "${peer_args[@]}" >"$work/peer.out" 2>&1
rc_peer=$?
# The UD server listens once the RC run is over: rxe_peer reconnects until it does.
if ((rc_peer == 0)); then
    timeout 120 "$sim" run --fabric "$fabric" --set fabric_index=0 --port-type eth -- "$peer" "${peer_args[@]}" --ud -s 512 \
        >>"$work/peer.out" 2>&1
    rc_peer=$?
fi
# A failed peer leaves the guest's server waiting: end it now rather than at its limit.
((rc_peer == 0)) || kill "$gpid" 2>/dev/null
wait "$gpid"
rc_guest=$?
gpid=
sed 's/^/[cxv] /' "$work/peer.out"
cat "$work/G.out"
cp "$work/G.console" "$out/" 2>/dev/null
echo "guest and cxv: exit $rc_guest and $rc_peer after $(($(date +%s) - start)) s"
# The cxv side first: its failure is the test's whatever the guest did. The guest's
# prerequisites were checked before it started, so any non-zero exit of its is a failure.
((rc_peer == 0)) || fail "rxe_peer (cxv) exited $rc_peer (its log: the [cxv] lines above)"
((rc_guest == 0)) || fail "the guest's pingpong servers exited $rc_guest (the [G] lines above)"
# Each side reports its RC and its UD run.
n=$(grep -c "^$iters iters in " "$work/peer.out")
((n == 2)) || fail "rxe_peer reported $n of its 2 runs of $iters iterations"
n=$(grep -c "^\[G\] $iters iters in " "$work/G.out")
((n == 2)) || fail "the guest reported $n of its 2 runs of $iters iterations"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
