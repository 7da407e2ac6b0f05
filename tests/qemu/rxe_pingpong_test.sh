#!/usr/bin/env bash
# Two QEMU guests running Linux's Soft-RoCE (rdma_rxe) on one datagram cable: the guest
# side of the model's RoCE fabric, proved against itself before a cxv port joins it.
# Guest A (169.254.1.1) serves ibv_rc_pingpong and ibv_ud_pingpong, guest B
# (169.254.1.2) is their client: the out-of-band TCP exchange and the RoCEv2 traffic
# cross the same link. A also answers on a TCP port forwarded from the host's loopback
# over its closed link-local user-mode NIC, the path a host-side peer will use. The
# capture of A's NIC (filter-dump) is kept as the test's output, rxe-link.pcap. Where
# the guests cannot run here (no QEMU, no prepared kernel, no rxe modules, no RDMA tools)
# the test says why and reports itself skipped. Everything after that check is a failure
# when it goes wrong: an initramfs that cannot be built, a guest that does not reach or
# finish its command (its console is shown and kept in the outputs).
#
#   rxe_pingpong_test.sh LAUNCHER   (tests/qemu/rxe_guest.sh)
set -uo pipefail

# skip, fail, require_guest: guest_test_lib.sh, next to the launcher (the
# first argument).
. "$(dirname "${1:?usage: $0 rxe_guest.sh ...}")/guest_test_lib.sh"

launcher=$(realpath "${1:?usage: $0 rxe_guest.sh}")
require_guest "$launcher"
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$(mktemp -d)}
work=${TEST_TMPDIR:-$(mktemp -d)}/rxe
rm -rf "$work"
mkdir -p "$work" "$out"
# The cable's two sockets: a short path (a socket path has at most 107 bytes).
cable=$(mktemp -d /tmp/cxv-rxe.XXXXXX)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$cable"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

"$launcher" initrd "$work/initrd.cpio.gz" >"$work/initrd.log" 2>&1
rc=$?
# The prerequisites were checked: a build that fails (77 included) is a failure.
((rc == 0)) || { cat "$work/initrd.log"; fail "cannot build the guests' initramfs (rxe_guest.sh initrd exited $rc)"; }

# A loopback port for the forward, free when chosen.
port=
for p in $(shuf -i 20000-60000 -n 20); do
    hex=$(printf ':%04X ' "$p")
    grep -q "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { port=$p; break; }
done
[ -n "$port" ] || skip "no free loopback port for the out-of-band forward"

iters=200
marker="oob-$RANDOM$RANDOM"
# UD messages must fit the path MTU (rxe on a 1500-byte Ethernet MTU: 1024).
# A's out-of-band server offers the marker until the host answers: a host connection made
# while A was still booting reaches A late, after the host gave up on it.
# GID 1 is IPv4-mapped (RoCEv2 over IPv4, the peer's MAC by ARP), GID 0 the IPv6
# link-local one (RoCEv2 over IPv6, the peer's MAC by neighbour discovery).
server="ibv_rc_pingpong -d rxe0 -g 1 -n $iters && ibv_ud_pingpong -d rxe0 -g 1 -s 512 -n $iters &&
ibv_rc_pingpong -d rxe0 -g 0 -n $iters || exit 1
for i in \$(seq 20); do
    r=\$(echo $marker | timeout 30 nc -l -p 18600)
    echo \"\$r\"
    [ \"\$r\" = host-got-$marker ] && exit 0
done
exit 1"
client="retry-connect ibv_rc_pingpong -d rxe0 -g 1 -n $iters 169.254.1.1 &&
retry-connect ibv_ud_pingpong -d rxe0 -g 1 -s 512 -n $iters 169.254.1.1 &&
retry-connect ibv_rc_pingpong -d rxe0 -g 0 -n $iters 169.254.1.1"
start=$(date +%s)
"$launcher" run --name A --mac 52:54:00:00:00:01 --ip 169.254.1.1/16 \
    --local "$cable/a" --remote "$cable/b" --pcap "$out/rxe-link.pcap" --forward "$port:18600" \
    --initrd "$work/initrd.cpio.gz" --work "$work" --timeout 150 -- "$server" >"$work/A.out" 2>&1 &
pids+=($!)
"$launcher" run --name B --mac 52:54:00:00:00:02 --ip 169.254.1.2/16 \
    --local "$cable/b" --remote "$cable/a" \
    --initrd "$work/initrd.cpio.gz" --work "$work" --timeout 150 -- "$client" >"$work/B.out" 2>&1 &
pids+=($!)

# Meanwhile the host reads A's line through the forward (refused until A listens).
got=
deadline=$((start + 150))
while [ -z "$got" ] && (($(date +%s) < deadline)) && kill -0 "${pids[0]}" 2>/dev/null; do
    if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
        # The guest's nc stays until the host closes: the line cannot be lost to its
        # poweroff. The host's answer shows in A's output.
        read -r -t 5 got <&3 || got=
        [ -n "$got" ] && echo "host-got-$got" >&3
        exec 3<&- 3>&-
    fi
    [ -n "$got" ] || sleep 1
done
wait "${pids[0]}"
rc_a=$?
wait "${pids[1]}"
rc_b=$?
pids=()
cat "$work/A.out" "$work/B.out"
cp "$work"/A.console "$work"/B.console "$out/" 2>/dev/null
echo "guests A and B: exit $rc_a and $rc_b after $(($(date +%s) - start)) s"

# The guests' prerequisites were checked before they started: any non-zero exit (77
# included) is a failure, the guest's console shown above.
((rc_a == 0)) || fail "guest A (the servers) exited $rc_a"
((rc_b == 0)) || fail "guest B (the clients) exited $rc_b"
# Each side reports its own ping-pongs: RC and UD over IPv4, RC over IPv6.
for g in A B; do
    n=$(grep -c "\[$g\] $iters iters in " "$work/$g.out")
    ((n == 3)) || fail "guest $g reported $n of its 3 ping-pong runs ($iters iterations each)"
done
[ "$got" = "$marker" ] || fail "the host read '$got' through 127.0.0.1:$port, not A's '$marker'"
grep -q "^\[A\] host-got-$marker" "$work/A.out" || fail "guest A did not receive the host's answer"
echo "the host and guest A exchanged a line through 127.0.0.1:$port -> 169.254.77.15:18600"

# The capture holds the RoCEv2 traffic (UDP port 4791); Wireshark decodes all of it.
[ "$(stat -c %s "$out/rxe-link.pcap" 2>/dev/null || echo 0)" -gt 24 ] || fail "the capture is empty"
if command -v tshark >/dev/null; then
    roce=$(tshark -r "$out/rxe-link.pcap" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
    roce6=$(tshark -r "$out/rxe-link.pcap" -Y 'ipv6 && udp.dstport == 4791' 2>/dev/null | wc -l)
    # Linux's rxe sends RoCEv2 over IPv6 with a UDP checksum of 0 (and takes it), which
    # Wireshark calls illegal for UDP over IPv6: not counted as an error here.
    bad=$(tshark -r "$out/rxe-link.pcap" \
        -Y '_ws.malformed || (_ws.expert.severity >= error && !(udp.checksum.zero && udp.dstport == 4791))' \
        2>/dev/null | wc -l)
    # At least a message each way per iteration of each of the three runs, a third of
    # them over IPv6.
    ((roce >= 6 * iters)) || fail "the capture has $roce RoCEv2 frames, fewer than $((6 * iters))"
    ((roce6 >= 2 * iters)) || fail "the capture has $roce6 RoCEv2 frames over IPv6, fewer than $((2 * iters))"
    ((bad == 0)) || fail "Wireshark finds $bad malformed or erroneous frames in the capture"
    echo "capture: $roce RoCEv2 frames ($roce6 over IPv6), none malformed (rxe-link.pcap in the test's outputs)"
else
    echo "capture: $(stat -c %s "$out/rxe-link.pcap") bytes (no tshark to decode it)"
fi
echo "[doctest] test cases: 1 | 1 passed | 0 failed | 0 skipped"
