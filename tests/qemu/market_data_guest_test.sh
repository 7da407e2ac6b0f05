#!/usr/bin/env bash
# examples/market_data against a feed sent by Linux: a QEMU guest (its e1000 cabled to the
# model's Ethernet port on a fabric directory) sends COUNT UDP datagrams to the multicast
# group 239.1.1.1 port 31337 from an ordinary socket (udp_guest feed); market_data, on the
# model's port, joins the group, steers the port to its queue and must receive every one,
# in sequence, with its hardware timestamp. Its report (rate, gaps, latency histogram) is
# the test's log. Skipped only when the guest's prerequisites are absent.
#
#   market_data_guest_test.sh LAUNCHER CXV_SIM MARKET_DATA UDP_GUEST
set -uo pipefail

. "$(dirname "${1:?usage: $0 rxe_guest.sh cxv-sim market_data udp_guest}")/guest_test_lib.sh"

launcher=$(realpath "$1")
sim=$(realpath "${2:?}")
md=$(realpath "${3:?}")
guest_prog=$(realpath "${4:?}")
count=2000
rate=2000
cxv_mac=02:c5:00:00:00:01  # the model's default (sim/device_config.h)
require_guest "$launcher"
guest_test_dirs market-data

start=$(date +%s)
host_side_start "$work/md.out" timeout 300 "$sim" run --fabric "$fabric" --set fabric_index=0 --port-type eth -- \
    "$md" --device 0000:c5:00.0 --packets "$count" --seconds 200
# The feed starts once market_data's rule is in place.
for _ in $(seq 300); do
    grep -q '^market_data: joined' "$work/md.out" && break
    kill -0 "$host_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q '^market_data: joined' "$work/md.out" || { cat "$work/md.out"; fail "market_data did not start"; }
"$launcher" run --name G --mac 52:54:00:00:00:01 --ip 169.254.100.1/16 \
    --fabric "$fabric" --peer-mac "$cxv_mac" --file "$guest_prog:/bin/udp_guest" --work "$work" --timeout 200 -- \
    "udp_guest feed eth0 239.1.1.1 31337 $count $rate" >"$work/G.out" 2>&1 &
gpid=$!
guest_and_host_wait
((rc_host == 0)) || fail "market_data exited $rc_host (the [cxv] lines above)"
((rc_guest == 0)) || fail "the guest's feed exited $rc_guest (the [G] lines above)"
grep -q "^market_data: $count packets in .* 0 sequence gaps, 0 not the feed's" "$work/md.out" ||
    fail "market_data did not receive the $count datagrams in sequence"
grep -q '^wire-to-application latency' "$work/md.out" || fail "no latency histogram (no hardware timestamps?)"
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
